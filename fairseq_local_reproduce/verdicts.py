"""Four verdicts, one rule: how every finding of every report is decided.

A finding is one or more *clauses*; each clause is a claim about an estimate
(a difference of scores, a correlation, a share of heads), decided on the
estimate's 95 % interval:

- **order** ("A beats B", Δ = A − B > 0): *reproduced* when the interval lies
  above 0, *contradicted* when it lies at or below 0, else *inconclusive*;
- **equivalence** ("matches", "costs at most δ" read as |Δ| ≤ δ, the paper's
  own margin or a stated one): *reproduced* when the interval lies inside
  [−δ, δ] (two one-sided tests, each at 2.5 %), *contradicted* when it lies
  wholly outside, else *inconclusive*;
- **bound** ("at most b" or "at least b", one-sided): *reproduced* when the
  interval lies on the claimed side of b, *contradicted* when it lies wholly
  on the other, else *inconclusive*.

A finding is *contradicted* when any clause is, *reproduced* when every clause
is, *not comparable* when a clause cannot be measured at this scale (and none
is contradicted), else *inconclusive*.  An inconclusive clause states the
effect it could have decided: the interval's half-width.

The interval, one rule everywhere (:func:`difference`): with three seeds or
more per arm, Welch's t interval over seeds; one run against three seeds or
more, the t prediction interval of a new seed (the one run's seed noise
counts); otherwise a percentile bootstrap
(2,000 resamples, generator seed 0) over the units the run has many of
(sentences, heads, examples), which the estimate names.  A share of heads
(k of n) takes Wilson's score interval instead, and a difference of two
shares Newcombe's (:func:`proportion_difference`): a bootstrap of 0/1 units
collapses to a point when a group is all 0 or all 1.
"""

import math
from dataclasses import dataclass
from typing import Callable, Optional, Sequence, Tuple

import numpy as np

REPRODUCED, CONTRADICTED, INCONCLUSIVE, NOT_COMPARABLE = (
    "reproduced", "contradicted", "inconclusive", "not comparable")
VERDICTS = (REPRODUCED, CONTRADICTED, INCONCLUSIVE, NOT_COMPARABLE)
LEVEL = 0.95
MIN_SEEDS = 3
BOOTSTRAP = 2000


@dataclass(frozen=True)
class Estimate:
    """A point estimate with its 95 % interval and how the interval was made."""

    value: float
    lo: float
    hi: float
    basis: str  # e.g. "Welch t, 3 vs 3 seeds" or "bootstrap over 412 sentences"
    name: str = "Δ"

    @property
    def half_width(self) -> float:
        return (self.hi - self.lo) / 2

    def cell(self, digits: int = 2) -> str:
        """``+0.12 [-0.05, +0.30]``."""
        return f"{self.value:+.{digits}f} [{self.lo:+.{digits}f}, {self.hi:+.{digits}f}]"

    def text(self, digits: int = 2) -> str:
        return f"{self.name} = {self.cell(digits)} ({self.basis})"


def seed_interval(a: Sequence[float], b: Optional[Sequence[float]] = None, name: str = "Δ",
                  level: float = LEVEL) -> Optional[Estimate]:
    """mean(a) − mean(b) (or mean(a) alone) with Welch's t interval over
    seeds; one run against :data:`MIN_SEEDS` or more, a prediction interval;
    None otherwise, or where the seeds do not spread at all."""
    from scipy import stats

    arms = [np.asarray(a, float)] + ([np.asarray(b, float)] if b is not None else [])
    if len(arms) == 2 and sorted(map(len, arms))[0] == 1 and max(map(len, arms)) >= MIN_SEEDS:
        return _one_against_seeds(arms, name, level)
    if any(len(x) < MIN_SEEDS for x in arms):
        return None
    value = float(arms[0].mean() - (arms[1].mean() if len(arms) > 1 else 0.0))
    var = [x.var(ddof=1) / len(x) for x in arms]
    se = math.sqrt(sum(var))
    if se == 0:
        return None  # identical seeds: no spread to decide on
    df = sum(var) ** 2 / sum(v ** 2 / (len(x) - 1) for v, x in zip(var, arms) if v > 0) if any(var) else 1.0
    h = float(stats.t.ppf(0.5 + level / 2, df)) * se
    return Estimate(value, value - h, value + h, _seed_basis(arms), name)


