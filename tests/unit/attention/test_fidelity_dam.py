"""DAM as SparseBERT states it: ``--dam-no-noise`` trains with P = sigmoid(α)
in the forward pass (§3.1, Eq. 3–4) whatever ``--dam-estimator``, and the
summed L1 term is the authors' ‖M‖₁ at their length n = 128 (§3.1.1, Eq. 5)
whatever ``--dam-max-len``, so that their λ pulls as it did for them."""

import math

import pytest
import torch

import fairseq_local  # noqa: F401  (registers kinds, archs and criteria)
from helpers import make_attention
from fairseq_local.attention.config import AttentionConfig, attention_options
from fairseq_local.attention.context import attention_context
from fairseq_local.attention.learned import DamMask
from fairseq_local.attention.penalties import sparsity_terms
from fairseq_local.models import build_encoder

D = 16
PAPER_N = 128  # SparseBERT §3.1.1: n = 128
SMALL = {"encoder_embed_dim": 32, "encoder_ffn_embed_dim": 64, "dropout": 0.0}


def sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


# ------------------------------------------------------------------ fix 3: no noise


@pytest.mark.parametrize("structured", [False, True], ids=["dam-u", "dam-s"])
@pytest.mark.parametrize("estimator", ["hard", "soft"])
def test_no_noise_trains_p_whatever_the_estimator(structured, estimator):
    torch.manual_seed(0)
    mask = DamMask(structured, 10, init_std=2.0, estimator=estimator, noise=False).train()
    idx = torch.arange(mask.alpha.numel())
    m = mask.values(idx, tau=0.3)  # τ plays no part: Eq. 3 has none
    p = torch.sigmoid(mask.alpha.detach().float())
    assert torch.equal(m.detach(), p)
    assert not set(m.unique().tolist()) <= {0.0, 1.0}
    w = torch.randn(idx.numel())
    (m * w).sum().backward()
    assert torch.allclose(mask.alpha.grad, w * p * (1 - p), atol=1e-7)
    assert torch.equal(mask.eval().values(idx, 0.3), (mask.alpha > 0).float())  # evaluation: 1[α > 0]


def test_section_3_1_flags_give_eq4_with_p():
    """``--dam-no-noise --mask-mode post`` with the default estimator: the
    head's weights are softmax(S) ⊙ P, P = sigmoid(α) (SparseBERT Eq. 3–4)."""
    attn = make_attention(["dam-u", "global"], mode="post", embed_dim=D, std=0.5, dam_no_noise=True).train()
    assert attn.learned["dam"][0].estimator == "hard"  # the default
    n = 6
    torch.manual_seed(1)
    x = torch.randn(n, 1, D)
    with attention_context(records=True) as ctx:
        _, w = attn(x, need_head_weights=True)
    p = attn.learned["dam"][0].matrix(n, "prob")  # (n, n) sigmoid(α)
    assert torch.allclose(ctx.records[0].learned[0, 0], p, atol=1e-7, rtol=0)
    q, k, _ = attn.project(x)
    s = (q @ k.transpose(-1, -2) * attn.scaling)[0, 0]
    assert torch.allclose(w[0, 0], torch.softmax(s, -1) * p, atol=1e-6)


# -------------------------------------------------------- fix 4: the L1 term's scale


@pytest.mark.parametrize("structured", [False, True], ids=["dam-u", "dam-s"])
def test_summed_l1_is_the_norm_at_128(structured):
    """α all equal (P = sigmoid(a) everywhere): dam-u's term is 128²·P at any
    max length; dam-s's is ((L − 2)²·P + 4L − 4)·(128/L)² (its ends are 1)."""
    a = 0.4
    for L in (12, PAPER_N, 300, 1024):
        mask = DamMask(structured, L, init=a, init_std=0.0, estimator="soft", noise=False).train()
        norm = (L - 2) ** 2 * sigmoid(a) + 4 * L - 4 if structured else L * L * sigmoid(a)
        assert float(mask.l1(1.0)) == pytest.approx(norm, rel=1e-6)  # ‖M‖₁ itself is unchanged
        want = PAPER_N ** 2 * sigmoid(a) if not structured else norm * (PAPER_N / L) ** 2
        assert float(mask.scaled_l1(1.0)) == pytest.approx(want, rel=1e-6), L
    assert mask.l1_scale == (PAPER_N / 1024) ** 2


def encoder_dam_term(max_len: int, layout: str) -> float:
    enc = build_encoder("transformer_local", dict(SMALL, attn_layout=layout, dam_max_len=max_len, dam_init=0.4,
                                                  dam_init_std=0.0, dam_estimator="soft", dam_no_noise=True))
    enc.train()
    tokens = torch.tensor([[5, 6, 7, 8, 2], [1, 1, 9, 10, 2]])
    out = enc(tokens, torch.tensor([5, 3]))
    return float(enc.sparsity_terms(out["sparsity"]).penalties["dam"])


def test_the_models_dam_term_does_not_grow_with_dam_max_len():
    """Two distinct dam-u masks (shared by the six layers): 2·128²·sigmoid(0.4)
    at --dam-max-len 12 and 40 alike, not 2·L²·sigmoid(0.4)."""
    layout = "[dam-u*2,global*6]*6"
    for L in (12, 40):
        assert encoder_dam_term(L, layout) == pytest.approx(2 * PAPER_N ** 2 * sigmoid(0.4), rel=1e-6), L


def test_density_convention_is_unchanged():
    attn = make_attention(["dam-u", "global"], embed_dim=D, dam_l1="density", dam_init=0.4, dam_init_std=0.0,
                          dam_estimator="soft", dam_no_noise=True, max_len=20, std=0).train()
    with attention_context(records=True) as ctx:
        attn(torch.randn(5, 2, D))
    terms = sparsity_terms(attention_options(AttentionConfig(dam_l1="density"), 1, 2), [attn], ctx.records)
    assert float(terms.penalties["dam"]) == pytest.approx(sigmoid(0.4), rel=1e-6)  # mean of ‖M‖₁/N² = P
