"""End to end on the stand-in GLUE folder: prepare-glue.sh for all nine
tasks (data that fairseq's sentence_prediction task loads), then a tiny
masked-LM checkpoint fine-tuned on SST-2 that beats the majority class, its
evaluation and its submission file."""

import json

import pytest

from fairseq_local_data import glue, glue_fake
from helpers import USER_DIR, run

pytestmark = pytest.mark.slow  # runs the scripts and commands as processes

TINY = ["--encoder-layers", "2", "--encoder-embed-dim", "32", "--encoder-ffn-embed-dim", "64",
        "--encoder-attention-heads", "2", "--num-workers", "0", "--seed", "1"]


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    """(work dir, prepare-glue.sh output): a pretraining dictionary, the stand-in
    GLUE folder (SST-2 larger), and data-bin/glue."""
    from fairseq import options
    from fairseq_cli import preprocess

    w = tmp_path_factory.mktemp("glue_pipeline")
    (w / "corpus.txt").write_text("\n".join(glue_fake.sentences(1000)) + "\n")
    (w / "valid.txt").write_text("\n".join(glue_fake.sentences(50, rng_seed="valid")) + "\n")
    # fairseq-preprocess, in this process (fairseq is imported already)
    preprocess.main(options.get_preprocessing_parser().parse_args(
        ["--only-source", "--trainpref", str(w / "corpus.txt"), "--validpref", str(w / "valid.txt"),
         "--destdir", str(w / "pt-bin"), "--workers", "1"]))
    glue_fake.make_fake_glue(str(w / "glue"), rows=40, eval_rows=20)
    glue_fake.make_fake_glue(str(w / "glue"), ["SST-2"], rows=400, eval_rows=100)
    r = run(["bash", "scripts/prepare-glue.sh", "--glue-dir", str(w / "glue"), "--src-dict",
             str(w / "pt-bin" / "dict.txt"), "--bpe", "none", "--out", str(w / "bin"), "--workers", "1"])
    return w, r.stderr
def test_prepared_tasks_load_in_fairseqs_sentence_prediction(prepared):
    from fairseq.tasks.sentence_prediction import SentencePredictionConfig, SentencePredictionTask

    w, log = prepared
    assert "binarising" in log
    for name, t in glue.TASKS.items():
        raw = glue.extract(str(w / "glue"), t)
        cfg = SentencePredictionConfig(data=str(w / "bin" / f"{name}-bin"), num_classes=t.num_classes,
                                       regression_target=t.num_classes == 1, max_positions=512, seed=1,
                                       init_token=0, separator_token=2)
        task = SentencePredictionTask.setup_task(cfg)
        assert task.source_dictionary.indices == task.dictionary.indices
        splits = [s for s in raw]
        for split in splits:
            task.load_dataset(split)
            ds = task.dataset(split)
            assert len(ds) == len(raw[split]["input0"]), (name, split)
            sample = ds[0]
            first = raw[split]["input0"][sample["id"]]
            ids = sample["net_input.src_tokens"].tolist()
            assert ids[0] == 0 and ids[-1] == 2  # <s> ... </s>, as the recipe's --init-token/--separator-token
            d = task.source_dictionary  # the pretraining dictionary: unknown words are <unk>
            assert ids[1:1 + len(first.split())] == d.encode_line(first, add_if_not_exist=False,
                                                                  append_eos=False).tolist()
            if len(t.inputs) == 2:
                assert ids.count(2) == 3  # <s> a </s> </s> b </s>, RoBERTa's pair format
            if "label" not in raw[split]:
                assert "target" not in sample
            elif t.num_classes == 1:  # STS-B: the float label / 5
                assert sample["target"] == [pytest.approx(float(raw[split]["label"][sample["id"]]) / 5, abs=1e-4)]
            else:
                d = task.label_dictionary
                assert d.string([sample["target"].item() + d.nspecial]) == raw[split]["label"][sample["id"]]
    # idempotent: a second run binarises nothing
    r = run(["bash", "scripts/prepare-glue.sh", "--glue-dir", str(w / "glue"), "--src-dict",
             str(w / "pt-bin" / "dict.txt"), "--bpe", "none", "--out", str(w / "bin"), "--workers", "1"])
    assert "binarising" not in r.stderr and "reading" not in r.stderr and "SST-2 ready" in r.stderr


@pytest.fixture(scope="module")
def pretrained(prepared):
    """A tiny masked-LM checkpoint (2 updates) over the pretraining dictionary.

    ``--data-buffer-size 0``: stopped 2 updates into a 15-batch epoch,
    fairseq's prefetching thread (a daemon) is still collating batches in
    torch when the interpreter exits, which under load aborted the finished
    run ("terminate called without an active exception", status -6)."""
    w, _ = prepared
    run(["fairseq-train", str(w / "pt-bin"), "--user-dir", USER_DIR, "--task", "masked_lm",
         "--arch", "roberta_local_base", "--criterion", "masked_lm_with_sparsity", "--max-positions", "64",
         "--tokens-per-sample", "64", "--sample-break-mode", "complete", "--optimizer", "adam", "--lr", "1e-3",
         "--lr-scheduler", "inverse_sqrt", "--warmup-updates", "1", "--batch-size", "16", "--max-update", "2",
         "--cpu", "--save-dir", str(w / "pt"), "--disable-validation", "--no-epoch-checkpoints",
         "--data-buffer-size", "0", *TINY])
    return w / "pt" / "checkpoint_last.pt"


