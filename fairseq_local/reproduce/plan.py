"""A paper's experiments as a plan of steps, and the runner.

A step is one command of the project's own scripts (``scripts/train.sh``,
``scripts/finetune-glue.sh``, ``fairseq-local analyze ...``), run from the
checkout's root with its output in a log.  The runner runs the steps in
order.  A step that finished leaves a stamp (``RUNS/.steps/<id>.json``, with
its command), so a re-run skips it; an interrupted step runs again, and the
scripts it calls resume from their checkpoints.  Steps that several papers
share (the data) have the same id, so the second paper skips them.
"""

import json
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Sequence

from ..errors import InputError

ROOT = Path(__file__).resolve().parents[2]


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

    @property
    def out(self) -> Path:
        """The paper's folder: its runs, ``report.md`` and figures."""
        return self.runs / self.paper

    def add(self, id: str, what: str, cmd: Sequence[str], minutes: "float | None" = None,
            folders: Sequence = ()) -> None:
        if any(s.id == id for s in self.steps):
            raise ValueError(f"duplicate step id {id!r}")
        self.steps.append(Step(id, what, tuple(str(c) for c in cmd), minutes, tuple(str(f) for f in folders)))

    def minutes(self) -> "float | None":
        """The estimated total, or None where a step has no estimate."""
        est = [s.minutes for s in self.steps]
        return None if any(m is None for m in est) else float(sum(est))  # type: ignore[arg-type]


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
    """Refuse (one line) to continue a folder made at another scale: its
    finished steps would be skipped and mixed into this report."""
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


def write_plan_file(plan: Plan) -> None:
    from .. import outputs

    plan.out.mkdir(parents=True, exist_ok=True)
    body = {"paper": plan.paper, "scale": plan.scale, "seeds": list(plan.seeds),
            "steps": [{"id": s.id, "cmd": list(s.cmd), "minutes": s.minutes} for s in plan.steps]}
    outputs.write_text(plan.out / "plan.json", json.dumps(body, indent=1) + "\n")


def _minutes(m: "float | None") -> str:
    return "?" if m is None else f"{m:.0f} min" if m >= 1 else "<1 min"


def print_plan(plan: Plan, commands: bool, file=None) -> None:
    """The plan as lines: one per step with its estimate (and command)."""
    file = file or sys.stdout
    total = plan.minutes()
    done = [is_done(plan.runs, s) for s in plan.steps]
    est = "" if total is None else f", about {_minutes(total)} on 2 CPU cores"
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


def run_plan(plan: Plan) -> None:
    """Run every step not yet done, in order; one ``error:`` line (InputError)
    naming the step and its log when one fails."""
    from .. import outputs

    check_plan_file(plan)
    write_plan_file(plan)
    todo = [s for s in plan.steps if not is_done(plan.runs, s)]
    left = sum(s.minutes or 0 for s in todo)
    for k, s in enumerate(plan.steps, 1):
        if s not in todo:
            print(f"skip: [{k}/{len(plan.steps)}] {s.id} already done", flush=True)
            continue
        log = plan.runs / "logs" / f"{s.id}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        print(f"[{k}/{len(plan.steps)}] {s.id}: {s.what} (about {_minutes(s.minutes)}; "
              f"{_minutes(left)} left in all; log {log})", flush=True)
        start = time.time()
        for folder in s.folders:
            Path(folder).mkdir(parents=True, exist_ok=True)
        with open(log, "a", encoding="utf-8") as f:
            f.write(f"$ {s.shell()}\n")
            f.flush()
            rc = subprocess.run(executable(s.cmd), cwd=ROOT, stdout=f, stderr=subprocess.STDOUT).returncode
        if rc != 0:
            tail = log.read_text(errors="replace").strip().splitlines()[-5:]
            sys.stderr.write("\n".join(tail) + "\n")
            raise InputError(f"step {s.id} failed (exit {rc}): see {log}; a re-run resumes it")
        seconds = time.time() - start
        left -= s.minutes or 0
        stamp = stamp_path(plan.runs, s)
        stamp.parent.mkdir(parents=True, exist_ok=True)
        outputs.write_text(stamp, json.dumps({"cmd": list(s.cmd), "seconds": round(seconds, 1),
                                              "finished": time.strftime("%Y-%m-%d %H:%M:%S")}) + "\n")
        print(f"      done in {seconds:.0f} s", flush=True)


def step_seconds(runs: Path, ids: Sequence[str]) -> float:
    """The measured time of finished steps (their stamps), in seconds."""
    total = 0.0
    for i in ids:
        try:
            total += float(json.loads((runs / ".steps" / f"{i}.json").read_text()).get("seconds", 0))
        except (OSError, ValueError):
            pass
    return total
