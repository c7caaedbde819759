"""What a reproduction ran on: a seed repeats on one machine, not across CPUs
(their kernels sum in other orders), so every report records its hardware,
library versions and thread count."""

import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Dict


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _git_commit(root: Path) -> str:
    try:
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, timeout=10)
        return out.stdout.strip() or "-"
    except (OSError, subprocess.SubprocessError):
        return "-"


def environment(root: Path) -> Dict[str, str]:
    """The machine and software of this run: CPU model and cores, GPU (if
    any), torch, fairseq and Python versions, torch's intra-op threads and the
    commit of the checkout."""
    import torch

    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"
    try:
        from importlib.metadata import version

        fairseq = version("fairseq-fixed")
    except Exception:  # noqa: BLE001 - any metadata failure: unknown
        fairseq = "-"
    return {"cpu": _cpu_model(), "cores": str(os.cpu_count()), "gpu": gpu, "torch": torch.__version__,
            "threads": str(torch.get_num_threads()), "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "-"),
            "fairseq": fairseq, "python": sys.version.split()[0], "commit": _git_commit(root)}
