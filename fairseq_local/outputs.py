"""Writing a command's output files without losing a user's files.

The rules every ``fairseq-local`` command and script follows:

* an output is never one of the command's own inputs;
* an existing file is replaced only if it is a previous output of the same
  command (a mask file by ``export``, a dump by ``attention dump``, ...), or
  with ``--force``; a fairseq checkpoint is never replaced by anything but a
  checkpoint;
* the folder an output goes into must exist and be writable, and every output
  of a command is checked (:func:`check_outputs`) before any is written;
* each file is written to a temporary file in the same folder and renamed into
  place (:func:`atomic_path`), so an interrupted or failed command leaves the
  old file as it was; a symbolic link is written through (its target is
  replaced, the link stays);
* a file found at an output path is judged (a checkpoint? a previous
  output?) without unpickling it (:func:`pickled_strings`); a legacy
  (non-zip) torch file counts as a checkpoint;
* the rename refuses if the output changed since it was checked (another
  job wrote the same path in between), unless ``--force`` was given:
  :func:`check_outputs` notes what each path held, :func:`atomic_path`
  compares.

Violations are :class:`OutputError`, printed in one line by the commands.
"""

import contextlib
import io
import json
import os
import pickletools
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, Optional, Sequence, Set, Union

from .errors import InputError, OneLineError

PathLike = Union[str, "os.PathLike[str]"]


class OutputError(OneLineError, ValueError):
    """An output that would destroy a file, or that cannot be written."""


# What each output path held when check_outputs checked it, by real path: None
# (absent) or (inode, size, mtime_ns).  Paths checked with force are not held.
_CHECKED: dict = {}


def _state(path: Path) -> Optional[tuple]:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


def _changed(path: Path) -> OutputError:
    return OutputError(f"'{path}' changed since this command checked it (another job writing the same file?): "
                       f"left as it is; pass --force to replace it anyway, or choose another output file")


@dataclass(frozen=True)
class Output:
    """One output file of a command.

    Args:
        path: where it goes.
        what: what it is, for messages ("mask file", "CSV table").
        ours: whether an existing file at ``path`` is a previous output of the
            same command (then it is replaced without ``--force``).
        checkpoint: the output is a fairseq checkpoint (it may replace one
            with ``--force``; nothing else ever does).
    """

    path: PathLike
    what: str
    ours: Callable[[Path], bool] = lambda path: False
    checkpoint: bool = False


def _same(a: Path, b: Path) -> bool:
    try:
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except OSError:
        return False


def pickled_strings(path: PathLike) -> Optional[Set[str]]:
    """The strings in the pickle of torch (zip) file ``path``: its dict keys,
    string values and class names, read with :func:`pickletools.genops`
    without unpickling anything (no code of the file runs); None if it is not
    a torch zip file (or its pickle is missing or truncated)."""
    try:
        with zipfile.ZipFile(path) as z:
            name = next(n for n in z.namelist() if n == "data.pkl" or n.endswith("/data.pkl"))
            data = z.read(name)
        return {arg for _, arg, _ in pickletools.genops(data) if isinstance(arg, str)}
    except Exception:  # not a zip, no pickle, a truncated pickle
        return None


# The first object of a legacy (non-zip, torch < 1.6 or _use_new_zipfile_serialization=False)
# torch file: torch.serialization.MAGIC_NUMBER, pickled.
_LEGACY_MAGIC = 0x1950a86a20f9469cfc6c


