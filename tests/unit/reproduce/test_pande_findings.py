"""Pande et al.'s P7–P17 on the four verdicts: equivalence against the
paper's margins for "matches" / "costs at most", intervals for every order,
seeds (Welch t) where three or more, else a paired bootstrap over test
sentences (BLEU) or dev examples (accuracy)."""

import random

import numpy as np
import pytest

from fairseq_local_reproduce import pande_findings as pf
from fairseq_local_reproduce.pande_findings import Arm
from fairseq_local_reproduce.verdicts import CONTRADICTED, INCONCLUSIVE, NOT_COMPARABLE, REPRODUCED

WORDS = [f"w{k}" for k in range(60)]


def _refs(n=200, seed=0):
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(10)) for _ in range(n)]


def _hyps(refs, wrong, seed):
    """Each reference with ``wrong`` of its words replaced."""
    rng, out = random.Random(seed), []
    for r in refs:
        w = r.split()
        for i in rng.sample(range(len(w)), wrong):
            w[i] = "zz"
        out.append(" ".join(w))
    return out


def _arm(refs, hyps, seed=1):
    units = pf.sentence_stats(hyps, refs)
    return Arm({seed: pf.corpus_bleu(units.sum(0))}, {seed: units})


def test_corpus_bleu_of_the_statistics_is_sacrebleus():
    from sacrebleu.metrics import BLEU

    refs = _refs(50)
    hyps = _hyps(refs, 3, 1)
    assert pf.corpus_bleu(pf.sentence_stats(hyps, refs).sum(0)) == pytest.approx(BLEU().corpus_score(hyps, [refs]).score)


def test_configurations_far_above_the_baseline():
    """Far above (a): "matches" (P8, two-sided) is contradicted; "a drop of at
    most m" (P7, P10-P13: the paper's "maximum BLEU score drop", one-sided) is
    not, since a gain is no drop."""
    refs = _refs()
    arms = {"a": _arm(refs, _hyps(refs, 4, 0))}
    arms.update({x: _arm(refs, _hyps(refs, 1, k)) for k, x in enumerate("bcdefghijkl", 1)})
    f = {x.id: x for x in pf.nmt_findings(arms, {"a": 100, "i": 56, "l": 51})}
    assert f["P7"].verdict == REPRODUCED and "drops at most 0.14 below (a) (≥ -0.14)" in f["P7"].evidence
    assert "bootstrap over 200 test sentences (paired, seed 1; corpus BLEU of each resample)" in f["P7"].estimate
    assert f["P8"].verdict == CONTRADICTED and "(|Δ| ≤ 0.14)" in f["P8"].evidence
    assert f["P13"].verdict == REPRODUCED
    assert f["P9"].verdict == REPRODUCED  # an order: above (a), interval above zero
    assert f["P10"].verdict == REPRODUCED  # no drop, and above (a)
    assert "(g) above (a)" in f["P10"].evidence and "→ reproduced" in f["P10"].evidence
    assert f["P11"].verdict == f["P12"].verdict == REPRODUCED  # no drop; weight ratios within rounding


def test_configurations_far_below_the_baseline_contradict_the_drops():
    refs = _refs()
    arms = {"a": _arm(refs, _hyps(refs, 1, 0))}
    arms.update({x: _arm(refs, _hyps(refs, 4, k)) for k, x in enumerate("bcdefghijkl", 1)})
    f = {x.id: x for x in pf.nmt_findings(arms, {"a": 1600, "i": 900, "l": 817})}
    assert f["P7"].verdict == f["P12"].verdict == f["P13"].verdict == CONTRADICTED


def test_identical_systems_match_and_are_not_above():
    refs = _refs()
    same = _hyps(refs, 2, 0)
    arms = {x: _arm(refs, same) for x in "abcdefghijkl"}
    f = {x.id: x for x in pf.nmt_findings(arms, {"a": 1600, "i": 900, "l": 817})}
    assert f["P7"].verdict == f["P8"].verdict == f["P13"].verdict == REPRODUCED
    assert f["P9"].verdict == CONTRADICTED  # Δ = 0 exactly: not above
    assert f["P11"].verdict == REPRODUCED and "900/1600" not in f["P11"].evidence  # 0.5625, the paper's ratio
    assert "counted in the checkpoints: 0.5625, exact" in f["P11"].evidence
    assert f["P10"].verdict == CONTRADICTED  # matches (a), but does not beat it


