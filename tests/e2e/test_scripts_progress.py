"""A run on a shared machine tells you where it is: train.sh's progress line
(update N of M, elapsed, an estimate, where the log is), one line on Ctrl-C or
SIGTERM saying what a re-run does, generate.sh skipping a translation whose
outputs are newer than its inputs, and the demos' thread default."""

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from helpers import ENV, ROOT
from helpers.jobs import data_folder, fake_checkpoint, fake_tools, script

pytestmark = pytest.mark.slow  # runs the scripts as processes

BLEU = "echo '{\"name\": \"BLEU\", \"score\": 100.0, \"signature\": \"nrefs:1\"}'"


def train(data, save, *extra):
    return ["bash", "scripts/train.sh", "--data", str(data), "--arch", "a", "--save-dir", str(save), "--",
            "--cpu", *map(str, extra)]


def test_training_prints_one_progress_line_per_tenth_and_logs_everything(tmp_path):
    env = fake_tools(tmp_path, BLEU)
    save = tmp_path / "run"
    r = subprocess.run(train(data_folder(tmp_path), save, "--max-update", 20), cwd=ROOT, env=env,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    lines = [line for line in r.stderr.splitlines() if "transformer_local_baseline: update" in line]
    assert [line.split(": update ")[1].split(",")[0] for line in lines] == [
        f"{u} of 20 ({5 * u} %)" for u in [1, *range(2, 21, 2)]]  # the first, then each tenth
    assert all(line.endswith(f"left (log: {save}/train.log)") and " elapsed, about " in line for line in lines)
    updates = [f"num_updates={u}" for u in range(1, 21)]
    assert [line.split(", ")[-1] for line in r.stdout.splitlines()] == updates  # stdout as tee gave it
    assert [line.split(", ")[-1] for line in (save / "train.log").read_text().splitlines()] == updates


def interrupt(cmd, env, log: Path, sig) -> subprocess.CompletedProcess:
    """Run cmd in its own process group with Ctrl-C's default action, and send
    sig to the group once log has a line (as a terminal or Slurm does)."""
    p = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.time() + 120
    while not (log.exists() and "num_updates=" in log.read_text()):
        assert p.poll() is None and time.time() < deadline, p.communicate()
        time.sleep(0.1)
    time.sleep(0.5)
    os.killpg(p.pid, sig)
    out, err = p.communicate(timeout=120)
    return subprocess.CompletedProcess(cmd, p.returncode, out, err)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.parametrize("checkpoint_at", [0, 1])
def test_an_interrupted_training_is_one_line_saying_what_a_rerun_does(tmp_path, sig, checkpoint_at):
    env = fake_tools(tmp_path, BLEU)
    save = tmp_path / "run"
    r = interrupt(train(data_folder(tmp_path), save, "--max-update", 1000, "--delay", 0.2,
                        "--checkpoint-at", checkpoint_at), env, save / "train.log", sig)
    assert r.returncode == 130
    what = (f"resumes it from {save}/checkpoint_last.pt" if checkpoint_at
            else "stopped before its first checkpoint; the same command starts it again")
    assert r.stderr.splitlines()[-1].startswith("interrupted: training transformer_local_baseline ")
    assert r.stderr.splitlines()[-1].endswith(what)
    assert [line for line in r.stderr.splitlines() if not line.startswith("[")] == [r.stderr.splitlines()[-1]]
    assert "Traceback" not in r.stdout + r.stderr and "Terminated" not in r.stderr
    if sig == signal.SIGINT:  # fairseq's last words are kept in the log, not shown
        assert "KeyboardInterrupt" in (save / "train.log").read_text()


def test_fairseq_interrupted_is_one_line_and_its_traceback_only_in_the_log(tiny_data, tmp_path):
    save = tmp_path / "run"
    small = ["--encoder-embed-dim", 32, "--encoder-ffn-embed-dim", 64, "--decoder-embed-dim", 32,
             "--decoder-ffn-embed-dim", 64, "--decoder-layers", 1, "--max-tokens", 256, "--log-interval", 1]
    r = interrupt(train(tiny_data, save, *small, "--max-update", 100000), ENV, save / "train.log", signal.SIGINT)
    assert r.returncode == 130
    assert [line for line in r.stderr.splitlines() if not line.startswith("[")] == [
        "interrupted: training transformer_local_baseline stopped before its first checkpoint; the same command "
        "starts it again"]
    assert "Traceback" not in r.stdout + r.stderr and "KeyboardInterrupt" in (save / "train.log").read_text()
    assert "of 100000 (0 %)" in r.stderr  # the progress line came first


def test_inside_another_script_training_leaves_the_line_to_it(tmp_path):
    env = dict(fake_tools(tmp_path, BLEU), FAIRSEQ_LOCAL_INTERRUPT_OWNER="1")  # the demo's process, say
    save = tmp_path / "run"
    r = interrupt(train(data_folder(tmp_path), save, "--max-update", 1000, "--delay", 0.2), env,
                  save / "train.log", signal.SIGINT)
    assert r.returncode == 130 and "interrupted" not in r.stderr and "Traceback" not in r.stderr


def test_generate_skips_a_translation_newer_than_its_inputs(tmp_path):
    data, ckpt, out = data_folder(tmp_path), fake_checkpoint(tmp_path / "model.pt"), tmp_path / "gen"
    env = fake_tools(tmp_path, BLEU)
    runs = tmp_path / "generated"

    def generate(*extra):
        r = script("generate.sh", "--data", data, "--checkpoint", ckpt, "--out", out, *extra, env=env)
        assert r.returncode == 0, r.stderr
        return r.stderr, len(runs.read_text().splitlines())

    assert generate()[1] == 1
    err, n = generate()
    assert n == 1 and f"skip: {out}/test.bleu.json is newer than {ckpt} and made with the same settings" in err
    assert "BLEU 100.0" in err
    assert generate("--beam", 2)[1] == 2  # other settings
    assert generate("--beam", 2)[1] == 2
    later = time.time() + 5
    os.utime(ckpt, (later, later))  # the checkpoint improved since
    assert generate("--beam", 2)[1] == 3
    assert generate("--beam", 2, "--force")[1] == 4
    (out / "test.hyp").unlink()  # an output missing
    assert generate("--beam", 2)[1] == 5
    assert json.loads((out / "test.bleu.json").read_text())["score"] == 100.0


def threads(env_threads):
    env = {k: v for k, v in ENV.items() if k != "OMP_NUM_THREADS"}
    if env_threads:
        env["OMP_NUM_THREADS"] = env_threads
    return subprocess.run(["bash", "-c", "source scripts/lib.sh && default_threads && echo $OMP_NUM_THREADS"],
                          cwd=ROOT, env=env, capture_output=True, text=True, check=True)


def test_the_demos_default_to_the_cores_not_busy():
    r = threads(None)
    n, cores = int(r.stdout), os.cpu_count()
    load = os.getloadavg()[0]
    assert 1 <= n <= cores and abs(n - max(1, round(cores - load))) <= 1  # the load moves as we read it
    assert f"threads: {n} of " in r.stderr and "OMP_NUM_THREADS=N chooses" in r.stderr
    r = threads("3")
    assert r.stdout.strip() == "3" and r.stderr == ""