def is_legacy_torch(path: PathLike) -> bool:
    """Whether ``path`` is a legacy (non-zip) torch file: it starts with the
    pickled magic number of ``torch.save``; read by opcodes, nothing unpickled."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
        for op, arg, _ in pickletools.genops(io.BytesIO(head)):
            if op.name in ("PROTO", "FRAME"):
                continue
            return arg == _LEGACY_MAGIC
    except Exception:  # unreadable, not a pickle
        pass
    return False


def is_checkpoint(path: PathLike) -> bool:
    """Whether ``path`` may be a fairseq checkpoint, judged without
    unpickling it (:func:`pickled_strings`): a torch zip file whose pickle
    names ``model`` and one of ``cfg``, ``args``, ``optimizer_history``; or,
    conservatively, any legacy (non-zip) torch file, which cannot be read
    without unpickling it."""
    strings = pickled_strings(path)
    if strings is None:
        return is_legacy_torch(path)
    return "model" in strings and bool(strings & {"cfg", "args", "optimizer_history"})


def torch_format(marker: str) -> Callable[[Path], bool]:
    """``ours`` for torch files that hold a dict with ``format == marker``,
    judged by :func:`pickled_strings` (nothing unpickled): the pickle holds
    both the string ``format`` and ``marker``."""
    def ours(path: Path) -> bool:
        strings = pickled_strings(path)
        return strings is not None and "format" in strings and marker in strings
    return ours


def checkpoint_marked(marker: str) -> Callable[[Path], bool]:
    """``ours`` for fairseq checkpoints that a command marks with the
    top-level key ``marker`` (``averaged_from``, ``converted_from``), judged
    by :func:`pickled_strings` (nothing unpickled): the pickle holds both the
    string ``model`` and ``marker``."""
    def ours(path: Path) -> bool:
        strings = pickled_strings(path)
        return strings is not None and "model" in strings and marker in strings
    return ours


def text_starting(*prefixes: str) -> Callable[[Path], bool]:
    """``ours`` for UTF-8 text files whose first line starts with one of ``prefixes``."""
    def ours(path: Path) -> bool:
        try:
            with open(path, encoding="utf-8") as f:
                first = f.readline()
        except (OSError, UnicodeDecodeError):
            return False
        return any(first.startswith(p) for p in prefixes)
    return ours


def is_png(path: Path) -> bool:
    """``ours`` for figures: a PNG file."""
    try:
        with open(path, "rb") as f:
            return f.read(8) == b"\x89PNG\r\n\x1a\n"
    except OSError:
        return False


def check_folder(folder: Path, what: str) -> None:
    """:class:`OutputError` unless files can be created in ``folder`` (tried
    with a temporary file, so it also holds for root and special file systems)."""
    if not folder.exists():
        raise OutputError(f"cannot write the {what}: folder '{folder}' does not exist")
    if not folder.is_dir():
        raise OutputError(f"cannot write the {what}: '{folder}' is not a folder")
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".fairseq-local-probe-"):
            pass
    except OSError as e:
        raise OutputError(f"cannot write the {what} in folder '{folder}': {e.strerror or e}") from None


def check_outputs(outputs: Sequence[Output], inputs: Sequence[PathLike] = (), force: bool = False) -> None:
    """Check every output before anything is written (see the module
    docstring); raises :class:`OutputError` naming the first problem."""
    seen = {}
    for out in outputs:
        path = Path(out.path)
        key = os.path.realpath(path)
        if key in seen:
            raise OutputError(f"the {out.what} and the {seen[key]} would both be written to '{path}'")
        seen[key] = out.what
        for given in inputs:
            if Path(given) == path or _same(Path(given), path):
                raise OutputError(f"the {out.what} '{path}' is an input of this command: "
                                  f"choose another output file")
        if path.is_dir():
            raise OutputError(f"cannot write the {out.what}: '{path}' is a folder")
        if path.exists() and not path.is_file():  # a FIFO or a device: never opened, never replaced
            raise OutputError(f"cannot write the {out.what}: '{path}' is not a regular file")
        check_folder(path.parent if str(path.parent) else Path("."), out.what)
        if path.exists() and not out.ours(path):
            if is_checkpoint(path) and not out.checkpoint:
                raise OutputError(f"'{path}' is a fairseq checkpoint: it is never replaced by a {out.what} "
                                  f"(choose another output file)")
            if not force:
                raise OutputError(f"'{path}' exists and is not a {out.what} written by this command: "
                                  f"pass --force to replace it, or choose another output file")
        if force:
            _CHECKED.pop(os.path.realpath(path), None)
        else:
            _CHECKED[os.path.realpath(path)] = _state(path)


def no_space(e: BaseException) -> Optional[str]:
    """Why ``e`` means the disk (or quota) is full, or None: errno ENOSPC or
    EDQUOT, or torch's zip writer failing mid-file ("unexpected pos")."""
    import errno

    if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
        return e.strerror or "no space left on the device"
    text = str(e)
    if isinstance(e, RuntimeError) and ("unexpected pos" in text or "No space left" in text or
                                        "file write failed" in text):
        return "no space left on the device (the write stopped part way)"
    return None


