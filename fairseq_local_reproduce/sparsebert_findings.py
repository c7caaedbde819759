"""The verdicts of ``reproduce sparsebert``'s findings S1–S16
(:data:`~.numbers_sparsebert.SPARSEBERT_FINDINGS`), each clause decided by
:mod:`.verdicts` on a 95 % interval: Welch's t over fine-tuning seeds where
each row has three or more; else a bootstrap over dev examples (the rows'
per-example predictions), dev sentences (their realised sparsity ρ) or
(head, position) units of P; else "not comparable".

Margins (stated, the paper gives none in numbers): "does not hurt", "stays
stable": within :data:`COMPARABLE` points, the largest per-task deficit that
§3.3.4 calls "comparable" (Table 1, RTE: no-diag 67.9 against 69.0); "almost
all": :data:`ALMOST_ALL` of the pairs (the paper: 22 of 25); "skip" and
"always keep": :data:`MOST` of the entries; §3.1's P counts as learned when its
standard deviation over the dev sentences' entries is :data:`MOVED` or more.  "At the same sparsity" holds
when two rows' realised dev ρ differ by at most :data:`SAME_RHO` of the
larger; a pattern whose global positions lie in fewer than :data:`REACH` of
the dev sentences "cannot work" at that scale.
"""

from dataclasses import replace
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np

from .numbers_sparsebert import SPARSEBERT_FINDINGS
from .report import Finding, decide
from .sparsebert import FIXED, dam_row, lam_name
from .sparsebert_runs import CLASSES, Runs, columns, row_difference
from .verdicts import (INCONCLUSIVE, REPRODUCED, Clause, Estimate, at_least, at_most,
                       bootstrap, bootstrap_difference, equivalent, not_comparable, order, seed_interval)

TEXT = {f["id"]: f["text"] for f in SPARSEBERT_FINDINGS}
COMPARABLE = 1.1  # points of the task metric (Table 1: RTE 67.9 vs 69.0, "still comparable", §3.3.4)
ALMOST_ALL = 0.8  # of the pairs (Table 3: 22 of 25 above, §4.2)
MOST = 0.9        # of the entries (Fig. 5: the diagonal dark, the neighbours bright)
SAME_RHO = 0.10   # relative difference of realised dev ρ still "the same sparsity"
REACH = 0.5       # share of dev sentences that must contain a global position
MOVED = 0.05      # sd of P over the dev sentences' entries that shows a learned P (α starts at 0 ± 0.001: P 0.5)
NEAR = 0.10       # Fig. 6: a two-stage mask within 10 points of dev ρ is "at comparable sparsity"
NB_ONLY, NB_SPECIAL = ("strided", "fixed", "logsparse"), ("bigbird", "longformer", "star")  # §4.2's categories


def _f(fid: str, clauses: Sequence[Clause], evidence: str = "") -> Finding:
    return decide(fid, TEXT[fid], clauses, evidence)


def _pct(v: Optional[float]) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"


# ---- S1–S3: §3.1's P -----------------------------------------------------------------------------

def p_findings(units: Optional[List[dict]], where: str) -> List[Finding]:
    """S1–S3 from the (head, query position) units of :func:`.sparsebert_runs.p_units`,
    P in percent; bootstrap over the units."""
    if not units or len(units) < 2:
        return [_f(x, [not_comparable("P by position class", "needs §3.1's learned P (the P run)")])
                for x in ("S1", "S2", "S3")]
    arr = {k: np.asarray([u[k] for u in units]) for k in units[0] if k not in ("head", "row")}

    def mean_of(c: str, idx) -> float:
        return 100 * arr[f"{c}_sum"][idx].sum() / arr[f"{c}_n"][idx].sum()

    def sd_other(idx) -> float:
        n = arr["other_n"][idx].sum()
        m = arr["other_sum"][idx].sum() / n
        return 100 * max(0.0, arr["other_sq"][idx].sum() / n - m * m) ** 0.5

    def est(stat: Callable, name: str) -> Optional[Estimate]:
        return bootstrap(list(range(len(units))), lambda s: stat(np.asarray(s)), "(head, position) units of P",
                         name)

    def diff(a: str, b: str) -> Optional[Estimate]:
        return est(lambda i: mean_of(a, i) - mean_of(b, i), f"P {a} − {b} (%)")

    every = np.arange(len(units))
    means = ", ".join(f"{c} {mean_of(c, every):.1f}" for c in CLASSES)
    heads = len({u["head"] for u in units})
    n_all = sum(arr[f"{c}_n"].sum() for c in CLASSES)
    m_all = sum(arr[f"{c}_sum"].sum() for c in CLASSES) / n_all
    sd_all = max(0.0, arr["all_sq"].sum() / n_all - m_all ** 2) ** 0.5
    ev = (f"mean P (%) by class: {means}; sd over the other positions {sd_other(every):.1f}, over every position "
          f"{100 * sd_all:.1f}; {heads} heads, {where}")
    if sd_all < MOVED:
        why = f"P did not move from its initial 0.5 (sd {100 * sd_all:.2f} points < {100 * MOVED:g}): nothing learned"
        return [_f(x, [not_comparable("P learned", why)], ev) for x in ("S1", "S2", "S3")]
    s1 = [order(diff(c, "diag"), f"diagonal below {c}") for c in CLASSES if c != "diag"]
    s2 = [order(diff("neighbour", c), f"neighbour above {c}") for c in CLASSES if c != "neighbour"]
    similar = est(lambda i: sd_other(i) - (mean_of("special", i) - mean_of("other", i)),
                  "sd(other) − (special − other) (%)")
    s3 = [order(diff("special", "other"), "special tokens (first and last) above the other positions"),
          at_most(similar, 0.0, "the other positions are similar: their sd below the special tokens' lead")]
    return [_f("S1", s1, ev), _f("S2", s2, ev), _f("S3", s3, ev)]


