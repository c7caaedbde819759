"""Reading the runs of ``reproduce sparsebert``: GLUE metrics per row and
seed, the dev sparsity of the fine-tuning logs, per-example dev predictions
(for a bootstrap over dev examples where a row has fewer than three seeds),
and the learned importance P of §3.1 by position class.
"""

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from .report import Values, glue_metric, read_json
from .glue_scores import task_metric
from .verdicts import Estimate, bootstrap, seed_interval


def columns(tasks: Sequence[str]) -> List[str]:
    """The paper's column names of ``tasks`` (MNLI: matched and mismatched)."""
    return [c for t in tasks for c in (("MNLI-m", "MNLI-mm") if t == "MNLI" else (t,))]


def metric(eval_dir: Path, col: str) -> Optional[float]:
    """Column ``col`` of ``evaluate-glue.sh``'s TASK.json, in percent."""
    if col == "MNLI-mm":
        return glue_metric(eval_dir / "MNLI.json", "MNLI", "accuracy", set_name="MNLI-mm")
    task = "MNLI" if col == "MNLI-m" else col
    return glue_metric(eval_dir / f"{task}.json", task)


def mean(xs: Sequence[float]) -> Optional[float]:
    return sum(xs) / len(xs) if xs else None


def valid_rho(run: Path) -> Optional[float]:
    """ρ of the validation that chose ``checkpoint_best.pt`` (the last with the
    best accuracy; else the last) in RUN/train.log, as ``fairseq-local results`` reads it."""
    try:
        lines = (run / "train.log").read_text(errors="replace").splitlines()
    except OSError:
        return None
    best: Optional[Tuple[float, float]] = None
    for line in lines:
        if not re.search(r"\| valid \| epoch .*?\| loss ", line):
            continue
        rho, acc = re.search(r"\| rho ([0-9.e-]+)", line), re.search(r"\| accuracy ([0-9.]+)", line)
        if rho:
            a = float(acc.group(1)) if acc else float("-inf")
            if best is None or a >= best[0]:
                best = (a, float(rho.group(1)))
    return None if best is None else best[1]


@dataclass
class Runs:
    """Per row: ``scores`` {column: Values over seeds}, ``avgs`` (each seed's
    mean over the columns; seeds with every column), ``rho`` {task or "all":
    mean dev ρ over seeds}, ``rho_seeds`` (each seed's dev ρ over its tasks),
    ``seeds`` (the seeds planned), and ``dirs`` (each seed's run folder)."""

    scores: Dict[str, Dict[str, Values]]
    avgs: Dict[str, Values]
    rho: Dict[str, Dict[str, Optional[float]]]
    rho_seeds: Dict[str, Values]
    seeds: Dict[str, Sequence[int]]
    dirs: Dict[str, List[Path]]


def gather(ft_dir, rows: Sequence[str], seeds: Dict[str, Sequence[int]], tasks: Sequence[str]) -> Runs:
    """Every row's metrics and dev ρ; ``ft_dir(row, seed)``: its run folder."""
    cols = columns(tasks)
    out = Runs({}, {}, {}, {}, dict(seeds), {})
    for row in rows:
        dirs = [Path(ft_dir(row, k)) for k in seeds[row]]
        out.dirs[row] = dirs
        per = {c: [metric(d / "eval", c) for d in dirs] for c in cols}
        out.scores[row] = {c: Values(tuple(v for v in vs if v is not None)) for c, vs in per.items()}
        out.avgs[row] = Values(tuple(sum(per[c][i] for c in cols) / len(cols) for i in range(len(dirs))
                                     if all(per[c][i] is not None for c in cols)))
        r = {t: [valid_rho(d / t) for d in dirs] for t in tasks}
        out.rho[row] = {t: mean([x for x in v if x is not None]) for t, v in r.items()}
        out.rho[row]["all"] = mean([x for v in r.values() for x in v if x is not None])
        each = [[r[t][i] for t in tasks] for i in range(len(dirs))]
        out.rho_seeds[row] = Values(tuple(sum(v) / len(v) for v in each if None not in v))
    return out


# ---- per-example dev predictions: the bootstrap over dev examples ----------------------------------

def dev_examples(eval_dir: Path, col: str) -> Optional[Tuple[np.ndarray, np.ndarray]]:
    """(gold, predicted) labels of the dev set ``col`` from the plan's
    predictions step (``EVAL/predictions/TASK.json``, :mod:`.pande_predict`:
    the task's first dev set, so MNLI-m and not MNLI-mm), or None."""
    task = "MNLI" if col.startswith("MNLI") else col
    s = read_json(eval_dir / "predictions" / f"{task}.json") or {}
    if s.get("set", col) != col or not isinstance(s.get("gold"), list) or not isinstance(s.get("pred"), list):
        return None
    if len(s["gold"]) != len(s["pred"]) or len(s["gold"]) < 2:
        return None
    kind = float if col == "STS-B" else str
    return np.asarray([kind(x) for x in s["gold"]]), np.asarray([kind(x) for x in s["pred"]])


def example_metric(col: str, gold: np.ndarray, pred: np.ndarray) -> float:
    """GLUE's metric of ``col`` in percent (:func:`.glue_scores.task_metric`)."""
    return 100 * task_metric(col)(gold, pred)


