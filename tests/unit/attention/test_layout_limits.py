"""Issue #19: the layout grammar's limits.  Huge repeat counts and mask
parameters are one-line :class:`LayoutError`/:class:`MaskSpecError` at parse
time, checked before any repeat is expanded (never an OverflowError, an
abort or minutes of work), and modifiers in the wrong order say so."""

import argparse
import time

import pytest
import torch

from fairseq_local.errors import OptionError
from fairseq_local.attention.layout import (MAX_HEADS, MAX_LAYERS, MAX_TOTAL_HEADS, LayoutError, format_layout,
                                          parse_layout)
from fairseq_local.attention.masks import MaskSpecError, parse_mask
from fairseq_local.attention.masks.registry import MAX_PARAM
from helpers.probes import one_line_error, run_command


def layout_error(text: str) -> str:
    start = time.perf_counter()
    with pytest.raises(LayoutError) as e:
        parse_layout(text)
    assert time.perf_counter() - start < 1.0  # checked before expanding anything
    message = str(e.value)
    assert "\n" not in message and len(message) < 300, message
    return message


@pytest.mark.parametrize("text, fragment", [
    ("[global*4]*99999999999", "repeat count 99999999999 is too large: a layout has at most 10,000 layers"),
    ("global*9999999999999999999999", "at most 10,000 heads in a layer"),
    ("[global*4]*" + "9" * 5000, "is too large"),
    (f"[global]*{MAX_LAYERS + 1}", "at most 10,000 layers"),
    (f"[global]*{MAX_LAYERS};[global]", "more than 10,000 layers"),
    (f"[global*{MAX_HEADS // 2},global*{MAX_HEADS // 2 + 1}]", "more than 10,000 heads in a layer"),
    ("[global*100]*1001", "more than 100,000 heads in all"),
    ("[band-99999999999999999999]", "k must be at most 1,000,000"),
    (f"[band-{MAX_PARAM + 1}]", "k must be at most 1,000,000"),
    ("[bigbird-1-2-99999999999999999999]", "R must be at most 1,000,000"),
    ("[axis-0.99999999999999999999-0]", "ROWS must be at most 1,000,000"),
    ("[file-99999.0]", "L must be at most 9,999"),
    ("[global*0]", "repeat count '0' must be an integer >= 1"),
    ("[global*00]*2", "repeat count '00' must be an integer >= 1"),
])
def test_huge_numbers_are_one_line_errors(text, fragment):
    assert fragment in layout_error(text)


@pytest.mark.parametrize("text, fragment", [
    ("[band-2@a:gate,global]", "':gate' must come before the group ('@NAME' or '@@NAME')"),
    ("[band-2@@t:gate,global]", "':gate' must come before the group"),
    ("[band-2*2@a,global]", "the repeat '*N' must come last"),
    ("[band-2*2:gate,global]", "the repeat '*N' must come last"),
])
def test_modifiers_out_of_order_name_the_order(text, fragment):
    message = layout_error(text)
    assert fragment in message and "MASK[:gate][@NAME|@@NAME][*N]" in message


def test_the_limits_themselves_parse():
    assert len(parse_layout(f"[global]*{MAX_LAYERS}")) == MAX_LAYERS
    assert len(parse_layout(f"[global*{MAX_HEADS}]")[0].heads) == MAX_HEADS
    assert sum(len(l.heads) for l in parse_layout(f"[global*100]*{MAX_TOTAL_HEADS // 100}")) == MAX_TOTAL_HEADS
    layers = parse_layout(f"[band-{MAX_PARAM}:gate@a,global@a]*2")
    assert format_layout(layers) == f"[band-{MAX_PARAM}:gate@a,global@a]*2"
    assert str(parse_mask("random-2-s9223372036854775807")) == "random-2-s9223372036854775807"
    assert str(parse_mask("band-0001")) == "band-1"


@pytest.mark.parametrize("token", ["band-2@a", "global:gate", "band-2*2"])
def test_a_layout_head_is_not_a_mask_token(token):
    with pytest.raises(MaskSpecError, match="is not a mask token"):
        parse_mask(token)


@pytest.mark.parametrize("layout, fragment", [
    ("[global*4]*99999999999", "at most 10,000 layers"),
    ("[band-99999999999999999999*4]*2", "k must be at most 1,000,000"),
    ("[band-2@a:gate*4]*2", "':gate' must come before the group"),
])
def test_a_huge_or_misordered_layout_on_the_command_line_is_one_line(tmp_path, capsys, layout, fragment):
    """Through convert-roberta, which parses --attn-layout for a stock model's dimensions."""
    stock = tmp_path / "stock.pt"
    args = argparse.Namespace(arch="roberta_base", _name="roberta_base", encoder_layers=2,
                              encoder_attention_heads=4, encoder_embed_dim=32)
    torch.save({"cfg": {"model": args}, "model": {}}, stock)
    start = time.perf_counter()
    status, out, err = run_command(capsys, ["convert-roberta", stock, tmp_path / "out.pt", "--arch",
                                            "roberta_local_base", "--attn-layout", layout])
    assert status == 2 and out == "" and time.perf_counter() - start < 30
    one_line_error(err, fragment)
    assert not (tmp_path / "out.pt").exists()


def test_embedding_size_not_a_multiple_of_the_heads_is_an_option_error():
    from fairseq_local.attention.build import AttentionBuilder
    from fairseq_local.attention.config import AttentionConfig, attention_options

    with pytest.raises(OptionError, match="embedding size 30 is not a multiple of the 4 attention heads"):
        AttentionBuilder(attention_options(AttentionConfig(attn_layout="[global*4]")), 30, 1, 4, max_positions=16)
