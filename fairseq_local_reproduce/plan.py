"""A paper's experiments as a plan of steps, and the runner.

A step is one command of the project's own scripts (``scripts/train.sh``,
``scripts/finetune-glue.sh``, ``fairseq-local analyze ...``), run from the
checkout's root with its output in a log.  The runner runs the steps in
order, or ``jobs`` at a time: a step waits for the earlier steps whose
outputs (``--out``, ``--save-dir``, ``folders``, ``outputs``) its command
names, and a step with no known output waits for, and holds, every other
(:func:`dependencies`).  A step that finished leaves a stamp (``RUNS/.steps/<id>.json``, with
its command), so a re-run skips it; an interrupted step runs again, and the
scripts it calls resume from their checkpoints.  Steps that several papers
share (the data) have the same id, so the second paper skips them.
"""

import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Sequence, Set

from fairseq_local.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
OUTPUT_FLAGS = ("--out", "--save-dir")
# The minutes each reduced plan may take on 2 CPU cores, two steps at a time, as :func:`estimate` puts
# it from the steps' measured times ("all": every paper, shared steps once): 45 a paper and 180 for all
# at tiny, where each paper's tiny scale says what it leaves to small to fit; at small, what the estimates
# come to (small is not run on this machine).
BUDGETS = {"tiny": {"pande": 45, "sparsebert": 45, "voita": 45, "aaa": 45, "hta": 45, "all": 180},
           "small": {"pande": 730, "sparsebert": 180, "voita": 180, "aaa": 260, "hta": 260, "all": 1330}}
POLL_SECONDS = 0.2  # how often the runner looks at its running steps


@dataclass(frozen=True)
class Step:
    """One command of a plan.

    ``id`` names the step and its stamp ("data/nmt-hard", "pande/nmt/a-s1");
    ``what`` is its line in the printed plan; ``minutes`` its estimated time
    on a 2-core CPU at the plan's scale (None at paper scale)."""

    id: str
    what: str
    cmd: Sequence[str]
    minutes: "float | None" = None
    folders: Sequence[str] = ()  # created before the command runs (its output folders)
    outputs: Sequence[str] = ()  # files or folders it writes besides --out/--save-dir/folders

    def writes(self) -> List[str]:
        """Every file or folder the step writes: ``outputs``, ``folders`` and
        the values of ``--out``/``--save-dir``."""
        flagged = [self.cmd[k + 1] for k, c in enumerate(self.cmd[:-1]) if c in OUTPUT_FLAGS]
        return list(dict.fromkeys([*self.outputs, *self.folders, *flagged]))

    def shell(self) -> str:
        """The command as one shell line."""
        return " ".join(shlex.quote(c) for c in self.cmd)


@dataclass
class Plan:
    """The steps of one paper at one scale, in the order they run."""

    paper: str
    scale: str
    runs: Path
    seeds: Sequence[int]
    steps: List[Step] = field(default_factory=list)
    device: str = "cpu"  # "cpu" or "cuda": where the reduced scales train (paper scale: the scripts' own choice)
    bert: "str | None" = None  # paper scale: a Hugging Face BERT-base folder used instead of pretraining one

    def cpu_flag(self) -> List[str]:
        """``["--cpu"]`` for the scripts that take it when the plan runs on
        the CPU; nothing on ``cuda``, where fairseq takes the GPU."""
        return ["--cpu"] if self.device == "cpu" else []

    @property
    def out(self) -> Path:
        """The paper's folder: its runs, ``report.md`` and figures."""
        return self.runs / self.paper

    def add(self, id: str, what: str, cmd: Sequence[str], minutes: "float | None" = None,
            folders: Sequence = (), outputs: Sequence = ()) -> None:
        if any(s.id == id for s in self.steps):
            raise ValueError(f"duplicate step id {id!r}")
        self.steps.append(Step(id, what, tuple(str(c) for c in cmd), minutes, tuple(str(f) for f in folders),
                               tuple(str(o) for o in outputs)))

    def minutes(self) -> "float | None":
        """The estimated total, or None where a step has no estimate."""
        est = [s.minutes for s in self.steps]
        return None if any(m is None for m in est) else float(sum(est))  # type: ignore[arg-type]


