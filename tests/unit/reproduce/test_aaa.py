"""``reproduce aaa``: the plan at every scale (Wang et al.'s patterns as head
layouts, the budgets, the targets of Eq. 10), and the report against fixture
runs (hand-written metrics and fine-tuning logs) whose findings are known."""

import json

import pytest
import torch

from fairseq_local_reproduce import aaa, pande
from fairseq_local_reproduce import aaa_report as rep
from fairseq_local_reproduce.numbers_aaa import AAA_FINDINGS, AAA_TABLE4, AAA_TASKS
from fairseq_local_reproduce.plan import BUDGETS, dependencies, estimate
from fairseq_local_reproduce.report import read_findings
from fairseq_local_reproduce.verdicts import CONTRADICTED, INCONCLUSIVE, NOT_COMPARABLE, REPRODUCED


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
    # the full model: at the reduced scales the shared BERT-base (models-SCALE/bert/base), Pande's very step
    full = "aaa/bert/full/pretrain" if scale == "paper" else f"models-{scale}/bert/base/pretrain"
    assert [st.id for st in pre] == [full, "aaa/bert/l2g2/pretrain", "aaa/bert/l2g1r1/pretrain"] + (
        ["aaa/bert/sparsebert/pretrain"] if scale == "paper" else [])
    if scale != "paper":
        assert pre[0] == next(st for st in pande.build(scale, tmp_path).steps if st.id == full)
    assert all(pande.SEGMENTS in st.cmd and st.cmd[2] == "roberta_local_base" for st in pre)
    for st in _finetunes(plan):
        row = rows[st.id.split("/")[2]]
        assert _flag(st.cmd, "--recipe") == "aaa" and ("--cpu" in st.cmd) == (scale != "paper")
        learned = row.kind in ("aaa", "dam", "dam-layer")
        assert (float(_flag(st.cmd, "--aaa-alpha")) > 0) == learned
        assert (float(_flag(st.cmd, "--aaa-target")) > 0) == learned
        assert ("--aaa-hinge-heads" in st.cmd) == learned and ("--dam-per-layer" in st.cmd) == (row.kind == "dam-layer")
        src = "full" if row.key == "full" or not row.key.endswith("-pt") else row.key[:-3]
        want = (f"models-{scale}/bert/base/checkpoint_last.pt" if src == "full" and scale != "paper" else
                f"aaa/bert/{src}/checkpoint_last.pt")  # the full model at the reduced scales: the shared BERT-base
        assert _flag(st.cmd, "--checkpoint").endswith(want)


def test_budgets_and_tasks(tmp_path):
    tiny, small = aaa.build("tiny", tmp_path), aaa.build("small", tmp_path / "s")
    assert round(estimate(tiny, 2)) <= BUDGETS["tiny"]["aaa"] and round(estimate(small, 2)) <= BUDGETS["small"]["aaa"]
    assert estimate(tiny, 1) == pytest.approx(tiny.minutes())
    assert aaa.build("paper", tmp_path / "p").minutes() is None
    assert {_flag(st.cmd, "--task") for st in _finetunes(tiny)} == {"MNLI", "QQP"}
    assert set(aaa.SCALES["paper"].tasks) == set(AAA_TASKS) and aaa.SCALES["paper"].sizes == tuple(range(1, 9))
    paper = aaa.build("paper", tmp_path / "p")
    l2g8 = [st for st in _finetunes(paper) if "/l2g8/" in st.id]
    assert {_flag(st.cmd, "--task") for st in l2g8} == {"MNLI", "QNLI", "QQP"}  # Fig. 2's tasks only
    for st in _finetunes(paper):  # the paper's recipe: 30k updates of 32 x 4, no reduced lr or batch
        assert not {"--max-update", "--lr", "--batch-size", "--cpu"} & set(st.cmd)


