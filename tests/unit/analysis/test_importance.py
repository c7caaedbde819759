"""Head importance: conservative LRP (Ali et al. 2022) is exactly conservative
on translation and RoBERTa models (ReLU, GELU, a tanh classification head),
globally and layer by layer; batched relevance equals one prediction at a
time; gradient x gate (Michel et al. 2019) equals the derivative by an
explicit head mask and a finite difference; the per-layer normalisations."""

import argparse
import contextlib

import pytest
import torch

import fairseq_local  # noqa: F401  (registers the archs)
from fairseq.models import ARCH_CONFIG_REGISTRY
from fairseq.tasks.translation import TranslationTask
from fairseq_local.analysis.dump import prepare
from fairseq_local.analysis.importance import (ImportanceOptions, batch_gate_gradients, batch_losses,
                                               batch_relevance, head_importance, logits_of, make_batch,
                                               normalise_l2, normalise_sum, prediction_kind)
from fairseq_local.analysis.lrp import conservative_rules
from fairseq_local.analysis.model import AnalysisError, AnalysisModel
from fairseq_local.attention.context import AttentionCapture, attention_context
from fairseq_local.errors import OptionError
from fairseq_local.models import LocalTransformerModel
from fairseq_local.models.roberta import build_roberta
from fairseq_local.models.transformer import dummy_dictionary

from test_dump import DIMS, SENTENCES, VOCAB, pieces

LAYOUT = "[global:gate,prev-1,band-2@@a,identity@@a]*2"


def _randomise(model: torch.nn.Module) -> None:
    """Biases (LayerNorm β included) away from 0, gates strictly inside (0, 1)."""
    for name, p in model.named_parameters():
        if name.endswith("bias"):
            torch.nn.init.normal_(p, std=0.3)
        if "log_alpha" in name:
            p.data.fill_(0.3)


def dictionary():
    d = dummy_dictionary(VOCAB)
    d.add_symbol("<mask>")
    return d


def nmt(normalize_before: bool = False) -> AnalysisModel:
    d = dictionary()
    args = argparse.Namespace(encoder_embed_dim=16, encoder_ffn_embed_dim=32, decoder_embed_dim=16,
                              decoder_ffn_embed_dim=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                              decoder_attention_heads=2, dropout=0.0, attention_dropout=0.0, attn_layout=LAYOUT,
                              encoder_normalize_before=normalize_before, decoder_normalize_before=normalize_before)
    ARCH_CONFIG_REGISTRY["transformer_local"](args)
    torch.manual_seed(0)
    model = LocalTransformerModel.build_model(args, TranslationTask(argparse.Namespace(left_pad_source=True), d, d))
    _randomise(model)
    return AnalysisModel(model.double().eval(), d, pieces, target_tokeniser=pieces)


def roberta(activation: str = "gelu", head: bool = False, normalize_before: bool = False) -> AnalysisModel:
    d = dictionary()
    torch.manual_seed(1)
    layout = "[band-1,global:gate,global@x,prev-2@x];[global*4]"
    model = build_roberta("roberta_local_base", dict(DIMS, attn_layout=layout, mask_mode="pre", max_positions=24,
                                                     activation_fn=activation,
                                                     encoder_normalize_before=normalize_before), dictionary=d)
    if head:
        model.register_classification_head("sst", num_classes=3)
    _randomise(model)
    return AnalysisModel(model.double().eval(), d, pieces)


BUILDS = {"nmt": nmt, "nmt-prenorm": lambda: nmt(True), "roberta-relu": lambda: roberta("relu"),
          "roberta-gelu": roberta, "roberta-class": lambda: roberta(head=True),
          "roberta-prenorm": lambda: roberta(normalize_before=True)}


