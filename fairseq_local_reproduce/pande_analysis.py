"""Pande et al.'s findings P1–P6 (§3, Figs. 1–3) decided on 95 % intervals,
one analysed model at a time (the NMT baseline, and BERT-base fine-tuned on
each task, on that task's test sentences).

The paper's words, which the clauses test:

* P1, §3.1: "Across all the tasks, we observe that γlocal is higher than
  γsyntactic which in turn is higher than γunrelated.  This confirms that
  across all the tasks the output of each layer is most sensitive to the
  inputs that are local."  Per model, the smallest over layers of the mean
  over sentences of γ_L − γ_S (and of γ_S − γ_U), in units of the layer's
  mean γ_L, is above zero.
* P2, §3.1: "the sensitivity to unrelated tokens is negligible": no number
  printed; read as γ_U / γ_L ≤ 0.25 in every layer (a stated margin).
* P3, §3.2: "the fraction of heads with non-local syntactic bias is
  significantly smaller than those with locality bias at all values of the
  threshold" (1 through 5): the smallest over the thresholds where a head
  exceeds it of share(local > t) − share(syntactic > t) is above zero.
* P4, §3.2: "In 4 out of the 6 tasks, more than a quarter of heads have a
  locality bias greater than a high threshold of 3": share(local > 3) ≥ 0.25
  per model, and that in at least two thirds of the models.
* P5, §3.2: "the heads with local bias are spread across layers, though later
  layers have fewer such heads": at least half the layers hold a head with
  local bias > 3, and the share of such heads is larger in the first half of
  the layers than in the last half.
* P6, §3.2: "there are far fewer such heads" (non-local syntactic bias > 3):
  share(local > 3) − share(syntactic > 3) above zero.

Intervals: a bootstrap over the analysed sentences (``sensitivity.json``
keeps each sentence's γ per layer) for P1–P2, over the heads for P3, P4 and
P6, and over heads within each layer (the same head positions drawn in every
layer) for P5 (``bias.json`` keeps each head's corpus score).  A model with no
head above 3 of either kind cannot show P5's or P6's pattern: not comparable.
"""

import math
import warnings
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np

from .numbers_pande import PANDE_FINDINGS
from .report import Finding, decide, read_json
from .verdicts import (CONTRADICTED, INCONCLUSIVE, REPRODUCED, Clause, Estimate, at_least, at_most, bootstrap,
                       not_comparable, order, share)

TEXT = {f["id"]: f["text"] for f in PANDE_FINDINGS}
THRESHOLDS = (1, 2, 3, 4, 5)  # Fig. 2's x-axis, "varied from 1 through 5"
CUT = 3.0                     # Fig. 3 and P4: "greater than a high threshold of 3"
NEGLIGIBLE = 0.25             # P2: the stated reading of "negligible"
QUARTER = 0.25                # P4: "more than a quarter of heads"
MOST_MODELS = 4 / 6           # P4: "In 4 out of the 6 tasks"
SPREAD = 0.5                  # P5: "spread across layers", read as at least half the layers


def _array(nested) -> np.ndarray:
    """Nested lists with None -> float array with NaN."""
    return np.array([[np.nan if v is None else v for v in row] for row in nested], dtype=float)


def _nanmean(x: np.ndarray, axis: int = 0) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmean(x, axis=axis)


def _extreme(v: np.ndarray, f) -> float:
    v = v[np.isfinite(v)]
    return float(f(v)) if len(v) else math.nan


# ---------------------------------------------------------------- sensitivity (P1, P2)

def gammas(sens: dict) -> Dict[str, np.ndarray]:
    """γ per set as (sentences, layers) arrays, NaN where a set is empty."""
    return {k: _array(sens[k]).T for k in ("local", "syntactic", "unrelated")}


def gap_estimate(g: Dict[str, np.ndarray], hi: str, lo: str, label: str) -> Optional[Estimate]:
    """min over layers of the mean over sentences of γ_hi − γ_lo, in units of
    the layer's mean γ_L (its sign is the claim's; the scale makes models
    comparable), bootstrap over sentences."""
    scale = _nanmean(g["local"])  # (layers,), fixed: the whole sample's
    diff = (g[hi] - g[lo]) / np.where(scale > 0, scale, np.nan)
    sym = {"local": "L", "syntactic": "S", "unrelated": "U"}
    return bootstrap(list(range(len(diff))), lambda idx: _extreme(_nanmean(diff[idx]), np.min), "sentences",
                     f"{label}: min over layers of (γ_{sym[hi]} − γ_{sym[lo]})/γ_L")


