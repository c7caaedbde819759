"""Seeded random patterns are functions of the positions alone: SparseBERT's
random drop is one fixed pattern at its length n = 128 (SparseBERT §3.1.1,
§3.3), so a shorter sentence sees the top-left block of it, through the dense,
window and FlexAttention paths.  And Wang et al.'s size of a random pattern,
the number of positions selected divided by 2N (Adaptive Axis Attention
§2.2, "Random Patterns"), as the kind ``random-wang-R``."""

import pytest
import torch
from torch.nn.attention.flex_attention import create_mask

from helpers import make_attention, padding_mask
from fairseq_local.attention import flex
from fairseq_local.attention.masks import MaskSpecError, mask_mod, parse_mask, real_positions, seeded

PAPER_N = 128  # SparseBERT §3.1.1: n = 128
SEEDED = ["random-2", "random-3-s7", "random-drop", "random-drop-s5", "longformer-2-2", "longformer-1-3-s2",
          "bigbird-1-2-2", "bigbird-1-2-2-s3", "random-wang-1", "random-wang-2-s4"]
BIG = 300  # more than two periods of the pattern
LENGTHS = [150, 77, 5]  # across one period, within it, and short
D = 24  # 3 heads of 8


def matrix(token: str, n: int) -> torch.Tensor:
    """The (n, n) bool matrix of a sentence of n tokens, by the dense path."""
    pos = torch.arange(n)
    return parse_mask(token).dense(pos, pos).expand(n, n)


def globals_of(m: torch.Tensor) -> list:
    """The rows that allow every key (a longformer mask's global positions)."""
    return m.all(-1).nonzero().flatten().tolist()


# ------------------------------------------------------------ fix 1: positions only


def test_the_pattern_is_drawn_at_sparseberts_length():
    assert seeded.SPAN == PAPER_N


@pytest.mark.parametrize("token", SEEDED)
def test_a_shorter_sentence_sees_the_top_left_block(token):
    big = matrix(token, BIG)
    for n1 in (1, 2, 5, 17, 64, 127, 128, 129, 200, 256):
        assert torch.equal(matrix(token, n1), big[:n1, :n1]), n1


@pytest.mark.parametrize("token", SEEDED)
def test_flex_mask_mod_is_the_same_block(token):
    """FlexAttention's mask_mod on padded batches: each sentence's block is the
    top-left block of the one pattern, on real positions and padded indices."""
    mask, big = parse_mask(token), matrix(token, BIG)
    B, T = len(LENGTHS), max(LENGTHS)
    for left in (True, False):
        pad = padding_mask(LENGTHS, left)
        pos = real_positions(pad, T)
        n = pos.amax(-1) + 1
        got = create_mask(mask_mod(mask, pos, n), B, 1, T, T, device="cpu")[:, 0]
        for b, length in enumerate(LENGTHS):
            real = (~pad[b]).nonzero().flatten()
            assert torch.equal(got[b][real][:, real], big[:length, :length]), (left, b)
            assert not got[b][pad[b]].any() and not got[b][:, pad[b]].any()


def reference(attn, x: torch.Tensor, pad: torch.Tensor, tokens, mode: str) -> torch.Tensor:
    """The layer's output (T, B, d) by hand from its weights, each sentence of
    n tokens masked by the top-left n×n block of its head's pattern at BIG."""
    T, B, _ = x.shape
    dh = attn.head_dim
    big = [matrix(t, BIG) for t in tokens]
    v = attn.v_proj(x).view(T, B, len(tokens), dh)
    heads = torch.zeros(T, B, len(tokens), dh)
    for h in range(len(tokens)):
        qk = attn.qk[h]
        q, k = qk.q_proj(x), qk.k_proj(x)
        for b in range(B):
            real = (~pad[b]).nonzero().flatten()
            n = len(real)
            scores = attn.scaling * q[real, b] @ k[real, b].T  # (n, n)
            allowed = big[h][:n, :n]
            if mode == "pre":
                probs = scores.masked_fill(~allowed, float("-inf")).softmax(-1).nan_to_num(0.0)
            else:  # Pande et al., Eq. 9
                probs = scores.softmax(-1) * allowed
            heads[real, b, h] = probs @ v[real, b, h]
    return attn.out_proj(heads.reshape(T, B, -1))


@pytest.mark.parametrize("mode", ["pre", "post"])
@pytest.mark.parametrize("impl", ["dense", "window", "flex"])
def test_every_path_masks_each_sentence_with_the_top_left_block(impl, mode):
    if impl == "flex" and flex.flex_available(torch.device("cpu"), needs_grad=False) is not None:
        pytest.skip("no FlexAttention in this torch")
    tokens = ["random-2", "bigbird-1-2-2-s3", "random-drop"]  # no window form: 'window' runs them dense
    torch.manual_seed(1)
    x, pad = torch.randn(max(LENGTHS), len(LENGTHS), D), padding_mask(LENGTHS, left_pad=True)
    attn = make_attention(tokens, mode=mode, embed_dim=D, std=D ** -0.5, attn_impl=impl, max_len=512)
    want = reference(attn, x, pad, tokens, mode)
    with torch.no_grad():  # FlexAttention has no backward on the CPU
        out, _ = attn(x, key_padding_mask=pad)
    for b in range(len(LENGTHS)):  # outputs at padding positions are never used
        real = (~pad[b]).nonzero().flatten()
        assert (out[real, b] - want[real, b]).abs().max() < 1e-5, b