def one_batch(m: AnalysisModel, sentences=SENTENCES[:2], **opts):
    items, _ = prepare(m, sentences)
    o = ImportanceOptions(**opts)
    kind = prediction_kind(m, o)
    greedy = None
    if kind == "translation" and o.refs is None:
        from fairseq_local.analysis.importance import _Greedy
        greedy = _Greedy(m, o)
    return kind, items, make_batch(m, kind, items, o, greedy)


@contextlib.contextmanager
def leaves(modules):
    """Each module's output replaced by a fresh leaf (the inputs of the relevance sum)."""
    found = []

    def hook(module, args, out):
        found.append(out.detach().requires_grad_(True))
        return found[-1]

    handles = [m.register_forward_hook(hook) for m in modules]
    try:
        yield found
    finally:
        for h in handles:
            h.remove()


def embeddings(m: AnalysisModel):
    """The modules whose outputs are the model's inputs: token and position embeddings."""
    parts = [m.model.decoder] if hasattr(m.model, "decoder") else []
    return [getattr(e, name) for e in [m.encoder, *parts] for name in ("embed_tokens", "embed_positions")]


def relevance_sum(m: AnalysisModel, kind: str, batch, rules: bool):
    """(f, Σ input relevance + Σ bias relevance) for the top-1 logit f of the
    first counted prediction of a one-sentence batch."""
    with leaves(embeddings(m)) as inputs, torch.enable_grad():
        with conservative_rules(m.model) if rules else contextlib.nullcontext():
            logits = logits_of(m, kind, batch)
    n = int(batch.mask[0].nonzero()[-1])
    f = logits[0, n].max()
    biases = [p for name, p in m.model.named_parameters() if name.endswith("bias")]
    grads = torch.autograd.grad(f, inputs + biases, allow_unused=True)
    return float(f), float(sum((x * g).sum() for x, g in zip(inputs + biases, grads) if g is not None))


@pytest.mark.parametrize("name", list(BUILDS))
def test_relevance_is_conserved_and_the_plain_gradient_is_not(name):
    m = BUILDS[name]()
    kind, _, batch = one_batch(m, SENTENCES[1:2])
    f, total = relevance_sum(m, kind, batch, rules=True)
    assert total == pytest.approx(f, abs=1e-10)  # float64
    f_plain, plain = relevance_sum(m, kind, batch, rules=False)
    assert f_plain == pytest.approx(f, abs=1e-6) and abs(plain - f) > 1e-3  # the rules matter


@pytest.mark.parametrize("name", ["nmt", "roberta-gelu", "roberta-prenorm"])
def test_each_layer_conserves_relevance(name):
    """Per layer: y·∂f/∂y = Σ_h R_h + b_o·∂f/∂b_o for the block output
    y = Σ_h W_o,h o_h + b_o, and x·∂f/∂x = Σ_h R_h − b_v·∂f/∂b_v for the
    block input x through the attention (the AH-rule leaves only the values)."""
    m = BUILDS[name]()
    kind, _, batch = one_batch(m, SENTENCES[1:2])
    aliases, outs = {}, {}

    def alias(module, args, kwargs):  # the attention's own copy of x (not the residual's)
        q = kwargs["query"].view_as(kwargs["query"])
        aliases[module] = q
        return args, dict(kwargs, query=q, key=q, value=q)

    handles = [a.register_forward_pre_hook(alias, with_kwargs=True) for a in m.attention]
    handles += [a.register_forward_hook(lambda mod, args, out: outs.__setitem__(mod, out[0])) for a in m.attention]
    cap = AttentionCapture(head_outputs=True, graph=True)
    with torch.enable_grad(), conservative_rules(m.model, cap):
        logits = logits_of(m, kind, batch)
    for h in handles:
        h.remove()
    f = logits[0, int(batch.mask[0].nonzero()[0])].max()
    for a in m.attention:
        (call,) = cap.of(a)
        x, y, o = aliases[a], outs[a], call.head_outputs
        gx, gy, go, gbo, gbv = torch.autograd.grad(f, [x, y, o, a.out_proj.bias, a.v_proj.bias], retain_graph=True)
        heads = (o * go).sum((0, 2, 3))  # R_h, (H,)
        assert float((y * gy).sum()) == pytest.approx(float(heads.sum() + (a.out_proj.bias * gbo).sum()), abs=1e-10)
        assert float((x * gx).sum()) == pytest.approx(float(heads.sum() - (a.v_proj.bias * gbv).sum()), abs=1e-10)
        assert heads.abs().min() > 1e-6  # every head carries relevance


