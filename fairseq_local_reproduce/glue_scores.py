"""GLUE's metric of a task on per-example dev predictions, for the reports'
bootstraps over dev examples (:mod:`.aaa_examples`, :mod:`.sparsebert_runs`):
QQP and MRPC F1 of label "1", CoLA MCC, STS-B Spearman, else accuracy, as
``glue evaluate`` scores a whole dev set (:func:`.report.glue_metric`)."""

from typing import Callable

import numpy as np


def _f1(gold: np.ndarray, pred: np.ndarray) -> float:
    tp = float(((pred == "1") & (gold == "1")).sum())
    fp, fn = float(((pred == "1") & (gold != "1")).sum()), float(((pred != "1") & (gold == "1")).sum())
    return 0.0 if tp == 0 else 2 * tp / (2 * tp + fp + fn)


def _mcc(gold: np.ndarray, pred: np.ndarray) -> float:
    g, p = gold == "1", pred == "1"
    tp, tn = float((g & p).sum()), float((~g & ~p).sum())
    fp, fn = float((~g & p).sum()), float((g & ~p).sum())
    den = np.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    return 0.0 if den == 0 else (tp * tn - fp * fn) / den


def _spearman(gold: np.ndarray, pred: np.ndarray) -> float:
    from scipy.stats import spearmanr

    r = spearmanr(gold.astype(float), pred.astype(float)).correlation
    return 0.0 if r is None or not np.isfinite(r) else float(r)


def task_metric(task: str) -> Callable[[np.ndarray, np.ndarray], float]:
    """GLUE's metric of ``task`` on (gold, pred) string arrays, as a fraction."""
    return {"QQP": _f1, "MRPC": _f1, "CoLA": _mcc, "STS-B": _spearman}.get(
        task, lambda g, p: float((g == p).mean()))
