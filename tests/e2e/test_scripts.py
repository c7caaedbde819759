"""The shell scripts of scripts/: --help, options without their value, and
scripts/setup_env.sh sourced or run (on a stand-in virtual environment whose
stamp is current, so nothing is installed)."""

import hashlib
import re
import subprocess
from pathlib import Path

import pytest

from helpers import ENV, ROOT, run

pytestmark = pytest.mark.slow  # end-to-end: every test runs fairseq or a pipeline

SCRIPTS = sorted(p.name for p in (ROOT / "scripts").glob("*.sh") if p.name != "lib.sh")  # lib.sh is sourced


def test_every_script_is_covered():
    assert {"train.sh", "generate.sh", "setup_env.sh", "test.sh", "demo.sh", "prepare-wmt14.sh"} <= set(SCRIPTS)


@pytest.mark.parametrize("script", SCRIPTS)
def test_help(script):
    outputs = []
    for flag in ("--help", "-h"):
        r = run(["bash", f"scripts/{script}", flag])
        assert r.returncode == 0 and r.stderr == ""
        outputs.append(r.stdout)
    text = outputs[0]
    assert outputs[1] == text
    assert re.search(r"^Usage: (bash |source )?scripts/" + re.escape(script), text, re.M), text
    assert "set -euo" not in text and not any(line.startswith("#") for line in text.splitlines())


def value_options(script: str):
    """The options that a script declares to take a value: the ``--name=VAR``
    words of its ``parse_options "SPEC"`` (scripts/lib.sh), or the
    ``needs_value`` case patterns of an option loop of its own."""
    text = (ROOT / "scripts" / script).read_text()
    options = []
    for m in re.finditer(r'^\s*parse_options "([^"]*)"', text, re.M):
        options += [w.split("=")[0] for w in m.group(1).split() if re.fullmatch(r"--[a-z0-9-]+=[A-Za-z_]\w*", w)]
    for m in re.finditer(r"^\s*((?:--[a-z0-9-]+\|?\s*)+)\)\s*(?:\n\s*)?needs_value", text, re.M):
        options += [o.strip() for o in m.group(1).split("|")]
    return options


VALUE_OPTIONS = {script: value_options(script) for script in SCRIPTS}


def test_value_options_are_declared():
    assert VALUE_OPTIONS["train.sh"] == ["--data", "--arch", "--save-dir"]
    assert {"--checkpoint", "--out", "--ref", "--post-process"} <= set(VALUE_OPTIONS["generate.sh"])
    assert {"--raw", "--out", "--merges"} <= set(VALUE_OPTIONS["bpe-binarize.sh"])
    assert {"--gpus", "--data", "--save-dir", "--max-tokens"} <= set(VALUE_OPTIONS["train-wmt14.sh"])
    assert {"--configs", "--sbatch-args", "--runs-root"} <= set(VALUE_OPTIONS["sweep-wmt14.sh"])
    assert {"--average", "--data"} <= set(VALUE_OPTIONS["evaluate-wmt14.sh"])
    assert {"--raw-dir", "--manifest", "--out"} <= set(VALUE_OPTIONS["prepare-wmt14.sh"])


@pytest.mark.parametrize("script, option", [
    *[(s, o) for s, opts in VALUE_OPTIONS.items() for o in opts],
    ("prepare-synthetic.sh", "--out"), ("prepare-synthetic.sh", "--seed"),  # generator options too
])
def test_option_without_value_is_a_usage_error(script, option):
    r = run(["bash", f"scripts/{script}", option], check=False)
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr == f"error: {option} needs a value (see --help)\n"


# ------------------------------------------------------------ setup_env.sh


def current_stamp() -> str:
    """What scripts/setup_env.sh records after installing: the hash of
    requirements.txt and setup.py, and the fairseq pin."""
    pin = re.search(r'fairseq_pin="([^"]+)"', (ROOT / "scripts" / "setup_env.sh").read_text()).group(1)
    digest = hashlib.sha256((ROOT / "requirements.txt").read_bytes() + (ROOT / "setup.py").read_bytes())
    return f"{digest.hexdigest()} {pin}"


@pytest.fixture
def venv(tmp_path):
    """A stand-in environment: an executable bin/python that only records its
    calls and fails, and a stamp that is current, so setup_env.sh has nothing
    to install (and, should it try, fails at once instead of installing)."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    python = venv / "bin" / "python"
    python.write_text(f'#!/bin/sh\necho "$@" >> {tmp_path / "calls"}\nexit 3\n')
    python.chmod(0o755)
    (venv / ".fairseq-local-stamp").write_text(current_stamp() + "\n")
    return venv


def run_env(cmd, env, timeout=120) -> subprocess.CompletedProcess:
    """Run from the repository root with the tests' environment plus ``env``."""
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env={**ENV, **env}, timeout=timeout)


def shell(command: str, venv: Path) -> subprocess.CompletedProcess:
    return run_env(["bash", "-c", command], {"VENV": str(venv)})


# The status of the last command, the shell's options and PATH.
REPORT = ('echo "status=$? opts=$-"; if shopt -qo pipefail; then echo pipefail=on; else echo pipefail=off; fi; '
          'echo "path=$PATH"')
