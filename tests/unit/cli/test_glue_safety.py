"""Issue #19, "nothing lost", for ``glue evaluate`` and ``glue table``: the
output folder and every file in it checked before anything is written,
checkpoints of another task, of a translation model or without a
classification head refused in one line, bad options and metric files in
one line, and examples longer than the model refused in one line."""

from pathlib import Path

import pytest
import torch

from fairseq_local_data import glue, glue_fake
from helpers.probes import bad_outputs, digest, one_line_error, run_command

ROOT = Path(__file__).resolve().parents[3]


def handmade(path: Path, task: dict, model: dict, state: dict) -> Path:
    torch.save({"cfg": {"task": task, "model": model, "criterion": {}}, "model": state}, path)
    return path


@pytest.fixture
def fake(tmp_path):
    """(data folder with an RTE-bin, hand-made checkpoints: SST-2 fine-tuned,
    translation, masked LM)."""
    (tmp_path / "bin" / "RTE-bin" / "input0").mkdir(parents=True)
    (tmp_path / "bin" / "RTE-bin" / "input0" / "dict.txt").write_text("a 1\n")
    enc = {"encoder.sentence_encoder.layers.0.self_attn.q_proj.weight": torch.zeros(4, 4)}
    head = {"classification_heads.sentence_classification_head.out_proj.weight": torch.zeros(2, 4)}
    sst = handmade(tmp_path / "sst2.pt", {"_name": "sentence_prediction", "data": "/runs/bin/SST-2-bin",
                                          "num_classes": 2}, {"_name": "roberta_local_base"}, {**enc, **head})
    nmt = handmade(tmp_path / "nmt.pt", {"_name": "translation", "data": "/bin/wmt"},
                   {"_name": "transformer_local", "arch": "transformer_local_f"},
                   {"encoder.layers.0.self_attn.q_proj.weight": torch.zeros(4, 4),
                    "decoder.layers.0.fc1.weight": torch.zeros(4, 4)})
    mlm = handmade(tmp_path / "mlm.pt", {"_name": "masked_lm", "data": "/bin/pt"}, {"_name": "roberta_local_base"},
                   enc)
    return tmp_path / "bin", {"sst": sst, "nmt": nmt, "mlm": mlm}


def evaluate(task, ckpt, data, glue_dir, *extra):
    return ["glue", "evaluate", "--task", task, "--checkpoint", ckpt, "--data", data, "--glue-dir", glue_dir, *extra]


@pytest.mark.parametrize("kind, needles", [
    ("sst", ["was fine-tuned on SST-2", "not on RTE (--task RTE)"]),
    ("nmt", ["is a translation checkpoint (arch transformer_local_f), not a fine-tuned RoBERTa"]),
    ("mlm", ["has no classification head", "not fine-tuned on a GLUE task", "scripts/finetune-glue.sh"]),
])
def test_checkpoint_of_another_kind_is_refused(fake, tmp_path, kind, needles, capsys):
    data, ckpts = fake
    status, out, err = run_command(capsys, evaluate("RTE", ckpts[kind], data, tmp_path / "glue",
                                                    "--out", tmp_path / "eval"))
    assert status == 1 and out == "" and not (tmp_path / "eval").exists()
    one_line_error(err, f"'{ckpts[kind]}'", *needles)


@pytest.mark.parametrize("value", ["0", "-4", "x"])
def test_batch_size_must_be_positive(fake, tmp_path, value, capsys):
    data, ckpts = fake
    status, _, err = run_command(capsys, evaluate("RTE", ckpts["sst"], data, tmp_path, "--batch-size", value))
    assert status == 2
    one_line_error(err, "--batch-size")


def test_output_folder_that_cannot_be_written_is_one_line(fake, tmp_path, capsys):
    data, ckpts = fake
    for case, path in bad_outputs(tmp_path, "eval").items():
        if case in ("folder", "missing_parent"):
            continue  # an existing folder is the normal case; a missing one is created
        before = digest([tmp_path])
        status, _, err = run_command(capsys, evaluate("RTE", ckpts["sst"], data, tmp_path, "--out", path))
        assert status == 1, case
        one_line_error(err, "evaluation folder")
        assert digest([tmp_path]) == before, case


@pytest.mark.parametrize("content, needle", [(b'{"task": "RTE", "sets": ', "malformed JSON"),
                                             (b'\xff{"task": 1}', "not UTF-8"), (b"[1, 2]", "a JSON list"),
                                             (b'{"task": "RTE", "sets": {"RTE": 0.5}}', "no 'sets' object")])
def test_glue_table_bad_metric_file_is_one_line(tmp_path, content, needle, capsys):
    (tmp_path / "RTE.json").write_bytes(content)
    status, _, err = run_command(capsys, ["glue", "table", tmp_path])
    assert status == 1
    one_line_error(err, f"'{tmp_path / 'RTE.json'}'", needle)