def test_data_steps_are_shared(tmp_path):
    from fairseq_local_reproduce import sparsebert

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
        assert len(layout) == pande.BERT_LAYERS and all(len(layer.heads) == pande.BERT_HEADS for layer in layout)
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
    assert _flag(aaa_step.cmd, "--attn-layout") == f"[aaa*{pande.BERT_HEADS}]*{pande.BERT_LAYERS}"
    assert str(parse_layout("[aaa*4]*4")[0].heads[0].mask) == "aaa"
    dam = next(st for st in plan.steps if st.id == "aaa/glue/diag-task-layer/s1/MNLI")
    assert _flag(dam.cmd, "--attn-layout") == f"[dam-s*{pande.BERT_HEADS}]*{pande.BERT_LAYERS}" and _flag(dam.cmd, "--aaa-hinge-heads") == "learned"


def test_targets_of_eq10(tmp_path):
    from fairseq_local_cli.sparsity import sparsity

    rows = aaa.rows(aaa.SCALES["tiny"])
    t = aaa.target("tiny", rows["aaa-l2g2"], "MNLI")
    assert t == round(sparsity("local-2+global-2", 31), 3) == round(sparsity("local-3+global-1", 31), 3)
    assert aaa.target("tiny", rows["aaa-l1g1r2"], "QQP") > aaa.target("tiny", rows["aaa-l2g2"], "QQP") > t
    assert aaa.target("paper", rows["aaa-l2g1r1"], "CoLA") == AAA_TABLE4["Local2 + Global1 + Random1"]["CoLA"][0] / 100
    assert aaa.target("tiny", rows["diag-task"], "QQP") == aaa.TABLE3_TARGET
    assert aaa.target("paper", rows["diag-task"], "CoLA") == 0.75 and aaa.target("tiny", rows["l2g2"], "QQP") == 0.0


def test_fixed_diagonal_comes_from_the_other_task(tmp_path):
    from fairseq_local_cli import export

    plan = aaa.build("tiny", tmp_path)
    needs = dependencies(plan.steps)
    for task, other in (("MNLI", "QQP"), ("QQP", "MNLI")):
        ex = next(st for st in plan.steps if st.id == f"aaa/masks/dam-s-{other}")
        export.build_parser().parse_args(list(ex.cmd[2:]))
        assert ex.cmd[2].endswith(f"aaa/glue/diag-task/s1/{other}/checkpoint_best.pt")
        assert f"aaa/glue/diag-task/s1/{other}" in needs[ex.id]
        ft = next(st for st in plan.steps if st.id == f"aaa/glue/diag-fixed/s1/{task}")
        assert _flag(ft.cmd, "--mask-file") == ex.cmd[ex.cmd.index("--out") + 1] and ex.id in needs[ft.id]
        assert _flag(ft.cmd, "--attn-layout") == f"[file*{pande.BERT_HEADS}]*{pande.BERT_LAYERS}"


# ---- the report -------------------------------------------------------------------------------------

SCORES = {"full": (80, 82, 84), "l2g2": (70, 72, 74), "aaa-l2g2": (78, 80, 82), "l2g2-pt": 72, "l2g1r1-pt": 66,
          "l2g1r1": 70, "l3g1": 71, "l1g1r2": 68, "aaa-l2g1r1": 79, "aaa-l1g1r2": 74, "diag-fixed": 68,
          "diag-task": 70, "diag-task-layer": 72, "l1g2": 68, "l2g1": 69,
          "l4g2": {"MNLI": 74, "QQP": 80}, "l8g2": {"MNLI": 78, "QQP": 85},
          "l2g4": {"MNLI": 80, "QQP": 74}, "l2g8": {"MNLI": 85, "QQP": 78}}
RHO = {"full": 0.0, "l2g2": 0.73, "l3g1": 0.73, "l2g1r1": 0.78, "l1g1r2": 0.82, "aaa-l2g2": 0.74,
       "aaa-l2g1r1": 0.70, "aaa-l1g1r2": 0.83, "diag-fixed": 0.78, "diag-task": 0.80, "diag-task-layer": 0.81,
       "l2g2-pt": 0.73, "l2g1r1-pt": 0.78}
N_DEV = 400  # dev examples per task in the fixture's predictions


