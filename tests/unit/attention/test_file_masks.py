"""Masks exported from a trained DAM (SparseBERT §4.3, "two-stage") reload as
``file`` masks that reproduce the DAM heads exactly."""

import pytest
import torch

import fairseq_local  # noqa: F401
from helpers import make_attention, padding_mask
from fairseq_local.attention.export import export, stage2_layout
from fairseq_local.models import build_encoder
from fairseq_local.attention.layout import parse_layout
from fairseq_local.attention.learned import DamMask
from fairseq_local.attention.masks import (MASK_FILE_FORMAT, FileMask, MaskSpecError, load_mask_file,
                                           write_mask_file)

D = 16
SMALL = {"encoder_embed_dim": 32, "encoder_ffn_embed_dim": 64, "dropout": 0.0, "dam_max_len": 24}


def randomised(mask: DamMask, seed: int = 0) -> DamMask:
    torch.manual_seed(seed)
    torch.nn.init.normal_(mask.alpha, std=2.0)
    return mask


@pytest.mark.parametrize("mode", ["post", "pre"])
@pytest.mark.parametrize("kind", ["dam-u", "dam-s"])
def test_exported_hard_mask_reloads_as_the_same_fixed_mask(tmp_path, mode, kind):
    attn = make_attention([kind, kind, "band-1", "global"], mode=mode, embed_dim=D, std=1.0, max_len=12)
    masks = {(0, 0): attn.learned["dam"][0], (0, 1): attn.learned["dam"][1]}
    path = tmp_path / "masks.pt"
    write_mask_file(path, export(masks, None, None))
    fixed = make_attention(["file-0.0", "file-0.1", "band-1", "global"], mode=mode, embed_dim=D, std=0,
                           mask_file=str(path))
    fixed.load_state_dict({k: v for k, v in attn.state_dict().items() if not k.startswith("learned.dam.")})
    for left_pad in (True, False):
        torch.manual_seed(1)
        lengths = [9, 4, 1]
        x, pad = torch.randn(9, 3, D), padding_mask(lengths, left_pad)
        a, wa = attn(x, key_padding_mask=pad, need_head_weights=True)
        b, wb = fixed(x, key_padding_mask=pad, need_head_weights=True)
        for s in range(3):  # outputs at padding positions are never used
            r = (~pad[s]).nonzero().flatten()
            assert torch.allclose(a[r, s], b[r, s], atol=1e-5)
            assert torch.allclose(wa[:, s][:, r][:, :, r], wb[:, s][:, r][:, :, r], atol=1e-6)


def test_progressive_pruning_drops_the_smallest_entries():
    mask = randomised(DamMask(False, 10))
    (entry,) = export({(0, 0): mask}, None, 80.0).values()
    p = mask.matrix(10, "prob")
    kept = entry["matrix"]
    assert kept.sum() == 20  # 20 % of 100, no ties in an unstructured mask
    assert p[kept].min() > p[~kept].max()
    structured = randomised(DamMask(True, 10), seed=1)
    (entry,) = export({(0, 0): structured}, 10, 50.0).values()
    m = entry["matrix"][1:-1, 1:-1]  # still Toeplitz: ties along a diagonal are kept together
    assert torch.equal(m[1:, 1:], m[:-1, :-1]) and entry["ends"]


def test_stage2_layout_keeps_other_heads_and_groups():
    layout = parse_layout("[dam-s@a,band-1@a,global:gate,dam-u]*2")
    assert stage2_layout(layout) == "[file@a,band-1@a,global:gate,file]*2"
    # AAA's pattern depends on the input: it does not export, and stays
    assert stage2_layout(parse_layout("[dam-u,aaa]")) == "[file,aaa]"


def test_which_kinds_export():
    from fairseq_local.attention.export import exportable_names
    from fairseq_local.attention.learned import AxisAdaptiveSpec, DamSpec

    assert DamSpec.exports() and not AxisAdaptiveSpec.exports()
    assert exportable_names() == "dam-u/dam-s"


def test_file_mask_errors(tmp_path):
    with pytest.raises(MaskSpecError, match="needs --mask-file"):
        FileMask(0, 0).dense(torch.arange(3), torch.arange(3))
    with pytest.raises(MaskSpecError, match="does not exist"):
        FileMask(0, 0, str(tmp_path / "none.pt")).entry()
    bad = tmp_path / "bad.pt"
    torch.save({"x": 1}, bad)
    with pytest.raises(MaskSpecError, match="not a mask file"):
        FileMask(0, 0, str(bad)).entry()
    with pytest.raises(MaskSpecError, match="needs --mask-file"):
        build_encoder("transformer_local", dict(SMALL, attn_layout="[file*8]*6"))


def test_the_writer_writes_what_the_reader_reads(tmp_path):
    masks = {"0.0": {"matrix": torch.eye(3, dtype=torch.bool), "ends": True, "kind": "dam-s"},
             "1.2": {"matrix": torch.tensor([[1, 0], [1, 1]])}}  # 0/1 values, no 'ends'
    path = tmp_path / "masks.pt"
    write_mask_file(path, masks, layout="[file]", method="hard")
    data = torch.load(path, weights_only=True)
    assert data["format"] == MASK_FILE_FORMAT and data["layout"] == "[file]" and data["method"] == "hard"
    load_mask_file.cache_clear()
    loaded = load_mask_file(str(path))
    assert loaded.keys() == {"0.0", "1.2"} and loaded["0.0"]["ends"] and not loaded["1.2"]["ends"]
    assert torch.equal(loaded["0.0"]["matrix"], torch.eye(3, dtype=torch.bool))
    assert torch.equal(FileMask(1, 2, str(path)).dense(torch.arange(2), torch.arange(2)),
                       torch.tensor([[True, False], [True, True]]))
    bad = tmp_path / "bad.pt"
    with pytest.raises(MaskSpecError, match=r"entry '0.0': matrix of shape \(2, 3\) is not square"):
        write_mask_file(bad, {"0.0": {"matrix": torch.ones(2, 3)}})
    with pytest.raises(ValueError, match="cannot be given as info"):
        write_mask_file(bad, masks, format="other")
    assert not bad.exists()