def one_at_a_time(m: AnalysisModel, kind: str, batch):
    """The reference: each sentence alone, one backward pass per prediction."""
    B, N = batch.mask.shape
    out = torch.zeros(m.num_layers, B, N, m.num_heads, dtype=torch.float64)
    for b in range(B):
        n_src = int(batch.src_lengths[b])
        prev = None if batch.prev_output_tokens is None else batch.prev_output_tokens[b:b + 1]
        one = type(batch)(batch.src_tokens[b:b + 1, :n_src], batch.src_lengths[b:b + 1], prev, None,
                          batch.mask[b:b + 1])
        for n in batch.mask[b].nonzero()[:, 0].tolist():
            cap = AttentionCapture(head_outputs=True, graph=True)
            with torch.enable_grad(), conservative_rules(m.model, cap):
                f = logits_of(m, kind, one)[0, n].max()
            heads = [c.head_outputs for c in cap.calls]
            grads = torch.autograd.grad(f, heads)
            out[:, b, n] = torch.stack([(h * g).sum((0, 2, 3)) for h, g in zip(heads, grads)])
    return out


@pytest.mark.parametrize("name,opts", [("nmt", {"max_len_a": 1, "max_len_b": 1}), ("roberta-gelu", {}),
                                       ("roberta-relu", {"positions": "all"}),
                                       ("roberta-class", {})])
def test_batched_relevance_equals_one_prediction_at_a_time(name, opts):
    m = BUILDS[name]()
    kind, _, batch = one_batch(m, SENTENCES[:3], **opts)
    assert batch.src_lengths.min() < batch.src_lengths.max()  # padding in the batch
    got, scores = batch_relevance(m, kind, batch)
    # fairseq's NMT decoder takes its softmaxes in float32 whatever the model's dtype (utils.softmax): there a
    # padded batch and a single sentence agree to float32 rounding, which depends on the CPU's kernels
    # (1.8e-8 apart on one machine, equal on another)
    tol = dict(atol=1e-6, rtol=1e-5) if name == "nmt" else dict(atol=1e-10, rtol=1e-9)
    torch.testing.assert_close(got, one_at_a_time(m, kind, batch), **tol)
    assert got[:, ~batch.mask].abs().sum() == 0 and scores.shape == batch.mask.shape


def with_head_mask(m: AnalysisModel, kind: str, batch, xi):
    """Per-sentence losses with an explicit head mask ξ (L, B, H) multiplying
    each head's slice of W_o's input (Michel et al. 2019, §4.1)."""
    H, dh = m.num_heads, m.head_dim

    def scale(layer):
        def hook(module, args):
            T, B, _ = args[0].shape
            return (args[0].view(T, B, H, dh) * xi[layer][None, :, :, None]).view(T, B, H * dh),
        return hook

    handles = [a.out_proj.register_forward_pre_hook(scale(l)) for l, a in enumerate(m.attention)]
    try:
        return batch_losses(m, kind, batch)
    finally:
        for h in handles:
            h.remove()


