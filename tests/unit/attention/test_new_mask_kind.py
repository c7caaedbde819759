"""A new fixed mask kind is one class, registered once: defined here, it
parses in layouts and runs through the dense path, the window path (a window
kind; any other kind falls back to dense) and FlexAttention, each equal to a
reference written by hand from the layer's weights, with padding."""

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Dict, List, Tuple

import pytest
import torch

from helpers import make_attention, padding_mask
from fairseq_local.attention import flex, window
from fairseq_local.attention.layout import parse_layout
from fairseq_local.attention.masks import (HeadMask, MaskSpecError, PositionMask, RelativeMask, int_params,
                                           parse_mask, real_positions, register_mask_kind, unregister_mask_kind)

# The kinds' rules by hand, on Python ints: query i, key j, n real tokens.
RULES: Dict[str, Callable[[int, int, int], bool]] = {
    "sink-2": lambda i, j, n: j < 2 or j == i,
    "prev-range-1-3": lambda i, j, n: 1 <= i - j <= 3,
    "prev-range-0-2": lambda i, j, n: 0 <= i - j <= 2,
    "global": lambda i, j, n: True,
}
LENGTHS = [9, 6, 1]
D = 24  # 3 heads of 8


@contextmanager
def new_kinds():
    """``sink-K`` (key j allowed iff j < K or j = i) and ``prev-range-A-B``
    (the window A <= i − j <= B), each one class registered once; removed on exit."""

    @register_mask_kind("sink", "sink-K")
    @dataclass(frozen=True)
    class SinkMask(PositionMask):
        count: int

        @classmethod
        def from_params(cls, kind: str, params: List[str]) -> HeadMask:
            (k,) = int_params(params, ("K", 1))
            return cls(k)

        def allows(self, i, j, n):
            return (j < self.count) | (j == i)

        def __str__(self) -> str:
            return f"sink-{self.count}"

    @register_mask_kind("prev-range", "prev-range-A-B")
    @dataclass(frozen=True)
    class PrevRangeMask(RelativeMask):
        near: int
        far: int

        @classmethod
        def from_params(cls, kind: str, params: List[str]) -> HeadMask:
            near, far = int_params(params, ("A", 0), ("B", 0))
            if near > far:
                raise MaskSpecError(f"A must be <= B, not {near} > {far}")
            return cls(near, far)

        @property
        def offset_window(self):
            return -self.far, -self.near

        def allows_offset(self, d):
            return (d >= -self.far) & (d <= -self.near)

        def __str__(self) -> str:
            return f"prev-range-{self.near}-{self.far}"

    try:
        yield SinkMask, PrevRangeMask
    finally:
        unregister_mask_kind("sink")
        unregister_mask_kind("prev-range")


@pytest.fixture
def kinds():
    with new_kinds() as classes:
        yield classes


def hand_matrix(token: str, n: int) -> torch.Tensor:
    return torch.tensor([[RULES[token](i, j, n) for j in range(n)] for i in range(n)], dtype=torch.bool)


def test_parsing_and_layouts(kinds):
    sink, prev_range = kinds
    assert parse_mask("sink-2") == sink(2) and parse_mask("prev-range-1-3") == prev_range(1, 3)
    assert isinstance(parse_mask("prev-range-2-2"), prev_range)  # the longest kind name wins over 'prev'
    assert str(parse_mask("sink-2+prev-range-0-1")) == "sink-2+prev-range-0-1"
    layer = parse_layout("[sink-2@a,prev-range-1-3@a,global]")[0]
    assert [str(m) for m in layer.masks] == ["sink-2", "prev-range-1-3", "global"]
    assert layer.head_to_group == (0, 0, 1)
    for token, syntax in [("sink-0", "sink-K"), ("sink", "sink-K"), ("prev-range-3-1", "prev-range-A-B")]:
        with pytest.raises(MaskSpecError, match=rf"^bad mask '{token}': .* \(expected {syntax}\)$"):
            parse_mask(token)


def test_dense_matrix_and_pair_counts_come_from_the_rule(kinds):
    for token in ("sink-2", "prev-range-1-3"):
        mask = parse_mask(token)
        for n in (1, 2, 5, 9):
            pos = torch.arange(n)
            want = hand_matrix(token, n)
            assert torch.equal(mask.dense(pos, pos).expand(n, n), want), (token, n)
            assert mask.pair_count(n) == int(want.sum())
    assert parse_mask("prev-range-1-3").offset_window == (-3, -1) and parse_mask("sink-2").offset_window is None
    # with padding: each sentence's block is its own matrix; pads of a positional kind are never allowed
    pad = padding_mask(LENGTHS, left_pad=True)
    pos = real_positions(pad, max(LENGTHS))
    dense = parse_mask("sink-2").dense(pos, pos)
    for b, n in enumerate(LENGTHS):
        real = (~pad[b]).nonzero().flatten()
        assert torch.equal(dense[b][real][:, real], hand_matrix("sink-2", n))
        assert not dense[b][pad[b]].any() and not dense[b][:, pad[b]].any()


