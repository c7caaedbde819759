"""The attention options are resolved, and ``--attn-layout`` parsed, at one
site (:func:`~fairseq_local.attention.config.attention_options`): the models,
the builder, the modules, the resume signature and the export read its
frozen :class:`~fairseq_local.attention.config.AttentionOptions`."""

import argparse
import dataclasses
import sys

import pytest

import fairseq_local  # noqa: F401  (registers kinds, archs and criteria)
from fairseq.models import ARCH_CONFIG_REGISTRY
from fairseq.models.transformer import TransformerConfig, TransformerModel
from fairseq_local.attention import config, layout
from fairseq_local.attention.config import OPTION_NAMES, AttentionConfig, AttentionOptions, attention_options
from fairseq_local.attention.export import learned_masks
from fairseq_local.attention.layout import LayoutError, format_layout
from fairseq_local.attention.plan import HeadPlan
from fairseq_local.models import build_encoder
from fairseq_local.models.resume import model_signature
from fairseq_local.models.roberta import build_roberta
from fairseq_local.models.transformer import LocalTransformerModel, dummy_dictionary
from helpers.precision import nmt_setup

SMALL = {"encoder_embed_dim": 32, "encoder_ffn_embed_dim": 64, "dropout": 0.0, "dam_max_len": 24}
LAYOUT = "[dam-s,band-1@a,global@a,global:gate,global*4]*6"


@pytest.fixture
def parse_sites(monkeypatch):
    """The (file, function) that called ``parse_layout``, once per parse
    (the parse cache is bypassed, so every call is seen)."""
    sites = []
    real = layout._parse

    def spy(compact: str):
        caller = sys._getframe(2).f_code  # 0: spy, 1: parse_layout, 2: its caller
        sites.append((caller.co_filename, caller.co_name))
        return real(compact)

    monkeypatch.setattr(layout, "_parse", spy)
    return sites


def _only_attention_options(sites) -> None:
    assert sites, "nothing was parsed"
    assert set(sites) == {(config.__file__, "attention_options")}, sites


def test_an_encoder_parses_its_layout_once_and_every_part_reads_it(parse_sites):
    args = argparse.Namespace(**dict(SMALL, attn_layout=LAYOUT))
    ARCH_CONFIG_REGISTRY["transformer_local"](args)  # fills and checks the options: one parse
    assert len(parse_sites) == 1
    cfg = TransformerConfig.from_namespace(args)
    dictionary = dummy_dictionary(64)
    embed = TransformerModel.build_embedding(args, dictionary, cfg.encoder.embed_dim)
    del parse_sites[:]
    enc = LocalTransformerModel.build_encoder(cfg, dictionary, embed)
    assert len(parse_sites) == 1  # the encoder's options; the signature and the layers read them
    _only_attention_options(parse_sites)
    options = enc.attention_options
    assert isinstance(options, AttentionOptions) and enc.layout is options.layout
    assert enc.signature["attn_layout"] == format_layout(options.layout) == args.attn_layout
    for module, spec in zip(enc.attention_modules(), options.layout):
        assert module.plan == HeadPlan.build(spec, options.mask_mode)
    assert enc.attention_modules()[0].gates is not None  # the ':gate' head, from the parsed layout


def test_models_signatures_and_export_parse_only_through_the_options(parse_sites):
    enc = build_encoder("transformer_local", dict(SMALL, attn_layout=LAYOUT))
    build_roberta("roberta_local_base", dict(encoder_layers=2, encoder_embed_dim=16, encoder_ffn_embed_dim=32,
                                             encoder_attention_heads=2, attn_layout="[band-1,global:gate]*2"))
    nmt_setup("transformer_head_gates", {"decoder_gates": "self,cross", "decoder_layers": 2})
    model_signature({"arch": "transformer_local", "attn_layout": LAYOUT})
    state = {f"encoder.{k}": v for k, v in enc.state_dict().items()}  # as a model saves it
    masks = learned_masks(attention_options({"attn_layout": LAYOUT}), state)
    assert sorted(masks) == [(l, 0) for l in range(6)]
    _only_attention_options(parse_sites)


def test_the_options_are_frozen_and_complete():
    options = attention_options(AttentionConfig(mask_mode="pre", dam_l1="density"), 2, 3)
    assert format_layout(options.layout) == "[global*3]*2"  # the default layout, all global
    assert (options.mask_mode, options.dam_l1, options.attn_impl, options.gate_penalty) == (
        "pre", "density", "auto", "sum")
    assert {f.name for f in dataclasses.fields(AttentionOptions)} == {"layout", *OPTION_NAMES} - {"attn_layout"}
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.mask_mode = "post"
    voita = attention_options({"attn_layout": "[global:gate*2]", "gate_preset": "voita"})
    assert (voita.gate_beta, voita.gate_init, voita.gate_penalty) == (0.33, "glorot", "layer-mean")


def test_a_missing_or_wrong_layout_is_a_layout_error():
    with pytest.raises(LayoutError, match="empty attention layout"):
        attention_options(AttentionConfig())  # no layout, no dimensions to default it from
    with pytest.raises(LayoutError, match="has 2 layers but the encoder has 3"):
        attention_options(AttentionConfig(attn_layout="[global*4]*2"), 3, 4)
