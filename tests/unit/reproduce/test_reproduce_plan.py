"""The reproduction frame: the planner's structure at every scale, the
runner's skip and resume, and the refusal to mix scales in one folder."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fairseq_local.errors import InputError
from fairseq_local_reproduce import PAPERS, paper_module, pande
from fairseq_local_reproduce.plan import (Plan, check_plan_file, dependencies, estimate, is_done, print_plan, run_plan,
                                         schedule, step_timing, thread_env, ROOT)


def test_tiny_plan_covers_every_experiment(tmp_path):
    plan = pande.build("tiny", tmp_path)
    ids = [s.id for s in plan.steps]
    assert len(ids) == len(set(ids))
    s = pande.SCALES["tiny"]
    # Tables 1-3: every configuration, (a) with the baseline seeds
    assert s.letters == ("a",)  # tiny: the baseline's three seeds only (pande.SCALES)
    for letter in s.letters:
        seeds = s.base_seeds if letter == "a" else s.seeds
        for seed in seeds:
            pre = "models-tiny/nmt" if letter == "a" else "pande/nmt"  # (a): the shared baseline
            assert f"{pre}/{letter}-s{seed}/train" in ids and f"{pre}/{letter}-s{seed}/test" in ids
    assert sum(i.endswith("/train") for i in ids) == (len(s.letters) - 1) * len(s.seeds) + len(s.base_seeds)
    # Table 4: tiny's three rows (small: six), four tasks each, evaluated per seed
    assert s.bert_rows == pande.BERT_ROWS[:3] and pande.SCALES["small"].bert_rows == pande.BERT_ROWS
    for arch in s.bert_rows:  # BERT-base: the shared model
        assert (f"pande/bert/{arch}/pretrain" if arch != pande.BERT_ROWS[0] else "models-tiny/bert/base/pretrain") in ids
        for task in pande.TASKS:
            assert f"pande/bert/{arch}/glue-s1/{task}" in ids
    # Figs. 1-3: the NMT baseline and BERT-base fine-tuned on each task
    for what in ("nmt", *(f"bert-{t}" for t in pande.TASKS)):
        for step in ("dump", "bias", "sensitivity"):
            assert f"pande/analysis/{what}/{step}" in ids
    assert not any(i.startswith("pande/analysis/bert/") for i in ids)
    # data first, shared ids
    assert ids[:5] == ["data-tiny/nmt-hard", "data-tiny/bert-standins", "data-tiny/bert-corpus",
                       "data-tiny/glue-hard-raw", "data-tiny/glue-hard"]
    assert plan.minutes() is not None


def test_paper_plan_is_the_papers_settings(tmp_path):
    plan = pande.build("paper", tmp_path)
    ids = [s.id for s in plan.steps]
    for pair in ("en-de", "en-ru"):
        assert f"data-paper/wmt14_{pair}" in ids
        for letter in pande.LETTERS:
            train = next(s for s in plan.steps if s.id == f"pande/wmt14_{pair}/{letter}/train")
            # the paper's recipe is train-wmt14.sh's own defaults: no size or update overrides
            assert train.cmd[:5] == ("bash", "scripts/train-wmt14.sh", pair, letter, "--data")
            assert "--max-update" not in train.cmd and "--" not in train.cmd
    pre = [s for s in plan.steps if s.id.endswith("/pretrain")]
    assert [s.cmd[2] for s in pre] == list(pande.BERT_ROWS)
    assert all("--updates" not in s.cmd and "--cpu" not in s.cmd for s in pre)
    assert all(s.cmd[-2:] == ("--", "--segment-embeddings") for s in pre)  # BERT-base has one (Devlin et al.)
    ft = [s for s in plan.steps if "/glue-s1/" in s.id and not s.id.endswith(("/eval", "/predictions"))]
    assert len(ft) == 6 * 4 and all("--cpu" not in s.cmd for s in ft)
    assert plan.minutes() is None


@pytest.mark.parametrize("scale", ["tiny", "small", "paper"])
def test_every_papers_commands_exist(tmp_path, scale):
    """Every step of every paper runs one of the project's scripts, python or fairseq-local."""
    for paper in PAPERS:
        for step in paper_module(paper).build(scale, tmp_path).steps:
            if step.cmd[0] == "bash":
                assert (ROOT / step.cmd[1]).is_file(), (paper, step.cmd[1])
            else:
                assert step.cmd[0] in ("python", "fairseq-local"), (paper, step.cmd)


def test_dry_run_prints_every_command(tmp_path, capsys):
    plan = pande.build("paper", tmp_path)
    print_plan(plan, commands=True)
    out = capsys.readouterr().out
    for step in plan.steps:
        assert step.shell() in out
    assert out.splitlines()[0].startswith(f"reproduce pande --scale paper: {len(plan.steps)} steps")