def row_examples(runs: Runs, row: str, cols: Sequence[str]) -> Optional[Dict[str, Tuple[np.ndarray, np.ndarray]]]:
    """{column: (gold, pred)} of the row's first seed, or None if any is
    missing (MNLI-mm, which the predictions step does not predict, left out)."""
    cols = [c for c in cols if c != "MNLI-mm"]
    if not runs.dirs.get(row) or not cols:
        return None
    out = {c: dev_examples(runs.dirs[row][0] / "eval", c) for c in cols}
    return None if any(v is None for v in out.values()) else out  # type: ignore[return-value]


def paired_examples(a: Dict[str, Tuple[np.ndarray, np.ndarray]], b: Dict[str, Tuple[np.ndarray, np.ndarray]],
                    name: str = "Δ") -> Optional[Estimate]:
    """mean over columns of metric(a) − metric(b) with a bootstrap over the
    dev examples, which both rows predicted (the same gold labels)."""
    if set(a) != set(b) or any(len(a[c][0]) != len(b[c][0]) or (a[c][0] != b[c][0]).any() for c in a):
        return None
    units = [(c, i) for c in a for i in range(len(a[c][0]))]

    def stat(sample) -> float:
        idx: Dict[str, List[int]] = {c: [] for c in a}
        for c, i in sample:
            idx[c].append(i)
        d = [example_metric(c, a[c][0][ix], a[c][1][ix]) - example_metric(c, b[c][0][ix], b[c][1][ix])
             for c, ix in idx.items() if len(ix) > 1]
        return float(np.mean(d)) if d else float("nan")

    return bootstrap(units, stat, "dev examples", name)


def row_difference(runs: Runs, a: str, b: str, cols: Sequence[str], name: str = "Δ") -> Optional[Estimate]:
    """The one interval rule on row a − row b, on one column or (several)
    the average over every column: Welch's t over seeds where both rows have
    three or more, else a paired bootstrap over the dev examples of their
    first seeds (MNLI: its matched set), else None."""
    def per_seed(row: str) -> Sequence[float]:
        if row not in runs.avgs:
            return ()
        return runs.scores[row][cols[0]].values if len(cols) == 1 else runs.avgs[row].values

    est = seed_interval(per_seed(a), per_seed(b), name)
    if est is not None:
        return est
    ea, eb = row_examples(runs, a, cols), row_examples(runs, b, cols)
    return None if ea is None or eb is None else paired_examples(ea, eb, name)


# ---- §3.1's importance P by position class ----------------------------------------------------------

CLASSES = ("diag", "neighbour", "special", "other")


def class_masks(n: int) -> Dict[str, "object"]:
    """§3.1.2's position classes of a sentence of n tokens, bool (n, n): the
    diagonal, the special tokens' rows and columns (the first, [CLS] / <s>,
    and the last, [SEP] / </s>; off the diagonal), the neighbours |i − j| = 1
    (not special), and the other positions."""
    import torch

    i, j = torch.arange(n)[:, None], torch.arange(n)[None, :]
    diag = i == j
    special = ((i == 0) | (j == 0) | (i == n - 1) | (j == n - 1)) & ~diag
    near = ((i - j).abs() == 1) & ~special
    return {"diag": diag, "neighbour": near, "special": special, "other": ~(diag | special | near)}


def p_units(heads: Sequence, lengths: Sequence[int]) -> List[dict]:
    """One unit per (head, query position i): for each class the sum and the
    count of P over the dev sentences (a sentence of n tokens reads P[:n, :n],
    its special tokens at 0 and n − 1), and the sum of squares of the other
    positions and of every position.  ``heads``: (N, N) P matrices;
    ``lengths``: tokens per sentence (a longer one reads the first N)."""
    import torch

    counts = dict(zip(*[t.tolist() for t in torch.tensor(list(lengths)).unique(return_counts=True)]))
    units = []
    for h, p in enumerate(heads):
        p = p.double()
        acc = {k: torch.zeros(p.shape[0], dtype=torch.float64) for k in
               [f"{c}_{x}" for c in CLASSES for x in ("sum", "n")] + ["other_sq", "all_sq"]}
        for n, c in counts.items():
            n = min(int(n), p.shape[0])
            block = p[:n, :n]
            for name, m in class_masks(n).items():
                acc[f"{name}_sum"][:n] += c * (block * m).sum(1)
                acc[f"{name}_n"][:n] += c * m.sum(1)
            acc["other_sq"][:n] += c * (block ** 2 * class_masks(n)["other"]).sum(1)
            acc["all_sq"][:n] += c * (block ** 2).sum(1)
        for i in range(p.shape[0]):
            if any(acc[f"{c}_n"][i] > 0 for c in CLASSES):
                units.append({"head": h, "row": i, **{k: float(v[i]) for k, v in acc.items()}})
    return units


def class_mean(units: Sequence[dict], c: str) -> float:
    n = sum(u[f"{c}_n"] for u in units)
    return sum(u[f"{c}_sum"] for u in units) / n if n else float("nan")


def other_sd(units: Sequence[dict]) -> float:
    """The standard deviation of P over the other positions."""
    n = sum(u["other_n"] for u in units)
    if not n:
        return float("nan")
    m = sum(u["other_sum"] for u in units) / n
    return max(0.0, sum(u["other_sq"] for u in units) / n - m * m) ** 0.5


def class_means(units: Sequence[dict]) -> Dict[str, float]:
    """Each class's mean P and ``other_sd``."""
    return {**{c: class_mean(units, c) for c in CLASSES}, "other_sd": other_sd(units)}
