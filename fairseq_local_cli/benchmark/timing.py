"""Measuring helpers of ``fairseq-local benchmark``: interleaved repeats with
medians, per-call timing (synchronised on CUDA), peak tensor memory on the CPU
(profiler) and on CUDA (the caching allocator's counters), a memory cap, the
machine's description and Markdown tables.

Everything measured in one table is measured in the same process and the same
run: :func:`round_robin` runs each candidate once per round, in a new random
order every round, after warm-up, so that slow phases of a shared machine hit
all candidates alike, and the median per candidate is reported.
"""

import math
import os
import platform
import random
import statistics
import sys
import time
from contextlib import contextmanager
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Union

import torch

try:
    import resource
except ImportError:  # not a Unix: no memory cap
    resource = None  # type: ignore[assignment]


class Skipped(Exception):
    """A candidate that could not be measured; the message says why (one line)."""


Samples = Union[List[float], Skipped]


def round_robin(candidates: Dict[str, Callable[[], float]], repeats: int, warmup: int = 1,
                seed: int = 0, after_round: Optional[Callable[[int], None]] = None) -> Dict[str, Samples]:
    """Run every candidate ``warmup`` times, then ``repeats`` rounds, each
    round once per candidate in a shuffled order.

    Each call returns one measurement.  A candidate that raises
    :class:`Skipped` is dropped from the later rounds and its entry is the
    exception.  ``after_round(r)`` is called after timed round r (1-based).
    Returns the measurements per candidate, in round order.
    """
    results: Dict[str, Samples] = {name: [] for name in candidates}

    def call(name: str, keep: bool) -> None:
        try:
            value = candidates[name]()
        except Skipped as e:
            results[name] = e
            return
        if keep:
            results[name].append(value)  # type: ignore[union-attr]

    for _ in range(warmup):
        for name in candidates:
            if not isinstance(results[name], Skipped):
                call(name, keep=False)
    rng = random.Random(seed)
    order = list(candidates)
    for r in range(repeats):
        rng.shuffle(order)
        for name in order:
            if not isinstance(results[name], Skipped):
                call(name, keep=True)
        if after_round is not None:
            after_round(r + 1)
    return results


def guarded(fn: Callable[[], object], cap_gib: Optional[float] = None) -> Callable[[], object]:
    """``fn`` under :func:`memory_cap`; any failure of it is raised as
    :class:`Skipped` with a one-line reason (so that one failing candidate
    leaves the others of a long run measured)."""
    def call():
        try:
            with memory_cap(cap_gib):
                return fn()
        except Skipped:
            raise
        except Exception as e:
            if out_of_memory(e):
                if torch.cuda.is_available():
                    torch.cuda.empty_cache()  # give the failed call's cached blocks back
                raise Skipped("out of memory") from None
            text = str(e).splitlines()[0] if str(e) else ""
            raise Skipped(f"{type(e).__name__}: {text}"[:160]) from None
    return call


def median(samples: Samples) -> Optional[float]:
    """The median of the measurements, or None for a skipped candidate."""
    return None if isinstance(samples, Skipped) or not samples else statistics.median(samples)


class PerCall:
    """Seconds per call of ``fn``, measured over enough calls to last at least
    ``min_time`` seconds (the count is fixed by the first, warm-up, call).

    ``sync`` (e.g. ``torch.cuda.synchronize``) is called before the clock
    starts and before it stops, so that asynchronous device work queued by
    the calls is inside the measurement and earlier work is not."""

    def __init__(self, fn: Callable[[], object], min_time: float = 0.05,
                 sync: Optional[Callable[[], None]] = None) -> None:
        self.fn, self.min_time, self.calls, self.sync = fn, min_time, 0, sync

    def __call__(self) -> float:
        calls = self.calls or 1
        if self.sync is not None:
            self.sync()
        start = time.perf_counter()
        for _ in range(calls):
            self.fn()
        if self.sync is not None:
            self.sync()
        seconds = (time.perf_counter() - start) / calls
        if not self.calls:
            self.calls = max(1, math.ceil(self.min_time / max(seconds, 1e-9)))
        return seconds


