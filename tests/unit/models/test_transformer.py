"""Named architectures: exact weight counts, tying, padding invariance, stock arch."""

import argparse
import copy
import subprocess
import sys

import pytest
import torch

import fairseq_local  # noqa: F401  (registers the plugin)
from fairseq.models import ARCH_CONFIG_REGISTRY, ARCH_MODEL_REGISTRY
from fairseq_local.models import build_encoder
from fairseq_local.models.transformer import encoder_attention_weight_count
from fairseq_local.attention.module import LocalMultiheadAttention
from fairseq_local.models.archs import NMT_CONFIGS, get_config

# Pande et al., Tables 2-3
PAPER_COUNTS = {
    "a": 6_291_456, "g": 4_718_592, "h": 3_932_160, "i": 3_538_944,
    "j": 4_915_200, "k": 4_784_128, "l": 3_211_264,
}
SMALL = {"encoder_embed_dim": 32, "encoder_ffn_embed_dim": 64, "dropout": 0.0}


@pytest.mark.parametrize("letter", sorted(PAPER_COUNTS))
def test_exact_paper_weight_counts(letter):
    enc = build_encoder(get_config(letter).arch)
    assert encoder_attention_weight_count(enc) == PAPER_COUNTS[letter]


@pytest.mark.parametrize("letter", "bcdef")
def test_untied_local_configs_have_baseline_count(letter):
    enc = build_encoder(get_config(letter).arch)
    assert encoder_attention_weight_count(enc) == PAPER_COUNTS["a"]


def test_all_paper_archs_registered_with_base_dimensions():
    for cfg in NMT_CONFIGS:
        assert ARCH_MODEL_REGISTRY[cfg.arch].__name__ == "LocalTransformerModel"
        args = argparse.Namespace()
        ARCH_CONFIG_REGISTRY[cfg.arch](args)
        assert (args.encoder_layers, args.encoder_attention_heads) == (6, 8)
        assert (args.encoder_embed_dim, args.encoder_ffn_embed_dim) == (512, 2048)
        assert (args.decoder_layers, args.decoder_embed_dim) == (6, 512)


def test_within_layer_tying_is_parameter_identity():
    enc = build_encoder(get_config("g").arch, dict(SMALL))
    for layer in enc.layers:
        attn = layer.self_attn
        assert isinstance(attn, LocalMultiheadAttention)
        assert attn.num_groups == 4 and attn.head_to_group == (0, 0, 1, 1, 2, 2, 3, 3)
    # layer-local groups: different layers do not share
    assert enc.layers[0].self_attn.qk[0] is not enc.layers[1].self_attn.qk[0]


def test_cross_layer_tying_is_one_parameter_one_gradient_one_optimizer_entry():
    enc = build_encoder(get_config("k").arch, dict(SMALL))
    shared = enc.layers[0].self_attn.qk[0]
    for i in range(3):
        assert enc.layers[i].self_attn.qk[0] is shared
        assert enc.layers[i].self_attn.qk[0].q_proj.weight is shared.q_proj.weight
    for i in range(3, 6):
        assert all(g is not shared for g in enc.layers[i].self_attn.qk)
    params = list(enc.parameters())
    assert sum(p is shared.q_proj.weight for p in params) == 1  # one optimizer entry
    opt = torch.optim.Adam(enc.parameters())
    assert sum(p is shared.q_proj.weight for g in opt.param_groups for p in g["params"]) == 1
    # One gradient: the sum of what each layer contributes. An untied copy, with
    # the same values, gets one gradient per layer; they add up to the tied one.
    untied = copy.deepcopy(enc)
    for i in range(3):
        untied.layers[i].self_attn.qk[0] = copy.deepcopy(shared)
    tokens, lengths = torch.tensor([[5, 6, 7, 8, 2]]), torch.tensor([5])
    for model in (enc, untied):
        model(tokens, lengths)["encoder_out"][0].pow(2).sum().backward()
    per_layer = [untied.layers[i].self_attn.qk[0].q_proj.weight.grad for i in range(3)]
    assert all(g.abs().sum() > 0 for g in per_layer)
    assert torch.allclose(shared.q_proj.weight.grad, sum(per_layer), atol=1e-6)


def test_state_dict_roundtrip_keeps_sharing():
    enc = build_encoder(get_config("l").arch, dict(SMALL))
    enc2 = build_encoder(get_config("l").arch, dict(SMALL))
    enc2.load_state_dict(enc.state_dict())
    assert enc2.layers[5].self_attn.qk[0] is enc2.layers[0].self_attn.qk[0]
    assert torch.equal(enc2.layers[5].self_attn.qk[0].q_proj.weight, enc.layers[0].self_attn.qk[0].q_proj.weight)