def _related(a: str, b: str) -> bool:
    """Whether one path is the other or inside it (an empty one or "/" is
    no path: it would hold every absolute path)."""
    a, b = a.rstrip("/"), b.rstrip("/")
    return bool(a and b) and (a == b or a.startswith(b + "/") or b.startswith(a + "/"))


def dependencies(steps: Sequence[Step]) -> Dict[str, Set[str]]:
    """For each step, the ids of the earlier steps it waits for: those that
    write a path its command names (the path, a file in it, or a folder
    holding it), and every earlier step where one of the two writes nothing
    known."""
    needs: Dict[str, Set[str]] = {}
    for k, s in enumerate(steps):
        args = [part for c in s.cmd for part in (c, c.split("=", 1)[-1])]
        needs[s.id] = {e.id for e in steps[:k]
                       if not e.writes() or not s.writes() or any(_related(a, o) for o in e.writes() for a in args)}
    return needs


def estimate(plan: Plan, jobs: int = 1) -> "float | None":
    """The plan's estimated minutes with ``jobs`` steps at a time."""
    return None if plan.minutes() is None else schedule(plan.steps, jobs)


def schedule(steps: Sequence[Step], jobs: int = 1, needs: "Dict[str, Set[str]] | None" = None) -> float:
    """The minutes ``steps`` take ``jobs`` at a time, as :func:`run_plan`
    runs them: whenever a step ends, the ready steps start in plan order
    (each at its estimate as it runs; None counts 0).  ``needs``: the
    dependencies, if known (steps outside ``steps`` count as done)."""
    needs = needs or dependencies(steps)
    ids = {s.id for s in steps}
    done = {i for s in steps for i in needs[s.id] if i not in ids}
    pending, running, now = list(steps), [], 0.0  # running: (end, id)
    while pending or running:
        for s in [s for s in pending if needs[s.id] <= done][:max(0, jobs - len(running))]:
            pending.remove(s)
            running.append((now + (s.minutes or 0.0), s.id))
        if not running:
            break
        running.sort()
        now, finished = running.pop(0)
        done.add(finished)
    return now


def stamp_path(runs: Path, step: Step) -> Path:
    return runs / ".steps" / f"{step.id}.json"


def is_done(runs: Path, step: Step) -> bool:
    """Whether ``step`` finished with this very command."""
    path = stamp_path(runs, step)
    try:
        return json.loads(path.read_text(encoding="utf-8")).get("cmd") == list(step.cmd)
    except (OSError, ValueError):
        return False


def check_plan_file(plan: Plan) -> None:
    """Refuse (one line) to continue a folder made at another scale, or with
    another ``--bert`` model: its finished steps would be skipped, or its
    fine-tuning runs resumed, and mixed into this report."""
    path = plan.out / "plan.json"
    if not path.is_file():
        return
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise InputError(f"'{path}' is not a reproduction plan: use another --runs") from None
    if not isinstance(saved, dict) or saved.get("paper") != plan.paper:
        raise InputError(f"'{path}' is not a plan of {plan.paper}: use another --runs")
    if saved.get("scale") != plan.scale:
        raise InputError(f"'{plan.out}' holds the {saved.get('scale')} scale of {plan.paper}: "
                         f"use another --runs for --scale {plan.scale}, or --scale {saved.get('scale')} to resume it")
    if saved.get("bert") != plan.bert:
        def given(bert):
            return f"--bert {bert}" if bert else "no --bert (its own pretraining)"

        raise InputError(f"'{plan.out}' was planned with {given(saved.get('bert'))}, not {given(plan.bert)}: "
                         f"use another --runs")


def write_plan_file(plan: Plan) -> None:
    from fairseq_local import outputs

    plan.out.mkdir(parents=True, exist_ok=True)
    body = {"paper": plan.paper, "scale": plan.scale, "seeds": list(plan.seeds),
            **({"bert": plan.bert} if plan.bert else {}),
            "steps": [{"id": s.id, "cmd": list(s.cmd), "minutes": s.minutes} for s in plan.steps]}
    outputs.write_text(plan.out / "plan.json", json.dumps(body, indent=1) + "\n")


