"""The WMT'14 pipeline after data preparation, at tiny scale on fake archives:
train-wmt14.sh -> evaluate-wmt14.sh (checkpoint averaging, detokenised and
tokenised BLEU) -> paper_tables; the §5.1 batch arithmetic of --dry-run, the
sweep's command lists, and one-line errors."""

import csv
import json
import shlex
from pathlib import Path

import pytest
import torch

from helpers import TINY, run
from test_wmt_prepare import eval_set, make_raw, prepare

pytestmark = pytest.mark.slow  # end-to-end: every test runs fairseq or a pipeline

LETTERS = "abcdefghijkl"
# A few updates on the CPU, a checkpoint after each; short translations.
FAST = [*TINY, "--max-update", "3", "--update-freq", "1", "--save-interval-updates", "1"]
SHORT = ["--max-len-a", "0", "--max-len-b", "12"]


@pytest.fixture(scope="module")
def wmt(tmp_path_factory):
    """Prepared fake en-de data and runs/ with configs (a) and (i) trained and
    evaluated, (a) from the average of its last two checkpoints."""
    root = tmp_path_factory.mktemp("wmt_pipeline")
    data = root / "data"
    prepare("en-de", make_raw(root, "de"), data)
    runs = root / "runs"
    for config in ("a", "i"):
        run(["bash", "scripts/train-wmt14.sh", "en-de", config, "--gpus", "0", "--data", str(data),
             "--save-dir", str(runs / "wmt14_en-de" / config), "--", *FAST])
    evals = {
        "a": run(["bash", "scripts/evaluate-wmt14.sh", "en-de", str(runs / "wmt14_en-de" / "a"),
                  "--average", "2", "--data", str(data), "--", *SHORT]),
        "i": run(["bash", "scripts/evaluate-wmt14.sh", "en-de", str(runs / "wmt14_en-de" / "i"),
                  "--data", str(data), "--", *SHORT]),
    }
    return data, runs, evals


def dry_run(pair, *args, data=None):
    r = run(["bash", "scripts/train-wmt14.sh", pair, "a", "--dry-run", *(["--data", str(data)] if data else []), *args])
    return shlex.split(r.stdout)


def option(cmd, name):
    """The value of the last occurrence of ``name`` (fairseq takes the last)."""
    return [cmd[i + 1] for i, a in enumerate(cmd) if a == name][-1]


@pytest.fixture
def dict_only(tmp_path):
    (tmp_path / "dict.en.txt").write_text("a 1\n")
    return tmp_path


@pytest.mark.parametrize("pair, gpus, freq", [("en-de", 1, 8), ("en-de", 8, 1), ("en-ru", 1, 7), ("en-ru", 8, 1)])
def test_dry_run_batch_and_fp16(dict_only, pair, gpus, freq):
    cmd = dry_run(pair, "--gpus", str(gpus), data=dict_only)
    assert cmd[0] == "fairseq-train" and option(cmd, "--arch") == "transformer_local_baseline"
    assert option(cmd, "--update-freq") == str(freq) and option(cmd, "--max-tokens") == "4096"
    assert "--fp16" in cmd and "--cpu" not in cmd
    assert ("--distributed-world-size" in cmd) == (gpus > 1)
    if gpus > 1:
        assert option(cmd, "--distributed-world-size") == str(gpus)
    # train.sh's §5.1 defaults come through, and the run dir is runs/wmt14_<pair>/<letter>
    assert option(cmd, "--adam-betas") == "(0.9, 0.997)" and option(cmd, "--warmup-updates") == "16000"
    assert option(cmd, "--label-smoothing") == "0.1" and option(cmd, "--lr-scheduler") == "inverse_sqrt"
    assert option(cmd, "--save-dir").endswith(f"runs/wmt14_{pair}/a") and "--tensorboard-logdir" in cmd


def test_dry_run_cpu_max_tokens_and_overrides(dict_only):
    cmd = dry_run("en-de", "--gpus", "0", data=dict_only)
    assert "--cpu" in cmd and "--fp16" not in cmd and option(cmd, "--update-freq") == "8"
    cmd = dry_run("en-de", "--gpus", "8", "--max-tokens", "2048", data=dict_only)
    assert option(cmd, "--update-freq") == "2" and option(cmd, "--max-tokens") == "2048"  # ceil(32000 / 16384)
    cmd = dry_run("en-ru", "--gpus", "2", "--save-dir", "/x/y", data=dict_only)
    assert option(cmd, "--update-freq") == "4" and option(cmd, "--save-dir") == "/x/y"  # ceil(25000 / 8192)
    cmd = dry_run("en-de", "--gpus", "1", "--", "--update-freq", "3", "--lr", "7e-4", data=dict_only)
    assert option(cmd, "--update-freq") == "3" and option(cmd, "--lr") == "7e-4"  # after "--" wins
    r = run(["bash", "scripts/train-wmt14.sh", "en-ru", "transformer_local_half_tied", "--gpus", "1",
             "--data", str(dict_only), "--dry-run"])
    assert "--arch transformer_local_half_tied" in r.stdout and "runs/wmt14_en-ru/k " in r.stdout
    r = run(["bash", "scripts/train-wmt14.sh", "en-ru", "dam_s", "--gpus", "1", "--data", str(dict_only), "--dry-run"])
    assert "--arch transformer_dam_s" in r.stdout and "runs/wmt14_en-ru/transformer_dam_s " in r.stdout


