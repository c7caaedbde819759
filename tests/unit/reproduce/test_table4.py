"""``fairseq-local tables --bert``: Pande et al. Table 4 from GLUE runs."""

import json

from fairseq_local_reproduce.table4 import PAPER, collect, columns
from fairseq_local_cli.tables import main


def write_eval(root, arch, task, sets):
    path = root / arch / "glue" / "eval"
    path.mkdir(parents=True, exist_ok=True)
    (path / f"{task}.json").write_text(json.dumps({"task": task, "sets": sets}))


def test_rows_measured_beside_the_paper(tmp_path):
    write_eval(tmp_path, "roberta_band6", "SST-2", {"SST-2": {"accuracy": 0.8125, "majority": 0.5, "n": 64}})
    write_eval(tmp_path, "roberta_band6", "MNLI", {"MNLI-m": {"accuracy": 0.5, "majority": 0.34, "n": 50},
                                                   "MNLI-mm": {"accuracy": 0.9, "majority": 0.34, "n": 50}})
    write_eval(tmp_path, "roberta_aaa", "SST-2", {"SST-2": {"accuracy": 0.75, "majority": 0.5, "n": 64}})
    rows = collect(tmp_path, ["SST-2", "MNLI"])
    assert [r["arch"] for r in rows] == ["roberta_local_base", "roberta_band2", "roberta_band6",
                                         "roberta_band6_all_tied", "roberta_band6_132_tied",
                                         "roberta_band6_120_tied", "roberta_aaa"]
    band6 = rows[2]
    assert band6["config"] == "All Band6 Untied"
    assert (band6["SST-2"], band6["SST-2 paper"], band6["SST-2 majority"]) == ("81.25", "90.65", "50.00")
    assert (band6["MNLI"], band6["MNLI paper"]) == ("50.00", "81.15")  # matched, as Table 4
    assert rows[0]["SST-2"] == "-" and rows[0]["SST-2 paper"] == "91.80"
    assert rows[-1]["config"] == "Adaptive Axis Attention" and rows[-1]["SST-2 paper"] == "-"
    assert columns(["SST-2"]) == ["config", "arch", "attn weights", "SST-2", "SST-2 paper", "SST-2 majority"]
    assert set(PAPER) - {"roberta_base"} == {r["arch"] for r in rows[:6]}
    # fairseq's own roberta_base, when run, is the first BERT-base row.
    write_eval(tmp_path, "roberta_base", "SST-2", {"SST-2": {"accuracy": 0.875, "majority": 0.5, "n": 64}})
    first = collect(tmp_path, ["SST-2"])[0]
    assert (first["config"], first["arch"], first["SST-2"], first["SST-2 paper"]) == \
        ("BERT-base (fairseq)", "roberta_base", "87.50", "91.80")


def test_cli(tmp_path, capsys):
    write_eval(tmp_path, "roberta_band2", "QNLI", {"QNLI": {"accuracy": 0.6, "majority": 0.5, "n": 10}})
    main(["--bert", "--runs-root", str(tmp_path), "--markdown", str(tmp_path / "t4.md")])
    out = capsys.readouterr().out
    assert "| All Band2 Untied | roberta_band2 | - | - | 90.05 | - | - | 89.75 | - | - | 80.60 | - | 60.00 | 88.30 | 50.00 |" in out
    assert (tmp_path / "t4.md").read_text().strip() == out.strip()
