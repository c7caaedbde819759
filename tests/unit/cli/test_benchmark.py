"""``fairseq-local benchmark``: each level's table at tiny settings (its rows,
columns and numbers, never its speed), bad options, and the measuring helpers
of :mod:`fairseq_local_cli.benchmark.timing`."""

import os
import re
import sys
from typing import List, Tuple

import pytest
import torch

from helpers import run
from fairseq_local_cli.benchmark import timing as bench
from fairseq_local_cli.benchmark import main
from fairseq_local_cli.benchmark.kernels import KERNEL_CASES

COMMON = ["--repeats", "2", "--warmup", "1", "--threads", "1", "--quiet"]
KERNELS = ["kernels", "--lengths", "5", "16", "--heads", "2", "--head-dim", "4", "--min-time", "0", *COMMON]
TRAIN = ["train", "--nmt-sizes", "tiny", "--learned-sizes", "tiny", "--archs", "f", "--learned-archs", "dam_s",
         "--roberta-lengths", "8", "--roberta-layers", "1", "--roberta-archs", "roberta_band6_120_tied",
         "--steps", "1", "--max-tokens", "60", "--roberta-tokens", "8", "--vocab", "40", *COMMON]
GENERATE = ["generate", "--gen-size", "tiny", "--gen-archs", "l", "--gen-sentences", "3", "--gen-batch", "2",
            "--gen-len", "2", "--beam", "2", "--vocab", "40", *COMMON]


def tables(text: str) -> List[Tuple[List[str], List[List[str]]]]:
    """The Markdown tables of ``text``: (header, rows) each; checks that every
    row has the header's number of cells and the separator one per column."""
    def cells(line: str) -> List[str]:
        return [c.strip() for c in line.strip()[1:-1].split("|")]

    found, block = [], []
    for line in text.splitlines() + [""]:
        if line.startswith("|"):
            block.append(cells(line))
            continue
        if block:
            header, separator, rows = block[0], block[1], block[2:]
            assert len(separator) == len(header) and all(set(c) <= set("-:") for c in separator)
            assert all(len(r) == len(header) for r in rows)
            found.append((header, rows))
            block = []
    return found


def number(cell: str) -> float:
    return float(cell.replace(",", ""))


def run_main(argv, capsys) -> str:
    assert main(argv) == 0
    return capsys.readouterr().out


@pytest.mark.slow  # starts a process
def test_kernels_table(capsys):
    threads = torch.get_num_threads()
    out = run_main(KERNELS, capsys)
    assert torch.get_num_threads() == threads  # --threads holds only while the command runs
    assert out.startswith("**kernels**: ") and "d_h 4" in out.splitlines()[0] and "1 thread" in out
    [(header, rows)] = tables(out)
    assert header == ["case", "mode", "H", "n", "SDPA ms", "proj ms", "global ms", "auto ms", "auto ×global",
                      "dense ms", "dense ×global", "auto core ×SDPA", "MiB SDPA", "MiB global", "MiB auto",
                      "MiB dense", "auto max abs diff"]
    assert [(r[0], r[1], r[2], r[3]) for r in rows] == [
        (case, KERNEL_CASES[case][2], "2", n) for case in KERNEL_CASES for n in ("5", "16")]
    for row in rows:
        for name, cell in zip(header[4:], row[4:]):
            if name != "auto core ×SDPA" or cell != "-":  # "-" where auto ms <= proj ms
                assert number(cell) >= 0, (name, cell)
    assert "- tied-post against untied-post (auto; untied ms / tied ms; in brackets without each layer's" in out
    assert re.search(r"H=2: n=5 [0-9.]+× \(attention alone ([0-9.]+|-)×\)", out)
    assert "not measured" not in out


