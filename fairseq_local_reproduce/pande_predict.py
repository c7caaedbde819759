"""Per-example dev predictions of fine-tuned GLUE models, for the intervals of
Pande et al.'s Table 4 comparisons.

``fairseq-local glue evaluate`` keeps each task's metrics only; a comparison
of two rows of Table 4 with fewer than three fine-tuning seeds each is decided
by a paired bootstrap over the dev examples (:mod:`.verdicts`), which needs
each example's prediction.  This writes, per task, ``OUT/TASK.json``:
``{"task", "set", "checkpoint", "gold": [label, ...], "pred": [label, ...]}``
for the task's first dev set (MNLI: matched), in the rows' order, with the
same model loading and prediction as ``glue evaluate``
(:func:`fairseq_local.models.glue.load`, :func:`~fairseq_local.models.glue.predict`).

Command line: ``python -m fairseq_local_reproduce.pande_predict --runs DIR
--data DIR --glue-dir DIR --tasks QQP SST-2 ... --out DIR [--cuda]``: DIR/TASK/
checkpoint_best.pt per task, the TASK-bin folders and the raw GLUE folder as
for ``scripts/evaluate-glue.sh``.
"""

import argparse
import json
import os
import sys
from typing import Dict, List, Optional, Sequence

from fairseq_local.errors import InputError


def predictions(task: str, checkpoint: str, data: str, glue_dir: str, cpu: bool = True) -> Dict:
    """The gold labels and predictions of ``checkpoint`` on ``task``'s first dev set."""
    from fairseq_local_data.glue import extract, task as glue_task

    from fairseq_local.models.glue import SETS, load, predict, task_data

    data = task_data(task, data)
    set_name, dev, _ = SETS[task][0]
    gold = extract(glue_dir, glue_task(task))[dev]["label"]
    model, fs_task, head, regression = load(checkpoint, data, cpu)
    pred = predict(model, fs_task, head, regression, dev, where=f"{set_name} dev set ({data}, {dev})")
    if len(pred) != len(gold):
        raise InputError(f"{task}: {len(pred)} predictions for {len(gold)} dev labels (prepare the data again)")
    return {"task": task, "set": set_name, "checkpoint": checkpoint, "gold": list(gold), "pred": list(pred)}


def correct(obj: Optional[dict]) -> Optional[List[float]]:
    """1.0 per example predicted right, 0.0 otherwise, from a file of
    :func:`predictions`; None when it is missing or malformed."""
    if not isinstance(obj, dict):
        return None
    gold, pred = obj.get("gold"), obj.get("pred")
    if not isinstance(gold, list) or not isinstance(pred, list) or len(gold) != len(pred) or not gold:
        return None
    return [float(str(g) == str(p)) for g, p in zip(gold, pred)]


def main(argv: Optional[Sequence[str]] = None) -> int:
    from fairseq_local import outputs

    p = argparse.ArgumentParser(prog="python -m fairseq_local_reproduce.pande_predict",
                                description="Per-example GLUE dev predictions of fine-tuned models.")
    p.add_argument("--runs", required=True, help="RUNS/TASK/checkpoint_best.pt per task")
    p.add_argument("--data", required=True, help="the folder of TASK-bin folders")
    p.add_argument("--glue-dir", required=True, help="the raw GLUE folder (gold labels)")
    p.add_argument("--tasks", nargs="+", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--checkpoint-name", default="checkpoint_best.pt")
    p.add_argument("--cuda", action="store_true", help="predict on the GPU if there is one")
    a = p.parse_args(argv)
    try:
        os.makedirs(a.out, exist_ok=True)
        for task in a.tasks:
            obj = predictions(task, os.path.join(a.runs, task, a.checkpoint_name), a.data, a.glue_dir, not a.cuda)
            outputs.write_text(os.path.join(a.out, f"{task}.json"), json.dumps(obj))
            right = correct(obj) or []
            print(f"{task}: {len(right)} dev examples, accuracy {100 * sum(right) / max(1, len(right)):.2f}")
    except (OSError, ValueError) as e:  # GlueError and InputError are ValueErrors with one line
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
