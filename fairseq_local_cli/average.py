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

from fairseq_local.checkpoint_compat import Checkpoint
from fairseq_local.errors import InputError
from fairseq_local.outputs import Output, add_force_option, check_outputs, checkpoint_marked, save_torch
from .common import command_parser

_SKIP = re.compile(r"^checkpoint_(best|last|avg\d+)\.pt$")
# Top-level key of an averaged checkpoint: the names of the checkpoints it
# averages.  It marks the file as this command's output (replaced by a re-run
# without --force, never itself averaged); fairseq ignores unknown keys.
MARKER = "averaged_from"


# Whether a file is a checkpoint written by this command (it has
# :data:`MARKER`); judged from the strings of its pickle, without unpickling
# it (it may be a file found at the output path).
is_average = checkpoint_marked(MARKER)


def _legacy_average(path: Path, run_dir: Path) -> bool:
    """Whether ``path`` is ``RUN_DIR/checkpoint_avgN.pt``, the name under
    which scripts/evaluate-wmt14.sh keeps this command's output (also one
    written before averages carried :data:`MARKER`)."""
    try:
        return bool(re.fullmatch(r"checkpoint_avg\d+\.pt", path.name)) and path.parent.samefile(run_dir)
    except OSError:
        return False


def check_same_signature(ckpt: Checkpoint, newest: Checkpoint) -> None:
    """:class:`InputError` (one line, naming both files and the differing
    options) if the two checkpoints' encoders saved different signatures:
    fixed-mask archs share parameter names and shapes, so the tensors alone
    cannot tell them apart.  A checkpoint without a signature is not checked."""
    from fairseq_local.models.resume import differences

    mine, theirs = ckpt.signature(), newest.signature()
    if mine is None or theirs is None:
        return
    diff = differences(mine, theirs)
    if diff:
        raise InputError(f"{ckpt.path} and {newest.path} are checkpoints of different models "
                         f"({'; '.join(diff)}, the first's vs the second's): not the same model")


def candidates(run_dir: Path) -> List[Path]:
    """The run's ``checkpoint*.pt`` files that may be averaged, by name only
    (not best, last or ``checkpoint_avgN.pt``)."""
    return sorted(p for p in run_dir.glob("checkpoint*.pt") if not _SKIP.search(p.name))


def last_checkpoints(run_dir: Path, num: int) -> List[Tuple[int, Path]]:
    """(updates, path) of the ``num`` newest checkpoints of ``run_dir``, newest
    first; averages written by this command (:data:`MARKER`) do not count.
    Raises :class:`InputError` if there are fewer than ``num`` or one cannot be read."""
    found = []
    for path in candidates(run_dir):
        ckpt = Checkpoint.read(path)  # memory-mapped: listing many checkpoints reads no tensor data
        if MARKER not in ckpt.state:
            found.append((ckpt.num_updates, path))
    found.sort(key=lambda item: (item[0], item[1].stat().st_mtime), reverse=True)
    if len(found) < num:
        raise InputError(f"cannot average {num} checkpoints: {run_dir} has {len(found)} "
                         "(checkpoint_best.pt, checkpoint_last.pt and averages do not count)")
    return found[:num]


def average(paths: List[Path]) -> Dict[str, Any]:
    """The first checkpoint of ``paths`` with its floating-point parameters
    averaged over all; other tensors and non-tensor entries (a module's
    ``_extra_state``) are the first's, unchanged.  It carries :data:`MARKER`.
    Raises :class:`InputError` for checkpoints of different models: other
    parameter names or shapes, or other saved signatures (arch, layout, mask
    options; :func:`check_same_signature`)."""
    newest = Checkpoint.read(paths[0])
    tensors = {k: v for k, v in newest.model.items() if isinstance(v, torch.Tensor)}
    sums: "OrderedDict[str, torch.Tensor]" = OrderedDict(
        (k, v.double().clone()) for k, v in tensors.items() if v.is_floating_point())
    for path in paths[1:]:
        ckpt = Checkpoint.read(path)
        check_same_signature(ckpt, newest)
        other = {k: v for k, v in ckpt.model.items() if isinstance(v, torch.Tensor)}
        if set(other) != set(tensors):
            key = sorted(set(other) ^ set(tensors))[0]
            raise InputError(f"{path} has other parameters than {paths[0]} (e.g. '{key}'): not the same model")
        for key in sums:
            if other[key].shape != sums[key].shape:
                raise InputError(f"{path} has '{key}' of shape {tuple(other[key].shape)}, {paths[0]} of shape "
                                 f"{tuple(sums[key].shape)}: not the same model")
            sums[key] += other[key].double()
    averaged = OrderedDict()
    for key, value in newest.model.items():
        if key in sums:
            averaged[key] = (sums[key] / len(paths)).to(value.dtype)
        else:
            averaged[key] = value.clone() if isinstance(value, torch.Tensor) else value
    state = newest.state
    state["model"] = averaged
    state[MARKER] = [p.name for p in paths]
    return state


DETAILS = """\
Averages the N checkpoints of RUN_DIR saved at the most updates
(checkpoint*.pt other than checkpoint_best.pt, checkpoint_last.pt,
checkpoint_avgN.pt and earlier averages; Vaswani et al. 2017, §6.1). The
output is the newest of them with its floating-point parameters replaced by
the mean, so fairseq-generate reads it as any checkpoint
(scripts/evaluate-wmt14.sh --average N). It records the checkpoints it
averages (key 'averaged_from'); it never replaces one of them, and replaces
an existing file only if it is an earlier average, or with --force."""


def build_parser():
    parser = command_parser("average", DETAILS)
    parser.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="the run's --save-dir")
    parser.add_argument("--num", type=int, required=True, metavar="N", help="how many of the newest checkpoints")
    parser.add_argument("--output", type=Path, required=True, metavar="FILE", help="the averaged checkpoint")
    add_force_option(parser)
    return parser


def main(argv: Optional[List[str]] = None) -> None:
    """Run ``fairseq-local average``; bad files raise :class:`InputError` or
    :class:`~fairseq_local.outputs.OutputError` (one line from the CLI)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.num < 1:
        parser.error("--num must be at least 1")
    if not args.run_dir.is_dir():
        parser.error(f"no run directory '{args.run_dir}'")
    output = Output(args.output, "averaged checkpoint", ours=lambda path: is_average(path) or _legacy_average(
        path, args.run_dir), checkpoint=True)
    # By name first: the output is never one of the run's checkpoints (not
    # even one that would not be chosen), unless it is an earlier average.
    check_outputs([output], inputs=[p for p in candidates(args.run_dir) if not is_average(p)], force=args.force)
    chosen = last_checkpoints(args.run_dir, args.num)
    state = average([p for _, p in chosen])  # checks that they are one model before anything is printed
    save_torch(state, args.output)
    print("averaged " + ", ".join(f"{p.name} ({u} updates)" for u, p in chosen) + f" into {args.output}",
          file=sys.stderr)


if __name__ == "__main__":
    from .main import main as cli_main

    sys.exit(cli_main(["average", *sys.argv[1:]]))