@pytest.mark.slow  # starts a process
def test_kernels_other_impls_and_failing_paths(capsys, monkeypatch):
    """A path that fails is shown as '-' with its reason, the others measured."""
    import fairseq_local_cli.benchmark.kernels as kernels

    built = kernels._attention

    def attention(layout, mode, impl, heads, dim, n, seed):
        attn = built(layout, mode, impl, heads, dim, n, seed)
        if "global" not in layout and (impl == "auto" or (impl == "window" and n == 8)):
            def fail(*args, **kwargs):
                raise RuntimeError("no such path\nsecond line")
            attn.forward = fail
        return attn

    monkeypatch.setattr(kernels, "_attention", attention)
    out = run_main(["kernels", "--cases", "band2-post", "--impls", "window", "auto", "dense", "--lengths", "8", "12",
                    "--heads", "2", "--head-dim", "4", "--min-time", "0", "--repeats", "1", "--warmup", "0",
                    "--quiet"], capsys)
    [(header, rows)] = tables(out)
    first, second = (dict(zip(header, row)) for row in rows)
    for cell in (first, second):
        assert cell["auto ms"] == cell["auto ×global"] == cell["MiB auto"] == cell["auto max abs diff"] == "-"
        assert number(cell["dense ×global"]) > 0 and number(cell["MiB dense"]) >= 0
    assert first["window ms"] == first["window ×global"] == first["MiB window"] == first["window core ×SDPA"] == "-"
    assert number(second["window ×global"]) > 0 and number(second["window max abs diff"]) >= 0
    assert ("- '-': not measured: window at band2-post H=2 n=8: RuntimeError: no such path; "
            "auto at every row: RuntimeError: no such path.") in out


@pytest.mark.slow  # starts a process
def test_kernels_in_bf16_on_the_cpu(capsys):
    """--dtype bf16: the layer, its inputs and gradients in bfloat16; every path
    measured, and within bf16's rounding of the dense path."""
    out = run_main(["kernels", "--cases", "band2-pre", "band2-post", "mixed", "--impls", "auto", "dense", "window",
                    "--lengths", "5", "16", "--heads", "2", "--head-dim", "4", "--min-time", "0", "--dtype", "bf16",
                    *COMMON], capsys)
    first = out.splitlines()[0]
    assert "bf16 on the CPU" in first and "fp32" not in first
    [(header, rows)] = tables(out)
    assert [(r[0], r[3]) for r in rows] == [(c, n) for c in ("band2-pre", "band2-post", "mixed") for n in ("5", "16")]
    for row in rows:
        cells = dict(zip(header, row))
        for name in ("SDPA ms", "global ms", "auto ms", "dense ms", "window ms", "MiB window"):
            assert number(cells[name]) >= 0, (name, cells)
        for name in ("auto max abs diff", "window max abs diff"):
            assert 0 <= number(cells[name]) < 0.1, (name, cells)  # bf16 keeps 8 bits of mantissa
    assert "torch.profiler" in out and "not measured" not in out