# ---- sparsity -------------------------------------------------------------------------------------

def rho_difference(runs: Runs, a: str, b: str, per_sentence: Dict[str, List[float]]) -> Optional[Estimate]:
    """Dev ρ of row a − row b in percent: Welch's t over seeds (the logs'),
    else a paired bootstrap over the dev sentences (ρ of each, from the masks)."""
    x = [100 * v for v in runs.rho_seeds[a].values] if a in runs.rho_seeds else []
    y = [100 * v for v in runs.rho_seeds[b].values] if b in runs.rho_seeds else []
    est = seed_interval(x, y, "ρ (%)")
    if est is not None or a not in per_sentence or b not in per_sentence:
        return est
    return bootstrap_difference([100 * v for v in per_sentence[a]], [100 * v for v in per_sentence[b]],
                                "dev sentences", paired=True, name="ρ (%)")


def same_rho(runs: Runs, a: str, b: str, claim: str, why: str = "") -> Optional[Clause]:
    """A not-comparable clause when rows a and b do not realise the same
    sparsity on the dev sentences (None when they do)."""
    x, y = runs.rho.get(a, {}).get("all"), runs.rho.get(b, {}).get("all")
    if x is None or y is None:
        return not_comparable(claim, f"no dev ρ of {a if x is None else b} in its fine-tuning log")
    if abs(x - y) > SAME_RHO * max(x, y, 1e-9):
        return not_comparable(claim, f"not at the same sparsity on the dev sentences: {a} {_pct(x)}, {b} "
                                     f"{_pct(y)}{why}")
    return None


# ---- S4–S7: Table 1 -------------------------------------------------------------------------------

def table1_findings(runs: Runs, tasks: Sequence[str], paper_scale: bool) -> List[Finding]:
    cols = columns(tasks)
    nd = row_difference(runs, "no-diag", "base", cols, "no-diag − base")
    out = [_f("S4", [not_comparable("universal approximation without the diagonal",
                                    "a theorem (proof in the paper's Appendix A); nothing to measure")])]
    out.append(_f("S5", [at_least(nd, -COMPARABLE, "removing the diagonal does not hurt"),
                         order(nd, "removing the diagonal helps")], f"average over {', '.join(cols)}"))
    why = ("; the authors' n = 128 pattern drops about n²/128 of a sentence's n² entries where the diagonal drops "
           "n (their own runs, padded to 128, had this gap on short sentences)" if paper_scale else "")
    rnd = row_difference(runs, "base", "random-drop", cols, "base − random-drop")
    pre = same_rho(runs, "random-drop", "no-diag", "random dropping as many entries as the diagonal", why)
    out.append(_f("S6", ([pre] if pre else []) + [order(rnd, "dropping random entries lowers performance")],
                  f"dev ρ: random-drop {_pct(runs.rho.get('random-drop', {}).get('all'))}, no-diag "
                  f"{_pct(runs.rho.get('no-diag', {}).get('all'))}"))
    out.append(_f("S7", [not_comparable("SWAG and SQuAD", "not run by this plan")]))
    return out