def test_seeds_decide_where_every_row_has_three():
    arms = {"a": Arm({1: 30.0, 2: 30.05, 3: 29.95}), "f": Arm({1: 30.02, 2: 29.98, 3: 30.0})}
    est, _ = pf.delta(arms["f"], arms["a"], "Δ", bleu=True)
    assert est.basis == "Welch t, 3 vs 3 seeds" and -0.14 < est.lo < est.hi < 0.14
    f = {x.id: x for x in pf.nmt_findings(arms, {})}
    assert f["P8"].verdict == REPRODUCED
    wide = {"a": Arm({1: 28.0, 2: 30.0, 3: 32.0}), "f": Arm({1: 29.0, 2: 31.0, 3: 30.0})}
    f = {x.id: x for x in pf.nmt_findings(wide, {})}
    assert f["P8"].verdict == INCONCLUSIVE and "could decide an effect beyond" in f["P8"].evidence


def test_one_seed_without_hypotheses_is_not_comparable_and_says_why():
    arms = {x: Arm({1: 20.0 + k}) for k, x in enumerate("abcdefghijkl")}
    f = {x.id: x for x in pf.nmt_findings(arms, {})}
    assert all(x.verdict == NOT_COMPARABLE for x in f.values())
    assert "1 and 1 seeds (Welch t needs 3 each) and no test.hyp/test.ref" in f["P7"].evidence
    assert "no weight count" in f["P11"].evidence


def test_weight_ratio_clause():
    assert pf.weight_clause("i", {"a": 1600, "i": 900}).verdict == REPRODUCED
    assert pf.weight_clause("l", {"a": 1000, "l": 600}).verdict == CONTRADICTED


def _acc(correct_share, n=400, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.random(n) < correct_share).astype(float)


def _flip(x, k, seed):
    """``x`` with ``k`` examples flipped from wrong to right (k > 0) or right to wrong."""
    y, rng = x.copy(), np.random.default_rng(seed)
    idx = rng.permutation(np.nonzero(y == (0.0 if k > 0 else 1.0))[0])[:abs(k)]
    y[idx] = 1.0 - y[idx]
    return y


def _mix(x, up, down, seed):
    """``x`` with ``up`` wrong examples made right and ``down`` right ones made wrong (disjoint)."""
    rng = np.random.default_rng(seed)
    y = x.copy()
    y[rng.permutation(np.nonzero(x == 0.0)[0])[:up]] = 1.0
    y[rng.permutation(np.nonzero(x == 1.0)[0])[:down]] = 0.0
    return y


def _garm(units, seeds=(1,)):
    return Arm({s: 100 * float(units.mean()) for s in seeds}, {s: units for s in seeds})


def _bert(b2, b6, allt, t132, t120, base):
    tasks = {}
    for arch, u in zip(pf.ROWS, (base, b2, b6, allt, t132, t120)):
        tasks[arch] = {t: _garm(u) for t in ("QQP", "SST-2")}
    return tasks


def test_bert_orders_and_bounds_need_intervals():
    base = _acc(0.8)
    b2 = base.copy()
    b6 = _mix(b2, 5, 4, 1)        # +0.25 points over Band2 on 400 examples: within the noise
    allt = _flip(base, -120, 2)   # 30 points below
    t132 = _mix(allt, 5, 4, 3)    # +0.25 over AllTied: the old strict ">" called this a recovery
    t120 = b6.copy()              # identical to Band6: |Δ| = 0 ≤ 0.55
    f = {x.id: x for x in pf.bert_findings(_bert(b2, b6, allt, t132, t120, base), ("QQP", "SST-2"))}
    assert f["P14"].verdict == REPRODUCED and "(≥ -3.1)" in f["P14"].evidence
    assert f["P15"].verdict == INCONCLUSIVE and "(≥ 0)" in f["P15"].evidence
    assert "bootstrap over 400 dev examples (paired, seed 1)" in f["P15"].estimate
    assert f["P16"].verdict == REPRODUCED
    assert f["P17"].verdict == INCONCLUSIVE and "132Tied vs AllTied on QQP" in f["P17"].evidence
    worse = _flip(b2, -40, 4)     # Band6 10 points below Band2
    f = {x.id: x for x in pf.bert_findings(_bert(b2, worse, allt, _flip(allt, 60, 5), worse, base), ("QQP",))}
    assert f["P15"].verdict == CONTRADICTED and f["P17"].verdict == REPRODUCED
    assert f["P14"].verdict == CONTRADICTED  # Band6 10 points below BERT-base: beyond 3.1


def test_bert_rows_without_predictions_are_not_comparable():
    arms = {a: {"QQP": Arm({1: 80.0})} for a in pf.ROWS}
    arms[pf.ROWS[0]]["QQP"] = Arm({1: 80.0, 2: 91.0})  # two seeds: neither a t interval nor a prediction one
    f = pf.bert_findings(arms, ("QQP",))
    assert [x.verdict for x in f] == [NOT_COMPARABLE] * 4
    assert "no per-example dev predictions of a common seed" in f[1].evidence


def test_margins_are_the_papers():
    assert pf.paper_drops() == {"P14": pf.MARGIN["P14"], "P17": pf.MARGIN["P17"]}
