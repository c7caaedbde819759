"""``python -m fairseq_local_data.databin DIR...``: check a fairseq data
folder before fairseq reads it.

fairseq reads a broken binarised folder with tracebacks (``ValueError: offset
must be non-negative``, ``'MMapIndexedDataset' object has no attribute
'_bin_buffer_mmap'``, ``Incorrect encoding detected``).  This reads only the
headers: each mmap ``.idx`` (fairseq's ``MMIDIDX`` format: version, dtype,
the count of sentences, then their sizes and byte offsets) against its own
length and its ``.bin``'s, and each ``dict*.txt``
(``dict.txt``, ``dict.LANG.txt``) line by line ("TOKEN COUNT
[#fairseq:overwrite]", UTF-8).  A broken file is
one ``error:`` line naming it and what to re-run.  Folders under DIR one level
deep (a GLUE task's ``input0/``, ``label/``) are checked too, and ``A:B``
names shards.
"""

import argparse
import struct
import sys
from pathlib import Path
from typing import Iterator, List, Optional

from .errors import OneLineError

MAGIC = b"MMIDIDX\x00\x00"
HEADER = len(MAGIC) + 8 + 1 + 8  # magic, version <Q, dtype code <B, sentences <Q
ITEMSIZE = {1: 1, 2: 1, 3: 2, 4: 4, 5: 8, 6: 8, 7: 8, 8: 2, 9: 4, 10: 8}  # fairseq's indexed_dataset dtype codes


class DataError(OneLineError, ValueError):
    """A broken file of a fairseq data folder."""


def _broken(path: Path, why: str) -> DataError:
    return DataError(f"'{path}' is {why}: re-run the step that wrote '{path.parent}' (its prepare or binarize "
                     "script)")


def check_index(idx: Path) -> int:
    """Check ``idx`` and its ``.bin``; returns the number of sentences."""
    head = b""
    if idx.is_file():
        with open(idx, "rb") as f:
            head = f.read(HEADER)  # the header only: an index holds 12 bytes a sentence
    if len(head) < HEADER or not head.startswith(MAGIC):
        if head[:8] == b"TNTIDX\x00\x00":  # fairseq's legacy "cached"/"lazy" formats: not read here
            return 0
        raise _broken(idx, "not a fairseq mmap index (empty, truncated or another file)")
    version, code, n = struct.unpack("<QBQ", head[len(MAGIC):HEADER])
    if version != 1 or code not in ITEMSIZE:
        raise _broken(idx, f"an index of an unknown version or dtype ({version}, {code})")
    size = idx.stat().st_size
    expected = HEADER + 4 * n + 8 * n  # int32 sizes, int64 byte offsets
    if size != expected:
        raise _broken(idx, f"{'truncated' if size < expected else 'longer than its header says'} ({size:,} bytes; "
                           f"its header describes {expected:,})")
    bin_path = idx.with_suffix(".bin")
    if not bin_path.is_file():
        raise _broken(idx, f"an index without its data file '{bin_path.name}'")
    if n:
        with open(idx, "rb") as f:
            f.seek(HEADER + 4 * (n - 1))
            last_size = struct.unpack("<i", f.read(4))[0]
            f.seek(HEADER + 4 * n + 8 * (n - 1))
            last_pointer = struct.unpack("<q", f.read(8))[0]
        need = last_pointer + last_size * ITEMSIZE[code]
        if last_size < 0 or last_pointer < 0 or bin_path.stat().st_size < need:
            raise _broken(bin_path, f"shorter than its index says ({bin_path.stat().st_size:,} bytes of {need:,})")
    return n


def check_dictionary(path: Path) -> int:
    """Check a fairseq dictionary file; returns its number of entries."""
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as e:
        raise _broken(path, f"not UTF-8 (byte {e.start})") from None
    lines = text.splitlines()
    for k, line in enumerate(lines, 1):
        parts = line.rstrip().rsplit(" ", 2)
        if parts[-1] == "#fairseq:overwrite":
            parts = parts[:-1]
        count = parts[-1] if len(parts) >= 2 else ""
        if not count.lstrip("-").isdigit():
            raise _broken(path, f"not a fairseq dictionary (line {k}: {line[:40]!r}, expected 'TOKEN COUNT')")
    return len(lines)


def data_files(folder: Path) -> Iterator[Path]:
    """Every ``.idx``, ``dict.txt`` and ``dict.*.txt`` in ``folder`` and its sub-folders."""
    for d in [folder, *sorted(p for p in folder.iterdir() if p.is_dir())]:
        yield from sorted(d.glob("*.idx"))
        yield from sorted({*d.glob("dict.txt"), *d.glob("dict.*.txt")})


def check_folder(data: str) -> int:
    """Check every shard of ``data`` ("A:B"); returns the files checked."""
    checked = 0
    for shard in data.split(":"):
        folder = Path(shard)
        if not folder.is_dir():
            continue  # fairseq names a missing folder itself
        for path in data_files(folder):
            check_index(path) if path.suffix == ".idx" else check_dictionary(path)
            checked += 1
    return checked


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m fairseq_local_data.databin",
                                description="Check fairseq data folders (mmap .idx/.bin pairs, dictionaries) before "
                                            "fairseq reads them; one error line for a broken file.")
    p.add_argument("data", nargs="+", metavar="DIR", help="a data folder, or A:B shards")
    p.add_argument("--quiet", action="store_true", help="print nothing when every file is whole")
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    try:
        checked = sum(check_folder(data) for data in args.data)
    except DataError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    if not args.quiet:
        print(f"{checked} files checked")
    return 0


if __name__ == "__main__":
    sys.exit(main())
