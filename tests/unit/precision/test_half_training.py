"""Every named arch of both families (NMT ``transformer_*``, RoBERTa
``roberta_*``), and mixed layouts with every learned kind, trained in fp16 and
in bf16 on the CPU, the model cast to the dtype, as ``--fp16`` runs it:
fairseq's FP16Optimizer with a ``DynamicLossScaler(init_scale=128)`` (used
for bf16 too, where fairseq has none: it then never skips), the real sparsity
criterion with every penalty on, then a validation pass (issue 18,
acceptance: 50 steps, no non-finite loss or penalty, penalties in float32, at
most one step skipped for overflow); and the cast model's outputs in
evaluation against the fp32 model's."""

import copy

import pytest
import torch

from fairseq_local.models.archs import NAMED_ARCHS, ROBERTA_ARCHS
from helpers.precision import fp16_optimizer_training, one_thread, setup  # noqa: F401 (a fixture)

pytestmark = pytest.mark.usefixtures("one_thread")

ARCHS = [cfg.arch for cfg in NAMED_ARCHS] + ["roberta_local_base"] + [cfg.arch for cfg in ROBERTA_ARCHS]
DTYPES = [torch.float16, torch.bfloat16]
# max |half - fp32| / max |fp32| of the outputs (measured: <= 0.25 % in fp16, <= 2.1 % in bf16)
TOLERANCE = {torch.float16: 1e-2, torch.bfloat16: 6e-2}
# Every named arch with its own layout (roberta_local_base takes a layer count), and
# mixed layouts with every learned kind next to fixed and tied heads, in both mask modes.
MIXED = "[dam-u,dam-s,aaa,global:gate,band-1,prev-1@t,next-1@t,global]*2"
MIXED_12 = "[dam-u,dam-s,aaa,global:gate,band-1,prev-1@t,next-1@t,global*5]*2"
CASES = [(arch, {"encoder_layers": 2} if arch == "roberta_local_base" else {}) for arch in ARCHS] + [
    ("transformer_local", {"attn_layout": MIXED, "encoder_layers": 2, "mask_mode": "post"}),
    ("transformer_local", {"attn_layout": MIXED, "encoder_layers": 2, "mask_mode": "pre"}),
    ("roberta_local_base", {"attn_layout": MIXED_12, "encoder_layers": 2, "mask_mode": "post"}),
    ("roberta_local_base", {"attn_layout": MIXED_12, "encoder_layers": 2, "mask_mode": "pre"}),
    ("roberta_local_base", {"encoder_layers": 2, "segment_embeddings": True}),
]
IDS = ARCHS + ["transformer_mixed-post", "transformer_mixed-pre", "roberta_mixed-post", "roberta_mixed-pre",
               "roberta_segments"]


@pytest.mark.slow
@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
@pytest.mark.parametrize("arch, overrides", CASES, ids=IDS)
def test_fifty_half_precision_updates(arch, overrides, dtype):
    model, crit, sample = setup(arch, overrides)
    skipped, losses, scale = fp16_optimizer_training(model, crit, sample, dtype, steps=50)
    assert skipped <= 1, f"{skipped} of 50 updates skipped for overflow (loss scale now {scale})"
    assert losses[-1] < losses[0], losses  # it trains


@pytest.mark.parametrize("arch, overrides", CASES, ids=IDS)
def test_cast_model_outputs_within_dtype_tolerance(arch, overrides):
    model, _, sample = setup(arch, overrides)
    model.eval()

    def outputs(m):
        with torch.no_grad():
            if arch.startswith("roberta_"):
                return m(sample["net_input"]["src_tokens"])[0].float()
            return m(**sample["net_input"])[0].float()

    ref = outputs(model)
    for dtype in DTYPES:
        out = outputs(copy.deepcopy(model).to(dtype))
        assert torch.isfinite(out).all(), dtype
        err = float((out - ref).abs().max())
        assert err <= TOLERANCE[dtype] * float(ref.abs().max()), (dtype, err, float(ref.abs().max()))
