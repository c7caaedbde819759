"""``scripts/check-gpu.sh --no-setup --budget``: on a copy of the checkout
without a .venv, with pip pointed at no index and the tests' python on PATH,
the CPU part passes within the budget, nothing is installed, and the report
says that CUDA was skipped (issue 34, point 4)."""

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import ENV, ROOT

pytestmark = pytest.mark.slow


def checkout_copy(dest: Path) -> Path:
    """The checkout's tracked and new files (as in the working tree), no .venv."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        src = ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    return dest


@pytest.fixture(scope="module")
def bare(tmp_path_factory):
    copy = checkout_copy(tmp_path_factory.mktemp("bare-checkout"))
    env = {k: v for k, v in ENV.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env.update(PATH=f"{Path(sys.executable).parent}{os.pathsep}{ENV['PATH']}",
               PIP_INDEX_URL="http://127.0.0.1:9/simple", PIP_NO_INDEX="1")
    return copy, env


def test_no_setup_runs_the_cpu_part_within_its_budget(bare):
    copy, env = bare
    start = time.monotonic()
    r = subprocess.run(["bash", "scripts/check-gpu.sh", "--no-setup", "--budget", "300"], cwd=copy, env=env,
                       capture_output=True, text=True, timeout=600)
    seconds = time.monotonic() - start
    assert r.returncode == 0, r.stderr[-3000:]
    assert seconds < 400, seconds
    assert not (copy / ".venv").exists() and not (copy / "data-bin" / "gpt2-bpe").exists()  # nothing set up
    assert "CUDA skipped" in r.stderr
    report = (copy / "runs" / "check-gpu" / "report.md").read_text()
    assert "- budget: 300 s" in report and report.count("**passed**") == 2, report
    assert sys.executable in report or str(Path(sys.executable).resolve()) in report, report


@pytest.mark.parametrize("budget", ["abc", "30", "-5"])
def test_bad_budget_is_one_line(bare, budget):
    copy, env = bare
    r = subprocess.run(["bash", "scripts/check-gpu.sh", "--no-setup", "--budget", budget], cwd=copy, env=env,
                       capture_output=True, text=True)
    assert r.returncode == 1 and r.stderr.strip().count("\n") == 0, r.stderr
    assert r.stderr.startswith("error: --budget takes whole seconds"), r.stderr


def test_no_setup_without_fairseq_is_one_line(bare, tmp_path):
    copy, env = bare
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "python").write_text("#!/bin/sh\nexit 1\n")
    (fake / "python").chmod(0o755)
    r = subprocess.run(["bash", "scripts/check-gpu.sh", "--no-setup"], cwd=copy,
                       env=dict(env, PATH=f"{fake}{os.pathsep}{env['PATH']}"), capture_output=True, text=True)
    assert r.returncode == 1 and r.stderr.strip().count("\n") == 0, r.stderr
    assert "lacks torch or fairseq" in r.stderr
