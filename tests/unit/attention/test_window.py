"""The window path (fairseq_local/attention/window.py) against
the dense reference: forward and backward, fp32, 1e-5."""

import itertools

import pytest
import torch

from helpers import make_attention, padding_mask
from fairseq_local.attention.window import GroupLSE, WindowPlan, group_lse, window_keys, window_path

WINDOW_KINDS = ["identity", "prev-1", "prev-3", "next-1", "next-2", "band-1", "band-2", "local-0", "local-3"]
TOL = dict(rtol=1e-5, atol=1e-5)


def assert_close(a: torch.Tensor, b: torch.Tensor) -> None:
    """|a − b| <= 1e-5 · max(1, max |b|): fp32 agreement at the tensor's scale
    (a gradient of a few hundred carries rounding of its summands)."""
    err, scale = (a - b).abs().max().item(), max(1.0, b.abs().max().item())
    assert err <= 1e-5 * scale, f"max |a - b| = {err:.3g} at scale {scale:.3g}"


def pair(tokens, groups=None, mode="post", std=0.15, **kw):
    """The same layer twice (same parameters, redrawn from N(0, std²)): dense and window."""
    dense = make_attention(tokens, groups, mode, attn_impl="dense", std=std, **kw)
    fast = make_attention(tokens, groups, mode, attn_impl="window", **kw)
    fast.load_state_dict(dense.state_dict())
    return dense, fast


def check_same(dense, fast, T, lengths=None, left=True, B=3, train=False, seed=0):
    """Outputs and the gradients of the input and of every parameter agree."""
    torch.manual_seed(seed)
    kpm = None if lengths is None else padding_mask(lengths, left, T)
    B = B if lengths is None else len(lengths)
    x = torch.randn(T, B, dense.embed_dim, requires_grad=True)
    for m in (dense, fast):
        m.train(train)
    assert fast.path(T, False, None, x.dtype) == "window"
    results = []
    for m in (dense, fast):
        y, _ = m(x, key_padding_mask=kpm)
        g = torch.autograd.grad(y, [x, *m.parameters()], torch.cos(y.detach() * 7))
        results.append((y, g))
    (y0, g0), (y1, g1) = results
    assert_close(y1, y0)
    for a, b in zip(g1, g0):
        assert_close(a, b)


@pytest.mark.parametrize("mode", ["post", "pre"])
@pytest.mark.parametrize("kind", WINDOW_KINDS)
def test_every_window_kind_matches_dense(kind, mode):
    dense, fast = pair([kind, "global"], mode=mode)
    for T in (1, 2, 5, 13):  # 13: not a multiple of any block size
        check_same(dense, fast, T)


@pytest.mark.parametrize("mode", ["post", "pre"])
@pytest.mark.parametrize("left", [True, False])
def test_padding_on_either_side(mode, left):
    heads = ["prev-1", "prev-2", "next-1", "next-2", "band-1", "band-2", "identity", "global"]
    dense, fast = pair(heads, mode=mode)
    check_same(dense, fast, 11, lengths=[11, 4, 1, 7], left=left)


@pytest.mark.parametrize("mode", ["post", "pre"])
def test_tied_groups_and_mixed_layers(mode):
    # Pande et al.'s (i) layer (one Q/K group of 8 heads) and (g) (four groups of two)
    layouts = [
        (["prev-1", "prev-2", "next-1", "next-2", "band-1", "band-2", "identity", "identity"], [0] * 8),
        (["identity", "band-2"] * 4, [0, 0, 1, 1, 2, 2, 3, 3]),
        # global and local heads in one group, global heads of another, interleaved
        (["global", "band-1", "next-3", "global", "prev-2", "global"], [0, 0, 1, 1, 0, 2]),
    ]
    for tokens, groups in layouts:
        dense, fast = pair(tokens, groups, mode=mode, embed_dim=24)
        check_same(dense, fast, 9, lengths=[9, 3, 6], left=True)
        check_same(dense, fast, 9, lengths=[9, 3, 6], left=False)


@pytest.mark.parametrize("mode", ["post", "pre"])
def test_rows_without_an_allowed_key_are_zero(mode):
    # next-4 and prev-3 heads have no key for most queries of short sentences
    dense, fast = pair(["next-4", "prev-3"], mode=mode)
    check_same(dense, fast, 5, lengths=[5, 2, 1], left=True)
    x = torch.randn(3, 1, fast.embed_dim)
    out, weights = window_path(*fast.project(x), fast.plan, fast.path_inputs())
    assert weights is None
    assert torch.equal(out, torch.zeros_like(out))  # 3 tokens: no query has a key 3 or 4 away