class _FakeProc:
    """A step's process that runs for ``polls`` polls, then exits with ``rc``."""
    alive = peak = 0

    def __init__(self, rc, polls=0):
        self.rc, self.polls, self.returncode = rc, polls, None
        _FakeProc.alive += 1
        _FakeProc.peak = max(_FakeProc.peak, _FakeProc.alive)

    def poll(self):
        if self.returncode is None and self.polls <= 0:
            self.returncode = self.rc
            _FakeProc.alive -= 1
        self.polls -= 1
        return self.returncode

    def wait(self):
        self.polls = 0
        return self.poll()


def _fake_runner(monkeypatch, calls, fail=(), polls=0):
    def popen(cmd, cwd, stdout, stderr, env):
        calls.append(cmd)
        return _FakeProc(1 if any(f in cmd for f in fail) else 0, polls)

    _FakeProc.alive = _FakeProc.peak = 0
    monkeypatch.setattr(subprocess, "Popen", popen)
    monkeypatch.setattr("fairseq_local_reproduce.plan.POLL_SECONDS", 0.0)


def _plan(tmp_path, n=3, scale="tiny"):
    plan = Plan("pande", scale, tmp_path, (1,))
    for k in range(n):
        plan.add(f"pande/x{k}", f"step {k}", ["bash", "scripts/train.sh", f"arg{k}"], 1.0)
    return plan


def test_runner_skips_finished_and_resumes_interrupted(tmp_path, monkeypatch, capsys):
    calls = []
    _fake_runner(monkeypatch, calls, fail=("arg1",))
    plan = _plan(tmp_path)
    with pytest.raises(InputError, match=r"step pande/x1 failed \(exit 1\): see .*x1.log; a re-run resumes it"):
        run_plan(plan)
    assert [c[-1] for c in calls] == ["arg0", "arg1"]
    assert is_done(tmp_path, plan.steps[0]) and not is_done(tmp_path, plan.steps[1])
    calls.clear()
    _fake_runner(monkeypatch, calls)
    run_plan(plan)
    assert [c[-1] for c in calls] == ["arg1", "arg2"]  # the finished step is skipped
    assert "skip: [1/3] pande/x0 already done" in capsys.readouterr().out
    calls.clear()
    run_plan(plan)
    assert calls == []
    saved = json.loads((tmp_path / "pande" / "plan.json").read_text())
    assert saved["scale"] == "tiny" and [s["id"] for s in saved["steps"]] == ["pande/x0", "pande/x1", "pande/x2"]


def test_output_folders_are_made_before_the_command(tmp_path, monkeypatch):
    seen = []
    out = tmp_path / "analysis" / "nmt"

    def popen(cmd, cwd, stdout, stderr, env):
        seen.append(out.is_dir())
        return _FakeProc(0)

    monkeypatch.setattr(subprocess, "Popen", popen)
    plan = Plan("pande", "tiny", tmp_path, (1,))
    plan.add("pande/dump", "dump", ["fairseq-local", "attention", "dump", "--out", out / "attention.pt"], 0.1,
             folders=[out])
    run_plan(plan)
    assert seen == [True]
    assert any(s.folders for s in pande.build("tiny", tmp_path).steps if s.id.endswith("/dump"))


def test_changed_command_runs_again(tmp_path, monkeypatch):
    calls = []
    _fake_runner(monkeypatch, calls)
    run_plan(_plan(tmp_path, 1))
    plan = Plan("pande", "tiny", tmp_path, (1,))
    plan.add("pande/x0", "step 0", ["bash", "scripts/train.sh", "other"], 1.0)
    assert not is_done(tmp_path, plan.steps[0])
    run_plan(plan)
    assert calls[-1][-1] == "other"


def test_other_scale_in_the_same_folder_is_refused(tmp_path, monkeypatch):
    _fake_runner(monkeypatch, [])
    run_plan(_plan(tmp_path, 1))
    with pytest.raises(InputError, match="holds the tiny scale of pande: use another --runs for --scale small"):
        check_plan_file(_plan(tmp_path, 1, scale="small"))
    given = _plan(tmp_path, 1)
    given.bert = "/models/bert-base"  # another BERT-base: its fine-tuning runs must not be resumed
    with pytest.raises(InputError, match="planned with no --bert \\(its own pretraining\\), not --bert /models/bert-base"):
        check_plan_file(given)
    (tmp_path / "pande" / "plan.json").write_text("[1, 2]")
    with pytest.raises(InputError, match="is not a plan of pande"):
        check_plan_file(_plan(tmp_path, 1))


def test_every_paper_has_a_module():
    for paper in PAPERS:
        assert callable(paper_module(paper).build) and paper_module(paper).TITLE.startswith("# ")
        assert callable(paper_module(paper, "report").write_report)


