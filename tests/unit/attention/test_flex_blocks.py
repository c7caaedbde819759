"""FlexAttention block tables from offsets (issue 34, point 3): exact cover of
the allowed pairs, built once per (windows, T), no (T, T) intermediate (counted
on the meta device), and the dense path's results through them."""

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from helpers import make_attention, padding_mask
from fairseq_local.attention.context import clear_caches
from fairseq_local.attention import flex
from fairseq_local.attention.flex import flex_attention_heads, head_block_mask
from fairseq_local.attention.flex_blocks import BLOCK, offset_block_tables, offset_windows
from fairseq_local.attention.masks import parse_mask
from fairseq_local.attention.masks.flex_rule import flex_positions

OFFSET_LAYOUT = ["band-2", "prev-1", "next-3", "identity", "global", "local-0", "prev-200", "next-130"]


def reached(lo, hi, T):
    """{query block: set of key blocks holding a pair lo <= j − i <= hi}, by brute force."""
    out = {}
    for i in range(T):
        for j in range(max(0, i + lo), min(T, i + hi + 1)):
            out.setdefault(i // BLOCK, set()).add(j // BLOCK)
    return out


@pytest.mark.parametrize("T", [1, 5, 127, 128, 129, 300, 520])
def test_tables_cover_exactly_the_allowed_blocks(T):
    """Every block with an allowed pair is listed, and no other, except one
    block for a query block whose rows allow nothing (its rows stay empty)."""
    masks = [parse_mask(t) for t in OFFSET_LAYOUT]
    windows = offset_windows(masks)
    counts, indices = offset_block_tables(windows, T, torch.device("cpu"))
    blocks = -(-T // BLOCK)
    assert counts.shape == (1, len(masks), blocks) and indices.shape == (1, len(masks), blocks, blocks)
    for h, window in enumerate(windows):
        lo, hi = window if window is not None else (-T, T)
        truth = reached(lo, hi, T)
        for q in range(blocks):
            listed = indices[0, h, q, :counts[0, h, q]].tolist()
            assert listed == sorted(listed)
            if q in truth:
                assert set(listed) == truth[q], (h, q)
            else:
                assert len(listed) <= 1, (h, q)


def test_offset_windows_only_for_offset_and_global_heads():
    assert offset_windows([parse_mask("band-2"), parse_mask("global")]) == ((-2, 2), None)
    assert offset_windows([parse_mask("band-2"), parse_mask("star")]) is None


class Sizes(TorchDispatchMode):
    """The largest tensor any op returns while active."""

    def __init__(self):
        super().__init__()
        self.largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor):
                self.largest = max(self.largest, t.numel())
        return out


def largest_while_building(tokens, B=8, T=4096):
    """The largest tensor made while building one BlockMask on the meta device."""
    masks = [parse_mask(t) for t in tokens]
    meta = torch.device("meta")
    pad = torch.zeros(B, T, dtype=torch.bool, device=meta)
    clear_caches()
    with Sizes() as sizes:
        head_block_mask(masks, *flex_positions(masks, pad, B, T, meta), pad)
    return sizes.largest


def test_offset_layouts_build_no_square_intermediate():
    """Offset and global heads at B = 8, T = 4096: nothing of T² elements or
    more; a kind the tables do not cover (star) still evaluates (B, H, T, T)
    (which shows that the count sees such tensors)."""
    T = 4096
    assert largest_while_building(["band-2", "prev-1", "next-1", "global"], T=T) < T * T
    real = torch.ones(8, T, dtype=torch.bool, device="meta")  # post mode's all-real-keys mask
    with Sizes() as sizes:
        flex._block_mask(lambda b, h, q_idx, kv_idx: real[b, kv_idx], (None,), 8, None, T, torch.device("meta"),
                         ("real",))
    assert sizes.largest < T * T
    assert largest_while_building(["band-2", "star"], T=T) >= T * T


def test_tables_are_built_once_per_windows_and_length():
    masks = [parse_mask(t) for t in ("band-1", "prev-2")]
    windows, cpu = offset_windows(masks), torch.device("cpu")
    first = offset_block_tables(windows, 300, cpu)
    assert all(a is b for a, b in zip(first, offset_block_tables(windows, 300, cpu)))
    assert offset_block_tables(windows, 301, cpu)[1].shape[-1] == 3


@pytest.mark.parametrize("mode", ["pre", "post"])
@pytest.mark.parametrize("side", ["left", "right", "none"])
@pytest.mark.parametrize("T", [1, 130, 300])
def test_offset_tables_give_the_dense_result(mode, side, T):
    attn = make_attention(OFFSET_LAYOUT, mode=mode, embed_dim=4 * len(OFFSET_LAYOUT), max_len=512)
    torch.manual_seed(T)
    H, B = len(OFFSET_LAYOUT), 3
    q, k, v = (torch.randn(B, H, T, 4) for _ in range(3))
    pad = None if side == "none" else padding_mask([T, max(1, T // 2), 1], left_pad=side == "left")
    with torch.no_grad():
        out = flex_attention_heads(q, k, v, attn.plan.fixed_masks, attn.head_to_group, pad, mode, attn.scaling)
        ref = attn.attention_probs(q, k, attn.fixed_mask(T, pad, q.device), None, pad) @ v
    assert torch.allclose(out, ref, atol=1e-5)


SPARSE = ["star", "band-2", "bigbird-1-2-2"]  # kinds the offset tables do not cover
BATCHES = [(2, 150), (3, 300), (1, 77), (4, 520), (2, 140), (3, 290), (1, 1)]


def compiled_masks_agree(backend):
    """Block masks of a sparse layout built by a compiled create_block_mask
    (``backend``) for new batch sizes, lengths and padding each time, against
    the eager ones; returns the compiled graphs' count where ``backend`` counts."""
    masks = [parse_mask(t) for t in SPARSE]
    cpu = torch.device("cpu")
    torch._dynamo.reset()
    flex._compiled_block_mask.cache_clear()
    for B, T in BATCHES:
        pad = padding_mask([T] + [max(1, T - 7 * i) for i in range(1, B)], left_pad=B % 2 == 0)
        args = (masks, *flex_positions(masks, pad, B, T, cpu), pad)
        previous = flex.set_compile_backend("cpu", backend, block_masks=True)
        try:
            got = head_block_mask(*args)
        finally:
            flex.set_compile_backend("cpu", previous, block_masks=True)
        want = head_block_mask(*args)
        assert torch.equal(got.to_dense(), want.to_dense()), (B, T)
    flex._compiled_block_mask.cache_clear()
    torch._dynamo.reset()


def test_compiled_block_masks_compile_once_per_size_class():
    """A new mask_mod closure per batch reuses the layout's graph: one per size
    class (B = 1 or more, T = 1, one 128-block or more), 4 here."""
    from torch._dynamo.testing import CompileCounter

    counter = CompileCounter()
    compiled_masks_agree(counter)
    assert counter.frame_count == len({(B == 1, T == 1, T <= 128) for B, T in BATCHES})
