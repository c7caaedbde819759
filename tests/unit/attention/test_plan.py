"""The frozen head plan of a layer (fairseq_local/attention/plan.py) and the
one signature of the three paths."""

import ast
import dataclasses
import inspect

import pytest
import torch

from helpers import make_attention
from fairseq_local.attention import dense, flex, module, window
from fairseq_local.attention.config import ATTN_IMPLS
from fairseq_local.attention.dense import dense_path
from fairseq_local.attention.flex import flex_path
from fairseq_local.attention.layout import parse_layout
from fairseq_local.attention.masks import GlobalMask, OffsetMask, parse_mask
from fairseq_local.attention.plan import HeadPlan, PathInputs, WindowPlan
from fairseq_local.attention.window import window_path

MIXED = "[global@a,band-1@a,dam-s,aaa-1,prev-2:gate,star,dam-u:gate]"


def plan(layout: str, mode: str = "post") -> HeadPlan:
    return HeadPlan.build(parse_layout(layout)[0], mode)


def test_a_mixed_layer():
    p = plan(MIXED)
    assert p.num_heads == 7 and p.num_groups == 6 and p.head_to_group == (0, 0, 1, 2, 3, 4, 5) and not p.untied
    assert p.masks == tuple(parse_mask(t) for t in ("global", "band-1", "dam-s", "aaa-1", "prev-2", "star", "dam-u"))
    assert p.fixed_masks == (GlobalMask(), parse_mask("band-1"), GlobalMask(), GlobalMask(), parse_mask("prev-2"),
                             parse_mask("star"), GlobalMask())
    assert (p.heads_of("dam"), p.heads_of("aaa"), p.learned_heads) == ((2, 6), (3,), (2, 6, 3))
    assert [(g.kind.key, g.heads, g.specs) for g in p.learned] == [
        ("dam", (2, 6), (parse_mask("dam-s"), parse_mask("dam-u"))), ("aaa", (3,), (parse_mask("aaa-1"),))]
    assert p.masks[3].local == OffsetMask("local", -1, 1)
    assert (p.pre_learned, p.post_learned) == ((3,), (2, 6))  # post mode: DAM after the softmax, AAA before
    assert (plan(MIXED, "pre").pre_learned, plan(MIXED, "pre").post_learned) == ((2, 6, 3), ())
    assert p.gated_heads == (4, 6) and p.global_heads == (0,)
    assert p.window == WindowPlan((1, 4), (0, 3), ((-1, 1), (-2, -2)))
    assert not p.windowed and p.head_order is None and p.order_inverse is None


def test_a_windowed_layer_and_its_head_order():
    p = plan("[band-1,global,prev-1@t,global@t,identity]")
    assert p.windowed and p.global_heads == (1, 3) and p.window.heads == (0, 2, 4)
    assert p.head_order == (1, 3, 0, 2, 4) and p.order_inverse == (2, 0, 3, 1, 4)
    assert [p.head_order[i] for i in p.order_inverse] == list(range(5))
    in_order = plan("[global,global,band-2,next-1]")
    assert in_order.windowed and in_order.head_order is None and in_order.order_inverse is None
    assert plan("[global*3]").window is None and plan("[global*3]").windowed and plan("[global*3]").untied


def test_the_plan_is_frozen_and_equal_for_equal_specs():
    p = plan(MIXED)
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.mode = "pre"
    again = plan(MIXED)
    assert again == p and hash(again) == hash(p) and again is not p
    assert plan(MIXED, "pre") != p and plan(MIXED.replace("star", "logsparse")) != p
    a, b = make_attention(["band-1", "global", "dam-s", "global"]), make_attention(["band-1", "global", "dam-s", "global"], seed=1)
    assert a.plan == b.plan and a.plan.mode == a.mask_mode == "post"
    assert make_attention(["band-1", "global", "dam-s", "global"], mode="pre").plan != a.plan
    with pytest.raises(ValueError, match="mask_mode must be one of"):
        plan("[global]", "mid")


def test_every_path_has_the_same_signature():
    paths = {"dense": dense_path, "window": window_path, "flex": flex_path}
    assert module.PATHS == paths and set(paths) == set(ATTN_IMPLS) - {"auto"}
    signatures = {name: inspect.signature(fn) for name, fn in paths.items()}
    assert len(set(signatures.values())) == 1, signatures
    params = signatures["dense"].parameters
    assert list(params) == ["q", "k", "v", "plan", "inputs"]
    assert params["plan"].annotation is HeadPlan and params["inputs"].annotation is PathInputs


def test_no_path_reads_the_context_for_its_inputs():
    """What a path computes comes in through (q, k, v, plan, inputs): the
    paths' modules never call ``current()`` (the per-forward memo, a cache of
    what the inputs determine, is their only use of the context)."""
    for mod in (dense, window, flex):
        tree = ast.parse(inspect.getsource(mod))
        names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        names |= {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
        assert "current" not in names, mod
    assert "detach_weights" in {f.name for f in dataclasses.fields(PathInputs)}


def test_the_paths_agree_through_their_common_signature():
    """One plan and inputs, three paths: the same (B, H, T, d_h) output
    (FlexAttention forward only, on the CPU); only the dense path has weights."""
    attn = make_attention(["band-1", "global", "next-2", "identity"], [0, 0, 1, 1], "pre", std=0.4)
    torch.manual_seed(0)
    q, k, v = attn.project(torch.randn(9, 2, 16))
    inputs = dataclasses.replace(attn.path_inputs(), need_weights=True)
    with torch.no_grad():
        (ref, weights), *others = [path(q, k, v, attn.plan, inputs) for path in (dense_path, window_path, flex_path)]
    assert weights.shape == (2, 4, 9, 9) and torch.allclose(weights.sum(-1)[:, 1], torch.ones(2, 9))
    for out, none in others:
        assert none is None and out.shape == ref.shape == (2, 4, 9, 4)
        torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-6)
