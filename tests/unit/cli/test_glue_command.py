"""``fairseq-local glue``: GLUE metrics, submission files, and the GLUE
scripts' options and errors (the training itself: test_glue_pipeline.py)."""

import math
import struct

import pytest

from fairseq_local_cli import glue as cli
from fairseq_local_data import glue, glue_fake
from helpers import run


def test_metrics_of_known_predictions():
    gold = ["1", "1", "0", "0", "1", "0"]
    pred = ["1", "0", "0", "1", "1", "0"]  # TP 2, FN 1, FP 1, TN 2
    m = cli.compute_metrics("MRPC", gold, pred)
    assert m["accuracy"] == pytest.approx(4 / 6) and m["f1"] == pytest.approx(2 * 2 / (2 * 2 + 1 + 1))
    assert m["majority"] == pytest.approx(0.5)
    # Matthews: (TP TN - FP FN) / sqrt((TP+FP)(TP+FN)(TN+FP)(TN+FN)) = 3 / 9
    assert cli.compute_metrics("CoLA", gold, pred)["mcc"] == pytest.approx(1 / 3)
    assert list(cli.compute_metrics("SST-2", gold, pred)) == ["accuracy", "majority"]
    nli = cli.compute_metrics("MNLI", ["entailment", "neutral", "contradiction", "neutral"],
                              ["entailment", "neutral", "neutral", "neutral"])
    assert nli == {"accuracy": 0.75, "majority": 0.5}
    g, p = [0.0, 1.0, 2.0, 3.0, 5.0], [0.5, 1.0, 3.0, 2.5, 4.0]
    s = cli.compute_metrics("STS-B", [f"{x}" for x in g], [f"{x}" for x in p])
    mg, mp = sum(g) / 5, sum(p) / 5
    cov = sum((a - mg) * (b - mp) for a, b in zip(g, p))
    pearson = cov / math.sqrt(sum((a - mg) ** 2 for a in g) * sum((b - mp) ** 2 for b in p))
    assert s["pearson"] == pytest.approx(pearson)
    assert s["spearman"] == pytest.approx(1 - 6 * (0 + 0 + 1 + 1 + 0) / (5 * 24))  # ranks 1..5 vs 1,2,4,3,5
    with pytest.raises(glue.GlueError):
        cli.compute_metrics("SST-2", ["1"], [])


def test_every_task_reports_its_sets():
    assert [s for s, _, _ in cli.SETS["MNLI"]] == ["MNLI-m", "MNLI-mm", "AX"]
    names = [s for t in glue.TASKS for s, _, test in cli.SETS[t] if test]
    assert sorted(names) == sorted(["CoLA", "SST-2", "MRPC", "STS-B", "QQP", "MNLI-m", "MNLI-mm", "QNLI", "RTE",
                                    "WNLI", "AX"])  # GLUE's submission file names


def test_submission_file_and_table(tmp_path):
    cli.write_submission(str(tmp_path / "sub" / "RTE.tsv"), ["0", "1"], ["entailment", "not_entailment"])
    assert (tmp_path / "sub" / "RTE.tsv").read_text() == "index\tprediction\n0\tentailment\n1\tnot_entailment\n"
    with pytest.raises(glue.GlueError):
        cli.write_submission(str(tmp_path / "x.tsv"), ["0"], [])
    table = cli.format_table([{"task": "MNLI", "sets": {"MNLI-m": {"accuracy": 0.5, "majority": 0.4, "n": 10},
                                                       "MNLI-mm": {"accuracy": 0.25, "majority": 0.4, "n": 8}}}])
    assert table.splitlines()[2:] == ["| MNLI-m | accuracy | 50.0 | 40.0 | 10 |", "| MNLI-mm | accuracy | 25.0 | 40.0 | 8 |"]


def one_line_error(r, text):
    assert r.returncode != 0
    assert r.stderr.strip().splitlines() == [r.stderr.strip().splitlines()[-1]], r.stderr
    assert r.stderr.startswith("error: ") and text in r.stderr, r.stderr


@pytest.mark.slow  # starts a process
def test_cli_errors_are_one_line(tmp_path):
    one_line_error(run(["fairseq-local", "glue", "evaluate", "--task", "RTE", "--checkpoint", "x.pt",
                        "--data", str(tmp_path), "--glue-dir", str(tmp_path)], check=False), "no prepared RTE data")
    one_line_error(run(["fairseq-local", "glue", "evaluate", "--task", "RTE", "--checkpoint", "x.pt",
                        "--data", "d", "--glue-dir", "g", "--split", "test"], check=False), "needs --out")
    one_line_error(run(["fairseq-local", "glue", "evaluate", "--task", "XYZ"], check=False), "invalid choice")
    one_line_error(run(["fairseq-local", "glue", "table", str(tmp_path)], check=False), "no metric files")


