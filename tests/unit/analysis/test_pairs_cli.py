"""``--pairs FILE.tsv [--columns A,B]`` of every command that runs a checkpoint
(``attention dump``, ``analyze sensitivity``, ``analyze hta``), in-process,
with the checkpoint loader standing in for a model built here; the pair dump
read by ``analyze bias`` and ``analyze roles``; one-line errors for bad pair
files and translation models; and ``analyze table --centres`` overlaying the
centres of mass of several hta results (Pascual et al. Fig. 4-5)."""

import json

import pytest

from fairseq_local.analysis.dump import load_dump
from fairseq_local.analysis.model import AnalysisModel
from fairseq_local_cli.main import main

from test_dump import nmt, roberta

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture()
def pairs(tmp_path):
    path = tmp_path / "pairs.tsv"
    path.write_text("the a\tcat go\ngo\ta dog ran\n", encoding="utf-8")
    return path


def stand_in(monkeypatch, build=roberta):
    """``AnalysisModel.load`` gives ``build()`` (no checkpoint is read)."""
    monkeypatch.setattr(AnalysisModel, "load", classmethod(lambda cls, *args, **kwargs: build()))


def command(name, out, *extra):
    """argv of one of the commands that run a checkpoint."""
    head = ["attention", "dump"] if name == "dump" else ["analyze", name]
    return [*head, "--path", "model.pt", "--bpe", "none", "--quiet", "--out", str(out), *map(str, extra)]


def one_line_error(capsys, argv) -> str:
    """Status 1 and one ``error:`` line (returned by main, or the command's own exit)."""
    try:
        status = main(argv)
    except SystemExit as e:
        status = e.code
    assert status == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    return err


def test_dump_of_pairs_and_the_readers_of_the_dump(tmp_path, pairs, monkeypatch, capsys):
    stand_in(monkeypatch)
    dump = tmp_path / "pairs.pt"
    assert main(command("dump", dump, "--pairs", pairs)) == 0
    assert "2 sentences, 2 layers x 4 heads" in capsys.readouterr().out
    rec = load_dump(str(dump))[1]
    assert rec["tokens"] == ["<s>", "go", "</s>", "</s>", "a", "do@@", "g", "ra@@", "n", "</s>"]
    assert rec["separator"] == [2, 3] and rec["sentence_ids"] == [-1, 0, -1, -1, 1, 1, 1, 1, 1, -1]
    assert rec["word_ids"] == [-1, 0, -1, -1, 1, 2, 2, 3, 3, -1] and rec["words"] == ["go", "a", "dog", "ran"]
    for action in ("bias", "roles"):
        out = tmp_path / action
        assert main(["analyze", action, str(dump), "--out", str(out), "--quiet"]) == 0
        assert (out / f"{action}.json").is_file()
    assert json.loads((tmp_path / "bias" / "bias.json").read_text())["sentences"] == 2


def test_glue_columns(tmp_path, monkeypatch, capsys):
    stand_in(monkeypatch)
    glue = tmp_path / "dev_matched.tsv"
    glue.write_text("index\tgenre\tsentence1\tsentence2\tgold_label\n0\tfiction\tthe a\tcat go\tneutral\n")
    assert main(command("dump", tmp_path / "d.pt", "--pairs", glue, "--columns", "sentence1,sentence2")) == 0
    (rec,) = load_dump(str(tmp_path / "d.pt"))
    assert rec["words"] == ["the", "a", "cat", "go"] and rec["separator"] == [4, 5]


@pytest.mark.parametrize("action", ["sensitivity", "hta"])
def test_analyses_accept_pairs(tmp_path, pairs, monkeypatch, capsys, action):
    stand_in(monkeypatch)
    out = tmp_path / action
    extra = ["--max-len", 24] if action == "hta" else []  # the head dimension is 4 here
    assert main(command(action, out, "--pairs", pairs, *extra)) == 0
    result = json.loads((out / f"{action}.json").read_text())
    assert result["sentences"] == 2
    if action == "sensitivity":  # pairs have no trees: no syntactic gamma
        assert all(v is None for row in result["syntactic"] for v in row)
        assert all(v is not None for row in result["local"] for v in row)
    else:
        assert result["skipped"] == 0 and result["max_len"] == 10 and len(result["contribution_centre"]) == 2
        assert (out / "hta_centres.png").read_bytes().startswith(PNG)


@pytest.mark.parametrize("name", ["dump", "sensitivity", "hta"])
@pytest.mark.parametrize("text,message", [
    ("one column only\n", "line 1: 1 tab-separated field(s), expected 2"),
    ("", "no sentence pairs"),
])
def test_bad_pair_files_are_one_line_errors(tmp_path, monkeypatch, capsys, name, text, message):
    stand_in(monkeypatch)
    bad = tmp_path / "bad.tsv"
    bad.write_text(text)
    out = tmp_path / ("d.pt" if name == "dump" else "out")
    assert message in one_line_error(capsys, command(name, out, "--pairs", bad))