# ---------------------------------------------------------------- a real (tiny) fine-tuned model

def binarise(w: Path, out: str, long_row: int = 0) -> Path:
    """A stand-in SST-2 prepared as prepare-glue.sh does (words as tokens);
    ``long_row``: make that dev row 60 words long first."""
    glue_dir = w / f"glue-{out}"
    glue_fake.make_fake_glue(str(glue_dir), ["SST-2"], rows=8, eval_rows=4)
    if long_row:
        dev = glue_dir / "SST-2" / "dev.tsv"
        lines = dev.read_text().splitlines()
        lines[long_row] = " ".join(["ri"] * 60) + "\t0"
        dev.write_text("\n".join(lines) + "\n")
    work = w / out / "processed" / "SST-2"
    words = set()
    for f in glue.write_extracted(str(glue_dir), "SST-2", str(work)):
        if ".raw." in f:
            lines = Path(f).read_text().splitlines()
            Path(f.replace(".raw.", ".")).write_text("".join(" ".join(x.split()) + "\n" for x in lines))
            words.update(x for line in lines for x in line.split())
    if not (w / "dict.txt").exists():
        (w / "dict.txt").write_text("".join(f"{x} 1\n" for x in sorted(words)))
    glue.binarize("SST-2", str(work), str(w / out / "SST-2-bin"), str(w / "dict.txt"))
    return w / out / "SST-2-bin"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """(work dir, SST-2-bin, a tiny untrained roberta_local_base with an SST-2
    head, max 32 positions, saved as fairseq-train saves it)."""
    from fairseq import options, tasks
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from omegaconf import OmegaConf

    w = tmp_path_factory.mktemp("glue_safety")
    data = binarise(w, "bin")
    args = options.parse_args_and_arch(options.get_training_parser(), [
        str(data), "--user-dir", str(ROOT / "fairseq_local"), "--task", "sentence_prediction",
        "--arch", "roberta_local_base", "--num-classes", "2", "--max-positions", "32", "--init-token", "0",
        "--separator-token", "2", "--criterion", "sentence_prediction", "--encoder-layers", "1",
        "--encoder-embed-dim", "16", "--encoder-ffn-embed-dim", "32", "--encoder-attention-heads", "2", "--cpu"])
    cfg = convert_namespace_to_omegaconf(args)
    model = tasks.setup_task(cfg.task).build_model(cfg.model)
    torch.save({"args": None, "cfg": OmegaConf.to_container(cfg, resolve=True, enum_to_str=True),
                "model": model.state_dict(), "criterion": None, "optimizer_history": [
                    {"criterion_name": "SentencePredictionCriterion", "optimizer_name": "FairseqAdam",
                     "lr_scheduler_state": {"best": None}, "num_updates": 0}],
                "task_state": {}, "extra_state": {}, "last_optimizer_state": None}, w / "sst2.pt")
    return w, data, w / "sst2.pt"


def test_outputs_checked_then_replaced_only_when_ours(tiny, tmp_path, capsys):
    w, data, ckpt = tiny
    out = tmp_path / "eval"
    cmd = evaluate("SST-2", ckpt, data.parent, w / "glue-bin", "--out", out, "--split", "all")
    status, stdout, err = run_command(capsys, cmd)
    assert status == 0, err
    assert "| SST-2 | accuracy |" in stdout
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()) == \
        ["SST-2.json", "submission/SST-2.tsv"]
    assert run_command(capsys, cmd)[0] == 0  # its own outputs: replaced
    (out / "submission" / "SST-2.tsv").write_text("my predictions\n")
    before = digest([out])
    status, _, err = run_command(capsys, cmd)
    assert status == 1 and digest([out]) == before  # the metric file, checked first, is kept too
    one_line_error(err, "SST-2.tsv' exists", "--force")
    assert run_command(capsys, cmd + ["--force"])[0] == 0
    assert (out / "submission" / "SST-2.tsv").read_text().startswith("index\tprediction\n")
    status, _, err = run_command(capsys, evaluate("SST-2", ckpt, data.parent, w / "glue-bin", "--out", w))
    assert status == 0, err  # a folder holding the checkpoint: fine, no output is the checkpoint


@pytest.mark.slow  # starts a process
def test_example_longer_than_the_model_is_one_line(tiny, tmp_path, capsys):
    w, _, ckpt = tiny
    data = binarise(w, "long", long_row=3)  # (dev.tsv line 4: the header, then rows 1-3)
    capsys.readouterr()
    out = tmp_path / "eval"
    status, _, err = run_command(capsys, evaluate("SST-2", ckpt, data, w / "glue-long", "--out", out))
    assert status == 1 and not out.exists()
    one_line_error(err, "SST-2 dev set", "row 3 has 62 tokens", "32 positions")
