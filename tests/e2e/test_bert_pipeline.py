"""The BERT half end to end on the stand-ins, through the scripts and
fairseq-train: corpus prep -> pretrain -> GLUE prep -> fine-tune -> evaluate
for a local, a tied and a DAM arch (scripts/sweep-table4.sh) and for AAA
fine-tuned from a converted full-attention model; Table 4; from_pretrained;
TensorBoard logs."""

from pathlib import Path

import pytest
import torch

from helpers import USER_DIR, run
from fairseq_local_data.standins import BOOKS_NAME, WIKI_NAME, StandinConfig, generate

pytestmark = pytest.mark.slow

MODEL = "--encoder-embed-dim 48 --encoder-ffn-embed-dim 96 --num-workers 0 --log-interval 5"
ARCHS = ["roberta_band6", "roberta_band6_120_tied", "roberta_dam_s"]


@pytest.fixture(scope="module")
def bert(tmp_path_factory) -> Path:
    """Stand-ins -> masked-LM data-bin and one GLUE task, then the sweep of
    three archs and fairseq's roberta_base (for the conversion)."""
    root = tmp_path_factory.mktemp("bert")
    generate(StandinConfig(articles=30, duplicates=1, redirects=1, books=2, chapters=2, paragraphs=3),
             root / "standins")
    run(["bash", "scripts/prepare-bert-corpus.sh", "--wiki", str(root / "standins" / WIKI_NAME),
         "--gutenberg", str(root / "standins" / BOOKS_NAME), "--out", str(root / "corpus"),
         "--bpe", "sentencepiece", "--vocab-size", "300", "--valid-docs", "2", "--test-docs", "1"])
    run(["python", "-m", "fairseq_local_data.glue", "fake", "--out", str(root / "glue-raw"),
         "--tasks", "SST-2", "--rows", "64", "--eval-rows", "24"])
    run(["bash", "scripts/prepare-glue.sh", "--glue-dir", str(root / "glue-raw"), "--tasks", "SST-2",
         "--src-dict", str(root / "corpus" / "dict.txt"), "--bpe", "sentencepiece",
         "--bpe-model", str(root / "corpus" / "bpe" / "spm.model"), "--out", str(root / "glue")])
    run(["bash", "scripts/sweep-table4.sh", "--configs", " ".join(["roberta_base", *ARCHS]), "--tasks", "SST-2",
         "--corpus", str(root / "corpus"), "--glue-bin", str(root / "glue"), "--glue-dir", str(root / "glue-raw"),
         "--runs-root", str(root / "runs"), "--cpu",
         "--pretrain-args", "--updates 6 --updates-512 0 --lengths 32,64 --max-positions 64 --batch-size 16 "
                            f"--update-freq 1 --lr 1e-3 --warmup 2 -- {MODEL} --dam-lambda 1e-4",
         "--finetune-args", f"--max-update 6 --batch-size 16 --lr 1e-4 --max-positions 64 -- {MODEL}"])
    return root


def test_sweep_pretrains_finetunes_and_evaluates(bert):
    runs = bert / "runs"
    for arch in ["roberta_base", *ARCHS]:
        assert (runs / arch / "checkpoint_last.pt").resolve() == (runs / arch / "len32" / "checkpoint_last.pt")
        result = (runs / arch / "glue" / "eval" / "SST-2.json").read_text()
        assert '"accuracy"' in result and '"n": 24' in result
        # TensorBoard logs of pretraining and fine-tuning
        assert list((runs / arch / "len32" / "tb" / "train").glob("events.*"))
        assert list((runs / arch / "glue" / "SST-2" / "tb" / "valid").glob("events.*"))
    ckpt = torch.load(runs / "roberta_dam_s" / "glue" / "SST-2" / "checkpoint_last.pt", weights_only=False)
    assert any(".self_attn.learned.dam." in k for k in ckpt["model"])  # DAM went on learning while fine-tuning
    table = (runs / "table4.md").read_text()
    # d = 48, d_h = 4: one tied Wq/Wk (2 x 4 x 48), Wv/Wo in 12 layers (12 x 2 x 48^2), 24 untied heads' Wq/Wk
    assert f"| All Band6 120Tied | roberta_band6_120_tied | {384 + 55_296 + 24 * 384:,} |" in table
    assert "| BERT-base (fairseq) | roberta_base | 110,592 |" in table


