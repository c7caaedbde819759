"""Pande et al., Table 4: GLUE dev scores of BERT-base with local and Q/K-tied
heads, measured beside the paper's.

Reads the runs of ``scripts/sweep-table4.sh`` (and ``scripts/demo-bert.sh``)
under ``RUNS_ROOT/<arch>/``: a pretraining checkpoint (``len512/``,
``len128/`` or any phase directory) for the encoder attention weight count,
and ``glue/eval/TASK.json`` written by ``fairseq-local glue evaluate``.  One
row per Table 4 configuration, in the paper's order (BERT-base also as
fairseq's own ``roberta_base`` when that run exists), then any other arch
found (e.g. ``roberta_aaa`` fine-tuned from a converted model).  The score
of a task is its dev accuracy (MNLI: matched), as Table 4 reports; cells a
run has not produced yet are "-".
"""

from pathlib import Path
from typing import Dict, List, Optional, Sequence

from fairseq_local.errors import InputError
from fairseq_local.models.archs import TABLE4_CONFIGS, get_config

TASKS = ("QQP", "SST-2", "MNLI", "QNLI")
# Pande et al., Table 4 (GLUE dev, as printed; seeds README).
PAPER: Dict[str, Dict[str, float]] = {
    "roberta_base": {"QQP": 90.9, "SST-2": 91.8, "MNLI": 83.7, "QNLI": 90.8},
    "roberta_local_base": {"QQP": 90.9, "SST-2": 91.8, "MNLI": 83.7, "QNLI": 90.8},
    "roberta_band2": {"QQP": 90.05, "SST-2": 89.75, "MNLI": 80.6, "QNLI": 88.3},
    "roberta_band6": {"QQP": 90.46, "SST-2": 90.65, "MNLI": 81.15, "QNLI": 89.0},
    "roberta_band6_all_tied": {"QQP": 86.5, "SST-2": 87.8, "MNLI": 67.6, "QNLI": 72.1},
    "roberta_band6_132_tied": {"QQP": 88.8, "SST-2": 91.3, "MNLI": 74.3, "QNLI": 83.2},
    "roberta_band6_120_tied": {"QQP": 90.4, "SST-2": 91.16, "MNLI": 80.7, "QNLI": 88.45},
}
# The set whose accuracy is the task's score.
SCORE_SET = {"MNLI": "MNLI-m"}


def columns(tasks: Sequence[str]) -> List[str]:
    """The table's columns for ``tasks``: config, arch, attn weights, then
    per task its score, the paper's and the majority class's."""
    cols = ["config", "arch", "attn weights"]
    for t in tasks:
        cols += [t, f"{t} paper", f"{t} majority"]
    return cols


def is_table4_header(cells: List[str]) -> bool:
    """Whether a header row is one of :func:`columns` (for any GLUE tasks)."""
    from fairseq_local_data.glue import TASKS as GLUE_TASKS

    tasks = cells[3::3]
    return (len(cells) > 3 and len(cells) % 3 == 0 and all(t in GLUE_TASKS for t in tasks)
            and cells == columns(tasks))


def eval_file(run: Path, task: str) -> Path:
    """Where ``fairseq-local glue evaluate`` leaves a run's metrics of ``task``."""
    return run / "glue" / "eval" / f"{task}.json"


def input_files(runs_root: Path, tasks: Sequence[str]) -> List[Path]:
    """The metric files Table 4 reads (those that exist)."""
    runs = sorted(p for p in runs_root.iterdir() if p.is_dir()) if runs_root.is_dir() else []
    return [eval_file(r, t) for r in runs for t in tasks if eval_file(r, t).is_file()]


def _percent(path: Path, metrics: Dict, key: str) -> str:
    value = metrics.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"'{path}' is not a metric file of fairseq-local glue evaluate: "
                         f"'{key}' is {value!r}, not a number")
    return f"{100 * value:.2f}"


def score(run: Path, task: str) -> Dict[str, str]:
    """``{TASK: accuracy %, TASK majority: %}`` from ``glue/eval/TASK.json``."""
    from fairseq_local.outputs import read_json_object

    path = eval_file(run, task)
    if not path.is_file():
        return {}
    what = "metric file of fairseq-local glue evaluate"
    sets = read_json_object(path, what).get("sets")
    if not isinstance(sets, dict) or not all(isinstance(m, dict) for m in sets.values()):
        raise InputError(f"'{path}' is not a {what}: no 'sets' object of metrics")
    metrics = sets.get(SCORE_SET.get(task, task)) or next(iter(sets.values()), None)
    if not metrics or "accuracy" not in metrics:
        return {}
    return {task: _percent(path, metrics, "accuracy"), f"{task} majority": _percent(path, metrics, "majority")}


def weight_count(run: Path) -> Dict[str, str]:
    """The arch and encoder attention weight count of the run's pretrained
    model (``checkpoint_last.pt``, which ``pretrain-bert.sh`` links to its
    last phase), or of the first checkpoint found in a phase or fine-tuning
    directory."""
    from fairseq_local.checkpoint_compat import checkpoint_info

    for d in [run] + sorted(p for p in run.iterdir() if p.is_dir()) + sorted(run.glob("glue/*/")):
        info = checkpoint_info(d)
        if info:
            return info
    return {}


def row(runs_root: Path, arch: str, tasks: Sequence[str]) -> Dict[str, str]:
    out = {c: "-" for c in columns(tasks)}
    try:
        out["config"] = get_config(arch).name
    except KeyError:
        out["config"] = "BERT-base (fairseq)" if arch == "roberta_base" else arch
    out["arch"] = arch
    run = runs_root / arch
    if run.is_dir():
        out.update(weight_count(run))
        for t in tasks:
            out.update(score(run, t))
    for t in tasks:
        if t in PAPER.get(arch, {}):
            out[f"{t} paper"] = f"{PAPER[arch][t]:.2f}"
    return out


def collect(runs_root: Path, tasks: Optional[Sequence[str]] = None) -> List[Dict[str, str]]:
    """Table 4's rows, then any other run directory under ``runs_root``."""
    tasks = list(tasks or TASKS)
    archs = [c.arch for c in TABLE4_CONFIGS]
    if (runs_root / "roberta_base").is_dir():  # the stock model as the BERT-base row
        archs.insert(0, "roberta_base")
    if runs_root.is_dir():
        archs += sorted(p.name for p in runs_root.iterdir() if p.is_dir() and p.name not in archs)
    return [row(runs_root, arch, tasks) for arch in archs]