def test_gated_heads_and_dropout():
    dense, fast = pair(["band-2:gate", "global", "prev-1:gate"], mode="post", embed_dim=24)
    check_same(dense, fast, 7, lengths=[7, 5], left=True)
    dense, fast = pair(["band-2", "global"], mode="pre")  # training mode, no dropout
    check_same(dense, fast, 7, train=True)


def test_paths_by_impl_and_length():
    auto = make_attention(["band-2", "global"], attn_impl="auto")
    assert auto.path(16, False, None, torch.float32) == "dense"  # short: the dense path is cheaper
    assert auto.path(256, False, None, torch.float32) == "dense"  # post mode: from 512 on
    assert auto.path(512, False, None, torch.float32) == "window"
    assert make_attention(["band-2"], mode="pre", attn_impl="auto").path(128, False, None, torch.float32) == "window"
    assert auto.path(512, True, None, torch.float32) == "dense"  # weights are asked for
    assert auto.path(512, False, None, torch.float64) == "dense"
    for impl, tokens in [("dense", ["band-2"]), ("auto", ["star"]), ("window", ["logsparse"]), ("window", ["dam-s"])]:
        assert make_attention(tokens, attn_impl=impl).path(512, False, None, torch.float32) == "dense"
    assert make_attention(["global", "global"], attn_impl="auto").path(8, False, None, torch.float32) == "window"


def test_window_plan_and_keys():
    plan = WindowPlan((0, 2), (0, 0), ((-1, -1), (0, 2)))
    assert (plan.lo, plan.hi, plan.width) == (-1, 2, 4)
    assert plan.allowed(torch.device("cpu"))[0, :, 0].tolist() == [[True, False, False, False],
                                                                     [False, True, True, True]]
    keys = window_keys(padding_mask([3, 2], left_pad=True), 2, 3, -1, 1, torch.device("cpu"))
    assert keys[:, 0].int().tolist() == [[[0, 1, 1], [1, 1, 1], [1, 1, 0]],
                                         [[0, 0, 1], [0, 1, 1], [1, 1, 0]]]


@pytest.mark.parametrize("pad", [False, True])
def test_group_lse_and_its_gradient(pad):
    torch.manual_seed(0)
    B, G, T, d = 2, 3, 37, 16
    q = torch.randn(B, G, T, d, requires_grad=True)
    k = torch.randn(B, G, T, d, requires_grad=True)
    kpm = padding_mask([37, 20], left_pad=False) if pad else None
    s = torch.matmul(q * 0.25, k.transpose(-1, -2))
    if kpm is not None:
        s = s.masked_fill(kpm[:, None, None, :], float("-inf"))
    ref = torch.logsumexp(s, -1)
    lse = GroupLSE.apply(q, k, kpm, 0.25)
    torch.testing.assert_close(lse, ref, **TOL)
    g = torch.randn_like(ref)
    grads = torch.autograd.grad(lse, (q, k), g)
    refs = torch.autograd.grad(ref, (q, k), g)
    for a, b in zip(grads, refs):
        torch.testing.assert_close(a, b, **TOL)
    torch.testing.assert_close(group_lse(q.double(), k.double(), kpm, 0.25), ref.double(), **TOL)


def test_long_inputs_allocate_no_square_tensor():
    """At n = 2048, the window path's band-2 layers' forward and backward never
    hold an n x n tensor (the dense path needs several)."""
    from torch.profiler import ProfilerActivity, profile

    n = 2048
    for mode in ("pre", "post"):
        fast = make_attention(["band-2", "band-2"], mode=mode, embed_dim=32, attn_impl="window", std=0.1)
        x = torch.randn(n, 1, 32, requires_grad=True)
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            y, _ = fast(x)
            y.sum().backward()
        biggest = max(e.cpu_memory_usage for e in prof.events())
        assert biggest < n * n * 4 // 8, (mode, biggest)  # far below one fp32 n x n matrix


