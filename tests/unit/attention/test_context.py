"""The attention context (fairseq_local/attention/context.py): nesting and
inheritance, the capture against the layer's own projection and dense path,
the path override, records, the per-forward memo, the noise drawn on entry
and the registry of process-wide caches."""

import pytest
import torch

import fairseq_local  # noqa: F401  (registers kinds, archs and criteria)
from helpers import make_attention, padding_mask
from fairseq_local.attention import dense, module
from fairseq_local.errors import OptionError
from fairseq_local.attention.context import (AttentionCapture, attention_context, cached, clear_caches, current,
                                             memoised)
from fairseq_local.models import build_encoder

D = 16
SMALL = {"encoder_embed_dim": 32, "encoder_ffn_embed_dim": 64, "dropout": 0.0, "dam_max_len": 16}


def batch(lengths=(7, 4), seed=1):
    torch.manual_seed(seed)
    return torch.randn(max(lengths), len(lengths), D), padding_mask(list(lengths), left_pad=True)


def test_outside_any_context_every_field_is_none():
    ctx = current()
    assert (ctx.records, ctx.capture, ctx.impl, ctx.memo) == (None, None, None, None)


def test_nested_contexts_inherit_what_they_do_not_set():
    cap = AttentionCapture(weights=True)
    with attention_context(capture=cap, impl="window") as outer:
        assert current() is outer and outer.records is None and outer.memo is None
        with attention_context(records=True, memo=True) as inner:
            assert inner.capture is cap and inner.impl == "window"  # inherited
            assert inner.records == [] and inner.memo == {}
            with attention_context(impl="dense", capture=None) as innermost:
                assert innermost.impl == "dense" and innermost.capture is None
                assert innermost.records is inner.records and innermost.memo is inner.memo
            with attention_context(records=True, memo=False) as fresh:
                assert fresh.records is not inner.records and fresh.memo is None
            assert current() is inner
        assert current() is outer
    assert current().impl is None and current().capture is None
    with pytest.raises(OptionError, match="impl must be one of"):
        with attention_context(impl="sparse"):
            pass


def test_records_go_to_the_innermost_list_that_was_opened():
    attn = make_attention(["aaa", "dam-s", "band-1", "global:gate"], embed_dim=D).train()
    x, pad = batch()
    with attention_context(records=True) as outer:
        attn(x, key_padding_mask=pad)
        with attention_context(impl="dense"):  # records inherited
            attn(x, key_padding_mask=pad)
        with attention_context(records=True) as inner:
            attn(x, key_padding_mask=pad)
    assert len(outer.records) == 2 and len(inner.records) == 1
    rec = inner.records[0]
    assert rec.module is attn and rec.padding_mask is pad and (rec.T, rec.B) == (7, 2)
    assert rec.learned.shape == (2, 2, 7, 7) and rec.realised["aaa"].extra.shape == (2, 2, 7)


@pytest.mark.parametrize("mode", ["post", "pre"])
def test_capture_equals_the_projection_and_dense_path(mode):
    """Input, weights z_h·A_h and head outputs (gate applied) equal those
    computed from project(), the dense path and gate_scale(); the output is
    out_proj of the head outputs; detached unless the graph is asked for."""
    tokens = ["band-1:gate", "global", "dam-u", "prev-2:gate"]
    attn = make_attention(tokens, [0, 0, 1, 2], mode, embed_dim=D, std=0.4).eval()
    with torch.no_grad():
        attn.gates.log_alpha.copy_(torch.tensor([0.3, -0.2]))  # gates strictly between 0 and 1
    x, pad = batch()
    x.requires_grad_()
    cap = AttentionCapture(inputs=True, weights=True, head_outputs=True)
    with attention_context(capture=cap):
        y, _ = attn(x, key_padding_mask=pad)
    (call,) = cap.calls
    assert call.module is attn and cap.of(attn) == [call] and call.padding_mask is pad
    q, k, v = attn.project(x)
    learned, _ = attn.learned_mask(x, pad)
    probs = dense.attention_probs(q, k, attn.plan, attn.path_inputs(pad, None, learned), attn.fixed_mask(7, pad, x.device))
    z = attn.gate_scale(probs.dtype, probs.device)
    assert 0 < float(z.min()) < 1 and z.shape == (1, 4, 1, 1)
    assert torch.equal(call.input, x.detach())
    torch.testing.assert_close(call.weights, (probs * z).detach(), rtol=0, atol=0)
    torch.testing.assert_close(call.head_outputs, (torch.matmul(probs, v) * z).detach(), rtol=1e-6, atol=1e-7)
    assert not any(t.requires_grad for t in (call.input, call.weights, call.head_outputs))
    concat = call.head_outputs.permute(2, 0, 1, 3).reshape(7, 2, D)
    torch.testing.assert_close(attn.out_proj(concat), y, rtol=1e-6, atol=1e-6)
    graph = AttentionCapture(head_outputs=True, graph=True)
    with attention_context(capture=graph):
        attn(x, key_padding_mask=pad)
    (g,) = torch.autograd.grad(graph.calls[0].head_outputs.sum(), x)
    assert g.abs().sum() > 0 and graph.calls[0].input is None and graph.calls[0].weights is None


