"""``reproduce sparsebert``'s report against fixture runs (hand-written
metrics, logs, dev sentence lengths, mask files and DAM checkpoints) whose
tables and findings are known, and its findings' rules one by one."""

import argparse
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from fairseq_local.attention.learned import DamMask
from fairseq_local.attention.masks import write_mask_file
from fairseq_local_reproduce import sparsebert as sb
from fairseq_local_reproduce import sparsebert_findings as sf
from fairseq_local_reproduce import sparsebert_report as rep
from fairseq_local_reproduce import sparsebert_runs as sr
from fairseq_local_reproduce.pande import data_dirs
from fairseq_local_reproduce.report import Values
from fairseq_local_reproduce.verdicts import CONTRADICTED, INCONCLUSIVE, NOT_COMPARABLE, REPRODUCED

from test_sparsebert import write_index

LENGTHS = [10, 12, 12, 14, 16, 16]
# CoLA MCC per row, seeds 1-3; dev ρ per row (seed k: + 0.002 (k - 2))
MCC = {"base": (40, 41, 42), "random-drop": (36, 37, 38), "no-diag": (46, 47, 48),
       "dam-u-1e-4": (49, 50, 51), "dam-u-1e-1": (45, 46, 47), "dam-s-1e-4": (47, 48, 49), "dam-s-1e-1": (39, 40, 41),
       "star": (40, 41, 42), "logsparse": (29, 30, 31), "strided": (37, 38, 39), "fixed": (35, 36, 37),
       "longformer": (41, 42, 43), "bigbird": (32, 33, 34),
       "prune-30": (44, 45, 46), "random-30": (35, 36, 37), "prune-60": (40, 41, 42), "random-60": (30, 31, 32),
       "prune-90": (30, 31, 32), "random-90": (31, 32, 33)}
RHO = {"base": 0.0, "random-drop": 0.08, "no-diag": 0.08, "dam-u-1e-4": 0.40, "dam-u-1e-1": 0.55,
       "dam-s-1e-4": 0.60, "dam-s-1e-1": 0.80, "star": 0.85, "logsparse": 0.70, "strided": 0.45, "fixed": 0.50,
       "longformer": 0.75, "bigbird": 0.78, "prune-30": 0.30, "random-30": 0.30, "prune-60": 0.60,
       "random-60": 0.60, "prune-90": 0.90, "random-90": 0.90}


def _valid(acc: float, rho: float) -> str:
    return (f"2026-01-01 00:00:00 | INFO | valid | epoch 001 | valid on 'valid' subset | loss 0.9 | nll_loss 0.02 | "
            f"accuracy {acc} | rho {rho} | rho_l1 {rho} | wps 1 | num_updates 100 | best_accuracy {acc}")


def _dam(path: Path, structured: bool, shift: float = 0.0, last: float = 0.0) -> None:
    """Two heads of one layer, n = 32.  dam-u: α −2 on the diagonal, 3 on
    the neighbours, 1 on the first row and column, ``last`` on the last one
    of each fixture length, 0 elsewhere; head 2 ``shift`` higher.  dam-s:
    −1 at offset 0, 1 at offset 1, −1 beyond."""
    state, n = {}, 32
    for k in range(2):
        m = DamMask(structured, n)
        if structured:
            m.alpha.data.copy_(torch.tensor([-1.0, 1.0] + [-1.0] * (n - 2)))
        else:
            i, j = torch.arange(n)[:, None].expand(n, n), torch.arange(n)[None, :].expand(n, n)
            a = torch.zeros(n, n)
            for L in set(LENGTHS):
                a[(i == L - 1) | (j == L - 1)] = last
            a[(i == 0) | (j == 0)] = 1.0
            a[(i - j).abs() == 1] = 3.0
            a[i == j] = -2.0
            m.alpha.data[m.index(i, j).flatten()] = a.flatten() + shift * k
        state[f"encoder.sentence_encoder.layers.0.self_attn.learned.dam.{k}.alpha"] = m.alpha.data.clone()
    kind = "s" if structured else "u"
    cfg = argparse.Namespace(arch=f"roberta_dam_{kind}", attn_layout=f"[dam-{kind}*2]*1")
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"cfg": {"model": cfg}, "model": state}, path)