def encode(enc, sentences, left_pad):
    """Encode a batch with fairseq's padding (pad=1, eos=2); returns per-sentence outputs."""
    T = max(len(s) for s in sentences)
    tokens = torch.full((len(sentences), T), 1, dtype=torch.long)
    for b, s in enumerate(sentences):
        if left_pad:
            tokens[b, T - len(s):] = torch.tensor(s)
        else:
            tokens[b, : len(s)] = torch.tensor(s)
    out = enc(tokens, torch.tensor([len(s) for s in sentences]))["encoder_out"][0]  # (T, B, C)
    res = []
    for b, s in enumerate(sentences):
        res.append(out[T - len(s):, b] if left_pad else out[: len(s), b])
    return res


@pytest.mark.parametrize("mode", ["post", "pre"])
@pytest.mark.parametrize("cfg", NMT_CONFIGS, ids=lambda c: c.letter)
def test_padding_invariance(cfg, mode):
    torch.manual_seed(0)
    enc = build_encoder(cfg.arch, dict(SMALL, mask_mode=mode)).eval()
    assert all(layer.self_attn.mask_mode == mode for layer in enc.layers)
    gen = torch.Generator().manual_seed(1)
    sentences = [
        torch.randint(4, 30, (n,), generator=gen).tolist() + [2] for n in (9, 3, 1, 6)
    ]
    with torch.no_grad():
        alone = [encode(enc, [s], True)[0] for s in sentences]
        for left_pad in (True, False):
            for a, b in zip(alone, encode(enc, sentences, left_pad)):
                assert torch.allclose(a, b, atol=1e-5), (a - b).abs().max()


def test_layout_and_mask_mode_options_override_named_arch():
    enc = build_encoder(
        "transformer_local_baseline",
        dict(SMALL, encoder_layers=2, encoder_attention_heads=4,
             attn_layout="[band-3@@x*4];[global,next-1@@x,prev-1,identity]", mask_mode="pre"),
    )
    assert [str(m) for m in enc.layers[1].self_attn.masks] == ["global", "next-1", "prev-1", "identity"]
    assert enc.layers[1].self_attn.qk[1] is enc.layers[0].self_attn.qk[0]
    assert enc.layers[0].self_attn.mask_mode == "pre"


STOCK_SCRIPT = r"""
import sys, torch, argparse
if sys.argv[1] == "plugin":
    import fairseq_local
from fairseq.data import Dictionary
from fairseq.models import ARCH_CONFIG_REGISTRY
from fairseq.models.transformer import TransformerModel
from fairseq.tasks.translation import TranslationTask
d = Dictionary()
for i in range(40): d.add_symbol(f"w{i}")
args = argparse.Namespace(encoder_embed_dim=32, encoder_ffn_embed_dim=64, decoder_embed_dim=32,
                          decoder_ffn_embed_dim=64, encoder_layers=2, decoder_layers=2, dropout=0.0)
ARCH_CONFIG_REGISTRY["transformer"](args)
task = TranslationTask(argparse.Namespace(left_pad_source=True), d, d)
torch.manual_seed(0)
model = TransformerModel.build_model(args, task).eval()
assert type(model.encoder.layers[0].self_attn).__name__ == "MultiheadAttention"
src = torch.tensor([[1, 5, 6, 2], [7, 8, 9, 2]])
prev = torch.tensor([[2, 5, 6, 7], [2, 9, 9, 9]])
out = model(src, torch.tensor([3, 4]), prev)[0]
print(sorted(vars(args).items()))
print(repr(out.sum().item()), repr(out.abs().sum().item()))
"""


@pytest.mark.slow
def test_stock_transformer_unchanged_by_plugin():
    runs = [
        subprocess.run([sys.executable, "-c", STOCK_SCRIPT, which], capture_output=True, text=True)
        for which in ("stock", "plugin")
    ]
    for r in runs:
        assert r.returncode == 0, r.stderr[-2000:]
    assert runs[0].stdout == runs[1].stdout
    total, absolute = map(float, runs[1].stdout.splitlines()[-1].split())
    assert absolute > 0 and total == total  # a real, finite output was compared


@pytest.mark.slow
def test_configs_command_prints_every_config_and_count():
    r = subprocess.run([sys.executable, "-m", "fairseq_local_cli.configs"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    lines = {line.split()[0]: line for line in r.stdout.splitlines() if line.startswith("(")}
    assert len(lines) == 12
    for cfg in NMT_CONFIGS:
        line = lines[f"({cfg.letter})"]
        assert cfg.name in line and cfg.arch in line
        count = PAPER_COUNTS.get(cfg.letter, PAPER_COUNTS["a"] if cfg.letter in "bcdef" else None)
        assert f"{count:,}" in line


@pytest.mark.parametrize("mode", ["post", "pre"])
def test_learned_layout_padding_invariance_in_evaluation(mode):
    layout = "[dam-u,dam-s,aaa,global:gate,band-1:gate,aaa-1,dam-s,star]*6"
    torch.manual_seed(0)
    enc = build_encoder("transformer_local", dict(SMALL, attn_layout=layout, mask_mode=mode, dam_max_len=24))
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
