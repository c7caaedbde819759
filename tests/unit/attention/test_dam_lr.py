"""``--dam-lr-scale``: a DAM mask (SparseBERT Eq. 3–5) stores α' = α/s and
uses α = s·α', so Adam moves the effective α s times as far per update,
while its values, masks, initialisation and checkpoints do not depend on s."""

import argparse

import pytest
import torch

from fairseq_local.attention.learned import DamMask
from fairseq_local.attention.config import AttentionConfig, attention_options, validate
from fairseq_local.attention.learned import scale_grad
from fairseq_local_cli.export import main as export_main
from fairseq_local.errors import OptionError
from fairseq_local.models import build_roberta

N = 10
TINY = dict(encoder_embed_dim=48, encoder_ffn_embed_dim=96, max_positions=64, dropout=0.0, attention_dropout=0.0)


def mask(structured: bool, scale: float, seed: int = 0, **kw) -> DamMask:
    torch.manual_seed(seed)
    return DamMask(structured, N, init=0.3, init_std=2.0, lr_scale=scale, **kw)


def positions(lengths):
    """(B, T) real positions, −1 at padding."""
    T = max(lengths)
    pos = torch.arange(T).expand(len(lengths), T).clone()
    for b, n in enumerate(lengths):
        pos[b, n:] = -1
    return pos


