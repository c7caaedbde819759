"""The sparsity terms that a model hands its criterion: recorded per forward
pass, exact values of Eq. 9, the DAM L1 conventions and the gate penalties."""

import pytest
import torch

import fairseq_local  # noqa: F401
from helpers import make_attention, padding_mask
from fairseq_local.models import build_encoder
from fairseq_local.attention.config import AttentionConfig, attention_options
from fairseq_local.attention.context import attention_context, current
from fairseq_local.attention.penalties import sparsity_terms

D = 16
SMALL = {"encoder_embed_dim": 32, "encoder_ffn_embed_dim": 64, "dropout": 0.0, "dam_max_len": 12}


def encoder_terms(enc, lengths, train=True):
    """Run the encoder on left-padded random sentences; its terms."""
    enc.train(train)
    torch.manual_seed(2)
    T = max(lengths)
    tokens = torch.full((len(lengths), T), 1, dtype=torch.long)
    for b, n in enumerate(lengths):
        tokens[b, T - n:] = torch.randint(4, 30, (n,))
        tokens[b, -1] = 2
    out = enc(tokens, torch.tensor(lengths))
    return enc.sparsity_terms(out["sparsity"]), out


def test_records_exist_only_inside_a_forward_pass():
    attn = make_attention(["aaa", "dam-s", "band-1", "global:gate"], embed_dim=D).train()
    x = torch.randn(5, 2, D)
    attn(x)  # outside a context with records: nothing is kept anywhere
    assert current().records is None
    assert not any(hasattr(attn, name) for name in ("stats", "last_axis", "collect_stats"))
    with attention_context(records=True) as outer:
        attn(x)
        with attention_context(records=True) as inner:
            attn(x)
        attn(x)
    assert len(outer.records) == 2 and len(inner.records) == 1 and current().records is None


def test_eq9_and_the_footnote_for_local_2():
    attn = make_attention(["aaa", "aaa", "band-1", "global"], embed_dim=D).eval()
    torch.nn.init.zeros_(attn.learned["aaa"].fc.weight)
    torch.nn.init.constant_(attn.learned["aaa"].fc.bias, -5.0)  # no axis: B = local-2 alone
    lengths = [3, 5, 9, 12]
    torch.manual_seed(0)
    x, pad = torch.randn(12, 4, D), padding_mask(lengths, left_pad=True)
    with attention_context(records=True) as ctx:
        attn(x, key_padding_mask=pad)
    terms = sparsity_terms(attention_options(AttentionConfig(), 1, 4), [attn], ctx.records)
    local2 = [1 - 5 / n + 6 / n**2 for n in lengths]  # Adaptive Axis Attention, footnote 5
    band1 = [1 - (3 * n - 2) / n**2 for n in lengths]
    assert float(terms.hinge_rho("aaa")) == pytest.approx(sum(local2) / 4, abs=1e-6)
    overall = (2 * sum(local2) + sum(band1)) / 16  # the global head has ρ = 0
    assert terms.log["rho_sum"] / terms.log["rho_count"] == pytest.approx(overall, abs=1e-6)
    assert terms.log["rho_l1_sum"] == pytest.approx(terms.log["rho_sum"])
    assert terms.log["aaa_rows"] == 0 and terms.log["aaa_tokens"] == sum(lengths)
    # the kind's logged (sum, count) of ρ: its two heads over four sentences, the hinge's very ρ
    assert terms.log["aaa_count"] == 8 and float(terms.log["aaa_rho_sum"]) == pytest.approx(2 * sum(local2), abs=1e-5)


@pytest.mark.parametrize("convention", ["sum", "density"])
def test_dam_l1_conventions(convention):
    enc = build_encoder("transformer_local", dict(SMALL, attn_layout="[dam-s*2,dam-u*2,global*4]*6",
                                                  dam_l1=convention, dam_init_std=2.0))
    lengths = [7, 4]
    terms, out = encoder_terms(enc, lengths)
    masks = enc.attention_modules()[0].learned["dam"]  # shared by all six layers
    if convention == "sum":  # SparseBERT's code: ||M||_1 of each distinct mask, whole max_len, at its n = 128
        norm = float(sum(d.l1(1.0) for d in masks)) * (128 / SMALL["dam_max_len"]) ** 2
        assert float(terms.penalties["dam"]) == pytest.approx(norm, rel=1e-6)
    else:  # the mean over sentences and DAM (layer, head) slots of ||M||_1 / N²
        expected = []
        for rec in out["sparsity"]:
            for b, n in enumerate(lengths):
                m = rec.learned[b, :, -n:, -n:]
                expected += (m.sum((-1, -2)) / n**2).tolist()
        assert float(terms.penalties["dam"]) == pytest.approx(sum(expected) / len(expected), rel=1e-6)
    terms.penalties["dam"].backward()
    assert all(d.alpha.grad.abs().sum() > 0 for d in masks)


@pytest.mark.parametrize("preset, divide", [("louizos", 1), ("voita", 3)])
def test_gate_penalty_conventions(preset, divide):
    enc = build_encoder("transformer_local", dict(SMALL, attn_layout="[global:gate*4,global*4]*3;[global*8]*3",
                                                  gate_preset=preset))
    terms, _ = encoder_terms(enc, [5, 3])
    per_layer = [a.gates.l0().sum() for a in enc.attention_modules() if a.gates is not None]
    assert len(per_layer) == 3
    assert float(terms.gate) == pytest.approx(float(sum(per_layer)) / divide, rel=1e-6)
    assert terms.log["gate_count"] == 12
    terms.gate.backward()
    assert all(a.gates.log_alpha.grad.abs().sum() > 0 for a in enc.attention_modules() if a.gates is not None)


def test_aaa_rho_gradient_reaches_the_fc_layer_with_the_papers_constant():
    enc = build_encoder("transformer_aaa", dict(SMALL))  # C = -1e4
    terms, _ = encoder_terms(enc, [8, 6])
    assert "dam" not in terms.penalties and terms.gate is None and 0 < float(terms.hinge_rho("aaa")) < 1
    terms.hinge_rho("aaa").backward()
    assert all(a.learned["aaa"].fc.weight.grad.abs().sum() > 0 for a in enc.attention_modules())


def test_fixed_archs_have_no_penalty_and_log_their_sparsity():
    enc = build_encoder("transformer_local_8lochead_all6", dict(SMALL))
    terms, _ = encoder_terms(enc, [6], train=False)
    assert "dam" not in terms.penalties and terms.hinge_rho("aaa") is None and terms.gate is None
    assert terms.log["rho_count"] == 6 * 8 and "tau_sum" not in terms.log
    n = 6  # prev-1, prev-2, next-1, next-2, band-1, band-2, identity, identity
    kept = (n - 1) + (n - 2) + (n - 1) + (n - 2) + (3 * n - 2) + (5 * n - 6) + n + n
    assert terms.log["rho_sum"] / terms.log["rho_count"] == pytest.approx(1 - kept / (8 * n * n))
