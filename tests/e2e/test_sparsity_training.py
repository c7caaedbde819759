"""Learned masks and gates through fairseq's own CLIs on the tiny synthetic
corpus: sparsity terms at work, resume, export and the two-stage workflow,
TensorBoard images, one-line errors."""

import json
import re

import pytest
import torch

from helpers import TINY, USER_DIR, checkpoint_params as _params, run, train, two_workers

pytestmark = pytest.mark.slow  # end-to-end: every test runs fairseq or a pipeline

SPARSE = ["--criterion", "label_smoothed_cross_entropy_with_sparsity", "--dam-max-len", "128"]


def train_fails(data, arch, save, *extra) -> str:
    """Train expecting a one-line error; returns that line."""
    r = run(["bash", "scripts/train.sh", "--data", str(data), "--arch", arch, "--save-dir", str(save),
             "--", *TINY, *extra], check=False)
    assert r.returncode != 0 and "Traceback" not in r.stdout + r.stderr
    return r.stdout.strip().splitlines()[-1]  # train.sh passes fairseq's stderr to its stdout


def logged(save, name):
    """The values of ``name`` in the train_inner lines of SAVE/train.log."""
    text = (save / "train.log").read_text()
    return [float(v) for v in re.findall(rf"train_inner .*?\b{name}=([0-9.e-]+)", text)]


# aaa, DAM, gated and fixed heads, every penalty on; rates must equal their
# configured or realised values however the logging outputs were summed.
LEARNED = [*SPARSE, "--attn-layout", "[aaa,dam-s,global:gate,band-1,global*4]*6", "--aaa-alpha", "0.7",
           "--aaa-target", "0.5", "--dam-lambda", "1e-4", "--gate-lambda", "0.1", "--log-format", "json",
           "--update-freq", "2", "--max-update", "3"]


def check_logged_rates(text: str) -> None:
    records = [json.loads(line[line.index('{"'):]) for line in text.splitlines() if '{"' in line]
    steps = [r for r in records if "loss" in r and "update" in r]
    valid = [r for r in records if "valid_loss" in r]
    assert len(steps) == 3 and valid, text[-2000:]
    for r, prefix in [(r, "") for r in steps] + [(r, "valid_") for r in valid]:
        assert float(r[prefix + "aaa_alpha"]) == 0.7 and float(r[prefix + "tau"]) == 1.0, r
        assert 0 <= float(r[prefix + "gates_open"]) <= 1 and 0 < float(r[prefix + "rho"]) < 1, r
        assert 0 < float(r[prefix + "dam_density"]) <= 1 and 0 <= float(r[prefix + "aaa_rows"]) <= 1, r
        for name in ("dam_loss", "aaa_loss", "gate_loss", "rho_l6"):  # each its own scalar
            assert prefix + name in r, (name, r)


def test_logged_rates_under_update_freq(tiny_data, tmp_path):
    train(tiny_data, "transformer_local", tmp_path / "run", *LEARNED)
    check_logged_rates((tmp_path / "run" / "train.log").read_text())


def test_logged_rates_with_two_workers(tiny_data, tmp_path):
    outputs = two_workers(tmp_path, [
        str(tiny_data), "--user-dir", USER_DIR, "--arch", "transformer_local", "--optimizer", "adam",
        "--lr-scheduler", "inverse_sqrt", "--label-smoothing", "0.1", "--share-all-embeddings", "--cpu",
        "--no-save", *TINY, *LEARNED])
    check_logged_rates(outputs[0])


def test_dam_density_falls_as_lambda_grows(tiny_data, tmp_path):
    alpha, density = [], []
    for lam in ["0", "0.1"]:  # the largest of SparseBERT's lambdas, in its L1 convention
        save = tmp_path / f"dam{lam}"
        train(tiny_data, "transformer_dam_s", save, *SPARSE, "--dam-lambda", lam, "--dam-init", "0.3",
              "--lr", "0.1", "--warmup-updates", "100", "--warmup-init-lr", "0.1", "--max-update", "25")
        state = _params(save / "checkpoint_last.pt")
        # α of the offsets that the corpus's sentences use (dam-s: one α per offset)
        alpha.append(torch.stack([v[:16] for k, v in state.items() if k.endswith("alpha")]).mean().item())
        values = logged(save, "dam_density")
        assert len(values) == 25 and all(0 < v <= 1 for v in values)
        density.append(sum(values[-5:]) / 5)
        assert (logged(save, "dam_loss")[-1] > 0) == (lam != "0")
    assert alpha[1] < 0 < alpha[0], alpha  # the L1 term closes the mask
    assert density[1] < density[0] - 0.2, density