@pytest.fixture
def runs(tmp_path):
    plan = sb.build("tiny", tmp_path)
    write_index(data_dirs(tmp_path, "tiny")["glue"] / "CoLA-bin" / "input0" / "valid", [n - 1 for n in LENGTHS])
    for row, mcc in MCC.items():
        for seed, v in zip((1, 2, 3), mcc):
            d = sb.ft_dir(plan, row, seed)
            (d / "eval").mkdir(parents=True)
            (d / "eval" / "CoLA.json").write_text(json.dumps({"sets": {"CoLA": {"mcc": v / 100, "accuracy": 0.7}}}))
            (d / "CoLA").mkdir()
            rho = RHO[row] + 0.002 * (seed - 2) * (row not in ("base",) and not row.startswith(("prune", "random")))
            (d / "CoLA" / "train.log").write_text(_valid(50, 0.99) + "\n" + _valid(60, rho) + "\n")
            if row.startswith("dam-"):
                _dam(d / "CoLA" / "checkpoint_best.pt", row.startswith("dam-s"))
    _dam(sb.p_checkpoint(plan, "CoLA"), False, shift=0.5, last=1.0)
    s = sb.SCALES["tiny"]
    for pct in s.prune:
        for how in ("prune", "random"):
            m = torch.ones(100, dtype=torch.bool)
            m[: pct - 10] = False
            sb.mask_path(plan, how, pct, "CoLA").parent.mkdir(parents=True, exist_ok=True)
            write_mask_file(sb.mask_path(plan, how, pct, "CoLA"), {"0.0": {"matrix": m.view(10, 10), "ends": True}})
    from fairseq_local_reproduce import sparsebert_masks as sm

    for row, kept in (("random-drop", sm.random_drop(sm.weights(LENGTHS), LENGTHS, 1)),
                      ("longformer", sm.longformer(LENGTHS, 2, 2, 1)), ("bigbird", sm.bigbird(LENGTHS, 1, 2, 2, 1))):
        write_mask_file(sb.row_mask(plan, row, "CoLA"), {"0.0": {"matrix": kept, "ends": False}})
    return plan


@pytest.fixture
def report(runs, monkeypatch):
    from fairseq_local_reproduce import environment

    monkeypatch.setattr(environment, "_git_commit", lambda root: "abc1234")
    text = rep.write_report(runs).read_text()
    return text, {line.split("**")[1]: line for line in text.splitlines() if line.startswith("- **S")}


def _verdict(line: str) -> str:
    return next(v for v in (REPRODUCED, CONTRADICTED, INCONCLUSIVE, NOT_COMPARABLE) if f"**{v}**" in line)


def test_tables_and_seeds_per_row(report, runs):
    text, _ = report
    assert text.startswith(sb.TITLE + " at `tiny` scale")
    assert "| BERT-base (ours) | 3 of 3 | 0.0 | 0.0 | - | 41.0 ± 1.0 (3) | 62.1 | 41.0 ± 1.0 (3) | 62.1 |" in text
    assert "| BERT-base (no diag-attention) | 3 of 3 | 0.8 | 8.0 | - | 47.0 ± 1.0 (3) | 63.1 |" in text
    assert "| Star | 3 of 3 | 96.1 | 85.0 | 96.1 | 41.0 ± 1.0 (3) | 59.6 |" in text
    assert "| 30 | CoLA | 45.0 ± 1.0 (3) | 30.0 | 20.0 | 36.0 ± 1.0 (3) | 30.0 | 20.0 |" in text
    assert "Seeds per row: Table 1's rows 3 (1, 2, 3); Table 3's, Fig. 3's and Fig. 6's rows 3 (1, 2, 3)" in text
    assert "16 findings: " in text and "not reproduced" not in text
    for png in ("report_fig2.png", "report_fig3.png"):
        assert f"]({png})" in text and (runs.out / png).is_file()


