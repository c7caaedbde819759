"""LocalMultiheadAttention against a dense reference written here."""

import math

import pytest
import torch

from helpers import make_attention, padding_mask
from fairseq_local.attention.module import LocalMultiheadAttention, QKProjection
from fairseq_local.attention.config import AttentionConfig, attention_options
from fairseq_local.attention.masks import parse_mask

D, H = 16, 4
DH = D // H


def reference(attn, x, pad, tokens, groups, mode):
    """Per head, with explicit loops and a dense mask (Pande et al., Eq. 9)."""
    T, B, _ = x.shape
    out = torch.zeros(T, B, D)
    v = attn.v_proj(x)
    for b in range(B):
        real = (~pad[b]).nonzero().flatten() if pad is not None else torch.arange(T)
        xb = x[real, b]  # (n, D): the sentence without padding
        n = len(real)
        heads = []
        for h, (tok, g) in enumerate(zip(tokens, groups)):
            qk = attn.qk[g]
            s = qk.q_proj(xb) @ qk.k_proj(xb).T / math.sqrt(DH)
            i = torch.arange(n)
            m = parse_mask(tok).dense(i, i).float()
            if mode == "post":
                a = torch.softmax(s, -1) * m
            else:
                e = torch.exp(s - s.max()) * m
                z = e.sum(-1, keepdim=True)
                a = torch.where(z > 0, e / z.clamp_min(1e-30), torch.zeros_like(e))
            heads.append(a @ v[real, b, h * DH:(h + 1) * DH])
        out[real, b] = attn.out_proj(torch.cat(heads, -1))
    return out


CASES = [
    (["band-1", "prev-2", "next-1", "global"], [0, 1, 2, 3]),
    (["identity", "band-2", "prev-1", "next-2"], [0, 0, 1, 1]),  # tied pairs
    (["prev-1", "prev-2", "next-1", "band-1"], [0, 0, 0, 0]),  # one Q/K set
    (["global", "global", "global", "global"], [0, 1, 2, 3]),  # fused fast path
    (["global", "global", "band-1", "global"], [0, 0, 1, 1]),
]


def batch(left_pad=True, seed=1):
    torch.manual_seed(seed)
    lengths = [7, 4, 1]
    T, B = max(lengths), len(lengths)
    return torch.randn(T, B, D), padding_mask(lengths, left_pad)


@pytest.mark.parametrize("mode", ["post", "pre"])
@pytest.mark.parametrize("tokens, groups", CASES)
@pytest.mark.parametrize("left_pad", [True, False])
def test_forward_and_gradients_match_reference(mode, tokens, groups, left_pad):
    attn = make_attention(tokens, groups, mode)
    x, pad = batch(left_pad)
    x1 = x.clone().requires_grad_()
    x2 = x.clone().requires_grad_()
    y, _ = attn(x1, x1, x1, key_padding_mask=pad)
    ref = reference(attn, x2, pad, tokens, groups, mode)
    real = (~pad).T.unsqueeze(-1).float()  # compare real positions only
    assert torch.allclose(y * real, ref * real, atol=1e-5), (y * real - ref * real).abs().max()
    w = torch.randn_like(y)
    g1 = torch.autograd.grad((y * real * w).sum(), [x1] + list(attn.parameters()))
    g2 = torch.autograd.grad((ref * real * w).sum(), [x2] + list(attn.parameters()), allow_unused=True)
    for a, b in zip(g1, g2):
        b = torch.zeros_like(a) if b is None else b
        assert torch.allclose(a, b, atol=1e-4), (a - b).abs().max()


