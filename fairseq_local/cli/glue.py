"""``fairseq-local glue``: GLUE metrics of a fine-tuned model, and test-set
predictions in the GLUE submission format.

``evaluate`` loads a checkpoint written by ``scripts/finetune-glue.sh`` (any
fairseq ``sentence_prediction`` checkpoint; with ``--runs``, one per task, all
in one process), predicts on the binarised dev
and/or test sets of ``scripts/prepare-glue.sh``, and scores the dev
predictions against the labels of the raw GLUE folder with the task's
standard metric (scikit-learn / scipy).  ``table`` collects the metric files
of several tasks into one Markdown table.
"""

import json
import os
import sys
from typing import Dict, List, Optional, Sequence, Tuple

from ..data.glue import TASKS, GlueError, extract, task as glue_task
from .common import command_parser

DETAILS = """\
The GLUE benchmark (Wang et al. 2018).
evaluate: metrics per task, as GLUE reports them
  CoLA           Matthews correlation      SST-2, QNLI, RTE, WNLI   accuracy
  MRPC, QQP      F1 (label 1) and accuracy STS-B   Pearson and Spearman
  MNLI           accuracy, matched (MNLI-m) and mismatched (MNLI-mm)
--task T1 T2 ... --runs RUNS evaluates RUNS/TASK/checkpoint_best.pt (or
--checkpoint-name) of each task, and prints one table.
--out DIR writes DIR/TASK.json (metrics) and, with --split test or all,
DIR/submission/NAME.tsv (index<TAB>prediction; NAME = CoLA, SST-2, MRPC, STS-B,
QQP, MNLI-m, MNLI-mm, QNLI, RTE, WNLI, and AX from the MNLI model when the
diagnostic set was prepared).
table: the TASK.json files of a folder as one Markdown table."""

# (name of the set, fairseq dev split, fairseq test split) per task.
SETS: Dict[str, List[Tuple[str, Optional[str], Optional[str]]]] = {
    name: ([("MNLI-m", "valid", "test"), ("MNLI-mm", "valid1", "test1"), ("AX", None, "test2")]
           if name == "MNLI" else [(name, "valid", "test")]) for name in TASKS}


def compute_metrics(name: str, gold: Sequence, pred: Sequence) -> Dict[str, float]:
    """The standard GLUE metrics of task ``name`` for predictions ``pred``
    against ``gold`` (label strings; floats for STS-B), plus ``majority``, the
    accuracy of always predicting the most frequent gold label."""
    from scipy.stats import pearsonr, spearmanr
    from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef

    if len(gold) != len(pred) or not gold:
        raise GlueError(f"{name}: {len(pred)} predictions for {len(gold)} labels")
    if name == "STS-B":
        g, p = [float(x) for x in gold], [float(x) for x in pred]
        return {"pearson": float(pearsonr(g, p)[0]), "spearman": float(spearmanr(g, p)[0])}
    out = {"accuracy": float(accuracy_score(gold, pred))}
    if name == "CoLA":
        out = {"mcc": float(matthews_corrcoef(gold, pred)), **out}
    elif name in ("MRPC", "QQP"):
        out = {"f1": float(f1_score(gold, pred, pos_label="1")), **out}
    out["majority"] = max(list(gold).count(x) for x in set(gold)) / len(gold)
    return out


def load(checkpoint: str, data: str, cpu: bool = True):
    """(model, task, classification head name, regression?) of a fine-tuned
    checkpoint, with its task reading ``data`` (a TASK-bin folder)."""
    import logging
    import warnings

    import torch

    from fairseq import checkpoint_utils  # the plugin's models are registered: this module is part of it

    logging.getLogger("fairseq").setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", message=".*pin_memory.*")

    if not os.path.isfile(checkpoint):
        raise GlueError(f"no checkpoint '{checkpoint}'")
    models, cfg, task = checkpoint_utils.load_model_ensemble_and_task([checkpoint], arg_overrides={"data": data})
    model = models[0].eval()
    if not cpu and torch.cuda.is_available():
        model = model.cuda()
    crit = cfg.criterion
    head = getattr(crit, "classification_head_name", None) or "sentence_classification_head"
    if head not in getattr(model, "classification_heads", {}):
        raise GlueError(f"'{checkpoint}' has no classification head '{head}' (not a fine-tuned model?)")
    regression = bool(getattr(crit, "regression_target", False) or getattr(cfg.task, "regression_target", False))
    return model, task, head, regression


def predict(model, task, head: str, regression: bool, split: str, batch_size: int = 32) -> List[str]:
    """Predictions on the binarised ``split``, in the order of its rows:
    label strings, or STS-B scores back on GLUE's 0-5 scale."""
    import torch
    from fairseq import utils

    task.load_dataset(split)
    ds = task.dataset(split)
    itr = task.get_batch_iterator(
        dataset=ds, max_sentences=batch_size, ignore_invalid_inputs=False,
        max_positions=utils.resolve_max_positions(task.max_positions(), model.max_positions()),
    ).next_epoch_itr(shuffle=False)
    device = next(model.parameters()).device
    out: Dict[int, str] = {}
    with torch.no_grad():
        for sample in itr:
            sample = utils.move_to_cuda(sample) if device.type == "cuda" else sample
            logits = model(**sample["net_input"], features_only=True, classification_head_name=head)[0]
            for i, row in zip(sample["id"].tolist(), logits.float().cpu()):
                if regression:
                    out[i] = f"{min(5.0, max(0.0, 5.0 * row[0].item())):.3f}"
                else:
                    d = task.label_dictionary
                    out[i] = d.string([row.argmax().item() + d.nspecial])
    return [out[i] for i in range(len(ds))]