def reference(attn, x: torch.Tensor, pad: torch.Tensor, tokens, mode: str) -> torch.Tensor:
    """The layer's output (T, B, d) by hand from its weights: per head and
    sentence, the scores of its real tokens, the hand-written mask M, ``pre``
    softmax over M (a row without a key: 0) or ``post`` M ⊙ softmax (Pande et
    al., Eq. 9), times the head's values; 0 at padding rows."""
    T, B, _ = x.shape
    dh = attn.head_dim
    v = attn.v_proj(x).view(T, B, len(tokens), dh)
    heads = torch.zeros(T, B, len(tokens), dh)
    for h, token in enumerate(tokens):
        qk = attn.qk[h]  # one Q/K group per head, in head order
        q, k = qk.q_proj(x), qk.k_proj(x)
        for b in range(B):
            real = (~pad[b]).nonzero().flatten()
            n = len(real)
            scores = attn.scaling * q[real, b] @ k[real, b].T  # (n, n)
            allowed = hand_matrix(token, n)
            if mode == "pre":
                probs = scores.masked_fill(~allowed, float("-inf")).softmax(-1).nan_to_num(0.0)
            else:
                probs = scores.softmax(-1) * allowed
            heads[real, b, h] = probs @ v[real, b, h]
    return attn.out_proj(heads.reshape(T, B, -1))


def run_path(attn, x, pad, monkeypatch) -> Tuple[torch.Tensor, Dict[str, int]]:
    """The layer's output, counting the window path's and FlexAttention's calls."""
    calls = {"window": 0, "flex": 0}
    keys, block = window.window_keys, flex.head_block_mask

    def counted(name, fn):
        def wrapper(*args, **kwargs):
            calls[name] += 1
            return fn(*args, **kwargs)
        return wrapper

    with monkeypatch.context() as m:
        m.setattr(window, "window_keys", counted("window", keys))
        m.setattr(flex, "head_block_mask", counted("flex", block))
        with torch.no_grad():  # FlexAttention has no backward on the CPU
            out, _ = attn(x, key_padding_mask=pad)
    return out, calls


@pytest.mark.parametrize("mode", ["pre", "post"])
@pytest.mark.parametrize("left_pad", [True, False])
@pytest.mark.parametrize("tokens, is_window", [(["prev-range-1-3", "global", "prev-range-0-2"], True),
                                               (["sink-2", "prev-range-1-3", "global"], False)])
def test_every_path_equals_the_hand_reference(kinds, tokens, is_window, mode, left_pad, monkeypatch):
    if flex.flex_available(torch.device("cpu"), needs_grad=False) is not None:
        pytest.skip("no FlexAttention in this torch")
    torch.manual_seed(1)
    x, pad = torch.randn(max(LENGTHS), len(LENGTHS), D), padding_mask(LENGTHS, left_pad)
    for impl, ran in [("dense", {"window": False, "flex": False}),
                      ("window", {"window": is_window, "flex": False}),  # any other kind falls back to dense
                      ("flex", {"window": False, "flex": True})]:
        attn = make_attention(tokens, mode=mode, embed_dim=D, std=D ** -0.5, attn_impl=impl)
        want = reference(attn, x, pad, tokens, mode)
        out, calls = run_path(attn, x, pad, monkeypatch)
        assert {name: count > 0 for name, count in calls.items()} == ran, (impl, calls)
        for b in range(len(LENGTHS)):  # outputs at padding positions are never used
            real = (~pad[b]).nonzero().flatten()
            err = (out[real, b] - want[real, b]).abs().max()
            assert err < 1e-5, (impl, b, float(err))


def test_a_kind_is_registered_once_and_gone_after_unregistering():
    with new_kinds() as (sink, _):
        with pytest.raises(ValueError, match="'sink' is already registered"):
            register_mask_kind("sink", "sink-K")(sink)
        assert parse_mask("sink-3") == sink(3)
    with pytest.raises(MaskSpecError, match="^unknown mask kind 'sink-3'"):
        parse_mask("sink-3")
    with pytest.raises(MaskSpecError, match=r"\(expected prev-K\)$"):  # 'prev' is the longest kind left
        parse_mask("prev-range-1-2")
    with pytest.raises(TypeError, match="no from_params"):
        register_mask_kind("nothing", "nothing")(PositionMask)
