"""A full disk is one line and leaves no partial file, where fairseq saves a
checkpoint (train.sh) and where a command of ours writes one (average); a
re-run after space is freed completes.  On a small tmpfs: needs root and
permission to mount (skipped with one line elsewhere)."""

import shutil
import subprocess

import pytest
import torch

from helpers import TINY, run, train
from helpers.probes import one_line_error

pytestmark = pytest.mark.slow  # trains with the scripts


@pytest.fixture
def small_disk(tmp_path):
    """A tmpfs of 4 MB: room for the first save of a tiny model (checkpoint_1_2.pt, its copies to
    checkpoint_best.pt and checkpoint_last.pt: 3 x 1.2 MB), not for the next."""
    disk = tmp_path / "disk"
    disk.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4000k", "tmpfs", str(disk)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({r.stderr.strip() or r.returncode}): the full-disk tests need root")
    yield disk
    subprocess.run(["umount", "-l", str(disk)], check=False)


def _grow(disk):
    subprocess.run(["mount", "-o", "remount,size=20m", str(disk)], check=True)


def _partial(folder):
    return sorted(p.name for p in folder.rglob("*") if ".tmp" in p.name)


def test_training_on_a_full_disk_stops_in_one_line_and_resumes(tiny_data, small_disk):
    save = small_disk / "run"
    args = ["bash", "scripts/train.sh", "--data", str(tiny_data), "--arch", "a", "--save-dir", str(save), "--",
            *TINY, "--save-interval-updates", "2", "--no-epoch-checkpoints", "--max-update", "8"]
    r = run(args, check=False)
    assert r.returncode != 0
    # fairseq's output goes to stdout and train.log (tee): its last line is the one error, with no traceback
    assert "Traceback" not in r.stdout + r.stderr, r.stdout[-3000:]
    one_line_error(r.stdout.strip().splitlines()[-1], "cannot write '", "space left", "free space and re-run")
    assert not _partial(save)  # no half-written checkpoint or copy
    assert torch.load(save / "checkpoint_last.pt", weights_only=False)["optimizer_history"][-1]["num_updates"] == 2
    _grow(small_disk)
    r = run(args)
    assert "done training" in (save / "train.log").read_text()


def test_average_on_a_full_disk_writes_nothing(tiny_data, tmp_path, small_disk):
    src = tmp_path / "run"
    train(tiny_data, "a", src, "--max-update", "4", "--save-interval-updates", "2", "--keep-interval-updates", "5")
    filler = small_disk / "filler"
    filler.write_bytes(b"\0" * (shutil.disk_usage(small_disk).free - 600 * 1024))  # less than a checkpoint left
    out = small_disk / "avg.pt"
    r = run(["fairseq-local", "average", str(src), "--num", "2", "--output", str(out)], check=False)
    assert r.returncode == 1
    one_line_error(r.stderr, f"cannot write '{out}'", "no space left", "nothing was written")
    assert not out.exists() and not _partial(small_disk)
    filler.unlink()
    run(["fairseq-local", "average", str(src), "--num", "2", "--output", str(out)])
    assert out.is_file()


def test_a_data_step_on_a_full_disk_stops_in_one_line_and_redoes_it(small_disk):
    """fairseq-preprocess fills the disk while binarising: one line, its partial .bin/.idx removed, and the
    step (unstamped) redone once space is freed. 2 MB of the 4 MB are taken: the raw and BPE text of 2,000
    pairs fit (about 1 MB), their binarised copies do not."""
    filler = small_disk / "filler"
    filler.write_bytes(b"\0" * 2_000_000)
    out = small_disk / "syn"
    cmd = ["bash", "scripts/prepare-synthetic.sh", "--out", str(out), "--train", "2000", "--valid", "40",
           "--test", "30", "--merges", "300"]
    r = run(cmd, check=False)
    assert r.returncode == 1
    errors = [line for line in r.stderr.splitlines() if line.startswith("error: ")]  # after the steps' log lines
    assert len(errors) == 1 and r.stderr.rstrip().endswith(errors[0])
    assert "cannot binarise: No space left on device" in errors[0] and "free space and re-run" in errors[0]
    assert "Traceback" not in r.stderr and not list(out.glob("*.bin")) and not list(out.glob("*.idx"))
    filler.unlink()
    r = run(cmd)
    assert "data ready in" in r.stderr and len(list(out.glob("*.idx"))) == 6
