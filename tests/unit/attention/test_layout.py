"""Layout grammar: parsing, group scoping, canonical form and errors."""

import pytest

from fairseq_local.attention.layout import LayoutError, check_layout, format_layout, parse_layout
from fairseq_local.models.archs import NMT_CONFIGS


def test_repetition_and_own_groups():
    layers = parse_layout("[band-1, band-2, global*6]*6")
    assert len(layers) == 6
    assert [str(m) for m in layers[0].masks] == ["band-1", "band-2"] + ["global"] * 6
    assert len(layers[0].groups) == 8 and layers[0].head_to_group == tuple(range(8))
    assert set(layers[0].groups).isdisjoint(layers[1].groups)


def test_layer_local_groups_are_scoped_per_layer():
    layers = parse_layout("[identity@a,band-2@a,identity@b,band-2@b]*2")
    assert layers[0].head_to_group == (0, 0, 1, 1)
    assert layers[0].groups != layers[1].groups  # each copy has its own 'a' and 'b'


def test_cross_layer_groups_are_shared():
    layers = parse_layout("[band-1@@t,identity@@t*3];[global*4];[prev-1@@t,next-1@@t,band-2,band-2@@t]")
    assert layers[0].groups == ("@@t",)
    assert layers[2].groups[0] == "@@t" and len(layers[2].groups) == 2
    assert layers[2].head_to_group == (0, 0, 1, 0)


@pytest.mark.parametrize("cfg", NMT_CONFIGS, ids=lambda c: c.letter)
def test_paper_layouts_roundtrip(cfg):
    layers = parse_layout(cfg.layout)
    check_layout(layers, 6, 8)
    text = format_layout(layers)
    assert parse_layout(text) == layers
    assert format_layout(parse_layout(text)) == text


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("", "empty"),
        ("[band-1,global]*0", "repeat count '0'"),
        ("[band-1,global]*x", "repeat count 'x'"),
        ("[band-1,[global]]", "brackets"),
        ("[band-1,global", "brackets"),
        ("[bnd-1,global]", "unknown mask kind 'bnd-1'"),
        ("[band-0,global]", "k >= 1"),
        ("[band-1@,global]", "group name"),
        ("[band-1@a-b,global]", "cannot parse head|group name"),
        ("[band-1,,global]", "cannot parse head ''"),
        ("[]", "no heads"),
        ("[global*2];;[global*2]", "no heads"),
    ],
)
def test_malformed_layouts_name_the_offending_part(text, fragment):
    import re

    with pytest.raises(LayoutError) as e:
        parse_layout(text)
    msg = str(e.value)
    assert "\n" not in msg and re.search(fragment, msg), msg


def test_dimension_mismatch():
    with pytest.raises(LayoutError, match="5 layers but the encoder has 6"):
        check_layout(parse_layout("[global*8]*5"), 6, 8)
    with pytest.raises(LayoutError, match="layer 2 has 4 heads but the encoder has 8"):
        check_layout(parse_layout("[global*8];[global*4]"), 2, 8)


def test_a_layout_is_parsed_once_and_shared():
    """Every reader of one layout text (the modules, the resume signature, export) gets the same frozen
    object: parsing happens once per text, and nothing can change what the others read."""
    import dataclasses

    a = parse_layout("[band-1, global*3]*2")
    assert parse_layout("[band-1,global*3]*2") is a  # whitespace aside, one text
    assert parse_layout("[band-2,global*3]*2") is not a
    with pytest.raises(dataclasses.FrozenInstanceError):
        a[0].heads[0].group = "x"
