"""Issue #19, "nothing lost", for ``results``, ``tables`` (also ``--bert``)
and ``analyze``: a table never replaces a checkpoint, an existing file
only with --force (unless the command wrote it), unwritable outputs and
bad run files (missing runs, truncated checkpoints, bad JSON) in one line."""

import json
from pathlib import Path
from typing import Dict, List

import pytest
import torch

from fairseq_local.analysis.dump import save_dump
from helpers.probes import bad_outputs, digest, one_line_error, run_command


def checkpoint(path: Path) -> Path:
    """A tiny hand-made fairseq checkpoint (arch and one attention weight)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"cfg": {"model": {"arch": "transformer_local_f"}},
                "model": {"encoder.layers.0.self_attn.q_proj.weight": torch.zeros(4, 4)}}, path)
    return path


@pytest.fixture
def env(tmp_path) -> Dict[str, Path]:
    """A results runs folder, a WMT'14 runs root, a Table 4 runs root, an
    analysis folder and a checkpoint X.pt outside them."""
    runs = tmp_path / "runs"
    checkpoint(runs / "a" / "checkpoint_best.pt")
    (runs / "a" / "test.bleu.json").write_text('{"score": 27.5}')
    (runs / "b").mkdir()
    wmt = tmp_path / "wmt"
    checkpoint(wmt / "wmt14_en-de" / "a" / "checkpoint_best.pt")
    (wmt / "wmt14_en-de" / "a" / "test.bleu.json").write_text('{"score": 26.1}')
    bert = tmp_path / "bert" / "roberta_band2" / "glue" / "eval"
    bert.mkdir(parents=True)
    (bert / "QNLI.json").write_text(json.dumps({"task": "QNLI", "sets": {"QNLI": {"accuracy": 0.6, "majority": 0.5,
                                                                                    "n": 10}}}))
    analysis = tmp_path / "model" / "analysis"
    analysis.mkdir(parents=True)
    (analysis / "bias.json").write_text(json.dumps({"local": [[4.0, 2.0]], "syntactic": [[1.0, 5.0]]}))
    out = tmp_path / "out"
    out.mkdir()
    return {"runs": runs, "wmt": wmt, "bert": tmp_path / "bert", "analysis": analysis,
            "ckpt": checkpoint(out / "X.pt"), "out": out}


# command -> its argv writing the table to PATH with FLAG (--csv or --markdown)
COMMANDS = {
    "results": lambda e, flag, path: ["results", e["runs"], flag, path],
    "tables": lambda e, flag, path: ["tables", "--runs-root", e["wmt"], flag, path],
    "tables --bert": lambda e, flag, path: ["tables", "--bert", "--runs-root", e["bert"], flag, path],
    "analyze table": lambda e, flag, path: ["analyze", "table", e["analysis"], flag, path],
}
CASES = [(c, f) for c in COMMANDS for f in ("--csv", "--markdown") if not (c == "analyze table" and f == "--csv")]


def argv(env, command: str, flag: str, path) -> List[str]:
    return COMMANDS[command](env, flag, path)


@pytest.mark.parametrize("command, flag", CASES)
def test_a_table_never_replaces_a_checkpoint(env, command, flag, capsys):
    before = digest([env["ckpt"]])
    for extra in ([], ["--force"]):
        status, _, err = run_command(capsys, argv(env, command, flag, env["ckpt"]) + extra)
        assert status == 1
        one_line_error(err, f"'{env['ckpt']}' is a fairseq checkpoint", "never replaced")
        assert digest([env["ckpt"]]) == before


@pytest.mark.parametrize("command, flag", CASES)
def test_another_file_needs_force_and_our_table_does_not(env, command, flag, capsys):
    notes = env["out"] / "notes.txt"
    notes.write_text("my notes\n")
    before = digest([notes])
    status, _, err = run_command(capsys, argv(env, command, flag, notes))
    assert status == 1
    one_line_error(err, f"'{notes}' exists", "--force")
    assert digest([notes]) == before
    status, out, _ = run_command(capsys, argv(env, command, flag, notes) + ["--force"])
    assert status == 0 and digest([notes]) != before
    table = notes.read_text()
    status, _, err = run_command(capsys, argv(env, command, flag, notes))  # its own output: replaced
    assert status == 0, err
    assert notes.read_text() == table and not list(env["out"].glob(".*tmp*"))


@pytest.mark.parametrize("command, flag", CASES)
def test_unwritable_outputs_are_one_line(env, tmp_path, command, flag, capsys):
    for case, path in bad_outputs(tmp_path, "t.out").items():
        before = digest([tmp_path])
        status, _, err = run_command(capsys, argv(env, command, flag, path))
        assert status == 1, case
        one_line_error(err, "cannot write")
        assert digest([tmp_path]) == before, case
        assert not Path(path).is_file(), case


def test_results_markdown_and_csv_are_checked_together(env, capsys):
    md, csv = env["out"] / "t.md", env["out"] / "t.csv"
    status, _, err = run_command(capsys, ["results", env["runs"], "--markdown", md, "--csv", env["ckpt"]])
    assert status == 1 and not md.exists()
    one_line_error(err, "fairseq checkpoint")
    status, _, _ = run_command(capsys, ["results", env["runs"], "--markdown", md, "--csv", csv])
    assert status == 0 and md.read_text().startswith("| config | arch |") and csv.read_text().startswith("config,")
    status, _, err = run_command(capsys, ["results", env["runs"], "--markdown", env["runs"] / "a" / "test.bleu.json",
                                          "--force"])
    assert status == 1
    one_line_error(err, "is an input of this command")


def test_results_names_missing_runs(env, capsys):
    status, out, err = run_command(capsys, ["results", env["runs"], "--runs", "a", "zz", "yy"])
    assert status == 1 and out == ""
    one_line_error(err, "'zz', 'yy'", f"'{env['runs']}'", "runs there: a, b")


def truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:100])


BAD_JSON = {"malformed": b'{"score": 1', "not UTF-8": b'\xff\xfe{"score": 1}', "a list": b"[27.5]",
            "no score": b'{"bleu": 27.5}'}


@pytest.mark.parametrize("problem", list(BAD_JSON))
@pytest.mark.parametrize("command", ["results", "tables"])
def test_bad_bleu_file_is_one_line(env, command, problem, capsys):
    run = env["runs"] / "a" if command == "results" else env["wmt"] / "wmt14_en-de" / "a"
    (run / "test.bleu.json").write_bytes(BAD_JSON[problem])
    status, _, err = run_command(capsys, argv(env, command, "--csv", env["out"] / "t.csv"))
    assert status == 1 and not (env["out"] / "t.csv").exists()
    line = one_line_error(err, f"'{run / 'test.bleu.json'}'")
    assert {"malformed": "malformed JSON", "not UTF-8": "not UTF-8", "a list": "a JSON list",
            "no score": "no numeric 'score'"}[problem] in line


@pytest.mark.parametrize("command", ["results", "tables"])
def test_truncated_checkpoint_is_one_line(env, command, capsys):
    run = env["runs"] / "a" if command == "results" else env["wmt"] / "wmt14_en-de" / "a"
    truncate(run / "checkpoint_best.pt")
    status, _, err = run_command(capsys, argv(env, command, "--markdown", env["out"] / "t.md"))
    assert status == 1 and not (env["out"] / "t.md").exists()
    one_line_error(err, f"'{run / 'checkpoint_best.pt'}'")


@pytest.mark.parametrize("problem", ["malformed", "not UTF-8", "a list"])
def test_bad_table4_metric_file_is_one_line(env, problem, capsys):
    path = env["bert"] / "roberta_band2" / "glue" / "eval" / "QNLI.json"
    path.write_bytes(BAD_JSON[problem])
    status, _, err = run_command(capsys, ["tables", "--bert", "--runs-root", env["bert"]])
    assert status == 1
    one_line_error(err, f"'{path}'")


@pytest.mark.parametrize("problem", ["malformed", "not UTF-8", "a list"])
def test_bad_analysis_json_is_one_line(env, problem, capsys):
    path = env["analysis"] / "hta.json"
    path.write_bytes(BAD_JSON[problem])
    md = env["out"] / "t.md"
    status, _, err = run_command(capsys, ["analyze", "table", env["analysis"], "--markdown", md])
    assert status == 1 and not md.exists()
    one_line_error(err, f"'{path}'")
    path.write_text('{"pearson_previous": "high"}')
    status, _, err = run_command(capsys, ["analyze", "table", env["analysis"]])
    assert status == 1
    one_line_error(err, f"'{path}'", "pearson_previous")


def test_analyze_table_header_follows_the_threshold(env, capsys):
    status, out, _ = run_command(capsys, ["analyze", "table", env["analysis"], "--threshold", "4"])
    header, _, row = out.splitlines()
    assert status == 0 and "| loc > 4 |" in header and "| syn > 4 |" in header and "> 3" not in header
    assert row == "| model | 1x2 | 3.000 | 0% | 3.000 | 50% | - | - | - | - | - | - | - |"
    status, out, _ = run_command(capsys, ["analyze", "table", env["analysis"], "--threshold", "2.5"])
    assert "| loc > 2.5 |" in out.splitlines()[0]


@pytest.fixture
def dump(tmp_path) -> Path:
    path = tmp_path / "attention.pt"
    attn = torch.full((1, 2, 3, 3), 1 / 3)
    save_dump([{"tokens": ["a", "b", "</s>"], "word_ids": [0, 1, -1], "words": ["a", "b"], "attn": attn}], str(path))
    return path


@pytest.mark.parametrize("action", ["bias", "sensitivity", "hta"])
def test_analysis_folder_that_cannot_be_written_is_one_line(tmp_path, dump, action, capsys):
    args = [dump] if action == "bias" else ["--path", tmp_path / "none.pt", "--text", tmp_path / "none.txt"]
    for case, path in bad_outputs(tmp_path, "out").items():
        if case in ("folder", "missing_parent"):
            continue  # an existing folder is the normal case; a missing one is created
        before = digest([tmp_path])
        status, _, err = run_command(capsys, ["analyze", action, *args, "--out", path])
        assert status == 1, case
        one_line_error(err, "analysis folder")
        assert digest([tmp_path]) == before, case


def test_analysis_folder_is_created_and_its_files_kept(tmp_path, dump, capsys):
    out = tmp_path / "new" / "analysis"
    status, _, err = run_command(capsys, ["analyze", "bias", dump, "--out", out, "--quiet"])
    assert status == 0, err
    names = sorted(p.name for p in out.iterdir())
    assert names == ["bias.json", "bias.md", "bias_heads.png", "bias_thresholds.png"]
    status, _, err = run_command(capsys, ["analyze", "bias", dump, "--out", out, "--quiet"])  # its own files
    assert status == 0, err
    (out / "bias_heads.png").write_text("my figure")
    before = digest([out])
    status, _, err = run_command(capsys, ["analyze", "bias", dump, "--out", out, "--quiet"])
    assert status == 1 and digest([out]) == before
    one_line_error(err, "bias_heads.png' exists", "--force")
    status, _, err = run_command(capsys, ["analyze", "bias", dump, "--out", tmp_path, "--quiet"])
    assert status == 0, err  # the dump's own folder: attention.pt is not an output
    assert (tmp_path / "bias.json").exists()
