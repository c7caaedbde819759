"""The same seed repeats a run on one machine: two fairseq-train runs of the
tiny model with the same --seed log the same numbers at every update, and a
different --seed logs other ones. The model has Voita et al.'s gated heads,
whose hard-concrete gates draw noise at every training forward (Louizos et al.
2018; Voita et al. 2019, §4), so the seed drives the initialisation, the batch
order, dropout and the gates' noise."""

import json
import re

import pytest

from helpers import train

pytestmark = pytest.mark.slow  # trains three models

ARCH = "transformer_head_gates"
UPDATES = 12
# train_inner fields that depend on wall-clock time, not on the computation
TIMING = {"wps", "ups", "wall", "train_wall"}
STEPS = [str(u) for u in range(1, UPDATES + 1)]  # num_updates, as logged


def _updates(save) -> list[dict]:
    """Every ``train_inner`` record of save/train.log (--log-format json,
    --log-interval 1), without its timing fields: one per update, the numbers
    as the strings fairseq logs."""
    rows = re.findall(r"\| train_inner \| (\{.*\})$", (save / "train.log").read_text(), flags=re.M)
    return [{k: v for k, v in json.loads(row).items() if k not in TIMING} for row in rows]


def test_same_seed_gives_identical_losses_and_another_seed_other_ones(tiny_data, tmp_path):
    runs = {}
    for name, seed in (("first", "3"), ("again", "3"), ("other", "4")):
        train(tiny_data, ARCH, tmp_path / name, "--max-update", str(UPDATES), "--no-save",
              "--log-format", "json", "--seed", seed)
        runs[name] = _updates(tmp_path / name)
    first, again, other = runs["first"], runs["again"], runs["other"]
    assert [row["num_updates"] for row in first] == STEPS
    assert {"loss", "nll_loss", "ppl", "gnorm", "lr"} <= set(first[0])
    # fairseq logs each number rounded (3 decimals for the losses): equal as logged, not approximately
    assert [row["loss"] for row in again] == [row["loss"] for row in first]
    assert again == first  # nll_loss, ppl, gnorm, lr and the batches' sizes too
    assert [row["num_updates"] for row in other] == STEPS
    assert [row["lr"] for row in other] == [row["lr"] for row in first]  # the same schedule ...
    same = [u for u, (a, b) in enumerate(zip(first, other), 1) if a["loss"] == b["loss"]]
    assert len(same) <= 1, same  # ... but other batches, noise and weights: other losses
