"""Head gates on the decoder's self-attention and encoder–decoder attention
(``--decoder-gates self,cross``, Voita et al. 2019 §6): the L0 term, padding
invariance, a saved and reloaded model, loading a model without gates, and a
closed gate equal to a removed head (output and translation)."""

import argparse
import copy

import pytest
import torch

from fairseq.models import ARCH_CONFIG_REGISTRY
from fairseq.sequence_generator import SequenceGenerator
from fairseq.tasks.translation import TranslationTask

from fairseq_local.attention.gates import parse_decoder_gates
from fairseq_local_cli.gates import gate_table, summary
from fairseq_local.errors import OptionError
from fairseq_local.models import LocalTransformerModel
from fairseq_local.models.decoder import GatedTransformerDecoder, remove_heads
from fairseq_local.models.resume import model_signature
from helpers.precision import NMT_TINY, dictionary, nmt_setup, one_thread  # noqa: F401

GATED = {"decoder_gates": "self,cross", "decoder_layers": 2}


def _close(model, closed):
    """Set the decoder gates' log α: -20 (z = 0 in evaluation) for the
    (kind, layer, head) in ``closed``, 1.0 (an open z < 1) otherwise."""
    with torch.no_grad():
        for kind, l, attn in model.decoder.gated_attention():
            for h in range(attn.num_heads):
                attn.gates.log_alpha[h] = -20.0 if (kind, l, h) in closed else 1.0


def test_parse_decoder_gates():
    assert parse_decoder_gates("self,cross") == ("self", "cross") == parse_decoder_gates("cross, self,cross")
    assert parse_decoder_gates("cross") == ("cross",)
    assert parse_decoder_gates(None) == () == parse_decoder_gates("") == parse_decoder_gates("none")
    with pytest.raises(OptionError, match="--decoder-gates takes a comma list of self and cross"):
        parse_decoder_gates("self,enc")


@pytest.mark.parametrize("kinds, expected", [("self", {"self"}), ("cross", {"cross"}),
                                             ("self,cross", {"self", "cross"})])
def test_gated_modules_and_l0_term(one_thread, kinds, expected):  # noqa: F811
    model, crit, sample = nmt_setup("transformer_head_gates", {**GATED, "decoder_gates": kinds})
    assert isinstance(model.decoder, GatedTransformerDecoder)
    gated = model.decoder.gated_attention()
    assert {k for k, _, _ in gated} == expected and len(gated) == 2 * len(expected)
    loss, _, log = crit(model, sample)
    # 6 x 8 encoder gates and 2 per gated decoder attention (2 heads), all open at init
    assert log["gate_count"] == 48 + 2 * 2 * len(expected) == log["gate_open"]
    loss.backward()
    for _, _, attn in gated:
        assert attn.gates.log_alpha.grad is not None and attn.gates.log_alpha.grad.abs().sum() > 0


def test_l0_term_counts_decoder_layers(one_thread):  # noqa: F811
    """layer-mean: the decoder's gated attentions are layers of their own."""
    model, crit, sample = nmt_setup("transformer_head_gates", GATED, gate_lambda=1.0)
    terms = model.get_sparsity_terms(model(**sample["net_input"]))
    gates = [m.gates for m in model.encoder.attention_modules()] + model.decoder.head_gates()
    assert len(gates) == 6 + 4
    expected = sum(g.l0().sum() for g in gates)
    if model.encoder.attention_options.gate_penalty == "layer-mean":
        expected = expected / len(gates)
    torch.testing.assert_close(terms.gate, expected)


def test_no_decoder_gates_is_fairseqs_decoder():
    model, _, _ = nmt_setup("transformer_head_gates", {"decoder_layers": 2})
    assert not isinstance(model.decoder, GatedTransformerDecoder) and model.decoder_gates() == []


def test_padding_invariance(one_thread):  # noqa: F811
    model, _, sample = nmt_setup("transformer_head_gates", GATED)
    _close(model, {("self", 0, 1), ("cross", 1, 0)})
    model.eval()
    inp = sample["net_input"]
    with torch.no_grad():
        batch = model(**inp)[0]
        for b, n in enumerate(inp["src_lengths"].tolist()):
            tgt_len = int(sample["target"][b].ne(1).sum())
            alone = model(inp["src_tokens"][b:b + 1, -n:], inp["src_lengths"][b:b + 1],
                          inp["prev_output_tokens"][b:b + 1, :tgt_len])[0]
            torch.testing.assert_close(alone[0], batch[b, :tgt_len], atol=1e-5, rtol=1e-5)


