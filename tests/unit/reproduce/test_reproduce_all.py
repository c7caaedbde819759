"""``fairseq-local reproduce all``: every paper's plan printed, checked
before any runs, run in turn, and RUNS/summary.md with each report's count
of findings."""

from fairseq_local_cli import reproduce as cli
from fairseq_local_reproduce import PAPERS, paper_module


def test_dry_run_prints_every_papers_real_plan(tmp_path, capsys):
    assert cli.main(["all", "--scale", "paper", "--dry-run", "--runs", str(tmp_path / "r")]) == 0
    out = capsys.readouterr().out
    for paper in PAPERS:
        plan = paper_module(paper).build("paper", tmp_path / "r")
        assert f"reproduce {paper} --scale paper: {len(plan.steps)} steps" in out
        assert all(step.id in out for step in plan.steps)
    assert "bash scripts/train-wmt14.sh en-ru l" in out and "bash scripts/pretrain-bert.sh roberta_dam_s" in out
    assert not (tmp_path / "r").exists()  # a dry run writes nothing


def test_all_runs_each_plan_then_writes_the_summary(tmp_path, monkeypatch, capsys):
    from fairseq_local_reproduce import plan as plan_module

    ran = []
    monkeypatch.setattr(plan_module, "run_plan", lambda plan, jobs: ran.append((plan.paper, jobs)))
    counts_of = {paper: f"{10 + k} findings: {k} reproduced, 10 contradicted, 0 inconclusive, 0 not comparable"
                 for k, paper in enumerate(PAPERS)}
    for paper, counts in counts_of.items():
        module = paper_module(paper, "report")

        def fake(plan, title=paper_module(paper).TITLE, counts=counts):
            plan.out.mkdir(parents=True, exist_ok=True)
            (plan.out / "report.md").write_text(f"{title} at x\n\n## Findings\n\n{counts}.\n")
            return plan.out / "report.md"
        monkeypatch.setattr(module, "write_report", fake)
    runs = tmp_path / "r"
    assert cli.main(["all", "--runs", str(runs), "--jobs", "3"]) == 0
    assert ran == [(paper, 3) for paper in PAPERS]
    assert (runs / "summary.md").read_text().splitlines() == [
        "# The papers, reproduced at `tiny` scale", "", "| paper | findings | report |", "|---|---|---|",
        *(f"| {PAPERS[paper]} | {counts} | [{paper}/report.md]({paper}/report.md) |"
          for paper, counts in counts_of.items())]
    assert capsys.readouterr().out.endswith(f"reproduce all: summary in {runs / 'summary.md'}\n")


def test_a_foreign_summary_is_refused_before_anything_runs(tmp_path, monkeypatch, capsys):
    from fairseq_local_reproduce import plan as plan_module

    monkeypatch.setattr(plan_module, "run_plan", lambda plan, jobs: (_ for _ in ()).throw(AssertionError("ran")))
    runs = tmp_path / "r"
    runs.mkdir()
    (runs / "summary.md").write_text("my notes\n")
    try:
        cli.main(["all", "--runs", str(runs)])
    except SystemExit as e:
        assert e.code == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "summary.md" in err
    assert (runs / "summary.md").read_text() == "my notes\n"


def test_the_summary_lists_every_finding_with_its_verdict_and_interval(tmp_path):
    from fairseq_local_reproduce.report import (CONTRADICTED, INCONCLUSIVE, NOT_COMPARABLE, REPRODUCED, Finding,
                                                findings_section, read_findings)

    found = [Finding("V1", "Heads that matter are confident (§4).", REPRODUCED, "ρ +0.43",
                     "ρ = +0.43 [+0.20, +0.61] (bootstrap over 48 heads)"),
             Finding("W8", "AAA reaches |target| ρ.", CONTRADICTED, "0.61 against 0.73: **short**",
                     "Δ = -0.12 [-0.15, -0.09] (Welch t, 3 vs 3 seeds)"),
             Finding("P2", "Unrelated tokens are negligible.", INCONCLUSIVE, "wide"),
             Finding("H9", "German BERT too.", NOT_COMPARABLE, "no German model")]
    text = "# T at x\n\n" + findings_section(found) + "\n## Tables\n\n- **not** a finding line\n"
    assert read_findings(text) == found  # the inverse of Finding.line
    runs = tmp_path / "r"
    (runs / "voita").mkdir(parents=True)
    (runs / "voita" / "report.md").write_text(text)
    lines = cli.write_summary(runs, "tiny", ["voita"], [runs / "voita" / "report.md"]).read_text().splitlines()
    assert lines[4] == f"| {PAPERS['voita']} | 4 findings: 1 reproduced, 1 contradicted, 1 inconclusive, " \
                       "1 not comparable | [voita/report.md](voita/report.md) |"
    assert lines[5:] == ["", f"## {PAPERS['voita']}", "", "From [voita/report.md](voita/report.md).", "",
                         "|  | finding | verdict | estimate [95 % interval] (basis) |", "|---|---|---|---|",
                         "| V1 | Heads that matter are confident (§4). | reproduced | "
                         "ρ = +0.43 [+0.20, +0.61] (bootstrap over 48 heads) |",
                         "| W8 | AAA reaches \\|target\\| ρ. | contradicted | "
                         "Δ = -0.12 [-0.15, -0.09] (Welch t, 3 vs 3 seeds) |",
                         "| P2 | Unrelated tokens are negligible. | inconclusive | - |",
                         "| H9 | German BERT too. | not comparable | - |"]


def test_device_cuda_drops_the_cpu_flag_from_every_reduced_plan(tmp_path):
    for paper in PAPERS:
        module = paper_module(paper)
        cpu = module.build("tiny", tmp_path / "r")
        cuda = module.build("tiny", tmp_path / "r", device="cuda")
        assert cpu.device == "cpu" and cuda.device == "cuda"
        assert [s.id for s in cpu.steps] == [s.id for s in cuda.steps]
        assert not any("--cpu" in s.cmd for s in cuda.steps), paper
        if paper in ("pande", "sparsebert", "aaa"):  # their BERT steps train on the CPU by --cpu
            assert any("--cpu" in s.cmd for s in cpu.steps), paper


def test_device_is_a_choice_of_the_command(capsys, tmp_path):
    assert cli.main(["voita", "--device", "cuda", "--dry-run", "--runs", str(tmp_path / "r")]) == 0
    try:
        cli.main(["voita", "--device", "tpu", "--dry-run"])
    except SystemExit as e:
        assert e.code == 2
    assert "invalid choice: 'tpu'" in capsys.readouterr().err


def test_a_report_of_the_earlier_rule_is_marked_never_read_as_a_new_verdict():
    from fairseq_local_reproduce.report import read_findings

    old = "- **P7** Local heads cost little. **reproduced**: BLEU − BLEU(a): (b) +1.70\n" \
          "- **P1** Locality first. **not reproduced**: no\n"
    found = read_findings(old)
    assert [(f.id, f.verdict, f.estimate) for f in found] == [
        ("P7", "reproduced (earlier two-way rule)", "-"), ("P1", "not reproduced (earlier two-way rule)", "-")]
