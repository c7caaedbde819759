"""``fairseq-local export``: progressive pruning and SparseBERT's random
baseline (§3.4) on DAM masks built by hand, and the command end to end on a
small hand-made checkpoint."""

import argparse

import pytest
import torch

from fairseq_local.attention.export import end_entries, export, prune_by_p
from fairseq_local_cli.export import main
from fairseq_local.attention.learned import DamMask

N = 12


def dam(structured: bool, seed: int, max_len: int = N) -> DamMask:
    """A DAM mask with α ~ N(0, 2²) set by hand (distinct values, so only a
    dam-s mask has ties: one α per offset)."""
    mask = DamMask(structured, max_len)
    g = torch.Generator().manual_seed(seed)
    mask.alpha.data.copy_(torch.randn(mask.alpha.shape, generator=g) * 2)
    return mask.eval()


@pytest.fixture
def heads():
    """Layer 0: dam-u, dam-s, and a second dam-u head with the same α as the
    first (a different head); layer 1 shares layer 0's DamMask objects (one α
    per head for all layers, SparseBERT's setting)."""
    u, s = dam(False, 0), dam(True, 1)
    u_twin = dam(False, 0)
    return {(0, 0): u, (0, 1): s, (0, 2): u_twin, (1, 0): u, (1, 1): s, (1, 2): u_twin}


def removed(entry) -> int:
    return int((~entry["matrix"]).sum())


@pytest.mark.parametrize("pct", [10.0, 37.5, 60.0, 95.0])
def test_random_pruning_removes_as_many_entries_as_p_pruning(heads, pct):
    by_p = export(heads, None, pct)
    at_random = export(heads, None, pct, prune_random=1)
    assert by_p.keys() == at_random.keys() == {f"{l}.{h}" for l, h in heads}
    for key in by_p:
        assert removed(at_random[key]) == removed(by_p[key]) > 0, key
        removable = (N - 2) ** 2 if by_p[key]["kind"] == "dam-s" else N * N
        if removed(by_p[key]) < removable:  # else both remove every removable entry
            assert not torch.equal(at_random[key]["matrix"], by_p[key]["matrix"])
        assert at_random[key]["matrix"].dtype == torch.bool and at_random[key]["matrix"].shape == (N, N)
        assert at_random[key]["kind"] == by_p[key]["kind"] and at_random[key]["ends"] == by_p[key]["ends"]
        assert by_p[key]["method"] == f"prune-{pct:g}"
        assert at_random[key]["method"] == f"prune-random-{pct:g}-s1"
    # dam-u: no ties, so exactly the requested share is dropped
    assert removed(by_p["0.0"]) == N * N - round(N * N * (1 - pct / 100))


def test_p_pruning_keeps_the_largest_entries_and_ties(heads):
    u, s = heads[(0, 0)], heads[(0, 1)]
    kept = prune_by_p(u, N, 60.0)
    p = u.matrix(N, "prob")
    assert p[kept].min() > p[~kept].max()
    kept = prune_by_p(s, N, 60.0)
    inner = kept[1:-1, 1:-1]
    assert torch.equal(inner[1:, 1:], inner[:-1, :-1])  # Toeplitz: whole diagonals kept or dropped
    assert kept[end_entries(N)].all()


def test_random_pruning_is_reproducible_and_differs_across_seeds_and_heads(heads):
    first, again = export(heads, None, 50.0, prune_random=7), export(heads, None, 50.0, prune_random=7)
    other = export(heads, None, 50.0, prune_random=8)
    for key in first:
        assert torch.equal(first[key]["matrix"], again[key]["matrix"])
        assert not torch.equal(first[key]["matrix"], other[key]["matrix"])
    # two heads with the same α: the same P-pruned mask, different random ones
    by_p = export(heads, None, 50.0)
    assert torch.equal(by_p["0.0"]["matrix"], by_p["0.2"]["matrix"])
    assert not torch.equal(first["0.0"]["matrix"], first["0.2"]["matrix"])
    # heads sharing α across layers share the P-pruned mask, and so the random one
    assert first["1.0"] is first["0.0"] and first["1.1"] is first["0.1"]


