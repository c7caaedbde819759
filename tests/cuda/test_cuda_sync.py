"""No host-device synchronisation in the encoder layers' forward on CUDA:
every layer of a model with fixed masks only (window and FlexAttention
paths) and of every learned arch runs under
``torch.cuda.set_sync_debug_mode("error")``, in training (noise drawn, DAM
masks resampled) and in evaluation.

The layers are run one by one on an embedded batch: fairseq's own
``TransformerEncoderBase.forward`` tests ``encoder_padding_mask.any()`` once
per forward, which is fairseq's and outside the attention."""

import pytest
import torch

import fairseq_local  # noqa: F401  (registers the archs)
from helpers.cuda import CUDA, DTYPES
from helpers import padding_mask
from fairseq_local.models import build_encoder
from fairseq_local.attention.flex import flex_available
from fairseq_local.attention.context import attention_context

pytestmark = pytest.mark.cuda

SMALL = dict(encoder_embed_dim=128, encoder_ffn_embed_dim=256, dropout=0.0, attention_dropout=0.0, dam_max_len=256)
# (arch, --attn-impl): fixed masks only
FIXED = [("transformer_local_1lochead_7tiedloc_all6", "window"),  # (i): one tied group, post mode
         ("transformer_local_8lochead_all6", "window"),           # (f): untied local heads
         ("transformer_sparse_bigbird", "flex"),                  # SparseBERT's BigBird, pre mode
         ("transformer_sparse_star", "auto")]                     # auto takes FlexAttention on CUDA
LEARNED = ["transformer_dam_u", "transformer_dam_s", "transformer_aaa", "transformer_head_gates"]
LENGTHS = ([130, 77, 1], [130, 20, 64])  # the same shapes, other padding: warm-up, then the checked forward


def layers_forward(enc, x, pad):
    """What LocalTransformerEncoder.forward does around fairseq's layers; in
    evaluation under torch.no_grad(), as fairseq validates."""
    noise = enc.attention_modules() if enc.training else ()
    with torch.set_grad_enabled(enc.training), attention_context(records=True, memo=True, sample_noise=noise) as ctx:
        for lay in enc.layers:
            x = lay(x, encoder_padding_mask=pad)
    return x, ctx.records


def check_sync_free(arch: str, overrides: dict, dtype: torch.dtype, train: bool) -> None:
    torch.manual_seed(0)
    enc = build_encoder(arch, dict(SMALL, **overrides)).to(device=CUDA, dtype=dtype).train(train)
    d = SMALL["encoder_embed_dim"]
    inputs = []
    for lengths in LENGTHS:
        x = torch.randn(max(lengths), len(lengths), d).to(device=CUDA, dtype=dtype).requires_grad_(train)
        inputs.append((x, padding_mask(lengths, left_pad=True).to(CUDA)))
    layers_forward(enc, *inputs[0])  # warm-up: compilation, caches
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        out, records = layers_forward(enc, *inputs[1])
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert torch.isfinite(out).all() and len(records) == len(enc.layers)


@pytest.mark.parametrize("train", [True, False], ids=["train", "eval"])
@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
@pytest.mark.parametrize("arch, impl", FIXED)
def test_fixed_masks_forward_is_sync_free(arch, impl, dtype, train):
    if impl == "flex":
        reason = flex_available(CUDA, train)
        if reason is not None:
            pytest.skip(reason)
    check_sync_free(arch, dict(attn_impl=impl), DTYPES[dtype], train)


@pytest.mark.parametrize("train", [True, False], ids=["train", "eval"])
@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
@pytest.mark.parametrize("arch", LEARNED)
def test_learned_archs_forward_is_sync_free(arch, dtype, train):
    check_sync_free(arch, {}, DTYPES[dtype], train)
