"""FlexAttention (:mod:`fairseq_local.attention.flex`) gives the dense path's result
for every fixed mask kind, in both mask modes, with and without padding.

FlexAttention has no backward on CPU, so these tests check the forward pass,
under ``torch.no_grad()``."""

from dataclasses import dataclass

import pytest
import torch
from torch.nn.attention.flex_attention import create_mask

from helpers import make_attention, padding_mask
from fairseq_local.attention.flex import flex_attention_heads, flex_available
from fairseq_local.attention.masks import (FileMask, HeadMask, MaskSpecError, PositionMask, flex_positions, mask_mod,
                                           parse_mask, real_positions, write_mask_file)

FIXED = ["identity", "prev-1", "next-2", "band-2", "local-3", "global", "global-2", "axis-0.3-1",
         "diagonal-0.2", "no-diag", "logsparse", "strided-3", "fixed-4-1", "star", "random-2", "random-drop",
         "longformer-2-2", "bigbird-1-2-2", "local-1+global-1", "file-0.0", "file-0.1"]
RELATIVE = ["identity", "prev-1", "next-2", "band-2", "local-3", "global", "diagonal-0.2", "no-diag",
            "logsparse", "strided-3", "local-1+diagonal-3"]
# Lengths not divisible by FlexAttention's 128-wide blocks, one sentence of one token.
PADDINGS = {"left": ([130, 77, 1], True), "right": ([130, 77, 1], False), "none": ([130, 130], False),
            "single": ([1], False)}
FILE_LEN = 140
ATOL = 1e-5


@pytest.fixture(scope="module")
def mask_file(tmp_path_factory):
    """A mask file with head 0.0 (with ``ends``) and head 0.1 (without)."""
    gen = torch.Generator().manual_seed(0)
    masks = {f"0.{h}": {"matrix": torch.rand(FILE_LEN, FILE_LEN, generator=gen) < 0.1, "ends": h == 0}
             for h in range(2)}
    path = tmp_path_factory.mktemp("flex") / "masks.pt"
    write_mask_file(path, masks)
    return str(path)


def mask_of(token: str, path: str) -> HeadMask:
    mask = parse_mask(token)
    return FileMask(mask.layer, mask.head, path) if isinstance(mask, FileMask) else mask


def batch(padding: str, embed_dim: int, seed: int = 1):
    """x (T, B, d) and the padding mask (B, T), or None without padding."""
    lengths, left = PADDINGS[padding]
    torch.manual_seed(seed)
    pad = padding_mask(lengths, left)
    return torch.randn(max(lengths), len(lengths), embed_dim), (pad if pad.any() else None)


def compare(tokens, mode, padding, path, groups=None):
    """Per-head max |flex − dense| of a one-layer attention with these heads."""
    embed_dim = 4 * len(tokens)
    attn = make_attention(tokens, groups=groups, mode=mode, embed_dim=embed_dim, std=embed_dim ** -0.5,
                          mask_file=path)  # O(1) scores and outputs
    x, pad = batch(padding, embed_dim)
    T, B, _ = x.shape
    H, dh = attn.num_heads, attn.head_dim
    with torch.no_grad():
        q, k, v = attn.project(x)
        ref = attn.attention_probs(q, k, attn.fixed_mask(T, pad, q.device), None, pad) @ v
        out = flex_attention_heads(q, k, v, attn.plan.fixed_masks, attn.head_to_group, pad, mode, attn.scaling)
    assert out.shape == ref.shape == (B, H, T, dh)
    assert torch.isfinite(out).all()
    return dict(zip(tokens, (out - ref).abs().amax((0, 2, 3)).tolist()))


@pytest.mark.parametrize("token", FIXED + ["local-1+diagonal-3"])
def test_mask_mod_equals_dense(token, mask_file):
    """mask_mod(mask, pos, n)(b, ·, i, j) == mask.dense(pos, pos)[b, i, j], on real
    positions (−1 at padding) and on padded indices."""
    mask = mask_of(token, mask_file)
    for lengths, left in [([37, 20, 1], True), ([37, 20, 1], False), ([37, 37], False)]:
        B, T = len(lengths), max(lengths)
        pad = padding_mask(lengths, left)
        for pos in (real_positions(pad, T), torch.arange(T).expand(B, T)):
            n = pos.amax(-1) + 1  # as PositionMask.dense takes it
            got = create_mask(mask_mod(mask, pos, n), B, 1, T, T, device="cpu")[:, 0]
            assert torch.equal(got, mask.dense(pos, pos).expand(B, T, T)), (lengths, left, pos)


