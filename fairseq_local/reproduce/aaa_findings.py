"""The verdicts of ``reproduce aaa``'s report on Wang et al.'s findings
(:data:`~.numbers_aaa.AAA_FINDINGS`, W1–W12), from the runs it gathered
(:class:`.aaa_report.Runs`).

A claim that A scores higher (lower) than B holds when the difference of
their means exceeds :func:`.report.margin` in that direction, with the seeds'
standard deviation pooled over the rows run with several seeds (Full,
Local2 + Global2, AAA at its ρ); "rivals" and "does not hurt" when A is not
measurably below B.  Comparisons "at equal sparsity" (W6, W7, W9) need the
two rows' dev ρ within :data:`RHO_TOL`, else they are not comparable.
Without the runs or a spread: "not comparable".
"""

from typing import Any, List, Optional, Sequence, Tuple

from .aaa import AAA_ROWS, PRETRAINED, SPREAD_ROWS, col, row_seeds, target
from .numbers_aaa import AAA_FIG2, AAA_FINDINGS
from .report import NOT_COMPARABLE, NOT_REPRODUCED, REPRODUCED, Finding, Values, compare, margin, pooled_sd

# What the runs measured: an :class:`.aaa_report.Runs` (``s``, ``rows``, ``stats``, ``score``, ...), which
# reads the logs; this module only decides, and imports no report code.
Runs = Any

TEXT = {f["id"]: f["text"] for f in AAA_FINDINGS}
RHO_TOL = 0.05  # "equal" sparsity: dev ρ within 5 points (the paper's AAA rows are 0-3 points sparser)
SLACK = 3.0     # W2: "sacrifices only one or two performance points on most tasks", "just under 3" on average


def _f(fid: str, ok: Optional[bool], evidence: str) -> Finding:
    return Finding(fid, TEXT[fid], NOT_COMPARABLE if ok is None else REPRODUCED if ok else NOT_REPRODUCED, evidence)


def _margin_text(sd: Optional[float], n1: int = 1, n2: int = 1) -> str:
    return "no spread" if sd is None else f"margin ±{margin(sd, n1, n2):.2f} (2 standard errors, seed sd {sd:.2f})"


def _cmp(a: Values, b: Values, sd: Optional[float]) -> Tuple[Optional[str], str]:
    if not a.values or not b.values:
        return None, "missing runs"
    return compare(a, b, sd), f"{a.mean - b.mean:+.2f}"  # type: ignore[operator]


def _cols(r: Runs, table1: bool = False) -> List[str]:

    return [col(t, table1) for t in r.s.tasks]


def _sd_avg(r: Runs, cols: Sequence[str]) -> Optional[float]:
    return pooled_sd(r.average(k, cols) for k in SPREAD_ROWS)


def _sd_col(r: Runs, c: str) -> Optional[float]:
    return pooled_sd(r.score(k, c) for k in SPREAD_ROWS)


def table1(r: Runs) -> List[Finding]:
    """W1 (Full above the fine-tune-only sparse rows) and W2 (pre-training helps a little)."""
    cols = _cols(r, True)
    sd = _sd_avg(r, cols)
    full = r.average("full", cols)
    w1, ev1, w2, ev2 = [], [], [], []
    for key in PRETRAINED:
        ft, pt = r.average(key, cols), r.average(f"{key}-pt", cols)
        c, d = _cmp(full, ft, sd)
        w1.append(None if c is None else c == "above")
        ev1.append(f"Full − {key} {d}")
        c, d = _cmp(pt, ft, sd)
        if c is None:
            w2.append(None)
        else:
            m = margin(sd, pt.n, ft.n)
            w2.append(c != "below" and pt.mean - ft.mean <= SLACK + m)  # type: ignore[operator]
        ev2.append(f"{key}-pt − {key} {d}")
    spread = _margin_text(sd, full.n, 1)
    return [_f("W1", None if None in w1 else all(w1), "average " + "; ".join(ev1) + "; " + spread),
            _f("W2", None if None in w2 else all(w2), "average " + "; ".join(ev2) + f" (at most {SLACK:.0f} "
               "points plus the margin below, and not measurably above); " + spread)]


