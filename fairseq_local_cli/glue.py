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

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from fairseq_local import outputs
from fairseq_local.checkpoint_compat import Checkpoint
from fairseq_local.errors import InputError
from fairseq_local_data.glue import DIAGNOSTIC, TASKS, GlueError, extract, task as glue_task
from fairseq_local.outputs import Output
from fairseq_local.models.glue import SETS, load, predict, task_data
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


def positive_int(text: str) -> int:
    """argparse type: an integer of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, not {value}")
    return value


def finetuned_task(checkpoint: str) -> Tuple[Optional[str], Dict[str, Any]]:
    """(the GLUE task ``checkpoint`` was fine-tuned on, or None if its data
    folder is not a TASK-bin one; facts read from it), refusing a file that is
    not a fine-tuned sentence_prediction checkpoint: a translation model, or a
    pretrained/converted RoBERTa with no classification head.  Reads no tensor data."""
    if not os.path.isfile(checkpoint):
        raise GlueError(f"no checkpoint '{checkpoint}'")
    ckpt = Checkpoint.read(checkpoint)
    task_cfg = ckpt.options("task")
    task_name, arch = ckpt.task or "?", ckpt.arch or "?"
    keys = list(ckpt.model)
    if task_name.startswith("translation") or (any(k.startswith("decoder.layers.") for k in keys)
                                               and not any(k.startswith("classification_heads.") for k in keys)):
        raise GlueError(f"'{checkpoint}' is a translation checkpoint (arch {arch}), not a fine-tuned RoBERTa")
    heads: Dict[str, int] = {}
    for k in keys:
        if k.startswith("classification_heads.") and k.endswith(".out_proj.weight"):
            heads[k[len("classification_heads."):-len(".out_proj.weight")]] = int(ckpt.model[k].shape[0])
    if task_name != "sentence_prediction" or not heads:
        raise GlueError(f"'{checkpoint}' has no classification head: it was not fine-tuned on a GLUE task "
                        f"(task {task_name}, arch {arch}; fine-tune it with scripts/finetune-glue.sh)")
    data = str(task_cfg.get("data") or "")
    base = os.path.basename(os.path.normpath(data)) if data else ""
    trained = base[:-len("-bin")] if base.endswith("-bin") and base[:-len("-bin")] in TASKS else None
    head = ckpt.options("criterion").get("classification_head_name") or "sentence_classification_head"
    classes = heads.get(head, task_cfg.get("num_classes"))
    return trained, {"data": data, "arch": arch, "num_classes": classes}


def check_checkpoint_task(name: str, checkpoint: str) -> None:
    """A GlueError unless ``checkpoint`` is a model fine-tuned on task ``name``
    (its data folder NAME-bin; for other folders, a head of the task's size)."""
    trained, facts = finetuned_task(checkpoint)
    if trained is not None and trained != name:
        raise GlueError(f"'{checkpoint}' was fine-tuned on {trained} (data '{facts['data']}'), "
                        f"not on {name} (--task {name})")
    want = glue_task(name).num_classes
    if trained is None and facts["num_classes"] not in (None, want):
        raise GlueError(f"'{checkpoint}' has a {facts['num_classes']}-class head (data '{facts['data']}'), "
                        f"but {name} (--task {name}) has {want}")


def evaluate_outputs(out: str, names: Sequence[str], split: str, glue_dir: str) -> List[Output]:
    """Every file ``evaluate --out OUT`` may write: OUT/TASK.json per task and,
    for --split test/all, OUT/submission/SET.tsv per test set."""
    def is_metrics(path: Path) -> bool:
        try:
            obj = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return False
        return isinstance(obj, dict) and "task" in obj and "sets" in obj

    files = []
    for name in names:
        files.append(Output(os.path.join(out, f"{name}.json"), "GLUE metric file", is_metrics))
        for set_name, _, test in SETS[name] if split in ("test", "all") else []:
            if test and (set_name != "AX" or os.path.isfile(os.path.join(glue_dir, DIAGNOSTIC))):
                files.append(Output(os.path.join(out, "submission", f"{set_name}.tsv"), "GLUE submission file",
                                    outputs.text_starting("index\tprediction")))
    return files


def evaluate(name: str, checkpoint: str, data: str, glue_dir: str, split: str = "dev",
             out: Optional[str] = None, batch_size: int = 32, cpu: bool = True) -> Dict:
    """Metrics of ``checkpoint`` on task ``name``'s dev sets (``split`` dev or
    all) and submission files for its test sets (test or all, with ``out``)."""
    t = glue_task(name)
    data = task_data(name, data)
    check_checkpoint_task(name, checkpoint)
    raw = extract(glue_dir, t)
    model, task, head, regression = load(checkpoint, data, cpu)
    result = {"task": name, "checkpoint": checkpoint, "sets": {}}
    submissions = []  # (path, index, predictions): written once every set has been predicted
    for set_name, dev, test in SETS[name]:
        if split in ("dev", "all") and dev:
            pred = predict(model, task, head, regression, dev, batch_size, f"{set_name} dev set ({data}, {dev})")
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
            pred = predict(model, task, head, regression, test, batch_size, f"{set_name} test set ({data}, {test})")
            if len(pred) != len(raw[test]["index"]):
                raise GlueError(f"{set_name}.tsv: {len(pred)} predictions for {len(raw[test]['index'])} test rows")
            submissions.append((os.path.join(out, "submission", f"{set_name}.tsv"), raw[test]["index"], pred))
    for path, index, pred in submissions:
        write_submission(path, index, pred)
    if out:
        os.makedirs(out, exist_ok=True)
        outputs.write_text(os.path.join(out, f"{name}.json"), json.dumps(result, indent=1))
    return result


def write_submission(path: str, index: Sequence[str], pred: Sequence[str]) -> None:
    """A GLUE submission file: header ``index<TAB>prediction``, one row per test example."""
    if len(index) != len(pred):
        raise GlueError(f"{os.path.basename(path)}: {len(pred)} predictions for {len(index)} test rows")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    outputs.write_text(path, "index\tprediction\n" + "".join(f"{i}\t{p}\n" for i, p in zip(index, pred)))


def read_metrics(path: str) -> Dict:
    """A TASK.json of ``evaluate``, or an InputError naming the file."""
    from fairseq_local.outputs import read_json_object

    what = "metric file of fairseq-local glue evaluate"
    obj = read_json_object(Path(path), what)
    sets = obj.get("sets")
    if not isinstance(sets, dict) or not all(isinstance(m, dict) and isinstance(m.get("n"), int)
                                             and all(isinstance(v, (int, float)) for v in m.values())
                                             for m in sets.values()):
        raise InputError(f"'{path}' is not a {what}: no 'sets' object of metrics per set")
    return obj


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
    e.add_argument("--batch-size", type=positive_int, default=32, help="sentences a batch (default 32)")
    outputs.add_force_option(e)
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
            if a.out:  # every output file checked before any task is evaluated
                from .common import check_output_folder

                check_output_folder(a.out, evaluate_outputs(a.out, a.task, a.split, a.glue_dir),
                                    inputs=checkpoints, force=a.force, what="evaluation folder")
            for name, ckpt in zip(a.task, checkpoints):  # and every task's data and checkpoint
                task_data(name, a.data)
                check_checkpoint_task(name, ckpt)
            results = [evaluate(name, ckpt, a.data, a.glue_dir, a.split, a.out, a.batch_size, cpu=not a.cuda)
                       for name, ckpt in zip(a.task, checkpoints)]
        else:
            files = sorted(f for f in os.listdir(a.dir) if f.endswith(".json")) if os.path.isdir(a.dir) else []
            if not files:
                raise GlueError(f"no metric files (TASK.json) in '{a.dir}'")
            order = {n: k for k, n in enumerate(TASKS)}
            results = []
            for f in files:
                results.append(read_metrics(os.path.join(a.dir, f)))
            results.sort(key=lambda r: order.get(r.get("task"), len(order)))
    except (GlueError, InputError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    print(format_table(results))
    return 0


if __name__ == "__main__":
    from .main import main as cli_main

    sys.exit(cli_main(["glue", *sys.argv[1:]]))
