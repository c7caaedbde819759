"""``reproduce aaa``: the plan at every scale (Wang et al.'s patterns as head
layouts, the budgets, the targets of Eq. 10), and the report against fixture
runs (hand-written metrics and fine-tuning logs) whose findings are known."""

import json

import pytest
import torch

from fairseq_local.reproduce import aaa, pande
from fairseq_local.reproduce import aaa_report as rep
from fairseq_local.reproduce.numbers_aaa import AAA_FINDINGS, AAA_TABLE4, AAA_TASKS
from fairseq_local.reproduce.plan import dependencies, estimate
from fairseq_local.reproduce.report import NOT_COMPARABLE, NOT_REPRODUCED, REPRODUCED


def _flag(cmd, name):
    return cmd[len(cmd) - 1 - cmd[::-1].index(name) + 1]  # the last occurrence (fairseq's argparse wins it)


def _finetunes(plan):
    return [st for st in plan.steps if st.cmd[:2] == ("bash", "scripts/finetune-glue.sh")]


@pytest.mark.parametrize("scale", ["tiny", "small", "paper"])
def test_every_experiment_is_planned(tmp_path, scale):
    plan = aaa.build(scale, tmp_path)
    s = aaa.SCALES[scale]
    ids = [st.id for st in plan.steps]
    assert len(ids) == len(set(ids))
    rows = aaa.rows(s)
    for key in [*aaa.PRETRAINED, *(f"{k}-pt" for k in aaa.PRETRAINED), *aaa.FIXED, *aaa.fig2_rows(s), "full",
                "diag-fixed", "diag-task", "diag-task-layer", *aaa.AAA_ROWS]:
        assert key in rows, key
        for seed in aaa.row_seeds(s, key):
            assert f"aaa/glue/{key}/s{seed}/eval" in ids
            for task in aaa.row_tasks(s, key):
                assert f"aaa/glue/{key}/s{seed}/{task}" in ids, (key, task)
    assert set(aaa.fig2_rows(s)) == {f"l{k}g2" for k in s.sizes} | {f"l2g{k}" for k in s.sizes}
    pre = [st for st in plan.steps if st.cmd[:2] == ("bash", "scripts/pretrain-bert.sh")]
    assert [st.id.split("/")[2] for st in pre] == ["full", "l2g2", "l2g1r1"] + (["sparsebert"] if scale == "paper"
                                                                                else [])
    assert all(pande.SEGMENTS in st.cmd and st.cmd[2] == "roberta_local_base" for st in pre)
    for st in _finetunes(plan):
        row = rows[st.id.split("/")[2]]
        assert _flag(st.cmd, "--recipe") == "aaa" and ("--cpu" in st.cmd) == (scale != "paper")
        learned = row.kind in ("aaa", "dam", "dam-layer")
        assert (float(_flag(st.cmd, "--aaa-alpha")) > 0) == learned
        assert (float(_flag(st.cmd, "--aaa-target")) > 0) == learned
        assert ("--aaa-hinge-heads" in st.cmd) == learned and ("--dam-per-layer" in st.cmd) == (row.kind == "dam-layer")
        src = "full" if row.key == "full" or not row.key.endswith("-pt") else row.key[:-3]
        assert _flag(st.cmd, "--checkpoint").endswith(f"aaa/bert/{src}/checkpoint_last.pt")


def test_budgets_and_tasks(tmp_path):
    tiny, small = aaa.build("tiny", tmp_path), aaa.build("small", tmp_path / "s")
    assert estimate(tiny, 2) <= 45 and estimate(small, 2) <= 180
    assert estimate(tiny, 1) == pytest.approx(tiny.minutes())
    assert aaa.build("paper", tmp_path / "p").minutes() is None
    assert {_flag(st.cmd, "--task") for st in _finetunes(tiny)} == {"MNLI", "QQP"}
    assert set(aaa.SCALES["paper"].tasks) == set(AAA_TASKS) and aaa.SCALES["paper"].sizes == tuple(range(1, 9))
    paper = aaa.build("paper", tmp_path / "p")
    assert {_flag(st.cmd, "--task") for st in paper.steps if "/l2g8/" in st.id and "eval" not in st.id} == {
        "MNLI", "QNLI", "QQP"}  # Fig. 2's tasks only
    for st in _finetunes(paper):  # the paper's recipe: 30k updates of 32 x 4, no reduced lr or batch
        assert not {"--max-update", "--lr", "--batch-size", "--cpu"} & set(st.cmd)


