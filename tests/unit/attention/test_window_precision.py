"""The window path (fairseq_local/attention/window.py) in half
precision, on the CPU: bf16 and fp16 outputs and gradients of the window and
global paths against a float64 dense reference, held to the error of the
dense path's own half-precision result; lse in float32; the block-wise LSE;
the per-device dtypes and ``auto`` lengths."""

import pytest
import torch

from helpers import make_attention, padding_mask
from fairseq_local.attention import window
from fairseq_local.attention.window import (AUTO_MIN_LEN_CPU, AUTO_MIN_LEN_GPU, ChunkedLSE, GroupLSE, WindowPlan,
                                           auto_min_len, fast_dtypes, group_lse, window_attention)

HALF = [torch.bfloat16, torch.float16]
# Pande et al.'s tied (i)-style group, a mixed group (window + global heads), a group of its own
TOKENS = ["prev-1", "band-2", "next-1", "identity", "global", "band-1"]
GROUPS = [0, 0, 0, 1, 1, 2]


def _run(attn, x, kpm, path, gy):
    """Output and the gradients of (x, *parameters) for upstream gradient gy,
    with the forward forced onto ``path`` (``dense`` or ``window``)."""
    attn.path = lambda *args, **kw: path
    y, _ = attn(x, key_padding_mask=kpm)
    return [y, *torch.autograd.grad(y, [x, *attn.parameters()], gy.to(y.dtype))]


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("mode", ["post", "pre"])
def test_half_window_path_is_as_accurate_as_dense(mode, dtype):
    """Both half-precision paths against a float64 dense reference with the
    same (rounded) parameters and inputs: for the output and every gradient,
    the window path's error is at most 4x the dense path's plus eps · S / 2,
    with S the largest reference gradient, eps the dtype's.  (Before lse and
    exp(s − lse) were kept in fp32, post mode failed this: bf16 by ~10x.)"""
    for seed, T, lengths in [(0, 40, [40, 23, 7]), (1, 17, [17, 17]), (2, 64, [64, 1, 50])]:
        attn = make_attention(TOKENS, GROUPS, mode=mode, std=0.3, embed_dim=48, seed=seed).to(dtype)
        ref = make_attention(TOKENS, GROUPS, mode=mode, std=0.3, embed_dim=48).double()
        ref.load_state_dict({k: v.double() for k, v in attn.state_dict().items()})
        torch.manual_seed(seed)
        x = torch.randn(T, len(lengths), 48).to(dtype)
        kpm = padding_mask(lengths, left_pad=bool(seed % 2), T=T)
        y = ref(x.double(), key_padding_mask=kpm)[0]
        gy = torch.cos(7 * y.detach())
        want = _run(ref, x.double().requires_grad_(), kpm, "dense", gy)
        dense = _run(attn, x.clone().requires_grad_(), kpm, "dense", gy)
        fast = _run(attn, x.clone().requires_grad_(), kpm, "window", gy)
        atol = torch.finfo(dtype).eps * max(t.abs().max().item() for t in want[1:]) / 2
        names = ["output", "x", *(n for n, _ in attn.named_parameters())]
        for name, w, d, f in zip(names, want, dense, fast):
            assert f.dtype == dtype
            err_d, err_f = ((t.double() - w).abs().max().item() for t in (d, f))
            assert err_f <= 4 * err_d + atol, (seed, name, err_f, err_d, atol)


@pytest.mark.parametrize("dtype", HALF + [torch.float32])
def test_window_attention_keeps_probabilities_in_fp32(dtype, monkeypatch):
    """exp(s − lse), the pre-mode softmax and their sum over the window run in
    float32 whatever the input dtype; the output comes back in v's dtype."""
    seen = []
    real_softmax, real_exp = torch.nn.functional.softmax, torch.exp
    monkeypatch.setattr(window.F, "softmax", lambda t, *a, **kw: seen.append(kw.get("dtype")) or
                        real_softmax(t, *a, **kw))
    monkeypatch.setattr(window.torch, "exp", lambda t: seen.append(t.dtype) or real_exp(t))
    plan = WindowPlan((0, 1), (0, 0), ((-1, 1), (0, 2)))
    q, k, v = (torch.randn(2, 1, 9, 8).to(dtype) for _ in range(3))
    for mode in ("post", "pre"):
        out = window_attention(q, k, v, plan, padding_mask([9, 4], left_pad=True), mode, 0.35)
        assert out.dtype == dtype
    assert seen == [torch.float32, torch.float32]


