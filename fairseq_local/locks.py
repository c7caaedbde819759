"""One job per folder: an advisory lock on an output folder.

A job that writes a folder (a reproduction's ``--runs``) holds
``FOLDER/.lock`` with :func:`fcntl.flock` while it runs; a second job into
the same folder is refused in one line that names the holder's process id.
The kernel releases a flock when its process ends, however it ends, so a
lock file left by a killed job is taken over, and the take-over is reported.
The file stays in place (removing it would let two jobs lock two different
files of one name); an empty file means the last holder ended cleanly.
"""

import fcntl
import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from .errors import InputError

LOCK_NAME = ".lock"


def _holder(text: str) -> str:
    """"process 123 (reproduce)" from the lock file's "123 reproduce"."""
    pid, _, what = text.strip().partition(" ")
    return f"process {pid} ({what})" if pid.isdigit() and what else f"process {pid}" if pid.isdigit() else "a process"


@contextmanager
def folder_lock(folder: Path, what: str) -> Iterator[None]:
    """Hold ``folder/.lock`` for the block (the folder is created).

    Raises InputError at once if another process holds it ("FOLDER is being
    written by process 123 (reproduce): ..."); notes on stderr when the
    file names a process that ended without releasing it."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / LOCK_NAME
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            held = os.pread(fd, 200, 0).decode("utf-8", "replace")
            raise InputError(f"{folder} is being written by {_holder(held)}: wait for it to end, or stop it, "
                             f"before running another {what} there") from None
        before = os.pread(fd, 200, 0).decode("utf-8", "replace")
        if before.strip():
            sys.stderr.write(f"note: {folder} was locked by {_holder(before)}, which has ended without "
                             f"releasing it; taking the lock over\n")
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()} {what}\n".encode(), 0)
        try:
            yield
        finally:
            os.ftruncate(fd, 0)  # a clean end: nothing to take over
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
