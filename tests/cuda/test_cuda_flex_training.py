"""FlexAttention training on CUDA: an encoder of fixed sparse and window
heads under ``--attn-impl flex``, forward and backward in train mode against
the dense path (fp32 reference; fp32, fp16 and bf16 models), and a few
optimizer steps giving the dense path's losses."""

import pytest
import torch

import fairseq_local  # noqa: F401  (registers the archs)
from helpers.cuda import CUDA, DTYPES, TOL, assert_close, compare, encoder_batch
from fairseq_local.models import build_encoder
from fairseq_local.attention.flex import flex_available

pytestmark = pytest.mark.cuda

LAYOUT = "[star,band-2,bigbird-1-2-2,global,prev-1,next-2,logsparse,global]*2"
SMALL = dict(encoder_embed_dim=128, encoder_ffn_embed_dim=256, encoder_layers=2, dropout=0.0, attention_dropout=0.0,
             activation_dropout=0.0)
# Whole encoder layers in half precision against fp32: ReLUs near 0 flip with rounding,
# so a half model's gradients are compared as one vector, ||g − g_ref|| / ||g_ref||
# (fp32: every tensor, as one layer's).
GRAD_TOL = {"fp16": 3e-2, "bf16": 1e-1}
LENGTHS = [130, 77, 1, 40]


@pytest.fixture(autouse=True)
def needs_flex_training():
    reason = flex_available(CUDA, True)
    if reason is not None:
        pytest.skip(reason)


def encoders(mode: str, dtype: torch.dtype):
    """The same encoder twice, fp32 dense and ``dtype`` flex, in train mode on CUDA."""
    torch.manual_seed(0)
    ref = build_encoder("transformer_local", dict(SMALL, attn_layout=LAYOUT, mask_mode=mode, attn_impl="dense"))
    flex = build_encoder("transformer_local", dict(SMALL, attn_layout=LAYOUT, mask_mode=mode, attn_impl="flex"))
    flex.load_state_dict(ref.state_dict())
    return ref.to(CUDA).train(), flex.to(device=CUDA, dtype=dtype).train()


def loss_of(enc, tokens, lengths, target):
    """Mean squared distance of the real positions' outputs from ``target``."""
    out = enc(tokens, lengths)["encoder_out"][0]  # (T, B, d)
    real = tokens.ne(1).t().unsqueeze(-1)
    return ((out.float() - target) ** 2 * real).sum() / (real.sum() * out.shape[-1])


def weights(tokens, dim, seed=4):
    gen = torch.Generator().manual_seed(seed)
    w = torch.randn(tokens.shape[1], tokens.shape[0], dim, generator=gen).to(CUDA)
    return w * tokens.ne(1).t().unsqueeze(-1)


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("mode", ["pre", "post"])
def test_flex_forward_and_backward_match_dense(mode, dtype):
    ref, flex = encoders(mode, DTYPES[dtype])
    tokens, lengths = encoder_batch(LENGTHS)
    w = weights(tokens, SMALL["encoder_embed_dim"])
    real = tokens.ne(1).t().unsqueeze(-1)
    results = []
    for enc in (ref, flex):
        out = enc(tokens, lengths)["encoder_out"][0]
        names, params = zip(*enc.named_parameters())
        grads = torch.autograd.grad((out.float() * w).sum(), params, allow_unused=True)
        results.append((out * real, {n: g for n, g in zip(names, grads) if g is not None}))
    if dtype == "fp32":
        compare(results[1], results[0], TOL[dtype], f"{mode} {dtype}")
        return
    (out, grads), (out_ref, grads_ref) = results[1], results[0]
    assert_close(out, out_ref, TOL[dtype], f"{mode} {dtype}: output")
    assert set(grads) == set(grads_ref)
    got = torch.cat([grads[n].float().flatten() for n in grads_ref])
    ref_ = torch.cat([grads_ref[n].float().flatten() for n in grads_ref])
    assert torch.isfinite(got).all()
    err = ((got - ref_).norm() / ref_.norm()).item()
    assert err <= GRAD_TOL[dtype], f"{mode} {dtype}: ||g - g_ref|| / ||g_ref|| = {err:.3g} > {GRAD_TOL[dtype]:g}"


@pytest.mark.parametrize("mode", ["pre", "post"])
def test_flex_training_steps_give_the_dense_losses(mode):
    ref, flex = encoders(mode, torch.float32)
    losses = {}
    for name, enc in (("dense", ref), ("flex", flex)):
        # SGD: Adam would turn rounding noise in exact-zero gradients (the K bias) into full-size steps
        opt = torch.optim.SGD(enc.parameters(), lr=0.1)
        losses[name] = []
        for step in range(8):
            lengths = [130 - 7 * step, 77, 1 + step, 40]  # a new length and padding every step
            tokens, lens = encoder_batch(lengths, seed=10 + step)
            loss = loss_of(enc, tokens, lens, weights(tokens, SMALL["encoder_embed_dim"], seed=step))
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses[name].append(loss.item())
    assert losses["flex"] == pytest.approx(losses["dense"], rel=1e-4)


@pytest.mark.parametrize("mode", ["pre", "post"])
def test_compiled_block_masks_give_the_dense_losses(mode):
    """create_block_mask compiled by inductor on CUDA (not yet the default:
    flex._MASK_BACKENDS): the same training steps and losses as dense, at a
    new length and padding every step, within the layout's recompile budget."""
    from fairseq_local.attention import flex as flex_module

    previous = flex_module.set_compile_backend("cuda", "inductor", block_masks=True)
    try:
        test_flex_training_steps_give_the_dense_losses(mode)
    finally:
        flex_module.set_compile_backend("cuda", previous, block_masks=True)
        flex_module._compiled_block_mask.cache_clear()
