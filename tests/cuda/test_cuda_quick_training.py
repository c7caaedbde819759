"""40 updates of ``fairseq-train --fp16`` on CUDA for one arch of each path
(``scripts/check-gpu.sh --no-setup``'s training phase): DAM_s and AAA (dense
path, learned masks), BigBird under ``--attn-impl flex`` (compiled
FlexAttention, new lengths every batch) and Pande et al.'s (i) under
``window``.  The loss scale stays above 1, nothing logged is inf or NaN, and
no path falls back (no FallbackWarning)."""

import pytest

from helpers import train
from test_cuda_fp16_training import SPARSITY, loss_scales, non_finite

pytestmark = [pytest.mark.cuda, pytest.mark.slow]

UPDATES = 40
RUNS = [("transformer_dam_s", "auto"), ("transformer_aaa", "auto"), ("transformer_sparse_bigbird", "flex"),
        ("transformer_local_1lochead_7tiedloc_all6", "window")]


@pytest.mark.parametrize("arch, impl", RUNS)
def test_quick_fp16_training(arch, impl, tiny_data, tmp_path):
    save = tmp_path / arch
    train(tiny_data, arch, save, *SPARSITY, "--fp16", "--attn-impl", impl, "--attention-dropout", "0",
          "--max-update", str(UPDATES), "--no-save", "--log-format", "simple")
    log = (save / "train.log").read_text()
    scales = loss_scales(log)
    assert len(scales) >= UPDATES, f"{len(scales)} updates logged:\n{log[-3000:]}"
    assert min(scales) > 1, f"loss scale fell to {min(scales):g}"
    assert not non_finite(log), "\n".join(non_finite(log)[:5])
    assert "FallbackWarning" not in log, log[log.index("FallbackWarning") - 300:][:600]