LEFTOVERS = "declare -F | grep -c _fairseq_local; compgen -v | grep -c _fairseq_local"


def test_sourcing_changes_no_shell_option(venv):
    r = shell(f"source scripts/setup_env.sh; {REPORT}; {LEFTOVERS}", venv)
    lines = r.stdout.splitlines()
    assert lines[0].startswith("status=0 opts=") and not set("eu") & set(lines[0].split("opts=")[1])
    assert lines[1] == "pipefail=off"
    assert lines[2] == f"path={venv}/bin:{ENV['PATH']}"  # the environment comes first on PATH
    assert lines[3:] == ["0", "0"]  # no helper functions or variables left behind
    assert not (venv.parent / "calls").exists()  # nothing installed


def test_sourcing_keeps_the_callers_options(venv):
    r = shell(f"set -euo pipefail; source scripts/setup_env.sh; source scripts/setup_env.sh; {REPORT}", venv)
    lines = r.stdout.splitlines()
    assert r.returncode == 0 and lines[0].startswith("status=0 opts=")
    assert set("eu") <= set(lines[0].split("opts=")[1]) and lines[1] == "pipefail=on"
    assert lines[2] == f"path={venv}/bin:{ENV['PATH']}"  # sourcing twice adds it once


def test_failed_install_stops_when_run_and_returns_when_sourced(venv):
    (venv / ".fairseq-local-stamp").write_text("stale\n")
    calls = venv.parent / "calls"
    r = shell("bash scripts/setup_env.sh; echo status=$?", venv)
    assert "[setup] installing dependencies" in r.stdout and r.stdout.strip().endswith("status=3")
    assert calls.read_text().splitlines() == ["-m pip install -q --upgrade pip wheel setuptools"]  # stopped there
    assert (venv / ".fairseq-local-stamp").read_text() == "stale\n"
    calls.unlink()
    # sourced: "source" fails, the shell goes on with its own options and PATH
    r = shell(f"source scripts/setup_env.sh; {REPORT}", venv)
    lines = r.stdout.splitlines()
    assert lines[-3].startswith("status=3 opts=") and not set("eu") & set(lines[-3].split("opts=")[1])
    assert lines[-2] == "pipefail=off" and lines[-1] == f"path={ENV['PATH']}"
    assert "error: setting up" in r.stderr and len(calls.read_text().splitlines()) == 1
    # sourced by a script with "set -e" (test.sh, demo.sh): the script stops
    r = shell("set -e; source scripts/setup_env.sh; echo after", venv)
    assert r.returncode == 3 and "after" not in r.stdout


def test_sourcing_the_real_environment_is_quick_and_clean():
    """The README's environment: with its stamp current, sourcing installs
    nothing and puts fairseq-local on PATH."""
    real = ROOT / ".venv"
    stamp = real / ".fairseq-local-stamp"
    if not stamp.exists() or stamp.read_text().strip() != current_stamp():
        pytest.skip(".venv is not set up for this setup.py/requirements.txt (run scripts/setup_env.sh)")
    r = run_env(["bash", "-c", 'unset VENV; source scripts/setup_env.sh; [[ $- != *e* && $- != *u* ]] '
                 '&& ! shopt -qo pipefail && command -v fairseq-local'], {}, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str(real / "bin" / "fairseq-local") and "[setup]" not in r.stdout


def test_demo_checks_its_configs_before_running(venv, tmp_path):
    r = run_env(["bash", "scripts/demo.sh"], {"VENV": str(venv), "CONFIGS": "a zz", "RUNS": str(tmp_path / "runs"),
                                              "DATA": str(tmp_path / "data")})
    assert r.returncode == 1
    assert r.stderr.strip().splitlines() == ["error: no configuration 'zz' (letters a-l or a named arch)"]
    assert not (tmp_path / "data").exists() and not (tmp_path / "runs").exists()
    r = run(["bash", "scripts/demo.sh", "--fast"], check=False)
    assert r.returncode == 1 and r.stderr.startswith("error: unexpected argument '--fast'")


def test_test_sh_runs_the_suite_after_setup(venv):
    """test.sh sources setup_env.sh (here the stand-in environment, whose
    python only records its arguments) and then runs pytest on tests/."""
    r = shell("bash scripts/test.sh -x -k foo", venv)
    assert r.returncode == 3 and r.stdout == ""
    assert (venv.parent / "calls").read_text() == "-m pytest -q -p no:cacheprovider tests -rs -n 2 -x -k foo\n"
    r = shell("FAIRSEQ_LOCAL_TEST_WORKERS=0 bash scripts/test.sh -x", venv)  # one process
    assert r.returncode == 3
    assert (venv.parent / "calls").read_text().splitlines()[-1] == "-m pytest -q -p no:cacheprovider tests -rs -x"
    r = shell("FAIRSEQ_LOCAL_TEST_WORKERS=two bash scripts/test.sh", venv)
    assert r.returncode == 1 and r.stderr.startswith("error: FAIRSEQ_LOCAL_TEST_WORKERS must be a number")
    assert len((venv.parent / "calls").read_text().splitlines()) == 2  # refused before pytest