def test_data_steps_are_shared(tmp_path):
    from fairseq_local.reproduce import sparsebert

    for scale, other in (("tiny", pande), ("small", pande), ("paper", sparsebert)):
        mine = {st.id: st.cmd for st in aaa.build(scale, tmp_path).steps if st.id.startswith("data-")}
        theirs = {st.id: st.cmd for st in other.build(scale, tmp_path).steps if st.id.startswith("data-")}
        assert mine and set(mine) <= set(theirs) and all(mine[i] == theirs[i] for i in mine)


def _counts(token: str, n: int) -> int:
    from fairseq_local.attention.masks import parse_mask

    pos = torch.arange(n)
    return int(parse_mask(token).dense(pos, pos).expand(n, n).sum())


def test_layouts_are_the_papers_patterns(tmp_path):
    from fairseq_local.attention.layout import parse_layout
    from fairseq_local.attention.masks.base import OrMask
    from fairseq_local.attention.masks.patterns import GlobalTokensMask, OffsetMask
    from fairseq_local.attention.masks.seeded import SPAN, RandomWangMask

    n = 16
    assert _counts("local-2", n) == 5 * n - 6  # Wang et al. footnote 5
    assert _counts("local-1", n) == 3 * n - 2 and _counts("global-2", n) == 4 * n - 4
    assert _counts("random-wang-1", SPAN) == 2 * SPAN and _counts("random-wang-2", SPAN) == 4 * SPAN  # §2.2: 2rN
    assert _counts("local-2+global-2", n) == (5 * n - 6) + (4 * n - 4) - 10  # their overlap at rows/cols 0, 1
    plan = aaa.build("tiny", tmp_path)
    rows = aaa.rows(aaa.SCALES["tiny"])
    seen = set()
    for st in _finetunes(plan):
        row = rows[st.id.split("/")[2]]
        if row.kind != "fixed":
            continue
        layout = parse_layout(_flag(st.cmd, "--attn-layout"))
        assert len(layout) == 4 and all(len(layer.heads) == 4 for layer in layout)
        local, glob, rand = aaa.FIXED.get(row.key.replace("-pt", ""), None) or (
            int(row.key[1]), int(row.key[3:].split("g")[-1]), 0)
        mask = layout[0].heads[0].mask
        parts = mask.parts if isinstance(mask, OrMask) else (mask,)
        assert parts[0] == OffsetMask("local", -local, local) and parts[1] == GlobalTokensMask(glob)
        assert parts[2:] == ((RandomWangMask(rand),) if rand else ())
        assert all(h.mask == mask for layer in layout for h in layer.heads) and _flag(st.cmd, "--mask-mode") == "pre"
        seen.add(row.key)
    assert {"l2g2", "l3g1", "l2g1r1", "l1g1r2", "l2g2-pt", "l2g1r1-pt", "l1g2", "l8g2", "l2g8"} <= seen
    aaa_step = next(st for st in plan.steps if st.id == "aaa/glue/aaa-l2g2/s2/QQP")
    assert _flag(aaa_step.cmd, "--attn-layout") == "[aaa*4]*4"
    assert str(parse_layout("[aaa*4]*4")[0].heads[0].mask) == "aaa"
    dam = next(st for st in plan.steps if st.id == "aaa/glue/diag-task-layer/s1/MNLI")
    assert _flag(dam.cmd, "--attn-layout") == "[dam-s*4]*4" and _flag(dam.cmd, "--aaa-hinge-heads") == "learned"


def test_targets_of_eq10(tmp_path):
    from fairseq_local.cli.sparsity import sparsity

    rows = aaa.rows(aaa.SCALES["tiny"])
    t = aaa.target("tiny", rows["aaa-l2g2"], "MNLI")
    assert t == round(sparsity("local-2+global-2", 31), 3) == round(sparsity("local-3+global-1", 31), 3)
    assert aaa.target("tiny", rows["aaa-l1g1r2"], "QQP") > aaa.target("tiny", rows["aaa-l2g2"], "QQP") > t
    assert aaa.target("paper", rows["aaa-l2g1r1"], "CoLA") == AAA_TABLE4["Local2 + Global1 + Random1"]["CoLA"][0] / 100
    assert aaa.target("tiny", rows["diag-task"], "QQP") == aaa.TABLE3_TARGET
    assert aaa.target("paper", rows["diag-task"], "CoLA") == 0.75 and aaa.target("tiny", rows["l2g2"], "QQP") == 0.0