def _valid(acc: float, rho: float, aaa_: bool, train_rho=None) -> str:
    extra = f"aaa_rho {rho} | aaa_rows 0.01 | aaa_cols 0.02 | " if aaa_ else ""
    # training's last line: the hinge held ρ at 0.01 below dev's, with more row tokens (Gumbel noise)
    train_rho = rho - 0.01 if train_rho is None else train_rho
    train = (f"2026-01-01 00:00:00 | INFO | train_inner | epoch 004:    100 / 250 loss=0.5, "
             f"aaa_rho={train_rho}, aaa_rows=0.03, num_updates=1000\n" if aaa_ else "")
    return (f"{train}2026-01-01 00:00:00 | INFO | valid | epoch 004 | valid on 'valid' subset | loss 0.5 | nll_loss 0.4 | "
            f"accuracy {acc} | rho {rho} | rho_l1 {rho} | {extra}wps 1 | num_updates 1000 | best_accuracy {acc}")


def _predictions(task: str, x: float) -> dict:
    """N_DEV gold labels 0, 1, 0, 1, ... and predictions wrong on the first examples, so that MNLI's accuracy
    is x; QQP's wrong ones are gold 0s predicted 1 (F1 = x): the same examples go wrong first in every row."""
    gold = [str(i % 2) for i in range(N_DEV)]
    pred = list(gold)
    if task == "MNLI":
        wrong = range(round((1 - x) * N_DEV))
    else:
        wrong = [i for i in range(N_DEV) if gold[i] == "0"][: round(N_DEV * (1 - x) / x)]
    for i in wrong:
        pred[i] = "1" if gold[i] == "0" else "0"
    return {"task": task, "gold": gold, "pred": pred}


def write_runs(plan, scores=SCORES, rho=RHO, predictions=True, train_rho=None) -> None:
    s = aaa.SCALES[plan.scale]
    for key, v in scores.items():
        for k, seed in enumerate(aaa.row_seeds(s, key)):
            d = aaa.ft_dir(plan, key, seed)
            (d / "eval").mkdir(parents=True)
            for task in aaa.row_tasks(s, key):
                x = (v[task] if isinstance(v, dict) else v[k] if isinstance(v, tuple) else v) / 100
                sets = {"MNLI-m": {"accuracy": x}, "MNLI-mm": {"accuracy": x}} if task == "MNLI" else {
                    "QQP": {"f1": x, "accuracy": 0.5}}
                (d / "eval" / f"{task}.json").write_text(json.dumps({"sets": sets}))
                if predictions and seed == s.seeds[0]:
                    out = aaa.predictions_dir(plan, key, seed)
                    out.mkdir(parents=True, exist_ok=True)
                    (out / f"{task}.json").write_text(json.dumps(_predictions(task, x)))
                (d / task).mkdir()
                r = rho.get(key, 0.6)
                (d / task / "train.log").write_text(_valid(50, 0.99, key.startswith("aaa")) + "\n"
                                                    + _valid(60, r, key.startswith("aaa"), train_rho) + "\n")


@pytest.fixture
def runs(tmp_path, monkeypatch):
    from fairseq_local_reproduce import environment

    monkeypatch.setattr(environment, "_git_commit", lambda root: "abc1234")
    plan = aaa.build("tiny", tmp_path)
    write_runs(plan)
    return plan


def test_valid_stats(tmp_path):
    (tmp_path / "train.log").write_text("\n".join([_valid(60, 0.1, True), _valid(70, 0.2, False),
                                                   _valid(70, 0.3, True), _valid(65, 0.4, True)]))
    assert rep.valid_stats(tmp_path) == {"rho": 0.3, "aaa_rho": 0.3, "aaa_rows": 0.01, "aaa_cols": 0.02,
                                         "train_aaa_rho": 0.39, "train_aaa_rows": 0.03}  # the last training line
    assert rep.valid_stats(tmp_path / "none") == {}


def _findings(plan):
    text = rep.write_report(plan).read_text()
    return text, {f.id: f for f in read_findings(text)}


