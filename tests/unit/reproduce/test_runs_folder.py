"""One reproduction per runs folder, a runs folder of its own, and an
interrupted runner that stops its steps and says what a re-run does."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from fairseq_local_cli import reproduce as cli
from fairseq_local.errors import InputError
from fairseq_local.locks import LOCK_NAME, folder_lock
from fairseq_local_reproduce import plan as plan_mod
from fairseq_local_reproduce.plan import ROOT, Plan, is_done, run_plan


def test_a_second_job_in_one_folder_is_refused_naming_the_holder(tmp_path):
    with folder_lock(tmp_path, "reproduce"):
        with pytest.raises(InputError, match=rf"{tmp_path} is being written by process {os.getpid()} \(reproduce\)"):
            with folder_lock(tmp_path, "reproduce"):
                pass
    with folder_lock(tmp_path, "reproduce"):  # released: the next job takes it
        pass
    assert (tmp_path / LOCK_NAME).read_text() == ""  # a clean end leaves nothing to take over


def test_a_lock_left_by_an_ended_process_is_taken_over_and_reported(tmp_path, capsys):
    (tmp_path / LOCK_NAME).write_text("999999999 reproduce\n")  # no such process holds it
    with folder_lock(tmp_path, "reproduce"):
        assert (tmp_path / LOCK_NAME).read_text() == f"{os.getpid()} reproduce\n"
    err = capsys.readouterr().err
    assert "was locked by process 999999999 (reproduce), which has ended without releasing it; taking the lock over" in err


def test_the_command_refuses_a_folder_another_reproduce_is_writing(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(plan_mod, "run_plan", lambda *a, **k: pytest.fail("a step ran beside the other job"))
    with folder_lock(tmp_path, "reproduce"):
        with pytest.raises(SystemExit) as e:
            cli.main(["voita", "--scale", "tiny", "--runs", str(tmp_path)])
    assert e.value.code == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == (f"error: {tmp_path} is being written by process {os.getpid()} (reproduce): wait for it to "
                       "end, or stop it, before running another reproduce there")


@pytest.mark.parametrize("where", ["root", "checkout", "source", "data"])
def test_runs_must_be_a_folder_of_its_own(tmp_path, capsys, where):
    runs = {"root": "/", "checkout": str(ROOT), "source": str(ROOT / "fairseq_local"), "data": str(tmp_path)}[where]
    (tmp_path / "dict.txt").write_text("a 1\n")
    with pytest.raises(SystemExit) as e:
        cli.main(["voita", "--runs", runs, "--dry-run"])
    assert e.value.code == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: --runs {runs} is ") and "a folder of their own" in err[0]
    assert not (tmp_path / "data-tiny").exists()


class _Proc:
    """A step that is still running; ``poll`` raises Ctrl-C once."""

    def __init__(self, interrupt):
        self.interrupt, self.returncode, self.terminated = interrupt, None, False

    def poll(self):
        if self.interrupt:
            self.interrupt = False
            raise KeyboardInterrupt
        return self.returncode

    def terminate(self):
        self.terminated, self.returncode = True, -15

    def wait(self):
        return self.returncode


def test_an_interrupted_runner_stops_its_steps_and_says_what_a_rerun_does(tmp_path, monkeypatch):
    procs = []
    monkeypatch.setattr(subprocess, "Popen", lambda *a, **k: procs.append(_Proc(not procs)) or procs[-1])
    monkeypatch.setattr(plan_mod, "POLL_SECONDS", 0.0)
    plan = Plan("voita", "tiny", tmp_path, (1,))
    for k in range(3):
        plan.add(f"voita/x{k}", f"step {k}", ["bash", "scripts/train.sh", "--out", tmp_path / f"x{k}"], 1.0)
    with pytest.raises(InputError, match=r"interrupted: stopped the running steps \(voita/x0, voita/x1\); a re-run "
                                         r"skips the 0 finished steps and resumes the rest from their checkpoints"):
        run_plan(plan, jobs=2)
    assert [p.terminated for p in procs] == [True, True]  # none goes on writing unwatched
    assert not any(is_done(tmp_path, s) for s in plan.steps)


@pytest.mark.slow
def test_sigterm_stops_the_running_step(tmp_path):
    """A real runner killed with SIGTERM (a preemption) takes its step's
    process down with it and ends with its one line."""
    script = textwrap.dedent(f"""
        from pathlib import Path
        from fairseq_local.errors import InputError
        from fairseq_local_reproduce.plan import Plan, run_plan
        plan = Plan("voita", "tiny", Path({str(tmp_path)!r}), (1,))
        plan.add("voita/sleep", "a long step", ["bash", "-c", "echo $$ > {tmp_path}/pid; exec sleep 60"], 1.0,
                 outputs=[{str(tmp_path / 'pid')!r}])
        try:
            run_plan(plan)
        except InputError as e:
            print("error:", e)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    pid_file = tmp_path / "pid"
    for _ in range(200):
        if pid_file.is_file() and pid_file.read_text().strip():
            break
        time.sleep(0.05)
    step = int(pid_file.read_text())
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=30)
    assert "error: interrupted: stopped the running steps (voita/sleep)" in out
    with pytest.raises(ProcessLookupError):
        for _ in range(100):  # the step is gone (reaped by the runner's wait)
            os.kill(step, 0)
            time.sleep(0.05)