@pytest.mark.parametrize("structured", [True, False])
def test_values_masks_and_init_do_not_depend_on_the_scale(structured):
    plain, scaled = mask(structured, 1.0), mask(structured, 40.0)
    # the same effective α ~ N(init, std²), stored as α/s
    torch.testing.assert_close(scaled.effective_alpha(), plain.alpha.detach(), rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(scaled.alpha.detach() * 40.0, plain.alpha.detach(), rtol=1e-6, atol=1e-7)
    assert scaled.effective_alpha().dtype == torch.float32
    assert torch.equal(scaled.matrix(N, "hard"), plain.matrix(N, "hard"))  # 1[α > 0]: the sign is exact
    torch.testing.assert_close(scaled.matrix(N, "prob"), plain.matrix(N, "prob"), rtol=1e-6, atol=1e-7)
    pos = positions([N, 6])
    for train in (False, True):
        plain.train(train), scaled.train(train)
        scaled.noise = plain.noise = None
        torch.manual_seed(3)
        a = scaled.gather(pos, pos, tau=0.7)
        torch.manual_seed(3)
        b = plain.gather(pos, pos, tau=0.7)
        assert torch.equal(a, b)  # the same 0/1 samples (hard, straight-through), the same eval mask
        torch.testing.assert_close(scaled.scaled_l1(0.7), plain.scaled_l1(0.7), rtol=1e-6, atol=1e-5)
    soft_a, soft_b = mask(structured, 40.0, noise=False).train(), mask(structured, 1.0, noise=False).train()
    torch.testing.assert_close(soft_a.gather(pos, pos, tau=1.0), soft_b.gather(pos, pos, tau=1.0),
                               rtol=1e-6, atol=1e-7)  # P = sigmoid(α)


@pytest.mark.parametrize("structured", [True, False])
def test_checkpoints_hold_the_effective_alpha_and_load_into_any_scale(structured):
    plain, scaled = mask(structured, 1.0), mask(structured, 40.0)
    saved = scaled.state_dict()
    assert list(saved) == ["alpha"]
    torch.testing.assert_close(saved["alpha"], plain.state_dict()["alpha"], rtol=1e-6, atol=1e-7)
    assert not saved["alpha"].requires_grad
    for scale in (1.0, 0.5, 300.0):
        other = mask(structured, scale, seed=9)
        other.load_state_dict(saved)
        torch.testing.assert_close(other.effective_alpha(), plain.alpha.detach(), rtol=1e-5, atol=1e-6)
        assert torch.equal(other.matrix(N, "hard"), plain.matrix(N, "hard"))
    torch.testing.assert_close(saved["alpha"], scaled.state_dict()["alpha"])  # loading left the caller's dict


def test_layers_sharing_a_mask_save_one_tensor():
    """One α per head for all layers (SparseBERT §3.1): the saved layers share
    one tensor, as they share the parameter without a scale (``fairseq-local
    export`` and the reports tell shared heads apart by storage)."""
    shared = mask(True, 30.0)
    model = torch.nn.ModuleList([torch.nn.ModuleList([shared]) for _ in range(3)])
    state = model.state_dict()
    ptrs = {state[f"{l}.0.alpha"].untyped_storage().data_ptr() for l in range(3)}
    assert len(ptrs) == 1
    with torch.no_grad():
        shared.alpha.add_(1.0)  # a later state dict sees the new α
    torch.testing.assert_close(model.state_dict()["2.0.alpha"], state["2.0.alpha"] + 30.0)


def adam_step(m: DamMask, grad_factor: float = 1.0) -> torch.Tensor:
    """One Adam step on a pull of every P down (the hinge's direction,
    Wang et al. Eq. 10); returns the change of the effective α."""
    before = m.effective_alpha().detach().clone()  # at s = 1 it is the parameter itself
    opt = torch.optim.Adam(m.parameters(), lr=1e-3, eps=1e-12)
    idx = torch.arange(m.alpha.numel())
    scale_grad(torch.sigmoid(m.effective_alpha(idx)), grad_factor).sum().backward()
    opt.step()
    return m.effective_alpha().detach() - before


@pytest.mark.parametrize("structured", [True, False])
def test_adam_moves_the_effective_alpha_s_times_as_far(structured):
    base = adam_step(mask(structured, 1.0))
    fast = adam_step(mask(structured, 25.0))
    torch.testing.assert_close(base.abs(), torch.full_like(base, 1e-3), rtol=1e-3, atol=0)  # Adam: lr per entry
    torch.testing.assert_close(fast, 25.0 * base, rtol=1e-3, atol=1e-7)
    # a gradient scaling is no lever under Adam: it divides the factor out
    torch.testing.assert_close(adam_step(mask(structured, 1.0), grad_factor=25.0), base, rtol=1e-4, atol=1e-9)


@pytest.mark.parametrize("scale", [0.0, -1.0, float("nan")])
def test_bad_scale(scale):
    with pytest.raises(ValueError, match="--dam-lr-scale"):
        DamMask(True, N, lr_scale=scale)


def dam_masks_of(model) -> list:
    return list({id(m): m for m in model.modules() if isinstance(m, DamMask)}.values())


def test_model_option_reaches_the_masks_and_leaves_the_model_and_export_unchanged(tmp_path, capsys):
    torch.manual_seed(0)
    plain = build_roberta("roberta_dam_s", TINY)
    torch.manual_seed(0)
    scaled = build_roberta("roberta_dam_s", dict(TINY, dam_lr_scale=30.0))
    masks = dam_masks_of(scaled)
    assert masks and all(m.lr_scale == 30.0 for m in masks)
    assert all(m.lr_scale == 1.0 for m in dam_masks_of(plain))
    a, b = plain.state_dict(), scaled.state_dict()
    assert list(a) == list(b)
    for key, value in a.items():
        if torch.is_tensor(value):
            torch.testing.assert_close(b[key], value, rtol=1e-6, atol=1e-7, msg=key)
    # a trained-looking α, set through the checkpoint, exported from either model: the same masks
    g = torch.Generator().manual_seed(1)
    trained = {k: torch.randn(v.shape, generator=g) * 2 if k.endswith(".alpha") else v for k, v in a.items()}
    exported = {}
    for name, model in (("plain", plain), ("scaled", scaled)):
        model.load_state_dict(trained)
        path, out = tmp_path / f"{name}.pt", tmp_path / f"{name}-masks.pt"
        cfg = argparse.Namespace(arch="roberta_dam_s", attn_layout=model.args.attn_layout)
        torch.save({"cfg": {"model": cfg}, "model": model.state_dict()}, path)
        for how in (["--prune", "30"], ["--prune", "30", "--prune-random", "1"]):  # random: per shared α
            export_main([str(path), "--out", str(out), "--n", "12", *how])
            assert "wrote" in capsys.readouterr().out
            exported[name, len(how)] = torch.load(out, weights_only=True)["masks"]
    for how in (2, 4):
        plain_masks, scaled_masks = exported["plain", how], exported["scaled", how]
        assert plain_masks.keys() == scaled_masks.keys() and plain_masks
        for key, entry in plain_masks.items():
            assert torch.equal(entry["matrix"], scaled_masks[key]["matrix"]), (how, key)


@pytest.mark.parametrize("scale", [0.0, -2.0])
def test_bad_option_is_a_one_line_error(scale):
    with pytest.raises(OptionError, match=f"^--dam-lr-scale must be > 0, not {scale}$"):
        validate(attention_options(AttentionConfig(dam_lr_scale=scale), 1, 1))
    validate(attention_options(AttentionConfig(dam_lr_scale=30.0), 1, 1))