@pytest.mark.parametrize("pct", [30.0, 80.0, 99.0])
def test_dam_s_ends_stay_on(heads, pct):
    s = {(0, 0): heads[(0, 1)]}
    for entry in (export(s, None, pct)["0.0"], export(s, None, pct, prune_random=3)["0.0"]):
        m = entry["matrix"]
        assert m[end_entries(N)].all() and entry["ends"]
        assert int(m.sum()) >= 4 * N - 4
    # the cap: with its 4N - 4 end entries on, a dam-s head keeps at least those,
    # so 99 % asks for more than it can remove
    if pct == 99.0:
        assert int(export(s, None, pct)["0.0"]["matrix"].sum()) == 4 * N - 4


def test_shorter_export_length(heads):
    entry = export({(0, 0): heads[(0, 1)]}, 6, 50.0, prune_random=0)["0.0"]
    assert entry["matrix"].shape == (6, 6) and entry["matrix"][end_entries(6)].all()
    with pytest.raises(ValueError, match="exceeds the dam-[us] masks' maximum length"):
        export(heads, N + 1, 50.0, prune_random=0)


def test_prune_random_needs_prune(heads, capsys):
    with pytest.raises(ValueError, match="--prune-random needs --prune"):
        export(heads, None, None, prune_random=1)
    with pytest.raises(SystemExit) as e:
        main(["missing.pt", "--out", "x.pt", "--prune-random", "1"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --prune-random needs --prune PCT") and err.count("\n") == 1


@pytest.fixture
def checkpoint(tmp_path):
    """A fairseq-like checkpoint (options and state dict only) with dam-s and
    dam-u heads whose α are shared by both layers, plus a local head."""
    s, u = dam(True, 4, max_len=10), dam(False, 5, max_len=10)
    state = {}
    for layer in range(2):
        state[f"encoder.layers.{layer}.self_attn.learned.dam.0.alpha"] = s.alpha.data
        state[f"encoder.layers.{layer}.self_attn.learned.dam.1.alpha"] = u.alpha.data
    path = tmp_path / "checkpoint.pt"
    cfg = argparse.Namespace(arch="transformer_local", attn_layout="[dam-s,dam-u@a,band-1@a,global]*2")
    torch.save({"cfg": {"model": cfg}, "model": state}, path)
    return path


def test_cli_end_to_end(checkpoint, tmp_path, capsys):
    outputs = {}
    for method, args in [("prune-40", []), ("prune-random-40-s2", ["--prune-random", "2"])]:
        out = tmp_path / f"{method}.pt"
        main([str(checkpoint), "--out", str(out), "--prune", "40", *args])
        stdout = capsys.readouterr().out
        assert f"wrote 4 masks ({method}, mean density" in stdout and "at n=10)" in stdout
        assert f"realised pruned share ({method}, requested 40%): dam-s " in stdout
        assert "at most 64.0% with its end rows/columns on" in stdout and "; dam-u 40.0%" in stdout
        assert f"stage-2 options: --mask-file {out} --attn-layout '[file,file@a,band-1@a,global]*2'" in stdout
        outputs[method] = torch.load(out, weights_only=True)
        assert outputs[method]["method"] == method and outputs[method]["format"]
    by_p, at_random = outputs["prune-40"], outputs["prune-random-40-s2"]
    assert by_p.keys() == at_random.keys() and by_p["layout"] == at_random["layout"]
    assert by_p["masks"].keys() == at_random["masks"].keys() == {"0.0", "0.1", "1.0", "1.1"}
    for key, entry in by_p["masks"].items():
        assert entry.keys() == at_random["masks"][key].keys()
        assert removed(entry) == removed(at_random["masks"][key])
