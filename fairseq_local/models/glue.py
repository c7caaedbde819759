"""A fine-tuned GLUE model (a fairseq ``sentence_prediction`` checkpoint of
``scripts/finetune-glue.sh``): its task's prepared data, the model with its
classification head, and its predictions on a binarised split.
``fairseq-local glue`` (:mod:`fairseq_local_cli.glue`) scores them; the
reproductions call these functions directly."""

import os
from typing import Any, Dict, List, Optional, Tuple

from fairseq_local_data.glue import TASKS, GlueError

# (name of the set, fairseq dev split, fairseq test split) per task.
SETS: Dict[str, List[Tuple[str, Optional[str], Optional[str]]]] = {
    name: ([("MNLI-m", "valid", "test"), ("MNLI-mm", "valid1", "test1"), ("AX", None, "test2")]
           if name == "MNLI" else [(name, "valid", "test")]) for name in TASKS}


def task_data(name: str, data: str) -> str:
    """The TASK-bin folder of task ``name``: ``data`` itself or ``data/NAME-bin``
    (a GlueError if it holds no prepared data)."""
    if not os.path.isdir(os.path.join(data, "input0")) and os.path.isdir(os.path.join(data, f"{name}-bin")):
        data = os.path.join(data, f"{name}-bin")
    if not os.path.isfile(os.path.join(data, "input0", "dict.txt")):
        raise GlueError(f"no prepared {name} data in '{data}' (run scripts/prepare-glue.sh)")
    return data


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


def check_lengths(ds, split: str, max_positions: Any, where: str = "") -> None:
    """A GlueError naming the first example of ``ds`` longer than the model's
    maximum positions (fairseq's sentence_prediction keeps every example
    whole unless fine-tuned with --shorten-method truncate)."""
    import numpy as np

    if not isinstance(max_positions, int):
        return
    sizes = ds.sizes if isinstance(ds.sizes, (list, tuple)) else [ds.sizes]
    longest = np.max(np.stack([np.asarray(s) for s in sizes]), axis=0) if sizes else np.zeros(0)
    too_long = np.nonzero(longest > max_positions)[0]
    if len(too_long):
        i = int(too_long[0])
        more = f" (and {len(too_long) - 1} more)" if len(too_long) > 1 else ""
        raise GlueError(f"{where or split}: row {i + 1}{more} has {int(longest[i])} tokens, more than the "
                        f"model's {max_positions} positions (shorten it, or fine-tune with "
                        f"--shorten-method truncate)")


def predict(model, task, head: str, regression: bool, split: str, batch_size: int = 32,
            where: str = "") -> List[str]:
    """Predictions on the binarised ``split``, in the order of its rows:
    label strings, or STS-B scores back on GLUE's 0-5 scale.  ``where`` names
    the split in errors."""
    import torch
    from fairseq import utils

    task.load_dataset(split)
    ds = task.dataset(split)
    max_positions = utils.resolve_max_positions(task.max_positions(), model.max_positions())
    check_lengths(ds, split, max_positions, where)
    itr = task.get_batch_iterator(
        dataset=ds, max_sentences=batch_size, ignore_invalid_inputs=False, max_positions=max_positions,
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