def _minutes(m: "float | None") -> str:
    return "?" if m is None else f"{m:.0f} min" if m >= 1 else "<1 min"


def print_plan(plan: Plan, commands: bool, file=None, jobs: int = 1) -> None:
    """The plan as lines: one per step with its estimate (and command)."""
    file = file or sys.stdout
    total = estimate(plan, jobs)
    done = [is_done(plan.runs, s) for s in plan.steps]
    est = "" if total is None else \
        f", about {_minutes(total)} on 2 CPU cores{f' ({jobs} steps at a time)' if jobs > 1 else ''}"
    print(f"reproduce {plan.paper} --scale {plan.scale}: {len(plan.steps)} steps{est}"
          f"{f' ({sum(done)} already done)' if any(done) else ''}; seeds {', '.join(map(str, plan.seeds))}", file=file)
    width = len(str(len(plan.steps)))
    for k, (s, finished) in enumerate(zip(plan.steps, done), 1):
        mark = "done" if finished else _minutes(s.minutes) if s.minutes is not None else ""
        print(f"  [{k:>{width}}] {s.id}: {s.what}" + (f" ({mark})" if mark else ""), file=file)
        if commands:
            print(f"        {s.shell()}", file=file)


def executable(cmd: Sequence[str]) -> List[str]:
    """The command as run: ``python`` and ``fairseq-local`` are this
    environment's (the printed plan keeps the short names)."""
    exe = Path(sys.executable)
    if cmd[0] == "python":
        return [str(exe), *cmd[1:]]
    if cmd[0] == "fairseq-local" and (exe.parent / "fairseq-local").is_file():
        return [str(exe.parent / "fairseq-local"), *cmd[1:]]
    return list(cmd)


def thread_env(jobs: int) -> Dict[str, str]:
    """The steps' environment: with ``jobs`` > 1, the cores shared out
    (OMP_NUM_THREADS, unless set)."""
    env = dict(os.environ)
    if jobs > 1 and "OMP_NUM_THREADS" not in env:
        env["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // jobs))
    return env


def _stamp(plan: Plan, s: Step, seconds: float, jobs: int, env: Dict[str, str]) -> None:
    from fairseq_local import outputs

    stamp = stamp_path(plan.runs, s)
    stamp.parent.mkdir(parents=True, exist_ok=True)
    outputs.write_text(stamp, json.dumps({"cmd": list(s.cmd), "seconds": round(seconds, 1), "jobs": jobs,
                                          "OMP_NUM_THREADS": env.get("OMP_NUM_THREADS", "-"),
                                          "finished": time.strftime("%Y-%m-%d %H:%M:%S")}) + "\n")


class Interrupted(Exception):
    """SIGTERM (a preemption, ``kill``) while the runner waits on its steps."""


def _interrupted(signum: int, frame: object) -> None:
    raise Interrupted()


def run_plan(plan: Plan, jobs: int = 1) -> None:
    """Run every step not yet done, ``jobs`` at a time as their dependencies
    allow; one ``error:`` line (InputError) naming the first step that failed
    and its log, once the steps still running have finished.  Interrupted
    (Ctrl-C, SIGTERM), it stops the running steps, waits for them, and says
    in one line what a re-run does: no step goes on writing unwatched."""
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _interrupted) if main else None
    try:
        _run_plan(plan, jobs)
    finally:
        if main:
            signal.signal(signal.SIGTERM, previous)


