"""Fixed sparse patterns of SparseBERT and Adaptive Axis Attention: exact matrices,
random draws, sparsity, parsing, padding invariance and use in attention."""


import pytest
import torch

from fairseq_local.attention.layout import format_layout, parse_layout
from helpers import make_attention, padding_mask
from fairseq_local.attention.masks import (
    BigBirdMask,
    LongformerMask,
    MaskSpecError,
    NoDiagMask,
    OrMask,
    RandomDropMask,
    RandomMask,
    parse_mask,
    real_positions,
)
from fairseq_local_cli.sparsity import main, sparsity


def dense(token: str, n: int) -> torch.Tensor:
    pos = torch.arange(n)
    return parse_mask(token).dense(pos, pos).expand(n, n).int()


def rows(*lines: str):
    """'110' style rows -> list of int lists."""
    return [[int(c) for c in line] for line in lines]


# Written out by hand from the definitions (i = row = query, j = column = key).
EXPECTED = {
    "local-0": rows("100000", "010000", "001000", "000100", "000010", "000001"),
    "local-1": rows("110000", "111000", "011100", "001110", "000111", "000011"),
    # global-G: the first G rows and columns.
    "global-2": rows("111111", "111111", "110000", "110000", "110000", "110000"),
    # axis-ROWS-COLS (Adaptive Axis Attention, Eq. 7).
    "axis-1-3.4": rows("000110", "111111", "000110", "000110", "000110", "000110"),
    "axis-_-2": rows("001000", "001000", "001000", "001000", "001000", "001000"),
    "axis-0.5-_": rows("111111", "000000", "000000", "000000", "000000", "111111"),
    # diagonal (Adaptive Axis Attention, Eq. 6): |i - j| in O.
    "diagonal-0.1.4": rows("110010", "111001", "011100", "001110", "100111", "010011"),
    "diagonal-2": rows("001000", "000100", "100010", "010001", "001000", "000100"),
    "no-diag": rows("011111", "101111", "110111", "111011", "111101", "111110"),
    "star": rows("111111", "111000", "111100", "101110", "100111", "100011"),
    # logsparse: |i - j| in {0, 1, 2, 4} at n = 6 (3 and 5 are not powers of 2).
    "logsparse": rows("111010", "111101", "111110", "011111", "101111", "010111"),
    # strided-2 at n = 8: |i - j| <= 2 or even, i.e. in {0, 1, 2, 4, 6}.
    "strided-2": rows(
        "11101010", "11110101", "11111010", "01111101",
        "10111110", "01011111", "10101111", "01010111",
    ),
    # strided-3 at n = 8: |i - j| <= 3 or 6.
    "strided-3": rows(
        "11110010", "11111001", "11111100", "11111110",
        "01111111", "00111111", "10011111", "01001111",
    ),
    # fixed-L-C: same block of L, or a column with j mod L >= L - C.
    "fixed-2-1": rows("110101", "110101", "011101", "011101", "010111", "010111"),
    "fixed-3-1": rows("111001", "111001", "111001", "001111", "001111", "001111"),
    "fixed-4-1": rows("111100", "111100", "111100", "111100", "000111", "000111"),
    "fixed-3-0": rows("111000", "111000", "111000", "000111", "000111", "000111"),
    # OR-combination (Adaptive Axis Attention, Eq. 8).
    "local-1+global-1": rows("111111", "111000", "111100", "101110", "100111", "100011"),
    "diagonal-2+axis-_-0": rows("101000", "100100", "100010", "110001", "101000", "100100"),
}


@pytest.mark.parametrize("token", sorted(EXPECTED))
def test_exact_matrix(token):
    expected = EXPECTED[token]
    assert dense(token, len(expected)).tolist() == expected


def test_logsparse_reaches_every_power_of_two():
    row0 = dense("logsparse", 20)[0]
    assert row0.nonzero().flatten().tolist() == [0, 1, 2, 4, 8, 16]


def test_relative_flags():
    for token in ["local-2", "diagonal-0.3", "no-diag", "logsparse", "strided-4", "local-1+diagonal-5"]:
        assert parse_mask(token).relative, token
    for token in ["global-1", "axis-0-0", "star", "fixed-4-1", "random-2", "random-drop",
                  "longformer-2-2", "bigbird-1-2-2", "local-1+global-1"]:
        assert not parse_mask(token).relative, token
    assert parse_mask("global").is_global and not parse_mask("global-1").is_global
    assert parse_mask("star+global").is_global and not parse_mask("star+local-3").is_global