def full_disk(path: PathLike, e: BaseException) -> "OutputError | None":
    """The one-line error for a write of ``path`` that ``e`` stopped on a full disk, or None."""
    reason = no_space(e)
    return None if reason is None else OutputError(
        f"cannot write '{path}': {reason}; nothing was written and the old file, if any, is as it was "
        "(free space and re-run)")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_path(path: PathLike) -> Iterator[Path]:
    """A temporary path next to ``path`` (same suffix) that is renamed to
    ``path`` when the block succeeds, and removed when it fails.

    A symbolic link is written through: the temporary file goes next to the
    link's target and replaces the target, so the link stays.  The new file
    gets the mode of the file it replaces (else what ``open()`` would give),
    set after the block's writes, so a read-only old file does not make them
    fail."""
    path = Path(os.path.realpath(path))
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=f".tmp{path.suffix}")
    os.close(fd)
    try:
        yield Path(tmp)
        # the mode of the file it replaces, else what open() would give (mkstemp's is 0600)
        mode = path.stat().st_mode & 0o7777 if path.exists() else 0o666 & ~_umask()
        os.chmod(tmp, mode)
        key = str(path)
        if key in _CHECKED and _CHECKED[key] is None:  # was absent: create it only if it still is
            try:
                os.link(tmp, path)
                os.unlink(tmp)
            except FileExistsError:
                raise _changed(path) from None
            except OSError:  # no hard links on this file system: check, then rename
                if path.exists():
                    raise _changed(path) from None
                os.replace(tmp, path)
        elif key in _CHECKED and _state(path) != _CHECKED[key]:
            raise _changed(path)
        else:
            os.replace(tmp, path)
        _CHECKED.pop(key, None)  # written: a later write of the same path is this command's own
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        full = full_disk(path, e)
        if full is not None:
            raise full from None
        raise


def write_text(path: PathLike, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def save_torch(obj: Any, path: PathLike) -> None:
    """``torch.save`` ``obj`` to ``path`` atomically."""
    import torch

    with atomic_path(path) as tmp:
        torch.save(obj, tmp)


def figure_format(path: PathLike, what: str = "figure") -> str:
    """The matplotlib format of a figure written to ``path``: its suffix
    (``png`` without one); :class:`OutputError` (one line) for a format that
    matplotlib cannot write, checked before anything is written."""
    fmt = Path(path).suffix.lstrip(".").lower() or "png"
    from matplotlib.figure import Figure

    supported = Figure().canvas.get_supported_filetypes()
    if fmt not in supported:
        raise OutputError(f"cannot write the {what} '{path}': unknown figure format '.{fmt}' "
                          f"(use one of {', '.join('.' + f for f in sorted(supported))})")
    return fmt


def save_figure(fig: Any, path: PathLike, **kwargs: Any) -> None:
    """``fig.savefig`` to ``path`` atomically (the format from its suffix,
    :func:`figure_format`)."""
    fmt = figure_format(path)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format=fmt, **kwargs)


def add_force_option(parser: Any) -> None:
    """Add ``--force`` (replace existing files that are not this command's outputs)."""
    parser.add_argument("--force", action="store_true",
                        help="replace existing output files that this command did not write "
                             "(never a checkpoint with a table, mask file or dump)")


def output_error_line(e: BaseException) -> Optional[str]:
    """The one-line message of an :class:`OutputError` or an :class:`OSError`
    on a file, else None."""
    if isinstance(e, OutputError):
        return str(e)
    if isinstance(e, OSError):
        name = f" '{e.filename}'" if e.filename else ""
        return f"cannot access{name}: {e.strerror or e}"
    return None


__all__ = ["Output", "OutputError", "add_force_option", "atomic_path", "check_folder", "check_outputs",
           "checkpoint_marked", "figure_format", "is_checkpoint", "is_legacy_torch", "is_png", "output_error_line",
           "pickled_strings", "save_figure", "save_torch", "text_starting", "torch_format", "write_text"]


def read_json_object(path: Path, what: str) -> Dict[str, Any]:
    """The JSON object (dict) in ``path``, or an :class:`InputError` naming
    the file and what is wrong with it (not UTF-8, not JSON, not an object)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"'{path}' is not a {what}: not UTF-8 text (byte {e.start})") from None
    try:
        obj = json.loads(text)
    except ValueError as e:
        raise InputError(f"'{path}' is not a {what}: malformed JSON ({str(e).splitlines()[0]})") from None
    if not isinstance(obj, dict):
        raise InputError(f"'{path}' is not a {what}: a JSON {type(obj).__name__}, not an object")
    return obj