def _run_plan(plan: Plan, jobs: int) -> None:
    check_plan_file(plan)
    write_plan_file(plan)
    number = {s.id: k for k, s in enumerate(plan.steps, 1)}
    needs, env = dependencies(plan.steps), thread_env(jobs)
    done = {s.id for s in plan.steps if is_done(plan.runs, s)}
    for s in plan.steps:
        if s.id in done:
            print(f"skip: [{number[s.id]}/{len(plan.steps)}] {s.id} already done", flush=True)
    pending = [s for s in plan.steps if s.id not in done]
    running: Dict[str, tuple] = {}  # id -> (step, process, log, start)
    failed: List[tuple] = []  # (id, exit code)
    try:
        while pending or running:
            for s in [s for s in pending if not failed and needs[s.id] <= done][:max(0, jobs - len(running))]:
                left = schedule([*(r[0] for r in running.values()), *pending], jobs, needs)
                pending.remove(s)
                log = plan.runs / "logs" / f"{s.id}.log"
                log.parent.mkdir(parents=True, exist_ok=True)
                print(f"[{number[s.id]}/{len(plan.steps)}] {s.id}: {s.what} (about {_minutes(s.minutes)}; "
                      f"{_minutes(left)} left in all; log {log})", flush=True)
                for folder in s.folders:
                    Path(folder).mkdir(parents=True, exist_ok=True)
                with open(log, "a", encoding="utf-8") as f:
                    f.write(f"$ {s.shell()}\n")
                    f.flush()
                    proc = subprocess.Popen(executable(s.cmd), cwd=ROOT, stdout=f, stderr=subprocess.STDOUT, env=env)
                running[s.id] = (s, proc, log, time.time())
            if not running:  # finished, or nothing more starts after a failure
                break
            time.sleep(POLL_SECONDS)
            for sid, (s, proc, log, start) in list(running.items()):
                if proc.poll() is None:
                    continue
                del running[sid]
                seconds = time.time() - start
                if proc.returncode != 0:
                    failed.append((sid, proc.returncode))
                    continue
                _stamp(plan, s, seconds, jobs, env)
                done.add(sid)
                print(f"      done: {sid} in {seconds:.0f} s", flush=True)
    except (KeyboardInterrupt, Interrupted):
        for _, proc, _, _ in running.values():
            if proc.poll() is None:
                proc.terminate()
        for _, proc, _, _ in running.values():
            proc.wait()
        stopped = ", ".join(running) or "none"
        raise InputError(f"interrupted: stopped the running steps ({stopped}); a re-run skips the {len(done)} "
                         f"finished steps and resumes the rest from their checkpoints") from None
    if failed:
        sid, rc = failed[0]
        log = plan.runs / "logs" / f"{sid}.log"
        tail = log.read_text(errors="replace").strip().splitlines()[-5:]
        sys.stderr.write("\n".join(tail) + "\n")
        raise InputError(f"step {sid} failed (exit {rc}): see {log}; a re-run resumes it")


def _stamps(runs: Path, ids: Sequence[str]) -> List[dict]:
    out = []
    for i in ids:
        try:
            out.append(json.loads((runs / ".steps" / f"{i}.json").read_text()))
        except (OSError, ValueError):
            pass
    return [x for x in out if isinstance(x, dict)]


def step_seconds(runs: Path, ids: Sequence[str]) -> float:
    """The summed time of finished steps (their stamps), in seconds."""
    return sum(float(x.get("seconds", 0)) for x in _stamps(runs, ids))


def step_timing(runs: Path, ids: Sequence[str]) -> str:
    """The finished steps' time as their stamps say: the time in which one
    of them ran at least (so neither a pause between resumed runs nor data
    made earlier by another paper counts in between), the summed step
    times, steps at a time and OMP_NUM_THREADS ("35 minutes (67 summed), 2
    steps at a time, OMP_NUM_THREADS 1")."""
    stamps = [x for x in _stamps(runs, ids) if "finished" in x]
    if not stamps:
        return "-"
    ends = [time.mktime(time.strptime(x["finished"], "%Y-%m-%d %H:%M:%S")) for x in stamps]
    span, reach = 0.0, float("-inf")
    for begin, end in sorted((e - float(x.get("seconds", 0)), e) for e, x in zip(ends, stamps)):
        span += max(0.0, end - max(begin, reach))
        reach = max(reach, end)
    jobs = sorted({int(x.get("jobs", 1)) for x in stamps})
    omp = sorted({str(x.get("OMP_NUM_THREADS", "-")) for x in stamps})
    return (f"{span / 60:.0f} minutes ({step_seconds(runs, ids) / 60:.0f} summed), {'/'.join(map(str, jobs))} "
            f"step{'s' if jobs != [1] else ''} at a time, OMP_NUM_THREADS {'/'.join(omp)}")