def test_fixed_diagonal_comes_from_the_other_task(tmp_path):
    from fairseq_local.cli import export

    plan = aaa.build("tiny", tmp_path)
    needs = dependencies(plan.steps)
    for task, other in (("MNLI", "QQP"), ("QQP", "MNLI")):
        ex = next(st for st in plan.steps if st.id == f"aaa/masks/dam-s-{other}")
        export.build_parser().parse_args(list(ex.cmd[2:]))
        assert ex.cmd[2].endswith(f"aaa/glue/diag-task/s1/{other}/checkpoint_best.pt")
        assert f"aaa/glue/diag-task/s1/{other}" in needs[ex.id]
        ft = next(st for st in plan.steps if st.id == f"aaa/glue/diag-fixed/s1/{task}")
        assert _flag(ft.cmd, "--mask-file") == ex.cmd[ex.cmd.index("--out") + 1] and ex.id in needs[ft.id]
        assert _flag(ft.cmd, "--attn-layout") == "[file*4]*4"


# ---- the report -------------------------------------------------------------------------------------

SCORES = {"full": (80, 82, 84), "l2g2": (70, 72, 74), "aaa-l2g2": (78, 80, 82), "l2g2-pt": 75, "l2g1r1-pt": 74,
          "l2g1r1": 70, "l3g1": 71, "l1g1r2": 68, "aaa-l2g1r1": 79, "aaa-l1g1r2": 74, "diag-fixed": 60,
          "diag-task": 70, "diag-task-layer": 72, "l1g2": 65, "l2g1": 66,
          "l4g2": {"MNLI": 74, "QQP": 80}, "l8g2": {"MNLI": 78, "QQP": 85},
          "l2g4": {"MNLI": 80, "QQP": 74}, "l2g8": {"MNLI": 85, "QQP": 78}}
RHO = {"full": 0.0, "l2g2": 0.73, "l3g1": 0.73, "l2g1r1": 0.78, "l1g1r2": 0.82, "aaa-l2g2": 0.74,
       "aaa-l2g1r1": 0.70, "aaa-l1g1r2": 0.83, "diag-fixed": 0.78, "diag-task": 0.80, "diag-task-layer": 0.81}


def _valid(acc: float, rho: float, aaa_: bool) -> str:
    extra = f"aaa_rho {rho} | aaa_rows 0.01 | aaa_cols 0.02 | " if aaa_ else ""
    # training's last line: the hinge held ρ at 0.01 below dev's, with more row tokens (Gumbel noise)
    train = (f"2026-01-01 00:00:00 | INFO | train_inner | epoch 004:    100 / 250 loss=0.5, aaa_rho={rho - 0.01}, "
             f"aaa_rows=0.03, num_updates=1000\n" if aaa_ else "")
    return (f"{train}2026-01-01 00:00:00 | INFO | valid | epoch 004 | valid on 'valid' subset | loss 0.5 | nll_loss 0.4 | "
            f"accuracy {acc} | rho {rho} | rho_l1 {rho} | {extra}wps 1 | num_updates 1000 | best_accuracy {acc}")


@pytest.fixture
def runs(tmp_path, monkeypatch):
    from fairseq_local.reproduce import environment

    monkeypatch.setattr(environment, "_git_commit", lambda root: "abc1234")
    plan = aaa.build("tiny", tmp_path)
    s = aaa.SCALES["tiny"]
    for key, v in SCORES.items():
        for k, seed in enumerate(aaa.row_seeds(s, key)):
            d = aaa.ft_dir(plan, key, seed)
            (d / "eval").mkdir(parents=True)
            for task in aaa.row_tasks(s, key):
                x = (v[task] if isinstance(v, dict) else v[k] if isinstance(v, tuple) else v) / 100
                sets = {"MNLI-m": {"accuracy": x}, "MNLI-mm": {"accuracy": x}} if task == "MNLI" else {
                    "QQP": {"f1": x, "accuracy": 0.5}}
                (d / "eval" / f"{task}.json").write_text(json.dumps({"sets": sets}))
                (d / task).mkdir()
                rho = RHO.get(key, 0.6)
                (d / task / "train.log").write_text(_valid(50, 0.99, key.startswith("aaa")) + "\n"
                                                    + _valid(60, rho, key.startswith("aaa")) + "\n")
    return plan


def test_valid_stats(tmp_path):
    (tmp_path / "train.log").write_text("\n".join([_valid(60, 0.1, True), _valid(70, 0.2, False),
                                                   _valid(70, 0.3, True), _valid(65, 0.4, True)]))
    assert rep.valid_stats(tmp_path) == {"rho": 0.3, "aaa_rho": 0.3, "aaa_rows": 0.01, "aaa_cols": 0.02,
                                         "train_aaa_rho": 0.39, "train_aaa_rows": 0.03}  # the last training line
    assert rep.valid_stats(tmp_path / "none") == {}


