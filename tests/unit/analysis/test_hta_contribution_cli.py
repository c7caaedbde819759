"""``analyze hta`` in-process takes both contributions as Pascual et al. §3-4
define them: in its hta.json, layer 1's correlations of attention with the
previous-layer and with the input contribution are the same numbers (e^0 is
layer 1's input), for post-norm RoBERTa with an embedding LayerNorm,
pre-norm RoBERTa and pre-norm NMT."""

import json

import pytest

from fairseq_local_cli.main import main

from test_contribution import MODELS
from test_pairs_cli import command, stand_in


@pytest.mark.parametrize("name", ["roberta-post", "roberta-pre", "nmt-pre"])
def test_layer_one_correlations_agree_in_hta_json(tmp_path, monkeypatch, name):
    stand_in(monkeypatch, MODELS[name])
    text = tmp_path / "s.txt"
    text.write_text("the cat sat far away\ngo a dog ran\n")
    assert main(command("hta", tmp_path / "out", "--text", text, "--max-len", 24)) == 0
    r = json.loads((tmp_path / "out" / "hta.json").read_text())
    for stat in ("pearson", "spearman"):
        assert r[f"{stat}_previous"][0] == pytest.approx(r[f"{stat}_input"][0], abs=1e-5)
