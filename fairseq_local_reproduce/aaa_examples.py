"""The interval of a difference of GLUE scores between rows of ``reproduce
aaa``'s tables: Welch's t over fine-tuning seeds where both arms have three
or more (:func:`.verdicts.seed_interval`), else a paired bootstrap over the dev
examples of the first seed's runs (the one rule of :mod:`.verdicts`).

The dev predictions come from ``eval/predictions/TASK.json`` of each row's
first seed (``{"gold": [...], "pred": [...]}``, written by the plan's
``predictions`` step; MNLI: the matched dev set).  Each bootstrap draw
resamples each task's dev examples (the same indices for both arms: the same
sentences scored twice), computes every task's GLUE metric (QQP and MRPC F1,
CoLA MCC, STS-B Spearman, else accuracy; in percent) and averages over the
tasks, as the tables' "average" column does; 2,000 draws, generator seed 0,
the 2.5 and 97.5 percentiles.
"""

import json
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from .glue_scores import task_metric
from .verdicts import BOOTSTRAP, LEVEL, Estimate, seed_interval

Arm = Sequence[str]  # row keys whose scores are averaged (one row, or e.g. Fig. 2's sizes above 2)


def read_predictions(path: Path) -> Optional[Tuple[np.ndarray, np.ndarray]]:
    """(gold, pred) as string arrays from a predictions file; None when missing or malformed."""
    try:
        obj = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    gold, pred = (obj or {}).get("gold"), (obj or {}).get("pred")
    if not isinstance(gold, list) or not isinstance(pred, list) or len(gold) != len(pred) or not gold:
        return None
    return np.asarray([str(g) for g in gold]), np.asarray([str(p) for p in pred])


def paired_bootstrap(a: Dict[str, List[Tuple[np.ndarray, np.ndarray]]],
                     b: Dict[str, List[Tuple[np.ndarray, np.ndarray]]], name: str = "Δ",
                     n: int = BOOTSTRAP, seed: int = 0) -> Optional[Estimate]:
    """mean over tasks of (mean over arm a's rows of the metric) − (the same
    for b), in points, with a bootstrap over each task's dev examples
    (stratified by task, paired: one draw of indices for every row).  ``a``
    and ``b``: task -> the (gold, pred) of each row of the arm."""
    tasks = [t for t in a if t in b and a[t] and b[t]]
    sizes = {t: len(a[t][0][0]) for t in tasks}
    if not tasks or any(len(g) != sizes[t] for t in tasks for g, _ in a[t] + b[t]) or min(sizes.values()) < 2:
        return None

    def stat(idx: Dict[str, np.ndarray]) -> float:
        per = []
        for t in tasks:
            m, i = task_metric(t), idx[t]
            per.append(np.mean([m(g[i], p[i]) for g, p in a[t]]) - np.mean([m(g[i], p[i]) for g, p in b[t]]))
        return 100 * float(np.mean(per))

    rng = np.random.default_rng(seed)
    value = stat({t: np.arange(sizes[t]) for t in tasks})
    draws = [stat({t: rng.integers(0, sizes[t], sizes[t]) for t in tasks}) for _ in range(n)]
    lo, hi = np.quantile(draws, [0.5 - LEVEL / 2, 0.5 + LEVEL / 2])
    what = " + ".join(f"{sizes[t]} {t}" for t in tasks)
    return Estimate(value, float(lo), float(hi), f"paired bootstrap over {what} dev examples", name)


def difference(seeds_a: Sequence[float], seeds_b: Sequence[float],
               examples_a: Optional[Dict[str, list]], examples_b: Optional[Dict[str, list]],
               name: str = "Δ") -> Tuple[Optional[Estimate], str]:
    """The one rule: Welch's t over seeds when both arms have three or more,
    else the paired bootstrap over dev examples; (None, why) without either."""
    est = seed_interval(seeds_a, seeds_b, name)
    if est is not None:
        return est, ""
    if examples_a is None or examples_b is None:
        return None, (f"{min(len(seeds_a), len(seeds_b))} seed(s) in an arm and no per-example dev predictions")
    est = paired_bootstrap(examples_a, examples_b, name)
    return est, "" if est is not None else "per-example dev predictions do not match"