def test_findings_on_fixture_values(runs):
    text, f = _findings(runs)
    assert set(f) == {x["id"] for x in AAA_FINDINGS}
    v = {k: x.verdict for k, x in f.items()}
    assert v == {"W1": REPRODUCED, "W2": CONTRADICTED, "W3": NOT_COMPARABLE, "W4": INCONCLUSIVE,
                 "W5": NOT_COMPARABLE, "W6": REPRODUCED, "W7": REPRODUCED, "W8": INCONCLUSIVE,
                 "W9": NOT_COMPARABLE, "W10": NOT_COMPARABLE, "W11": REPRODUCED, "W12": NOT_COMPARABLE}
    assert "12 findings: 4 reproduced, 1 contradicted, 2 inconclusive, 5 not comparable." in text
    # W5 names MNLI, QNLI and QQP; tiny draws Fig. 2 on MNLI only: its clause is decided, the other two are
    # not comparable, so the finding is (not "reproduced" on one task of three)
    assert "MNLI: larger global above larger local: MNLI global − local = " in f["W5"].evidence
    assert ("QQP: larger local above larger global: not comparable (Fig. 2 on QQP is not run at this scale)"
            in f["W5"].evidence and "QNLI: larger global above larger local: not comparable" in f["W5"].evidence)
    # Full and L2+G2 have 3 seeds each: Welch t; Full (three seeds) against L2+G1+R1 (one run): the t
    # prediction interval, which counts the one run's seed noise
    assert "Full − l2g2 = +10.00 [+5.47, +14.53] (Welch t, 3 vs 3 seeds)" in f["W1"].evidence
    assert "Full − l2g1r1 = +12.00 [+2.06, +21.94]" in f["W1"].evidence and "(t prediction interval, 1 run against 3 seeds)" in \
        f["W1"].evidence
    # W2: L2+G1+R1 pre-trained is about 4 points *below* fine-tuning only: "helps" is contradicted, not passed
    assert ("l2g1r1: pre-training with the pattern helps: l2g1r1-pt − l2g1r1 = -3.69 [-4.87, -2.59] (paired "
            "bootstrap over 400 MNLI + 400 QQP dev examples) → contradicted" in f["W2"].evidence)
    assert "l2g2: fine-tuning only at most 3 points below (≤ 3): l2g2-pt − l2g2 = " in f["W2"].evidence
    assert f["W2"].estimate.startswith("l2g1r1-pt − l2g1r1 = -3.69")
    # W9: AAA at L2+G1+R1's ρ is not as sparse on the dev set (70 % against 78 %): not comparable, and why
    assert "not at the same sparsity: dev ρ 70.0 % vs 78.0 % (at n = 128: input-dependent vs " in f["W9"].evidence
    assert "dev ρ 80.0 % vs 78.0 % (at n = 128: - vs -)" in f["W6"].evidence  # no exported masks in the fixture
    assert "aaa-l2g2, l2g2: dev ρ 74.0 % vs 73.0 % (at n = 128: input-dependent vs 93.1 %)" in f["W9"].evidence
    assert "dev ρ − training ρ = +0.01 [+0.01, +0.01] (bootstrap over 10 AAA runs) → reproduced" in f["W8"].evidence
    assert "dev ρ − ρ_target = -0.03 [-0.06, -0.01] (bootstrap over 10 AAA runs) → inconclusive" in f["W8"].evidence
    assert "MNLI: rows 1.00 %, columns 2.00 % over 5 runs" in f["W11"].evidence
    for x in f.values():  # every decided finding carries its estimate and interval
        assert (x.estimate == "-") == (x.verdict == NOT_COMPARABLE), x
    assert ("| Local2 + Global2 (fine-tune) | 1, 2, 3 | 93.1 | 73.0 | - | 72.0 ± 2.0 (3) | 75 | 73.0 | - | "
            "72.0 ± 2.0 (3) | 78 |" in text)
    assert "| Local2 + Global1 + Random1 (fine-tune) | 1 | 93.1 | 78.0 | - | 70.0 | 75 |" in text
    assert "| 8 | MNLI | 78.0 | 60.0 | 84.3 | 85.0 | 60.0 | 84.3 |" in text and "| 8 | QQP |" not in text  # tiny: Fig. 2 on MNLI
    assert ("| AAA at the rho of Local2 + Global2 | 1, 2, 3 | input-dependent | 74.0 (73.0) | 77 | 80.0 ± 2.0 (3) |"
            " 81 |" in text)
    assert "| MNLI | 1.00 | 0.8 | 2.00 | 1.6 |" in text
    assert "the rows full, l2g2, aaa-l2g2 have seeds 1, 2, 3; every other row has seed 1 only" in text
    assert "![Fig. 2](report_fig2.png)" in text and (runs.out / "report_fig2.png").is_file()


