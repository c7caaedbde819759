"""``fairseq-local analyze importance`` in-process on models built here (the
checkpoint loader stood in for): the files it writes, the table, the merge
into roles.json, --method lrp, --ref, and one-line errors."""

import json

import pytest
import torch

import fairseq_local_cli.analyze.importance as command
from fairseq_local.analysis.dump import prepare
from fairseq_local_cli.main import main

from test_dump import SENTENCES
from test_importance import nmt, roberta

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture()
def text(tmp_path):
    path = tmp_path / "src.txt"
    path.write_text("\n".join(" ".join(s.words) for s in SENTENCES) + "\n")
    return path


def stand_in(monkeypatch, build):
    """``load_inputs`` gives the model ``build()`` and the test sentences."""
    def load(args, max_len=None):
        m = build()
        items, skipped = prepare(m, SENTENCES)
        return m, items, skipped
    monkeypatch.setattr(command, "load_inputs", load)


def analyze(out, text, *extra):
    return main(["analyze", "importance", "--path", "model.pt", "--text", str(text), "--out", str(out), "--quiet",
                 *map(str, extra)])


def test_files_table_figure_and_roles_merge(tmp_path, text, monkeypatch, capsys):
    stand_in(monkeypatch, nmt)
    out = tmp_path / "analysis"
    out.mkdir()
    roles = {"roles": [["positional"] * 4] * 2, "confidence": [[0.5] * 4] * 2, "importance": {"old": 1}}
    (out / "roles.json").write_text(json.dumps(roles))
    assert analyze(out, text, "--max-len-b", "3") == 0
    assert capsys.readouterr().out.startswith(f"importance: {out / 'importance.json'} {out / 'importance.md'}")
    result = json.loads((out / "importance.json").read_text())
    assert list(result) == list(command.KEYS) and result["sentences"] == 3 and result["skipped"] == 0
    lrp, grad = torch.tensor(result["lrp"], dtype=torch.float64), torch.tensor(result["grad_gate"], dtype=torch.float64)
    assert lrp.shape == grad.shape == (2, 4)
    torch.testing.assert_close(lrp.sum(-1), torch.ones(2, dtype=torch.float64))
    torch.testing.assert_close(grad.norm(dim=-1), torch.ones(2, dtype=torch.float64))
    assert result["target"].startswith("greedy translations") and "AH-rule" in result["rule"]
    merged = json.loads((out / "roles.json").read_text())
    assert merged == dict(roles, importance=result)  # every other key kept
    table = (out / "importance.md").read_text()
    assert table == command.importance_table(result)
    lines = table.splitlines()
    assert lines[0] == "| layer | head | LRP relevance | grad x gate |" and len(lines) == 2 + 8 + 2
    assert lines[2] == f"| 0 | 0 | {result['lrp'][0][0]:.4f} | {result['grad_gate'][0][0]:.4f} |"
    assert lines[-1].startswith(f"3 sentences, {result['predictions']} predictions; Spearman rho ")
    data = (out / "importance.png").read_bytes()
    assert data.startswith(PNG) and len(data) > 1000
    assert analyze(out, text, "--max-len-b", "3") == 0  # its own outputs are replaced without --force


def test_lrp_only_on_roberta_writes_no_figure(tmp_path, text, monkeypatch):
    stand_in(monkeypatch, roberta)
    out = tmp_path / "r"
    assert analyze(out, text, "--method", "lrp", "--positions", "all") == 0
    result = json.loads((out / "importance.json").read_text())
    assert result["grad_gate"] is None and result["spearman"] is None and result["grad_loss"] is None
    assert result["target"] == "masked-LM head at every word piece (unmasked)"
    assert result["predictions"] == 6 + 9 + 1  # the word pieces: th@@ e ca@@ t sa@@ t, a do@@ g ..., go
    assert not (out / "importance.png").exists() and not (out / "roles.json").exists()
    assert (out / "importance.md").read_text().splitlines()[2].endswith(" | - |")


def test_references_are_read_line_by_line(tmp_path, text, monkeypatch):
    stand_in(monkeypatch, nmt)
    ref = tmp_path / "ref.txt"
    ref.write_text("the cat\n\ngo\na\n")  # blank lines skipped, as in --text
    assert analyze(tmp_path / "a", text, "--ref", ref, "--method", "grad") == 0
    result = json.loads((tmp_path / "a" / "importance.json").read_text())
    assert result["target"] == "reference translations" and result["lrp"] is None and result["predictions"] == 5 + 2 + 2


def one_line_error(capsys, argv) -> str:
    try:
        status = main(argv)
    except SystemExit as e:
        status = e.code
    err = capsys.readouterr().err
    assert status == 1 and err.startswith("error: ") and err.count("\n") == 1, err
    return err


def test_bad_inputs_are_one_line_errors(tmp_path, text, monkeypatch, capsys):
    stand_in(monkeypatch, nmt)
    base = ["analyze", "importance", "--path", "model.pt", "--text", str(text), "--quiet"]
    ref = tmp_path / "ref.txt"
    ref.write_text("one line\n")
    err = one_line_error(capsys, base + ["--out", str(tmp_path / "a"), "--ref", str(ref)])
    assert "--ref has 1 sentences" in err and not (tmp_path / "a" / "importance.json").exists()
    err = one_line_error(capsys, base + ["--out", str(tmp_path / "b"), "--head", "sst"])
    assert "--head is for RoBERTa" in err
    out = tmp_path / "c"
    out.mkdir()
    (out / "roles.json").write_text("[1, 2]")
    err = one_line_error(capsys, base + ["--out", str(out)])
    assert "roles.json" in err and "--force" in err
    err = one_line_error(capsys, base + ["--out", str(out), "--force"])
    assert "is not a JSON object" in err and (out / "roles.json").read_text() == "[1, 2]"
    assert not (out / "importance.json").exists()


def test_outputs_name_every_file(tmp_path):
    import argparse

    p = argparse.ArgumentParser()
    command.add_arguments(p)
    args = p.parse_args(["--path", "x.pt", "--text", "t.txt"])
    args.out = str(tmp_path)
    names = [str(o.path).rsplit("/", 1)[1] for o in command.outputs(args)]
    assert names == ["importance.json", "importance.md", "roles.json", "importance.png"]
    args.method = "grad"
    assert len(command.outputs(args)) == 3
