"""``fairseq-local inspect`` and the checkpoint reader behind it
(:class:`fairseq_local.checkpoint_compat.Checkpoint`), on checkpoints written
by fairseq's own trainer: the saved options, update count and encoder
signature one per line or as JSON; a tokeniser's kind and size; the machine;
one ``error:`` line (exit status 2) for a missing or broken file, a file that
is not a checkpoint, and an unknown field."""

import argparse
import json
from pathlib import Path

import pytest
import torch

from fairseq_local.attention.layout import parse_layout
from fairseq_local.checkpoint_compat import Checkpoint
from fairseq_local.errors import InputError
from fairseq_local.models.archs import get_config
from fairseq_local.models.resume import model_signature
from helpers import USER_DIR
from helpers.probes import one_line_error, run_command

ALL6 = "transformer_local_8lochead_all6"
NMT = ["--task", "translation", "-s", "src", "-t", "tgt", "--arch", ALL6, "--share-all-embeddings",
       "--mask-mode", "pre", "--criterion", "label_smoothed_cross_entropy", "--optimizer", "adam", "--lr", "0.0007",
       "--lr-scheduler", "inverse_sqrt", "--encoder-embed-dim", "32", "--encoder-ffn-embed-dim", "64",
       "--decoder-embed-dim", "32", "--decoder-ffn-embed-dim", "64", "--decoder-layers", "1",
       "--decoder-attention-heads", "2", "--seed", "5"]
MLM = ["--task", "masked_lm", "--arch", "roberta_base", "--criterion", "masked_lm", "--optimizer", "adam",
       "--lr-scheduler", "polynomial_decay", "--total-num-update", "10", "--encoder-layers", "2",
       "--encoder-embed-dim", "16", "--encoder-ffn-embed-dim", "32", "--encoder-attention-heads", "2",
       "--max-positions", "32", "--tokens-per-sample", "32"]


def trainer_checkpoint(data: Path, argv, path: Path, updates: int):
    """A checkpoint as fairseq-train writes it (``Trainer.save_checkpoint``)
    of an untrained model of ``argv``, at ``updates`` updates; returns the
    parsed options."""
    from fairseq import options, tasks
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from fairseq.trainer import Trainer

    args = options.parse_args_and_arch(options.get_training_parser(),
                                       [str(data), "--user-dir", USER_DIR, "--cpu", *argv])
    cfg = convert_namespace_to_omegaconf(args)
    task = tasks.setup_task(cfg.task)
    trainer = Trainer(cfg, task, task.build_model(cfg.model), task.build_criterion(cfg.criterion))
    trainer.set_num_updates(updates)
    trainer.consolidate_optimizer()
    trainer.save_checkpoint(str(path), {"train_iterator": {"epoch": 1}})
    return args


@pytest.fixture(scope="module")
def ckpts(tmp_path_factory):
    """An NMT checkpoint of Pande et al.'s (f) in pre mode at 7 updates, a
    stock RoBERTa one at 3, and the options they were written with."""
    tmp = tmp_path_factory.mktemp("inspect")
    data = tmp / "data"
    data.mkdir()
    for name in ("dict.src.txt", "dict.tgt.txt", "dict.txt"):
        (data / name).write_text("a 5\nb 4\nc 3\n")
    nmt_args = trainer_checkpoint(data, NMT, tmp / "nmt.pt", 7)
    trainer_checkpoint(data, MLM, tmp / "mlm.pt", 3)
    return {"tmp": tmp, "data": data, "nmt": tmp / "nmt.pt", "mlm": tmp / "mlm.pt", "nmt_args": nmt_args}


def inspect(capsys, *argv):
    return run_command(capsys, ["inspect", *map(str, argv)])


