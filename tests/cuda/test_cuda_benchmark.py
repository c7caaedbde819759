"""``fairseq-local benchmark kernels --device cuda`` at tiny sizes in each
dtype: the settings line names the GPU and the dtype, every path is measured,
the peak memory comes from torch.cuda.max_memory_allocated."""

import pytest
import torch

from fairseq_local_cli.benchmark import timing as bench
from fairseq_local_cli.benchmark import main

pytestmark = pytest.mark.cuda


def table_rows(text: str):
    lines = [line for line in text.splitlines() if line.startswith("|")]
    header = [c.strip() for c in lines[0].strip()[1:-1].split("|")]
    return [dict(zip(header, (c.strip() for c in line.strip()[1:-1].split("|")))) for line in lines[2:]]


@pytest.mark.parametrize("dtype", ["fp32", "fp16", "bf16"])
def test_kernels_on_cuda(dtype, capsys):
    assert main(["kernels", "--device", "cuda", "--dtype", dtype, "--cases", "band2-pre", "band2-post", "mixed",
                 "--impls", "auto", "dense", "window", "--lengths", "64", "600", "--heads", "2", "--head-dim", "16",
                 "--min-time", "0", "--repeats", "2", "--warmup", "1", "--quiet"]) == 0
    out = capsys.readouterr().out
    first = out.splitlines()[0]
    assert f"{dtype} on CUDA" in first and torch.cuda.get_device_name() in first
    assert "torch.cuda.max_memory_allocated" in out and "not measured" not in out
    rows = table_rows(out)
    assert len(rows) == 6
    for row in rows:
        for name in ("auto ms", "dense ms", "window ms", "MiB auto", "MiB dense", "MiB window"):
            assert float(row[name].replace(",", "")) >= 0, (name, row)


def test_cuda_peak_memory_counts_what_a_call_allocates():
    def two_buffers():
        a = torch.ones(2 ** 20, device="cuda")  # 4 MiB
        b = torch.ones(2 ** 20, device="cuda")
        return (a + b).sum()

    peak = bench.cuda_peak_memory(two_buffers) / 2 ** 20
    assert 12 <= peak < 13  # a, b and a + b at once
    held = torch.ones(2 ** 22, device="cuda")  # memory held before the call is not counted
    assert bench.cuda_peak_memory(lambda: None) == 0
    del held


def test_per_call_synchronises_cuda_work():
    x = torch.randn(2048, 2048, device="cuda")
    timer = bench.PerCall(lambda: x @ x, min_time=0, sync=torch.cuda.synchronize)
    assert timer() > 0