def test_sweep_dry_run_prints_every_command_and_writes_nothing(bert, tmp_path):
    runs = tmp_path / "runs"
    out = run(["bash", "scripts/sweep-table4.sh", "--configs", "roberta_band2 roberta_band6_all_tied",
               "--tasks", "SST-2", "--corpus", str(bert / "corpus"), "--glue-bin", str(bert / "glue"),
               "--glue-dir", str(bert / "glue-raw"), "--runs-root", str(runs), "--cpu", "--dry-run",
               "--pretrain-args", "--updates 10 --warmup 1 -- --attn-layout [band-2*12]*12"]).stdout
    lines = out.splitlines()
    assert [line.split()[0] for line in lines] == ["fairseq-train"] * 6  # 2 x (2 phases + 1 fine-tuning)
    assert sum("--task masked_lm --arch roberta_band6_all_tied" in line for line in lines) == 2
    assert sum("--finetune-from-model" in line for line in lines) == 2
    assert all(r"--attn-layout \[band-2\*12\]\*12" in line for line in lines if "masked_lm" in line)
    assert not runs.exists()
    bad = run(["bash", "scripts/sweep-table4.sh", "--configs", "roberta_band6 roberta_bnad2", "--tasks", "SST-2",
               "--corpus", str(bert / "corpus"), "--glue-bin", str(bert / "glue"), "--glue-dir",
               str(bert / "glue-raw"), "--runs-root", str(runs), "--cpu"], check=False)
    assert bad.returncode != 0 and bad.stderr.strip().splitlines()[-1].startswith(
        "error: 'roberta_bnad2' is not a RoBERTa arch") and not runs.exists()


def test_aaa_from_a_converted_full_attention_model(bert, tmp_path):
    runs = bert / "runs"
    converted = tmp_path / "aaa.pt"
    run(["fairseq-local", "convert-roberta", str(runs / "roberta_base" / "checkpoint_last.pt"), str(converted),
         "--arch", "roberta_aaa"])
    save = tmp_path / "aaa" / "glue" / "SST-2"
    r = run(["bash", "scripts/finetune-glue.sh", "--data", str(bert / "glue" / "SST-2-bin"), "--arch", "roberta_aaa",
             "--checkpoint", str(converted), "--save-dir", str(save), "--recipe", "aaa", "--aaa-target", "0.5",
             "--aaa-alpha", "500", "--max-update", "6", "--batch-size", "16", "--max-positions", "64", "--cpu",
             "--", *MODEL.split(), "--update-freq", "1"])
    assert "aaa_loss" in r.stdout + r.stderr and "aaa_rho" in r.stdout + r.stderr
    out = run(["fairseq-local", "glue", "evaluate", "--task", "SST-2", "--checkpoint", str(save / "checkpoint_best.pt"),
               "--data", str(bert / "glue"), "--glue-dir", str(bert / "glue-raw"), "--out", str(tmp_path / "eval")])
    assert out.returncode == 0 and (tmp_path / "eval" / "SST-2.json").is_file()


def test_from_pretrained_hub(bert):
    from fairseq.models.roberta import RobertaModel

    runs = bert / "runs"
    spm = str(bert / "corpus" / "bpe" / "spm.model")
    for arch in ARCHS:
        pretrained = RobertaModel.from_pretrained(
            str(runs / arch / "len32"), checkpoint_file="checkpoint_last.pt", data_name_or_path=str(bert / "corpus"),
            bpe="sentencepiece", sentencepiece_model=spm, user_dir=USER_DIR).eval()
        tokens = pretrained.encode("Zol go lem dokomi.")
        assert tokens[0] == 0 and tokens[-1] == 2
        assert pretrained.extract_features(tokens).shape == (1, len(tokens), 48)
        filled = pretrained.fill_mask("Zol go <mask> dokomi.", topk=2)
        assert len(filled) == 2 and all(isinstance(text, str) for text, _, _ in filled)
        tuned = RobertaModel.from_pretrained(
            str(runs / arch / "glue" / "SST-2"), checkpoint_file="checkpoint_best.pt",
            data_name_or_path=str(bert / "glue" / "SST-2-bin"), bpe="sentencepiece", sentencepiece_model=spm,
            user_dir=USER_DIR).eval()
        logprobs = tuned.predict("sentence_classification_head", tuned.encode("Zol go lem dokomi."))
        assert logprobs.shape == (1, 2) and torch.allclose(logprobs.exp().sum(), torch.tensor(1.0))
