"""Shared fixtures: a tiny synthetic corpus, prepared once per test session."""

import os
import sys
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
USER_DIR = str(ROOT / "fairseq_local")
# Tiny models that keep the paper layouts (6 encoder layers, 8 heads).
TINY = [
    "--encoder-embed-dim", "32", "--encoder-ffn-embed-dim", "64",
    "--decoder-embed-dim", "32", "--decoder-ffn-embed-dim", "64", "--decoder-layers", "1",
    "--decoder-attention-heads", "2", "--lr", "1e-3", "--warmup-updates", "5",
    "--max-tokens", "800", "--log-interval", "1", "--seed", "3", "--num-workers", "0",
]


# The interpreter running the tests, and its environment's tools, come first.
ENV = dict(
    os.environ,
    PYTHONUNBUFFERED="1",
    VIRTUAL_ENV=sys.prefix,
    PATH=os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")]),
)


def padding_mask(lengths, left_pad: bool, T=None):
    """(B, T) bool, True at padding, for sentences of ``lengths`` padded on the
    left (fairseq's source default) or on the right."""
    import torch

    T = T or max(lengths)
    pad = torch.zeros(len(lengths), T, dtype=torch.bool)
    for b, n in enumerate(lengths):
        if left_pad:
            pad[b, : T - n] = True
        else:
            pad[b, n:] = True
    return pad


def run(cmd, check: bool = True, **kwargs) -> subprocess.CompletedProcess:
    """Run a command from the repository root; with ``check``, fail the test
    (showing its output) if it exits non-zero."""
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=ENV, **kwargs)
    if check and r.returncode != 0:
        pytest.fail(f"{cmd} failed ({r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return r


@pytest.fixture(scope="session")
def tiny_data(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("synthetic")
    run(["bash", "scripts/prepare-synthetic.sh", "--out", str(out), "--train", "400",
         "--valid", "40", "--test", "30", "--merges", "300"])
    return out
