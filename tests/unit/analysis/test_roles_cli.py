"""``fairseq-local analyze roles`` in-process on a hand-made dump: the files
it writes, the table, a kept ``importance`` key, --counts, and one-line errors."""

import json

import pytest

from fairseq_local.analysis.dump import save_dump
from fairseq_local.analysis.roles import head_roles
from fairseq_local.analysis.roles_figures import roles_table
from fairseq_local_cli.main import main

from test_roles import rare_records, syntax_records

PNG = b"\x89PNG\r\n\x1a\n"


def one_line_error(capsys, argv, code=1) -> str:
    with pytest.raises(SystemExit) as e:
        main(argv)
    err = capsys.readouterr().err
    assert e.value.code == code and err.startswith("error: ") and err.count("\n") == 1, err
    return err


@pytest.fixture()
def dump(tmp_path):
    records = syntax_records()
    counts = [[9, 3, 4, 5, 1], [2, 8, 7, 1], [6, 2, 7, 1], [2, 5, 8, 1]]  # the rarest: do@@, dogs, see, dogs
    for r, c in zip(records, counts):
        r["counts"], r["ranks"] = c, [10 - v for v in c]
    save_dump(records, str(tmp_path / "d.pt"))
    return tmp_path / "d.pt", records


def test_files_json_and_table(dump, tmp_path, capsys):
    path, records = dump
    out = tmp_path / "roles"
    assert main(["analyze", "roles", str(path), "--out", str(out), "--quiet", "--rare-top", "0"]) == 0
    stdout = capsys.readouterr().out
    assert stdout.startswith(f"roles: {out / 'roles.json'} {out / 'roles.md'} {out / 'roles.png'}")
    result = json.loads((out / "roles.json").read_text())
    assert result == json.loads(json.dumps(head_roles(records, rare_top=0)))
    assert result["roles"] == [["syntactic", "positional"]] and result["rare_sentences"] == 4
    table = (out / "roles.md").read_text()
    assert table == roles_table(result)
    lines = table.splitlines()
    assert lines[0].startswith("| layer | head | role | confidence |")
    # head 0: offset 0 in 4 of its 13 rows; its largest margin is s→v (100 against 50)
    assert lines[2] == "| 0 | 0 | syntactic | 1.000 | 0 | 30.8 | nsubj s→v | 100.0 | 50.0 | 0.0 | 13 |"
    # prev-1: margins 0 on nsubj v→s and obj o→v, the first kept; it points at no single token
    assert lines[3] == "| 0 | 1 | positional | 1.000 | -1 | 100.0 | nsubj v→s | 75.0 | 75.0 | 0.0 | 9 |"
    assert "| nsubj v→s | 4 | -1 | 75.0 | L0 H0 | 100.0 |" in lines
    assert "| obj o→v | 1 | -1 | 100.0 | L0 H1 | 100.0 |" in lines
    assert "| amod noun→adj | 0 | – | – | – | – |" in lines
    for png in ("roles.png", "roles_syntactic.png"):
        data = (out / png).read_bytes()
        assert data.startswith(PNG) and len(data) > 1000


def test_a_rerun_keeps_importance_and_counts_override(dump, tmp_path, capsys):
    path, records = dump
    out = tmp_path / "roles"
    main(["analyze", "roles", str(path), "--out", str(out), "--quiet"])
    result = json.loads((out / "roles.json").read_text())
    assert result["rare_top"] == 500 and result["rare_sentences"] == 0
    result["importance"] = {"lrp": [[0.5, 0.5]]}
    result["confidence"] = "stale"
    (out / "roles.json").write_text(json.dumps(result))
    counts = tmp_path / "dict.txt"
    counts.write_text("the 9\ndo@@ 1\ndogs 2\n")
    assert main(["analyze", "roles", str(path), "--out", str(out), "--quiet", "--counts", str(counts),
                 "--rare-top", "0"]) == 0
    again = json.loads((out / "roles.json").read_text())
    assert again["importance"] == {"lrp": [[0.5, 0.5]]} and again["confidence"] == [[1.0, 1.0]]
    assert again["rare_share"] == head_roles(records, {"the": 9, "do@@": 1, "dogs": 2}, rare_top=0)["rare_share"]


def test_one_line_errors(dump, tmp_path, capsys):
    path, _ = dump
    (tmp_path / "bad.pt").write_bytes(b"\x00garbage")
    err = one_line_error(capsys, ["analyze", "roles", str(tmp_path / "bad.pt"), "--out", str(tmp_path / "o")])
    assert "is not an attention dump" in err
    err = one_line_error(capsys, ["analyze", "roles", str(path), "--out", str(tmp_path / "o"), "--counts",
                                  str(tmp_path / "missing.txt")])
    assert "cannot read the counts file" in err
    err = one_line_error(capsys, ["analyze", "roles", str(path), "--out", str(tmp_path / "o"), "--rare-top", "-1"])
    assert "--rare-top must be 0 or more" in err
    save_dump(rare_records()[:1], str(tmp_path / "other.pt"))
    (tmp_path / "foreign").mkdir()
    (tmp_path / "foreign" / "roles.json").write_text('{"other": 1}')
    assert main(["analyze", "roles", str(tmp_path / "other.pt"), "--out", str(tmp_path / "foreign")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "roles.json" in err and err.count("\n") == 1


def test_analyze_lists_roles_and_importance(capsys):
    with pytest.raises(SystemExit) as e:
        main(["analyze", "--help"])
    out = capsys.readouterr().out
    assert e.value.code == 0 and "{bias,sensitivity,hta,roles,importance,table}" in out
    assert "roles DUMP.pt --out DIR [--counts FILE] [--rare-top 500]" in out and "\nimportance --path CKPT" in out
    with pytest.raises(SystemExit):
        main(["analyze", "roles", "--help"])
    assert "--rare-top N" in capsys.readouterr().out
