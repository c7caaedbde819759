"""A run never resumes into another model: the encoder's signature (arch,
layout, mask mode, mask options) is saved with its weights and compared when
fairseq loads a checkpoint with its optimizer state; new stages
(``--reset-optimizer``, ``--finetune-from-model``) are allowed.  Also the
checks made when the model is built or put into training mode."""

import argparse
import hashlib
import subprocess
import sys

import pytest
import torch

from helpers import ENV, ROOT, TINY, USER_DIR, train
from helpers.probes import one_line_error
from fairseq_local.errors import OptionError, ResumeError
from fairseq_local.models.resume import check_resume, differences, is_resume, model_signature
from fairseq_local.models.roberta import build_roberta
from fairseq_local.models.transformer import build_encoder

ALL6 = "transformer_local_8lochead_all6"


def sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def fairseq_train(data, arch, save, *extra) -> subprocess.CompletedProcess:
    cmd = ["fairseq-train", str(data), "--user-dir", USER_DIR, "--arch", arch, "--share-all-embeddings",
           "--optimizer", "adam", "--lr-scheduler", "inverse_sqrt", "--criterion", "label_smoothed_cross_entropy",
           "--save-dir", str(save), "--no-epoch-checkpoints", *TINY, *extra]
    return subprocess.run(cmd, cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def all6_run(tiny_data, tmp_path_factory):
    save = tmp_path_factory.mktemp("all6")
    train(tiny_data, ALL6, save, "--max-update", "2", "--no-epoch-checkpoints")
    return save


@pytest.mark.slow
@pytest.mark.parametrize("arch, extra, needle", [
    ("transformer_local_baseline", [], "--arch transformer_local_8lochead_all6 vs transformer_local_baseline"),
    (ALL6, ["--mask-mode", "pre"], "--mask-mode post vs pre"),
    (ALL6, ["--attn-layout", "[band-1*8]*6"], "--attn-layout"),
])
def test_fairseq_train_refuses_to_resume_another_model(tiny_data, all6_run, tmp_path, arch, extra, needle):
    """Plain fairseq-train --user-dir: one line naming both sides; the
    checkpoints are unchanged and no crash.pt is written."""
    before = {p.name: sha(p) for p in all6_run.glob("*.pt")}
    r = fairseq_train(tiny_data, arch, all6_run, "--max-update", "4", *extra)
    assert r.returncode != 0
    line = one_line_error(r.stderr.replace(r.stdout, ""), "cannot resume", needle, "--reset-optimizer")
    assert "saved vs this run" in line
    assert {p.name: sha(p) for p in all6_run.glob("*.pt")} == before
    assert not (all6_run / "crash.pt").exists()


@pytest.mark.slow
def test_a_new_stage_from_another_arch_is_allowed(tiny_data, all6_run, tmp_path):
    """--restore-file X --reset-optimizer starts a new run from other weights."""
    r = fairseq_train(tiny_data, "transformer_local_baseline", tmp_path / "b", "--max-update", "3",
                      "--restore-file", str(all6_run / "checkpoint_last.pt"), "--reset-optimizer",
                      "--reset-dataloader", "--reset-meters")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "new stage from" in r.stdout + r.stderr


@pytest.mark.slow
def test_same_model_resumes(tiny_data, all6_run):
    r = fairseq_train(tiny_data, ALL6, all6_run, "--max-update", "3")
    assert r.returncode == 0, r.stderr[-2000:]
    state = torch.load(all6_run / "checkpoint_last.pt", map_location="cpu", weights_only=False)
    assert state["optimizer_history"][-1]["num_updates"] == 3
    assert state["model"]["encoder._extra_state"]["signature"]["arch"] == ALL6


def test_signature_and_resume_rule():
    base = argparse.Namespace(arch="a", attn_layout="[band-1,global]", mask_mode="post")
    other = argparse.Namespace(arch="a", attn_layout="[global*2]", mask_mode="post")
    s, o = model_signature(base), model_signature(other)
    assert differences(s, o) == ["--attn-layout [band-1,global] vs [global*2]"]
    run = dict(save_dir="x", reset_optimizer=False)
    with pytest.raises(ResumeError, match="cannot resume"):
        check_resume(s, o, run)
    check_resume(s, o, dict(run, reset_optimizer=True))  # a new stage
    check_resume(None, o, run)  # a checkpoint from before signatures
    check_resume(s, s, run)
    assert not is_resume(None) and not is_resume(dict(save_dir="x", finetune_from_model="m.pt"))
    # DAM options count only with DAM heads; C only with learned masks.
    dam = model_signature(argparse.Namespace(arch="d", attn_layout="[dam-s,global]", dam_max_len=64))
    assert dam["dam_max_len"] == "64" and dam["mask_neg"] == "-10000.0"
    assert "dam_max_len" not in s and "mask_neg" not in s


def test_in_process_load_refuses_and_old_checkpoints_load():
    """RoBERTa too: load_state_dict with a training run's options refuses
    another layout; a state dict without a signature (older checkpoints)
    loads."""
    small = dict(encoder_layers=2, encoder_embed_dim=16, encoder_ffn_embed_dim=32, encoder_attention_heads=2)
    a = build_roberta("roberta_local_base", dict(small, attn_layout="[band-1,global]*2"))
    b = build_roberta("roberta_local_base", dict(small))
    state = a.state_dict()
    run = argparse.Namespace(save_dir="x", reset_optimizer=False)
    with pytest.raises(ResumeError, match=r"--attn-layout \[band-1,global\]\*2 vs \[global\*2\]\*2"):
        b.load_state_dict(state, model_cfg=run)
    del state["encoder.sentence_encoder._extra_state"]
    b.load_state_dict(state, model_cfg=run)


def test_build_time_checks(capsys):
    with pytest.raises(OptionError, match="not a multiple of the 4 attention heads"):
        build_encoder("transformer_local", dict(encoder_embed_dim=30, encoder_attention_heads=4))
    with pytest.raises(OptionError, match="--dam-max-len 100000000 is longer than the model's 1024 positions"):
        build_encoder("transformer_dam_s", dict(dam_max_len=100_000_000))
    enc = build_encoder("transformer_dam_s", dict(dam_max_len=64, encoder_embed_dim=16, encoder_layers=2,
                                                  encoder_attention_heads=2, attn_layout="[dam-s,global]*2"))
    assert enc.max_positions() == 64  # fairseq skips or refuses longer sentences before training
    small = dict(dam_max_len=64, encoder_layers=2, encoder_embed_dim=16, encoder_ffn_embed_dim=32,
                 encoder_attention_heads=2, attn_layout="[dam-s,global]*2")
    assert build_roberta("roberta_dam_s", small).encoder.max_positions() == 64  # was 512
    with pytest.raises(OptionError, match="cover 64 positions, fewer than the 512 of --tokens-per-sample"):
        build_roberta("roberta_dam_s", dict(small, task="masked_lm", tokens_per_sample=512))


@pytest.mark.slow
def test_flex_on_cpu_is_refused_before_training(tiny_data, tmp_path):
    """--attn-impl flex on the CPU: one line when training starts, before
    fairseq's first step, so no crash.pt anywhere."""
    r = fairseq_train(tiny_data, ALL6, tmp_path / "s", "--max-update", "2",
                      "--attn-impl", "flex", "--attention-dropout", "0", "--cpu")
    assert r.returncode != 0
    one_line_error(r.stderr.replace(r.stdout, ""), "--attn-impl flex cannot train here", "no backward on CPU")
    assert not list(tmp_path.rglob("crash.pt"))


@pytest.mark.slow
def test_unused_penalty_weights_warn_once(tiny_data, tmp_path):
    r = fairseq_train(tiny_data, "transformer_local_baseline", tmp_path / "s", "--max-update", "2",
                      "--criterion", "label_smoothed_cross_entropy_with_sparsity", "--gate-lambda", "0.1",
                      "--dam-lambda", "0.2", "--aaa-alpha", "0.3", "--mask-file", str(tmp_path / "none.pt"))
    assert r.returncode == 0, r.stderr[-2000:]
    out = r.stdout + r.stderr
    assert out.count("warning: --gate-lambda 0.1 has no effect: the model has no ':gate' heads") == 1
    assert out.count("warning: --dam-lambda 0.2 has no effect: the model has no dam-u/dam-s heads") == 1
    assert out.count("warning: --aaa-alpha 0.3 has no effect: the model has no aaa heads") == 1
    assert out.count("is not used: the layout has no 'file' heads") == 1


@pytest.mark.slow
def test_resume_check_command(tiny_data, all6_run):
    """python -m fairseq_local_cli.check_resume, the scripts' check before they write."""
    cmd = [sys.executable, "-m", "fairseq_local_cli.check_resume", str(all6_run / "checkpoint_last.pt"),
           str(tiny_data), "--user-dir", USER_DIR, "--arch", "transformer_local_baseline",
           "--save-dir", str(all6_run)]
    r = subprocess.run(cmd, cwd=ROOT, env=ENV, capture_output=True, text=True)
    assert r.returncode == 1
    one_line_error(r.stderr, "cannot resume", "--arch transformer_local_8lochead_all6 vs transformer_local_baseline")
    r = subprocess.run(cmd[:-4] + ["--arch", ALL6, "--save-dir", str(all6_run)], cwd=ROOT, env=ENV,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


@pytest.mark.slow
def test_data_longer_than_the_dam_mask_is_refused_before_training(tiny_data, tmp_path):
    """--dam-max-len shorter than the data: the encoder's max_positions() is
    the mask's, so fairseq's validation dry run refuses the longer sentences
    before any update (one line, no crash.pt, no checkpoint); with
    --skip-invalid-size-inputs-valid-test fairseq skips them and trains."""
    args = ["--max-update", "2", "--dam-max-len", "24", "--attn-layout", "[dam-s,global*7]*6"]
    r = fairseq_train(tiny_data, "transformer_dam_s", tmp_path / "s", *args)
    assert r.returncode != 0
    one_line_error(r.stderr.replace(r.stdout, ""), "is invalid", "max_positions=(24, 1024)",
                   "--skip-invalid-size-inputs-valid-test")
    assert "takes sentences of at most 24 tokens" in r.stdout + r.stderr
    assert not list(tmp_path.rglob("*.pt"))
    r = fairseq_train(tiny_data, "transformer_dam_s", tmp_path / "s", *args, "--skip-invalid-size-inputs-valid-test")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "have invalid sizes and will be skipped" in r.stdout + r.stderr


@pytest.mark.slow
def test_fairseqs_too_long_sample_error_is_one_line():
    code = ("import fairseq_local\n"
            "raise Exception('Size of sample #3 is invalid (=(90, 12)) since max_positions=(8, 1024), "
            "skip this example with --skip-invalid-size-inputs-valid-test')")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=ENV, capture_output=True, text=True)
    assert r.returncode == 1
    one_line_error(r.stderr, "Size of sample #3 is invalid", "max_positions=(8, 1024)")


def _arch_signature(arch: str, **options):
    from fairseq.models import ARCH_CONFIG_REGISTRY

    args = argparse.Namespace(arch=arch, **options)
    ARCH_CONFIG_REGISTRY[arch](args)
    return model_signature(args)


def test_every_named_arch_refuses_every_other_and_other_modes():
    """Every pair of named archs (NMT and RoBERTa), and each arch under the
    other mask mode: a resume is refused, and a fixed-mask arch differs from
    the all-global one in its layout, not only in its name."""
    from fairseq_local.models.archs import NAMED_ARCHS, ROBERTA_ARCHS

    run = dict(save_dir="x", reset_optimizer=False)
    archs = [c.arch for c in (*NAMED_ARCHS, *ROBERTA_ARCHS)]
    sigs = {a: _arch_signature(a) for a in archs}
    for a in archs:
        for b in archs:
            if a != b:
                with pytest.raises(ResumeError):
                    check_resume(sigs[a], sigs[b], run)
        other = "pre" if sigs[a]["mask_mode"] == "post" else "post"
        with pytest.raises(ResumeError, match="--mask-mode"):
            check_resume(sigs[a], _arch_signature(a, mask_mode=other), run)
    assert differences(sigs["transformer_local_8lochead_all6"], sigs["transformer_local_baseline"])[1].startswith(
        "--attn-layout")


def test_segment_embeddings_are_part_of_the_signature():
    from fairseq_local.errors import ResumeError
    from fairseq_local.models.resume import check_resume, model_signature

    for layout in (None, "[global*2]*2"):
        off = model_signature({"arch": "roberta_local_base", "attn_layout": layout})
        on = model_signature({"arch": "roberta_local_base", "attn_layout": layout, "segment_embeddings": True})
        assert "segment_embeddings" not in off and on["segment_embeddings"] == "True"
        with pytest.raises(ResumeError, match="--segment-embeddings True vs -"):
            check_resume(on, off, {"save_dir": "/nonexistent"})