def ratio_estimate(g: Dict[str, np.ndarray], label: str) -> Optional[Estimate]:
    """max over layers of mean γ_U / mean γ_L, bootstrap over sentences."""
    u, loc = g["unrelated"], g["local"]
    return bootstrap(list(range(len(u))), lambda idx: _extreme(_nanmean(u[idx]) / _nanmean(loc[idx]), np.max),
                     "sentences", f"{label}: max over layers of γ_U/γ_L")


# ---------------------------------------------------------------- bias (P3-P6)

def shares(loc: np.ndarray, syn: np.ndarray, t: float) -> "tuple[float, float]":
    """Shares of heads with local / syntactic bias above ``t`` (undefined: not above)."""
    return float(np.mean(np.nan_to_num(loc, nan=-1.0) > t)), float(np.mean(np.nan_to_num(syn, nan=-1.0) > t))


def bias_clauses(b: dict, label: str) -> Dict[str, List[Clause]]:
    """P3-P6's clauses of one model's ``bias.json``."""
    loc2, syn2 = _array(b["local"]), _array(b["syntactic"])
    loc, syn = loc2.ravel(), syn2.ravel()
    heads = list(range(len(loc)))
    out: Dict[str, List[Clause]] = {}
    # thresholds where the shares can differ: every head above t on both scores (or none) would make
    # the minimum exactly 0 in every resample, a point interval that decides nothing
    ts = [t for t in THRESHOLDS if max(shares(loc, syn, t)) > 0 and min(shares(loc, syn, t)) < 1] or [THRESHOLDS[-1]]

    def p3(idx):
        return min(a - s for a, s in (shares(loc[idx], syn[idx], t) for t in ts))

    est = bootstrap(heads, lambda u: p3(np.asarray(u)), "heads",
                    f"{label}: min over t = {', '.join(map(str, ts))} of share(local > t) − share(syntactic > t)")
    out["P3"] = [order(est, f"{label}: more local than syntactic heads at every threshold")]
    est = share(int(np.sum(np.nan_to_num(loc, nan=-1.0) > CUT)), len(loc), "heads", f"{label}: share(local > 3)")
    out["P4"] = [at_least(est, QUARTER, f"{label}: more than a quarter of heads above 3")]
    any_local = bool(np.nansum(loc2 > CUT))
    layers = loc2.shape[0]
    if not any_local or layers < 2:
        why = "no head has locality bias above 3 (nothing to place across layers)" if layers > 1 else "one layer"
        out["P5"] = [not_comparable(f"{label}: spread across layers", why),
                     not_comparable(f"{label}: fewer in later layers", why)]
    else:
        cols = list(range(loc2.shape[1]))
        above = np.nan_to_num(loc2, nan=-1.0) > CUT  # (layers, heads)
        half = layers // 2
        spread = bootstrap(cols, lambda u: float(np.mean(above[:, np.asarray(u)].any(1))), "heads of each layer",
                           f"{label}: share of layers with a head above 3")
        fewer = bootstrap(cols, lambda u: float(above[:half, np.asarray(u)].mean() - above[-half:, np.asarray(u)].mean()),
                          "heads of each layer",
                          f"{label}: share above 3, layers 1–{half} − layers {layers - half + 1}–{layers}")
        out["P5"] = [at_least(spread, SPREAD, f"{label}: spread across layers"),
                     order(fewer, f"{label}: fewer in later layers")]
    if not any_local and not np.nansum(syn2 > CUT):
        out["P6"] = [not_comparable(f"{label}: fewer syntactic than local heads above 3",
                                    "no head above 3 of either kind")]
    else:
        est = bootstrap(heads, lambda u: float(np.subtract(*shares(loc[np.asarray(u)], syn[np.asarray(u)], CUT))),
                        "heads", f"{label}: share(local > 3) − share(syntactic > 3)")
        out["P6"] = [order(est, f"{label}: fewer syntactic than local heads above 3")]
    return out


