"""ρ of Eq. 9 from the patterns' structure: exact pair counts of every fixed
kind, the closed form of |B| for Adaptive Axis Attention (Eq. 12 OR local-W),
and the per-layer terms against the dense (B, H, T, T) computation."""

import pytest
import torch

import fairseq_local  # noqa: F401
from helpers import make_attention, padding_mask
from fairseq_local.models import build_encoder
from fairseq_local.attention.learned import AxisSelector, gumbel_sigmoid
from fairseq_local.attention.masks import parse_mask, real_positions, stack_masks
from fairseq_local.attention.context import attention_context
from fairseq_local.attention.penalties import AttentionRecord

FIXED = ["identity", "prev-2", "next-1", "band-2", "local-3", "global", "global-2", "axis-1.4-0.2",
         "diagonal-0.3", "no-diag", "logsparse", "strided-3", "fixed-4-1", "star", "random-2",
         "random-drop", "longformer-2-2", "bigbird-1-2-2", "local-1+global-1", "prev-1+diagonal-4"]
RELATIVE = [t for t in FIXED if parse_mask(t).relative]
LEARNED = ["dam-s", "dam-u", "aaa", "aaa-1"]


def dense_kept(rec: AttentionRecord) -> torch.Tensor:
    """(B, H): the dense reference, Σ over real pairs of every head's
    (B, H, T, T) pattern; relative masks on padded indices, the others on
    real positions, as the attention evaluates them."""
    m, T, B = rec.module.plan, rec.T, rec.B
    real = rec.real()
    pair = (real[:, :, None] & real[:, None, :]).float()  # (B, T, S)
    pos = real_positions(rec.padding_mask, T).expand(B, T)
    if all(mask.relative for mask in m.fixed_masks):
        index = torch.arange(T)
        fixed = stack_masks(m.fixed_masks, index, index)[None]  # (1, H, T, S)
    else:
        fixed = stack_masks(m.fixed_masks, pos, pos)  # (B, H, T, S)
    kept = (fixed.float() * pair[:, None]).sum((-1, -2))
    learned = [rec.learned[:, k] for k in range(len(m.heads_of("dam")))]
    learned += [AxisSelector.pattern(rec.realised["aaa"].extra, m.masks[h].local.dense(pos, pos))
                for h in m.heads_of("aaa")]
    if learned:
        sums = (torch.stack(learned, 1) * pair[:, None]).sum((-1, -2))
        kept = kept.index_copy(1, torch.tensor(m.learned_heads), sums)
    return kept


@pytest.mark.parametrize("token", FIXED)
def test_pair_count_is_the_dense_sum(token):
    mask = parse_mask(token)
    assert mask.pair_count(0) == 0
    for n in range(1, 41):
        pos = torch.arange(n)
        assert mask.pair_count(n) == int(mask.dense(pos, pos).expand(n, n).sum()), n


def test_closed_forms():
    for n in range(1, 41):
        assert parse_mask("global").pair_count(n) == n * n
        assert parse_mask("band-2").pair_count(n) == sum(max(0, n - abs(d)) for d in range(-2, 3))
        assert parse_mask("next-3").pair_count(n) == max(0, n - 3)
        assert parse_mask("local-50").pair_count(n) == n * n


@pytest.mark.parametrize("left_pad", [True, False])
@pytest.mark.parametrize("tokens", [RELATIVE + LEARNED, FIXED + LEARNED], ids=["relative", "all"])
def test_kept_equals_the_dense_sum(tokens, left_pad):
    attn = make_attention(tokens, embed_dim=2 * len(tokens), max_len=16).train()
    lengths = [3, 9, 1, 12, 9, 6]
    torch.manual_seed(1)
    x = torch.randn(12, len(lengths), attn.embed_dim)
    with attention_context(records=True) as ctx:
        attn(x, key_padding_mask=padding_mask(lengths, left_pad))
    rec = ctx.records[0]
    kept, expected = rec.kept(rec.real()), dense_kept(rec)
    assert kept.shape == (len(lengths), len(tokens)) and kept.dtype == torch.float32
    assert torch.equal(kept, expected)
    learned = list(attn.plan.learned_heads)
    weights = torch.randn(len(lengths), len(learned))
    params = [p for p in attn.parameters() if p.requires_grad]
    got = torch.autograd.grad((kept[:, learned] * weights).sum(), params, allow_unused=True, retain_graph=True)
    want = torch.autograd.grad((expected[:, learned] * weights).sum(), params, allow_unused=True)
    for g, w in zip(got, want):
        assert (g is None) == (w is None) and (g is None or torch.allclose(g, w, atol=1e-5))
    assert any(g is not None for g in got)