def evaluate(name: str, checkpoint: str, data: str, glue_dir: str, split: str = "dev",
             out: Optional[str] = None, batch_size: int = 32, cpu: bool = True) -> Dict:
    """Metrics of ``checkpoint`` on task ``name``'s dev sets (``split`` dev or
    all) and submission files for its test sets (test or all, with ``out``)."""
    t = glue_task(name)
    if not os.path.isdir(os.path.join(data, "input0")) and os.path.isdir(os.path.join(data, f"{name}-bin")):
        data = os.path.join(data, f"{name}-bin")
    if not os.path.isfile(os.path.join(data, "input0", "dict.txt")):
        raise GlueError(f"no prepared {name} data in '{data}' (run scripts/prepare-glue.sh)")
    raw = extract(glue_dir, t)
    model, task, head, regression = load(checkpoint, data, cpu)
    result = {"task": name, "checkpoint": checkpoint, "sets": {}}
    for set_name, dev, test in SETS[name]:
        if split in ("dev", "all") and dev:
            pred = predict(model, task, head, regression, dev, batch_size)
            gold = raw[dev]["label"]
            if len(gold) != len(pred):
                raise GlueError(f"{set_name}: '{data}' has {len(pred)} dev rows, the GLUE folder {len(gold)} "
                                "(prepare the data again)")
            result["sets"][set_name] = {**compute_metrics(name, gold, pred), "n": len(gold)}
        if split in ("test", "all") and test and out:
            if test not in raw:  # AX: only when the diagnostic set was prepared
                continue
            if not os.path.isfile(os.path.join(data, "input0", f"{test}.idx")):
                raise GlueError(f"no binarised {set_name} test set in '{data}' (run scripts/prepare-glue.sh)")
            write_submission(os.path.join(out, "submission", f"{set_name}.tsv"), raw[test]["index"],
                             predict(model, task, head, regression, test, batch_size))
    if out:
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, f"{name}.json"), "w") as f:
            json.dump(result, f, indent=1)
    return result


def write_submission(path: str, index: Sequence[str], pred: Sequence[str]) -> None:
    """A GLUE submission file: header ``index<TAB>prediction``, one row per test example."""
    if len(index) != len(pred):
        raise GlueError(f"{os.path.basename(path)}: {len(pred)} predictions for {len(index)} test rows")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write("index\tprediction\n")
        f.writelines(f"{i}\t{p}\n" for i, p in zip(index, pred))


def format_table(results: Sequence[Dict]) -> str:
    """A Markdown table of ``evaluate`` results: one row per set, metrics in %."""
    rows = ["| set | metric | value | majority | n |", "|---|---|---|---|---|"]
    for r in results:
        for set_name, m in r["sets"].items():
            main = [k for k in m if k not in ("majority", "n")]
            value = " / ".join(f"{100 * m[k]:.1f}" for k in main)
            majority = f"{100 * m['majority']:.1f}" if "majority" in m else "-"
            rows.append(f"| {set_name} | {' / '.join(main)} | {value} | {majority} | {m['n']} |")
    return "\n".join(rows)


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = command_parser("glue", DETAILS)
    sub = p.add_subparsers(dest="cmd", required=True, parser_class=type(p))
    e = sub.add_parser("evaluate", help="metrics on dev, submission files for test")
    e.add_argument("--task", required=True, nargs="+", choices=list(TASKS), help="one task, or several with --runs")
    e.add_argument("--checkpoint", help="a fine-tuned checkpoint (checkpoint_best.pt) of the one task")
    e.add_argument("--runs", help="fine-tuning runs, one save dir per task: RUNS/TASK/CHECKPOINT_NAME")
    e.add_argument("--checkpoint-name", default="checkpoint_best.pt", help="with --runs (default checkpoint_best.pt)")
    e.add_argument("--data", required=True, help="the task's TASK-bin folder, or the folder holding them")
    e.add_argument("--glue-dir", required=True, help="the raw GLUE folder (gold labels, test indices)")
    e.add_argument("--split", choices=("dev", "test", "all"), default="dev")
    e.add_argument("--out", help="write OUT/TASK.json and OUT/submission/*.tsv")
    e.add_argument("--batch-size", type=int, default=32)
    e.add_argument("--cuda", action="store_true", help="run on the GPU")
    t = sub.add_parser("table", help="a Markdown table of OUT/*.json")
    t.add_argument("dir")
    a = p.parse_args(argv)
    try:
        if a.cmd == "evaluate":
            if a.split != "dev" and not a.out:
                p.error("--split test/all needs --out (where the submission files go)")
            if (a.checkpoint is None) == (a.runs is None):
                p.error("give --checkpoint (one task) or --runs (one save dir per task)")
            if a.checkpoint and len(a.task) > 1:
                p.error("--checkpoint is one task's model: use --runs for several tasks")
            checkpoints = [a.checkpoint] if a.checkpoint else [os.path.join(a.runs, n, a.checkpoint_name) for n in a.task]
            results = [evaluate(name, ckpt, a.data, a.glue_dir, a.split, a.out, a.batch_size, cpu=not a.cuda)
                       for name, ckpt in zip(a.task, checkpoints)]
        else:
            files = sorted(f for f in os.listdir(a.dir) if f.endswith(".json")) if os.path.isdir(a.dir) else []
            if not files:
                raise GlueError(f"no metric files (TASK.json) in '{a.dir}'")
            order = {n: k for k, n in enumerate(TASKS)}
            results = []
            for f in files:
                with open(os.path.join(a.dir, f)) as fh:
                    results.append(json.load(fh))
            results.sort(key=lambda r: order.get(r.get("task"), len(order)))
    except (GlueError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    print(format_table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