def _removed(model):
    pruned = copy.deepcopy(model)
    kept = {(kind, l): remove_heads(attn) for kind, l, attn in pruned.decoder.gated_attention()}
    assert pruned.decoder.gated_attention() == []
    return pruned, kept


def test_closed_gate_equals_removed_head(one_thread):  # noqa: F811
    model, _, sample = nmt_setup("transformer_head_gates", GATED)
    _close(model, {("self", 0, 1), ("cross", 1, 0)})
    model.eval()
    pruned, kept = _removed(model)
    assert kept == {("self", 0): [0], ("cross", 0): [0, 1], ("self", 1): [0, 1], ("cross", 1): [1]}
    assert pruned.decoder.layers[0].self_attn.num_heads == 1
    with torch.no_grad():
        torch.testing.assert_close(pruned(**sample["net_input"])[0], model(**sample["net_input"])[0],
                                   atol=1e-5, rtol=1e-5)


def test_closed_gate_equals_removed_head_in_translation(one_thread):  # noqa: F811
    model, _, sample = nmt_setup("transformer_head_gates", GATED, seed=4)
    _close(model, {("self", 0, 0), ("self", 1, 1), ("cross", 0, 1)})
    model.eval()
    pruned, _ = _removed(model)
    d = dictionary()
    inp = {k: v for k, v in sample["net_input"].items() if k != "prev_output_tokens"}
    hyps = [SequenceGenerator([m], d, beam_size=2, max_len_b=10).forward({"net_input": inp})
            for m in (model, pruned)]
    tokens = [[[h["tokens"].tolist() for h in sent] for sent in out] for out in hyps]
    assert tokens[0] == tokens[1] and len({str(t) for t in tokens[0]}) > 1
    for a, b in zip(*hyps):
        torch.testing.assert_close(torch.stack([h["score"] for h in a]), torch.stack([h["score"] for h in b]))


def test_all_heads_closed_keeps_the_bias(one_thread):  # noqa: F811
    model, _, sample = nmt_setup("transformer_head_gates", GATED)
    _close(model, {(k, l, h) for k in ("self", "cross") for l in range(2) for h in range(2)})
    model.eval()
    pruned, kept = _removed(model)
    assert all(v == [0] for v in kept.values())
    with torch.no_grad():
        torch.testing.assert_close(pruned(**sample["net_input"])[0], model(**sample["net_input"])[0])


def _build(overrides, arch="transformer_head_gates"):
    d = dictionary()
    args = argparse.Namespace(**{**NMT_TINY, **overrides})
    ARCH_CONFIG_REGISTRY[arch](args)
    task = TranslationTask(argparse.Namespace(left_pad_source=True), d, d)
    return LocalTransformerModel.build_model(args, task), args


def test_saved_and_reloaded(one_thread):  # noqa: F811
    model, _, sample = nmt_setup("transformer_head_gates", GATED)
    _close(model, {("cross", 0, 1)})
    model.eval()
    state = copy.deepcopy(model.state_dict())
    assert "decoder.layers.1.encoder_attn.gates.log_alpha" in state
    torch.manual_seed(123)  # other initial values
    fresh, args = _build(GATED)
    fresh.load_state_dict(state, strict=True, model_cfg=args)
    fresh.eval()
    with torch.no_grad():
        torch.testing.assert_close(fresh(**sample["net_input"])[0], model(**sample["net_input"])[0])
    cfg = {**vars(args), "arch": "transformer_head_gates"}
    rows = gate_table(cfg, state)
    assert [(r["attention"], r["layer"], r["head"]) for r in rows if r["closed"]] == [("dec-cross", 1, 2)]
    assert summary(rows)[-1] == f"open heads: {48 + 8 - 1} of {48 + 8}"
    assert "open heads, dec-cross: 3 of 4 (L1: 1, L2: 2)" in summary(rows)


