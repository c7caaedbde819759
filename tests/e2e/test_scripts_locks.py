"""One job per folder in the scripts (train.sh, generate.sh: an flock on
the folder's .lock, the lock of fairseq_local.locks), and generate.sh's
results written under temporary names, so that a kill never empties the
previous ones."""

import json
import os
import subprocess
from pathlib import Path

import pytest

from fairseq_local.locks import folder_lock
from helpers import ENV, ROOT
from helpers.jobs import data_folder, fake_checkpoint, fake_tools, script
from helpers.probes import one_line_error

pytestmark = pytest.mark.slow  # runs the scripts as processes


@pytest.fixture
def data(tmp_path) -> Path:
    return data_folder(tmp_path)


@pytest.fixture
def checkpoint(tmp_path) -> Path:
    return fake_checkpoint(tmp_path / "model.pt")


def test_a_second_training_into_one_save_dir_is_refused(data, tmp_path):
    save = tmp_path / "run"
    with folder_lock(save, "reproduce"):
        r = script("train.sh", "--data", data, "--arch", "a", "--save-dir", save, "--", "--max-update", "5", "--cpu")
    assert r.returncode == 1
    one_line_error(r.stderr, f"{save} is being written by process {os.getpid()} (reproduce): wait for it to end, "
                   "or stop it, before running another training there")
    assert sorted(p.name for p in save.iterdir()) == [".lock"]  # no command.sh, no train.log


def test_a_second_generate_into_one_out_is_refused(data, checkpoint, tmp_path):
    out = tmp_path / "gen"
    with folder_lock(out, "generate.sh"):
        r = script("generate.sh", "--data", data, "--checkpoint", checkpoint, "--out", out)
    assert r.returncode == 1
    one_line_error(r.stderr, f"{out} is being written by process {os.getpid()} (generate.sh)")


def test_generate_writes_its_results_whole_or_not_at_all(data, checkpoint, tmp_path):
    out = tmp_path / "gen"
    out.mkdir()
    previous = json.dumps({"name": "BLEU", "score": 42.0})
    (out / "test.bleu.json").write_text(previous)
    (out / ".lock").write_text("999999999 generate.sh\n")  # left by a job that was killed
    # sacrebleu killed (with the script) half way through writing its JSON, as a preempted job is
    env = fake_tools(tmp_path, "printf '{\"name\": \"BL'; kill -9 $PPID")
    r = script("generate.sh", "--data", data, "--checkpoint", checkpoint, "--out", out, env=env)
    assert r.returncode != 0
    assert "was locked by process 999999999 (generate.sh), which has ended without releasing it" in r.stderr
    assert (out / "test.bleu.json").read_text() == previous  # the previous score is kept
    assert not (out / "test.hyp").exists()
    # a whole run replaces every result, and leaves no temporary file of its own and an empty lock behind
    left = {p.name for p in out.glob(".*.tmp")}  # the killed run's (its trap could not run)
    env = fake_tools(tmp_path / "ok", "echo '{\"name\": \"BLEU\", \"score\": 100.0}'")
    r = script("generate.sh", "--data", data, "--checkpoint", checkpoint, "--out", out, env=env)
    assert r.returncode == 0, r.stderr
    assert json.loads((out / "test.bleu.json").read_text())["score"] == 100.0
    assert (out / "test.hyp").read_text() == "a b\n" and (out / "test.ref").read_text() == "a b\n"
    assert {p.name for p in out.glob(".*.tmp")} <= left
    assert (out / ".lock").read_text() == ""


def test_the_scripts_import_nothing_from_the_current_folder(tmp_path):
    """A random.py and a fairseq_local_data/ in the folder a script is run
    from are not imported (Python in safe-path mode, lib.sh)."""
    work = tmp_path / "work"
    (work / "fairseq_local_data").mkdir(parents=True)
    marker = tmp_path / "imported"
    poison = f"open({str(marker)!r}, 'a').write(__name__ + '\\n')\nraise SystemExit('imported from the current folder')\n"
    (work / "random.py").write_text(poison)
    (work / "fairseq_local_data" / "__init__.py").write_text(poison)
    r = subprocess.run(["bash", str(ROOT / "scripts" / "prepare-synthetic.sh"), "--out", str(tmp_path / "out"),
                        "--train", "30", "--valid", "5", "--test", "5", "--merges", "50"],
                       cwd=work, capture_output=True, text=True, env=ENV)
    assert r.returncode == 0, r.stderr[-2000:]
    assert not marker.exists()
    assert (tmp_path / "out" / "dict.src.txt").is_file()
