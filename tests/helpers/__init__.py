"""What the tests share: the repository root, the environment of the commands
they run, the tiny model options, and builders of attention layers, runs and
checkpoints (``from helpers import ...``)."""

import json
import os
import sys
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
USER_DIR = str(ROOT / "fairseq_local")
# Tiny models that keep the paper layouts (6 encoder layers, 8 heads): the
# "tiny" model size of fairseq_local/models/presets.json (read as a file, so
# that the data tests import no fairseq), then the tests' training options.
TINY_SIZE = json.loads((ROOT / "fairseq_local" / "models" / "presets.json").read_text())["tiny"]["options"]
TINY = [
    *(flag for name, value in TINY_SIZE.items() for flag in ("--" + name.replace("_", "-"), str(value))),
    "--lr", "1e-3", "--warmup-updates", "5",
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


def make_attention(tokens, groups=None, mode="post", embed_dim=16, seed=0, std=0.5, max_len=64, **options):
    """A one-layer LocalMultiheadAttention with one head per mask token, built
    as the models build it; ``groups`` gives each head's Q/K group index
    (default: its own).  With ``std``, every parameter is redrawn from
    N(0, std²), so that biases are tested too.  Returned in eval mode."""
    import torch

    from fairseq_local.attention.build import AttentionBuilder
    from fairseq_local.attention.config import AttentionConfig, attention_options

    groups = list(range(len(tokens))) if groups is None else groups
    layer = ",".join(f"{t}@g{g}" for t, g in zip(tokens, groups))
    torch.manual_seed(seed)
    cfg = attention_options(AttentionConfig(attn_layout=f"[{layer}]", mask_mode=mode, **options))
    attn = AttentionBuilder(cfg, embed_dim, 1, len(tokens), max_positions=max_len)(0)
    if std:
        for p in attn.parameters():
            torch.nn.init.normal_(p, std=std)
    return attn.eval()


def train(data, arch, save, *extra) -> subprocess.CompletedProcess:
    """``scripts/train.sh`` on ``data`` with the tiny model; fails the test on error."""
    return run(["bash", "scripts/train.sh", "--data", str(data), "--arch", arch,
                "--save-dir", str(save), "--", *TINY, *extra])


def checkpoint_params(path):
    """The tensors of the model state dict of a fairseq checkpoint (without
    the encoder's saved signature, ``_extra_state``)."""
    import torch

    state = torch.load(path, map_location="cpu", weights_only=False)["model"]
    return {k: v for k, v in state.items() if torch.is_tensor(v)}


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def two_workers(out_dir, train_args, timeout=600):
    """Run fairseq-train as two CPU workers (gloo, legacy_ddp) in this
    machine's loopback; each rank saves its final parameters to
    OUT_DIR/rank{r}.pt.  Returns both ranks' output; fails the test on error."""
    port = _free_port()
    procs = []
    for rank in range(2):
        cmd = [sys.executable, str(ROOT / "tests" / "helpers" / "dist_train.py"), str(out_dir / f"rank{rank}.pt"),
               *train_args, "--distributed-world-size", "2", "--distributed-rank", str(rank),
               "--distributed-init-method", f"tcp://127.0.0.1:{port}", "--distributed-backend", "gloo",
               "--ddp-backend", "legacy_ddp", "--distributed-no-spawn", "--device-id", "0"]
        procs.append(subprocess.Popen(cmd, cwd=ROOT, env=ENV, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    outputs = [p.communicate(timeout=timeout)[0] for p in procs]
    for p, out in zip(procs, outputs):
        if p.returncode != 0:
            pytest.fail(f"a worker failed ({p.returncode}):\n{out[-3000:]}")
    return outputs