def test_fields_of_a_trained_nmt_checkpoint(ckpts, capsys):
    fields = ["arch", "task", "criterion", "num_updates", "attn_layout", "mask_mode", "encoder_layers",
              "encoder_attention_heads", "data", "task.source_lang", "optimization.lr", "common.seed", "signature"]
    status, out, err = inspect(capsys, ckpts["nmt"], *[a for f in fields for a in ("--field", f)])
    assert status == 0 and err == ""
    signature = model_signature(ckpts["nmt_args"])
    assert signature["attn_layout"] and signature["mask_mode"] == "pre"
    layout = ckpts["nmt_args"].attn_layout  # config (f)'s, as its arch sets it
    assert parse_layout(layout) == parse_layout(get_config("f").layout)
    assert out.splitlines() == [ALL6, "translation", "label_smoothed_cross_entropy", "7", layout,
                                "pre", "6", "8", str(ckpts["data"]), "src", "[0.0007]", "5", json.dumps(signature)]


def test_json_and_a_stock_checkpoint_without_plugin_options(ckpts, capsys):
    status, out, _ = inspect(capsys, ckpts["mlm"], "--json", "--field", "arch", "--field", "num_updates",
                             "--field", "signature", "--field", "attn_layout", "--field", "max_positions",
                             "--field", "task.tokens_per_sample")
    assert status == 0
    assert json.loads(out) == {"arch": "roberta_base", "num_updates": 3, "signature": None, "attn_layout": None,
                               "max_positions": 32, "task.tokens_per_sample": 32}
    # one line per field, empty where the checkpoint records nothing
    status, out, _ = inspect(capsys, ckpts["mlm"], "--field", "signature", "--field", "mask_mode", "--field", "task")
    assert status == 0 and out == "\n\nmasked_lm\n"


def test_without_fields_every_field_is_listed(ckpts, capsys):
    status, out, _ = inspect(capsys, ckpts["mlm"])
    lines = out.splitlines()
    assert status == 0
    assert lines[:5] == ["arch: roberta_base", "task: masked_lm", "criterion: masked_lm", "num_updates: 3",
                         "signature: "]
    assert "encoder_layers: 2" in lines and "task.tokens_per_sample: 32" in lines


def test_the_reader_agrees_with_torch_load(ckpts):
    ckpt = Checkpoint.read(ckpts["nmt"])
    state = torch.load(ckpts["nmt"], map_location="cpu", weights_only=False)
    assert ckpt.arch == ALL6 and ckpt.task == "translation" and ckpt.num_updates == 7
    assert ckpt.options("model") == vars(state["cfg"]["model"])  # fairseq saves a legacy model's options as a namespace
    assert ckpt.signature() == dict(state["model"]["encoder._extra_state"]["signature"])
    tensors = ckpt.tensors()
    assert set(tensors) == {k for k in state["model"] if not k.endswith("_extra_state")}
    assert all(torch.equal(tensors[k], state["model"][k]) for k in tensors)


def test_legacy_args_checkpoints_and_roberta_signatures(tmp_path):
    """Older checkpoints keep every option in one ``args`` namespace; the
    RoBERTa encoder saves its signature under ``encoder.sentence_encoder.``."""
    path = tmp_path / "old.pt"
    sig = {"arch": "roberta_band6", "attn_layout": "[band-6*12]*12", "mask_mode": "post"}
    torch.save({"args": argparse.Namespace(arch="roberta_band6", task="sentence_prediction", data="/d/RTE-bin",
                                           criterion="sentence_prediction"),
                "model": {"encoder.sentence_encoder._extra_state": {"signature": sig}},
                "optimizer_history": [{"num_updates": 12}]}, path)
    ckpt = Checkpoint.read(path)
    assert (ckpt.arch, ckpt.task, ckpt.num_updates, ckpt.signature()) == ("roberta_band6", "sentence_prediction",
                                                                         12, sig)
    assert ckpt.options("task")["data"] == "/d/RTE-bin" and ckpt.tensors() == {}