@pytest.mark.parametrize("name,opts", [("nmt", {}), ("roberta-gelu", {}), ("roberta-class", {})])
def test_gate_gradient_is_the_derivative_by_a_head_mask(name, opts):
    m = BUILDS[name]()
    kind, _, batch = one_batch(m, SENTENCES[:3], **opts)
    got = batch_gate_gradients(m, kind, batch)  # (L, B, H)
    B = batch.mask.shape[0]
    xi = torch.ones(m.num_layers, B, m.num_heads, dtype=torch.float64, requires_grad=True)
    (want,) = torch.autograd.grad(with_head_mask(m, kind, batch, xi).sum(), xi)
    torch.testing.assert_close(got, want, atol=1e-10, rtol=1e-9)
    eps = 1e-3  # the attention softmax runs in float32: a coarser step than float64 would allow
    for layer, b, h in [(0, 0, 0), (1, 2, 3), (0, 1, 2)]:
        plus, minus = torch.ones_like(xi.detach()), torch.ones_like(xi.detach())
        plus[layer, b, h] += eps
        minus[layer, b, h] -= eps
        fd = (with_head_mask(m, kind, batch, plus)[b] - with_head_mask(m, kind, batch, minus)[b]) / (2 * eps)
        assert float(fd) == pytest.approx(float(got[layer, b, h]), abs=1e-3)
    assert got.abs().min() > 0


def test_scores_are_normalised_per_layer_and_do_not_depend_on_batching():
    m = nmt()
    items, _ = prepare(m, SENTENCES)
    big = head_importance(m, items, ImportanceOptions(), progress=False)
    small = head_importance(m, items, ImportanceOptions(max_tokens=1), progress=False)  # one sentence a batch
    for key in ("lrp", "grad_gate", "lrp_signed"):
        torch.testing.assert_close(torch.tensor(small[key]), torch.tensor(big[key]), atol=1e-9, rtol=1e-7)
    lrp, grad = torch.tensor(big["lrp"], dtype=torch.float64), torch.tensor(big["grad_gate"], dtype=torch.float64)
    assert lrp.shape == grad.shape == (2, 4) and big["sentences"] == 3
    torch.testing.assert_close(lrp.sum(-1), torch.ones(2, dtype=torch.float64))
    torch.testing.assert_close(grad.norm(dim=-1), torch.ones(2, dtype=torch.float64))
    # by hand: mean |R_h| over the predictions, then each layer / its sum
    kind, _, batch = one_batch(m, SENTENCES)
    rel, _ = batch_relevance(m, kind, batch)
    mean = rel.abs().sum((1, 2)) / batch.mask.sum()
    torch.testing.assert_close(lrp, mean / mean.sum(-1, keepdim=True))
    assert big["predictions"] == int(batch.mask.sum())
    mean_grad = batch_gate_gradients(m, kind, batch).abs().mean(1)
    torch.testing.assert_close(grad, mean_grad / mean_grad.norm(dim=-1, keepdim=True))
    assert -1 <= big["spearman"] <= 1 and "AH-rule" in big["rule"]


def test_normalisations():
    x = torch.tensor([[1.0, 3.0], [0.0, 0.0], [3.0, 4.0]], dtype=torch.float64)
    assert normalise_sum(x).tolist() == [[0.25, 0.75], [0.0, 0.0], [3 / 7, 4 / 7]]
    assert normalise_l2(x)[2].tolist() == [0.6, 0.8] and normalise_l2(x)[1].tolist() == [0.0, 0.0]


def test_masked_pieces_are_seeded_by_sentence():
    m = roberta()
    items, _ = prepare(m, SENTENCES)
    kind = prediction_kind(m, ImportanceOptions())
    together = make_batch(m, kind, items, ImportanceOptions())
    mask_id = m.dictionary.index("<mask>")
    for b, it in enumerate(items):
        alone = make_batch(m, kind, [it], ImportanceOptions())
        n = len(it.input.ids)
        assert torch.equal(alone.mask[0], together.mask[b, :n]) and not together.mask[b, n:].any()
        pieces_at = [t for t, w in enumerate(it.input.word_ids) if w >= 0]
        chosen = together.mask[b].nonzero()[:, 0].tolist()
        assert set(chosen) <= set(pieces_at) and len(chosen) == max(1, round(0.15 * len(pieces_at)))
        assert all(together.src_tokens[b, t] == mask_id for t in chosen)
        assert together.targets[b, chosen].tolist() == [it.input.ids[t] for t in chosen]
    other = make_batch(m, kind, items, ImportanceOptions(seed=2, mask_prob=0.5))
    assert not torch.equal(other.mask, together.mask)