def test_cuda_without_a_device_is_one_error_line(capsys, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(SystemExit) as e:
        main(["kernels", "--device", "cuda", "--dtype", "fp16", "--quiet"])
    captured = capsys.readouterr()
    assert e.value.code == 2 and captured.out == ""
    assert captured.err.startswith("error: --device cuda: no CUDA device available (")
    assert captured.err.count("\n") == 1, captured.err


@pytest.mark.slow
@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is visible")
def test_cuda_without_a_device_from_the_command_line():
    r = run(["fairseq-local", "benchmark", "kernels", "--device", "cuda"], check=False)
    assert r.returncode != 0 and r.stdout == ""
    errors = [line for line in r.stderr.splitlines() if not line.startswith("INFO:")]  # fairseq's import notices
    assert len(errors) == 1 and errors[0].startswith("error: --device cuda: no CUDA device available ("), r.stderr


@pytest.mark.slow  # starts a process
def test_train_table(capsys):
    out = run_main(TRAIN, capsys)
    assert out.startswith("**train**: ") and "the _with_sparsity criteria" in out.splitlines()[0]
    [(header, rows)] = tables(out)
    assert header == ["group", "config", "arch", "words/s", "ratio to stock"]
    assert [r[:3] for r in rows] == [
        ["NMT tiny", "stock", "transformer"],
        ["NMT tiny", "(f)", "transformer_local_8lochead_all6"],
        ["NMT tiny", "DAM_s (SparseBERT)", "transformer_dam_s"],
        ["RoBERTa n=8", "stock", "roberta_base"],
        ["RoBERTa n=8", "All Band6 120Tied", "roberta_band6_120_tied"],
    ]
    assert all(number(r[3]) > 0 and number(r[4]) > 0 for r in rows)
    assert [r[4] for r in rows if r[1] == "stock"] == ["1.000", "1.000"]
    assert "- RoBERTa n=8: d=768, 1 layer of 12 heads, 1 sentence of 8 tokens a batch, masked LM." in out


@pytest.mark.slow  # starts a process
def test_generate_table(capsys):
    out = run_main(GENERATE, capsys)
    assert out.startswith("**generate**: ") and "beam 2" in out.splitlines()[0]
    [(header, rows)] = tables(out)
    assert header == ["config", "arch", "sentences/s", "ratio to stock"]
    assert [r[:2] for r in rows] == [["stock", "transformer"], ["(l)", "transformer_local_fully_tied"]]
    assert rows[0][3] == "1.000" and number(rows[1][2]) > 0 and number(rows[1][3]) > 0


@pytest.mark.slow  # starts a process
def test_markdown_appends_every_table(tmp_path, capsys):
    path = tmp_path / "bench.md"
    path.write_text("# earlier\n")
    one = ["kernels", "--cases", "mixed", "--lengths", "4", "--heads", "2", "--head-dim", "4", "--min-time", "0",
           "--impls", "auto", "--repeats", "1", "--quiet", "--markdown", str(path)]
    out = run_main(one, capsys)
    run_main(one, capsys)
    text = path.read_text()
    assert text.startswith("# earlier\n**kernels**: ") and text.count("**kernels**: ") == 2
    assert out.strip() in text and len(tables(text)) == 2
    assert "max abs diff" not in text  # no dense reference asked for


@pytest.mark.parametrize("argv, message", [
    ([], "error: the following arguments are required: LEVEL"),
    (["speed"], "error: argument LEVEL: invalid choice: 'speed'"),
    (["kernels", "--lengths", "0"], "error: argument --lengths: must be >= 1, not 0"),
    (["kernels", "--heads", "1"], "error: argument --heads: must be >= 2, not 1"),
    (["kernels", "--impls", "fast"], "error: argument --impls: invalid choice: 'fast'"),
    (["kernels", "--cases", "band3"], "error: argument --cases: invalid choice: 'band3'"),
    (["kernels", "--repeats", "x"], "error: argument --repeats: invalid int value: 'x'"),
    (["kernels", "--device", "gpu"], "error: argument --device: invalid choice: 'gpu'"),
    (["kernels", "--dtype", "fp8"], "error: argument --dtype: invalid choice: 'fp8'"),
    (["train", "--dtype", "bf16"], "error: --device and --dtype apply to the kernels level only (train runs on"),
    (["all", "--device", "cuda"], "error: --device and --dtype apply to the kernels level only (train and generate"),
    (["train", "--archs", "zz"], "error: --archs: no configuration 'zz' (letters a-l or a named arch)"),
    (["train", "--roberta-archs", "f"], "error: --roberta-archs: 'f' is an NMT arch"),
    (["all", "--gen-archs", "roberta_band6"], "error: --gen-archs: 'roberta_band6' is a RoBERTa arch"),
    (["train", "--roberta-lengths", "1024"], "error: --roberta-lengths must be at most 512"),
    (["train", "--nmt-sizes", "--roberta-lengths"], "error: train: nothing to measure"),
    (["generate", "--markdown", "/nonexistent/dir/b.md"], "error: --markdown: No such file or directory"),
])
def test_bad_options_are_one_error_line(argv, message, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    captured = capsys.readouterr()
    assert e.value.code == 2 and captured.out == ""
    assert captured.err.startswith(message) and captured.err.count("\n") == 1, captured.err


# ---------------------------------------------------------------- the helpers

def test_round_robin_warms_up_interleaves_and_drops_a_skipped_candidate():
    calls: List[str] = []

    def candidate(name: str, fail_at: int = 0):
        def call() -> float:
            calls.append(name)
            if fail_at and calls.count(name) == fail_at:
                raise bench.Skipped("too big")
            return float(len(calls))
        return call

    names = "abcd"
    result = bench.round_robin({n: candidate(n) for n in names} | {"x": candidate("x", 3)}, repeats=6, warmup=1,
                               seed=1)
    assert calls[:5] == list("abcdx")  # the warm-up round, in order
    assert all(len(result[n]) == 6 for n in names) and calls.count("x") == 3
    assert isinstance(result["x"], bench.Skipped) and str(result["x"]) == "too big"
    assert bench.median(result["x"]) is None and bench.median([3.0, 1.0, 2.0]) == 2.0
    rounds = [[c for c in calls[5:] if c != "x"][4 * r:4 * r + 4] for r in range(6)]
    assert all(sorted(r) == list(names) for r in rounds) and len({"".join(r) for r in rounds}) > 1


def test_per_call_repeats_short_calls():
    count = [0]
    timer = bench.PerCall(lambda: count.__setitem__(0, count[0] + 1), min_time=0.01)
    assert timer() >= 0 and count[0] == 1
    assert timer.calls > 1
    timer()
    assert count[0] == 1 + timer.calls


def test_per_call_synchronises_around_the_timed_calls():
    events: List[str] = []
    timer = bench.PerCall(lambda: events.append("call"), min_time=0, sync=lambda: events.append("sync"))
    timer()
    assert timer.calls == 1 and events == ["sync", "call", "sync"]
    assert bench.out_of_memory(RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB"))
    assert not bench.out_of_memory(RuntimeError("shape mismatch"))


def test_peak_memory_counts_what_a_call_allocates():
    def two_buffers():
        a = torch.ones(2 ** 20)  # 4 MiB
        b = torch.ones(2 ** 20)
        return (a + b).sum()

    peak = bench.peak_memory(two_buffers) / 2 ** 20
    assert 12 <= peak < 13  # a, b and a + b at once
    assert bench.peak_memory(lambda: None) == 0


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="the cap reads /proc")
def test_memory_cap_turns_an_oversized_allocation_into_skipped():
    with pytest.raises(bench.Skipped, match="needs more than 0.0625 GiB"):
        with bench.memory_cap(1 / 16):
            torch.empty(2 ** 28, dtype=torch.uint8).fill_(1)  # 256 MiB
    torch.empty(2 ** 28, dtype=torch.uint8).fill_(1)  # the limit is lifted again
    fn = bench.guarded(lambda: torch.empty(2 ** 28, dtype=torch.uint8).fill_(1), 1 / 16)
    with pytest.raises(bench.Skipped):
        fn()


def test_markdown_table_and_formats():
    assert bench.markdown_table(["a", "b"], [["x", "1"]], [False, True]) == "| a | b |\n|---|---:|\n| x | 1 |"
    assert [bench.fmt_ms(s) for s in (None, 0.0001234, 0.001234, 0.01234, 0.1234, 1.234)] == [
        "-", "0.123", "1.23", "12.3", "123", "1,234"]
    assert [bench.fmt_rate(r) for r in (None, 1.234, 12.34, 12345.6)] == ["-", "1.23", "12.3", "12,346"]
    assert bench.ratio(2.0, 4.0) == 0.5 and bench.ratio(None, 1.0) is None and bench.ratio(1.0, 0.0) is None


# ---------------------------------------------------------------- entry points

@pytest.mark.slow
def test_console_script_python_m_and_the_script_run_the_same_command():
    argv = ["kernels", "--cases", "band2-pre", "--lengths", "4", "--heads", "2", "--head-dim", "4", "--min-time", "0",
            "--repeats", "1", "--threads", "1"]
    for cmd in (["fairseq-local", "benchmark"], [sys.executable, "-m", "fairseq_local_cli.benchmark"],
                [sys.executable, "scripts/benchmark.py"]):
        r = run([*cmd, *argv])
        [(header, rows)] = tables(r.stdout)
        assert [r[:4] for r in rows] == [["band2-pre", "pre", "2", "4"]]
        assert "[kernels 1/1] band2-pre H=2 n=4 (" in r.stderr  # progress