def test_the_seed_fixes_the_pattern():
    for kind in ("random-2", "random-drop", "longformer-2-2", "bigbird-1-2-2", "random-wang-1"):
        m = matrix(kind, PAPER_N)
        assert torch.equal(m, matrix(f"{kind}-s0", PAPER_N))  # seed 0 is the default
        assert torch.equal(m, parse_mask(kind).matrix(PAPER_N))  # a fresh object, the same draw
        assert not torch.equal(m, matrix(f"{kind}-s1", PAPER_N)), kind


def test_counts_at_the_papers_length_and_what_a_shorter_row_keeps():
    """At n = 128 each definition holds exactly; a shorter sentence's row keeps
    those of its entries that fall inside it (fewer than R keys, say)."""
    r = matrix("random-2", PAPER_N)
    assert r.sum(-1).tolist() == [2] * PAPER_N  # R distinct keys per row
    for n in (9, 50):
        assert torch.equal(matrix("random-2", n).sum(-1), r[:n, :n].sum(-1))
    assert int(matrix("random-2", 9).sum()) < 2 * 9  # at 9 tokens most rows lost their keys
    assert int((~matrix("random-drop", PAPER_N)).sum()) == PAPER_N  # SparseBERT §3.3: 128 entries dropped
    assert len(globals_of(matrix("longformer-2-2", PAPER_N))) == 2  # §4.2: two random global positions
    b = matrix("bigbird-1-2-2", PAPER_N)
    assert torch.equal(b, matrix("longformer-1-2", PAPER_N) | r)  # the same seed's draws


@pytest.mark.parametrize("token", ["random-2", "random-drop-s5", "random-wang-3"])
def test_beyond_the_papers_length_the_pattern_repeats(token):
    tile = matrix(token, PAPER_N)
    assert torch.equal(matrix(token, BIG), tile.repeat(3, 3)[:BIG, :BIG])
    assert matrix("random-2", 256).sum(-1).tolist() == [4] * 256
    assert int((~matrix("random-drop", 256)).sum()) == 4 * PAPER_N


def test_longformer_keeps_its_window_and_repeats_its_globals():
    g = globals_of(matrix("longformer-2-2", PAPER_N))
    every = ".".join(str(p + k * PAPER_N) for k in range(3) for p in g)
    want = matrix("local-2", BIG) | matrix(f"axis-{every}-{every}", BIG)
    assert torch.equal(matrix("longformer-2-2", BIG), want)
    assert torch.equal(matrix("bigbird-2-2-2", BIG), want | matrix("random-2", BIG))


# ----------------------------------------------------- fix 2: Wang et al.'s size


@pytest.mark.parametrize("r", [1, 2, 5])
def test_wang_random_pattern_selects_2RN_positions(r):
    """Adaptive Axis Attention §2.2: a random pattern of size N_r selects
    2N·N_r positions of the N×N mask, uniformly (not per row)."""
    m = matrix(f"random-wang-{r}", PAPER_N)
    assert int(m.sum()) == 2 * r * PAPER_N
    rows = m.sum(-1)
    assert int(rows.min()) < int(rows.max())  # some rows get more than others
    assert int(matrix(f"random-wang-{r}", 2 * PAPER_N).sum()) == 4 * 2 * r * PAPER_N  # per 128×128 block


def test_wang_size_of_our_random_kinds():
    """random-R selects R·N positions, Wang's size R/2 (their footnote 3:
    BigBird's random size 2 is their size 1); random-wang-64 is every entry."""
    assert int(matrix("random-2", PAPER_N).sum()) / (2 * PAPER_N) == 1
    assert int(matrix("random-wang-1", PAPER_N).sum()) / (2 * PAPER_N) == 1
    assert bool(matrix("random-wang-64", PAPER_N).all()) and bool(matrix("random-wang-99", PAPER_N).all())


def test_wang_kind_parses():
    from fairseq_local.attention.masks import RandomMask, RandomWangMask

    assert parse_mask("random-wang-2") == RandomWangMask(2, 0)
    assert parse_mask("random-wang-2-s4") == RandomWangMask(2, 4)
    assert parse_mask("random-2") == RandomMask(2, 0)  # the longest kind name wins
    for token in ("random-wang-2", "random-wang-3-s4", "local-1+random-wang-1-s2"):
        assert str(parse_mask(token)) == token
    assert str(parse_mask("random-wang-1-s0")) == "random-wang-1"
    for token in ("random-wang", "random-wang-0", "random-wang-1-2", "random-wang-x"):
        with pytest.raises(MaskSpecError, match=r"\(expected random-wang-R\[-sSEED\]\)$"):
            parse_mask(token)
