"""Hidden Token Attribution per head (Pascual et al. Eq. 1, §4): the batched
forward-mode input contribution equals a backward pass per head output row;
e^0 is the input of layer 1 and e^{l-1} the input of layer l, so that at
layer 1 the input and the previous-layer contribution are one quantity, in
post-norm and pre-norm NMT and RoBERTa encoders, with an embedding LayerNorm
and segment embeddings."""

import pytest
import torch

from fairseq_local.analysis.contribution import (input_contribution, input_contribution_naive, layer_inputs,
                                                 previous_contribution)
from fairseq_local.analysis.dump import prepare
from fairseq_local.analysis.jacobian import block_jacobian_norms, previous_layer_contribution
from fairseq_local.analysis.model import AnalysisModel
from fairseq_local.models.roberta import build_roberta
from fairseq_local.models.transformer import build_encoder, dummy_dictionary

from test_dump import DIMS, SENTENCES, VOCAB, Wrapper, nmt, pieces, roberta

NMT_LAYOUT = "[global:gate,prev-1,band-2@@a,identity@@a]*2"
ROBERTA_LAYOUT = "[band-1,global@x,global@x,prev-2];[global*4]"


def _randomise_norms(model: torch.nn.Module, seed: int) -> None:
    """LayerNorm gains and biases away from 1 and 0, so that they count."""
    g = torch.Generator().manual_seed(seed)
    for m in model.modules():
        if isinstance(m, torch.nn.LayerNorm) and m.weight is not None:
            m.weight.data = 1 + 0.5 * torch.randn(m.weight.shape, generator=g)
            m.bias.data = 0.5 * torch.randn(m.bias.shape, generator=g)


def nmt_model(pre_norm: bool = False, embedding_norm: bool = False) -> AnalysisModel:
    torch.manual_seed(0)
    enc = build_encoder("transformer_local", dict(DIMS, attn_layout=NMT_LAYOUT, encoder_normalize_before=pre_norm,
                                                  layernorm_embedding=embedding_norm), vocab_size=VOCAB)
    for name, p in enc.named_parameters():
        if "log_alpha" in name:
            p.data.fill_(0.3)  # a gate strictly between 0 and 1
    _randomise_norms(enc, 1)
    return AnalysisModel(Wrapper(enc), dummy_dictionary(VOCAB), pieces)


def roberta_model(pre_norm: bool = False, segments: bool = False) -> AnalysisModel:
    torch.manual_seed(1)
    model = build_roberta("roberta_local_base", dict(DIMS, attn_layout=ROBERTA_LAYOUT, max_positions=24,
                                                     encoder_normalize_before=pre_norm, segment_embeddings=segments),
                          vocab_size=VOCAB)
    _randomise_norms(model, 2)
    return AnalysisModel(model, dummy_dictionary(VOCAB), pieces)


# post-norm: NMT (no embedding LayerNorm) and RoBERTa (with one); pre-norm: both families
MODELS = {
    "nmt-post": nmt_model,
    "nmt-post-embedding-norm": lambda: nmt_model(embedding_norm=True),
    "nmt-pre": lambda: nmt_model(pre_norm=True),
    "roberta-post": roberta_model,
    "roberta-post-segments": lambda: roberta_model(segments=True),
    "roberta-pre": lambda: roberta_model(pre_norm=True),
}


def _batch(m: AnalysisModel, n: int = 2):
    items, _ = prepare(m, SENTENCES[:n])
    src, lengths = m.collate([it.input for it in items])
    return items, src, lengths


@pytest.mark.parametrize("build", [nmt, roberta, lambda: nmt(mode="pre"), MODELS["roberta-pre"]],
                         ids=["nmt-post", "roberta-mask-pre", "nmt-mask-pre", "roberta-pre-norm"])