def most_models(per_model: List[Clause]) -> Clause:
    """P4's count: at least two thirds of the models' clauses reproduced
    (the count's interval: those reproduced to those not contradicted)."""
    need = math.ceil(MOST_MODELS * len(per_model) - 1e-9)
    yes = sum(c.verdict == REPRODUCED for c in per_model)
    maybe = yes + sum(c.verdict == INCONCLUSIVE for c in per_model)
    point = sum(c.estimate is not None and c.estimate.value > QUARTER for c in per_model)
    v = REPRODUCED if yes >= need else CONTRADICTED if maybe < need else INCONCLUSIVE
    est = Estimate(point, yes, maybe, f"each model's 95 % bootstrap over heads; {need} of {len(per_model)} needed",
                   "models above a quarter")
    return Clause(v, f"at least {need} of {len(per_model)} models (4 of the paper's 6 tasks)", est)


def analysis_findings(analyses: Dict[str, Path]) -> List[Finding]:
    """P1–P6 from ``sensitivity.json`` and ``bias.json`` of each analysed
    model that has them (``analyses``: its label -> its folder)."""
    sens = {k: v for k, p in analyses.items() if (v := read_json(p / "sensitivity.json"))}
    bias = {k: v for k, p in analyses.items() if (v := read_json(p / "bias.json"))}
    missing = ", ".join(k for k in analyses if k not in sens) or "none"
    out = []
    if not sens:
        for f in ("P1", "P2"):
            out.append(decide(f, TEXT[f], [not_comparable("every model", "no sensitivity analysis")]))
    else:
        c1, c2, ev = [], [], []
        for k, s in sens.items():
            g = gammas(s)
            c1 += [order(gap_estimate(g, "local", "syntactic", k), f"{k}: γ_L > γ_S in every layer"),
                   order(gap_estimate(g, "syntactic", "unrelated", k), f"{k}: γ_S > γ_U in every layer")]
            c2.append(at_most(ratio_estimate(g, k), NEGLIGIBLE, f"{k}: γ_U negligible"))
            means = {x: _nanmean(v) for x, v in g.items()}
            ev.append(f"{k} ({len(g['local'])} sentences): " + ", ".join(
                f"layer {i + 1} {means['local'][i]:.3g}/{means['syntactic'][i]:.3g}/{means['unrelated'][i]:.3g}"
                for i in range(len(means["local"]))))
        note = f" (no analysis: {missing})" if missing != "none" else ""
        out.append(decide("P1", TEXT["P1"], c1, "mean γ_L/γ_S/γ_U per layer: " + "; ".join(ev) + note))
        out.append(decide("P2", TEXT["P2"], c2, "negligible read as γ_U/γ_L ≤ 0.25 in every layer (the paper "
                          "prints no number)" + note))
    if not bias:
        return out + [decide(f, TEXT[f], [not_comparable("every model", "no bias analysis")])
                      for f in ("P3", "P4", "P5", "P6")]
    per = {k: bias_clauses(b, k) for k, b in bias.items()}
    ev3 = "; ".join(f"{k}: local " + "/".join(f"{shares(_array(b['local']).ravel(), _array(b['syntactic']).ravel(), t)[0]:.2f}"
                                              for t in THRESHOLDS)
                    + ", syntactic " + "/".join(f"{shares(_array(b['local']).ravel(), _array(b['syntactic']).ravel(), t)[1]:.2f}"
                                                for t in THRESHOLDS) for k, b in bias.items())
    layers = "; ".join(f"{k}: " + " ".join(str(int(np.sum(np.nan_to_num(_array(b["local"])[i], nan=-1) > CUT)))
                                           for i in range(len(b["local"]))) for k, b in bias.items())
    p4 = [c for k in per for c in per[k]["P4"]]
    out += [decide("P3", TEXT["P3"], [c for k in per for c in per[k]["P3"]],
                   "share of heads above t = 1..5: " + ev3),
            decide("P4", TEXT["P4"], [most_models(p4)], "per model: " + "; ".join(c.text() for c in p4)),
            decide("P5", TEXT["P5"], [c for k in per for c in per[k]["P5"]],
                   "heads with locality bias > 3, layer 1 first: " + layers),
            decide("P6", TEXT["P6"], [c for k in per for c in per[k]["P6"]], "share of heads above 3 per model")]
    return out