@pytest.mark.parametrize("window", [0, 1, 2, 5, 40])
@pytest.mark.parametrize("left_pad", [True, False])
@pytest.mark.parametrize("hard", [True, False])
def test_axis_closed_form_value_and_gradient(window, left_pad, hard):
    lengths, T = [1, 4, 17, 9, 17, 2], 17
    pad = padding_mask(lengths, left_pad)
    real = ~pad
    torch.manual_seed(window)
    logits = torch.randn(2, len(lengths), T, requires_grad=True)
    ind = gumbel_sigmoid(logits, 0.7, hard=hard)  # hard: 0/1 forward, the soft gradient backward
    pos = real_positions(pad, T)
    local = parse_mask(f"local-{window}").dense(pos, pos)
    pair = (real[:, :, None] & real[:, None, :]).float()
    dense = (AxisSelector.pattern(ind, local) * pair).sum((-1, -2))
    count = AxisSelector.pattern_count(ind, real, window)
    assert torch.allclose(count, dense, atol=1e-4)
    if hard:
        assert torch.equal(count, dense)
    weights = torch.randn(len(lengths))
    (g_count,) = torch.autograd.grad((count * weights).sum(), logits, retain_graph=True)
    (g_dense,) = torch.autograd.grad((dense * weights).sum(), logits)
    assert torch.allclose(g_count, g_dense, atol=1e-5)
    assert torch.all(g_count[:, pad] == 0)
    assert (g_dense.abs().sum() > 0) == (window < T - 1)  # all local: B no longer depends on I


def test_rho_per_layer_equals_the_dense_formula():
    layout = ("[aaa*2,dam-s,band-2,star,random-2,logsparse,global-2]*3;"
              "[aaa-1,dam-u,local-1+global-1,no-diag,fixed-4-1,bigbird-1-2-2,identity,global]*3")
    enc = build_encoder("transformer_local", dict(encoder_embed_dim=32, encoder_ffn_embed_dim=64, dropout=0.0,
                                                  dam_max_len=12, attn_layout=layout, dam_l1="density"))
    enc.train()
    lengths = [7, 4, 12, 4]
    torch.manual_seed(2)
    tokens = torch.full((len(lengths), max(lengths)), 1, dtype=torch.long)  # left-padded, as fairseq
    for b, n in enumerate(lengths):
        tokens[b, -n:] = torch.randint(4, 30, (n,))
    out = enc(tokens, torch.tensor(lengths))
    records = out["sparsity"]
    terms = enc.sparsity_terms(records)
    assert len(records) == 6 and all(r.padding_mask is not None for r in records)
    n2 = torch.tensor(lengths, dtype=torch.float32).pow(2)[:, None]
    aaa, dam = 0.0, 0.0
    for layer, rec in enumerate(records, start=1):
        rho = 1 - dense_kept(rec) / n2  # Adaptive Axis Attention, Eq. 9
        assert terms.log[f"rho_l{layer}_sum"] == pytest.approx(float(rho.sum()), abs=1e-5)
        aaa = aaa + rho[:, list(rec.module.plan.heads_of("aaa"))].sum()
        dam = dam + (1 - rho[:, list(rec.module.plan.heads_of("dam"))]).sum()
    aaa, dam = aaa / (3 * len(lengths) * 3), dam / (6 * len(lengths))
    assert float(terms.hinge_rho("aaa")) == pytest.approx(float(aaa), abs=1e-6)
    assert float(terms.penalties["dam"]) == pytest.approx(float(dam), abs=1e-6)
    params = [p for m in enc.attention_modules()
              for p in (m.learned["aaa"].fc.weight, *(d.alpha for d in m.learned["dam"]))]
    got = torch.autograd.grad(terms.hinge_rho("aaa") + terms.penalties["dam"], params, retain_graph=True)
    want = torch.autograd.grad(aaa + dam, params)
    assert all(torch.allclose(g, w, atol=1e-6) for g, w in zip(got, want))
    assert all(g.abs().sum() > 0 for g in got)
