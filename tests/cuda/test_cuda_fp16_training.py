"""200 updates of ``fairseq-train --fp16`` on CUDA for every learned arch,
with the sparsity criterion and the demo's penalty weights (scripts/lib.sh),
on the tiny synthetic corpus: fairseq's dynamic loss scaler starts at 128 and
halves on every overflow; it must stay above 1, and no logged value may be
inf or NaN (losses, penalties, ρ, in training and validation)."""

import re

import pytest

from helpers import train

pytestmark = [pytest.mark.cuda, pytest.mark.slow]

LEARNED_ARCHS = ["transformer_dam_u", "transformer_dam_s", "transformer_aaa", "transformer_head_gates"]
SPARSITY = ["--criterion", "label_smoothed_cross_entropy_with_sparsity", "--dam-max-len", "128",
            "--dam-lambda", "1e-4", "--aaa-target", "0.5", "--aaa-alpha", "0.05", "--gate-lambda", "0.1"]
UPDATES = 200


def loss_scales(log: str):
    """The loss scale of every logged update (``train_inner`` lines, --log-interval 1)."""
    return [float(v) for v in re.findall(r"train_inner \|.*?\bloss_scale=([0-9.e+-]+)", log)]


def non_finite(log: str):
    """Logged statistics (training and validation lines) that are inf or NaN."""
    lines = [line for line in log.splitlines() if "train_inner |" in line or "| valid |" in line
             or "valid on" in line]
    return [line for line in lines if re.search(r"(?<![\w.])-?(inf|nan)\b", line)]


@pytest.mark.parametrize("arch", LEARNED_ARCHS)
def test_fp16_training_keeps_the_loss_scale_above_one(arch, tiny_data, tmp_path):
    save = tmp_path / arch
    train(tiny_data, arch, save, *SPARSITY, "--fp16", "--max-update", str(UPDATES), "--no-save",
          "--log-format", "simple")
    log = (save / "train.log").read_text()
    scales = loss_scales(log)
    assert len(scales) >= UPDATES, f"{len(scales)} updates logged:\n{log[-3000:]}"
    assert min(scales) > 1, f"loss scale fell to {min(scales):g} (last {scales[-1]:g})"
    assert "Minimum loss scale reached" not in log
    bad = non_finite(log)
    assert not bad, "\n".join(bad[:5])
