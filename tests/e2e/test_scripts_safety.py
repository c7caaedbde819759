"""Issue #19, "Nothing lost", for the pipeline scripts: a bad input or output
is one ``error:`` line before anything is written (dry runs included), a run
is never resumed as another model, and every analysis step redoes its work
when one of its inputs or options changes."""

import json
from pathlib import Path

import pytest

from helpers import TINY, run, train
from helpers.probes import digest, one_line_error

pytestmark = pytest.mark.slow  # runs the scripts and commands as processes

UPDATES = ["--max-update", "10", "--no-epoch-checkpoints"]


def script(name, *args):
    return run(["bash", f"scripts/{name}", *map(str, args)], check=False)


def refused(r, *needles):
    assert r.returncode == 1 and r.stdout == "", r.stdout
    return one_line_error(r.stderr, *needles)


def fake_checkpoint(path: Path, task: str, **model) -> Path:
    import torch

    torch.save({"cfg": {"model": {"_name": model.get("arch"), **model}, "task": {"_name": task}}, "model": {}}, path)
    return path


@pytest.fixture
def dict_only(tmp_path) -> Path:
    """A data folder as far as train.sh and generate.sh look before running fairseq."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "dict.src.txt").write_text("a 1\n")
    (data / "dict.tgt.txt").write_text("a 1\n")
    (data / "test.src-tgt.src.idx").write_bytes(b"")
    return data


@pytest.fixture
def places(tmp_path) -> dict:
    """Output paths that must be refused: under /proc, a regular file, under one."""
    (tmp_path / "afile").write_text("x")
    return {"proc": "/proc/fairseq-local-x", "file": tmp_path / "afile", "under_file": tmp_path / "afile" / "x"}


def unchanged_tree(root: Path):
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


# ------------------------------------------------------------------ train.sh
def test_train_resolves_config_names_and_refuses_unknown_ones(dict_only, tmp_path):
    save = tmp_path / "run"
    r = script("train.sh", "--data", dict_only, "--arch", "f", "--save-dir", save, "--dry-run")
    assert r.returncode == 0 and "--arch transformer_local_8lochead_all6 " in r.stdout
    r = script("train.sh", "--data", dict_only, "--arch", "transformer_local", "--save-dir", save, "--dry-run")
    assert r.returncode == 0 and "--arch transformer_local " in r.stdout  # a registered arch stays as it is
    for dry in ([], ["--dry-run"]):
        refused(script("train.sh", "--data", dict_only, "--arch", "zz", "--save-dir", save, *dry),
                "no configuration 'zz'")
    assert not save.exists()
@pytest.mark.parametrize("case", ["proc", "file", "under_file", "data", "holds_data"])
def test_train_refuses_bad_save_dirs(dict_only, places, tmp_path, case):
    save = {"data": dict_only, "holds_data": tmp_path, **places}[case]
    before = digest([tmp_path])
    for dry in (["--dry-run"], []):
        refused(script("train.sh", "--data", dict_only, "--arch", "a", "--save-dir", save, *dry), str(save))
    assert digest([tmp_path]) == before
    # a run folder inside the data folder is harmless (no data file is written
    # there), and tests/e2e/test_wmt_pipeline.py's dry runs keep runs there
    r = script("train.sh", "--data", dict_only, "--arch", "a", "--save-dir", dict_only / "run", "--dry-run")
    assert r.returncode == 0 and not (dict_only / "run").exists()


# ------------------------------------------------------- generate.sh


@pytest.mark.parametrize("case, needle", [
    ("beam", "--beam must be a whole number"),
    ("truncated", "is not a fairseq checkpoint"),
    ("roberta", "is a masked_lm checkpoint (arch roberta_band6), not a translation model"),
    ("out_file", "exists and is not a folder"),
    ("out_proc", "under /proc"),
    ("out_data", "is the input"),
    ("ref_is_output", "is the input"),
])
def test_generate_bad_inputs_are_one_line(dict_only, tmp_path, case, needle):
    nmt = fake_checkpoint(tmp_path / "nmt.pt", "translation", arch="transformer_local_baseline")
    out, ckpt, extra = tmp_path / "out", nmt, []
    if case == "beam":
        extra = ["--beam", "0"]
    elif case == "truncated":
        ckpt = tmp_path / "truncated.pt"
        ckpt.write_bytes(nmt.read_bytes()[:100])
    elif case == "roberta":
        ckpt = fake_checkpoint(tmp_path / "roberta.pt", "masked_lm", arch="roberta_band6")
    elif case == "out_file":
        out = nmt
    elif case == "out_proc":
        out = "/proc/fairseq-local-x"
    elif case == "out_data":
        out = dict_only
    elif case == "ref_is_output":
        out.mkdir()
        (out / "test.hyp").write_text("a reference\n")
        extra = ["--ref", out / "test.hyp"]
    before = digest([tmp_path])
    refused(script("generate.sh", "--data", dict_only, "--checkpoint", ckpt, "--out", out, *extra), needle)
    assert digest([tmp_path]) == before


# ---------------------------------------------------- finetune-glue.sh


def glue_bin(path: Path, rows: int = 64) -> Path:
    import struct

    (path / "input0").mkdir(parents=True)
    (path / "input0" / "dict.txt").write_text("a 1\n")
    (path / "input0" / "train.idx").write_bytes(b"MMIDIDX\x00\x00" + struct.pack("<QBQ", 1, 4, rows) + b"\x00" * 8)
    return path
def test_finetune_refuses_a_translation_checkpoint(tmp_path):
    data = glue_bin(tmp_path / "SST-2-bin")
    nmt = fake_checkpoint(tmp_path / "nmt.pt", "translation", arch="transformer_local_8lochead_all6")
    for dry in (["--dry-run"], ["--cpu"]):
        refused(script("finetune-glue.sh", "--data", data, "--save-dir", tmp_path / "s", "--checkpoint", nmt, *dry),
                f"'{nmt}' is a translation checkpoint (arch transformer_local_8lochead_all6), not a RoBERTa model")
    assert not (tmp_path / "s").exists()
def test_finetune_builds_the_checkpoints_model_size(tmp_path):
    data = glue_bin(tmp_path / "SST-2-bin")
    ckpt = fake_checkpoint(tmp_path / "small.pt", "masked_lm", arch="roberta_band6", max_positions=128,
                           encoder_layers=2, encoder_embed_dim=32, encoder_ffn_embed_dim=64,
                           encoder_attention_heads=4, attn_layout="[band-6*4]*2", mask_mode="post")
    r = script("finetune-glue.sh", "--data", data, "--save-dir", tmp_path / "s", "--checkpoint", ckpt, "--dry-run")
    assert r.returncode == 0, r.stderr
    cmd = r.stdout.split()
    opts = {k: v for k, v in zip(cmd, cmd[1:]) if k.startswith("--")}
    assert opts["--encoder-layers"] == "2" and opts["--encoder-embed-dim"] == "32"
    assert opts["--encoder-ffn-embed-dim"] == "64" and opts["--encoder-attention-heads"] == "4"
    assert opts["--max-positions"] == "128" and opts["--arch"] == "roberta_band6"
@pytest.mark.parametrize("case", ["proc", "file", "under_file", "data", "ckpt_in_save"])
def test_finetune_refuses_bad_save_dirs(tmp_path, places, case):
    data = glue_bin(tmp_path / "SST-2-bin")
    (tmp_path / "pre").mkdir()
    ckpt = fake_checkpoint(tmp_path / "pre" / "checkpoint_last.pt", "masked_lm", arch="roberta_band6")
    save = {"data": data, "ckpt_in_save": tmp_path / "pre", **places}[case]
    before = digest([tmp_path])
    for dry in (["--dry-run"], ["--cpu"]):
        refused(script("finetune-glue.sh", "--data", data, "--save-dir", save, "--checkpoint", ckpt, *dry), str(save))
    assert digest([tmp_path]) == before


# ------------------------------------------------------ pretrain-bert.sh


@pytest.mark.parametrize("option, value", [("--updates", "-5"), ("--updates-512", "x"), ("--batch-size", "0"),
                                           ("--warmup", "1.5")])
def test_pretrain_bad_numbers_name_their_option(option, value):
    refused(script("pretrain-bert.sh", "roberta_band6", option, value, "--dry-run"), f"{option} must be", value)
def test_pretrain_refuses_bad_save_dirs(tmp_path, places):
    data = tmp_path / "corpus"
    data.mkdir()
    (data / "dict.txt").write_text("a 1\n")
    for save in [*places.values(), data, tmp_path]:
        refused(script("pretrain-bert.sh", "roberta_band6", "--data", data, "--save-dir", save, "--dry-run"), str(save))
    assert unchanged_tree(data) == ["dict.txt"]


# ------------------------------------------------- --bpe-model checks
def test_non_utf8_bpe_models_are_one_line(tmp_path):
    bad = tmp_path / "bad.model"
    bad.write_bytes(b"\xff\xfe\x00not a model\xc3")
    gpt2 = tmp_path / "gpt2"
    gpt2.mkdir()
    (gpt2 / "encoder.json").write_bytes(b"\xff\xfe{}")
    (gpt2 / "vocab.bpe").write_text("#version\n")
    glue = tmp_path / "glue"
    (glue / "RTE").mkdir(parents=True)
    dict_txt = tmp_path / "dict.txt"
    dict_txt.write_text("a 1\n")
    out = tmp_path / "out"
    refused(script("prepare-glue.sh", "--glue-dir", glue, "--src-dict", dict_txt, "--bpe", "sentencepiece",
                   "--bpe-model", bad, "--tasks", "RTE", "--out", out), f"--bpe-model '{bad}'", "not a SentencePiece")
    refused(script("prepare-glue.sh", "--glue-dir", glue, "--src-dict", dict_txt, "--bpe", "gpt2",
                   "--bpe-model", gpt2, "--tasks", "RTE", "--out", out), "encoder.json", "not UTF-8")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "checkpoint_best.pt").write_bytes(b"x")
    conllu = tmp_path / "s.conllu"
    conllu.write_text("1\ta\n")
    refused(script("analyze.sh", run_dir, "--data", tmp_path, "--conllu", conllu, "--",
                   "--bpe", "sentencepiece", "--bpe-model", bad), "not a SentencePiece")
    assert not out.exists() and not (run_dir / "analysis").exists()


# ---------------------------------------------- output folders of the other scripts
def test_prepare_and_binarize_outputs(tmp_path, places):
    raw, wmt_raw, glue, books, dict_txt = (tmp_path / n for n in ("raw", "wmt-raw", "glue", "books.zip", "dict.txt"))
    for folder in (raw, wmt_raw, glue / "RTE", tmp_path / "o" / "bpe"):
        folder.mkdir(parents=True)
    for split in ("train", "valid", "test"):
        for lang in ("src", "tgt"):
            for folder in (raw, tmp_path / "o" / "bpe"):
                (folder / f"{split}.{lang}").write_text("a b\n")
    dict_txt.write_text("a 1\n")
    books.write_bytes(b"PK")
    before = digest([tmp_path])
    for out in [*places.values(), raw, raw / "x"]:
        refused(script("bpe-binarize.sh", "--raw", raw, "--out", out), str(out))
    # OUT may hold RAW (prepare-synthetic.sh's OUT/raw), but not in OUT/bpe, which is written here
    refused(script("bpe-binarize.sh", "--raw", tmp_path / "o" / "bpe", "--out", tmp_path / "o"), "is the input")
    for out in places.values():
        refused(script("prepare-synthetic.sh", "--out", out), str(out))
    for out in [*places.values(), wmt_raw, wmt_raw / "out"]:
        refused(script("prepare-wmt14.sh", "en-de", "--raw-dir", wmt_raw, "--out", out), str(out))
    for out in [*places.values(), glue, glue / "bin"]:
        refused(script("prepare-glue.sh", "--glue-dir", glue, "--src-dict", dict_txt, "--bpe", "none",
                       "--tasks", "RTE", "--out", out), str(out))
    for out in places.values():
        refused(script("prepare-bert-corpus.sh", "--gutenberg", books, "--out", out), str(out))
    refused(script("prepare-bert-corpus.sh", "--gutenberg", books, "--out", tmp_path, "--bpe", "gpt2",
                   "--srcdict", dict_txt), "dict.txt")  # OUT/dict.txt would be the --srcdict
    assert digest([tmp_path]) == before
def test_evaluate_outputs(tmp_path, places):
    runs = tmp_path / "runs"
    (runs / "RTE").mkdir(parents=True)
    (runs / "RTE" / "checkpoint_best.pt").write_bytes(b"x")
    data, glue = tmp_path / "bin", tmp_path / "glue"
    data.mkdir()
    glue.mkdir()
    wmt = tmp_path / "wmt"
    (wmt / "tok").mkdir(parents=True)
    (wmt / "summary.json").write_text("{}")
    (wmt / "tok" / "test.de").write_text("a\n")
    before = digest([tmp_path])
    for out in [*places.values(), runs, tmp_path, runs / "RTE", runs / "RTE" / "eval", data, glue]:
        refused(script("evaluate-glue.sh", "--runs", runs, "--data", data, "--glue-dir", glue, "--out", out), str(out))
    for run_dir in (wmt, wmt / "tok"):
        refused(script("evaluate-wmt14.sh", "en-de", run_dir, "--data", wmt), "give another output path")
    assert digest([tmp_path]) == before
def test_analyze_outputs(tmp_path, places):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "checkpoint_best.pt").write_bytes(b"x")
    data = tmp_path / "data"
    data.mkdir()
    conllu = tmp_path / "s.conllu"
    conllu.write_text("1\ta\n")
    before = digest([tmp_path])
    for out in [*places.values(), run_dir, tmp_path, data, data / "x"]:
        refused(script("analyze.sh", run_dir, "--data", data, "--conllu", conllu, "--out", out), str(out))
    bias_in = tmp_path / "o" / "bias.json"
    bias_in.parent.mkdir()
    bias_in.write_text("1\ta\n")
    refused(script("analyze.sh", run_dir, "--data", data, "--text", bias_in, "--out", bias_in.parent),
            "one of the outputs")
    assert digest([tmp_path]) == {**before, **digest([bias_in])}
def test_sweeps_refuse_bad_runs_roots(tmp_path, places):
    for root in places.values():
        refused(script("sweep-wmt14.sh", "en-de", "--configs", "a", "--runs-root", root, "--dry-run"), str(root))


# ------------------------------------------------ on a trained run (slow)


@pytest.fixture(scope="module")
def nmt_run(tiny_data, tmp_path_factory) -> Path:
    save = tmp_path_factory.mktemp("safety-runs") / "f"
    train(tiny_data, "transformer_local_8lochead_all6", save, *UPDATES)
    return save
def test_train_refuses_to_resume_another_arch(nmt_run, tiny_data):
    files = [nmt_run / n for n in ("checkpoint_last.pt", "checkpoint_best.pt", "command.sh", "train.log")]
    before = digest(files)
    r = script("train.sh", "--data", tiny_data, "--arch", "transformer_local_baseline", "--save-dir", nmt_run,
               "--", *TINY, "--max-update", "20", "--no-epoch-checkpoints")
    refused(r, f"cannot resume '{nmt_run}/checkpoint_last.pt' as another model",
            "--arch transformer_local_8lochead_all6 vs transformer_local_baseline")
    assert digest(files) == before
def test_train_refuses_a_truncated_checkpoint(nmt_run, tiny_data, tmp_path):
    save = tmp_path / "run"
    save.mkdir()
    (save / "checkpoint_last.pt").write_bytes((nmt_run / "checkpoint_last.pt").read_bytes()[:20000])
    before = digest([save])
    r = script("train.sh", "--data", tiny_data, "--arch", "f", "--save-dir", save, "--", *TINY, "--max-update", "20")
    refused(r, f"cannot resume from '{save}/checkpoint_last.pt'", "move it away")
    assert digest([save]) == before
def test_analyze_redoes_every_step_whose_inputs_changed(nmt_run, tmp_path):
    out = tmp_path / "analysis"
    args = ["--out", out, "--hta-sentences", "4", "--hta-max-len", "14", "--no-input"]
    run(["bash", "scripts/analyze.sh", str(nmt_run), "--max-sentences", "10", *map(str, args)])
    assert json.loads((out / "bias.json").read_text())["sentences"] == 10
    r = run(["bash", "scripts/analyze.sh", str(nmt_run), "--max-sentences", "12", *map(str, args)])
    assert "bias: up to date" not in r.stderr and "sensitivity: up to date" not in r.stderr
    assert "hta: up to date" in r.stderr  # its inputs and options did not change
    assert json.loads((out / "bias.json").read_text())["sentences"] == 12
    assert json.loads((out / "sensitivity.json").read_text())["sentences"] == 12