# ---------------------------------------------------------------------- random


N = 128  # the random kinds' tile: their definitions hold exactly at SparseBERT's n = 128 (§3.1.1)


def test_random_rows_distinct_deterministic_and_seeded():
    m = dense("random-2", N)
    assert m.sum(-1).tolist() == [2] * N  # R distinct keys per row
    assert torch.equal(m, dense("random-2", N))  # same seed: same matrix
    assert torch.equal(m, dense("random-2-s0", N))
    assert dense("random-128", N).sum() == N * N and dense("random-200", N).sum() == N * N  # R >= 128
    assert not torch.equal(dense("random-2", N), dense("random-2-s1", N))
    assert not torch.equal(dense("random-3", N), dense("random-3-s7", N))
    # The same seed gives the same matrix from a fresh mask object, too.
    assert torch.equal(RandomMask(2, 5).matrix(N), parse_mask("random-2-s5").matrix(N))


def test_random_keys_are_roughly_uniform():
    # Over 50 seeds and the 128 rows each key is drawn with probability R/128 = 1/4.
    freq = torch.stack([RandomMask(32, s).matrix(N) for s in range(50)]).float().mean((0, 1))
    assert freq.min() > 0.22 and freq.max() < 0.28, freq


def test_random_drop_removes_exactly_128_entries():
    m = dense("random-drop", N)
    assert m.numel() - m.sum() == N  # SparseBERT §3.3: "the same number (128) of entries"
    assert torch.equal(m, dense("random-drop", N))
    assert not torch.equal(dense("random-drop", N), dense("random-drop-s3", N))
    # Uniform among all 128² entries: over seeds, the diagonal is hit ~1/128 of the time.
    drops = torch.stack([~RandomDropMask(s).matrix(N) for s in range(200)]).float()
    assert drops.sum((1, 2)).eq(N).all()
    assert 0.5 / N < drops[:, range(N), range(N)].sum() / drops.sum() < 2 / N
    assert dense("no-diag", N).sum() == dense("random-drop", N).sum()  # same count as no-diag


def _globals_of(m: torch.Tensor) -> set:
    return set(torch.nonzero(m.all(-1)).flatten().tolist())


def test_longformer_is_window_plus_random_global_rows_and_columns():
    local1 = dense("local-1", N).bool()
    pos = torch.arange(N)
    seen = set()
    for s in range(10):
        m = LongformerMask(1, 2, s).matrix(N)
        g = _globals_of(m)  # a non-global row has at most 3 + 2 < 128 ones
        assert len(g) == 2
        axis = parse_mask(f"axis-{'.'.join(map(str, sorted(g)))}-{'.'.join(map(str, sorted(g)))}")
        assert torch.equal(m, local1 | axis.dense(pos, pos))
        assert torch.equal(m, LongformerMask(1, 2, s).matrix(N))  # deterministic
        seen.add(tuple(sorted(g)))
    assert len(seen) > 1  # the seed changes the positions
    assert dense("longformer-0-128", 4).sum() == 16  # G >= 128: every position


def test_bigbird_is_longformer_or_random_of_the_same_seed():
    for s in [0, 4]:
        m = BigBirdMask(1, 2, 2, s).matrix(N)
        assert torch.equal(m, LongformerMask(1, 2, s).matrix(N) | RandomMask(2, s).matrix(N))
        assert torch.equal(m, BigBirdMask(1, 2, 2, s).matrix(N))
        assert len(_globals_of(m)) >= 2 and (m >= dense("local-1", N).bool()).all()
    assert not torch.equal(BigBirdMask(1, 1, 1, 0).matrix(N), BigBirdMask(1, 1, 1, 1).matrix(N))


# -------------------------------------------------------------------- sparsity


@pytest.mark.parametrize(
    "token, paper", [("star", 96.1), ("logsparse", 89.8), ("strided-4", 70.4), ("fixed-4-1", 72.7)]
)
def test_sparsebert_table3(token, paper):
    assert round(100 * sparsity(token, 128), 1) == paper


@pytest.mark.parametrize("n", [2, 3, 5, 8, 17, 128, 512])
def test_seed004_footnote_local2(n):
    # Adaptive Axis Attention, footnote 5: a local pattern of size 2 has 5N - 6 ones.
    assert dense("local-2", n).sum() == 5 * n - 6
    assert sparsity("local-2", n) == pytest.approx(1 - 5 / n + 6 / n**2, abs=1e-12)