@pytest.mark.parametrize("mode", ["post", "pre"])
def test_empty_rows_give_zero_output_and_no_nan(mode):
    # prev-2 has no key for the first two tokens; next-2 none for the last two;
    # the one-token sentence has no allowed key at all.
    tokens, groups = ["prev-2", "next-2", "prev-2", "next-2"], [0, 1, 2, 3]
    attn = make_attention(tokens, groups, mode)
    x, pad = batch(left_pad=True)
    x.requires_grad_()
    _, probs = attn(x, x, x, key_padding_mask=pad, need_head_weights=True)  # (H, B, T, S)
    assert not torch.isnan(probs).any()
    assert probs[0, 0, :2].abs().sum() == 0  # sentence 0 is unpadded, 7 tokens
    assert probs[1, 0, -2:].abs().sum() == 0
    assert probs[:, 2, -1].abs().sum() == 0  # the 1-token sentence (left-padded)
    y, _ = attn(x, x, x, key_padding_mask=pad)
    # Zero head outputs: the output is out_proj's bias alone.
    assert torch.allclose(y[-1, 2], attn.out_proj.bias, atol=1e-6)
    y.sum().backward()
    assert not torch.isnan(x.grad).any()
    assert all(not torch.isnan(p.grad).any() for p in attn.parameters())


def test_post_does_not_renormalise_pre_does():
    tokens = ["band-1", "band-1", "global", "global"]
    x, pad = batch()
    for mode, expect_one in [("post", False), ("pre", True)]:
        attn = make_attention(tokens, [0, 1, 2, 3], mode)
        _, p = attn(x, x, x, key_padding_mask=pad, need_head_weights=True)
        sums = p[0, 0].sum(-1)  # head 0 (band-1), sentence 0 (unpadded)
        assert torch.allclose(sums, torch.ones(7), atol=1e-6) == expect_one
        assert torch.allclose(p[2, 0].sum(-1), torch.ones(7), atol=1e-6)  # global head


def test_tied_heads_share_probabilities_before_masking():
    tokens, groups = ["global", "band-1", "identity", "global"], [0, 0, 0, 1]
    attn = make_attention(tokens, groups, "post")
    x, _ = batch()
    _, p = attn(x, x, x, need_head_weights=True)
    band = parse_mask("band-1").dense(torch.arange(7), torch.arange(7))
    assert torch.equal(p[1], p[0] * band)  # same α, masked per head
    assert torch.equal(p[2], p[0] * torch.eye(7))
    assert not torch.allclose(p[3], p[0])


def test_fast_path_equals_general_path():
    attn = make_attention(["global"] * 4, [0, 1, 2, 3], "post")
    x, pad = batch()
    y_fast, _ = attn(x, x, x, key_padding_mask=pad)
    y_slow, w = attn(x, x, x, key_padding_mask=pad, need_weights=True)
    assert w.shape == (3, 7, 7)
    real = (~pad).T.unsqueeze(-1)
    assert torch.allclose(y_fast * real, y_slow * real, atol=1e-6)


def test_initialisation_matches_fairseq_scale():
    torch.manual_seed(0)
    qk = QKProjection(512, 64)
    bound = math.sqrt(6 / 1024) / math.sqrt(2)  # xavier(d×d, gain 1/sqrt2), as fairseq's Wq
    assert qk.q_proj.weight.abs().max() <= bound
    assert qk.q_proj.weight.abs().max() > 0.95 * bound


def test_rejects_cross_attention_and_bad_arguments():
    attn = make_attention(["global"] * 4, [0, 1, 2, 3], "post")
    x, _ = batch()
    with pytest.raises(ValueError, match="self-attention only"):
        attn(x, x.clone(), x)
    with pytest.raises(ValueError, match="mask_mode"):
        options = attention_options(AttentionConfig(attn_layout="[global*4]", mask_mode="mid"))
        LocalMultiheadAttention(options, D, options.layout[0], [QKProjection(D, DH) for _ in range(4)])
    with pytest.raises(ValueError, match="Q/K groups"):
        options = attention_options(AttentionConfig(attn_layout="[global*4]"))
        LocalMultiheadAttention(options, D, options.layout[0], [QKProjection(D, DH)])