def spied_paths(monkeypatch):
    """The names of the paths the module runs, in order."""
    taken = []
    for name, fn in list(module.PATHS.items()):
        monkeypatch.setitem(module.PATHS, name, lambda *a, name=name, fn=fn: taken.append(name) or fn(*a))
    return taken


def test_override_forces_each_path_with_the_same_result(monkeypatch):
    attn = make_attention(["band-1", "global", "next-2", "global"], [0, 0, 1, 2], "post", embed_dim=D,
                          attn_impl="auto", std=0.4)
    x, pad = batch()
    taken = spied_paths(monkeypatch)
    with torch.no_grad():
        ref, _ = attn(x, key_padding_mask=pad)  # auto, 7 positions: dense
        outs = {}
        for impl in ("dense", "window", "flex", "auto"):
            with attention_context(impl=impl):
                outs[impl], _ = attn(x, key_padding_mask=pad)
        with attention_context(impl="window", capture=AttentionCapture(weights=True)):
            attn(x, key_padding_mask=pad)  # weights are asked for: dense whatever the override
    assert taken == ["dense", "dense", "window", "flex", "dense", "dense"]
    real = (~pad).T.unsqueeze(-1)
    for impl, out in outs.items():
        torch.testing.assert_close(out * real, ref * real, rtol=1e-5, atol=1e-5)
    with attention_context(impl="flex"):  # no backward on the CPU: one line, before any work
        assert attn.path(7, False, None, torch.float32) == "flex"
        with pytest.raises(OptionError, match="no backward on CPU"):
            attn.check_trainable()


def test_the_encoder_hands_back_its_records_and_the_analysis_capture():
    enc = build_encoder("transformer_local", dict(SMALL, attn_layout="[dam-s,band-1,global,global]*6",
                                                  encoder_attention_heads=4)).eval()
    tokens = torch.tensor([[1, 1, 5, 6, 2], [7, 8, 9, 10, 2]])
    cap = AttentionCapture(inputs=True)
    with attention_context(capture=cap, impl="dense") as outer:
        out = enc(tokens, torch.tensor([3, 5]))
    assert outer.records is None and [r.module for r in out["sparsity"]] == enc.attention_modules()
    assert [c.module for c in cap.calls] == enc.attention_modules()
    assert all(c.input.shape == (5, 2, 32) and c.weights is None for c in cap.calls)


def test_memoised_shares_within_a_memo_by_key_and_anchor():
    built = []

    def build():
        built.append(1)
        return object()

    a, b = torch.zeros(2), torch.zeros(2)
    first = memoised("k", a, build)
    assert memoised("k", a, build) is not first and len(built) == 2  # no memo: built every time
    with attention_context(memo=True):
        first = memoised("k", a, build)
        assert memoised("k", a, build) is first and memoised("k", None, build) is not first
        assert memoised("k", b, build) is not first and memoised("other", a, build) is not first
        assert len(built) == 6
    with attention_context(memo=True):
        assert memoised("k", a, build) is not first


def test_entering_a_training_context_draws_the_noise_as_the_encoder_did():
    """One draw per distinct DAM mask, in first-use order, on entry: the
    same RNG calls as a loop over {id(d): d for a in modules for d in a.learned["dam"]}."""
    enc = build_encoder("transformer_local", dict(SMALL, attn_layout="[dam-s,dam-u,global,global]*6",
                                                  encoder_attention_heads=4)).train()
    modules = enc.attention_modules()
    torch.manual_seed(3)
    with attention_context(sample_noise=modules):
        drawn = [d.noise for d in modules[0].learned["dam"]]
        after = torch.rand(3)
    assert all(d.noise is modules[0].learned["dam"][i].noise
               for m in modules for i, d in enumerate(m.learned["dam"]))
    torch.manual_seed(3)
    for d in {id(d): d for a in modules for d in a.learned["dam"]}.values():
        d.resample()
    assert all(torch.equal(a, d.noise) for a, d in zip(drawn, modules[0].learned["dam"]))
    assert torch.equal(after, torch.rand(3))
    torch.manual_seed(4)
    with attention_context(sample_noise=()):  # nothing to draw: the generator is untouched
        untouched = torch.rand(3)
    torch.manual_seed(4)
    assert torch.equal(untouched, torch.rand(3))


def test_a_new_noise_draw_starts_a_fresh_memo():
    """What a memo holds was gathered with the noise of its draw: entering a
    context that draws new noise does not inherit the enclosing memo (unless
    one is given), and a context that draws nothing does."""
    enc = build_encoder("transformer_local", dict(SMALL, attn_layout="[dam-s,global,global,global]*6",
                                                  encoder_attention_heads=4)).train()
    modules = enc.attention_modules()
    with attention_context(memo=True) as outer:
        outer.memo["x"] = 1
        with attention_context(sample_noise=modules) as drawn:
            assert drawn.memo == {} and drawn.memo is not outer.memo
        with attention_context(sample_noise=modules, memo=False) as none:
            assert none.memo is None
        with attention_context(sample_noise=()) as same:
            assert same.memo is outer.memo


def test_cached_functions_are_cleared_together():
    calls = []

    @cached(maxsize=4)
    def square(n: int) -> int:
        calls.append(n)
        return n * n

    assert square(3) == square(3) == 9 and calls == [3]
    clear_caches()
    assert square(3) == 9 and calls == [3, 3]
    assert square.cache_info().currsize == 1
