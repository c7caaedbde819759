"""Stand-ins for the scripts' job tests (locks, progress, interruption): a
data folder as far as train.sh and generate.sh look before fairseq, a
checkpoint as far as they inspect it, and fake fairseq and sacrebleu
commands first on PATH."""

import os
import struct
import subprocess
from pathlib import Path

from helpers import ENV, ROOT


def data_folder(tmp_path: Path) -> Path:
    """Dictionaries and an index of no sentence (fairseq's mmap header) with its empty data file."""
    d = tmp_path / "data"
    d.mkdir()
    for name in ("dict.src.txt", "dict.tgt.txt"):
        (d / name).write_text("a 1\n")
    (d / "test.src-tgt.src.idx").write_bytes(b"MMIDIDX\x00\x00" + struct.pack("<QBQ", 1, 4, 0))
    (d / "test.src-tgt.src.bin").write_bytes(b"")
    return d


def fake_checkpoint(path: Path) -> Path:
    import torch

    torch.save({"cfg": {"model": {"_name": "transformer_local_baseline"}, "task": {"_name": "translation"}},
                "model": {}}, path)
    return path


def script(name, *args, env=None) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", f"scripts/{name}", *map(str, args)], cwd=ROOT, capture_output=True, text=True,
                          env=env or ENV)


# fairseq-train's train_inner lines, one per update (a --delay between them); it writes
# SAVE/checkpoint_last.pt after update --checkpoint-at, and counts its starts in SAVE/starts
FAKE_TRAIN = """#!/usr/bin/env python3
import sys, time
a = sys.argv
arg = lambda name, default: a[a.index(name) + 1] if name in a else default
save, n = arg("--save-dir", "."), int(arg("--max-update", "10"))
open(save + "/starts", "a").write("start\\n")
for u in range(1, n + 1):
    time.sleep(float(arg("--delay", "0")))
    print(f"2026-01-01 00:00:00 | INFO | train_inner | epoch 001:  {u} / {n} loss=1.0, num_updates={u}", flush=True)
    if u == int(arg("--checkpoint-at", "0")):
        open(save + "/checkpoint_last.pt", "wb").write(b"not read")
"""


def fake_tools(tmp_path: Path, sacrebleu: str) -> dict:
    """ENV with stand-ins first on PATH: fairseq-generate (one sentence; it
    counts its runs in tmp_path/generated), sacrebleu (the shell body
    ``sacrebleu``) and fairseq-train (FAKE_TRAIN)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "fairseq-generate").write_text(
        f"#!/bin/sh\necho run >> '{tmp_path}/generated'\nprintf 'H-0\\t-0.1\\ta b\\nT-0\\ta b\\n'\n")
    (bin_dir / "sacrebleu").write_text("#!/bin/sh\n" + sacrebleu + "\n")
    (bin_dir / "fairseq-train").write_text(FAKE_TRAIN)
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    return dict(ENV, PATH=f"{bin_dir}{os.pathsep}{ENV['PATH']}")


__all__ = ["ROOT", "data_folder", "fake_checkpoint", "script", "fake_tools"]