def fig2(r: Runs) -> List[Finding]:
    """W4 (the largest size above size 2, each kind and task) and W5 (global or local gains more, by task)."""

    big = [k for k in r.s.sizes if k > 2]
    if not big or 2 not in r.s.sizes:
        return [_f("W4", None, "needs size 2 and a larger one"), _f("W5", None, "needs sizes above 2")]
    w4, ev4, w5, ev5 = [], [], [], []
    for t in r.s.fig2_tasks:
        c_ = col(t)
        sd = _sd_col(r, c_)
        for kind, fmt in (("local", "l{}g2"), ("global", "l2g{}")):
            c, d = _cmp(r.score(fmt.format(max(big)), c_), r.score(fmt.format(2), c_), sd)
            w4.append(None if c is None else c == "above")
            ev4.append(f"{t} {kind} {max(big)} − 2 {d}")
        glob = Values(tuple(x for k in big for x in r.score(f"l2g{k}", c_).values))
        loc = Values(tuple(x for k in big for x in r.score(f"l{k}g2", c_).values))
        c, d = _cmp(glob, loc, sd)
        want = "above" if t in AAA_FIG2["result"]["global_more"] else "below"
        w5.append(None if c is None else c == want)
        more = "global" if want == "above" else "local"
        ev5.append(f"{t}: global − local {d} ({c or 'no spread'}; the paper: {more} more)")
    sd_text = ", ".join(f"{t} {_margin_text(_sd_col(r, col(t)))}" for t in r.s.fig2_tasks)
    sizes = ", ".join(map(str, big))
    return [_f("W4", None if None in w4 else all(w4), "; ".join(ev4) + "; " + sd_text),
            _f("W5", None if None in w5 else all(w5), f"over sizes {sizes}: " + "; ".join(ev5) + "; " + sd_text)]


def _matched(r: Runs, a: str, b: str, tol: float = RHO_TOL, at_least: bool = False) -> Tuple[bool, str]:
    """Whether rows ``a`` and ``b`` have dev ρ within ``tol`` (``at_least``: a's at least b's − tol)."""
    ra, rb = r.rho(a), r.rho(b)
    if ra is None or rb is None:
        return False, f"no dev ρ of {a if ra is None else b}"
    ok = ra >= rb - tol if at_least else abs(ra - rb) <= tol
    return ok, f"dev ρ {100 * ra:.1f} % vs {100 * rb:.1f} %"


def _pair(r: Runs, fid: str, a: str, b: str, cols: Sequence[str], at_least: bool = False) -> Finding:
    sd = _sd_avg(r, cols)
    va, vb = r.average(a, cols), r.average(b, cols)
    c, d = _cmp(va, vb, sd)
    ok, rho = _matched(r, a, b, at_least=at_least)
    if c is None:
        return _f(fid, None, f"average {a} − {b}: {d}; " + _margin_text(sd))
    if not ok:
        return _f(fid, None, f"sparsity not matched ({rho}, tolerance {RHO_TOL:.2f}); average {a} − {b} {d}")
    return _f(fid, c == "above", f"average {a} − {b} {d}; {rho}; " + _margin_text(sd, va.n, vb.n))


def table3(r: Runs) -> List[Finding]:
    """W6 (task-adaptive above fixed) and W7 (task & layer-adaptive above task-adaptive)."""
    cols = _cols(r)
    return [_pair(r, "W6", "diag-task", "diag-fixed", cols), _pair(r, "W7", "diag-task-layer", "diag-task", cols)]


def table4(r: Runs) -> List[Finding]:
    """W8 (AAA reaches its target), W9 (AAA above each fixed pattern at equal ρ), W10 (rivals pre-trained)."""

    oks = []
    for key in AAA_ROWS:
        for t in r.s.tasks:
            want = target(r.plan.scale, r.rows[key], t)
            oks += [x.get("aaa_rho", x.get("rho", 0.0)) >= want - RHO_TOL for x in r.stats[key][t]
                    if "aaa_rho" in x or "rho" in x]
    w8 = _f("W8", all(oks) if oks else None, target_line(r, RHO_TOL))
    cols = _cols(r)
    sd = _sd_avg(r, cols)
    parts, verdicts = [], []
    for fixed, aaa in (("l2g2", "aaa-l2g2"), ("l3g1", "aaa-l2g2"), ("l2g1r1", "aaa-l2g1r1"), ("l1g1r2", "aaa-l1g1r2")):
        c, d = _cmp(r.average(aaa, cols), r.average(fixed, cols), sd)
        ok, rho = _matched(r, aaa, fixed, at_least=True)
        verdicts.append(None if c is None or not ok else c == "above")
        parts.append(f"{aaa} − {fixed} {d} ({rho}{'' if ok or c is None else ', not matched'})")
    decided = [v for v in verdicts if v is not None]
    w9 = _f("W9", False if False in decided else (None if None in verdicts else True),
            "average " + "; ".join(parts) + "; " + _margin_text(sd))
    parts, verdicts = [], []
    for key in PRETRAINED:
        c, d = _cmp(r.average(f"aaa-{key}", cols), r.average(f"{key}-pt", cols), sd)
        verdicts.append(None if c is None else c != "below")
        parts.append(f"aaa-{key} − {key}-pt {d}")
    w10 = _f("W10", None if None in verdicts else all(verdicts), "average " + "; ".join(parts) + "; "
             + _margin_text(sd))
    return [w8, w9, w10]


