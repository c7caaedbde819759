"""Pande et al.'s findings P7–P17 (Tables 1–4) decided on 95 % intervals
(:mod:`.verdicts`; P1–P6, the analyses, in :mod:`.pande_analysis`).

Each comparison of a configuration with the baseline is Δ = x − (a) (BLEU)
or a difference of two Table 4 rows (dev accuracy, points), with the one
interval rule: Welch's t over seeds where both rows have three or more;
otherwise a paired bootstrap over the units both rows' runs of one seed
share: the test sentences for BLEU (the two systems' hypotheses of
``scripts/generate.sh``, corpus BLEU recomputed on each resample, as
sacreBLEU scores it) and the dev examples for accuracy (:mod:`.pande_predict`);
else the clause is not comparable and says why.

Claims of equality are equivalence tests against the paper's own margins:

* P7, P8: 0.14 BLEU. §5.2: "Across both tasks and all configurations the
  maximum drop in BLEU score is only 0.14"; §1: the all-local configuration
  "has a BLEU score drop of 0.14 in the EN-RU task".
* P10, P11: 0.52 BLEU. §5.3: "The maximum drop in the BLEU score across all
  configurations for the EN-RU tasks is 0.52".
* P12: 0.24 BLEU. §5.4: "BLEU scores drop by 0.1 and 0.24 respectively for
  EN-RU and EN-DE tasks".
* P13: 0.52 BLEU. §1: "maximum BLEU score drop of 0.24 and 0.52 for EN-DE
  and EN-RU respectively" (one synthetic pair stands for both: the larger).
* P14: 3.1 points. §1: "We observe only a 2-3% drop using a constrained
  network"; Table 4's largest untied drop is MNLI Band2, 83.7 − 80.6 = 3.1.
* P17: 0.55 points, Table 4's largest |120Tied − Band6 Untied| (QNLI, 88.45
  against 89.0).

Claims of order ("above", "beats", "hurts", "recovers") need the interval
above zero; P15's "at least as well" is a bound Δ ≥ 0.
"""

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from .bleu_units import corpus_bleu, read_stats, sentence_stats  # noqa: F401
from .numbers_pande import PANDE_FINDINGS, PANDE_TABLE4
from .report import Finding, Values, decide
from .verdicts import Clause, Estimate, at_least, bootstrap, equivalent, not_comparable, order, seed_interval

TEXT = {f["id"]: f["text"] for f in PANDE_FINDINGS}
MARGIN = {"P7": 0.14, "P8": 0.14, "P10": 0.52, "P11": 0.52, "P12": 0.24, "P13": 0.52, "P14": 3.1, "P17": 0.55}
WEIGHT_RATIO = {"i": 0.5625, "l": 0.5104}  # Tables 2-3: 3.53M / 6.29M and 3.21M / 6.29M (seeds README counts)
RATIO_MARGIN = 0.005  # the printed ratio's rounding
ROWS = ("roberta_local_base", "roberta_band2", "roberta_band6", "roberta_band6_all_tied",
        "roberta_band6_132_tied", "roberta_band6_120_tied")
SHORT = dict(zip(ROWS, ("BERT-base", "Band2", "Band6", "AllTied", "132Tied", "120Tied")))
CLASSES = {"MNLI": 3}  # the tasks' classes (the others: 2)


@dataclass
class Arm:
    """One row's runs: its score per seed (BLEU, or accuracy in points), and
    per seed the units of a paired bootstrap: sacreBLEU's statistics per test
    sentence, (n, 10), or 1/0 per dev example, (n,)."""

    scores: Dict[int, float] = field(default_factory=dict)
    units: Dict[int, np.ndarray] = field(default_factory=dict)

    @property
    def values(self) -> Values:
        return Values(tuple(self.scores[k] for k in sorted(self.scores)))


# ---------------------------------------------------------------- BLEU per sentence

def read_bleu_units(run: Path, subset: str = "test") -> Optional[np.ndarray]:
    """The per-sentence statistics of ``run/SUBSET.hyp`` against
    ``run/SUBSET.ref`` (both kept by scripts/generate.sh), or None."""
    return read_stats(run / f"{subset}.hyp", run / f"{subset}.ref")


# ---------------------------------------------------------------- the interval rule