# ---- S8–S9: Fig. 3 --------------------------------------------------------------------------------

def fig3_findings(runs: Runs, prune: Sequence[int], tasks: Sequence[str]) -> List[Finding]:
    s8: List[Clause] = []
    for c in columns(tasks):
        for p in prune:
            a, b = f"prune-{p}", f"random-{p}"
            pre = same_rho(runs, a, b, f"{c} {p}%")
            s8.append(pre or order(row_difference(runs, a, b, [c], "P-pruned − random"),
                                   f"{c} {p}%: pruning by P beats random pruning"))
    lo, hi = f"prune-{min(prune)}", f"prune-{max(prune)}"
    s9 = [equivalent(row_difference(runs, hi, lo, ["CoLA"], f"{max(prune)}% − {min(prune)}%"), COMPARABLE,
                     "CoLA stays stable") if "CoLA" in tasks else not_comparable("CoLA stays stable", "CoLA not run"),
          order(row_difference(runs, lo, hi, ["RTE"], f"{min(prune)}% − {max(prune)}%"), "RTE drops")
          if "RTE" in tasks else not_comparable("RTE drops", "RTE not run at this scale")]
    return [_f("S8", s8, "every pair at the same realised dev sparsity (the masks are matched on the dev "
                         "sentences)"), _f("S9", s9)]


# ---- S10–S15: Table 3 -----------------------------------------------------------------------------

def share_above(ests: Dict[str, Optional[Estimate]]) -> Optional[Estimate]:
    """The share of pairs in which the first row is above: at least those whose
    interval lies above 0, at most those whose interval is not at or below 0."""
    done = {k: e for k, e in ests.items() if e is not None}
    if not done:
        return None
    verdicts = [order(e, k).verdict for k, e in done.items()]
    m = len(verdicts)
    lo = sum(v == REPRODUCED for v in verdicts) / m
    hi = sum(v in (REPRODUCED, INCONCLUSIVE) for v in verdicts) / m
    basis = f"{m} pairs, each decided on its Δ's interval ({next(iter(done.values())).basis})"
    return Estimate(lo, lo, hi, basis, "share of pairs above")


def _cannot(rows: Sequence[str], cannot: Dict[str, str]) -> List[Clause]:
    """Not-comparable clauses for the rows whose pattern cannot work here (the
    finding then rests on nothing else)."""
    return [not_comparable(f"{FIXED[r][0]} as §4.2 sets it", cannot[r]) for r in rows if r in cannot]


