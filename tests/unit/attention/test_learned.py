"""Learned masks (DAM_u, DAM_s, Adaptive Axis Attention) and head gates at
module level: parsing, structure, the estimators, evaluation, presets."""

import math
from types import SimpleNamespace

import pytest
import torch

import fairseq_local  # noqa: F401  (registers kinds, archs and criteria)
from helpers import make_attention, padding_mask
from fairseq.models import ARCH_CONFIG_REGISTRY
from fairseq_local.attention.learned.axis import expected_topk
from fairseq_local.errors import OptionError
from fairseq_local.models import build_encoder
from fairseq_local.models.archs import METHOD_CONFIGS
from fairseq_local.attention.gates import HeadGates
from fairseq_local.attention.layout import LayoutError, format_layout, parse_layout
from fairseq_local.attention.learned import AxisAdaptiveSpec, DamMask, DamSpec, TauSchedule, gumbel_sigmoid
from fairseq_local.attention.masks import FileMask, MaskSpecError, parse_mask
from fairseq_local.attention.context import attention_context

D, H = 16, 4
SMALL = {"encoder_embed_dim": 32, "encoder_ffn_embed_dim": 64, "dropout": 0.0, "dam_max_len": 24}


def randomised(mask: DamMask, seed: int = 0) -> DamMask:
    torch.manual_seed(seed)
    torch.nn.init.normal_(mask.alpha, std=2.0)
    return mask


def padded(lengths, left_pad, seed=1):
    torch.manual_seed(seed)
    return torch.randn(max(lengths), len(lengths), D), padding_mask(lengths, left_pad)


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


def test_method_archs_registered_with_their_defaults():
    expected_mode = {"transformer_dam_u": "pre", "transformer_dam_s": "pre", "transformer_aaa": "post",
                     "transformer_head_gates": "post"}
    for cfg in METHOD_CONFIGS:
        args = SimpleNamespace()
        ARCH_CONFIG_REGISTRY[cfg.arch](args)
        assert (args.encoder_layers, args.encoder_attention_heads, args.encoder_embed_dim) == (6, 8, 512)
        assert args.attn_layout == format_layout(parse_layout(cfg.layout))
        assert args.mask_mode == expected_mode.get(cfg.arch, "pre")  # fixed sparse baselines: pre
        assert (args.dam_estimator, args.dam_init, args.dam_init_std, args.dam_l1) == ("hard", 0.0, 1e-3, "sum")


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
            assert torch.equal(inner[k:, k:], inner[:-k, :-k])
        assert torch.equal(inner, inner.T)
        mask.train()
    assert mask.alpha.numel() == 16  # one α per offset


def test_dam_u_is_symmetric_and_position_wise():
    mask = randomised(DamMask(False, 12, estimator="soft")).train()
    assert mask.alpha.numel() == 12 * 13 // 2
    mask.resample()
    pos = torch.arange(12)[None]
    i, j = torch.arange(12)[:, None], torch.arange(12)[None, :]
    idx = mask.index(i, j)  # α_ij = α_ji: one parameter per unordered pair
    assert torch.equal(idx, idx.T) and sorted(idx.unique().tolist()) == list(range(78))
    soft = mask.gather(pos, pos, tau=0.5)[0]
    assert torch.allclose(soft, soft.T, atol=1e-6, rtol=0) and not torch.allclose(soft[1:, 1:], soft[:-1, :-1])
    hard = mask.eval().gather(pos, pos, 1.0)[0]
    assert torch.equal(hard, hard.T) and set(hard.unique().tolist()) <= {0.0, 1.0}
    i, j = torch.triu_indices(12, 12)  # evaluation is 1[α > 0] at each pair
    assert torch.equal(hard[i, j], (mask.alpha > 0).float())


def test_dam_default_is_the_authors_hard_straight_through_sample():
    mask = randomised(DamMask(True, 10)).train()  # estimator "hard" by default
    mask.resample()
    idx = torch.arange(10)
    m = mask.values(idx, tau=1.0)
    assert set(m.unique().tolist()) <= {0.0, 1.0}  # exactly 0/1 in the forward pass
    assert torch.equal(m, (mask.alpha + mask.noise > 0).float())
    w = torch.randn(10)
    (m * w).sum().backward()  # the soft sample's gradient (straight-through)
    soft = torch.sigmoid(mask.alpha + mask.noise).detach()
    assert torch.allclose(mask.alpha.grad, w * soft * (1 - soft), atol=1e-6)


def test_dam_init_is_the_authors_small_gaussian():
    torch.manual_seed(0)
    alpha = DamMask(False, 64, init=0.0, init_std=1e-3).alpha
    assert 0.5e-3 < float(alpha.std()) < 1.5e-3 and abs(float(alpha.mean())) < 1e-4
    assert torch.equal(DamMask(True, 4, init=3.0).alpha, torch.full((4,), 3.0))


