"""The sparsity hinge of Adaptive Axis Attention (Wang et al. Eq. 10) on DAM
heads (``--aaa-hinge-heads learned|all``): exact ρ (Eq. 9) against a hand
count, the gradient to the DAM logits against an independent autograd
reference, and the logged (sum, count) pairs under fairseq's summing."""


import pytest
import torch

import fairseq_local  # noqa: F401
from fairseq import metrics
from helpers import make_attention, padding_mask
from helpers.criteria import translation_setup
from fairseq_local.attention.config import AttentionConfig, attention_options
from fairseq_local.attention.context import attention_context
from fairseq_local.attention.penalties import sparsity_terms
from fairseq_local.criteria import LabelSmoothedCrossEntropyWithSparsity, SparsityLoss, SparsityLossConfig

D = 16
HEADS = ["dam-s", "dam-u", "band-1", "global"]
LENGTHS = [4, 5]


def layer_terms(attn, seed: int = 0):
    """One forward pass of ``attn`` on left-padded sentences of LENGTHS; its terms."""
    torch.manual_seed(seed)
    x, pad = torch.randn(max(LENGTHS), len(LENGTHS), D), padding_mask(LENGTHS, left_pad=True)
    with attention_context(records=True) as ctx:
        attn(x, key_padding_mask=pad)
    return sparsity_terms(attention_options(AttentionConfig(), 1, len(HEADS)), [attn], ctx.records)


def set_masks(attn) -> None:
    """dam-s: offsets 0 and 2 on (plus its end rows/columns); dam-u: the identity."""
    dam_s, dam_u = attn.learned["dam"]
    with torch.no_grad():
        dam_s.alpha.fill_(-1.0)
        dam_s.alpha[0] = dam_s.alpha[2] = 1.0
        dam_u.alpha.fill_(-1.0)
        i = torch.arange(dam_u.max_len)
        dam_u.alpha[dam_u.index(i, i)] = 1.0


def test_hinge_on_dam_heads_equals_a_hand_count():
    attn = make_attention(HEADS, embed_dim=D, max_len=8).eval()  # eval: M = 1[α > 0]
    set_masks(attn)
    terms = layer_terms(attn)
    # dam-s, n = 4: 12 end entries + the inner diagonal (2) -> 14; n = 5: 16 + 3 + (1,3),(3,1) -> 21
    dam_s = [1 - 14 / 16, 1 - 21 / 25]
    dam_u = [1 - 4 / 16, 1 - 5 / 25]  # the identity: n entries
    band1 = [1 - 10 / 16, 1 - 13 / 25]  # 3n − 2
    learned = (sum(dam_s) + sum(dam_u)) / 4
    assert terms.hinge_rho("aaa") is None and terms.hinge_rho("aaa") is None
    assert float(terms.hinge_rho("learned")) == pytest.approx(learned, abs=1e-6)
    assert float(terms.hinge_rho("all")) == pytest.approx((sum(dam_s) + sum(dam_u) + sum(band1)) / 8, abs=1e-6)
    assert terms.hinge_log("learned") == pytest.approx((sum(dam_s) + sum(dam_u), 4.0))

    crit = SparsityLoss()
    crit.init_sparsity(SparsityLossConfig(aaa_alpha=2.0, aaa_target=0.6, aaa_hinge_heads="learned"))
    total, log = crit.penalties(terms, sample_size=3)
    assert log["aaa_loss"] == pytest.approx(2.0 * (0.6 - learned) * 3, rel=1e-6)  # Eq. 10, times the sample size
    assert float(total) == pytest.approx(log["aaa_loss"] + log["dam_loss"], rel=1e-6)
    assert (log["hinge_rho_sum"], log["hinge_count"]) == pytest.approx((learned * 4, 4.0))
    above = SparsityLoss()
    above.init_sparsity(SparsityLossConfig(aaa_alpha=2.0, aaa_target=0.4, aaa_hinge_heads="learned"))
    assert above.penalties(terms, 3)[1]["aaa_loss"] == 0.0  # ρ above its target: no pull
    default = SparsityLoss()
    default.init_sparsity(SparsityLossConfig(aaa_alpha=2.0, aaa_target=0.6))  # aaa heads only: none here
    assert "aaa_loss" not in default.penalties(terms, 3)[1]