def test_aaa_drives_rho_towards_its_target(tiny_data, tmp_path):
    save = tmp_path / "aaa"
    train(tiny_data, "transformer_aaa", save, *SPARSE, "--aaa-target", "0.6", "--aaa-alpha", "0.05",
          "--aaa-alpha-updates", "10", "--lr", "2e-2", "--max-update", "30")
    rho = logged(save, "aaa_rho")
    assert len(rho) == 30 and rho[0] < 0.5
    assert abs(sum(rho[-5:]) / 5 - 0.6) < abs(rho[0] - 0.6) / 2, rho
    for name in ["aaa_loss", "aaa_rows", "aaa_cols", "rho", "rho_l6", "tau"]:
        assert logged(save, name), name
    assert logged(save, "aaa_alpha")[:2] == [0.0, 0.005]  # linear warm-up of α to 0.05 at update 10


def test_resume_with_noise_schedules_and_gates_equals_uninterrupted(tiny_data, tmp_path):
    extra = [*SPARSE, "--attn-layout", "[dam-u,dam-s,aaa,global:gate,band-1,global*3]*6",
             "--dam-lambda", "0.1", "--aaa-target", "0.5", "--aaa-alpha", "1", "--aaa-alpha-updates", "8",
             "--gate-lambda", "0.01", "--tau-anneal", "linear", "--tau-end", "0.2",
             "--tau-anneal-updates", "8", "--mask-image-interval", "2"]
    n = 4
    train(tiny_data, "transformer_local", tmp_path / "resumed", *extra, "--max-update", str(n))
    train(tiny_data, "transformer_local", tmp_path / "resumed", *extra, "--max-update", str(2 * n))
    train(tiny_data, "transformer_local", tmp_path / "straight", *extra, "--max-update", str(2 * n))
    a = _params(tmp_path / "resumed" / "checkpoint_last.pt")
    b = _params(tmp_path / "straight" / "checkpoint_last.pt")
    assert a.keys() == b.keys() and any(k.endswith("log_alpha") for k in a)
    for k in a:
        assert torch.equal(a[k], b[k]), k
    # τ went on from where it stopped: the same values as the uninterrupted run
    assert logged(tmp_path / "resumed", "tau") == logged(tmp_path / "straight", "tau")
    assert logged(tmp_path / "straight", "tau")[-1] == pytest.approx(1 - 0.8 * 7 / 8, abs=1e-3)
    # the learned masks went to TensorBoard as images
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    tags = set()
    for f in (tmp_path / "straight" / "tb" / "train").glob("events.*"):
        acc = EventAccumulator(str(f))
        acc.Reload()
        tags |= set(acc.Tags()["images"])
    assert {"masks/l1_h1_dam-u_P", "masks/l1_h2_dam-s_P", "masks/l1_aaa", "masks/l6_aaa"} <= tags