@pytest.mark.slow
def test_cli_dry_run_and_errors(tmp_path):
    cmd = [sys.executable, "-m", "fairseq_local_cli.reproduce"]
    r = subprocess.run(cmd + ["pande", "--scale", "paper", "--dry-run", "--runs", str(tmp_path)],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert "bash scripts/train-wmt14.sh en-ru l" in r.stdout
    assert not (tmp_path / "pande").exists()  # a dry run writes nothing
    r = subprocess.run(cmd + ["nosuch"], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    f = tmp_path / "file"
    f.write_text("x")
    r = subprocess.run(cmd + ["pande", "--runs", str(f), "--dry-run"], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 1 and r.stderr.strip() == f"error: cannot write the runs folder '{f}': it is a file, not a folder"


def _independent(tmp_path, n=4):
    """``n`` steps that write their own folders and read one data folder (step 0)."""
    plan = Plan("pande", "tiny", tmp_path, (1,))
    plan.add("data", "data", ["python", "-m", "gen", "--out", tmp_path / "data"], 1.0)
    for k in range(1, n):
        plan.add(f"pande/r{k}", f"run {k}", ["bash", "scripts/train.sh", "--data", tmp_path / "data",
                                             "--save-dir", tmp_path / f"r{k}"], 1.0)
    plan.add("pande/eval", "eval", ["bash", "scripts/evaluate-glue.sh", "--runs", tmp_path / "r1",
                                    "--out", tmp_path / "r1" / "eval"], 1.0)
    plan.add("pande/report", "no known output", ["python", "-m", "report"], 1.0)
    return plan


def test_dependencies_follow_the_paths_a_step_writes_and_reads(tmp_path):
    needs = dependencies(_independent(tmp_path).steps)
    assert needs["data"] == set() and needs["pande/r1"] == needs["pande/r3"] == {"data"}
    assert needs["pande/eval"] == {"pande/r1"}  # a file inside r1's --save-dir
    assert needs["pande/report"] == {"data", "pande/r1", "pande/r2", "pande/r3", "pande/eval"}
    plan = _independent(tmp_path)
    plan.add("pande/quoted", "an empty and a root argument", ["bash", "x.sh", "", "/", "--out", tmp_path / "q"])
    assert dependencies(plan.steps)["pande/quoted"] == {"pande/report"}  # the step without known outputs
    real = dependencies(pande.build("tiny", tmp_path).steps)
    assert real["models-tiny/nmt/a-s2/train"] == {"data-tiny/nmt-hard"}
    assert real["models-tiny/nmt/a-s2/test"] == {"data-tiny/nmt-hard", "models-tiny/nmt/a-s2/train"}
    ft = [i for i in real if i.startswith("pande/bert/roberta_band2/glue-s1/") and not i.endswith(("eval", "predictions"))]
    assert len(ft) == 4 and all(real[i] & set(ft) == set() for i in ft)  # the four tasks run side by side
    assert set(ft) <= real["pande/bert/roberta_band2/glue-s1/eval"]
    assert set(ft) <= real["pande/bert/roberta_band2/glue-s1/predictions"]
    # each fine-tuned model is analysed after its fine-tuning, on the sentences of the data step
    assert {"pande/bert/roberta_local_base/glue-s1/QQP", "data-tiny/glue-hard-raw",
            "data-tiny/glue-hard"} <= real["pande/analysis/bert-QQP/sensitivity"]


@pytest.mark.parametrize("jobs", [1, 2])
def test_jobs_run_independent_steps_side_by_side(tmp_path, monkeypatch, jobs):
    calls = []
    _fake_runner(monkeypatch, calls, polls=3)
    plan = _independent(tmp_path)
    run_plan(plan, jobs=jobs)
    assert _FakeProc.peak == jobs and len(calls) == len(plan.steps)
    assert calls[0][-1] == str(tmp_path / "data") and calls[-1] == [sys.executable, "-m", "report"]
    assert all(is_done(tmp_path, s) for s in plan.steps)
    assert estimate(plan, jobs) == {1: 6.0, 2: 4.0}[jobs]  # data; r1 r2 | r3 eval; report
    timing = step_timing(tmp_path, [s.id for s in plan.steps])
    assert timing.startswith("0 minutes (0 summed), ") and f"{jobs} step{'s' if jobs > 1 else ''} at a time" in timing


def test_a_failed_step_lets_running_steps_finish_and_starts_none(tmp_path, monkeypatch):
    calls = []
    _fake_runner(monkeypatch, calls, fail=(str(tmp_path / "r1"),), polls=2)
    plan = _independent(tmp_path)
    with pytest.raises(InputError, match=r"step pande/r1 failed \(exit 1\)"):
        run_plan(plan, jobs=2)
    assert len(calls) == 3 and is_done(tmp_path, plan.steps[2]) and not is_done(tmp_path, plan.steps[3])


def test_jobs_share_the_cores_out(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr("os.cpu_count", lambda: 8)
    assert thread_env(2)["OMP_NUM_THREADS"] == "4" and "OMP_NUM_THREADS" not in thread_env(1)
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert thread_env(2)["OMP_NUM_THREADS"] == "3"


def test_table4_layouts_scale_to_the_reduced_model(tmp_path):
    from fairseq_local.attention.layout import parse_layout
    from fairseq_local.models.archs import get_config

    for arch in pande.BERT_ROWS:  # at BERT-base's shape, the archs' own layouts
        assert pande.table4_layout(arch, 12, 12) == (get_config(arch).layout or "[global*12]*12")
    assert [pande.table4_layout(a, 4, 4) for a in pande.BERT_ROWS] == [
        "[global*4]*4", "[band-2*4]*4", "[band-6*4]*4", "[band-6@@t*4]*4", "[band-6@@t*4]*3;[band-6*4]",
        "[band-6@@t*4]*2;[band-6*4]*2"]
    tied = [sum(h.group == "@@t" for layer in parse_layout(pande.table4_layout(a, 4, 4)) for h in layer.heads)
            for a in pande.BERT_ROWS]
    assert tied == [0, 0, 0, 16, 12, 8]
    plan = pande.build("small", tmp_path)  # every row (tiny: the first three)
    for arch in pande.BERT_ROWS:
        sid = "models-small/bert/base/pretrain" if arch == pande.BERT_ROWS[0] else f"pande/bert/{arch}/pretrain"
        pre = next(st for st in plan.steps if st.id == sid)
        assert pre.cmd[2] == "roberta_local_base"
        assert pre.cmd[pre.cmd.index("--attn-layout") + 1] == pande.table4_layout(arch)
        assert "--segment-embeddings" in pre.cmd  # BERT's (Table 4's rows); fine-tuning reads it from the checkpoint
    from fairseq_local_reproduce import sparsebert  # a stock roberta_base is converted there: no segments
    assert not any("--segment-embeddings" in st.cmd for st in sparsebert.build("tiny", tmp_path / "sb").steps)


def test_step_timing_counts_the_time_some_step_ran(tmp_path):
    stamps = [(60, "2026-01-01 10:01:00"), (120, "2026-01-01 10:02:00"), (60, "2026-01-02 09:01:00")]
    for k, (seconds, finished) in enumerate(stamps):  # two side by side, one a day later
        _write_stamp(tmp_path, f"s{k}", {"cmd": [], "seconds": seconds, "jobs": 2, "OMP_NUM_THREADS": "1",
                                        "finished": finished})
    assert step_timing(tmp_path, ["s0", "s1", "s2", "missing"]) == \
        "3 minutes (4 summed), 2 steps at a time, OMP_NUM_THREADS 1"
    assert step_timing(tmp_path, ["missing"]) == "-"


def _write_stamp(runs, sid, body):
    path = runs / ".steps" / f"{sid}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(body))


def test_the_estimate_starts_ready_steps_as_the_runner_does(tmp_path):
    plan = Plan("pande", "tiny", tmp_path, (1,))
    for k in (1, 2):  # a fine-tune and its evaluation, twice: both fine-tunes run side by side first
        plan.add(f"ft{k}", "ft", ["bash", "scripts/finetune-glue.sh", "--save-dir", tmp_path / f"ft{k}"], 1.0)
        plan.add(f"eval{k}", "eval", ["bash", "scripts/evaluate-glue.sh", "--runs", tmp_path / f"ft{k}",
                                      "--out", tmp_path / f"ft{k}" / "eval"], 0.25)
    assert estimate(plan, 1) == 2.5 and estimate(plan, 2) == 1.25
    assert schedule(plan.steps[1:], 2) == 1.25  # ft1 counted as done: eval1 and ft2 start at once


@pytest.mark.parametrize("scale", ["tiny", "small", "paper"])
def test_commands_that_need_their_output_folder_get_it(tmp_path, scale):
    """export and attention dump write a file and refuse a missing folder: the
    step makes it (``folders``), or an earlier step writes it (a --save-dir)."""
    for paper in PAPERS:
        steps = paper_module(paper).build(scale, tmp_path).steps
        for k, step in enumerate(steps):
            if step.cmd[:2] == ("fairseq-local", "export") or step.cmd[:3] == ("fairseq-local", "attention", "dump"):
                folder = str(Path(step.cmd[step.cmd.index("--out") + 1]).parent)
                assert folder in step.folders or any(folder in e.writes() for e in steps[:k]), (paper, step.id)
