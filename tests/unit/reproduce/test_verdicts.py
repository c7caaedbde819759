"""The four verdicts and the one interval rule (reproduce/verdicts.py):
exact intervals against scipy and by hand, every clause type at its edges,
and how clauses combine."""

import math

import numpy as np
import pytest
from scipy import stats

from fairseq_local_reproduce import verdicts as v
from fairseq_local_reproduce.report import decide


def test_seed_interval_is_welchs_t_interval():
    a, b = [30.1, 30.5, 29.8, 30.3], [29.0, 29.6, 29.4]
    est = v.seed_interval(a, b)
    va, vb = np.var(a, ddof=1) / 4, np.var(b, ddof=1) / 3
    df = (va + vb) ** 2 / (va ** 2 / 3 + vb ** 2 / 2)
    h = stats.t.ppf(0.975, df) * math.sqrt(va + vb)
    d = np.mean(a) - np.mean(b)
    assert est.value == pytest.approx(d) and est.lo == pytest.approx(d - h) and est.hi == pytest.approx(d + h)
    assert est.basis == "Welch t, 4 vs 3 seeds"
    one = v.seed_interval([1.0, 2.0, 3.0])
    assert (one.lo, one.hi) == pytest.approx((2 - stats.t.ppf(0.975, 2) * 1 / math.sqrt(3),
                                              2 + stats.t.ppf(0.975, 2) * 1 / math.sqrt(3)))


def test_fewer_than_three_seeds_fall_back_to_the_units_or_nothing():
    assert v.seed_interval([1.0, 2.0], [1.0, 2.0, 3.0]) is None
    assert v.difference([1.0, 2.0], [1.0, 2.0]) is None  # no units: no interval
    est = v.difference([1.0], [0.5], units_a=[1, 2, 3, 4], units_b=[0, 1, 2, 3], what="sentences", paired=True)
    assert est.basis == "bootstrap over 4 sentences" and est.value == 1.0 and est.lo == est.hi == 1.0
    est = v.difference([1.0, 2.0, 3.0], [0.0, 1.0, 2.0], units_a=[9.0], units_b=[9.0])
    assert est.basis == "Welch t, 3 vs 3 seeds"  # seeds first


def test_bootstrap_is_seeded_and_covers_the_mean():
    x = list(np.random.default_rng(1).normal(0.3, 1.0, 400))
    e1, e2 = v.bootstrap(x, np.mean, "heads"), v.bootstrap(x, np.mean, "heads")
    assert e1 == e2 and e1.basis == "bootstrap over 400 heads"
    se = np.std(x, ddof=1) / 20
    assert e1.lo == pytest.approx(np.mean(x) - 1.96 * se, abs=0.35 * se)
    assert e1.hi == pytest.approx(np.mean(x) + 1.96 * se, abs=0.35 * se)
    assert v.bootstrap([1.0], np.mean, "heads") is None


def E(lo, hi):
    return v.Estimate((lo + hi) / 2, lo, hi, "test")


@pytest.mark.parametrize("lo,hi,verdict", [(0.1, 2, v.REPRODUCED), (0.0, 2, v.INCONCLUSIVE),
                                           (-1, 0.0, v.CONTRADICTED), (-1, -0.1, v.CONTRADICTED),
                                           (-1, 1, v.INCONCLUSIVE)])
def test_order(lo, hi, verdict):
    assert v.order(E(lo, hi), "A beats B").verdict == verdict


@pytest.mark.parametrize("lo,hi,verdict", [(-0.5, 0.5, v.REPRODUCED), (-0.6, 0.1, v.INCONCLUSIVE),
                                           (0.51, 3, v.CONTRADICTED), (-3, -0.6, v.CONTRADICTED),
                                           (0.2, 3, v.INCONCLUSIVE), (-2, 2, v.INCONCLUSIVE)])
def test_equivalence_against_the_margin(lo, hi, verdict):
    c = v.equivalent(E(lo, hi), 0.5, "matches (a)")
    assert c.verdict == verdict and c.claim == "matches (a) (|Δ| ≤ 0.5)"