def test_translation_targets_greedy_and_references():
    from fairseq.sequence_generator import SequenceGenerator

    m = nmt()
    kind, items, batch = one_batch(m, SENTENCES)
    d = m.model.decoder.dictionary
    gen = SequenceGenerator([m.model], d, beam_size=1, max_len_a=1.2, max_len_b=10)
    for b, it in enumerate(items):
        src = torch.tensor([it.input.ids])
        want = gen.generate([m.model], {"net_input": {"src_tokens": src, "src_lengths": torch.tensor([src.shape[1]])}})
        row = batch.targets[b][batch.mask[b]].tolist()
        assert row == want[0][0]["tokens"].tolist() and row[-1] == d.eos()
        prev = batch.prev_output_tokens[b]
        assert prev[0] == d.eos() and prev[1:len(row)].tolist() == row[:-1]
    refs = {0: ["the", "cat"], 1: ["go"], 2: ["a"]}
    _, _, ref_batch = one_batch(m, SENTENCES, refs=refs)
    want = [d.index(s) for w, word in enumerate(["the", "cat"]) for s, _ in pieces(word, w == 0)] + [d.eos()]
    assert ref_batch.targets[0, :len(want)].tolist() == want and ref_batch.mask.sum(-1).tolist() == [5, 2, 2]


def test_options_that_do_not_fit_the_model_are_one_line_errors():
    cases = [(roberta, dict(refs={0: ["a"]}), "--ref is for translation models"),
             (nmt, dict(head="sst"), "--head is for RoBERTa"),
             (roberta, dict(head="sst"), "no classification head 'sst'"),
             (roberta, dict(method="all"), "unknown --method"),
             (roberta, dict(mask_prob=0.0), "--mask-prob")]
    for build, opts, message in cases:
        with pytest.raises(AnalysisError, match=message) as e:
            prediction_kind(build(), ImportanceOptions(**opts))
        assert "\n" not in str(e.value)
    m = roberta(head=True)
    m.model.register_classification_head("mnli", num_classes=3)
    with pytest.raises(AnalysisError, match="choose one with --head"):
        prediction_kind(m, ImportanceOptions())
    assert prediction_kind(m, ImportanceOptions(head="lm")) == "masked"
    plain = roberta()
    del plain.dictionary.indices["<mask>"]
    with pytest.raises(AnalysisError, match="no <mask> symbol"):
        prediction_kind(plain, ImportanceOptions())
    with pytest.raises(OptionError, match="detach_weights needs impl='dense'"):
        with attention_context(detach_weights=True):
            pass


def test_rules_are_removed_when_the_block_closes():
    m = nmt()
    kind, _, batch = one_batch(m, SENTENCES[1:2])
    skips = [a.skip_embed_dim_check for layer in m.model.decoder.layers for a in (layer.self_attn, layer.encoder_attn)]
    with torch.no_grad():
        before = logits_of(m, kind, batch)
    relevance_sum(m, kind, batch, rules=True)
    assert [a.skip_embed_dim_check for layer in m.model.decoder.layers
            for a in (layer.self_attn, layer.encoder_attn)] == skips
    assert not any(mod._forward_hooks or mod._forward_pre_hooks for mod in m.model.modules())
    f, plain = relevance_sum(m, kind, batch, rules=False)
    assert abs(plain - f) > 1e-3  # the plain gradient again
    with torch.no_grad():
        torch.testing.assert_close(logits_of(m, kind, batch), before)