def test_w8_is_decided_on_the_dev_rho_not_the_training_rho(tmp_path, monkeypatch):
    """Training ρ on target, dev ρ 5 points sparser than training: W8 is not reproduced."""
    from fairseq_local_reproduce import environment

    monkeypatch.setattr(environment, "_git_commit", lambda root: "abc1234")
    plan = aaa.build("tiny", tmp_path)
    s, rows = aaa.SCALES["tiny"], aaa.rows(aaa.SCALES["tiny"])
    rho = dict(RHO, **{k: aaa.target("tiny", rows[k], "MNLI") + 0.05 for k in aaa.AAA_ROWS})
    write_runs(plan, rho=rho, train_rho=aaa.target("tiny", rows["aaa-l2g2"], "MNLI"))
    _, f = _findings(plan)
    assert f["W8"].verdict == CONTRADICTED and "dev ρ equals training ρ" in f["W8"].evidence
    assert s.tasks == ("MNLI", "QQP")


def test_without_predictions_one_run_against_three_seeds_takes_a_prediction_interval(tmp_path, monkeypatch):
    from fairseq_local_reproduce import environment

    monkeypatch.setattr(environment, "_git_commit", lambda root: "abc1234")
    plan = aaa.build("tiny", tmp_path)
    write_runs(plan, predictions=False)
    _, f = _findings(plan)
    # Full − l2g1r1: one run against Full's three seeds, the seed noise counted without per-example predictions
    assert f["W1"].verdict != NOT_COMPARABLE
    assert "Full − l2g2 = +10.00 [+5.47, +14.53] (Welch t, 3 vs 3 seeds)" in f["W1"].evidence
    assert "(t prediction interval, 1 run against 3 seeds)" in f["W1"].evidence


def test_paired_bootstrap_is_stratified_and_paired():
    import numpy as np

    from fairseq_local_reproduce.aaa_examples import paired_bootstrap, task_metric

    gold = np.array(["0", "1"] * 50)
    right, wrong = gold.copy(), gold.copy()
    wrong[:10] = np.where(gold[:10] == "0", "1", "0")  # 10 % wrong, the same examples as every draw pairs them
    est = paired_bootstrap({"MNLI": [(gold, right)]}, {"MNLI": [(gold, wrong)]})
    assert est.value == pytest.approx(10.0) and 0 < est.lo < 10 < est.hi and "100 MNLI dev examples" in est.basis
    assert paired_bootstrap({"MNLI": [(gold, right)]}, {"MNLI": [(gold, right)]}).hi == 0  # paired: no spread
    assert task_metric("QQP")(gold, right) == 1.0 and task_metric("CoLA")(gold, wrong) < 1.0


def test_rho_at_128_of_fixed_and_exported_patterns(tmp_path):
    from fairseq_local.attention.masks.file import write_mask_file
    from fairseq_local_cli.sparsity import sparsity

    plan = aaa.build("tiny", tmp_path)
    r = rep.Runs(plan, aaa.SCALES["tiny"])
    assert r.rho128("l2g2") == pytest.approx(sparsity("local-2+global-2", 128)) and r.rho128("full") == 0.0
    assert r.rho128("aaa-l2g2") is None and r.rho128("diag-task") is None  # input-dependent; no mask yet
    m = torch.zeros(128, 128, dtype=torch.bool)
    m[torch.arange(128), torch.arange(128)] = True  # the diagonal, and dam-s's first and last rows and columns
    for task in ("MNLI", "QQP"):
        path = plan.out / "masks" / f"dam-s-{task}.pt"
        path.parent.mkdir(parents=True, exist_ok=True)
        write_mask_file(path, {"0.0": {"matrix": m, "ends": True, "kind": "dam-s", "method": "hard"}})
    kept = 128 + 4 * 128 - 4 - 2  # the diagonal plus 2 rows and 2 columns, less overlaps
    assert r.rho128("diag-task") == pytest.approx(1 - kept / 128 ** 2)