def reference_rho(dam_s, dam_u) -> torch.Tensor:
    """ρ of the two DAM heads (Eq. 9) straight from their α, without noise
    (M = sigmoid(α)): an autograd reference independent of the attention layer."""
    rhos = []
    for n in LENGTHS:
        i, j = torch.arange(n)[:, None], torch.arange(n)[None, :]
        m = torch.sigmoid(dam_s.alpha[(i - j).abs()])
        ends = (i == 0) | (j == 0) | (i == n - 1) | (j == n - 1)
        m = torch.where(ends, torch.ones_like(m), m)
        rhos += [1 - m.sum() / n**2, 1 - torch.sigmoid(dam_u.alpha[dam_u.index(i, j)]).sum() / n**2]
    return torch.stack(rhos).mean()


@pytest.mark.parametrize("mode", ["post", "pre"])
def test_hinge_gradient_reaches_the_dam_logits(mode):
    attn = make_attention(HEADS, mode=mode, embed_dim=D, max_len=8, dam_no_noise=True).train()
    terms = layer_terms(attn)
    crit = SparsityLoss()
    crit.init_sparsity(SparsityLossConfig(aaa_alpha=0.5, aaa_target=0.9, aaa_hinge_heads="learned"))
    found = crit.penalties(terms, sample_size=1)[0]  # the hinge alone (--dam-lambda 0)
    alphas = [d.alpha for d in attn.learned["dam"]]
    got = torch.autograd.grad(found, alphas)
    ref_rho = reference_rho(*attn.learned["dam"])
    assert float(terms.hinge_rho("learned")) == pytest.approx(float(ref_rho), abs=1e-6)
    want = torch.autograd.grad(0.5 * torch.relu(0.9 - ref_rho), alphas)
    for g, w in zip(got, want):
        assert g.abs().sum() > 0
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-9)  # no 1/|C| factor, unlike --dam-lambda in pre mode
    # dam-s offsets beyond the longest sentence's inner part (n − 3 = 2) get nothing
    assert torch.all(got[0][3:] == 0)


def model_and_sample(**criterion):
    model, crit, _, sample = translation_setup("[aaa,dam-s,dam-u,band-1]*2", **criterion)
    return model, crit, sample


def reduced(outputs):
    with metrics.aggregate() as agg:
        LabelSmoothedCrossEntropyWithSparsity.reduce_metrics(outputs)
    return agg.get_smoothed_values()


@pytest.mark.parametrize("heads", ["aaa", "learned", "all"])
def test_hinge_rho_is_a_sum_count_pair_across_workers(heads):
    model, crit, sample = model_and_sample(aaa_alpha=0.3, aaa_target=0.9, aaa_hinge_heads=heads)
    model.train()
    logs = []
    for seed in range(4):  # e.g. 2 workers x --update-freq 2, each with its own noise
        torch.manual_seed(seed)
        logs.append(crit(model, sample)[2])
    summed = {k: sum(float(log.get(k, 0)) for log in logs) for k in logs[0]}
    each = [reduced([log])["hinge_rho"] for log in logs]
    for outputs in ([summed], logs):
        values = reduced(outputs)
        assert values["hinge_rho"] == pytest.approx(sum(each) / 4, abs=1e-6)  # equal counts: the mean
        assert values["aaa_alpha"] == pytest.approx(0.3)
        if heads == "aaa":
            assert values["hinge_rho"] == pytest.approx(values["aaa_rho"], abs=1e-6)
        elif heads == "all":
            assert values["hinge_rho"] == pytest.approx(values["rho"], abs=1e-6)
        else:  # 2 aaa and 4 DAM slots per sentence and layer pair: ρ of aaa and 1 − density of DAM
            aaa, dam = summed["aaa_count"], summed["dam_count"]
            mix = (values["aaa_rho"] * aaa + (1 - values["dam_density"]) * dam) / (aaa + dam)
            assert values["hinge_rho"] == pytest.approx(mix, abs=1e-6)
    assert summed["hinge_count"] == 4 * {"aaa": 4, "learned": 12, "all": 16}[heads]  # 2 sentences x 2 layers


def test_bad_hinge_heads():
    with pytest.raises(ValueError, match="--aaa-hinge-heads"):
        SparsityLoss().init_sparsity(SparsityLossConfig(aaa_hinge_heads="dam"))