def _one_against_seeds(arms, name: str, level: float) -> Optional[Estimate]:
    """One run against n >= 3 seeds: x − mean(b) with the t prediction
    interval ± t_{n−1} · s_b · √(1 + 1/n), so that the one run's seed noise,
    estimated from the other arm, counts (a bootstrap over one seed's
    sentences would leave it out)."""
    from scipy import stats

    one, many = (arms[0], arms[1]) if len(arms[0]) == 1 else (arms[1], arms[0])
    sd = float(many.std(ddof=1))
    if sd == 0:
        return None
    value = float(arms[0].mean() - arms[1].mean())
    h = float(stats.t.ppf(0.5 + level / 2, len(many) - 1)) * sd * math.sqrt(1 + 1 / len(many))
    return Estimate(value, value - h, value + h, f"t prediction interval, 1 run against {len(many)} seeds", name)


def _seed_basis(arms) -> str:
    return "Welch t, " + " vs ".join(str(len(x)) for x in arms) + " seeds"


def bootstrap(units: Sequence, stat: Callable[[Sequence], float], what: str, name: str = "Δ",
              level: float = LEVEL, n: int = BOOTSTRAP, seed: int = 0) -> Optional[Estimate]:
    """``stat(units)`` with a percentile bootstrap interval over ``units``
    (sentences, heads: ``what`` names them); None for fewer than 2 units."""
    units = list(units)
    if len(units) < 2:
        return None
    rng = np.random.default_rng(seed)
    value = float(stat(units))
    draws = []
    for _ in range(n):
        idx = rng.integers(0, len(units), len(units))
        v = stat([units[i] for i in idx])
        if v is not None and math.isfinite(v):
            draws.append(v)
    if len(draws) < n // 2:
        return None
    lo, hi = np.quantile(draws, [0.5 - level / 2, 0.5 + level / 2])
    return Estimate(value, float(lo), float(hi), f"bootstrap over {len(units)} {what}", name)


def bootstrap_difference(a: Sequence[float], b: Sequence[float], what: str, paired: bool = False,
                         name: str = "Δ", n: int = BOOTSTRAP, seed: int = 0) -> Optional[Estimate]:
    """mean(a) − mean(b) with a bootstrap interval: over pairs when
    ``paired`` (the same sentences scored twice), else each side resampled."""
    if paired:
        if len(a) != len(b):
            raise ValueError("a paired bootstrap needs as many values on each side")
        return bootstrap([x - y for x, y in zip(a, b)], np.mean, what, name, n=n, seed=seed)
    a, b = np.asarray(a, float), np.asarray(b, float)
    if len(a) < 2 or len(b) < 2:
        return None
    rng = np.random.default_rng(seed)
    draws = [rng.choice(a, len(a)).mean() - rng.choice(b, len(b)).mean() for _ in range(n)]
    lo, hi = np.quantile(draws, [0.5 - LEVEL / 2, 0.5 + LEVEL / 2])
    return Estimate(float(a.mean() - b.mean()), float(lo), float(hi),
                    f"bootstrap over {len(a)} and {len(b)} {what}", name)


def wilson(k: int, n: int, level: float = LEVEL) -> Tuple[float, float]:
    """Wilson's score interval of a proportion k/n: valid at k = 0 and k = n,
    where a bootstrap of 0/1 units collapses to a point."""
    from scipy import stats

    z = float(stats.norm.ppf(0.5 + level / 2))
    p = k / n
    centre, h = (p + z * z / (2 * n)) / (1 + z * z / n), z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - h), min(1.0, centre + h)


def share(k: int, n: int, what: str, name: str = "share") -> Optional[Estimate]:
    """k/n with Wilson's score interval; None for n = 0."""
    if n < 1:
        return None
    lo, hi = wilson(k, n)
    return Estimate(k / n, lo, hi, f"Wilson score interval, {k} of {n} {what}", name)


def proportion_difference(k1: int, n1: int, k2: int, n2: int, what: str, name: str = "Δ share") -> Optional[Estimate]:
    """k1/n1 − k2/n2 with Newcombe's hybrid score interval (his method 10,
    from the two Wilson intervals); None when either count is empty."""
    if n1 < 1 or n2 < 1:
        return None
    p1, p2 = k1 / n1, k2 / n2
    (l1, u1), (l2, u2) = wilson(k1, n1), wilson(k2, n2)
    d = p1 - p2
    lo = d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2)
    hi = d + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)
    return Estimate(d, lo, hi, f"Newcombe's score interval, {k1}/{n1} against {k2}/{n2} {what}", name)