def _updates(path: Path) -> int:
    return torch.load(path, map_location="cpu", weights_only=False)["optimizer_history"][-1]["num_updates"]


def test_train_and_evaluate(wmt):
    data, runs, evals = wmt
    a = runs / "wmt14_en-de" / "a"
    command = shlex.split((a / "command.sh").read_text())
    assert "--cpu" in command and "--fp16" not in command and option(command, "--update-freq") == "1"
    assert "num_updates 3" in (a / "train.log").read_text()

    # --average 2: the two checkpoints with the most updates, parameters averaged
    ckpts = sorted((p for p in a.glob("checkpoint*.pt")
                    if p.name not in ("checkpoint_best.pt", "checkpoint_last.pt", "checkpoint_avg2.pt")),
                   key=_updates)
    assert len(ckpts) >= 3 and [_updates(p) for p in ckpts[-2:]] == [2, 3]
    avg = torch.load(a / "checkpoint_avg2.pt", map_location="cpu", weights_only=False)
    newest, second = (torch.load(p, map_location="cpu", weights_only=False) for p in (ckpts[-1], ckpts[-2]))
    assert not torch.equal(newest["model"]["encoder.layers.0.self_attn.v_proj.weight"],
                           second["model"]["encoder.layers.0.self_attn.v_proj.weight"])
    assert avg["model"].keys() == newest["model"].keys()
    for key, value in avg["model"].items():
        if not torch.is_tensor(value):  # the encoder's signature, kept from the newest
            assert value == newest["model"][key], key
            continue
        assert torch.allclose(value, (newest["model"][key] + second["model"][key]) / 2, atol=1e-6), key
    assert avg["cfg"]["model"].arch == newest["cfg"]["model"].arch and _updates(a / "checkpoint_avg2.pt") == 3
    assert "checkpoint_avg2.pt" in evals["a"].stderr and "checkpoint_best.pt" in evals["i"].stderr

    _, raw_ref = eval_set("newstest2014", "de")
    tok_ref = (data / "tok" / "test.de").read_text().splitlines()
    for config in ("a", "i"):
        r = runs / "wmt14_en-de" / config
        # detokenised sacreBLEU against the raw newstest2014 reference of the sgm file
        assert (r / "test.ref").read_text() == raw_ref
        assert (r / "test.ref.source").read_text().strip().endswith("newstest2014-deen-ref.de.sgm")
        bleu = json.loads((r / "test.bleu.json").read_text())
        assert bleu["name"] == "BLEU" and "tok:13a" in bleu["signature"]
        hyp, tok_hyp = (r / "test.hyp").read_text().splitlines(), (r / "test.tok.hyp").read_text().splitlines()
        assert len(hyp) == len(tok_hyp) == 50
        assert not any("@@" in s or " @-@ " in s for s in hyp)
        # tokenised BLEU with compound splitting, on both sides
        tok = json.loads((r / "test.tok-bleu.json").read_text())
        assert tok["name"] == "BLEU" and "tok:none" in tok["signature"]
        split_ref = (r / "test.tok.ref.split").read_text().splitlines()
        assert len(split_ref) == len(tok_ref) == 50
        assert all(" ##AT##-##AT## " in s and "@-@" not in s for s in split_ref)
        assert split_ref[0] == tok_ref[0].replace(" @-@ ", " ##AT##-##AT## ")


