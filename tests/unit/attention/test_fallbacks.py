"""GPU training that holds (issue 34, points 1-2): compiled FlexAttention's
backward at every length, a recompile limit per layout that fails loudly, and
every fallback to a slower path announced once with its reason.

The compile tests go through the real inductor backend on the CPU (dynamo's
CompileCounter skips AOTAutograd, where the backward's strides are fixed);
inductor runs the C++ compiler, so they are slow tests."""

import warnings

import pytest
import torch

from helpers import make_attention
from fairseq_local.attention import fallbacks, flex, module, window
from fairseq_local.attention.fallbacks import FallbackWarning
from fairseq_local.attention.flex import flex_attention_heads
from fairseq_local.attention.masks import parse_mask

CUDA = torch.device("cuda")


@pytest.fixture(autouse=True)
def fresh_announcements():
    fallbacks.reset()
    yield
    fallbacks.reset()


@pytest.fixture
def inductor():
    """torch.compile's inductor on the CPU, its caches off, compiling in this
    process (no worker pool)."""
    torch._dynamo.reset()
    with torch._inductor.config.patch(fx_graph_cache=False, autotune_local_cache=False, compile_threads=1):
        yield
    torch._dynamo.reset()


@pytest.mark.slow  # inductor runs the C++ compiler
def test_compiled_backward_at_every_length(inductor):
    """The plugin's compile settings, applied to a small graph with dynamic
    sizes: forward and backward at lengths 1, 5, 3 and 9 each give autograd's
    eager gradient.  (Under ``backed_size_oblivious`` the backward kept the
    first call's strides and failed from the second length on: "expected
    size 2==2, stride 20==4".)"""
    def f(x, w):
        return (torch.sin(x) * w).sum()

    fn = torch.compile(f, backend="inductor", dynamic=True)
    w = torch.randn(4, requires_grad=True)
    for n in (1, 5, 3, 9):
        x = torch.randn(2, n, 4, requires_grad=True)
        with flex.compile_settings():
            got = torch.autograd.grad(fn(x, w), (x, w))
        ref = torch.autograd.grad(f(x, w), (x, w))
        for g, r in zip(got, ref):
            assert torch.allclose(g, r, atol=1e-6), n


@pytest.mark.slow  # inductor runs the C++ compiler
def test_compiled_flex_attention_at_every_length(inductor):
    """FlexAttention itself compiled by inductor for one layout (forward: the
    CPU has no FlexAttention backward), at new batch sizes and lengths,
    within its layout's recompile limit and equal to the uncompiled kernel."""
    masks = [parse_mask(t) for t in ("band-1", "star")]
    previous = flex.set_compile_backend("cpu", "inductor")
    try:
        for B, T in ((2, 9), (1, 1), (3, 5), (2, 130)):
            q, k, v = (torch.randn(B, 2, T, 8) for _ in range(3))
            with torch.no_grad():
                out = flex_attention_heads(q, k, v, masks, (0, 1), None, "pre", 0.35)
                flex.set_compile_backend("cpu", None)
                ref = flex_attention_heads(q, k, v, masks, (0, 1), None, "pre", 0.35)
                flex.set_compile_backend("cpu", "inductor")
            assert torch.allclose(out, ref, atol=1e-5), (B, T)
    finally:
        flex.set_compile_backend("cpu", previous)
        flex._compiled.cache_clear()


@pytest.mark.skipif(not flex._ISOLATE, reason="torch.compile has no isolate_recompiles")
def test_layout_recompile_limit_fails_loudly(monkeypatch):
    """Past its layout's recompile limit a compiled FlexAttention raises: it
    never runs eagerly (with (T, T) scores) behind a log line."""
    from torch._dynamo.testing import CompileCounter

    torch._dynamo.reset()
    flex._compiled.cache_clear()
    monkeypatch.setattr(flex, "LAYOUT_RECOMPILE_LIMIT", 1)
    previous = flex.set_compile_backend("cpu", CompileCounter())
    masks = [parse_mask("band-1")] * 2
    try:
        with torch.no_grad():
            flex_attention_heads(*(torch.randn(2, 2, 9, 8) for _ in range(3)), masks, (0, 1), None, "pre", 0.35)
            with pytest.raises(torch._dynamo.exc.FailOnRecompileLimitHit):  # B = 1: a graph of its own
                flex_attention_heads(*(torch.randn(1, 2, 9, 8) for _ in range(3)), masks, (0, 1), None, "pre", 0.35)
    finally:
        flex.set_compile_backend("cpu", previous)
        flex._compiled.cache_clear()
        torch._dynamo.reset()


def training(tokens, dropout):
    attn = make_attention(tokens, embed_dim=8 * len(tokens)).train()
    attn.dropout_module.p = dropout
    return attn


def test_auto_keeps_window_path_with_attention_dropout(monkeypatch):
    """``auto`` on CUDA with attention dropout: window layouts keep the window
    path (dropout on its weights) without a warning."""
    monkeypatch.setattr(module, "flex_available", lambda device, needs_grad: None)
    attn = training(["band-2", "prev-1", "global", "next-3"], 0.1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        assert attn.path(4096, False, None, torch.float16, CUDA, needs_grad=True) == "window"


def test_auto_announces_dense_for_dropout_under_flex(monkeypatch):
    """A layout only FlexAttention runs sparsely takes the dense path with
    attention dropout on, and says so once, with the cure."""
    monkeypatch.setattr(module, "flex_available", lambda device, needs_grad: None)
    attn = training(["bigbird-1-2-2", "star"], 0.1)
    with pytest.warns(FallbackWarning, match="no attention dropout.*--attention-dropout 0"):
        assert attn.path(4096, False, None, torch.float16, CUDA, needs_grad=True) == "dense"
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)  # once per run
        assert attn.path(2048, False, None, torch.float16, CUDA, needs_grad=True) == "dense"
    attn.dropout_module.p = 0.0
    assert attn.path(4096, False, None, torch.float16, CUDA, needs_grad=True) == "flex"


def test_auto_announces_missing_flex_attention(monkeypatch):
    """Where FlexAttention cannot run (no AuxRequest: torch < 2.9), ``auto``
    says why it takes the dense path instead of a wrong version."""
    monkeypatch.setattr(flex, "AuxRequest", None)
    attn = training(["bigbird-1-2-2", "star"], 0.0)
    with pytest.warns(FallbackWarning, match=r"AuxRequest\) needs torch >= 2.9"):
        assert attn.path(4096, False, None, torch.float16, CUDA, needs_grad=True) == "dense"


def test_auto_announces_dense_for_window_heads_in_float64():
    attn = training(["band-2", "global"], 0.0)
    with pytest.warns(FallbackWarning, match="float64 on cpu take the dense path"):
        assert attn.path(4096, False, None, torch.float64, torch.device("cpu")) == "dense"


def test_chunked_lse_on_cuda_is_announced(monkeypatch):
    """Post-mode windows on CUDA without FlexAttention take ChunkedLSE, and say why."""
    monkeypatch.setattr(flex, "flex_available", lambda device, needs_grad: "no Triton here")
    with pytest.warns(FallbackWarning, match="ChunkedLSE.*no Triton here"):
        assert window.lse_route(CUDA, torch.bfloat16, True) == "chunked"
    monkeypatch.setattr(flex, "flex_available", lambda device, needs_grad: None)
    assert window.lse_route(CUDA, torch.bfloat16, True) == "flex"
    assert window.lse_route(torch.device("cpu"), torch.float16, True) == "group"


def test_shape_settings_do_not_freeze_strides():
    assert not flex.SHAPE_SETTINGS.get("backed_size_oblivious", False)
