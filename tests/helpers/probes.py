"""Checks shared by the bad-input probes: one ``error:`` line, the exit
status, and files left byte for byte as they were."""

import hashlib
import re
import subprocess
from pathlib import Path
from typing import Dict, Iterable, Optional, Sequence, Union

from fairseq_local_cli.main import main

PathLike = Union[str, Path]
# Lines that fairseq and its dependencies log on import, before any of ours.
NOISE = re.compile(r"^(INFO:fairseq\.|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \| INFO \| fairseq\.)")


def error_lines(stderr: str):
    """The lines of ``stderr`` that are not fairseq's import-time log lines."""
    return [line for line in stderr.splitlines() if line.strip() and not NOISE.match(line)]


def one_line_error(stderr: str, *needles: str) -> str:
    """The single ``error: ...`` line of ``stderr`` (asserting there is
    exactly one line and no traceback), which must contain every needle."""
    lines = error_lines(stderr)
    assert len(lines) == 1 and lines[0].startswith("error: "), f"expected one error line, got:\n{stderr}"
    assert "Traceback" not in stderr, stderr
    for needle in needles:
        assert needle in lines[0], f"{needle!r} not in {lines[0]!r}"
    return lines[0]


def digest(paths: Iterable[PathLike]) -> Dict[str, Optional[str]]:
    """{path: sha256 of its bytes, or None if it does not exist}; folders are
    walked (every file under them)."""
    out: Dict[str, Optional[str]] = {}
    for p in map(Path, paths):
        files = sorted(f for f in p.rglob("*") if f.is_file()) if p.is_dir() else [p]
        for f in files:
            out[str(f)] = hashlib.sha256(f.read_bytes()).hexdigest() if f.exists() else None
    return out


def run_command(capsys, argv: Sequence[str]):
    """(exit status, stdout, stderr) of ``fairseq-local ARGV`` run in this process."""
    try:
        status = main(list(map(str, argv)))
    except SystemExit as e:
        status = e.code if isinstance(e.code, int) else 1
        if isinstance(e.code, str):
            import sys
            sys.stderr.write(e.code + "\n")
    out = capsys.readouterr()
    return status, out.out, out.err


def run_script(cmd: Sequence[PathLike], **kwargs) -> subprocess.CompletedProcess:
    """A script or console command in a subprocess, output captured as text."""
    return subprocess.run(list(map(str, cmd)), capture_output=True, text=True, **kwargs)


# Output paths that cannot be written, for every command: (name, path given
# a tmp folder that holds a regular file 'afile').
def bad_outputs(tmp: Path, name: str):
    """{case: path}: under /proc, an existing folder, under a regular file,
    in a missing folder."""
    (tmp / "afile").write_text("x")
    (tmp / "afolder").mkdir(exist_ok=True)
    return {"proc": Path("/proc/fairseq-local-x") / name, "folder": tmp / "afolder",
            "under_file": tmp / "afile" / name, "missing_parent": tmp / "no" / "such" / name}