def finetune(w, name, checkpoint, save, options, fairseq_options=()):
    """scripts/finetune-glue.sh on the tiny model, on the CPU."""
    return run(["bash", "scripts/finetune-glue.sh", "--data", str(w / "bin" / f"{name}-bin"), "--save-dir", str(save),
                "--checkpoint", str(checkpoint), "--cpu", "--max-positions", "64", *options,
                "--", *fairseq_options, *TINY])
def test_finetuned_tiny_model_beats_the_majority_class(prepared, pretrained):
    w, _ = prepared
    save = w / "runs" / "SST-2"
    r = finetune(w, "SST-2", pretrained, save, ["--lr", "5e-3", "--batch-size", "16", "--max-epoch", "1"],
                 ["--dropout", "0", "--attention-dropout", "0", "--log-interval", "10"])
    assert "num_updates 25" in r.stdout
    assert list((save / "tb").glob("*/events.out.tfevents.*"))
    r = run(["bash", "scripts/evaluate-glue.sh", "--runs", str(w / "runs"), "--data", str(w / "bin"),
             "--glue-dir", str(w / "glue"), "--out", str(w / "eval"), "--split", "all"])
    m = json.loads((w / "eval" / "SST-2.json").read_text())["sets"]["SST-2"]
    assert m["n"] == 100 and m["accuracy"] >= m["majority"] + 0.2, m
    assert "| SST-2 | accuracy |" in r.stdout and (w / "eval" / "glue.md").exists()
    sub = (w / "eval" / "submission" / "SST-2.tsv").read_text().splitlines()
    assert sub[0] == "index\tprediction" and len(sub) == 101
    assert [x.split("\t")[0] for x in sub[1:]] == [str(k) for k in range(100)]
    assert {x.split("\t")[1] for x in sub[1:]} <= {"0", "1"}
    # test predictions follow the keyword too
    test = glue.extract(str(w / "glue"), glue.TASKS["SST-2"])["test"]["input0"]
    neg = glue_fake._Text(1, __import__("random").Random(0)).neg
    agree = sum((p.split("\t")[1] == "0") == (s.split()[0] == neg) for p, s in zip(sub[1:], test))
    assert agree >= 80
def test_mnli_and_stsb_reports_and_submissions(prepared, pretrained):
    """MNLI: matched and mismatched metrics, MNLI-m/MNLI-mm/AX files with
    label strings; STS-B: regression, Pearson/Spearman, scores in [0, 5]."""
    w, _ = prepared
    for name in ("MNLI", "STS-B"):
        finetune(w, name, pretrained, w / "runs2" / name, ["--max-update", "1"])
    run(["bash", "scripts/evaluate-glue.sh", "--runs", str(w / "runs2"), "--data", str(w / "bin"),
         "--glue-dir", str(w / "glue"), "--out", str(w / "eval2"), "--split", "all",
         "--checkpoint-name", "checkpoint_last.pt"])
    mnli = json.loads((w / "eval2" / "MNLI.json").read_text())["sets"]
    assert sorted(mnli) == ["MNLI-m", "MNLI-mm"] and all(m["n"] == 20 for m in mnli.values())
    stsb = json.loads((w / "eval2" / "STS-B.json").read_text())["sets"]["STS-B"]
    assert set(stsb) == {"pearson", "spearman", "n"}
    sub = w / "eval2" / "submission"
    assert sorted(p.name for p in sub.iterdir()) == ["AX.tsv", "MNLI-m.tsv", "MNLI-mm.tsv", "STS-B.tsv"]
    for f in ("AX.tsv", "MNLI-m.tsv", "MNLI-mm.tsv"):
        rows = (sub / f).read_text().splitlines()
        assert rows[0] == "index\tprediction" and len(rows) == 21
        assert {r.split("\t")[1] for r in rows[1:]} <= {"entailment", "neutral", "contradiction"}
    scores = [float(r.split("\t")[1]) for r in (sub / "STS-B.tsv").read_text().splitlines()[1:]]
    assert len(scores) == 20 and all(0.0 <= x <= 5.0 for x in scores)


def test_bert_options_train_reload_and_refuse_a_resume_without_them(prepared, tmp_path):
    """--layernorm-eps and --positions absolute through fairseq-train: saved
    in the checkpoint, rebuilt on loading, and a resume without them is one
    error line."""
    import torch
    from fairseq import checkpoint_utils

    from fairseq_local.models.roberta import AbsolutePositionalEmbedding

    w, _ = prepared
    args = ["fairseq-train", str(w / "pt-bin"), "--user-dir", USER_DIR, "--task", "masked_lm",
            "--arch", "roberta_local_base", "--criterion", "masked_lm_with_sparsity", "--max-positions", "64",
            "--tokens-per-sample", "64", "--sample-break-mode", "complete", "--optimizer", "adam", "--lr", "1e-3",
            "--batch-size", "16", "--cpu", "--save-dir", str(tmp_path), "--disable-validation",
            "--no-epoch-checkpoints", "--data-buffer-size", "0", *TINY]
    run([*args, "--max-update", "1", "--layernorm-eps", "1e-12", "--positions", "absolute"])
    (model,), cfg = checkpoint_utils.load_model_ensemble([str(tmp_path / "checkpoint_last.pt")])
    assert cfg.model.layernorm_eps == 1e-12 and cfg.model.positions == "absolute"
    assert {m.eps for m in model.modules() if isinstance(m, torch.nn.LayerNorm)} == {1e-12}
    assert isinstance(model.encoder.sentence_encoder.embed_positions, AbsolutePositionalEmbedding)
    r = run([*args, "--max-update", "2"], check=False)
    assert r.returncode != 0
    assert "cannot resume" in r.stderr and "--layernorm-eps 1e-12 vs -" in r.stderr
    assert "--positions absolute vs -" in r.stderr