@pytest.mark.parametrize("case, message", [
    ("missing", "no checkpoint '{path}'"),
    ("folder", "'{path}' is a folder, not a checkpoint"),
    ("truncated", "'{path}' is not a fairseq checkpoint (truncated, or not a torch file"),
    ("text", "'{path}' is not a fairseq checkpoint (truncated, or not a torch file"),
    ("list", "'{path}' is not a fairseq checkpoint (a torch file holding a list)"),
    ("no_model", "'{path}' is not a fairseq checkpoint (a torch file holding a dict without a model state dict)"),
])
def test_bad_files_are_one_line(ckpts, tmp_path, capsys, case, message):
    path = tmp_path / f"{case}.pt"
    if case == "folder":
        path.mkdir()
    elif case == "truncated":
        path.write_bytes(ckpts["nmt"].read_bytes()[:5000])
    elif case == "text":
        path.write_text("not a checkpoint\n")
    elif case == "list":
        torch.save([1, 2], path)
    elif case == "no_model":
        torch.save({"cfg": {}}, path)
    status, out, err = inspect(capsys, path, "--field", "arch")
    assert status == 2 and out == ""
    one_line_error(err, message.format(path=path))
    if case != "missing":
        with pytest.raises(InputError, match="not a"):
            Checkpoint.read(path)


@pytest.mark.parametrize("field", ["encoder_layerz", "model.encoder_layerz", "task.nope", "common.nope",
                                   "max_positions"])  # the translation model has no max_positions
def test_unknown_fields_are_one_line(ckpts, capsys, field):
    status, out, err = inspect(capsys, ckpts["nmt"], "--field", "arch", "--field", field)
    assert status == 2 and out == ""
    one_line_error(err, f"unknown field '{field}' of '{ckpts['nmt']}' (arch {ALL6}, task translation)")


def test_one_subject(ckpts, capsys):
    for argv in [[], [ckpts["nmt"], "--machine"], ["--machine", "--bpe-model", ckpts["tmp"]]]:
        status, _, err = inspect(capsys, *argv)
        assert status == 2
        one_line_error(err, "give one of CKPT, --bpe-model PATH or --machine")


def test_tokenisers(tmp_path, capsys):
    import sentencepiece as spm

    text = tmp_path / "text.txt"
    text.write_text("".join(f"the cat sat on mat number {i} and the dog ran\n" for i in range(200)))
    spm.SentencePieceTrainer.train(input=str(text), model_prefix=str(tmp_path / "spm"), vocab_size=40,
                                   model_type="bpe", minloglevel=2)
    status, out, _ = inspect(capsys, "--bpe-model", tmp_path / "spm.model", "--json")
    assert status == 0 and json.loads(out) == {"bpe": "sentencepiece", "size": 40}
    gpt2 = tmp_path / "gpt2"
    gpt2.mkdir()
    (gpt2 / "encoder.json").write_text(json.dumps({"a": 0, "b": 1, "ab": 2}))
    (gpt2 / "vocab.bpe").write_text("#version: 0.2\na b\n")
    assert inspect(capsys, "--bpe-model", gpt2, "--field", "bpe", "--field", "size")[1] == "gpt2\n3\n"
    (gpt2 / "encoder.json").write_bytes(b'{"a": 0, "\xff": 1}')
    cases = [(["--bpe-model", gpt2], f"--bpe-model '{gpt2}' (gpt2) holds encoder.json, which is not UTF-8 text "
                                     "(byte 10)"),
             (["--bpe-model", text], f"--bpe-model '{text}' (sentencepiece) is not a SentencePiece model (corrupt"),
             (["--bpe-model", text, "--bpe", "gpt2"], f"--bpe-model '{text}' (gpt2) is not a folder of encoder.json and vocab.bpe"),
             (["--bpe-model", tmp_path / "none"], f"no --bpe-model '{tmp_path / 'none'}'"),
             (["--bpe-model", tmp_path / "spm.model", "--field", "arch"], "unknown field 'arch' of the tokeniser")]
    for argv, message in cases:
        status, out, err = inspect(capsys, *argv)
        assert status == 2 and out == ""
        one_line_error(err, message)


@pytest.mark.slow  # starts a process
def test_machine(capsys):
    from fairseq_local_cli.benchmark.timing import machine

    status, out, _ = inspect(capsys, "--machine", "--field", "cuda", "--field", "torch", "--field", "machine")
    cuda = torch.cuda.is_available()
    expected = "ok" if cuda else (f"this torch has no CUDA support (torch {torch.__version__})"
                                  if torch.version.cuda is None else
                                  f"no CUDA device is visible (torch {torch.__version__}, CUDA {torch.version.cuda})")
    assert status == 0 and out.splitlines() == [expected, torch.__version__, machine("cuda" if cuda else None)]