def test_findings_on_fixture_values(report):
    _, lines = report
    v = {k: _verdict(line) for k, line in lines.items()}
    assert v == {"S1": REPRODUCED, "S2": REPRODUCED, "S3": REPRODUCED, "S4": NOT_COMPARABLE, "S5": REPRODUCED,
                 "S6": REPRODUCED, "S7": NOT_COMPARABLE, "S8": INCONCLUSIVE, "S9": CONTRADICTED,
                 "S10": INCONCLUSIVE, "S11": REPRODUCED, "S12": REPRODUCED, "S13": REPRODUCED,
                 "S14": REPRODUCED, "S15": INCONCLUSIVE, "S16": NOT_COMPARABLE}
    # Welch t, 3 vs 3 seeds of sd 1: Δ 6 ± t(0.975, 4) · sqrt(2/3) = 2.27
    assert "no-diag − base = +6.00 [+3.73, +8.27] (Welch t, 3 vs 3 seeds)" in lines["S5"]
    assert "removing the diagonal does not hurt (≥ -1.1)" in lines["S5"]
    assert "P-pruned − random = -1.00 [-3.27, +1.27] (Welch t, 3 vs 3 seeds) → inconclusive" in lines["S8"]
    # 9 pairs with the fixed mask at most as sparse: 7 above, 2 undecided (dam-s-1e-1 vs strided, longformer)
    assert "share of pairs above = +0.78 [+0.78, +1.00]" in lines["S10"]
    assert "RTE drops: not comparable (RTE not run at this scale)" in lines["S9"]  # CoLA's clause excluded:
    assert "90% − 30% = -14.00 [-16.27, -11.73] (Welch t, 3 vs 3 seeds) → contradicted" in lines["S9"]
    assert "neighbour+special − neighbour only = +4.00 [-0.05, +8.05] (Welch t over 9 vs 9 runs" in lines["S15"]
    # P of the fixture: special = first and last token (α 1 both), read on the dev sentences' lengths
    assert "mean P (%) by class: diag 15.1, neighbour 96.2, special 79.0, other 62.5" in lines["S1"]
    assert "share of diagonal off = +1.00 [+1.00, +1.00] (bootstrap over 6 (seed, head) masks)" in lines["S14"]
    assert "QNLI: not comparable (not run at this scale" in lines["S16"]


def test_p_special_tokens_include_the_last_token():
    """§3.1.2: "the special tokens ([CLS] and [SEP])": the first AND the last."""
    n = 6
    m = sr.class_masks(n)
    assert bool(m["special"][2, n - 1]) and bool(m["special"][n - 1, 3]) and not bool(m["special"][n - 1, n - 1])
    assert bool(m["neighbour"][2, 3]) and not bool(m["neighbour"][n - 2, n - 1])  # a neighbour of </s> is special
    p = torch.full((8, 8), 0.5)
    p[:, n - 1] = p[n - 1, :] = 0.9  # only the last token is important
    units = sr.p_units([p], [n])
    c = sr.class_means(units)
    assert c["special"] == pytest.approx((0.5 * 8 + 0.9 * 10) / 18) and c["other"] == pytest.approx(0.5)


def test_p_that_did_not_move_decides_nothing():
    """The old tiny report's P: 0.498 on the diagonal, 0.500-0.502 elsewhere."""
    torch.manual_seed(0)
    p = 0.5 + 0.002 * torch.randn(32, 32)
    p.fill_diagonal_(0.498)
    found = sf.p_findings(sr.p_units([p, p.T.clone()], LENGTHS), "fixture")
    assert [f.verdict for f in found] == [NOT_COMPARABLE] * 3 and "did not move" in found[0].evidence


def _runs(rows: dict, rho: dict, tasks=("CoLA",)) -> sr.Runs:
    cols = sr.columns(tasks)
    return sr.Runs(scores={r: {c: Values(v) for c in cols} for r, v in rows.items()},
                   avgs={r: Values(v) for r, v in rows.items()},
                   rho={r: {**{t: rho[r] for t in tasks}, "all": rho[r]} for r in rows},
                   rho_seeds={r: Values((rho[r],) * len(v)) for r, v in rows.items()},
                   seeds={r: (1, 2, 3) for r in rows}, dirs={r: [] for r in rows})


def test_random_drop_at_another_sparsity_is_not_comparable():
    """Paper scale keeps the authors' n = 128 pattern: on short sentences it
    drops n²/128 entries, the diagonal n."""
    runs = _runs({"base": (40, 41, 42), "no-diag": (40, 41, 42), "random-drop": (30, 31, 32)},
                 {"base": 0.0, "no-diag": 0.05, "random-drop": 0.002})
    s6 = sf.table1_findings(runs, ["CoLA"], paper_scale=True)[2]
    assert s6.verdict == NOT_COMPARABLE and "not at the same sparsity" in s6.evidence
    assert "padded to 128" in s6.evidence