@pytest.mark.parametrize("token", ["random-2", "random-drop", "random-wang-1", "longformer-2-2", "bigbird-1-2-2"])
def test_seeded_kinds_read_no_length_on_the_host(token, monkeypatch):
    """Seeded kinds look their answer up in one (128, 128) tile per device,
    indexed by the positions mod 128: binding and evaluating the rule reads
    no length back to the host (each read stalls a GPU stream)."""
    mask = parse_mask(token)
    for lengths, left in [([137, 20, 1], True), ([137, 20, 1], False), ([137, 137], False)]:
        B, T = len(lengths), max(lengths)
        pos = real_positions(padding_mask(lengths, left), T)
        n = pos.amax(-1) + 1
        want = mask.dense(pos, pos)
        i, j, n3 = pos.unsqueeze(-1), pos.unsqueeze(-2), n[:, None, None]
        with monkeypatch.context() as m:
            for name in ("item", "tolist", "__bool__", "__int__", "__float__"):
                m.setattr(torch.Tensor, name, lambda *a, name=name, **kw: pytest.fail(f"host read: {name}"))
            m.setattr(torch, "unique", lambda *a, **kw: pytest.fail("host read: unique"))
            got = mask.rule(n3, T, pos.device)(i, j, n3)
        assert torch.equal(got, want), (lengths, left)
        assert torch.equal(create_mask(mask_mod(mask, pos, n), B, 1, T, T, device="cpu")[:, 0], want)


def test_file_mask_shorter_than_the_batch(mask_file):
    """A file mask is checked against the padded length T (a host int), not the
    sentence lengths (a device read): one line naming the mask and the file."""
    T = FILE_LEN + 1
    with pytest.raises(MaskSpecError, match=rf"^a batch of {T} positions is longer than mask file-0\.0 of "
                                            rf"'.*masks\.pt' \({FILE_LEN} positions\)$"):
        mask_mod(mask_of("file-0.0", mask_file), torch.arange(T)[None], torch.tensor([3]))


@pytest.mark.parametrize("padding", PADDINGS)
@pytest.mark.parametrize("mode", ["pre", "post"])
def test_every_kind_matches_dense(mode, padding, mask_file):
    """All kinds as the heads of one layer: relative kinds on real positions."""
    err = compare(FIXED, mode, padding, mask_file)
    assert max(err.values()) < ATOL, err


@pytest.mark.parametrize("padding", PADDINGS)
@pytest.mark.parametrize("mode", ["pre", "post"])
def test_relative_kinds_match_dense(mode, padding, mask_file):
    """A layer of relative kinds only: offsets taken on padded indices."""
    err = compare(RELATIVE, mode, padding, mask_file)
    assert max(err.values()) < ATOL, err


@pytest.mark.parametrize("mode", ["pre", "post"])
@pytest.mark.parametrize("token", ["band-2", "random-2", "file-0.0"])
def test_one_kind_per_layer(token, mode, mask_file):
    """One mask for every head (the BlockMask broadcasts over heads)."""
    for padding in ("left", "none"):
        err = compare([token, token], mode, padding, mask_file)
        assert max(err.values()) < ATOL, (padding, err)


@pytest.mark.parametrize("mode", ["pre", "post"])
def test_tied_heads(mode, mask_file):
    """Heads sharing a Q/K group (Pande et al., §4.2): [band-1@a,band-2@a,star@a,global@b]."""
    for padding in ("left", "right", "none"):
        err = compare(["band-1", "band-2", "star", "global"], mode, padding, mask_file, groups=[0, 0, 0, 1])
        assert max(err.values()) < ATOL, (padding, err)


def test_rows_without_allowed_keys_are_zero():
    """``next-2``: the last two real queries have no key; pre and post give 0, not NaN."""
    masks = [parse_mask("next-2")]
    pad = padding_mask([6, 3], left_pad=True)
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 1, 6, 4) for _ in range(3))
    with torch.no_grad():
        for mode in ("pre", "post"):
            out = flex_attention_heads(q, k, v, masks, (0,), pad, mode, 0.5)
            assert torch.isfinite(out).all()
            assert out[0, 0, -2:].abs().max() == 0 and out[1, 0, -2:].abs().max() == 0
            assert out[0, 0, :-2].abs().min() > 0


