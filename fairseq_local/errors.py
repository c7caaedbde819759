"""One-line errors for the command line.

Every error the plugin raises for a bad option, input or output derives from
:class:`OneLineError` (defined in :mod:`fairseq_local_data.errors`, so that the
data tools, which run without fairseq, raise it too).  Most are also
:class:`ValueError` subclasses for library callers.  When one reaches the top
of a program uncaught, it is printed as a single ``error:`` line instead of a
traceback and the process exits with status 1: ``fairseq-local`` catches it
(:mod:`fairseq_local_cli.main`), and in fairseq's own commands
(``fairseq-train --user-dir fairseq_local``) the hook of
:func:`install_excepthook` prints it.
"""

import os
import sys
from typing import Optional

from fairseq_local_data.errors import OneLineError  # re-exported: the plugin's errors derive from it


class OptionError(OneLineError, ValueError):
    """A bad value of one of the plugin's command-line options."""


class InputError(OneLineError, ValueError):
    """A bad input file or value (a truncated checkpoint, a malformed table,
    a checkpoint of another model), reported in one line."""


class ResumeError(InputError):
    """A checkpoint loaded to continue training a model other than the one
    it was saved from (another arch, layout, mask mode or mask option)."""


# fairseq's one bad-input error that the plugin's options cause (--dam-max-len
# lowers the encoder's max_positions), raised as a bare Exception: one line too.
FAIRSEQ_INPUT_ERRORS = ("Size of sample #",)


def one_line_error_in(exc: Optional[BaseException]) -> Optional[BaseException]:
    """``exc`` if it is a :class:`OneLineError` (or fairseq's "Size of sample
    #" error), else, when ``exc`` is a bare ``Exception`` (fairseq re-raises
    checkpoint load errors as one), the first such error it was raised from or
    while handling; else None."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, OneLineError) or (type(exc) is Exception and str(exc).startswith(FAIRSEQ_INPUT_ERRORS)):
            return exc
        if type(exc) is not Exception:  # only fairseq's bare re-raise is looked behind, never a real error
            return None
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


# The largest file each reader takes (a FIFO or /dev/zero is never read: not a regular file).
SIZE_CAPS = {"checkpoint": 1 << 40, "attention dump": 1 << 36, "mask file": 1 << 30}


def irregular_file(path: "str | os.PathLike[str]", what: str) -> Optional[str]:
    """Why ``path`` cannot be read as a ``what`` (a key of :data:`SIZE_CAPS`):
    not a regular file (a FIFO, a device), or larger than any such file; None
    if it is fine, missing or a folder (the callers name those themselves)."""
    import stat

    try:
        st = os.stat(path)
    except OSError:
        return None
    if stat.S_ISDIR(st.st_mode):
        return None
    if not stat.S_ISREG(st.st_mode):
        kind = "a FIFO" if stat.S_ISFIFO(st.st_mode) else "a device" if stat.S_ISCHR(st.st_mode) or \
            stat.S_ISBLK(st.st_mode) else "a socket" if stat.S_ISSOCK(st.st_mode) else "not a file"
        return f"'{path}' is {kind}, not a regular file: a {what} is read only from a file"
    if st.st_size > SIZE_CAPS[what]:
        return f"'{path}' holds {st.st_size:,} bytes, more than any {what} ({SIZE_CAPS[what]:,})"
    return None


_WARNED = set()


def warn_once(message: str) -> None:
    """Print ``warning: MESSAGE`` to stderr, once per process."""
    if message not in _WARNED:
        _WARNED.add(message)
        print(f"warning: {message}", file=sys.stderr, flush=True)


def install_excepthook() -> None:
    """Idempotently wrap ``sys.excepthook``: an uncaught error found by
    :func:`one_line_error_in` is printed as ``error: MESSAGE`` and, in a
    program, ends the process with status 1; every other exception goes to
    the previous hook unchanged."""
    previous = sys.excepthook
    if getattr(previous, "_fairseq_local", False):
        return

    def hook(exc_type, exc, tb):
        found = one_line_error_in(exc)
        if found is None:
            previous(exc_type, exc, tb)
            return
        print(f"error: {found}", file=sys.stderr)
        if hasattr(sys, "ps1"):  # an interactive session goes on
            return
        sys.stdout.flush()
        sys.stderr.flush()
        # Not sys.exit: fairseq-train's data buffer thread (--data-buffer-size,
        # a daemon thread, default on) may be inside torch when the main thread
        # fails, and the interpreter's shutdown then aborts the process
        # ("terminate called without an active exception", status 134).
        os._exit(1)

    hook._fairseq_local = True  # type: ignore[attr-defined]
    sys.excepthook = hook