def test_patterns_that_cannot_work_make_their_findings_not_comparable(tmp_path):
    """Longformer/BigBird globals beyond the sentences (longformer-2-2 at 36, 37)."""
    plan = sb.build("paper", tmp_path)
    cannot = rep.cannot_work(plan, "CoLA", [20, 30, 34])
    assert set(cannot) == {"longformer", "bigbird"} and "[36, 37]" in cannot["longformer"]
    assert rep.cannot_work(plan, "CoLA", [40, 60, 30]) == {}
    rows = {r: (40, 41, 42) for r in [*sb.dam_rows(sb.SCALES["tiny"]), *sb.FIXED]}
    runs = _runs(rows, {r: 0.5 for r in rows})
    found = sf.table3_findings(runs, sb.dam_rows(sb.SCALES["tiny"]), (1e-4, 1e-1), ["CoLA"], {}, {}, cannot)
    assert {f.id: f.verdict for f in found if f.id in ("S11", "S15")} == dict.fromkeys(("S11", "S15"), NOT_COMPARABLE)
    s10 = next(f for f in found if f.id == "S10")  # decided on the other fixed masks, the two named as left out
    assert s10.verdict != NOT_COMPARABLE and "left out, their patterns cannot work here: " in s10.evidence
    assert "longformer" not in s10.evidence.split("left out")[0].lower()


def test_s16_is_a_qnli_and_mrpc_claim():
    rows = {"dam-u-1e-4": (50, 51, 52), "prune-60": (40, 41, 42)}
    runs = _runs(rows, {"dam-u-1e-4": 0.40, "prune-60": 0.35}, tasks=("CoLA", "QNLI"))
    f = sf.fig6_findings(runs, ["dam-u-1e-4"], ["prune-60"], ["CoLA", "QNLI"])[0]
    assert f.verdict == NOT_COMPARABLE and "QNLI: dam-u-1e-4 (ρ 40.0%) beats prune-60" in f.evidence
    assert "MRPC: not comparable" in f.evidence and "CoLA" not in f.evidence.split("Tests:")[1]


def test_one_seed_rows_bootstrap_over_dev_examples(tmp_path):
    """Where a row has fewer than three seeds: a paired bootstrap over the
    dev examples both rows predicted (TASK.json's gold and pred)."""
    from sklearn.metrics import matthews_corrcoef

    rng = np.random.default_rng(0)
    gold = rng.integers(0, 2, 400).astype(str)
    good = np.where(rng.random(400) < 0.9, gold, 1 - gold.astype(int)).astype(str)
    bad = np.where(rng.random(400) < 0.6, gold, 1 - gold.astype(int)).astype(str)
    assert sr.example_metric("CoLA", gold, good) == pytest.approx(100 * matthews_corrcoef(gold, good))
    for row, pred in (("a", good), ("b", bad)):  # pande_predict's files
        (tmp_path / row / "eval" / "predictions").mkdir(parents=True)
        (tmp_path / row / "eval" / "predictions" / "CoLA.json").write_text(json.dumps(
            {"task": "CoLA", "set": "CoLA", "gold": gold.tolist(), "pred": pred.tolist()}))
    runs = sr.gather(lambda r, k: tmp_path / r, ["a", "b"], {"a": (1,), "b": (1,)}, ["CoLA"])
    est = sr.row_difference(runs, "a", "b", ["CoLA"])
    assert est is not None and "bootstrap over 400 dev examples" in est.basis and est.lo > 0
    (tmp_path / "b" / "eval" / "predictions" / "CoLA.json").unlink()
    assert sr.row_difference(sr.gather(lambda r, k: tmp_path / r, ["a", "b"], {"a": (1,), "b": (1,)}, ["CoLA"]),
                             "a", "b", ["CoLA"]) is None  # no per-example predictions: no interval


def test_fig3_has_error_bars_and_names_model_and_scale(runs, monkeypatch):
    from fairseq_local.analysis import figures

    made = []
    monkeypatch.setattr(figures, "save", lambda fig, path: made.append(fig) or Path(path))
    r = sr.gather(lambda row, k: sb.ft_dir(runs, row, k), sb.fig3_rows(sb.SCALES["tiny"]),
                  {row: (1, 2, 3) for row in sb.fig3_rows(sb.SCALES["tiny"])}, ["CoLA"])
    from fairseq_local_reproduce.sparsebert_figures import fig3_png, model_name

    fig3_png(r.scores, r.rho, (30, 60, 90), ["CoLA"], f"Fig. 3: {model_name('tiny', (4, 4))}, tiny scale", runs.out)
    ax = made[0].axes[0]
    assert len(ax.containers) == 2 and all(c.has_yerr for c in ax.containers)
    assert "reduced BERT (4 layers × 4 heads), tiny scale" in ax.get_title()