def table6(r: Runs) -> Finding:
    """W11: more column than row tokens, per task, over every AAA run."""
    parts, oks = [], []
    for t in r.s.tasks:
        xs = [x for key in AAA_ROWS for x in r.stats[key][t] if "aaa_rows" in x and "aaa_cols" in x]
        if not xs:
            continue
        rows_, cols_ = (sum(x[k] for x in xs) / len(xs) for k in ("aaa_rows", "aaa_cols"))
        more = sum(x["aaa_cols"] > x["aaa_rows"] for x in xs)
        oks.append(cols_ > rows_)
        parts.append(f"{t}: rows {100 * rows_:.2f} %, columns {100 * cols_:.2f} % (columns more in {more} of "
                     f"{len(xs)} runs)")
    if not parts:
        return _f("W11", None, "needs the AAA runs' aaa_rows and aaa_cols")
    return _f("W11", len(oks) == len(r.s.tasks) and all(oks), "; ".join(parts))


def findings(r: Runs) -> List[Finding]:
    """W1–W12 in order."""
    out = table1(r)
    out.append(_f("W3", None, "Long Range Arena (Table 2) is not run by this plan"))
    out += fig2(r) + table3(r) + table4(r)
    out.append(table6(r))
    out.append(_f("W12", None, "MobileBERT (Table 7) is not run by this plan"))
    return out


def target_line(r: Runs, tol: float = 0.05) -> str:
    """How close each AAA run of Table 4 came to its ρ_target: in training
    (the last logged ``aaa_rho``, which Eq. 10's hinge acts on, Gumbel noise
    on) and on the dev set (the evaluation mask 1[logit > 0]); the runs off
    by more than ``tol`` with by how much, and why the two differ."""
    n, train_ok, dev_ok, off, rows, sparser = 0, 0, 0, [], [], False
    for key in AAA_ROWS:
        for t in r.s.tasks:
            want = target(r.plan.scale, r.rows[key], t)
            for k, x in zip(row_seeds(r.s, key), r.stats[key][t]):
                got = x.get("aaa_rho", x.get("rho"))
                if got is None:
                    continue
                n += 1
                dev_ok += abs(got - want) <= tol
                train = x.get("train_aaa_rho")
                train_ok += train is not None and abs(train - want) <= tol
                sparser |= got - want > tol
                if abs(got - want) > tol:
                    off.append(f"{key} {t} s{k}: dev {100 * got:.1f} % for {100 * want:.1f} % "
                               f"({100 * (got - want):+.1f} points"
                               + (f"; training {100 * train:.1f} %)" if train is not None else ")"))
                if "train_aaa_rows" in x and "aaa_rows" in x:
                    rows.append((x["train_aaa_rows"], x["aaa_rows"]))
    if not n:
        return "AAA's target ρ: no finished AAA runs yet."
    line = (f"AAA's target ρ (Eq. 10) within {tol:.2f}: in training in {train_ok} of {n} runs, on the dev set in "
            f"{dev_ok} of {n}" + ("." if not off else "; off on the dev set: " + "; ".join(off) + "."))
    if sparser and rows:
        tr, dv = (sum(v) / len(v) for v in zip(*rows))
        line += (f" The hinge acts on training's ρ, whose axes are Gumbel-sigmoid samples (Eq. 11); the dev set "
                 f"uses the deterministic 1[logit > 0], which keeps fewer rows ({100 * dv:.1f} % of the tokens "
                 f"against {100 * tr:.1f} % in training), so the evaluated pattern is sparser than the target.")
    return line