def table3_findings(runs: Runs, dam: Sequence[str], lambdas: Sequence[float], tasks: Sequence[str],
                    per_sentence: Dict[str, List[float]], masks: Dict[str, Optional[list]],
                    cannot: Dict[str, str]) -> List[Finding]:
    """S10–S15 on the averages and dev sparsities of Table 3's rows; S14 on
    the learned masks at the largest λ (``masks``: kind -> [(entries off, on)]
    per (seed, head)); ``cannot``: rows whose pattern cannot work here, and why."""
    cols, rho = columns(tasks), {r: runs.rho.get(r, {}).get("all") for r in runs.rho}
    pairs = {f"{r} − {f}": row_difference(runs, r, f, cols) for r in dam for f in FIXED
             if f not in cannot and rho.get(r) is not None and rho.get(f) is not None and rho[f] <= rho[r]}
    listed = "; ".join(f"{k} {e.cell()}" for k, e in pairs.items() if e is not None) or "none"
    left_out = "; ".join(f"{FIXED[f][0]} ({cannot[f]})" for f in FIXED if f in cannot)
    out = [_f("S10", [at_least(share_above(pairs), ALMOST_ALL, "DAM above the fixed masks at most as sparse")],
              f"pairs with the fixed mask at most as sparse on the dev sentences: {listed} (the paper: 22 of 25)"
              + (f"; left out, their patterns cannot work here: {left_out}" if left_out else ""))]
    r, bb = dam_row("s", 1e-1), "bigbird"
    out.append(_f("S11", _cannot([bb], cannot) or ([
        order(rho_difference(runs, r, bb, per_sentence),
              "DAM_s (lambda=1e-1) sparser than BigBird on the dev sentences"),
        order(row_difference(runs, r, bb, cols, "DAM_s − BigBird"), "DAM_s (lambda=1e-1) scores higher")]
        if r in runs.rho else [not_comparable("DAM_s (lambda=1e-1)", "not run at this scale")])))
    lams = sorted(lambdas)
    steps = [(k, a, b) for k in ("u", "s") for a, b in zip(lams, lams[1:])]
    out.append(_f("S12", [order(rho_difference(runs, dam_row(k, b), dam_row(k, a), per_sentence),
                                f"DAM_{k}: λ {lam_name(b)} sparser than λ {lam_name(a)}") for k, a, b in steps]
                  or [not_comparable("λ", "one λ only")], "dev ρ by λ: " + "; ".join(
                      f"DAM_{k} " + " / ".join(_pct(rho.get(dam_row(k, x))) for x in lams) for k in ("u", "s"))))
    out.append(_f("S13", [order(row_difference(runs, dam_row(k, a), dam_row(k, b), cols,
                                               f"λ {lam_name(a)} − λ {lam_name(b)}"),
                                f"DAM_{k}: average higher at λ {lam_name(a)} than at λ {lam_name(b)}")
                          for k, a, b in steps]
                  or [not_comparable("λ", "one λ only")]))
    out.append(_s14(masks))
    cats = {name: [x for row in rows for x in runs.avgs.get(row, ()).values] if all(
        row in runs.avgs for row in rows) else [] for name, rows in (("DAM", dam), ("neighbour+special", NB_SPECIAL),
                                                                     ("neighbour only", NB_ONLY))}

    def cat(a: str, b: str) -> Optional[Estimate]:
        est = seed_interval(cats[a], cats[b], f"{a} − {b}")
        return None if est is None else replace(est, basis=f"Welch t over {len(cats[a])} vs {len(cats[b])} runs "
                                                           "(rows × seeds)")

    out.append(_f("S15", _cannot(NB_SPECIAL, cannot) or [
        order(cat("neighbour+special", "neighbour only"), "neighbour+special masks above neighbour-only ones"),
        order(cat("DAM", "neighbour+special"), "DAM masks above neighbour+special ones")],
        "dev ρ by category: " + (", ".join(
            f"{k} {_pct(float(np.mean([rho[r] for r in rows if rho.get(r) is not None])))}"
            for k, rows in (("DAM", dam), ("neighbour+special", NB_SPECIAL), ("neighbour only", NB_ONLY))
            if any(rho.get(r) is not None for r in rows)) or "-")))
    return out


def _s14(masks: Dict[str, Optional[list]]) -> Finding:
    """S14 on (diagonal off, neighbours on) shares of each (seed, head) mask of
    each DAM kind, inside the first and last tokens (which dam-s always keeps)."""
    clauses = []
    for k in ("u", "s"):
        units = masks.get(k)
        if not units or len(units) < 2:
            clauses.append(not_comparable(f"DAM_{k} masks", "needs two learned masks or more at the largest λ"))
            continue
        for i, (what, name) in enumerate((("skips the diagonal", "diagonal off"), ("keeps the neighbours",
                                                                                   "neighbours on"))):
            est = bootstrap([u[i] for u in units], np.mean, "(seed, head) masks", f"share of {name}")
            clauses.append(at_least(est, MOST, f"DAM_{k} {what}"))
    return _f("S14", clauses, "shares of the inner entries of the dev sentences at the largest λ")


# ---- S16: Fig. 6 ----------------------------------------------------------------------------------

def fig6_findings(runs: Runs, one: Sequence[str], two: Sequence[str], tasks: Sequence[str]) -> List[Finding]:
    """S16, a QNLI and MRPC claim: each one-stage DAM run against the
    two-stage run nearest in dev ρ (within :data:`NEAR`), per task."""
    clauses: List[Clause] = []
    for t in ("QNLI", "MRPC"):
        if t not in tasks:
            clauses.append(not_comparable(f"{t}", "not run at this scale (Fig. 6 plots QNLI and MRPC only)"))
            continue
        found = False
        for r in one:
            x = runs.rho.get(r, {}).get(t)
            near = [(abs(runs.rho[q][t] - x), q) for q in two
                    if x is not None and runs.rho.get(q, {}).get(t) is not None]
            if near and min(near)[0] <= NEAR:
                q = min(near)[1]
                found = True
                clauses.append(order(row_difference(runs, r, q, [t], f"{r} − {q}"),
                                     f"{t}: {r} (ρ {_pct(x)}) beats {q} (ρ {_pct(runs.rho[q][t])})"))
        if not found:
            clauses.append(not_comparable(t, f"no two-stage run within {100 * NEAR:.0f} points of a DAM run's dev ρ"))
    return [_f("S16", clauses)]
