"""Adaptive Axis Attention in evaluation keeps what training keeps.

Training keeps token n as a row (column) axis when logit_n + G1 − G2 > 0
(Wang et al. Eq. 11, straight-through), with probability sigmoid(logit_n);
evaluation keeps, per sentence, the round(Σ sigmoid(logit)) real tokens of
highest logit (:func:`~fairseq_local.attention.learned.axis.expected_topk`).
Wang et al. §4.3: "AAA exhibits a similar sparsity value in the development
set as in the training set".  The acceptance test fine-tunes a small encoder
toward ρ_target = 0.5 with Eq. 10's hinge and compares the dev ρ (eval mode)
with the training ρ, both Eq. 9 over real tokens, as the criterion logs them;
the former rule 1[logit > 0] misses by more than 0.03 on the same model."""

import pytest
import torch
from torch import nn

import fairseq_local  # noqa: F401  (registers kinds and criteria)
from helpers import padding_mask
from fairseq_local.attention.build import AttentionBuilder
from fairseq_local.attention.config import AttentionConfig, attention_options
from fairseq_local.attention.context import attention_context
from fairseq_local.attention.learned import AxisSelector, axis, gumbel_noise_difference
from fairseq_local.attention.learned.axis import expected_topk
from fairseq_local.attention.penalties import sparsity_terms
from fairseq_local.criteria import SparsityLoss, SparsityLossConfig


def former_rule(logits, padding_mask=None):
    """The evaluation rule this replaces: 1[logit > 0] (padding off)."""
    on = logits > 0
    return (on if padding_mask is None else on & ~padding_mask.unsqueeze(0)).float()


# ------------------------------------------------------------------ the rule


def test_keeps_round_of_the_expected_count_most_probable_first():
    # rows: σ(−1) = 0.269 six times, Σ 1.61 -> k = 2, the tie to the earlier positions;
    # columns: σ = 0.881, 0.269, 0.622, 0.047, 0.5, 0.5 -> Σ 2.82 -> k = 3: logits 2, 0.5, 0 (first 0)
    logits = torch.tensor([[[-1.0] * 6], [[2.0, -1.0, 0.5, -3.0, 0.0, 0.0]]])  # (2, B=1, T=6)
    ind = expected_topk(logits)
    assert ind.dtype == torch.float32
    assert ind[0, 0].tolist() == [1, 1, 0, 0, 0, 0]
    assert ind[1, 0].tolist() == [1, 0, 1, 0, 1, 0]
    assert former_rule(logits)[0].sum() == 0  # 1[logit > 0] keeps no row at all
    # round half up: Σ σ = 0.5 exactly keeps one token; 0.4999 none
    assert expected_topk(torch.zeros(2, 1, 1))[:, 0].tolist() == [[1.0], [1.0]]
    assert expected_topk(torch.full((2, 1, 1), -1e-4)).sum() == 0


@pytest.mark.parametrize("left_pad", [True, False])
def test_padding_neither_counts_nor_is_kept(left_pad):
    torch.manual_seed(0)
    n, T = 9, 14
    alone = torch.randn(2, 1, n) - 1.0
    pad = padding_mask([n, T], left_pad)  # sentence 0 padded to T
    logits = torch.full((2, 2, T), 10.0)  # padding's logits would be kept, and add 1 each to k, if counted
    real = (~pad[0]).nonzero().flatten()
    logits[:, 0, real] = alone[:, 0]
    logits[:, 1] = torch.randn(2, T)
    ind = expected_topk(logits, pad)
    assert torch.equal(ind[:, 0, real], expected_topk(alone)[:, 0])
    assert ind[:, 0][:, pad[0]].sum() == 0
    assert torch.equal(ind[:, 1], expected_topk(logits[:, 1:])[:, 0])  # a full row: as without a mask


def test_the_count_is_the_mean_of_training_samples():
    """Σ sigmoid(logit) is the mean number of axes Eq. 11's samples keep (logistic noise)."""
    torch.manual_seed(1)
    logits = torch.randn(2, 3, 30) * 2 - 1.5
    sel = AxisSelector(4)
    draws = torch.stack([(logits + gumbel_noise_difference(logits.shape) > 0).float().sum(-1)
                         for _ in range(4000)])
    expected = torch.sigmoid(logits).sum(-1)
    torch.testing.assert_close(draws.mean(0), expected, atol=0.08, rtol=0)
    kept = expected_topk(logits).sum(-1)
    assert (kept - expected).abs().max() <= 0.5
    assert (former_rule(logits).sum(-1) - expected).mean() < -0.5  # the former rule keeps fewer
    # the selector in evaluation applies the rule to its logits, padding passed through
    x, pad = torch.randn(7, 2, 4), padding_mask([7, 4], left_pad=True)
    got = sel.eval().indicators(x, 1.0, pad)
    assert torch.equal(got, expected_topk(sel.logits(x).permute(2, 1, 0), pad))


def test_padding_is_never_an_axis_in_training():
    sel = AxisSelector(4).train()
    with torch.no_grad():
        sel.fc.bias.fill_(50.0)  # every sample on
    x, pad = torch.randn(6, 2, 4, requires_grad=True), padding_mask([6, 3], left_pad=False)
    ind = sel.indicators(x, 1.0, pad)
    assert torch.equal(ind, (~pad).float().expand(2, -1, -1))
    ind.sum().backward()  # straight-through: the soft sample's gradient still reaches the FC layer
    assert torch.isfinite(sel.fc.bias.grad).all()


