"""The options in which BERT differs from RoBERTa: ``--layernorm-eps``
(every LayerNorm's epsilon) and ``--positions absolute`` (token t at
position t, padding or not), their checks and their place in the resume
signature."""

import pytest
import torch

from fairseq_local.errors import OptionError, ResumeError
from fairseq_local.models import build_roberta
from fairseq_local.models.resume import check_resume, model_signature
from fairseq_local.models.roberta import AbsolutePositionalEmbedding

SMALL = dict(encoder_embed_dim=16, encoder_ffn_embed_dim=32, encoder_layers=2, encoder_attention_heads=2,
             max_positions=16, dropout=0.0, attention_dropout=0.0)


def _model(**options):
    torch.manual_seed(0)
    return build_roberta("roberta_local_base", {**SMALL, **options}, vocab_size=40).eval()


def _layer_norms(model):
    return [m for m in model.modules() if isinstance(m, torch.nn.LayerNorm)]


def test_layernorm_eps_reaches_every_layer_norm_and_changes_the_output():
    plain, bert = _model(), _model(layernorm_eps=1e-12)
    norms = _layer_norms(bert)
    # embedding, 2 per layer, the LM head's
    assert len(norms) == 1 + 2 * SMALL["encoder_layers"] + 1
    assert {m.eps for m in norms} == {1e-12} and {m.eps for m in _layer_norms(plain)} == {1e-5}
    tokens = torch.tensor([[0, 5, 6, 7, 2]])
    with torch.no_grad():
        # Embeddings of variance ~1e-10 << 1e-5: the epsilon decides the embedding LayerNorm's output.
        plain.encoder.sentence_encoder.embed_tokens.weight.mul_(1e-3)
        bert.encoder.sentence_encoder.embed_tokens.weight.mul_(1e-3)
        plain.encoder.sentence_encoder.embed_positions.weight.mul_(1e-3)
        bert.encoder.sentence_encoder.embed_positions.weight.mul_(1e-3)
        a, b = plain(tokens, features_only=True)[0], bert(tokens, features_only=True)[0]
    assert not torch.allclose(a, b, atol=1e-3)


@pytest.mark.parametrize("bad", [0.0, -1e-5])
def test_a_layernorm_eps_that_is_not_positive_is_one_line(bad):
    with pytest.raises(OptionError, match="--layernorm-eps must be > 0"):
        _model(layernorm_eps=bad)


def test_absolute_positions_count_padding_and_keep_the_table():
    plain, bert = _model(), _model(positions="absolute")
    emb = bert.encoder.sentence_encoder.embed_positions
    assert isinstance(emb, AbsolutePositionalEmbedding)
    assert type(plain.encoder.sentence_encoder.embed_positions) is not AbsolutePositionalEmbedding
    assert plain.state_dict().keys() == bert.state_dict().keys()
    pad = emb.padding_idx
    left = torch.tensor([[pad, pad, 0, 5, 2], [0, 5, 6, 7, 2]])
    # Token t reads row pad + 1 + t, in every row, padding or not.
    torch.testing.assert_close(emb(left), emb.weight[pad + 1:pad + 6].expand(2, -1, -1))
    # Right-padded input reads the rows fairseq's positions read.
    bert.load_state_dict(plain.state_dict())
    right = torch.tensor([[0, 5, 6, 7, 2], [0, 5, 2, pad, pad]])
    with torch.no_grad():
        a, b = plain(right, features_only=True)[0], bert(right, features_only=True)[0]
    torch.testing.assert_close(a[1, :3], b[1, :3])
    torch.testing.assert_close(a[0], b[0])
    # Left padding shifts BERT's positions, not fairseq's.
    unpadded = left[:1, 2:]
    with torch.no_grad():
        a, b = plain(left, features_only=True)[0], bert(left, features_only=True)[0]
        a1, b1 = plain(unpadded, features_only=True)[0], bert(unpadded, features_only=True)[0]
    torch.testing.assert_close(a[0, 2:], a1[0])
    assert not torch.allclose(b[0, 2:], b1[0], atol=1e-3)


def test_an_unknown_positions_value_is_one_line():
    with pytest.raises(OptionError, match="--positions must be one of fairseq, absolute"):
        _model(positions="relative_key")


def test_bert_options_are_part_of_the_signature():
    base = {"arch": "roberta_local_base", "attn_layout": "[global*2]*2"}
    plain = model_signature(base)
    bert = model_signature({**base, "layernorm_eps": 1e-12, "positions": "absolute"})
    assert "layernorm_eps" not in plain and "positions" not in plain
    assert model_signature({**base, "positions": "fairseq"}) == plain  # the default is not named
    assert bert["layernorm_eps"] == "1e-12" and bert["positions"] == "absolute"
    with pytest.raises(ResumeError, match="--layernorm-eps"):
        check_resume(bert, plain, {"save_dir": "/nonexistent"})
    check_resume(bert, dict(bert), {"save_dir": "/nonexistent"})


def test_absolute_positions_without_a_learned_table_is_one_line():
    with pytest.raises(OptionError, match="--positions absolute needs learned positions"):
        _model(positions="absolute", encoder_learned_pos=False)