@pytest.mark.parametrize("dtype", HALF)
def test_group_lse_is_float32(dtype):
    """lse comes back in float32 (never rounded to bf16: |lse| ~ 25 would lose
    0.06), with gradients in the inputs' dtype; bf16 through GroupLSE itself,
    fp16 through an fp32 upcast (the kernel's biases overflow fp16)."""
    torch.manual_seed(0)
    q64, k64 = torch.randn(2, 3, 300, 16).double() * 2, torch.randn(2, 3, 300, 16).double() * 2
    kpm = padding_mask([300, 200], left_pad=False)
    q, k = q64.to(dtype).requires_grad_(), k64.to(dtype).requires_grad_()
    qr, kr = q.detach().double().requires_grad_(), k.detach().double().requires_grad_()
    s = torch.matmul(qr * 0.25, kr.transpose(-1, -2)).masked_fill(kpm[:, None, None, :], float("-inf"))
    ref = torch.logsumexp(s, -1)
    g = torch.randn_like(ref)
    fns = [lambda a, b: group_lse(a, b, kpm, 0.25)]
    if dtype == torch.bfloat16:
        fns.append(lambda a, b: GroupLSE.apply(a, b, kpm, 0.25))
    want = torch.autograd.grad(ref, (qr, kr), g)
    for fn in fns:
        lse = fn(q, k)
        assert lse.dtype == torch.float32
        assert (lse.double() - ref).abs().max() < 1e-4  # fp32 sums of the rounded inputs
        grads = torch.autograd.grad(lse, (q, k), g.float())
        for got, exp in zip(grads, want):
            assert got.dtype == dtype
            # bf16/fp16 rounding of the result only: the backward's −lse bias keeps fp32 precision
            assert (got.double() - exp).abs().max() <= 4 * torch.finfo(dtype).eps * exp.abs().max()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("rows", [1, 7, 64])
def test_chunked_lse_matches_logsumexp(dtype, rows):
    """The device-agnostic block-wise LSE (CUDA without FlexAttention, other
    devices, fp64): forward and backward equal the dense logsumexp, padding
    included, for any block size."""
    torch.manual_seed(1)
    B, G, T, d = 2, 3, 37, 8
    q = torch.randn(B, G, T, d).to(dtype).requires_grad_()
    k = torch.randn(B, G, T, d).to(dtype).requires_grad_()
    kpm = padding_mask([37, 20], left_pad=True)
    qr, kr = q.detach().double().requires_grad_(), k.detach().double().requires_grad_()
    ref = torch.logsumexp(torch.matmul(qr * 0.3, kr.transpose(-1, -2)).masked_fill(kpm[:, None, None, :],
                                                                                    float("-inf")), -1)
    lse = ChunkedLSE.apply(q, k, kpm, 0.3, rows)
    assert lse.dtype == torch.promote_types(dtype, torch.float32)
    tol = 1e-12 if dtype == torch.float64 else 1e-5
    assert (lse.double() - ref).abs().max() < tol * 10
    g = torch.randn_like(ref)
    for got, want in zip(torch.autograd.grad(lse, (q, k), g.to(lse.dtype)), torch.autograd.grad(ref, (qr, kr), g)):
        assert got.dtype == dtype
        assert (got.double() - want).abs().max() <= max(tol, 2 * torch.finfo(dtype).eps) * want.abs().max()


def test_chunked_lse_row_of_padding_is_finite():
    """A sentence of padding only: finite lse and zero gradients, never NaN."""
    q, k = torch.randn(1, 1, 4, 8, requires_grad=True), torch.randn(1, 1, 4, 8, requires_grad=True)
    lse = ChunkedLSE.apply(q, k, torch.ones(1, 4, dtype=torch.bool), 0.3, 2)
    grads = torch.autograd.grad(lse.sum(), (q, k))
    assert torch.isfinite(lse).all() and all(torch.equal(g, torch.zeros_like(g)) for g in grads)


def test_fast_dtypes_and_auto_lengths_per_device():
    """fp16 takes the window path on every device (on the CPU GroupLSE
    upcasts it); fp64 never does.  ``auto``: the measured CPU crossovers on
    the CPU, the (not yet measured) GPU defaults elsewhere."""
    half = {torch.float32, torch.float16, torch.bfloat16}
    for device in ("cpu", "cuda", "meta"):
        assert set(fast_dtypes(torch.device(device))) == half
        assert torch.float64 not in fast_dtypes(torch.device(device))
    for mode in ("pre", "post"):
        assert auto_min_len(mode, torch.device("cpu")) == AUTO_MIN_LEN_CPU[mode]
        assert auto_min_len(mode, torch.device("cuda")) == AUTO_MIN_LEN_GPU[mode]
    assert AUTO_MIN_LEN_CPU == {"pre": 128, "post": 512}


@pytest.mark.parametrize("mode", ["post", "pre"])
def test_fp16_window_path_on_the_cpu(mode):
    """fp16 on the CPU: the window path runs (post mode's LSE through an fp32
    upcast), gives finite outputs and gradients in fp16, and matches the fp32
    window path to fp16 rounding."""
    torch.manual_seed(3)
    plan = WindowPlan((0, 1, 2), (0, 0, 1), ((-1, 1), (0, 2), (-3, 0)))
    q, k, v = (torch.randn(2, 2, 21, 8) for _ in range(3))
    kpm = padding_mask([21, 9], left_pad=False)
    v = v[:, [0, 0, 1]]
    ins = [t.half().requires_grad_() for t in (q, k, v)]
    ref_ins = [t.detach().float().requires_grad_() for t in ins]
    out = window_attention(*ins, plan, kpm, mode, 0.35)
    ref = window_attention(*ref_ins, plan, kpm, mode, 0.35)
    assert out.dtype == torch.float16
    assert (out.float() - ref).abs().max() <= 2e-3 * max(1.0, ref.abs().max().item())
    g = torch.randn_like(ref)
    for got, want in zip(torch.autograd.grad(out, ins, g.half()), torch.autograd.grad(ref, ref_ins, g)):
        assert got.dtype == torch.float16 and torch.isfinite(got).all()
        assert (got.float() - want).abs().max() <= 4e-3 * max(1.0, want.abs().max().item())