def test_batched_forward_mode_equals_a_backward_loop(build):
    m = build()
    items, src, lengths = _batch(m)
    assert lengths[0] < lengths[1]  # the shorter sentence is padded
    got = input_contribution(m, src, lengths, chunk=24)  # d = 16: every other chunk boundary splits a position
    L, H = m.num_layers, m.num_heads
    assert got.shape == (2, L, H, src.shape[1], src.shape[1])
    for b, it in enumerate(items):
        n = len(it.input.ids)
        want = input_contribution_naive(m, torch.tensor(it.input.ids))
        torch.testing.assert_close(got[b, :, :, :n, :n], want, atol=1e-5, rtol=1e-4)
        assert got[b, :, :, n:].abs().sum() == 0 and got[b, :, :, :, n:].abs().sum() == 0
        rows = got[b, :, :, :n, :n].sum(-1)
        assert torch.allclose(rows[rows > 0], torch.ones(()), atol=1e-5)
    # the default chunking gives the same numbers
    torch.testing.assert_close(input_contribution(m, src, lengths), got, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("name", list(MODELS))
def test_at_layer_one_the_input_and_previous_layer_contributions_are_identical(name):
    """§3: "E^0 refers to the word embeddings after position and sequence
    embeddings have been added", the input of layer 1; §4: e^{l-1} is the
    input of layer l.  At layer 1 both contributions are C(e^0, o^1)."""
    m = MODELS[name]()
    _, src, lengths = _batch(m)
    inp = input_contribution(m, src, lengths)[:, 0]
    prev = previous_contribution(m, src, lengths)[:, 0]
    assert inp.abs().sum() > 0
    torch.testing.assert_close(inp, prev, atol=2e-6, rtol=1e-5)


@pytest.mark.parametrize("name", ["nmt-post-embedding-norm", "nmt-pre", "roberta-post", "roberta-pre"])
def test_the_token_embeddings_and_the_blocks_own_input_are_not_e(name):
    """Where an embedding LayerNorm or a pre-norm LayerNorm stands between
    them, the derivative with respect to the token embeddings (before
    positions and the embedding LayerNorm) and the one with respect to the
    self-attention's own input (after a pre-norm LayerNorm) are other
    quantities, which the identity above tells apart: the definitions this
    analysis once took."""
    m = MODELS[name]()
    _, src, lengths = _batch(m)
    prev = previous_contribution(m, src, lengths)[:, 0]
    cap = m.forward(src, lengths)
    pad = src.eq(m.dictionary.pad())
    block_input = previous_layer_contribution(block_jacobian_norms(m.attention[0], cap.inputs[0], pad,
                                                                   need_beta=False)[1])
    tokens = _token_embedding_contribution(m, src, lengths)
    pre_norm, embedding_norm = name.endswith("pre"), not name.startswith("nmt") or "embedding-norm" in name
    # a pre-norm LayerNorm: the block's own input is not e^0 (post-norm: it is)
    assert torch.allclose(block_input, prev, atol=1e-5) != pre_norm
    # an embedding LayerNorm: the token embeddings are not e^0 (without one, e^0 = s·E + P: the scale s cancels)
    assert torch.allclose(tokens, prev, atol=1e-5) != embedding_norm


def _token_embedding_contribution(m: AnalysisModel, src: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """C(embed_tokens(src), o^1) by autograd: (B, H, T, T)."""
    emb = m.encoder.embed_tokens(src).detach().requires_grad_(True)
    outs = []
    hook = m.attention[0].out_proj.register_forward_pre_hook(lambda mod, args: outs.append(args[0]))
    try:
        m.encoder(src, src_lengths=lengths, token_embeddings=emb)
    finally:
        hook.remove()
    o = outs[0]  # (T, B, H·dh)
    T, B = o.shape[:2]
    H, dh = m.num_heads, m.head_dim
    norms = torch.zeros(B, H, T, T)
    for b in range(B):
        for h in range(H):
            for j in range(T):
                (g,) = torch.autograd.grad(o[j, b, h * dh:(h + 1) * dh], emb, torch.eye(dh), retain_graph=True,
                                           is_grads_batched=True)
                norms[b, h, j] = g[:, b].pow(2).sum((0, 2)).sqrt()
    keep = torch.arange(T)[None, :] < lengths[:, None]
    return previous_layer_contribution(norms * keep[:, None, :, None] * keep[:, None, None, :])


@pytest.mark.parametrize("name", ["nmt-pre", "roberta-post"])
def test_layer_inputs_are_the_residual_stream(name):
    """layer_inputs: e^0 then each layer's output, as fairseq's encoder states."""
    m = MODELS[name]()
    _, src, lengths = _batch(m)
    got = layer_inputs(m, src, lengths)
    with torch.no_grad():
        states = m.encoder(src, src_lengths=lengths, return_all_hiddens=True)["encoder_states"]
    assert len(got) == m.num_layers
    for x, want in zip(got, states):
        torch.testing.assert_close(x, want)