def delta(x: Optional[Arm], b: Optional[Arm], name: str, bleu: bool) -> Tuple[Optional[Estimate], str]:
    """Δ = x − b and its 95 % interval (module docstring), or None and why."""
    if x is None or b is None or not x.scores or not b.scores:
        return None, "a row has no finished run"
    est = seed_interval(x.values.values, b.values.values, name)
    if est is not None:
        return est, ""
    common = [s for s in sorted(x.units) if s in b.units and len(x.units[s]) == len(b.units[s])]
    if not common:
        what = "test.hyp/test.ref" if bleu else "per-example dev predictions"
        return None, (f"{x.values.n} and {b.values.n} seeds (Welch t needs 3 each) and no {what} of a common "
                      "seed for a paired bootstrap")
    s = common[0]
    X, B = x.units[s], b.units[s]
    if bleu:
        stat: Callable = lambda idx: corpus_bleu(X[idx].sum(0)) - corpus_bleu(B[idx].sum(0))
        what = f"test sentences (paired, seed {s}; corpus BLEU of each resample)"
    else:
        stat = lambda idx: 100.0 * float(X[idx].mean() - B[idx].mean())
        what = f"dev examples (paired, seed {s})"
    est = bootstrap(list(range(len(X))), lambda u: stat(np.asarray(u, dtype=np.int64)), what, name)
    return est, "" if est is not None else "too few units for a bootstrap"


class Deltas:
    """Δ of pairs of arms, each computed once (findings share them)."""

    def __init__(self, arms: Dict[str, Arm], bleu: bool) -> None:
        self.arms, self.bleu, self.cache = arms, bleu, {}

    def __call__(self, x: str, b: str, name: str) -> Tuple[Optional[Estimate], str]:
        if (x, b) not in self.cache:
            self.cache[(x, b)] = delta(self.arms.get(x), self.arms.get(b), name, self.bleu)
        return self.cache[(x, b)]


def _summary(d: Dict[str, Tuple[Optional[Estimate], str]]) -> str:
    return ", ".join(f"{k} {e.value:+.2f}" if e else f"{k} -" for k, (e, _) in d.items())


# ---------------------------------------------------------------- Tables 1-3

def weight_clause(x: str, weights: Dict[str, int]) -> Clause:
    """The count of encoder attention weights of (x) over (a) against the paper's ratio."""
    paper = WEIGHT_RATIO[x]
    claim = f"attention weights ({x})/(a) as the paper's {paper}"
    if not weights.get(x) or not weights.get("a"):
        return not_comparable(claim, "no weight count (no checkpoint)")
    r = weights[x] / weights["a"]
    est = Estimate(r - paper, r - paper, r - paper, f"counted in the checkpoints: {r:.4f}, exact",
                   f"({x})/(a) − {paper}")
    return equivalent(est, RATIO_MARGIN, claim, "the printed ratio's rounding as margin")


def nmt_findings(arms: Dict[str, Arm], weights: Dict[str, int], not_run: Sequence[str] = ()) -> List[Finding]:
    """P7–P13: every configuration against (a) on the synthetic pair;
    ``not_run``: the configurations the scale leaves out (their clauses are
    not comparable)."""
    d = Deltas(arms, bleu=True)

    def est(x: str) -> Tuple[Optional[Estimate], str]:
        if x in not_run:
            return None, f"({x}) is not run at this scale"
        return d(x, "a", f"BLEU({x}) − BLEU(a)")

    def eq(fid: str, xs: str) -> List[Clause]:
        m = MARGIN[fid]
        return [equivalent(est(x)[0], m, f"({x}) matches (a)", est(x)[1]) for x in xs]

    def drop(fid: str, xs: str) -> List[Clause]:
        """"A drop of at most m" (§1, §5.2-5.4: "maximum BLEU score drop"): Δ ≥ −m, one-sided."""
        m = MARGIN[fid]
        return [at_least(est(x)[0], -m, f"({x}) drops at most {m:g} below (a)", est(x)[1]) for x in xs]

    def above(xs: str) -> List[Clause]:
        return [order(est(x)[0], f"({x}) above (a)", est(x)[1]) for x in xs]

    def ev(xs: str) -> str:
        return "BLEU − BLEU(a): " + _summary({f"({x})": est(x) for x in xs})

    return [
        decide("P7", TEXT["P7"], drop("P7", "bcdef"), ev("bcdef") + "; a drop of at most 0.14, one-sided (§5.2: "
               "\"the maximum drop in BLEU score is only 0.14\")"),
        decide("P8", TEXT["P8"], eq("P8", "f"),
               ev("f") + "; margin 0.14, both ways (§1, §5.2: -0.14 En-Ru, +0.11 En-De)"),
        decide("P9", TEXT["P9"], above("bcdef"), ev("bcdef")),
        decide("P10", TEXT["P10"], drop("P10", "ghij") + above("ghij"),
               ev("ghij") + "; a drop of at most 0.52, one-sided (§5.3)"),
        decide("P11", TEXT["P11"], drop("P11", "i") + [weight_clause("i", weights)],
               ev("i") + "; a drop of at most 0.52, one-sided (§5.3: \"a good trade-off\")"),
        decide("P12", TEXT["P12"], drop("P12", "l") + [weight_clause("l", weights)],
               ev("l") + "; a drop of at most 0.24, one-sided (§5.4: \"BLEU scores drop by 0.1 and 0.24\")"),
        decide("P13", TEXT["P13"], drop("P13", "bcdefghijkl"),
               ev("bcdefghijkl") + "; a drop of at most 0.52, one-sided (§1: \"maximum BLEU score drop of 0.24 "
               "and 0.52\")"),
    ]