def difference(a: Sequence[float], b: Optional[Sequence[float]] = None, units_a: Optional[Sequence[float]] = None,
               units_b: Optional[Sequence[float]] = None, what: str = "sentences", paired: bool = False,
               name: str = "Δ") -> Optional[Estimate]:
    """The one interval rule: seeds ``a`` (and ``b``) when every arm has
    three or more; else a bootstrap over ``units_a`` (and ``units_b``);
    else None (no interval: the clause is not comparable)."""
    est = seed_interval(a, b, name)
    if est is not None:
        return est
    if units_a is None or (b is not None and units_b is None):
        return None
    if units_b is None:
        return bootstrap(units_a, np.mean, what, name)
    return bootstrap_difference(units_a, units_b, what, paired, name)


@dataclass(frozen=True)
class Clause:
    """One decided claim: its verdict, the estimate it rests on, the claim."""

    verdict: str
    claim: str
    estimate: Optional[Estimate] = None
    reason: str = ""

    def text(self) -> str:
        if self.estimate is None:
            return f"{self.claim}: {self.verdict} ({self.reason or 'not measured'})"
        out = f"{self.claim}: {self.estimate.text()} → {self.verdict}"
        if self.verdict == INCONCLUSIVE:
            out += f" (could decide an effect beyond ±{self.estimate.half_width:.2f})"
        return out + (f"; {self.reason}" if self.reason else "")


def not_comparable(claim: str, reason: str) -> Clause:
    return Clause(NOT_COMPARABLE, claim, None, reason)


def order(est: Optional[Estimate], claim: str, reason: str = "") -> Clause:
    """Δ > 0 claimed: reproduced when lo > 0, contradicted when hi ≤ 0."""
    if est is None:
        return not_comparable(claim, reason or "no interval at this scale")
    v = REPRODUCED if est.lo > 0 else CONTRADICTED if est.hi <= 0 else INCONCLUSIVE
    return Clause(v, claim, est, reason)


def equivalent(est: Optional[Estimate], margin: float, claim: str, reason: str = "") -> Clause:
    """|Δ| ≤ margin claimed: reproduced when [lo, hi] ⊂ [−margin, margin],
    contradicted when the interval lies wholly outside it."""
    if est is None:
        return not_comparable(claim, reason or "no interval at this scale")
    if -margin <= est.lo and est.hi <= margin:
        v = REPRODUCED
    elif est.lo > margin or est.hi < -margin:
        v = CONTRADICTED
    else:
        v = INCONCLUSIVE
    return Clause(v, f"{claim} (|Δ| ≤ {margin:g})", est, reason)


def at_most(est: Optional[Estimate], bound: float, claim: str, reason: str = "") -> Clause:
    """value ≤ bound claimed: reproduced when hi ≤ bound, contradicted when lo > bound."""
    if est is None:
        return not_comparable(claim, reason or "no interval at this scale")
    v = REPRODUCED if est.hi <= bound else CONTRADICTED if est.lo > bound else INCONCLUSIVE
    return Clause(v, f"{claim} (≤ {bound:g})", est, reason)


def at_least(est: Optional[Estimate], bound: float, claim: str, reason: str = "") -> Clause:
    """value ≥ bound claimed: reproduced when lo ≥ bound, contradicted when hi < bound."""
    if est is None:
        return not_comparable(claim, reason or "no interval at this scale")
    v = REPRODUCED if est.lo >= bound else CONTRADICTED if est.hi < bound else INCONCLUSIVE
    return Clause(v, f"{claim} (≥ {bound:g})", est, reason)


def combine(clauses: Sequence[Clause]) -> Tuple[str, Optional[Clause]]:
    """The finding's verdict and the clause that decides it (the first
    contradicted, not comparable or inconclusive one; else the first)."""
    if not clauses:
        return NOT_COMPARABLE, None
    for v in (CONTRADICTED, NOT_COMPARABLE, INCONCLUSIVE):
        for c in clauses:
            if c.verdict == v:
                return v, c
    return REPRODUCED, clauses[0]
