"""Learned masks (DAM_u, DAM_s, AAA), head gates, exported masks and the
sparsity terms, at module level."""

from types import SimpleNamespace

import pytest
import torch

import fairseq_local  # noqa: F401  (registers kinds, archs and criteria)
from fairseq.models import ARCH_CONFIG_REGISTRY
from fairseq_local.configs import build_encoder
from fairseq_local.criteria import SparsityLoss, SparsityLossConfig
from fairseq_local.export_masks import export, stage2_layout
from fairseq_local.modules.layout import LayoutError, format_layout, parse_layout
from fairseq_local.modules.learned import (
    AxisAdaptiveSpec, DamMask, DamSpec, HeadGates, TauSchedule, gumbel_sigmoid,
)
from fairseq_local.modules.local_attention import LocalMultiheadAttention, QKProjection
from fairseq_local.modules.masks import MASK_FILE_FORMAT, FileMask, MaskSpecError, parse_mask
from fairseq_local.paper_configs import METHOD_CONFIGS
from conftest import padding_mask
from test_models import encode

D, H = 16, 4
SMALL = {"encoder_embed_dim": 32, "encoder_ffn_embed_dim": 64, "dropout": 0.0, "dam_max_len": 24}


def randomised(mask: DamMask, seed: int = 0) -> DamMask:
    torch.manual_seed(seed)
    torch.nn.init.normal_(mask.alpha, std=2.0)
    return mask


# ------------------------------------------------------------------- parsing


def test_learned_tokens_parse_and_roundtrip():
    assert parse_mask("dam-u") == DamSpec(False) and parse_mask("dam-s") == DamSpec(True)
    assert parse_mask("aaa") == AxisAdaptiveSpec(2) and parse_mask("aaa-3") == AxisAdaptiveSpec(3)
    text = "[dam-u,dam-s@a,aaa@a,global:gate,band-2:gate@@t,aaa-3,file,file-0.1]"
    layers = parse_layout(text)
    assert layers[0].gated_heads == (3, 4)
    assert layers[0].masks[6] == FileMask(0, 6) and layers[0].masks[7] == FileMask(0, 1)
    assert format_layout(layers) == text and parse_layout(format_layout(layers)) == layers
    assert all(m.learned for m in layers[0].masks[:3]) and not layers[0].masks[3].learned