def test_sparsity_seed_override():
    for s in range(3):
        assert sparsity("random-drop-s9", N, seed=s) == pytest.approx(1 / N)
        assert sparsity("random-2", N, seed=s) == pytest.approx(1 - 2 / N)
    assert sparsity("global", 7) == 0.0 and sparsity("no-diag", 4) == pytest.approx(0.25)


def test_sparsity_cli(capsys):
    main([])
    out = capsys.readouterr().out
    for name, token, value in [("Star", "star", "96.1"), ("LogSparse", "logsparse", "89.8"),
                               ("Strided", "strided-4", "70.4"), ("Fixed", "fixed-4-1", "72.7")]:
        line = next(l for l in out.splitlines() if l.startswith(name))
        assert line.split()[1:3] == [token, value], line
    assert "longformer-2-2" in out and "bigbird-1-2-2" in out and "±" in out
    main(["local-2", "random-drop", "--n", "128", "--seeds", "3"])
    out = capsys.readouterr().out.splitlines()
    assert out[1].split() == ["local-2", "96.1"]  # 1 - 634/128²
    assert out[2].split()[:4] == ["random-drop", "0.8", "±", "0.00"]  # 128/128²


@pytest.mark.parametrize("argv", [["bnd-2"], ["star", "random-0"], ["--n", "0"], ["--seeds", "x"]])
def test_sparsity_cli_errors(capsys, argv):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err


# --------------------------------------------------------------------- parsing


def test_longest_kind_name_wins():
    assert parse_mask("random-2") == RandomMask(2, 0)
    assert parse_mask("random-drop") == RandomDropMask(0)
    assert parse_mask("random-drop-s3") == RandomDropMask(3)
    assert parse_mask("no-diag") == NoDiagMask()
    assert parse_mask("local-2+global-1") == OrMask((parse_mask("local-2"), parse_mask("global-1")))


ROUNDTRIP = [
    "local-0", "local-3", "global", "global-1", "global-12", "axis-0.5-0", "axis-_-3",
    "axis-2-_", "axis-_-_", "diagonal-0.1.4", "diagonal-7", "random-2", "random-2-s3", "random-wang-1-s2",
    "no-diag", "random-drop", "random-drop-s11", "star", "logsparse", "strided-4",
    "fixed-4-1", "fixed-8-0", "longformer-2-2", "longformer-0-1-s5", "bigbird-1-2-2",
    "bigbird-3-1-4-s2", "local-2+global-1", "star+random-1-s4+no-diag", "band-2+axis-1-_",
]


@pytest.mark.parametrize("token", ROUNDTRIP)
def test_str_roundtrip(token):
    mask = parse_mask(token)
    assert str(mask) == token
    assert parse_mask(str(mask)) == mask
    hash(mask)  # masks are cache keys


@pytest.mark.parametrize(
    "token, canonical",
    [("random-2-s0", "random-2"), ("random-drop-s0", "random-drop"),
     ("axis-5.0.0-_", "axis-0.5-_"), ("diagonal-4.1.0.1", "diagonal-0.1.4"),
     ("bigbird-1-2-2-s0", "bigbird-1-2-2")],
)
def test_canonical_form(token, canonical):
    assert str(parse_mask(token)) == canonical and parse_mask(canonical) == parse_mask(token)


@pytest.mark.parametrize(
    "token, syntax",
    [
        ("local", "local-W"), ("local-x", "local-W"), ("local-1-2", "local-W"),
        ("global-0", "global[-G]"), ("global-2-1", "global[-G]"),
        ("axis-1", "axis-ROWS-COLS"), ("axis-1.-2", "axis-ROWS-COLS"), ("axis-a-_", "axis-ROWS-COLS"),
        ("diagonal", "diagonal-O1.O2..."), ("diagonal-_", "diagonal-O1.O2..."),
        ("diagonal-1..2", "diagonal-O1.O2..."),
        ("random", "random-R[-sSEED]"), ("random-0", "random-R[-sSEED]"),
        ("random-2-s", "random-R[-sSEED]"), ("random-2-sx", "random-R[-sSEED]"),
        ("random-2-3", "random-R[-sSEED]"), ("random-dropx", "random-R[-sSEED]"),
        ("no-diag-1", "no-diag"), ("random-drop-2", "random-drop[-sSEED]"),
        ("star-1", "star"), ("logsparse-2", "logsparse"),
        ("strided", "strided-L"), ("strided-0", "strided-L"),
        ("fixed-4", "fixed-L-C"), ("fixed-0-0", "fixed-L-C"), ("fixed-4-5", "fixed-L-C"),
        ("longformer-2", "longformer-W-G[-sSEED]"), ("longformer-2-0", "longformer-W-G[-sSEED]"),
        ("bigbird-1-2", "bigbird-W-G-R[-sSEED]"), ("bigbird-1-2-0-s1", "bigbird-W-G-R[-sSEED]"),
        ("local-1+", "A+B+..."), ("+star", "A+B+..."), ("star++local-1", "A+B+..."),
        ("star+local-x", "local-W"),
    ],
)
def test_bad_parameters_name_token_and_syntax(token, syntax):
    with pytest.raises(MaskSpecError) as e:
        parse_mask(token)
    msg = str(e.value)
    assert "\n" not in msg and f"'{token}'" in msg and syntax in msg, msg