def test_gates_added_to_a_model_without_them(one_thread):  # noqa: F811
    """The two-stage workflow: a trained model without decoder gates loads
    into a gated one; its gates keep their initial values."""
    plain, _ = _build({"decoder_layers": 2})
    gated, args = _build(GATED)
    initial = {k: v.clone() for k, v in gated.state_dict().items() if k.startswith("decoder.") and ".gates." in k}
    assert len(initial) == 4
    gated.load_state_dict(copy.deepcopy(plain.state_dict()), strict=True, model_cfg=args)
    for k, v in gated.state_dict().items():
        if k in initial:
            torch.testing.assert_close(v, initial[k])
        elif k in plain.state_dict() and not k.endswith("_extra_state"):
            torch.testing.assert_close(v, plain.state_dict()[k])


def test_signature_names_the_decoder_gates():
    base = {"arch": "transformer_head_gates", "attn_layout": "[global:gate*8]*6"}
    assert model_signature({**base, "decoder_gates": "cross,self"})["decoder_gates"] == "self,cross"
    assert "decoder_gates" not in model_signature(base)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_gates(one_thread, dtype):  # noqa: F811
    """The gates are drawn in float32 and cast to the activations' dtype."""
    model, _, sample = nmt_setup("transformer_head_gates", GATED)
    _close(model, {("self", 0, 1)})
    reference = model.eval()(**sample["net_input"])[0]
    half = copy.deepcopy(model).to(dtype)
    out = half(**sample["net_input"])[0]
    assert out.dtype == dtype and torch.isfinite(out).all()
    torch.testing.assert_close(out.float(), reference, atol=0.1, rtol=0.1)


def test_closed_encoder_gate_equals_removed_head(one_thread):  # noqa: F811
    """The encoder's ``:gate`` heads: the gated model equals the same model
    without gates whose closed heads have no value rows and W_o columns and
    whose open gates are folded into W_o (output and translation)."""
    gated, _, sample = nmt_setup("transformer_head_gates", {"decoder_layers": 2}, seed=2)
    with torch.no_grad():
        for l, attn in enumerate(gated.encoder.attention_modules()):
            attn.gates.log_alpha.copy_(torch.tensor([-20.0 if (l + h) % 3 == 0 else 1.0 for h in range(8)]))
    gated.eval()
    plain, args = _build({"decoder_layers": 2}, "transformer_local_baseline")
    assert all(p.gates is None for p in plain.encoder.attention_modules())
    plain.load_state_dict(copy.deepcopy(gated.state_dict()), strict=True, model_cfg=args)
    with torch.no_grad():
        for g, p in zip(gated.encoder.attention_modules(), plain.encoder.attention_modules()):
            z, d = g.gates.eval_values(), g.head_dim
            for h in range(g.num_heads):
                p.out_proj.weight[:, h * d:(h + 1) * d] *= z[h]
                if z[h] == 0:
                    p.v_proj.weight[h * d:(h + 1) * d] = 0
                    p.v_proj.bias[h * d:(h + 1) * d] = 0
    plain.eval()
    assert sum(bool((g.gates.eval_values() == 0).any()) for g in gated.encoder.attention_modules()) == 6
    with torch.no_grad():
        torch.testing.assert_close(plain(**sample["net_input"])[0], gated(**sample["net_input"])[0],
                                   atol=1e-5, rtol=1e-5)
    d = dictionary()
    inp = {k: v for k, v in sample["net_input"].items() if k != "prev_output_tokens"}
    hyps = [SequenceGenerator([m], d, beam_size=2, max_len_b=10).forward({"net_input": inp}) for m in (gated, plain)]
    assert [[h["tokens"].tolist() for h in s] for s in hyps[0]] == [[h["tokens"].tolist() for h in s] for s in hyps[1]]


def test_train_gates_only_freezes_everything_else():
    model, crit, sample = nmt_setup("transformer_head_gates", {**GATED, "train_gates_only": True})
    trained = {name for name, p in model.named_parameters() if p.requires_grad}
    assert len(trained) == 6 + 4 and all(name.endswith(".gates.log_alpha") for name in trained)
    crit(model, sample)[0].backward()
    assert all((p.grad is not None) == (name in trained) for name, p in model.named_parameters())
    with pytest.raises(OptionError, match="--train-gates-only: the model has no head gates"):
        nmt_setup("transformer_local_baseline", {"train_gates_only": True})