def test_one_sided_bounds():
    assert v.at_most(E(0.1, 0.4), 0.5, "costs").verdict == v.REPRODUCED
    assert v.at_most(E(0.4, 0.6), 0.5, "costs").verdict == v.INCONCLUSIVE
    assert v.at_most(E(0.6, 0.9), 0.5, "costs").verdict == v.CONTRADICTED
    assert v.at_least(E(0.7, 0.9), 0.7, "r").verdict == v.REPRODUCED
    assert v.at_least(E(0.6, 0.8), 0.7, "r").verdict == v.INCONCLUSIVE
    assert v.at_least(E(0.2, 0.6), 0.7, "r").verdict == v.CONTRADICTED
    assert v.order(None, "x").verdict == v.NOT_COMPARABLE


def test_inconclusive_states_the_effect_it_could_decide():
    assert "could decide an effect beyond ±1.50" in v.order(E(-1, 2), "A beats B").text()
    assert "could decide" not in v.order(E(1, 2), "A beats B").text()


def test_every_clause_counts_and_the_worst_decides():
    ok, bad, open_, nc = (v.order(E(1, 2), "a"), v.order(E(-2, -1), "b"), v.order(E(-1, 1), "c"),
                          v.not_comparable("d", "no such task here"))
    assert v.combine([ok, ok])[0] == v.REPRODUCED
    assert v.combine([ok, open_])[0] == v.INCONCLUSIVE
    assert v.combine([ok, nc, open_]) == (v.NOT_COMPARABLE, nc)
    assert v.combine([nc, ok, bad]) == (v.CONTRADICTED, bad)
    f = decide("P7", "Local heads cost little.", [ok, bad], "BLEU per configuration")
    assert f.verdict == v.CONTRADICTED and f.estimate == bad.estimate.text()
    assert f.evidence.startswith("BLEU per configuration. Tests: a: ") and "; b: " in f.evidence
    assert decide("X", "t", [nc]).estimate == "-"


def test_shares_take_wilson_and_newcombe_intervals():
    # Newcombe (1998), Table II, example (a): 56/70 against 48/80, method 10: [0.0524, 0.3339]
    est = v.proportion_difference(56, 70, 48, 80, "heads")
    assert est.value == pytest.approx(0.2) and (est.lo, est.hi) == pytest.approx((0.0524, 0.3339), abs=1e-4)
    # Wilson (1927) for 0 of 10: [0, 0.2775]; a bootstrap of ten zeros would give the point 0
    assert v.wilson(0, 10) == pytest.approx((0.0, 0.2775), abs=1e-4)
    # none of 15 kept heads specialised, 4 of 48 overall: the data cannot exclude an equal share
    assert v.order(v.proportion_difference(0, 15, 4, 48, "heads"), "kept more").verdict == v.INCONCLUSIVE
    assert v.proportion_difference(0, 0, 4, 48, "heads") is None


def test_one_run_against_seeds_counts_the_seed_noise():
    b = [10.13, 11.59, 13.05]
    est = v.seed_interval([12.0], b)
    h = stats.t.ppf(0.975, 2) * np.std(b, ddof=1) * math.sqrt(1 + 1 / 3)
    assert est.value == pytest.approx(12.0 - np.mean(b)) and est.hi - est.lo == pytest.approx(2 * h)
    assert est.basis == "t prediction interval, 1 run against 3 seeds"
    assert v.seed_interval([9.0, 9.5, 10.0], [12.0]).value == pytest.approx(9.5 - 12.0)
    # the bootstrap over one seed's sentences is not taken where the seeds can speak
    assert v.difference([12.0], b, units_a=[1.0, 2.0], units_b=[1.0, 2.0]).basis.startswith("t prediction")
    assert v.seed_interval([1.0, 1.0, 1.0], [1.0, 1.0, 1.0]) is None  # no spread: nothing to decide on