def _verdict(line: str) -> str:
    return next(v for v in (NOT_REPRODUCED, NOT_COMPARABLE, REPRODUCED) if f"**{v}**" in line)


def test_findings_on_fixture_values(runs):
    text = rep.write_report(runs).read_text()
    lines = {line.split("**")[1]: line for line in text.splitlines() if line.startswith("- **W")}
    assert set(lines) == {f["id"] for f in AAA_FINDINGS}
    v = {k: _verdict(line) for k, line in lines.items()}
    assert v == {"W1": REPRODUCED, "W2": REPRODUCED, "W3": NOT_COMPARABLE, "W4": REPRODUCED, "W5": REPRODUCED,
                 "W6": REPRODUCED, "W7": NOT_REPRODUCED, "W8": NOT_REPRODUCED, "W9": NOT_COMPARABLE,
                 "W10": REPRODUCED, "W11": REPRODUCED, "W12": NOT_COMPARABLE}
    assert "12 findings: 7 reproduced, 2 not reproduced, 3 not comparable." in text
    # seed sd 2 pooled over Full, L2+G2 and AAA: margin 2 * 2 * sqrt(1/3 + 1) = 4.62 against one run
    assert "average Full − l2g2 +10.00; Full − l2g1r1 +12.00; margin ±4.62" in lines["W1"]
    assert ("over sizes 8: MNLI: global − local +7.00 (above; the paper: global more); QQP: global − local -7.00 (below"
            in lines["W5"])
    assert "average diag-task-layer − diag-task +2.00; dev ρ 81.0 % vs 80.0 %" in lines["W7"]
    assert "aaa-l2g1r1 − l2g1r1 +9.00 (dev ρ 70.0 % vs 78.0 %, not matched)" in lines["W9"]
    assert ("within 0.05: in training in 5 of 10 runs, on the dev set in 8 of 10; off on the dev set: "
            "aaa-l2g1r1 MNLI s1: dev 70.0 % for 77.9 % (-7.9 points; training 69.0 %)" in lines["W8"])
    assert "Gumbel" not in lines["W8"]  # the why of a sparser dev pattern: none is sparser here
    assert "MNLI: rows 1.00 %, columns 2.00 % (columns more in 5 of 5 runs)" in lines["W11"]
    assert ("| Local2 + Global2 (fine-tune) | 73.0 | - | 72.0 ± 2.0 (3) | 75 | 73.0 | - | 72.0 ± 2.0 (3) | 78 |"
            in text)
    assert "| 8 | QQP | 85.0 | 60.0 | 78.0 | 60.0 |" in text
    assert "| AAA at the rho of Local2 + Global2 | 74.0 (73.0) | 77 | 80.0 ± 2.0 (3) | 81 |" in text
    assert "| MNLI | 1.00 | 0.8 | 2.00 | 1.6 |" in text
    assert "![Fig. 2](report_fig2.png)" in text and (runs.out / "report_fig2.png").is_file()


def test_report_writes_without_runs(tmp_path, monkeypatch):
    from fairseq_local.reproduce import environment

    monkeypatch.setattr(environment, "_git_commit", lambda root: "abc1234")
    plan = aaa.build("tiny", tmp_path)
    text = rep.write_report(plan).read_text()
    assert text.startswith(aaa.TITLE + " at `tiny` scale")
    assert "12 findings: 0 reproduced, 0 not reproduced, 12 not comparable." in text
    assert "AAA's target ρ: no finished AAA runs yet." in text and "Fig. 2](" not in text
    assert "| Full Pattern (pre-train & fine-tune) | - | - | - | 82 | - | - | - | 87 | - | 84.5 |" in text


def test_target_line_says_why_the_dev_pattern_is_sparser(tmp_path):
    plan = aaa.build("tiny", tmp_path)
    r = rep.Runs(plan, aaa.SCALES["tiny"])
    for key in aaa.AAA_ROWS:
        for t in r.s.tasks:
            want = aaa.target("tiny", r.rows[key], t)
            r.stats[key][t] = [{"aaa_rho": want + 0.08, "aaa_rows": 0.02, "train_aaa_rho": want + 0.01,
                                "train_aaa_rows": 0.05} for _ in aaa.row_seeds(r.s, key)]
    line = rep.target_line(r)
    assert "in training in 10 of 10 runs, on the dev set in 0 of 10" in line and "(+8.0 points; training" in line
    assert "keeps fewer rows (2.0 % of the tokens against 5.0 % in training)" in line
