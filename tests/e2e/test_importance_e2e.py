"""``fairseq-local analyze importance`` on a trained tiny NMT checkpoint
(configuration (f), gated heads added): greedy targets with both methods and
the merge into an existing roles.json; reference targets with LRP only."""

import json
from pathlib import Path

import pytest

from helpers import run, train

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def checkpoint(tiny_data, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("importance-run")
    train(tiny_data, "transformer_local", out, "--attn-layout", "[global:gate,prev-1,next-1,band-2]*6",
          "--encoder-attention-heads", "4", "--max-update", "10", "--no-epoch-checkpoints")
    return out / "checkpoint_best.pt"


def test_greedy_both_methods_and_roles_merge(checkpoint, tiny_data, tmp_path):
    out = tmp_path / "analysis"
    out.mkdir()
    (out / "roles.json").write_text(json.dumps({"confidence": [[0.5] * 4] * 6}))
    r = run(["fairseq-local", "analyze", "importance", "--path", str(checkpoint), "--conllu",
             str(tiny_data / "raw" / "test.src.conllu"), "--max-sentences", "6", "--out", str(out)])
    result = json.loads((out / "importance.json").read_text())
    assert result["sentences"] == 6 and result["predictions"] >= 6
    for key, norm in (("lrp", lambda row: sum(row)), ("grad_gate", lambda row: sum(v * v for v in row) ** 0.5)):
        assert len(result[key]) == 6 and all(len(row) == 4 for row in result[key])
        assert all(norm(row) == pytest.approx(1.0) for row in result[key])
    assert result["spearman"] is None or -1 <= result["spearman"] <= 1
    roles = json.loads((out / "roles.json").read_text())
    assert roles["confidence"] == [[0.5] * 4] * 6 and roles["importance"] == result
    assert (out / "importance.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "| layer | head | LRP relevance | grad x gate |" in r.stdout


def test_references_with_lrp_only(checkpoint, tiny_data, tmp_path):
    raw = tiny_data / "raw"
    run(["fairseq-local", "analyze", "importance", "--path", str(checkpoint), "--text", str(raw / "test.src"),
         "--ref", str(raw / "test.tgt"), "--max-sentences", "4", "--method", "lrp", "--out", str(tmp_path)])
    result = json.loads((tmp_path / "importance.json").read_text())
    assert result["target"] == "reference translations" and result["grad_gate"] is None
    assert all(sum(row) == pytest.approx(1.0) for row in result["lrp"])
    assert not (tmp_path / "importance.png").exists()