def test_report_writes_without_runs(tmp_path, monkeypatch):
    from fairseq_local_reproduce import environment

    monkeypatch.setattr(environment, "_git_commit", lambda root: "abc1234")
    plan = aaa.build("tiny", tmp_path)
    text = rep.write_report(plan).read_text()
    assert text.startswith(aaa.TITLE + " at `tiny` scale")
    assert "12 findings: 0 reproduced, 0 contradicted, 0 inconclusive, 12 not comparable." in text
    assert "AAA's target ρ: no finished AAA runs yet." in text and "Fig. 2](" not in text
    assert ("| Full Pattern (pre-train & fine-tune) | 1, 2, 3 | 0.0 | - | - | - | 82 | - | - | - | 87 | - | 84.5 |"
            in text)


def test_target_line_counts_dev_and_training(tmp_path):
    plan = aaa.build("tiny", tmp_path)
    r = rep.Runs(plan, aaa.SCALES["tiny"])
    for key in aaa.AAA_ROWS:
        for t in r.s.tasks:
            want = aaa.target("tiny", r.rows[key], t)
            r.stats[key][t] = [{"aaa_rho": want + 0.08, "aaa_rows": 0.02, "train_aaa_rho": want + 0.01,
                                "train_aaa_rows": 0.05} for _ in aaa.row_seeds(r.s, key)]
    line = rep.target_line(r)
    assert "in training in 10 of 10 runs, on the dev set in 0 of 10" in line and "(+8.0 points; training" in line


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_device(tmp_path, device):
    plan = aaa.build("tiny", tmp_path, device=device)
    assert plan.device == device
    trains = [st for st in plan.steps if st.cmd[:2] in (("bash", "scripts/finetune-glue.sh"),
                                                          ("bash", "scripts/pretrain-bert.sh"))]
    assert trains and all(("--cpu" in st.cmd) == (device == "cpu") for st in trains)
    evals = [st for st in plan.steps if st.id.endswith("/eval") or st.id.endswith("/predictions")]
    assert evals and all(("--cuda" in st.cmd) == (device == "cuda") for st in evals)
    preds = [st for st in plan.steps if st.id.endswith("/predictions")]
    assert {st.id.split("/")[3] for st in preds} == {"s1"} and len(preds) == len(aaa.rows(aaa.SCALES["tiny"]))


def test_paper_scale_starts_the_full_models_rows_from_a_given_bert(tmp_path, monkeypatch):
    """--bert HF_DIR: no full-model pretraining; every row fine-tuned from
    the full model starts from the converted BERT on its WordPiece GLUE; the
    rows pretrained with a pattern keep their own model and data; the report
    says so."""
    from fairseq_local_reproduce import environment

    monkeypatch.setattr(environment, "_git_commit", lambda root: "abc1234")
    plan = aaa.build("paper", tmp_path, bert="/models/bert-base-cased")
    ids = [s.id for s in plan.steps]
    assert "aaa/bert/full/pretrain" not in ids and "aaa/bert/l2g2/pretrain" in ids
    assert {"aaa/bert-given/convert", "aaa/bert-given/glue"} <= set(ids)
    given, glue = tmp_path / "aaa" / "bert-given" / "model.pt", tmp_path / "aaa" / "glue-given"
    rows = aaa.rows(aaa.SCALES["paper"])
    for st in _finetunes(plan):
        from_full = rows[st.id.split("/")[2]].model == "full"
        assert (_flag(st.cmd, "--checkpoint") == str(given)) == from_full, st.id
        assert _flag(st.cmd, "--data").startswith(str(glue)) == from_full, st.id
    evals = [st for st in plan.steps if st.id.endswith("/eval")]
    assert all((_flag(st.cmd, "--data") == str(glue)) == (rows[st.id.split("/")[2]].model == "full") for st in evals)
    text = rep.write_report(plan).read_text()
    assert "the full model given with `--bert /models/bert-base-cased`" in text
    with pytest.raises(ValueError, match="the tiny scale keeps its reduced one"):
        aaa.build("tiny", tmp_path, bert="/models/bert-base-cased")