def test_unknown_kinds():
    for token in ["nodiag", "randomdrop-1", "bnd-2", "star+bnd-2"]:
        with pytest.raises(MaskSpecError, match="unknown mask kind"):
            parse_mask(token)


def test_layout_with_sparse_heads_roundtrips():
    text = "[star,local-2+global-1@a,random-2-s3@a,bigbird-1-2-2*2,no-diag@@t];[axis-0.5-0*3,fixed-4-1,random-drop@@t]"
    layers = parse_layout(text)
    assert [str(m) for m in layers[0].masks] == [
        "star", "local-2+global-1", "random-2-s3", "bigbird-1-2-2", "bigbird-1-2-2", "no-diag"]
    assert layers[0].head_to_group == (0, 1, 1, 2, 3, 4)
    assert parse_layout(format_layout(layers)) == layers


# ------------------------------------------------------------ padded positions

NON_RELATIVE = [
    "star", "fixed-4-1", "fixed-2-1", "global-2", "axis-0.3-1", "random-2", "random-drop",
    "longformer-1-2", "bigbird-1-1-1", "local-1+global-1", "diagonal-2+axis-_-0",
]
RELATIVE = ["local-2", "diagonal-0.3", "no-diag", "logsparse", "strided-2"]


@pytest.mark.parametrize("left_pad", [True, False])
@pytest.mark.parametrize("token", NON_RELATIVE + RELATIVE)
def test_batched_block_equals_unpadded_matrix(token, left_pad):
    lengths, T = [7, 4, 1, 5], 7
    pad = padding_mask(lengths, left_pad)
    pos = real_positions(pad, T)
    mask = parse_mask(token)
    m = mask.dense(pos, pos).expand(len(lengths), T, T)
    for b, n in enumerate(lengths):
        real = (~pad[b]).nonzero().flatten()
        assert torch.equal(m[b][real][:, real].int(), dense(token, n)), (b, n)
        if not mask.relative:  # pad rows and columns are False
            assert not m[b][pad[b]].any() and not m[b][:, pad[b]].any()


# ------------------------------------------------------------------ attention

D, H = 16, 4


@pytest.mark.parametrize("mode", ["post", "pre"])
def test_attention_same_alone_and_in_padded_batches(mode):
    tokens = ["star", "fixed-2-1", "random-2", "bigbird-1-1-1"]
    attn = make_attention(tokens, mode=mode, embed_dim=D)
    n, T = 5, 8
    x = torch.randn(n, 1, D)
    alone, w_alone = attn(x, key_padding_mask=None, need_head_weights=True)
    # The weights follow each head's mask (zero exactly off the mask in post mode).
    pos = torch.arange(n)
    for h, t in enumerate(tokens):
        allowed = parse_mask(t).dense(pos, pos)
        assert not w_alone[h, 0][~allowed].any()
        if mode == "post":
            assert (w_alone[h, 0][allowed] > 0).all()
    for left_pad in [True, False]:
        batch = torch.randn(T, 3, D)
        lengths = [T, n, 3]
        pad = padding_mask(lengths, left_pad)
        real = (~pad[1]).nonzero().flatten()
        batch[real, 1] = x[:, 0]
        y, w = attn(batch, key_padding_mask=pad, need_head_weights=True)
        assert torch.allclose(y[real, 1], alone[:, 0], atol=1e-5), (y[real, 1] - alone[:, 0]).abs().max()
        assert torch.allclose(w[:, 1][:, real][:, :, real], w_alone[:, 0], atol=1e-5)
        assert not torch.isnan(y).any()
