"""A Hugging Face BERT, converted with ``convert-hf``, through the GLUE
pipeline: prepare-glue.sh with its WordPiece, finetune-glue.sh with a band
layout (resumed) and with Adaptive Axis Attention, pairs as BERT's
``[CLS] A [SEP] B [SEP]``, and evaluate-glue.sh scoring it."""

import json

import pytest

from fairseq_local_data import glue_fake
from helpers import USER_DIR, run
from helpers.hf import save_model

pytestmark = pytest.mark.slow  # runs the scripts and commands as processes


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    """(work dir): the stand-in RTE, two conversions of one random BERT whose
    WordPiece vocabulary holds the stand-in's words, and RTE-bin."""
    w = tmp_path_factory.mktemp("hf_glue")
    glue_fake.make_fake_glue(str(w / "glue"), ["RTE"], rows=40, eval_rows=20)
    words = {x.lower() for f in (w / "glue" / "RTE").glob("*.tsv") for line in f.read_text().splitlines()[1:]
             for col in line.split("\t")[1:3] for x in col.split() if x.isalpha()}
    save_model(str(w / "hf"), "BertForMaskedLM", words=sorted(words))
    run(["fairseq-local", "convert-hf", str(w / "hf"), str(w / "band"), "--attn-layout", "[band-2*4]*2"])
    run(["fairseq-local", "convert-hf", str(w / "hf"), str(w / "aaa"), "--arch", "roberta_aaa",
         "--attn-layout", "[aaa*4]*2"])
    r = run(["bash", "scripts/prepare-glue.sh", "--glue-dir", str(w / "glue"), "--src-dict", str(w / "band" / "dict.txt"),
             "--bpe", "wordpiece", "--bpe-model", str(w / "band" / "vocab.txt"), "--tasks", "RTE",
             "--out", str(w / "bin"), "--workers", "1"])
    assert "RTE ready" in r.stderr
    return w


def finetune(w, checkpoint, save, *options):
    return run(["bash", "scripts/finetune-glue.sh", "--data", str(w / "bin" / "RTE-bin"), "--save-dir", str(save),
                "--checkpoint", str(checkpoint), "--cpu", "--max-positions", "64", "--batch-size", "8", *options,
                "--", "--num-workers", "0", "--seed", "1"])


def test_wordpiece_pairs_are_berts(prepared):
    """RTE's pairs binarised with the model's WordPiece and read as fine-tuning
    reads them: <s> A </s> B </s>, every piece known to the dictionary."""
    from fairseq.tasks.sentence_prediction import SentencePredictionConfig, SentencePredictionTask
    from tokenizers import BertWordPieceTokenizer

    w = prepared
    task = SentencePredictionTask.setup_task(SentencePredictionConfig(
        data=str(w / "bin" / "RTE-bin"), num_classes=2, max_positions=64, seed=1, init_token=0, separator_token=None))
    task.load_dataset("valid")
    d, wp = task.source_dictionary, BertWordPieceTokenizer(str(w / "band" / "vocab.txt"))
    rows = [line.split("\t") for line in (w / "glue" / "RTE" / "dev.tsv").read_text().splitlines()[1:]]
    sample = task.dataset("valid")[0]
    a, b = rows[sample["id"]][1:3]
    ids = sample["net_input.src_tokens"].tolist()
    assert [d[i] for i in ids] == ["<s>", *wp.encode(a, add_special_tokens=False).tokens, "</s>",
                                   *wp.encode(b, add_special_tokens=False).tokens, "</s>"]
    assert d.unk() not in ids


def test_band_layout_finetunes_resumes_and_is_scored(prepared):
    w = prepared
    save = w / "runs" / "RTE"
    r = finetune(w, w / "band" / "model.pt", save, "--max-update", "2")
    assert "--separator-token" not in (save / "command.sh").read_text()  # BERT's pairs
    assert "num_updates 2" in r.stdout and "--segment-embeddings" in (save / "command.sh").read_text()
    r = finetune(w, w / "band" / "model.pt", save, "--max-update", "4")
    assert "Loaded checkpoint" in r.stdout and "num_updates 4" in r.stdout and "num_updates 1 " not in r.stdout
    r = run(["bash", "scripts/evaluate-glue.sh", "--runs", str(w / "runs"), "--data", str(w / "bin"),
             "--glue-dir", str(w / "glue"), "--out", str(w / "eval"), "--checkpoint-name", "checkpoint_last.pt"])
    m = json.loads((w / "eval" / "RTE.json").read_text())["sets"]["RTE"]
    assert m["n"] == 20 and 0 <= m["accuracy"] <= 1


def test_aaa_finetunes_with_its_hinge(prepared):
    w = prepared
    save = w / "runs-aaa" / "RTE"
    r = finetune(w, w / "aaa" / "model.pt", save, "--recipe", "aaa", "--aaa-target", "0.5", "--max-update", "2")
    assert "num_updates 2" in r.stdout and "aaa_rho" in r.stdout


def test_fairseq_train_restores_a_converted_model(prepared, tmp_path):
    """fairseq-train --restore-file (a new stage: fresh optimizer and
    dataloader) on masked-LM data binarised with the converted dictionary."""
    from fairseq_local_data.bpe import encode_lines

    w = prepared
    rows = [line.split("\t") for line in (w / "glue" / "RTE" / "train.tsv").read_text().splitlines()[1:]]
    text = encode_lines([r[1] for r in rows] + [r[2] for r in rows], "wordpiece", w / "band" / "vocab.txt")
    (tmp_path / "train.txt").write_text("\n".join(text) + "\n")
    run(["fairseq-preprocess", "--only-source", "--srcdict", str(w / "band" / "dict.txt"), "--trainpref",
         str(tmp_path / "train.txt"), "--validpref", str(tmp_path / "train.txt"), "--destdir", str(tmp_path / "bin"),
         "--workers", "1"])
    r = run(["fairseq-train", str(tmp_path / "bin"), "--user-dir", USER_DIR, "--task", "masked_lm",
             "--criterion", "masked_lm", "--arch", "roberta_local_base", "--encoder-layers", "2",
             "--encoder-embed-dim", "32", "--encoder-ffn-embed-dim", "64", "--encoder-attention-heads", "4",
             "--attn-layout", "[band-2*4]*2", "--segment-embeddings", "--layernorm-eps", "1e-12",
             "--positions", "absolute", "--max-positions", "64", "--tokens-per-sample", "64",
             "--restore-file", str(w / "band" / "model.pt"), "--reset-optimizer", "--reset-dataloader",
             "--reset-meters", "--reset-lr-scheduler", "--optimizer", "adam", "--lr", "1e-4", "--batch-size", "8",
             "--max-update", "2", "--cpu", "--save-dir", str(tmp_path / "ck"), "--no-epoch-checkpoints",
             "--num-workers", "0"])
    assert "Loaded checkpoint" in r.stdout and "num_updates 2" in r.stdout
