"""``--attn-impl`` end to end: fairseq-train with the dense reference, auto
and the window path gives the same losses, update by update."""

import re

import pytest

from helpers import train

pytestmark = pytest.mark.slow  # trains three models


def _losses(log: str):
    """The training loss of every update (``train_inner`` lines, --log-interval 1)."""
    return [float(m) for m in re.findall(r"train_inner \|.* loss=([0-9.]+),", log)]


def test_dense_auto_and_window_train_to_the_same_losses(tiny_data, tmp_path):
    # Pande et al.'s (i): one Q/K group of local heads per layer, post mode
    arch = "transformer_local_1lochead_7tiedloc_all6"
    logs = {}
    for impl in ("dense", "auto", "window"):
        save = tmp_path / impl
        train(tiny_data, arch, save, "--max-update", "20", "--attn-impl", impl, "--no-save",
              "--attention-dropout", "0", "--dropout", "0")
        logs[impl] = _losses((save / "train.log").read_text())
    assert len(logs["dense"]) >= 20
    for impl in ("auto", "window"):
        assert logs[impl] == pytest.approx(logs["dense"], rel=1e-4, abs=1e-3)
