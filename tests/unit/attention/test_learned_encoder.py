"""Learned masks in an encoder: DAM masks shared by layers, one noise sample
per update, τ and the update count, and one gather of a shared mask per
forward pass."""

import pytest
import torch

import fairseq_local  # noqa: F401  (registers kinds, archs and criteria)
from helpers import padding_mask
from fairseq_local.models import build_encoder, transformer
from fairseq_local.attention.context import attention_context
from fairseq_local.attention.learned import DamMask

SMALL = {"encoder_embed_dim": 32, "encoder_ffn_embed_dim": 64, "dropout": 0.0, "dam_max_len": 24}


def test_dam_alpha_shared_by_layers_unless_per_layer():
    enc = build_encoder("transformer_dam_s", dict(SMALL))
    assert enc.layers[0].self_attn.learned["dam"][3] is enc.layers[5].self_attn.learned["dam"][3]
    assert enc.layers[0].self_attn.learned["dam"][3] is not enc.layers[0].self_attn.learned["dam"][4]
    assert sum(p.numel() for n, p in enc.named_parameters() if n.endswith("alpha")) == 8 * 24
    per_layer = build_encoder("transformer_dam_s", dict(SMALL, dam_per_layer=True))
    assert per_layer.layers[0].self_attn.learned["dam"][3] is not per_layer.layers[5].self_attn.learned["dam"][3]
    assert sum(p.numel() for n, p in per_layer.named_parameters() if n.endswith("alpha")) == 6 * 8 * 24


def test_one_noise_sample_per_update_for_shared_alpha():
    enc = build_encoder("transformer_local", dict(SMALL, attn_layout="[dam-u*8]*6")).train()
    tokens = torch.tensor([[5, 6, 7, 2]])
    enc(tokens, torch.tensor([4]))
    noise = enc.layers[0].self_attn.learned["dam"][0].noise
    assert noise is enc.layers[3].self_attn.learned["dam"][0].noise  # the same draw in every layer
    enc(tokens, torch.tensor([4]))
    assert not torch.equal(noise, enc.layers[0].self_attn.learned["dam"][0].noise)  # a new draw per forward


def test_tau_and_update_count_follow_set_num_updates():
    enc = build_encoder("transformer_aaa", dict(SMALL, tau_start=1.0, tau_end=0.1, tau_anneal="linear",
                                                tau_anneal_updates=10))
    enc.set_num_updates(5)
    assert all(a.tau == pytest.approx(0.55) and a.num_updates == 5 for a in enc.attention_modules())


@pytest.mark.parametrize("left", [True, False])
def test_dam_s_gathers_by_offset_as_by_position_pair(left):
    """dam-s builds M from one value per offset (real tokens are contiguous);
    it equals the per-pair gather M_ij = M(|pos_i − pos_j|) with the ends kept,
    in value and in α's gradient."""
    from fairseq_local.attention.masks import real_positions

    torch.manual_seed(0)
    dam = DamMask(True, 20, init_std=1.0).train()
    dam.resample()
    pos = real_positions(padding_mask([9, 4, 1, 7], left, 9), 9)
    fast = dam.gather(pos, pos, 0.7)
    i, j = pos.unsqueeze(-1), pos.unsqueeze(-2)
    n = pos.amax(-1, keepdim=True).unsqueeze(-1) + 1
    ref = dam.values(dam.index(i.clamp(min=0), j.clamp(min=0)), 0.7)
    ends = (i == 0) | (j == 0) | (i == n - 1) | (j == n - 1)
    ref = torch.where(ends, torch.ones_like(ref), ref) * ((i >= 0) & (j >= 0))
    assert torch.equal(fast, ref)
    g = torch.randn_like(ref)
    torch.testing.assert_close(torch.autograd.grad(fast, dam.alpha, g)[0], torch.autograd.grad(ref, dam.alpha, g)[0])


@pytest.mark.parametrize("arch", ["transformer_dam_s", "transformer_dam_u"])
def test_a_shared_dam_mask_is_gathered_once_per_forward(arch, monkeypatch):
    """The encoder gathers each shared DAM mask once per forward pass for all
    its layers; outputs and α gradients are those of one gather per layer."""
    enc = build_encoder(arch, dict(SMALL, dam_init_std=1.0)).train()
    tokens = torch.randint(4, 50, (3, 9))
    tokens[1, :4] = 1  # left padding
    lengths = torch.tensor([9, 5, 9])
    calls = []
    real = DamMask._gather
    monkeypatch.setattr(DamMask, "_gather", lambda self, *a: calls.append(id(self)) or real(self, *a))

    def run(shared: bool):
        torch.manual_seed(4)
        if not shared:  # the encoder's context without a per-forward memo
            monkeypatch.setattr(transformer, "attention_context", lambda **kw: attention_context(**dict(kw, memo=False)))
        out = enc(tokens, lengths)["encoder_out"][0]
        grads = torch.autograd.grad(out.pow(2).sum(), [d.alpha for d in enc.layers[0].self_attn.learned["dam"]])
        return out, grads

    out, grads = run(True)
    assert len(calls) == len(set(calls)) == 8  # one gather per mask, 6 layers
    calls.clear()
    out_each, grads_each = run(False)
    assert len(calls) == 48
    torch.testing.assert_close(out, out_each)
    for a, b in zip(grads, grads_each):
        torch.testing.assert_close(a, b)