@pytest.mark.parametrize("args, text", [
    (["--task", "RTE", "SST-2", "--checkpoint", "x.pt"], "use --runs for several tasks"),
    (["--task", "RTE"], "give --checkpoint (one task) or --runs"),
    (["--task", "RTE", "--checkpoint", "x.pt", "--runs", "r"], "give --checkpoint (one task) or --runs"),
])
def test_evaluate_takes_one_checkpoint_or_a_runs_folder(args, text, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["evaluate", *args, "--data", "d", "--glue-dir", "g"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.startswith("error: ") and text in err and err.count("\n") == 1, err


@pytest.mark.slow  # starts a process
def test_prepare_rejects_a_glue_folder_with_a_missing_task(tmp_path):
    glue_fake.make_fake_glue(str(tmp_path / "g"), ["SST-2", "CoLA"], rows=10)
    (tmp_path / "dict.txt").write_text("a 1\n")
    base = ["bash", "scripts/prepare-glue.sh", "--glue-dir", str(tmp_path / "g"), "--src-dict",
            str(tmp_path / "dict.txt"), "--bpe", "none", "--out", str(tmp_path / "bin")]
    one_line_error(run(base, check=False), "has no task folder 'MRPC'")  # default: all nine tasks
    one_line_error(run(base + ["--tasks", "SST-2 RTE"], check=False), "has no task folder 'RTE'")
    (tmp_path / "g" / "CoLA" / "dev.tsv").unlink()
    one_line_error(run(base + ["--tasks", "CoLA"], check=False), "missing CoLA/dev.tsv")
    one_line_error(run(base[:-4] + ["--bpe", "gpt2", "--bpe-model", str(tmp_path)], check=False), "encoder.json")
    assert not (tmp_path / "bin").exists()


def fake_bin(path, rows):
    """A TASK-bin folder as far as finetune-glue.sh reads it (dictionary, train size)."""
    (path / "input0").mkdir(parents=True)
    (path / "input0" / "dict.txt").write_text("a 1\n")
    (path / "input0" / "train.idx").write_bytes(b"MMIDIDX\x00\x00" + struct.pack("<QBQ", 1, 4, rows) + b"\x00" * 8)
    return path


def dry(*args):
    out = run(["bash", "scripts/finetune-glue.sh", "--save-dir", "s", "--dry-run", *args]).stdout.split()
    return {k: v for k, v in zip(out, out[1:]) if k.startswith("--")}, out


def fake_checkpoint(path, **model):
    import torch

    torch.save({"cfg": {"model": model}, "model": {}}, path)
    return str(path)


@pytest.mark.slow  # starts a process
def test_finetune_takes_arch_layout_and_positions_from_the_checkpoint(tmp_path):
    data = fake_bin(tmp_path / "SST-2-bin", 64)
    ckpt = fake_checkpoint(tmp_path / "c.pt", arch="roberta_band6", max_positions=128,
                           attn_layout="[band-6*12]*12", mask_mode="post")
    opts, out = dry("--data", str(data), "--checkpoint", ckpt)
    assert opts["--arch"] == "roberta_band6" and opts["--max-positions"] == "128"
    assert opts["--attn-layout"] == r"\[band-6\*12\]\*12" and opts["--mask-mode"] == "post"  # printf %q
    assert "--segment-embeddings" not in out
    seg = fake_checkpoint(tmp_path / "s.pt", arch="roberta_local_base", max_positions=128, segment_embeddings=True)
    assert "--segment-embeddings" in dry("--data", str(data), "--checkpoint", seg)[1]
    assert "--layernorm-eps" not in out and "--positions" not in out
    bert = fake_checkpoint(tmp_path / "b.pt", arch="roberta_local_base", max_positions=128, layernorm_eps=1e-12,
                           positions="absolute")
    opts, _ = dry("--data", str(data), "--checkpoint", bert)
    assert opts["--layernorm-eps"] == "1e-12" and opts["--positions"] == "absolute"
    opts, _ = dry("--data", str(data), "--checkpoint", ckpt, "--max-positions", "64")
    assert opts["--max-positions"] == "64"
    for args, message in [(["--arch", "roberta_local_base"], "error: --arch roberta_local_base differs from the "
                            "checkpoint's arch roberta_band6 (convert it with fairseq-local convert-roberta)"),
                          ([], f"error: '{__file__}' is not a fairseq checkpoint")]:
        c = ckpt if args else __file__
        r = run(["bash", "scripts/finetune-glue.sh", "--data", str(data), "--save-dir", "s", "--checkpoint", c,
                 "--dry-run", *args], check=False)
        assert r.returncode != 0 and r.stderr.strip() == message


@pytest.mark.slow  # starts a process
def test_finetune_recipes(tmp_path):
    rte = fake_bin(tmp_path / "RTE-bin", 2490)
    ckpt = fake_checkpoint(tmp_path / "c.pt", arch="roberta_local_base", max_positions=512)
    opts, out = dry("--data", str(rte), "--checkpoint", ckpt)
    # fairseq's published RTE schedule on the official training set
    assert opts["--lr"] == "2e-5" and opts["--batch-size"] == "16" and opts["--num-classes"] == "2"
    assert opts["--total-num-update"] == "2036" and opts["--warmup-updates"] == "122" and opts["--max-epoch"] == "10"
    assert opts["--arch"] == "roberta_local_base" and opts["--criterion"] == "sentence_prediction_with_sparsity"
    assert opts["--finetune-from-model"] == ckpt and "--fp16" in out and "--maximize-best-checkpoint-metric" in out
    assert opts["--max-positions"] == "512" and opts["--init-token"] == "0" and opts["--separator-token"] == "2"
    small = fake_bin(tmp_path / "MNLI-bin", 100)  # 10 epochs of 4 batches of 32, 6% warm-up
    opts, out = dry("--data", str(small), "--cpu", "--classification-head-name", "h", "--", "--seed", "7")
    assert opts["--num-classes"] == "3" and opts["--total-num-update"] == "40" and opts["--warmup-updates"] == "2"
    assert opts["--classification-head-name"] == "h" and "--cpu" in out and "--fp16" not in out
    assert out[-2:] == ["--seed", "7"]
    sts = fake_bin(tmp_path / "STS-B-bin", 32)
    opts, out = dry("--data", str(sts), "--recipe", "sparsebert")
    assert "--regression-target" in out and opts["--num-classes"] == "1" and "--best-checkpoint-metric" not in out
    assert opts["--lr"] == "2e-5" and opts["--weight-decay"] == "0.01" and opts["--max-epoch"] == "3"
    assert opts["--total-num-update"] == "3" and opts["--warmup-updates"] == "0"  # 3 epochs of 1 batch, 10%
    opts, out = dry("--data", str(small), "--recipe", "aaa", "--aaa-target", "0.9", "--arch", "roberta_aaa")
    assert opts["--max-update"] == "30000" and opts["--total-num-update"] == "30000" and opts["--update-freq"] == "4"
    assert opts["--aaa-target"] == "0.9" and opts["--aaa-alpha"] == "1.0" and opts["--aaa-alpha-updates"] == "15000"
    assert opts["--lr"] == "5e-5" and opts["--warmup-updates"] == "0" and "--max-epoch" not in opts
    opts, _ = dry("--data", str(small), "--recipe", "aaa", "--aaa-target", "0.5", "--aaa-schedule", "constant",
                  "--max-update", "100")
    assert opts["--aaa-alpha-updates"] == "0" and opts["--max-update"] == "100"


@pytest.mark.slow  # starts a process
def test_finetune_errors_are_one_line(tmp_path):
    data = fake_bin(tmp_path / "RTE-bin", 10)
    base = ["bash", "scripts/finetune-glue.sh", "--save-dir", "s", "--dry-run"]
    one_line_error(run(base + ["--data", str(data), "--recipe", "aaa"], check=False), "--aaa-target")
    one_line_error(run(base + ["--data", str(tmp_path)], check=False), "no GLUE task data")
    # (a dry run may name a checkpoint that pretraining has not written yet: sweep-table4.sh --dry-run)
    one_line_error(run(base[:-1] + ["--data", str(data), "--checkpoint", "nope.pt"], check=False), "no checkpoint")
    one_line_error(run(base + ["--data", str(data), "--recipe", "x"], check=False), "unknown --recipe")
    other = fake_bin(tmp_path / "Custom-bin", 10)
    one_line_error(run(base + ["--data", str(other)], check=False), "unknown GLUE task")
    assert "--num-classes 4" in run(base + ["--data", str(other), "--num-classes", "4"]).stdout
