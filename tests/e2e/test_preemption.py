"""A job killed while fairseq copied its checkpoint to checkpoint_last.pt
resumes from the run's newest readable checkpoint and trains on exactly as
an uninterrupted run does."""

import re

import pytest

from helpers import train

pytestmark = pytest.mark.slow  # trains with the scripts

RUN = ["--max-tokens", "800", "--save-interval-updates", "3", "--no-epoch-checkpoints", "--dropout", "0.1"]


def _losses(log):
    """{update: training loss} of a train.log (--log-interval 1)."""
    return {int(u): float(x) for x, u in re.findall(r"train_inner \| .*? loss=([0-9.]+), .*?num_updates=(\d+)", log)}


def test_a_truncated_checkpoint_last_resumes_and_matches_an_uninterrupted_run(tiny_data, tmp_path):
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    train(tiny_data, "a", whole, *RUN, "--max-update", "10")
    train(tiny_data, "a", cut, *RUN, "--max-update", "6")
    assert (cut / "checkpoint_1_6.pt").is_file()
    last = cut / "checkpoint_last.pt"
    broken = last.read_bytes()[: last.stat().st_size // 2]  # killed half way through the copy
    last.write_bytes(broken)
    r = train(tiny_data, "a", cut, *RUN, "--max-update", "10")
    assert (f"note: '{last}' cannot be read (a job killed while writing it?): kept as 'checkpoint_last.pt.unreadable'; "
            "resuming from 'checkpoint_1_6.pt' (update 6)") in r.stderr
    assert (cut / "checkpoint_last.pt.unreadable").read_bytes() == broken
    resumed, reference = _losses((cut / "train.log").read_text()), _losses((whole / "train.log").read_text())
    assert [resumed[u] for u in range(7, 11)] == [reference[u] for u in range(7, 11)]