def test_dense_auto_and_window_train_alike():
    """Twenty optimiser steps of a tied (i)-style layer on inputs long enough
    for ``auto`` to take the window path: the three implementations give
    the same losses."""
    losses = {}
    for impl in ("dense", "auto", "window"):
        attn = make_attention(["prev-1", "band-2", "next-1", "identity"], [0, 0, 0, 0], "post",
                              embed_dim=16, attn_impl=impl, std=0.3).train()
        opt = torch.optim.Adam(attn.parameters(), lr=1e-2)
        torch.manual_seed(5)
        out = []
        assert attn.path(520, False, None, torch.float32) == ("dense" if impl == "dense" else "window")
        for step in range(20):
            x = torch.randn(520, 2, 16)
            kpm = padding_mask([520, 500 - step], left_pad=True)
            y, _ = attn(x, key_padding_mask=kpm)
            loss = (y - x.flip(0)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            out.append(loss.item())
        losses[impl] = out
    for impl in ("auto", "window"):
        assert losses[impl] == pytest.approx(losses["dense"], rel=1e-5, abs=1e-6)


@pytest.mark.parametrize("mode", ["post", "pre"])
def test_identical_for_all_lengths_and_groupings(mode):
    """A sweep over small lengths, batch layouts and groupings."""
    tokens = ["band-1", "next-2", "prev-1", "global"]
    for groups, T in itertools.product([[0, 1, 2, 3], [0, 0, 1, 1], [0, 0, 0, 0]], [3, 8]):
        dense, fast = pair(tokens, groups, mode=mode)
        check_same(dense, fast, T, lengths=[T, max(1, T - 2), 1], left=bool(T % 2))


def test_flex_impl_on_cpu_runs_forward_only():
    """--attn-impl flex: the forward equals dense on the CPU; training there
    is a one-line error (FlexAttention has no CPU backward in this torch)."""
    from fairseq_local.errors import OptionError

    dense = make_attention(["star", "band-1", "bigbird-1-2-2", "global"], mode="post", attn_impl="dense", std=0.15)
    flex = make_attention(["star", "band-1", "bigbird-1-2-2", "global"], mode="post", attn_impl="flex", std=0.15)
    flex.load_state_dict(dense.state_dict())
    x = torch.randn(9, 2, 16)
    kpm = padding_mask([9, 5], left_pad=True)
    with torch.no_grad():
        assert flex.path(9, False, None, x.dtype) == "flex"
        assert_close(flex(x, key_padding_mask=kpm)[0], dense(x, key_padding_mask=kpm)[0])
    with pytest.raises(OptionError, match="no backward on CPU"):
        flex(x.requires_grad_(), key_padding_mask=kpm)
    # auto never picks it on the CPU
    auto = make_attention(["star", "global"], attn_impl="auto")
    assert auto.path(512, False, None, torch.float32, torch.device("cpu"), True) == "dense"


# ------------------------------------------------------------ host synchronisation
# On the `meta` device every .item(), .tolist(), bool(tensor) or data-dependent shape
# raises: a forward that runs there reads no device value back to the host.

def _meta(*shape, dtype=torch.float32):
    return torch.randn(*shape, device="meta", dtype=dtype, requires_grad=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("mode", ["post", "pre"])
def test_window_and_global_paths_run_on_meta(mode, dtype):
    """window_attention (a tied group, a group of one, a skipped group),
    global_attention on a subset of groups, group_lse (the fused CPU kernel
    has a meta kernel) and ChunkedLSE: forward and backward, with padding."""
    from fairseq_local.attention.window import ChunkedLSE, global_attention, window_attention

    B, G, T, d = 2, 4, 11, 8
    q, k, v = _meta(B, G, T, d, dtype=dtype), _meta(B, G, T, d, dtype=dtype), _meta(B, 3, T, d, dtype=dtype)
    kpm = torch.zeros(B, T, dtype=torch.bool, device="meta")
    plan = WindowPlan((0, 1, 2), (0, 0, 2), ((-1, -1), (0, 2), (-2, 3)))
    for pad in (None, kpm):
        out = window_attention(q, k, v, plan, pad, mode, 0.3)
        glob = global_attention(q, k, v[:, :2], [1, 3], pad, 0.3)
        lse = group_lse(q, k, pad, 0.3)
        chunked = ChunkedLSE.apply(q, k, pad, 0.3, 4)
        assert (out.shape, out.dtype, glob.shape, lse.dtype) == ((B, 3, T, d), dtype, (B, 2, T, d), torch.float32)
        (out.float().sum() + glob.float().sum() + lse.sum() + chunked.sum()).backward()
        assert q.grad.device.type == "meta" and q.grad.dtype == dtype


def test_index_tensors_are_built_once_per_device(monkeypatch):
    """After the first call, the window and global paths copy no Python list
    to the device (torch.tensor(list, device=...) is a host-to-device copy
    and, on a GPU, a synchronisation): index tensors are cached per device."""
    from fairseq_local.attention.window import global_attention, window_attention

    torch.manual_seed(0)
    q, k, v = torch.randn(2, 4, 9, 8), torch.randn(2, 4, 9, 8), torch.randn(2, 3, 9, 8)
    kpm = padding_mask([9, 5], left_pad=True)
    plan = WindowPlan((0, 1, 2), (0, 0, 2), ((-1, -1), (0, 2), (-2, 3)))

    def forward():
        return [window_attention(q, k, v, plan, kpm, mode, 0.3) for mode in ("post", "pre")] + [
            global_attention(q, k, v[:, :2], [1, 3], kpm, 0.3), plan.allowed(torch.device("cpu"))]

    first = forward()
    monkeypatch.setattr(torch, "tensor", lambda *a, **kw: pytest.fail("torch.tensor in a forward"))
    monkeypatch.setattr(torch, "as_tensor", lambda *a, **kw: pytest.fail("torch.as_tensor in a forward"))
    for a, b in zip(forward(), first):
        assert torch.equal(a, b)


def test_cached_tensors_built_under_inference_mode_serve_training():
    """An index cached by a first call under torch.inference_mode is an
    ordinary tensor: a later training forward can save it for backward."""
    from fairseq_local.attention.window import global_attention, window_attention

    plan = WindowPlan((0, 1), (1, 1), ((-7, -7), (5, 6)))  # a plan no other test uses
    q, k, v = torch.randn(1, 2, 6, 4), torch.randn(1, 2, 6, 4), torch.randn(1, 2, 6, 4)
    with torch.inference_mode():
        window_attention(q, k, v, plan, None, "pre", 0.5)
        global_attention(q, k, v[:, :1], [1], None, 0.5)
    q.requires_grad_()
    y = window_attention(q, k, v, plan, None, "pre", 0.5).sum() + global_attention(q, k, v[:, :1], [1], None, 0.5).sum()
    y.backward()
    assert q.grad is not None


SEEDED = ["random-2", "random-drop-s3", "random-wang-1", "longformer-2-2", "bigbird-1-2-2-s1"]


@pytest.mark.parametrize("token", SEEDED)
def test_seeded_masks_build_on_meta_from_one_tile(token):
    """Seeded masks (random, random-drop, random-wang, longformer, bigbird)
    index one (128, 128) tile by the positions mod 128, whatever the lengths:
    the mask builds on `meta`, and each padded sentence gets the top-left
    block of the one pattern."""
    from fairseq_local.attention.masks import parse_mask, real_positions
    from fairseq_local.attention.masks.seeded import SPAN

    mask = parse_mask(token)
    assert mask.tile().shape == (SPAN, SPAN)
    full = mask.matrix(150)
    for T in (1, 6, 13, 150):
        lengths = [T, max(1, T - 5), 1, 0] if T > 1 else [1, 0]
        for left in (True, False):
            kpm = padding_mask(lengths, left, T)
            pos = real_positions(kpm, T)
            got = mask.dense(pos, pos)
            for b, n in enumerate(lengths):
                real = (~kpm[b]).nonzero().flatten()
                assert torch.equal(got[b][real][:, real], full[:n, :n]), (T, lengths, left)
            meta = pos.to("meta")
            assert mask.dense(meta, meta).shape == (len(lengths), T, T)


@pytest.mark.parametrize("mode", ["post", "pre"])
def test_windows_wider_than_the_sentence_are_cut_to_it(mode):
    """band-1000000 (the largest window the grammar takes) and next-900000
    cost what a window of 2T − 1 costs, with the dense path's result; a plan
    whose windows all miss the sentence keeps one offset and gives 0."""
    dense, fast = pair(["band-1000000", "next-900000", "prev-2", "global"], mode=mode)
    for T in (1, 7):
        check_same(dense, fast, T, lengths=[T, max(1, T - 3)])
    plan = WindowPlan((0, 1), (0, 1), ((-1000000, 1000000), (900000, 900000)))
    assert plan.within(7).windows == ((-6, 6), (0, -1)) and plan.within(7).width == 13
    empty = WindowPlan((0,), (0,), ((5, 5),)).within(3)
    assert (empty.lo, empty.hi, empty.width) == (0, 0, 1)