def test_paper_table(wmt, tmp_path):
    _, runs, _ = wmt
    (runs / "wmt14_en-ru" / "transformer_dam_s").mkdir(parents=True)  # started, nothing produced
    (runs / "wmt14_en-ru" / "transformer_dam_s" / "command.sh").write_text("fairseq-train\n")
    (runs / "wmt14_en-de" / "slurm").mkdir()  # not a run
    md, csv_file = tmp_path / "t.md", tmp_path / "t.csv"
    r = run(["python", "-m", "fairseq_local_cli.tables", "--runs-root", str(runs),
             "--markdown", str(md), "--csv", str(csv_file)])
    with csv_file.open() as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == ["config", "paper name", "arch", "attn weights",
                             "en-de BLEU", "en-de tok BLEU", "en-ru BLEU"]
    assert [row["config"] for row in rows] == [f"({c})" for c in LETTERS] + ["transformer_dam_s"]
    assert rows[0]["paper name"] == "Baseline" and rows[8]["arch"] == "transformer_local_1lochead_7tiedloc_all6"
    assert rows[12]["paper name"].startswith("DAM_s")
    for row in rows:
        trained = row["config"] in ("(a)", "(i)")
        de = json.loads((runs / "wmt14_en-de" / row["config"].strip("()") / "test.bleu.json").read_text()) \
            if trained else None
        assert row["en-de BLEU"] == (f"{de['score']:.2f}" if trained else "-")
        assert (row["en-de tok BLEU"] != "-") == trained and (row["attn weights"] != "-") == trained
        assert row["en-ru BLEU"] == "-"
    a, i = (int(rows[k]["attn weights"].replace(",", "")) for k in (0, 8))
    assert a == 6 * 4 * 32 * 32 and i < a  # (i) ties Q/K across heads
    assert md.read_text().strip() in r.stdout
    assert "| (a) | Baseline | transformer_local_baseline |" in md.read_text()


def test_sweep_dry_run(tmp_path, dict_only):
    root = tmp_path / "runs"
    r = run(["bash", "scripts/sweep-wmt14.sh", "en-de", "--gpus", "8", "--data", str(dict_only),
             "--runs-root", str(root), "--dry-run", "--", "--seed", "5"])
    lines = r.stdout.splitlines()
    assert [s.split()[-1] for s in lines if s.startswith("# config")] == list(LETTERS)
    train = [shlex.split(s) for s in lines if s.startswith("fairseq-train")]
    assert len(train) == 12 and all(option(c, "--update-freq") == "1" and option(c, "--seed") == "5" for c in train)
    assert option(train[11], "--arch") == "transformer_local_fully_tied"
    evaluate = [s for s in lines if "evaluate-wmt14.sh" in s]
    assert len(evaluate) == 12 and str(root / "wmt14_en-de" / "l") in evaluate[11]

    r = run(["bash", "scripts/sweep-wmt14.sh", "en-ru", "--jobs", "slurm", "--gpus", "8", "--average", "5",
             "--configs", "a i", "--runs-root", str(root), "--sbatch-args", "--partition gpu", "--dry-run"])
    assert r.stdout.count("#SBATCH --gres=gpu:8") == 2 and "sbatch --partition gpu" in r.stdout
    assert "train-wmt14.sh en-ru i --gpus 8" in r.stdout and "--average 5" in r.stdout
    assert not root.exists()  # a dry run writes nothing


@pytest.mark.parametrize("cmd, message", [
    (["train-wmt14.sh", "en-fr", "a"], "unsupported language pair 'en-fr'"),
    (["train-wmt14.sh", "en-de", "zz"], "no configuration 'zz'"),
    (["train-wmt14.sh", "en-de"], "missing configuration"),
    (["evaluate-wmt14.sh", "de-en", "runs/x"], "unsupported language pair 'de-en'"),
    (["evaluate-wmt14.sh", "en-de", "/nonexistent/run"], "no run directory"),
    (["sweep-wmt14.sh", "en-xx"], "unsupported language pair 'en-xx'"),
    (["sweep-wmt14.sh", "en-de", "--configs", "a zz", "--dry-run"], "no configuration 'zz'"),
    (["sweep-wmt14.sh", "en-de", "--jobs", "pbs"], "--jobs must be sequential or slurm"),
])
def test_one_line_errors(cmd, message):
    r = run(["bash", f"scripts/{cmd[0]}", *cmd[1:]], check=False)
    assert r.returncode != 0 and r.stderr.strip().splitlines() == [r.stderr.strip()]
    assert r.stderr.startswith("error: ") and message in r.stderr


def test_average_needs_enough_checkpoints(wmt):
    data, runs, _ = wmt
    r = run(["bash", "scripts/evaluate-wmt14.sh", "en-de", str(runs / "wmt14_en-de" / "i"), "--average", "9",
             "--data", str(data)], check=False)
    last = r.stderr.strip().splitlines()[-1]
    assert r.returncode != 0 and last.startswith("error: cannot average 9 checkpoints") and "Traceback" not in r.stderr


@pytest.mark.parametrize("script, text", [("train-wmt14.sh", "--update-freq"), ("evaluate-wmt14.sh", "##AT##"),
                                          ("sweep-wmt14.sh", "sbatch")])
def test_help(script, text):
    r = run(["bash", f"scripts/{script}", "--help"])
    assert text in r.stdout and "set -euo" not in r.stdout