def test_runs_on_meta_without_host_reads():
    """A per-row k as a tensor: no .item(), no value-dependent shape (meta tensors have no values)."""
    meta = torch.device("meta")
    out = expected_topk(torch.empty(2, 3, 11, device=meta), torch.empty(3, 11, dtype=torch.bool, device=meta))
    assert out.device == meta and out.shape == (2, 3, 11) and out.dtype == torch.float32


# ------------------------------------------------- acceptance: dev ρ = training ρ

V, D, HEADS, LAYERS = 24, 32, 4, 2
TARGET, UPDATES, BATCH = 0.5, 300, 16


def sentences(n: int, seed: int, lo: int = 8, hi: int = 40):
    """Random sentences of ``lo``-``hi`` tokens; the label is the first token's parity
    (the model must attend to it)."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(lo, hi + 1, (n,), generator=g).tolist()
    sents = [torch.randint(2, V, (m,), generator=g) for m in lengths]
    return sents, torch.tensor([int(s[0]) % 2 for s in sents])


def batches(sents, labels, seed: int):
    """Right-padded batches of BATCH sentences, in a seeded order."""
    order = torch.randperm(len(sents), generator=torch.Generator().manual_seed(seed)).tolist()
    for i in range(0, len(order), BATCH):
        idx = order[i:i + BATCH]
        lengths = [len(sents[j]) for j in idx]
        tokens = torch.zeros(len(idx), max(lengths), dtype=torch.long)
        for b, j in enumerate(idx):
            tokens[b, :lengths[b]] = sents[j]
        yield tokens, padding_mask(lengths, left_pad=False), labels[idx]


class Encoder(nn.Module):
    """Two post-norm layers of four ``aaa`` heads (axis OR local-2, before the softmax), a mean-pooled classifier."""

    def __init__(self) -> None:
        super().__init__()
        self.cfg = attention_options(AttentionConfig(attn_layout=f"[aaa*{HEADS}]*{LAYERS}", mask_mode="pre"))
        build = AttentionBuilder(self.cfg, D, LAYERS, HEADS, max_positions=64)
        self.attn = nn.ModuleList(build(i) for i in range(LAYERS))
        self.ffn = nn.ModuleList(nn.Sequential(nn.Linear(D, 2 * D), nn.ReLU(), nn.Linear(2 * D, D))
                                 for _ in range(LAYERS))
        self.norms = nn.ModuleList(nn.LayerNorm(D) for _ in range(2 * LAYERS))
        self.embed, self.pos, self.out = nn.Embedding(V, D), nn.Embedding(64, D), nn.Linear(D, 2)

    def forward(self, tokens, pad):
        x = (self.embed(tokens) + self.pos(torch.arange(tokens.shape[1]))).transpose(0, 1)  # (T, B, D)
        with attention_context(records=True) as ctx:
            for i in range(LAYERS):
                x = self.norms[2 * i](x + self.attn[i](x, key_padding_mask=pad)[0])
                x = self.norms[2 * i + 1](x + self.ffn[i](x))
        real = (~pad).T.unsqueeze(-1).float()
        return self.out((x * real).sum(0) / real.sum(0)), sparsity_terms(self.cfg, list(self.attn), ctx.records)


def dev_rho(model: Encoder, sents, labels) -> float:
    """ρ of the aaa heads (Eq. 9) over the dev sentences in evaluation, as the validation logs it."""
    model.eval()
    total = count = 0.0
    with torch.no_grad():
        for tokens, pad, _ in batches(sents, labels, 0):
            s, c = model(tokens, pad)[1].hinge_log("aaa")
            total, count = total + s, count + c
    return total / count


@pytest.fixture(scope="module")
def fine_tuned():
    """A fine-tuning toward ρ_target = 0.5 (Eq. 10's hinge, α = 1, the criterion's own), Adam at 3e-3 with a
    linear warm-up and decay; the training ρ is the mean logged over its last 100 updates."""
    torch.manual_seed(0)
    model = Encoder()
    crit = SparsityLoss()
    crit.init_sparsity(SparsityLossConfig(aaa_alpha=1.0, aaa_target=TARGET, aaa_hinge_heads="aaa"))
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda u: min(1.0, (u + 1) / 30) * max(0.0, 1 - u / UPDATES))
    train, dev = sentences(2000, 1), sentences(400, 2)
    logged, epoch = [], 0
    while len(logged) < UPDATES:
        for tokens, pad, y in batches(*train, seed=epoch):
            model.train()
            logits, terms = model(tokens, pad)
            penalty, _ = crit.penalties(terms, sample_size=1)
            opt.zero_grad()
            (nn.functional.cross_entropy(logits, y) + penalty).backward()
            opt.step()
            sched.step()
            logged.append(terms.hinge_log("aaa"))
            if len(logged) == UPDATES:
                break
        epoch += 1
    first = logged[0][0] / logged[0][1]
    last = logged[-100:]
    return model, dev, first, sum(s for s, _ in last) / sum(c for _, c in last)


def test_dev_rho_is_the_training_rho_after_a_fine_tuning_toward_half(fine_tuned, monkeypatch):
    model, dev, first, train_rho = fine_tuned
    assert first < TARGET - 0.1 and train_rho >= TARGET - 0.03  # the hinge moved ρ to its target
    rho = dev_rho(model, *dev)
    assert abs(rho - train_rho) <= 0.03, f"dev ρ {rho:.4f} against training ρ {train_rho:.4f}"
    monkeypatch.setattr(axis, "expected_topk", former_rule)
    before = dev_rho(model, *dev)
    assert before - train_rho > 0.03, f"1[logit > 0]: dev ρ {before:.4f} against training {train_rho:.4f}"