# ---------------------------------------------------------------- Table 4

def learnt(task: str, base: Values) -> bool:
    """Whether BERT-base learnt ``task``: its mean accuracy 5 points or two
    standard deviations (the larger) above chance (a filter: the rows cannot
    differ where the baseline is at chance)."""
    chance = 100.0 / CLASSES.get(task, 2)
    return base.mean is not None and base.mean - chance > max(5.0, 2 * (base.sd or 0.0))


def bert_findings(arms: Dict[str, Dict[str, Arm]], tasks: Sequence[str]) -> List[Finding]:
    """P14–P17 on the stand-in tasks BERT-base learnt (:func:`learnt`);
    ``arms[arch][task]``."""
    base = arms.get(ROWS[0], {})
    unlearnt = [t for t in tasks if t in base and base[t].values.mean is not None and not learnt(t, base[t].values)]
    tasks = [t for t in tasks if t not in unlearnt]
    fids = ("P14", "P15", "P16", "P17")
    if not tasks:
        return [decide(f, TEXT[f], [not_comparable("every task", "BERT-base learnt none")],
                       f"BERT-base learnt none of the tasks (at chance: {', '.join(unlearnt)})") for f in fids]
    per_task = {t: Deltas({a: arms.get(a, {}).get(t) for a in ROWS if arms.get(a, {}).get(t)}, bleu=False)
                for t in tasks}

    def est(x: str, b: str, t: str) -> Tuple[Optional[Estimate], str]:
        return per_task[t](x, b, f"{SHORT[x]} − {SHORT[b]} on {t}")

    def clauses(kind: str, x: str, b: str, bound: float = 0.0) -> List[Clause]:
        out = []
        for t in tasks:
            e, why = est(x, b, t)
            claim = f"{SHORT[x]} vs {SHORT[b]} on {t}"
            out.append(equivalent(e, bound, claim, why) if kind == "eq" else at_least(e, bound, claim, why)
                       if kind == "ge" else order(e, claim, why))
        return out

    def ev(x: str, b: str) -> str:
        return f"{SHORT[x]} − {SHORT[b]}: " + _summary({t: est(x, b, t) for t in tasks})

    b2, b6, allt, t132, t120 = ROWS[1:]
    out = [
        decide("P14", TEXT["P14"],
               clauses("ge", b2, ROWS[0], -MARGIN["P14"]) + clauses("ge", b6, ROWS[0], -MARGIN["P14"]),
               f"{ev(b2, ROWS[0])}; {ev(b6, ROWS[0])}; a drop of at most 3.1 points, one-sided (Table 4's largest "
               "untied drop; §1: \"only a 2-3% drop\")"),
        decide("P15", TEXT["P15"], clauses("ge", b6, b2), ev(b6, b2)),
        decide("P16", TEXT["P16"], clauses("order", b6, allt), ev(b6, allt)),
        decide("P17", TEXT["P17"], clauses("order", t132, allt) + clauses("eq", t120, b6, MARGIN["P17"]),
               f"{ev(t132, allt)}; {ev(t120, b6)}; margin 0.55 (Table 4's largest |120Tied − Band6|)"),
    ]
    if unlearnt:
        out = [Finding(f.id, f.text, f.verdict, f.evidence + f"; left out, BERT-base at chance: {', '.join(unlearnt)}",
                       f.estimate) for f in out]
    return out


def paper_drops() -> Dict[str, float]:
    """Table 4's drops behind the margins (a check on :data:`MARGIN`)."""
    rows, cols = PANDE_TABLE4["rows"], PANDE_TABLE4["columns"]
    base = dict(zip(cols, rows["BERT-base"]["scores"]))
    untied = [base[c] - v for r in ("All Band2 Untied", "All Band6 Untied") for c, v in zip(cols, rows[r]["scores"])]
    gap = [abs(a - b) for a, b in zip(rows["All Band6 120Tied"]["scores"], rows["All Band6 Untied"]["scores"])]
    return {"P14": round(max(untied), 2), "P17": round(max(gap), 2)}