def test_translation_models_and_columns_without_pairs(tmp_path, pairs, monkeypatch, capsys):
    stand_in(monkeypatch, nmt)
    err = one_line_error(capsys, command("dump", tmp_path / "d.pt", "--pairs", pairs))
    assert "sentence pairs need a RoBERTa model" in err
    text = tmp_path / "s.txt"
    text.write_text("the cat\n")
    err = one_line_error(capsys, command("hta", tmp_path / "h", "--text", text, "--columns", "a,b"))
    assert "--columns needs --pairs" in err
    with pytest.raises(SystemExit):  # --pairs and --text: argparse's one-line usage error
        main(command("dump", tmp_path / "d.pt", "--pairs", pairs, "--text", text))


def hta_folder(root, name, centres, contribution=True):
    folder = root / name / "analysis"
    folder.mkdir(parents=True)
    result = {"attention_centre": centres, "contribution_centre": [c + 1 for c in centres] if contribution else None}
    (folder / "hta.json").write_text(json.dumps(result))
    return folder


def test_table_centres_overlays_models(tmp_path, capsys):
    en = hta_folder(tmp_path, "en", [-0.5, 0.2, 0.9])
    de = hta_folder(tmp_path, "de", [-0.2, 0.4], contribution=False)
    empty = tmp_path / "no-hta"
    empty.mkdir()
    png = tmp_path / "centres.png"
    assert main(["analyze", "table", str(en), str(de), str(empty), "--centres", str(png)]) == 0
    out = capsys.readouterr().out
    assert f"centres: {png}" in out and "| en |" in out
    assert png.read_bytes().startswith(PNG)
    from fairseq_local_cli.analyze.table import read_hta_results

    assert [label for label, _ in read_hta_results([str(en), str(de), str(empty)])] == ["en", "de"]


def test_table_centres_errors(tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    err = one_line_error(capsys, ["analyze", "table", str(empty), "--centres", str(tmp_path / "c.png")])
    assert "none of the 1 folder(s) holds an hta.json" in err
    (empty / "hta.json").write_text('{"attention_centre": "x"}')
    err = one_line_error(capsys, ["analyze", "table", str(empty), "--centres", str(tmp_path / "c.png")])
    assert "is not a result of fairseq-local analyze hta" in err
    good = hta_folder(tmp_path, "m", [0.0, 1.0])
    err = one_line_error(capsys, ["analyze", "table", str(good), "--centres", str(tmp_path / "c.svg")])
    assert "give a FILE.png" in err
    (tmp_path / "notes.png").write_text("my notes")
    err = one_line_error(capsys, ["analyze", "table", str(good), "--centres", str(tmp_path / "notes.png")])
    assert "notes.png" in err and (tmp_path / "notes.png").read_text() == "my notes"


def test_importance_accepts_pairs(tmp_path, pairs, monkeypatch, capsys):
    stand_in(monkeypatch)
    out = tmp_path / "importance"
    assert main(command("importance", out, "--pairs", pairs, "--method", "lrp", "--positions", "all")) == 0
    assert json.loads((out / "importance.json").read_text())["sentences"] == 2


def test_hta_example_maps_of_pairs(tmp_path, pairs, monkeypatch, capsys):
    """Pascual et al. Fig. 7: attention above contribution, per chosen sentence."""
    stand_in(monkeypatch)
    out = tmp_path / "hta"
    assert main(command("hta", out, "--pairs", pairs, "--max-len", 24, "--examples", "1",
                        "--example-heads", "0:1,1:3")) == 0
    assert f"{out / 'hta_example_1.png'}" in capsys.readouterr().out
    assert (out / "hta_example_1.png").read_bytes().startswith(PNG) and not (out / "hta_example_0.png").exists()
    assert main(command("hta", tmp_path / "h2", "--pairs", pairs, "--max-len", 24, "--examples", "0,1",
                        "--no-input")) == 0  # previous-layer contribution, head 0 of every layer
    assert (tmp_path / "h2" / "hta_example_0.png").is_file() and (tmp_path / "h2" / "hta_example_1.png").is_file()


@pytest.mark.parametrize("extra,message", [
    (["--examples", "2"], "--examples 2: no such sentence of at most 24 tokens (2 read, 0 skipped)"),
    (["--examples", "a"], "give sentence numbers"),
    (["--examples", "0,0"], "names one twice"),
    (["--examples", "0", "--example-heads", "2:0"], "the model has 2 layers x 4 heads"),
    (["--examples", "0", "--example-heads", "1"], "give layer:head pairs"),
    (["--example-heads", "0:0"], "--example-heads needs --examples"),
])
def test_hta_example_errors(tmp_path, pairs, monkeypatch, capsys, extra, message):
    stand_in(monkeypatch)
    err = one_line_error(capsys, command("hta", tmp_path / "h", "--pairs", pairs, "--max-len", 24, *extra))
    assert message in err