@pytest.mark.parametrize("token, message", [
    ("dam-u+local-1", "learned kind 'dam-u' cannot be part of a union"),
    ("dam-x", "unknown mask kind"), ("dam-s-2", "takes no parameter"), ("aaa-x", "aaa[-W]"),
    ("file-1", "file[-L.H]"),
])
def test_bad_learned_tokens(token, message):
    with pytest.raises(MaskSpecError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_mask(token)


def test_bad_gate_modifier():
    with pytest.raises(LayoutError, match=r"unknown modifier ':gat' \(only ':gate'\)"):
        parse_layout("[global:gat*4]")


def test_method_archs_registered():
    for cfg in METHOD_CONFIGS:
        args = SimpleNamespace()
        ARCH_CONFIG_REGISTRY[cfg.arch](args)
        assert (args.encoder_layers, args.encoder_attention_heads, args.encoder_embed_dim) == (6, 8, 512)
        assert args.attn_layout == format_layout(parse_layout(cfg.layout))
        assert args.mask_mode == (cfg.mask_mode or "post")


# ----------------------------------------------------------------------- DAM


def test_dam_s_is_toeplitz_with_ends_on():
    mask = randomised(DamMask(True, 16)).train()
    mask.resample()
    n = 11
    pos = torch.arange(n)[None]
    for m in [mask.gather(pos, pos, tau=0.7)[0], mask.eval().gather(pos, pos, 1.0)[0]]:
        assert (m[0] == 1).all() and (m[-1] == 1).all() and (m[:, 0] == 1).all() and (m[:, -1] == 1).all()
        inner = m[1:-1, 1:-1]
        for k in range(1, n - 2):  # M_ij = M_{i+k,j+k}, and symmetric in i - j
            assert torch.allclose(inner[k:, k:], inner[:-k, :-k], atol=1e-6, rtol=0)
        assert torch.allclose(inner, inner.T, atol=1e-6, rtol=0)
        mask.train()
    assert mask.alpha.numel() == 16  # one α per offset


def test_dam_u_is_symmetric_and_position_wise():
    mask = randomised(DamMask(False, 12)).train()
    assert mask.alpha.numel() == 12 * 13 // 2
    mask.resample()
    pos = torch.arange(12)[None]
    i, j = torch.arange(12)[:, None], torch.arange(12)[None, :]
    idx = mask.index(i, j)  # α_ij = α_ji: one parameter per unordered pair
    assert torch.equal(idx, idx.T) and sorted(idx.unique().tolist()) == list(range(78))
    soft = mask.gather(pos, pos, tau=0.5)[0]  # (vectorised sigmoid: equal to rounding)
    assert torch.allclose(soft, soft.T, atol=1e-6, rtol=0) and not torch.allclose(soft[1:, 1:], soft[:-1, :-1])
    hard = mask.eval().gather(pos, pos, 1.0)[0]
    assert torch.equal(hard, hard.T) and set(hard.unique().tolist()) <= {0.0, 1.0}
    # evaluation is 1[α > 0] at each pair
    i, j = torch.triu_indices(12, 12)
    assert torch.equal(hard[i, j], (mask.alpha > 0).float())


def test_dam_rejects_too_long_sentences():
    mask = DamMask(False, 5).eval()
    pos = torch.arange(6)[None]
    with pytest.raises(ValueError, match="longer than the DAM mask's maximum length 5"):
        mask.gather(pos, pos, 1.0)


def test_hard_gumbel_sigmoid_samples_average_to_sigmoid_alpha():
    torch.manual_seed(0)
    alpha = torch.tensor([-3.0, -1.0, 0.0, 0.5, 2.0])
    n = 40000
    samples = gumbel_sigmoid(alpha.expand(n, -1), tau=0.3) > 0.5
    p = torch.sigmoid(alpha)
    tolerance = 5 * (p * (1 - p) / n).sqrt()
    assert ((samples.float().mean(0) - p).abs() < tolerance).all(), samples.float().mean(0)


def test_tau_schedules():
    assert TauSchedule(2.0)(500) == 2.0
    lin = TauSchedule(1.0, 0.2, 100, "linear")
    assert lin(0) == 1.0 and lin(50) == pytest.approx(0.6) and lin(100) == lin(1000) == pytest.approx(0.2)
    exp = TauSchedule(1.0, 0.01, 100, "exponential")
    assert exp(50) == pytest.approx(0.1) and exp(200) == pytest.approx(0.01)
    with pytest.raises(ValueError):
        TauSchedule(0.0)


# --------------------------------------------------------- attention module


def attention(tokens, mode="post", gated=(), max_len=16, seed=0):
    torch.manual_seed(seed)
    masks = [parse_mask(t) for t in tokens]
    dam = [DamMask(m.structured, max_len) for m in masks if isinstance(m, DamSpec)]
    from fairseq_local.modules.learned import AxisSelector
    axis = AxisSelector(D) if any(isinstance(m, AxisAdaptiveSpec) for m in masks) else None
    gates = HeadGates(len(gated), init=0.5) if gated else None
    attn = LocalMultiheadAttention(D, masks, list(range(H)), [QKProjection(D, D // H) for _ in range(H)],
                                   mode, dam=dam, axis=axis, gates=gates, gated_heads=gated)
    for p in attn.parameters():  # non-zero biases; α and the AAA FC layer far from 0
        torch.nn.init.normal_(p, std=0.5 if p.dim() > 1 and p.shape[0] == D else 1.0)
    return attn


def padded(lengths, left_pad, seed=1):
    torch.manual_seed(seed)
    T = max(lengths)
    return torch.randn(T, len(lengths), D), padding_mask(lengths, left_pad)


def test_gradients_reach_alpha_gates_and_the_aaa_fc_layer():
    attn = attention(["dam-u", "dam-s", "aaa", "global"], gated=(3,)).train()
    attn.aaa_neg = -3.0  # a moderate C, so that the task loss's gradient is not saturated
    attn.collect_stats = True
    x, pad = padded([7, 5], left_pad=True)
    for d in attn.dam:
        d.resample()
    y, _ = attn(x, key_padding_mask=pad)
    (y.pow(2).sum() + attn.stats["aaa_rho_sum"] + attn.stats["dam_density_sum"]
     + attn.stats["gate_l0"]).backward()
    for name, p in [("dam-u", attn.dam[0].alpha), ("dam-s", attn.dam[1].alpha),
                    ("aaa fc", attn.axis.fc.weight), ("gate", attn.gates.log_alpha)]:
        assert p.grad is not None and p.grad.abs().sum() > 0, name


def test_rho_gradient_reaches_aaa_fc_with_the_papers_constant():
    attn = attention(["aaa"] * 4).train()  # C = -1e4: the hinge on ρ still trains the FC layer
    attn.collect_stats = True
    x, pad = padded([6, 4], left_pad=False)
    attn(x, key_padding_mask=pad)
    attn.stats["aaa_rho_sum"].backward()
    assert attn.axis.fc.weight.grad.abs().sum() > 0


@pytest.mark.parametrize("tokens", [["dam-u", "dam-s", "aaa", "band-1"], ["aaa-1", "dam-s", "star", "global"]])
@pytest.mark.parametrize("mode", ["post", "pre"])
def test_evaluation_is_deterministic_and_padding_invariant(tokens, mode):
    attn = attention(tokens, mode, gated=(0, 3)).eval()
    x, _ = padded([6], left_pad=True)
    torch.manual_seed(5)
    alone, w_alone = attn(x, need_head_weights=True)
    torch.manual_seed(6)  # no noise in evaluation
    again, _ = attn(x, need_head_weights=True)
    assert torch.equal(alone, again)
    for left_pad in (True, False):
        batch, pad = padded([8, 6, 2], left_pad, seed=3)
        real = (~pad[1]).nonzero().flatten()
        batch[real, 1] = x[:, 0]
        y, w = attn(batch, key_padding_mask=pad, need_head_weights=True)
        assert torch.allclose(y[real, 1], alone[:, 0], atol=1e-5)
        assert torch.allclose(w[:, 1][:, real][:, :, real], w_alone[:, 0], atol=1e-5)
        assert not torch.isnan(y).any()


def test_aaa_pattern_in_evaluation_is_axis_or_local():
    attn = attention(["aaa", "aaa-0", "global", "global"]).eval()
    n = 7
    x, _ = padded([n], left_pad=True)
    ind = (attn.axis.fc(x)[:, 0] > 0).T  # (2, n): rows, columns
    assert ind[0].any() and not ind[0].all() and ind[1].any() and not ind[1].all()
    _, w = attn(x, need_head_weights=True)
    i, j = torch.arange(n)[:, None], torch.arange(n)[None, :]
    for h, window in [(0, 2), (1, 0)]:
        allowed = ind[0][:, None] | ind[1][None, :] | ((i - j).abs() <= window)
        assert torch.equal(attn.last_axis[0, h] > 0.5, allowed)
        assert not w[h, 0][~allowed].any() and w[h, 0].sum(-1).allclose(torch.ones(n))


def test_eq9_and_the_footnote_for_local_2():
    attn = attention(["aaa"] * 4).eval()
    torch.nn.init.zeros_(attn.axis.fc.weight)
    torch.nn.init.constant_(attn.axis.fc.bias, -5.0)  # no axis: B = local-2 alone
    attn.collect_stats = True
    lengths = [3, 5, 9, 12]
    x, pad = padded(lengths, left_pad=True)
    attn(x, key_padding_mask=pad)
    expected = sum(1 - 5 / n + 6 / n**2 for n in lengths) / len(lengths)
    s = attn.stats
    assert float(s["aaa_rho_sum"] / s["aaa_count"]) == pytest.approx(expected, abs=1e-6)
    assert float(s["rho_sum"] / s["rho_count"]) == pytest.approx(expected, abs=1e-6)
    assert float(s["aaa_rows"]) == 0 and float(s["aaa_tokens"]) == sum(lengths)


def test_gates_scale_head_outputs_and_close():
    attn = attention(["global"] * 4, gated=(1, 2)).eval()
    with torch.no_grad():
        attn.gates.log_alpha.copy_(torch.tensor([-10.0, 10.0]))
    assert attn.gates.eval_values().tolist() == [0.0, 1.0]
    x, _ = padded([5], left_pad=True)
    y = attn(x)[0]
    with torch.no_grad():  # zeroing head 1's Wo slice gives the same output
        attn.out_proj.weight[:, D // H: 2 * D // H] = 0
        attn.gates.log_alpha.fill_(10.0)
    assert torch.allclose(attn(x)[0], y, atol=1e-6)
    g = HeadGates(3, init=0.0)
    torch.manual_seed(0)
    samples = torch.stack([g() for _ in range(2000)])
    assert samples.min() == 0.0 and samples.max() == 1.0  # hard-concrete: exact 0s and 1s
    assert ((samples > 0).float().mean() - g.l0().mean()).abs() < 0.05


# ------------------------------------------------------- export and reload


@pytest.mark.parametrize("mode", ["post", "pre"])
@pytest.mark.parametrize("structured", [False, True])
def test_exported_hard_mask_reloads_as_the_same_fixed_mask(tmp_path, mode, structured):
    kind = "dam-s" if structured else "dam-u"
    attn = attention([kind, kind, "band-1", "global"], mode, max_len=12).eval()
    masks = {(0, 0): attn.dam[0], (0, 1): attn.dam[1]}
    path = tmp_path / "masks.pt"
    torch.save({"format": MASK_FILE_FORMAT, "masks": export(masks, None, None)}, path)
    fixed = LocalMultiheadAttention(
        D, [FileMask(0, 0, str(path)), FileMask(0, 1, str(path)), parse_mask("band-1"), parse_mask("global")],
        list(range(H)), list(attn.qk), mode).eval()
    fixed.v_proj, fixed.out_proj = attn.v_proj, attn.out_proj
    for left_pad in (True, False):
        x, pad = padded([9, 4, 1], left_pad)
        a, wa = attn(x, key_padding_mask=pad, need_head_weights=True)
        b, wb = fixed(x, key_padding_mask=pad, need_head_weights=True)
        for s in range(3):  # outputs at padding positions are never used
            r = (~pad[s]).nonzero().flatten()
            assert torch.allclose(a[r, s], b[r, s], atol=1e-5)
            assert torch.allclose(wa[:, s][:, r][:, :, r], wb[:, s][:, r][:, :, r], atol=1e-6)


def test_progressive_pruning_drops_the_smallest_entries():
    mask = randomised(DamMask(False, 10))
    (entry,) = export({(0, 0): mask}, None, 80.0).values()
    p = mask.matrix(10, "prob")
    kept = entry["matrix"]
    assert kept.sum() == 20  # 20 % of 100, no ties in an unstructured mask
    assert p[kept].min() > p[~kept].max()
    structured = randomised(DamMask(True, 10), seed=1)
    (entry,) = export({(0, 0): structured}, 10, 50.0).values()
    m = entry["matrix"][1:-1, 1:-1]  # still Toeplitz: ties along a diagonal are kept together
    assert torch.equal(m[1:, 1:], m[:-1, :-1]) and entry["ends"]


def test_stage2_layout_keeps_other_heads_and_groups():
    layout = parse_layout("[dam-s@a,band-1@a,global:gate,dam-u]*2")
    assert stage2_layout(layout) == "[file@a,band-1@a,global:gate,file]*2"


def test_file_mask_errors(tmp_path):
    with pytest.raises(MaskSpecError, match="needs --mask-file"):
        FileMask(0, 0).dense(torch.arange(3), torch.arange(3))
    with pytest.raises(MaskSpecError, match="does not exist"):
        FileMask(0, 0, str(tmp_path / "none.pt")).entry()
    bad = tmp_path / "bad.pt"
    torch.save({"x": 1}, bad)
    with pytest.raises(MaskSpecError, match="not a mask file"):
        FileMask(0, 0, str(bad)).entry()
    with pytest.raises(MaskSpecError, match="needs --mask-file"):
        build_encoder("transformer_local", dict(SMALL, attn_layout="[file*8]*6"))


# ---------------------------------------------------------------- encoder


def test_dam_alpha_shared_by_layers_unless_per_layer():
    enc = build_encoder("transformer_dam_s", dict(SMALL))
    assert enc.layers[0].self_attn.dam[3] is enc.layers[5].self_attn.dam[3]
    assert enc.layers[0].self_attn.dam[3] is not enc.layers[0].self_attn.dam[4]
    assert sum(p.numel() for n, p in enc.named_parameters() if n.endswith("alpha")) == 8 * 24
    per_layer = build_encoder("transformer_dam_s", dict(SMALL, dam_per_layer=True))
    assert per_layer.layers[0].self_attn.dam[3] is not per_layer.layers[5].self_attn.dam[3]
    assert sum(p.numel() for n, p in per_layer.named_parameters() if n.endswith("alpha")) == 6 * 8 * 24


def test_one_noise_sample_per_update_for_shared_alpha():
    enc = build_encoder("transformer_local", dict(SMALL, attn_layout="[dam-u*8]*6")).train()
    tokens = torch.tensor([[5, 6, 7, 2]])
    enc(tokens, torch.tensor([4]))
    noise = enc.layers[0].self_attn.dam[0].noise
    assert noise is enc.layers[3].self_attn.dam[0].noise  # the same draw in every layer
    enc(tokens, torch.tensor([4]))
    assert not torch.equal(noise, enc.layers[0].self_attn.dam[0].noise)  # a new draw per forward


def test_tau_follows_set_num_updates():
    enc = build_encoder("transformer_aaa", dict(SMALL, tau_start=1.0, tau_end=0.1, tau_anneal="linear",
                                                tau_anneal_updates=10))
    enc.set_num_updates(5)
    assert all(a.tau == pytest.approx(0.55) for a in enc.attention_modules()) and enc.num_updates == 5


@pytest.mark.parametrize("layout", ["[dam-u,dam-s,aaa,global:gate,band-1:gate,aaa-1,dam-s,star]*6"])
@pytest.mark.parametrize("mode", ["post", "pre"])
def test_encoder_padding_invariance_in_evaluation(layout, mode):
    torch.manual_seed(0)
    enc = build_encoder("transformer_local", dict(SMALL, attn_layout=layout, mask_mode=mode, dam_init=0.0))
    for n, p in enc.named_parameters():
        if n.endswith("alpha") or "axis" in n:
            torch.nn.init.normal_(p, std=1.0)
    enc.eval()
    gen = torch.Generator().manual_seed(1)
    sentences = [torch.randint(4, 30, (n,), generator=gen).tolist() + [2] for n in (9, 3, 1, 6)]
    with torch.no_grad():
        alone = [encode(enc, [s], True)[0] for s in sentences]
        for left_pad in (True, False):
            for a, b in zip(alone, encode(enc, sentences, left_pad)):
                assert torch.allclose(a, b, atol=1e-5), (a - b).abs().max()


# -------------------------------------------------------------- criterion


def sparsity(**cfg) -> SparsityLoss:
    loss = SparsityLoss()
    loss.init_sparsity(SparsityLossConfig(**cfg))
    return loss


def fake(stats):
    return SimpleNamespace(stats=stats, tau=1.0, dam_heads=(0,), aaa_heads=(0,))


def test_hinge_and_l1_and_l0_terms():
    crit = sparsity(aaa_alpha=2.0, aaa_target=0.9, dam_lambda=0.5, gate_lambda=0.1)
    model = SimpleNamespace(training=False, encoder=SimpleNamespace(num_updates=3))
    stats = [{"aaa_rho_sum": torch.tensor(1.2), "aaa_count": torch.tensor(2.0),
              "dam_density_sum": torch.tensor(3.0), "dam_count": torch.tensor(4.0),
              "gate_l0": torch.tensor(5.0), "rho_sum": torch.tensor(1.0), "rho_count": torch.tensor(8.0)},
             {"aaa_rho_sum": torch.tensor(1.6), "aaa_count": torch.tensor(2.0),
              "rho_sum": torch.tensor(3.0), "rho_count": torch.tensor(8.0)}]
    extra, log = crit.sparsity_terms(model, [fake(s) for s in stats], sample_size=10)
    # ρ = (1.2 + 1.6)/4 = 0.7: hinge 2·(0.9 − 0.7); DAM 0.5·3/4; gates 0.1·5; all × sample size
    assert float(extra) == pytest.approx(10 * (2 * 0.2 + 0.5 * 0.75 + 0.1 * 5))
    assert log["aaa_loss"] == pytest.approx(4.0) and log["rho_l1_sum"] == 1.0 and log["rho_l2_count"] == 8.0
    over = sparsity(aaa_alpha=2.0, aaa_target=0.5)
    extra, _ = over.sparsity_terms(model, [fake(stats[1])], sample_size=10)
    assert float(extra) == 0.0  # ρ = 0.8 above the target: no loss


def test_aaa_alpha_linear_schedule():
    crit = sparsity(aaa_alpha=4.0, aaa_alpha_updates=100)
    assert [crit.aaa_weight(n) for n in (0, 25, 100, 500)] == [0.0, 1.0, 4.0, 4.0]
    assert sparsity(aaa_alpha=4.0).aaa_weight(0) == 4.0


@pytest.mark.parametrize("cfg", [dict(dam_lambda=-1.0), dict(aaa_target=1.5)])
def test_bad_criterion_options(cfg):
    with pytest.raises(ValueError, match="--"):
        sparsity(**cfg)


def test_mask_images_one_per_shared_dam_head_and_aaa_layer():
    from fairseq_local.criteria.sparsity_loss import mask_images
    enc = build_encoder("transformer_local", dict(SMALL, attn_layout="[dam-s*4,aaa*4]*6"))
    enc.train()(torch.tensor([[5, 6, 7, 2]]), torch.tensor([4]))
    images = mask_images(enc.attention_modules(), 16)
    assert len([k for k in images if "dam-s" in k]) == 4 and len([k for k in images if "aaa" in k]) == 6
    assert all(img.dim() == 2 and 0 <= img.min() and img.max() <= 1 for img in images.values())