@pytest.mark.parametrize("structured", [True, False])
@pytest.mark.parametrize("estimator", ["hard", "soft"])
def test_dam_l1_is_the_norm_of_the_whole_mask(structured, estimator):
    mask = randomised(DamMask(structured, 9, estimator=estimator)).train()
    mask.resample()
    pos = torch.arange(9)[None]
    dense = mask.gather(pos, pos, tau=0.8)[0]  # this update's sample at full length
    assert float(mask.l1(0.8)) == pytest.approx(float(dense.sum()), rel=1e-6)
    g1 = torch.autograd.grad(mask.l1(0.8), mask.alpha)[0]
    g2 = torch.autograd.grad(mask.gather(pos, pos, tau=0.8).sum(), mask.alpha)[0]
    assert torch.allclose(g1, g2, atol=1e-6)


def test_dam_rejects_too_long_sentences():
    mask = DamMask(False, 5).eval()
    pos = torch.arange(6)[None]
    with pytest.raises(ValueError, match="longer than the DAM mask's maximum length 5"):
        mask.gather(pos, pos, 1.0)


def test_hard_gumbel_sigmoid_samples_average_to_sigmoid_alpha():
    torch.manual_seed(0)
    alpha = torch.tensor([-3.0, -1.0, 0.0, 0.5, 2.0])
    n = 40000
    samples = gumbel_sigmoid(alpha.expand(n, -1), tau=0.3, hard=True)
    p = torch.sigmoid(alpha)
    tolerance = 5 * (p * (1 - p) / n).sqrt()
    assert set(samples.unique().tolist()) == {0.0, 1.0}
    assert ((samples.mean(0) - p).abs() < tolerance).all(), samples.mean(0)


def test_tau_schedules():
    assert TauSchedule(2.0)(500) == 2.0
    lin = TauSchedule(1.0, 0.2, 100, "linear")
    assert lin(0) == 1.0 and lin(50) == pytest.approx(0.6) and lin(100) == lin(1000) == pytest.approx(0.2)
    exp = TauSchedule(1.0, 0.01, 100, "exponential")
    assert exp(50) == pytest.approx(0.1) and exp(200) == pytest.approx(0.01)
    with pytest.raises(ValueError):
        TauSchedule(0.0)


def scores_and_values(attn, x):
    """(B, H, T, T) scaled scores of an untied attention, and v (B, H, T, dh)."""
    q, k, v = attn.project(x)
    return q @ k.transpose(-1, -2) * attn.scaling, v


@pytest.mark.parametrize("mode", ["pre", "post"])
def test_dam_pre_mode_is_additive_before_softmax_and_post_is_eq4(mode):
    attn = make_attention(["dam-u", "dam-s", "global", "band-1"], mode=mode, embed_dim=D, std=0.5).train()
    x, _ = padded([6], left_pad=True)
    for d in attn.learned["dam"]:
        d.resample()
    with attention_context(records=True) as ctx:
        _, w = attn(x, need_head_weights=True)
    m = ctx.records[0].learned[0]  # (2, T, T): the DAM heads' M, exactly 0/1
    assert set(m.unique().tolist()) <= {0.0, 1.0}
    s, _ = scores_and_values(attn, x)
    for h in (0, 1):
        if mode == "pre":  # SparseBERT's code: softmax(S + (1 - M)(-10000))
            ref = torch.softmax(s[0, h] - 1e4 * (1 - m[h]), -1)
        else:  # Eq. 4: softmax(S) ⊙ M
            ref = torch.softmax(s[0, h], -1) * m[h]
        assert torch.allclose(w[h, 0], ref, atol=1e-6)


def test_dam_paper_literal_soft_mask_after_softmax():
    attn = make_attention(["dam-s", "dam-u", "global", "global"], mode="post", embed_dim=D,
                          dam_estimator="soft").train()
    x, _ = padded([5], left_pad=True)
    with attention_context(records=True) as ctx:
        _, w = attn(x, need_head_weights=True)
    m = ctx.records[0].learned[0]
    inner = m[0, 1:-1, 1:-1]
    assert ((inner > 0) & (inner < 1)).all()  # soft values (Eq. 3)
    s, _ = scores_and_values(attn, x)
    assert torch.allclose(w[0, 0], torch.softmax(s[0, 0], -1) * m[0], atol=1e-6)
    w[:2].sum().backward()
    assert all(d.alpha.grad.abs().sum() > 0 for d in attn.learned["dam"])


# ----------------------------------------------------------------------- AAA


def far_from_zero(attn, x):
    """Make the AAA logits ±1000·sign(x₀): rows where x₀ > 0, columns where x₀ < 0."""
    with torch.no_grad():
        x[..., 0] = torch.where(x[..., 0] > 0, 1.0, -1.0)
        attn.learned["aaa"].fc.weight.zero_()
        attn.learned["aaa"].fc.weight[0, 0], attn.learned["aaa"].fc.weight[1, 0] = 1000.0, -1000.0
        attn.learned["aaa"].fc.bias.zero_()