def _vm_size() -> Optional[int]:
    """The process's virtual memory size in bytes (Linux), or None."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def out_of_memory(e: BaseException) -> bool:
    """Whether ``e`` is an allocation failure (the cap of :func:`memory_cap`
    reached, or the CUDA device out of memory)."""
    cuda_oom = getattr(torch.cuda, "OutOfMemoryError", None)
    if cuda_oom is not None and isinstance(e, cuda_oom):
        return True
    return isinstance(e, MemoryError) or (isinstance(e, RuntimeError) and (
        "can't allocate memory" in str(e) or "CUDA out of memory" in str(e)))


@contextmanager
def memory_cap(gib: Optional[float]) -> Iterator[None]:
    """Let the code inside allocate at most about ``gib`` GiB more address
    space than the process holds now (``RLIMIT_AS``; Linux).  An allocation
    beyond it fails at once and is raised as :class:`Skipped`, instead of the
    machine running out of memory.  No cap where ``gib`` is falsy or the
    limit cannot be set."""
    current = _vm_size()
    if not gib or current is None or resource is None:
        yield
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = current + int(gib * 2 ** 30)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    try:
        yield
    except (RuntimeError, MemoryError) as e:
        if out_of_memory(e):
            raise Skipped(f"needs more than {gib:g} GiB") from None
        raise
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


@contextmanager
def _quiet_stderr() -> Iterator[None]:
    """Silence file descriptor 2 (the profiler's native start/stop lines)."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


PEAK_MEMORY_METHOD = ("peak of the running total of tensor allocations minus frees during one call, "
                      "recorded by torch.profiler (profile_memory=True); memory held before the call "
                      "(inputs, weights) is not counted")


def peak_memory(fn: Callable[[], object]) -> int:
    """Bytes: the highest running total of the tensor allocations (minus frees)
    made while ``fn()`` runs once, as :data:`PEAK_MEMORY_METHOD` says."""
    from torch.profiler import ProfilerActivity, profile

    with _quiet_stderr(), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    results = getattr(getattr(prof, "profiler", None), "kineto_results", None)
    if results is None:
        raise Skipped(f"torch {torch.__version__}'s profiler does not give its allocation events")
    events = [e for e in results.events() if e.name() == "[memory]"]
    total = peak = 0
    for e in sorted(events, key=lambda e: e.start_ns()):
        total += e.nbytes()
        peak = max(peak, total)
    return peak


CUDA_PEAK_MEMORY_METHOD = ("torch.cuda.max_memory_allocated during one call (after torch.cuda.synchronize) "
                           "minus torch.cuda.memory_allocated before it, counters reset before the call; "
                           "memory held before the call (inputs, weights) is not counted")


def cuda_peak_memory(fn: Callable[[], object], device: Union[str, torch.device] = "cuda") -> int:
    """Bytes: the CUDA caching allocator's peak of allocated tensor memory
    while ``fn()`` runs once, above what was allocated before the call, as
    :data:`CUDA_PEAK_MEMORY_METHOD` says."""
    device = torch.device(device)
    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    before = torch.cuda.memory_allocated(device)
    fn()
    torch.cuda.synchronize(device)
    return max(0, torch.cuda.max_memory_allocated(device) - before)


def gpu() -> str:
    """The current CUDA device: name, memory, CUDA and cuDNN versions ("" without one)."""
    if not torch.cuda.is_available():
        return ""
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    return (f"{props.name} ({props.total_memory / 2 ** 30:.0f} GiB), CUDA {torch.version.cuda}"
            + (f", cuDNN {cudnn}" if cudnn else ""))


def machine(device: Optional[Union[str, torch.device]] = None) -> str:
    """One line: CPU model, logical CPUs, memory, torch version and threads;
    on a CUDA ``device``, the GPU first."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    except OSError:
        pass
    mem = ""
    try:
        with open("/proc/meminfo") as f:
            kib = next(int(line.split()[1]) for line in f if line.startswith("MemTotal:"))
        mem = f", {kib / 2 ** 20:.0f} GiB"
    except (OSError, StopIteration):
        pass
    threads = torch.get_num_threads()
    text = (f"{cpu} ({os.cpu_count()} logical CPUs{mem}), torch {torch.__version__}, "
            f"{threads} thread{'' if threads == 1 else 's'}")
    if device is not None and torch.device(device).type == "cuda":
        text = f"{gpu()} on {text}"
    return text


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[bool] = ()) -> str:
    """A Markdown table; columns flagged in ``right`` are right-aligned."""
    align = ["---:" if i < len(right) and right[i] else "---" for i in range(len(header))]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(align) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def settings_line(level: str, what: str, repeats: int, warmup: int, seed: int,
                  device: Optional[Union[str, torch.device]] = None) -> str:
    """The line above a level's table: what is measured, how, and on what."""
    return (f"**{level}**: {what}; median of {repeats} interleaved rounds after {warmup} warm-up "
            f"round(s), seed {seed}; {machine(device)}")


def fmt_ms(seconds: Optional[float]) -> str:
    """Seconds as milliseconds with three significant digits, or "-"."""
    if seconds is None:
        return "-"
    ms = seconds * 1e3
    return fmt(ms, ",.0f" if ms >= 100 else ".1f" if ms >= 10 else ".2f" if ms >= 1 else ".3f")


def fmt_rate(value: Optional[float]) -> str:
    """A rate (words/s, sentences/s) with three significant digits or more, or "-"."""
    if value is None:
        return "-"
    return fmt(value, ",.0f" if value >= 100 else ".1f" if value >= 10 else ".2f")


def fmt(value: Optional[float], spec: str = ",.1f") -> str:
    """``value`` formatted, or "-" for a missing one."""
    return "-" if value is None else format(value, spec)


def ratio(value: Optional[float], base: Optional[float]) -> Optional[float]:
    """value / base, or None when either is missing (or base is 0)."""
    return None if value is None or not base else value / base


class Progress:
    """Lines on stderr: ``[level i/n] what (seconds since the start)`` for each
    finished step, and the same with the step under way for :meth:`note`."""

    def __init__(self, level: str, total: int, enabled: bool = True) -> None:
        self.level, self.total, self.enabled, self.done = level, total, enabled, 0
        self.start = time.perf_counter()

    def step(self, what: str) -> None:
        self.done += 1
        self._write(self.done, what)

    def note(self, what: str) -> None:
        self._write(self.done + 1, what)

    def _write(self, index: int, what: str) -> None:
        if self.enabled:
            sys.stderr.write(f"[{self.level} {index}/{self.total}] {what} "
                             f"({time.perf_counter() - self.start:.0f} s)\n")
            sys.stderr.flush()
