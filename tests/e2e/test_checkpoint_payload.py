"""A crafted checkpoint runs no code in fairseq's own commands and in the
scripts (``fairseq-train --user-dir fairseq_local --restore-file``,
``train.sh --restore-file``, ``generate.sh``): each refuses it in one line
naming the type it holds (the plugin's readers: tests/unit/test_safe_pickle.py)."""

import os
import subprocess

import pytest
import torch

from helpers import ENV, ROOT, TINY, USER_DIR
from helpers.probes import one_line_error

pytestmark = pytest.mark.slow  # fairseq's commands and the scripts, as processes


class _Payload:
    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


@pytest.fixture
def payload(tmp_path):
    path, marker = tmp_path / "crafted.pt", tmp_path / "ran"
    torch.save({"cfg": {"model": {"_name": "transformer_local_baseline"}, "task": {"_name": "translation"}},
                "model": {}, "extra_state": {"x": _Payload(marker)}}, path)
    return path, marker


def _run(cmd):
    env = {k: v for k, v in ENV.items() if k != "FAIRSEQ_LOCAL_TRUST_CHECKPOINTS"}
    return subprocess.run([str(c) for c in cmd], cwd=ROOT, capture_output=True, text=True, env=env)


@pytest.mark.parametrize("how", ["fairseq-train", "train.sh", "generate.sh"])
def test_a_crafted_checkpoint_runs_nothing(tiny_data, payload, tmp_path, how):
    path, marker = payload
    save = tmp_path / "run"
    cmd = {"fairseq-train": ["fairseq-train", tiny_data, "--user-dir", USER_DIR, "--arch", "transformer_local_baseline",
                             "--save-dir", save, "--restore-file", path, "--cpu", *TINY, "--max-update", "2"],
           "train.sh": ["bash", "scripts/train.sh", "--data", tiny_data, "--arch", "a", "--save-dir", save, "--",
                        *TINY, "--restore-file", path, "--cpu", "--max-update", "2"],
           "generate.sh": ["bash", "scripts/generate.sh", "--data", tiny_data, "--checkpoint", path, "--out", save]}[how]
    r = _run(cmd)
    assert r.returncode != 0
    one_line_error(r.stderr, "holds a posix.system object", "not loaded, since unpickling it could run code")
    assert not marker.exists()
