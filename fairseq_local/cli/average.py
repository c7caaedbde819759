"""``fairseq-local average``: average the parameters of a run's last N
checkpoints (Vaswani et al. 2017, §6.1), as ``scripts/evaluate-wmt14.sh
--average N`` does before translating.

The checkpoints are the run's ``checkpoint*.pt`` files other than
``checkpoint_best.pt``, ``checkpoint_last.pt`` and averages
(``checkpoint_avgN.pt``), ordered by the number of updates they were saved at
(epoch checkpoints ``checkpointE.pt`` and interval checkpoints
``checkpoint_E_U.pt`` alike). The output is the newest one with its model
parameters replaced by the mean of the N (floating-point tensors; others are
the newest's), so its cfg, arch and dictionary settings are the newest's, and
fairseq-generate reads it as any checkpoint. Like fairseq's
``scripts/average_checkpoints.py``, which is not installed with the wheel, but
it also reads checkpoints on torch >= 2.6.
"""

import re
import sys
from collections import OrderedDict
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import torch

from .common import command_parser

_SKIP = re.compile(r"^checkpoint_(best|last|avg\d+)\.pt$")


def _load(path: Path) -> Dict[str, Any]:
    """A fairseq checkpoint (pickled config objects included), memory-mapped
    when torch can, so that listing many checkpoints stays cheap."""
    try:
        return torch.load(str(path), map_location="cpu", weights_only=False, mmap=True)
    except RuntimeError:  # an old, non-zip checkpoint cannot be memory-mapped
        return torch.load(str(path), map_location="cpu", weights_only=False)


def _num_updates(state: Dict[str, Any]) -> int:
    history = state.get("optimizer_history") or [{}]
    return int(history[-1].get("num_updates", 0))


def last_checkpoints(run_dir: Path, num: int) -> List[Tuple[int, Path]]:
    """(updates, path) of the ``num`` newest checkpoints of ``run_dir``, newest
    first. Raises ValueError if there are fewer than ``num``."""
    found = []
    for path in run_dir.glob("checkpoint*.pt"):
        if not _SKIP.search(path.name):
            found.append((_num_updates(_load(path)), path))
    found.sort(key=lambda item: (item[0], item[1].stat().st_mtime), reverse=True)
    if len(found) < num:
        raise ValueError(f"cannot average {num} checkpoints: {run_dir} has {len(found)} "
                         "(checkpoint_best.pt and checkpoint_last.pt do not count)")
    return found[:num]


def average(paths: List[Path]) -> Dict[str, Any]:
    """The first checkpoint of ``paths`` with its parameters averaged over all."""
    newest = _load(paths[0])
    sums: "OrderedDict[str, torch.Tensor]" = OrderedDict(
        (k, v.double().clone()) for k, v in newest["model"].items() if v.is_floating_point())
    for path in paths[1:]:
        model = _load(path)["model"]
        if set(model) != set(newest["model"]):
            raise ValueError(f"{path} has other parameters than {paths[0]}: not the same model")
        for key in sums:
            sums[key] += model[key].double()
    averaged = OrderedDict()
    for key, value in newest["model"].items():
        averaged[key] = (sums[key] / len(paths)).to(value.dtype) if key in sums else value.clone()
    newest["model"] = averaged
    return newest


DETAILS = """\
Averages the N checkpoints of RUN_DIR saved at the most updates
(checkpoint*.pt other than checkpoint_best.pt, checkpoint_last.pt and
checkpoint_avgN.pt; Vaswani et al. 2017, §6.1). The output is the newest
of them with its floating-point parameters replaced by the mean, so
fairseq-generate reads it as any checkpoint (scripts/evaluate-wmt14.sh
--average N)."""


def build_parser():
    parser = command_parser("average", DETAILS)
    parser.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="the run's --save-dir")
    parser.add_argument("--num", type=int, required=True, metavar="N", help="how many of the newest checkpoints")
    parser.add_argument("--output", type=Path, required=True, metavar="FILE", help="the averaged checkpoint")
    return parser


def main(argv: Optional[List[str]] = None) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.num < 1:
        parser.error("--num must be at least 1")
    if not args.run_dir.is_dir():
        parser.error(f"no run directory '{args.run_dir}'")
    try:
        chosen = last_checkpoints(args.run_dir, args.num)
    except ValueError as e:
        sys.exit(f"error: {e}")
    print("averaging " + ", ".join(f"{p.name} ({u} updates)" for u, p in chosen), file=sys.stderr)
    state = average([p for _, p in chosen])
    tmp = args.output.with_name(args.output.name + ".tmp")
    torch.save(state, str(tmp))
    tmp.replace(args.output)


if __name__ == "__main__":
    main()