@pytest.mark.parametrize("mode", ["post", "pre"])
def test_aaa_train_and_eval_outputs_are_equal_far_from_zero(mode):
    attn = make_attention(["aaa", "aaa-1", "global", "band-1"], mode=mode, embed_dim=D)
    x, pad = padded([7, 5, 2], left_pad=True)
    far_from_zero(attn, x)
    y_eval, w_eval = attn.eval()(x, key_padding_mask=pad, need_head_weights=True)
    torch.manual_seed(11)  # Gumbel noise cannot flip a logit of ±1000
    y_train, w_train = attn.train()(x, key_padding_mask=pad, need_head_weights=True)
    real = (~pad).T.unsqueeze(-1)
    assert torch.equal(y_train * real, y_eval * real)
    assert torch.equal(w_train, w_eval)


def test_aaa_indicators_are_straight_through_and_the_fc_layer_learns():
    attn = make_attention(["aaa", "aaa", "global", "global"], embed_dim=D).train()
    x, pad = padded([7, 5], left_pad=False)
    with attention_context(records=True) as ctx:
        y, _ = attn(x, key_padding_mask=pad)
    assert set(ctx.records[0].realised["aaa"].extra.unique().tolist()) <= {0.0, 1.0}
    y.pow(2).sum().backward()  # the task loss alone reaches the FC layer
    assert attn.learned["aaa"].fc.weight.grad.abs().sum() > 0


def test_aaa_pattern_in_evaluation_is_axis_or_local():
    attn = make_attention(["aaa", "aaa-0", "global", "global"], embed_dim=D, std=1.0).eval()
    n = 7
    x, _ = padded([n], left_pad=True)
    ind = expected_topk(attn.learned["aaa"].logits(x).permute(2, 1, 0))[:, 0].bool()  # (2, n): rows, columns
    assert ind[0].any() and not ind[0].all() and ind[1].any() and not ind[1].all()
    with attention_context(records=True) as ctx:
        _, w = attn(x, need_head_weights=True)
    i, j = torch.arange(n)[:, None], torch.arange(n)[None, :]
    for h, window in [(0, 2), (1, 0)]:
        allowed = ind[0][:, None] | ind[1][None, :] | ((i - j).abs() <= window)
        assert torch.equal(ctx.records[0].learned[0, h] > 0.5, allowed)
        assert not w[h, 0][~allowed].any() and w[h, 0].sum(-1).allclose(torch.ones(n))


# ------------------------------------------------------- evaluation, gates


@pytest.mark.parametrize("tokens", [["dam-u", "dam-s", "aaa", "band-1:gate"],
                                    ["aaa-1:gate", "dam-s", "star", "global:gate"]])
@pytest.mark.parametrize("mode", ["post", "pre"])
def test_evaluation_is_deterministic_and_padding_invariant(tokens, mode):
    attn = make_attention(tokens, mode=mode, embed_dim=D, std=1.0).eval()
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


def test_gates_scale_head_outputs_and_close():
    attn = make_attention(["global", "global:gate", "global:gate", "global"], embed_dim=D).eval()
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


def test_voita_gate_setting_is_the_default_of_the_gate_arch():
    torch.manual_seed(0)
    enc = build_encoder("transformer_head_gates", dict(SMALL))
    gates = [a.gates for a in enc.attention_modules()]
    bound = math.sqrt(3 / 8)  # Glorot for the authors' [1, 8, 1, 1] log_a: ≈ 0.61
    alphas = torch.cat([g.log_alpha.detach() for g in gates])
    assert alphas.abs().max() <= bound and alphas.abs().max() > 0.8 * bound and alphas.std() > 0.2
    assert all(g.beta == 0.33 for g in gates)
    assert enc.attention_options.gate_penalty == "layer-mean"
    # The classic setting, and single options over the preset.
    louizos = build_encoder("transformer_head_gates", dict(SMALL, gate_preset="louizos"))
    assert louizos.attention_modules()[0].gates.beta == pytest.approx(2 / 3)
    assert torch.equal(louizos.attention_modules()[0].gates.log_alpha.detach(), torch.full((8,), 3.0))
    assert louizos.attention_options.gate_penalty == "sum"
    mixed = build_encoder("transformer_head_gates", dict(SMALL, gate_beta=0.5, gate_init="1.5"))
    assert mixed.attention_modules()[0].gates.beta == 0.5 and mixed.attention_options.gate_penalty == "layer-mean"
    assert torch.equal(mixed.attention_modules()[0].gates.log_alpha.detach(), torch.full((8,), 1.5))


@pytest.mark.parametrize("option, message", [
    (dict(gate_preset="nope"), "--gate-preset"), (dict(gate_init="wide"), "--gate-init"),
    (dict(gate_gamma=0.5), "gamma < 0"), (dict(tau_start=0.0), "tau must be > 0"),
    (dict(dam_max_len=0), "--dam-max-len"), (dict(mask_neg=5.0), "--mask-neg"),
])
def test_bad_attention_options_are_one_line_errors(option, message):
    with pytest.raises(OptionError, match=message):
        build_encoder("transformer_head_gates", dict(SMALL, **option))