def test_post_is_pre_times_the_mass_of_the_mask():
    """Pande et al., Eq. 9: post = pre · Σ_{j ∈ mask} softmax_j over all real keys."""
    torch.manual_seed(0)
    q, k = torch.randn(1, 1, 9, 4), torch.randn(1, 1, 9, 4)
    v = torch.ones(1, 1, 9, 4)
    with torch.no_grad():
        pre = flex_attention_heads(q, k, v, [parse_mask("band-1")], (0,), None, "pre", 0.5)
        post = flex_attention_heads(q, k, v, [parse_mask("band-1")], (0,), None, "post", 0.5)
    probs = torch.softmax(0.5 * q @ k.transpose(-1, -2), -1)
    band = parse_mask("band-1").dense(torch.arange(9), torch.arange(9))
    assert torch.allclose(pre, torch.ones_like(pre), atol=1e-6)
    assert torch.allclose(post[..., 0], (probs * band).sum(-1), atol=1e-6)


def test_positions_follow_the_dense_path():
    pad = padding_mask([5, 3], left_pad=True)
    cpu = torch.device("cpu")
    relative = [parse_mask("band-1"), parse_mask("global")]
    pos, n = flex_positions(relative, pad, 2, 5, cpu)
    assert torch.equal(pos, torch.arange(5).expand(2, 5)) and n.tolist() == [5, 3]
    pos, n = flex_positions(relative + [parse_mask("star")], pad, 2, 5, cpu)
    assert torch.equal(pos, real_positions(pad, 5)) and n.tolist() == [5, 3]
    pos, n = flex_positions(relative, None, 2, 5, cpu)
    assert torch.equal(pos, torch.arange(5).expand(2, 5)) and n.tolist() == [5, 5]


@dataclass(frozen=True)
class EvenKeys(PositionMask):
    """A kind given by its rule alone: keys at even positions."""

    def allows(self, i, j, n):
        return j % 2 == 0

    def __str__(self) -> str:
        return "even-keys"


@dataclass(frozen=True)
class NoRule(HeadMask):
    def __str__(self) -> str:
        return "no-rule"


def test_a_kinds_rule_is_its_mask_mod_and_learned_kinds_are_refused():
    pad = padding_mask([5, 3], left_pad=True)
    pos = real_positions(pad, 5)
    n = pos.amax(-1) + 1
    got = create_mask(mask_mod(EvenKeys(), pos, n), 2, 1, 5, 5, device="cpu")[:, 0]
    even = torch.tensor([[1, 0, 1, 0, 1]] * 5, dtype=torch.bool)
    assert torch.equal(got[0], even) and torch.equal(got, EvenKeys().dense(pos, pos))
    assert torch.equal(got[1, 2:, 2:], even[:3, :3]) and not got[1, :2].any() and not got[1, :, :2].any()
    for build in (lambda: NoRule().dense(pos, pos), lambda: create_mask(mask_mod(NoRule(), pos, n), 2, 1, 5, 5)):
        with pytest.raises(NotImplementedError, match="^NoRule has no rule: define allows"):
            build()
    with pytest.raises(NotImplementedError, match="learned"):
        mask_mod(parse_mask("dam-u"), pos, n)


def test_availability_and_bad_arguments():
    cpu = torch.device("cpu")
    assert flex_available(cpu, needs_grad=False) is None
    reason = flex_available(cpu, needs_grad=True)
    assert "no backward on CPU" in reason and "--attn-impl" in reason and "\n" not in reason
    assert flex_available(torch.device("meta"), needs_grad=False) is not None
    q, k, v = (torch.randn(1, 1, 5, 4, requires_grad=True) for _ in range(3))
    masks = [parse_mask("band-1")]
    with pytest.raises(RuntimeError, match="no backward on CPU"):
        flex_attention_heads(q, k, v, masks, (0,), None, "pre", 0.5)
    with torch.no_grad():  # inputs that require grad are fine when no graph is built
        assert flex_attention_heads(q, k, v, masks, (0,), None, "pre", 0.5).shape == (1, 1, 5, 4)
        with pytest.raises(ValueError, match="mode"):
            flex_attention_heads(q, k, v, masks, (0,), None, "both", 0.5)
        with pytest.raises(ValueError, match="heads need"):
            flex_attention_heads(q, k, v, masks * 2, (0, 0), None, "pre", 0.5)
