"""The verdicts of ``reproduce aaa``'s report on Wang et al.'s findings
(:data:`~.numbers_aaa.AAA_FINDINGS`, W1–W12), from the runs it gathered
(:class:`.aaa_report.Runs`), by the four verdicts of :mod:`.verdicts`.

Every clause of a finding is tested on a 95 % interval.  A difference of
scores between rows (the average over the tasks, GLUE's metric in points)
has Welch's t interval over fine-tuning seeds where both rows have three or
more, else a paired bootstrap over the dev examples of their first seed
(:mod:`.aaa_examples`); without either the clause is not comparable.  A
claim of order ("beats", "improves", "helps") needs the interval above 0;
"stays competitive", "rivals" are bounds with the paper's own margin
(:data:`SLACK`: §3.1 "sacrifices only one or two performance points", "just
under 3 absolute performance points" on average).

Comparisons "at the same sparsity" (W6, W7, W9, W10) are made at ρ realised
on the dev sentences (Eq. 9 with each sentence's own length, the validation
that chose ``checkpoint_best.pt``): the rows' dev ρ must agree within
:data:`RHO_TOL` (AAA: at least as sparse as its fixed pattern, less
:data:`RHO_TOL`), else the clause is not comparable; the evidence also gives
each row's ρ at n = 128 (SparseBERT's length; learned DAM rows from their
exported masks, AAA none: its pattern depends on the sentence).  W8 and W11
are claims about the AAA runs themselves, decided by a bootstrap over those
runs (row × task × seed), on the dev set.
"""

from typing import Any, List, Optional, Sequence, Tuple

import numpy as np

from .aaa import AAA_ROWS, PRETRAINED, col, row_seeds, target
from .aaa_examples import Arm, difference
from .numbers_aaa import AAA_FIG2, AAA_FINDINGS
from .report import Finding, decide
from .verdicts import Clause, at_least, at_most, bootstrap, equivalent, not_comparable, order

# What the runs measured: an :class:`.aaa_report.Runs` (``s``, ``rows``, ``stats``, ``score``, ``examples``,
# ``rho128``, ...), which reads the logs; this module only decides, and imports no report code.
Runs = Any

TEXT = {f["id"]: f["text"] for f in AAA_FINDINGS}
RHO_TOL = 0.05     # "the same sparsity": dev ρ within 5 points (the paper's AAA rows are 0-3 points sparser)
SLACK = 3.0        # §3.1: fine-tuning only "sacrifices only one or two performance points", "just under 3"
REACH = 0.01       # W8: dev ρ at least ρ_target − 0.01 (Table 4 prints whole percent)
SAME_RHO = 0.03    # W8: dev ρ within 0.03 of training ρ ("a similar sparsity value", §4.3)


def _tasks(cols: Sequence[str]) -> List[str]:
    return list(dict.fromkeys("MNLI" if c.startswith("MNLI") else c for c in cols))


def _cols(r: Runs, table1: bool = False) -> List[str]:
    return [col(t, table1) for t in r.s.tasks]


def _seeds(r: Runs, arm: Arm, cols: Sequence[str]) -> List[float]:
    """Per seed the arm's score (its rows' mean, seeds aligned), averaged over ``cols``."""
    per = [list(r.average(k, cols).values) for k in arm]
    if not per or any(len(p) != len(per[0]) for p in per):
        return []
    return [float(np.mean(x)) for x in zip(*per)]


def estimate(r: Runs, a: Arm, b: Arm, cols: Sequence[str], name: str):
    """(Estimate or None, why none) of score(a) − score(b) over ``cols`` (:func:`.aaa_examples.difference`)."""
    tasks = _tasks(cols)
    return difference(_seeds(r, a, cols), _seeds(r, b, cols), r.examples(a, tasks), r.examples(b, tasks), name)


def _order(r: Runs, a: Arm, b: Arm, cols: Sequence[str], claim: str, name: str) -> Clause:
    est, why = estimate(r, a, b, cols, name)
    return order(est, claim, why)


def _rho_text(r: Runs, keys: Sequence[str]) -> str:
    """Each row's dev ρ (mean over tasks and seeds) and its ρ at n = 128."""
    def pct(v: Optional[float]) -> str:
        return "-" if v is None else f"{100 * v:.1f} %"

    def at128(k: str) -> str:
        v = r.rho128(k)
        return "input-dependent" if v is None and r.rows[k].kind == "aaa" else pct(v)

    dev = " vs ".join(pct(r.rho(k)) for k in keys)
    at128 = " vs ".join(at128(k) for k in keys)
    return f"dev ρ {dev} (at n = 128: {at128})"


def _matched(r: Runs, a: str, b: str, claim: str, at_least_as_sparse: bool = False) -> Optional[Clause]:
    """None when rows ``a`` and ``b`` have the same dev ρ (within :data:`RHO_TOL`; ``at_least_as_sparse``:
    a's at least b's − RHO_TOL), else the not-comparable clause that says why."""
    ra, rb = r.rho(a), r.rho(b)
    if ra is None or rb is None:
        return not_comparable(claim, f"no dev ρ of {a if ra is None else b}")
    ok = ra >= rb - RHO_TOL if at_least_as_sparse else abs(ra - rb) <= RHO_TOL
    return None if ok else not_comparable(claim, f"not at the same sparsity: {_rho_text(r, (a, b))}, "
                                                 f"tolerance {RHO_TOL:.2f}")