def test_export_two_stage_finetune_and_generate(tiny_data, tmp_path):
    stage1 = tmp_path / "stage1"
    train(tiny_data, "transformer_dam_u", stage1, *SPARSE, "--dam-lambda", "1", "--max-update", "4")
    # Distinct α everywhere (a few updates leave most of them tied at --dam-init).
    ckpt = torch.load(stage1 / "checkpoint_last.pt", weights_only=False)
    torch.manual_seed(0)
    for h in range(8):
        alpha = torch.randn_like(ckpt["model"][f"encoder.layers.0.self_attn.learned.dam.{h}.alpha"])
        for layer in range(6):
            ckpt["model"][f"encoder.layers.{layer}.self_attn.learned.dam.{h}.alpha"] = alpha
    torch.save(ckpt, stage1 / "checkpoint_last.pt")
    for args, method in [([], "hard"), (["--prune", "90", "--n", "20"], "prune-90")]:
        out = run(["python", "-m", "fairseq_local_cli.export", str(stage1 / "checkpoint_last.pt"),
                   "--out", str(tmp_path / f"{method}.pt"), "--png", str(tmp_path / f"{method}.png"), *args])
        assert f"({method}," in out.stdout
        assert "--attn-layout '[file*8]*6'" in out.stdout
        assert (tmp_path / f"{method}.png").read_bytes()[:4] == b"\x89PNG"
    hard = torch.load(tmp_path / "hard.pt", weights_only=True)
    alpha0 = ckpt["model"]["encoder.layers.0.self_attn.learned.dam.0.alpha"]
    i, j = torch.triu_indices(128, 128)
    assert hard["masks"]["3.0"]["matrix"].shape == (128, 128)  # --dam-max-len
    assert torch.equal(hard["masks"]["3.0"]["matrix"][i, j], alpha0[i * 128 - i * (i - 1) // 2 + j - i] > 0)
    pruned = torch.load(tmp_path / "prune-90.pt", weights_only=True)
    assert pruned["method"] == "prune-90" and len(pruned["masks"]) == 48
    for entry in pruned["masks"].values():  # 10 % of 20 x 20, and its symmetric twin if tied
        m = entry["matrix"]
        assert m.sum() in (40, 41) and torch.equal(m, m.T) and not entry["ends"]

    stage2 = tmp_path / "stage2"
    r = train(tiny_data, "transformer_local", stage2, "--attn-layout", "[file*8]*6",
              "--mask-file", str(tmp_path / "hard.pt"), "--restore-file", str(stage1 / "checkpoint_last.pt"),
              "--reset-optimizer", "--reset-dataloader", "--reset-meters", "--max-update", "4")
    assert "dropped 48 and initialised 0 learned-mask/gate tensors" in r.stdout + r.stderr
    short = train_fails(tiny_data, "transformer_local", tmp_path / "short", "--attn-layout", "[file*8]*6",
                        "--mask-file", str(tmp_path / "prune-90.pt"), "--max-update", "1")
    # A mask file exported at n = 20 limits the encoder to 20 positions: fairseq's
    # validation dry run refuses longer sentences before the first update.
    assert re.fullmatch(r"error: Size of sample #\d+ is invalid .* since max_positions=\(20, 1024\), "
                        r"skip this example with --skip-invalid-size-inputs-valid-test", short), short
    assert not list((tmp_path / "short").glob("*.pt"))
    state = _params(stage2 / "checkpoint_last.pt")
    assert not any(k.endswith("alpha") for k in state)
    run(["bash", "scripts/generate.sh", "--data", str(tiny_data), "--checkpoint",
         str(stage2 / "checkpoint_last.pt"), "--out", str(stage2), "--beam", "2"])
    assert len((stage2 / "test.hyp").read_text().splitlines()) == 30


def test_gates_finetuned_from_a_trained_model(tiny_data, tmp_path):
    base = tmp_path / "base"
    train(tiny_data, "transformer_local_baseline", base, "--max-update", "3")
    gated = tmp_path / "gated"
    r = train(tiny_data, "transformer_head_gates", gated, "--restore-file", str(base / "checkpoint_last.pt"),
              "--reset-optimizer", "--reset-dataloader", "--reset-meters",
              "--criterion", "label_smoothed_cross_entropy_with_sparsity", "--gate-lambda", "0.5",
              "--gate-init", "-1.5", "--lr", "0.1", "--warmup-updates", "100", "--warmup-init-lr", "0.1",
              "--max-update", "15")
    assert "initialised 6 learned-mask/gate tensors" in r.stdout + r.stderr
    opened = logged(gated, "gates_open")
    assert opened[0] == 1.0 and opened[-1] < 1.0  # the L0 term closes gates
    out = run(["python", "-m", "fairseq_local_cli.gates", str(gated / "checkpoint_last.pt")]).stdout
    lines = out.splitlines()
    assert len(lines) == 1 + 48 + 1 and "closed" in out
    closed = sum(line.endswith("closed") for line in lines[1:-1])
    assert lines[-1].startswith(f"open heads: {48 - closed} of 48 (L1: ")


@pytest.mark.parametrize("cmd, message", [
    (["fairseq-train", "{data}", "--arch", "transformer_dam_s", "--criterion",
      "label_smoothed_cross_entropy_with_sparsity", "--aaa-target", "2"],
     "error: --aaa-target must be in [0, 1], not 2.0"),
    (["fairseq-train", "{data}", "--arch", "transformer_local", "--attn-layout", "[file*8]*6"],
     "error: layout head 'file-0.0' (layer 1) needs --mask-file"),
    (["fairseq-train", "{data}", "--arch", "transformer_dam_s", "--tau-start", "-1"],
     "error: --tau-*: tau must be > 0 (got start -1.0, end -1.0)"),
    (["python", "-m", "fairseq_local_cli.export", "{data}/none.pt", "--out", "x.pt"],
     "error: [Errno 2] No such file or directory: '{data}/none.pt'"),
])
def test_one_line_errors(tiny_data, cmd, message):
    cmd = [c.replace("{data}", str(tiny_data)) for c in cmd]
    if cmd[0] == "fairseq-train":
        cmd += ["--user-dir", USER_DIR, "--cpu", "--max-tokens", "1000"]
    r = run(cmd, check=False)
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines()[-1] == message.replace("{data}", str(tiny_data))
