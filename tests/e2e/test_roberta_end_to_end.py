"""RoBERTa archs through fairseq-train (scripts/pretrain-bert.sh): two-phase
pretraining with resume, TensorBoard scalars and mask images, DAM export and
its second stage, gates and results on RoBERTa checkpoints."""

from pathlib import Path

import pytest
import torch

from helpers import run

pytestmark = pytest.mark.slow

TINY = ["--encoder-embed-dim", "48", "--encoder-ffn-embed-dim", "96", "--log-interval", "1",
        "--num-workers", "0", "--seed", "1"]


@pytest.fixture(scope="module")
def mlm_data(tmp_path_factory) -> Path:
    """A masked-LM data-bin of synthetic sentences (one a line)."""
    out = tmp_path_factory.mktemp("mlm")
    run(["python", "-m", "fairseq_local_data.synthetic", "--out-dir", str(out / "raw"), "--train", "300",
         "--valid", "40", "--test", "5"])
    run(["fairseq-preprocess", "--only-source", "--trainpref", str(out / "raw" / "train.src"),
         "--validpref", str(out / "raw" / "valid.src"), "--destdir", str(out / "bin"), "--workers", "1"])
    return out / "bin"


def pretrain(data, arch, save, *extra, updates=4, updates_512=0):
    return run(["bash", "scripts/pretrain-bert.sh", arch, "--data", str(data), "--save-dir", str(save),
                "--updates", str(updates), "--updates-512", str(updates_512), "--lengths", "32,64",
                "--max-positions", "64", "--batch-size", "16", "--update-freq", "1", "--warmup", "2",
                "--lr", "1e-3", "--cpu", "--", *TINY, *extra])


def tb_tags(logdir: Path, kind: str) -> set:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    tags = set()
    for f in logdir.glob("events.*"):
        acc = EventAccumulator(str(f))
        acc.Reload()
        tags |= set(acc.Tags()[kind])
    return tags


def test_two_phases_resume_and_loss_falls(mlm_data, tmp_path):
    save = tmp_path / "band6"
    pretrain(mlm_data, "roberta_band6_120_tied", save, updates=6, updates_512=2)
    first = torch.load(save / "len32" / "checkpoint_last.pt", weights_only=False)
    second = torch.load(save / "len64" / "checkpoint_last.pt", weights_only=False)
    assert first["optimizer_history"][-1]["num_updates"] == 6
    assert second["optimizer_history"][-1]["num_updates"] == 8  # phase 2 goes on from phase 1
    # each phase's folder was locked while it trained and released cleanly (one job per folder)
    assert (save / "len32" / ".lock").read_text() == (save / "len64" / ".lock").read_text() == ""
    last = save / "checkpoint_last.pt"  # SAVE_DIR links the last phase's checkpoint
    assert last.is_symlink() and last.resolve() == (save / "len64" / "checkpoint_last.pt").resolve()
    log = (save / "len32" / "train.log").read_text()
    losses = [float(line.split(" loss=")[1].split(",")[0]) for line in log.splitlines() if " loss=" in line]
    assert losses[-1] < losses[0]
    # A re-run skips both finished phases and trains no further.
    r = pretrain(mlm_data, "roberta_band6_120_tied", save, updates=6, updates_512=2)
    assert "skip: roberta_band6_120_tied len32 already at update 6" in r.stderr
    assert "skip: roberta_band6_120_tied len64 already at update 8" in r.stderr
    again = torch.load(save / "len64" / "checkpoint_last.pt", weights_only=False)
    assert again["optimizer_history"][-1]["num_updates"] == 8
    # An interrupted phase 2 (its checkpoint at update 7) resumes from its own checkpoint.
    second["optimizer_history"][-1]["num_updates"] = 7
    torch.save(second, save / "len64" / "checkpoint_last.pt")
    r = pretrain(mlm_data, "roberta_band6_120_tied", save, updates=6, updates_512=2)
    assert "len64/checkpoint_last.pt (epoch" in r.stdout + r.stderr
    assert "taking the lock over" not in r.stderr
    assert tb_tags(save / "len32" / "tb" / "train", "scalars") >= {"loss", "rho", "ppl"}


def test_dam_images_export_and_second_stage(mlm_data, tmp_path):
    stage1 = tmp_path / "dam"
    pretrain(mlm_data, "roberta_dam_u", stage1, "--dam-lambda", "1e-3", "--mask-image-interval", "2",
             "--mask-image-len", "16")
    ckpt = stage1 / "len32" / "checkpoint_last.pt"
    best = stage1 / "checkpoint_best.pt"  # and its lowest dev loss, for a run trained to a plateau
    assert best.is_symlink() and best.resolve() == (stage1 / "len32" / "checkpoint_best.pt").resolve()
    assert {"masks/l1_h1_dam-u_P", "masks/l1_h12_dam-u_P"} <= tb_tags(stage1 / "len32" / "tb" / "train", "images")
    assert {"dam_loss", "dam_density"} <= tb_tags(stage1 / "len32" / "tb" / "valid", "scalars")
    masks = tmp_path / "masks.pt"
    out = run(["fairseq-local", "export", str(ckpt), "--out", str(masks), "--n", "32"]).stdout
    assert "wrote 144 masks" in out and "--attn-layout '[file*12]*12'" in out
    r = pretrain(mlm_data, "roberta_local_base", tmp_path / "stage2", "--attn-layout", "[file*12]*12",
                 "--mask-file", str(masks), "--restore-file", str(ckpt), "--reset-optimizer",
                 "--reset-dataloader", "--reset-meters", "--encoder-layers", "12", "--encoder-attention-heads", "12")
    assert "dropped 144 and initialised 0 learned-mask/gate tensors" in r.stdout + r.stderr


def test_gates_and_results_on_roberta_checkpoints(mlm_data, tmp_path):
    runs = tmp_path / "runs"
    pretrain(mlm_data, "roberta_head_gates", runs / "gates", "--gate-lambda", "0.1")
    out = run(["fairseq-local", "gates", str(runs / "gates" / "len32" / "checkpoint_last.pt")]).stdout
    lines = out.splitlines()
    assert len(lines) == 1 + 144 + 1 and lines[-1].startswith("open heads: ")
    table = run(["fairseq-local", "results", str(runs / "gates"), "--runs", "len32"]).stdout
    assert "| len32 | roberta_head_gates | 110,592 |" in table  # 12 layers x 4 x 48 x 48