def table1(r: Runs) -> List[Finding]:
    """W1 (Full above the fine-tune-only sparse rows), W2 (pre-training helps a little; fine-tuning only
    within :data:`SLACK` points)."""
    cols = _cols(r, True)
    w1, w2 = [], []
    for key in PRETRAINED:
        w1.append(_order(r, ["full"], [key], cols, f"Full above {key}", f"Full − {key}"))
        est, why = estimate(r, [f"{key}-pt"], [key], cols, f"{key}-pt − {key}")
        w2 += [order(est, f"{key}: pre-training with the pattern helps", why),
               at_most(est, SLACK, f"{key}: fine-tuning only at most {SLACK:g} points below", why)]
    note = "average over " + ", ".join(cols) + " (a bootstrap reads MNLI matched: its predictions)"
    return [decide("W1", TEXT["W1"], w1, note), decide("W2", TEXT["W2"], w2, note)]


def fig2(r: Runs) -> List[Finding]:
    """W4 (the largest size above size 2, each kind and task) and W5 (global or local gains more, by task)."""
    big = [k for k in r.s.sizes if k > 2]
    if not big or 2 not in r.s.sizes:
        return [decide("W4", TEXT["W4"], [not_comparable("larger than 2", "needs size 2 and a larger one")]),
                decide("W5", TEXT["W5"], [not_comparable("global against local", "needs sizes above 2")])]
    w4, w5 = [], []
    for t in r.s.fig2_tasks:
        c = [col(t)]
        for kind, fmt in (("local", "l{}g2"), ("global", "l2g{}")):
            w4.append(_order(r, [fmt.format(max(big))], [fmt.format(2)], c, f"{t}: {kind} {max(big)} above 2",
                             f"{t} {kind} {max(big)} − 2"))
        glob, loc = [f"l2g{k}" for k in big], [f"l{k}g2" for k in big]
        if t in AAA_FIG2["result"]["global_more"]:
            w5.append(_order(r, glob, loc, c, f"{t}: larger global above larger local", f"{t} global − local"))
        else:
            w5.append(_order(r, loc, glob, c, f"{t}: larger local above larger global", f"{t} local − global"))
    for t in AAA_FIG2["tasks"]:  # W5 names each of Fig. 2's tasks: one not run leaves its clause untested
        if t not in r.s.fig2_tasks:
            more, less = ("global", "local") if t in AAA_FIG2["result"]["global_more"] else ("local", "global")
            w5.append(not_comparable(f"{t}: larger {more} above larger {less}", f"Fig. 2 on {t} is not run at "
                                                                               "this scale"))
    sizes = ", ".join(map(str, big))
    return [decide("W4", TEXT["W4"], w4, f"size {max(big)} against 2"),
            decide("W5", TEXT["W5"], w5, f"each kind's mean over sizes {sizes}")]


def _pair(r: Runs, fid: str, a: str, b: str, claim: str) -> Finding:
    cols = _cols(r)
    clause = _matched(r, a, b, claim) or _order(r, [a], [b], cols, claim, f"{a} − {b}")
    return decide(fid, TEXT[fid], [clause], _rho_text(r, (a, b)))


def table3(r: Runs) -> List[Finding]:
    """W6 (task-adaptive above fixed) and W7 (task & layer-adaptive above task-adaptive), at the same dev ρ."""
    return [_pair(r, "W6", "diag-task", "diag-fixed", "task-adaptive above fixed"),
            _pair(r, "W7", "diag-task-layer", "diag-task", "task & layer-adaptive above task-adaptive")]


def aaa_runs(r: Runs) -> List[Tuple[str, str, int, dict]]:
    """Every finished AAA run: (row, task, seed, its logged stats)."""
    return [(key, t, k, x) for key in AAA_ROWS for t in r.s.tasks
            for k, x in zip(row_seeds(r.s, key), r.stats[key][t]) if x]


def _dev_rho(x: dict) -> Optional[float]:
    return x.get("aaa_rho", x.get("rho"))


def w8(r: Runs) -> Finding:
    """W8 on the dev set: every AAA run's dev ρ reaches its ρ_target (− :data:`REACH`), and equals its
    training ρ within :data:`SAME_RHO`; bootstraps over the AAA runs."""
    runs = [(key, t, x) for key, t, _, x in aaa_runs(r) if _dev_rho(x) is not None]
    reach = [_dev_rho(x) - target(r.plan.scale, r.rows[key], t) for key, t, x in runs]
    same = [_dev_rho(x) - x["train_aaa_rho"] for _, _, x in runs if "train_aaa_rho" in x]
    est_reach = bootstrap(reach, np.mean, "AAA runs", "dev ρ − ρ_target")
    est_same = bootstrap(same, np.mean, "AAA runs", "dev ρ − training ρ")
    why = "fewer than two finished AAA runs with a dev (and a training) ρ"
    clauses = [at_least(est_reach, -REACH, "dev ρ reaches ρ_target", why * (est_reach is None)),
               equivalent(est_same, SAME_RHO, "dev ρ equals training ρ", why * (est_same is None))]
    return decide("W8", TEXT["W8"], clauses, target_line(r))


def table4(r: Runs) -> List[Finding]:
    """W8, W9 (AAA above each fixed pattern, at least as sparse on dev), W10 (AAA within :data:`SLACK`
    points of the pre-trained patterns, at the same dev ρ)."""
    cols = _cols(r)
    w9, ev9 = [], []
    for fixed, key in (("l2g2", "aaa-l2g2"), ("l3g1", "aaa-l2g2"), ("l2g1r1", "aaa-l2g1r1"), ("l1g1r2", "aaa-l1g1r2")):
        claim = f"{key} above {fixed}"
        w9.append(_matched(r, key, fixed, claim, at_least_as_sparse=True)
                  or _order(r, [key], [fixed], cols, claim, f"{key} − {fixed}"))
        ev9.append(f"{key}, {fixed}: {_rho_text(r, (key, fixed))}")
    w10, ev10 = [], []
    for key in PRETRAINED:
        claim = f"aaa-{key} at most {SLACK:g} points below {key}-pt"
        est, why = estimate(r, [f"aaa-{key}"], [f"{key}-pt"], cols, f"aaa-{key} − {key}-pt")
        w10.append(_matched(r, f"aaa-{key}", f"{key}-pt", claim) or at_least(est, -SLACK, claim, why))
        ev10.append(f"aaa-{key}, {key}-pt: {_rho_text(r, (f'aaa-{key}', f'{key}-pt'))}")
    return [w8(r), decide("W9", TEXT["W9"], w9, "; ".join(ev9)), decide("W10", TEXT["W10"], w10, "; ".join(ev10))]


def table6(r: Runs) -> Finding:
    """W11: per task, the share of column tokens above that of row tokens, over the AAA runs (dev set)."""
    clauses, parts = [], []
    for t in r.s.tasks:
        xs = [x for _, task, _, x in aaa_runs(r) if task == t and "aaa_rows" in x and "aaa_cols" in x]
        d = [100 * (x["aaa_cols"] - x["aaa_rows"]) for x in xs]
        est = bootstrap(d, np.mean, "AAA runs", f"{t} columns − rows (% of tokens)")
        clauses.append(order(est, f"{t}: more column than row tokens",
                             "fewer than two AAA runs with aaa_rows and aaa_cols" * (est is None)))
        if xs:
            parts.append(f"{t}: rows {np.mean([x['aaa_rows'] for x in xs]) * 100:.2f} %, columns "
                         f"{np.mean([x['aaa_cols'] for x in xs]) * 100:.2f} % over {len(xs)} runs")
    return decide("W11", TEXT["W11"], clauses, "; ".join(parts))


def findings(r: Runs) -> List[Finding]:
    """W1–W12 in order."""
    out = table1(r)
    out.append(decide("W3", TEXT["W3"], [not_comparable("LRA Text", "Long Range Arena (Table 2) is not run by this "
                                                                     "plan")]))
    out += fig2(r) + table3(r) + table4(r)
    out.append(table6(r))
    out.append(decide("W12", TEXT["W12"], [not_comparable("MobileBERT", "MobileBERT (Table 7) is not run by this "
                                                                         "plan")]))
    return out


def target_line(r: Runs, tol: float = RHO_TOL) -> str:
    """How close each AAA run of Table 4 came to its ρ_target on the dev set
    (the pattern evaluation uses: per sentence the round(Σ sigmoid(logit))
    tokens of highest logit) and in training (the last logged ``aaa_rho``,
    Gumbel samples, which Eq. 10's hinge acts on); the runs off by more than
    ``tol`` on the dev set, with by how much."""
    n, train_ok, dev_ok, off = 0, 0, 0, []
    for key, t, k, x in aaa_runs(r):
        got = _dev_rho(x)
        if got is None:
            continue
        want = target(r.plan.scale, r.rows[key], t)
        n += 1
        dev_ok += abs(got - want) <= tol
        train = x.get("train_aaa_rho")
        train_ok += train is not None and abs(train - want) <= tol
        if abs(got - want) > tol:
            off.append(f"{key} {t} s{k}: dev {100 * got:.1f} % for {100 * want:.1f} % ({100 * (got - want):+.1f} "
                       "points" + (f"; training {100 * train:.1f} %)" if train is not None else ")"))
    if not n:
        return "AAA's target ρ: no finished AAA runs yet."
    return (f"AAA's target ρ (Eq. 10) within {tol:.2f}: in training in {train_ok} of {n} runs, on the dev set in "
            f"{dev_ok} of {n}" + ("." if not off else "; off on the dev set: " + "; ".join(off) + "."))
