"""``fairseq-local check-resume CKPT FAIRSEQ_TRAIN_ARGS...`` (also ``python -m
fairseq_local_cli.check_resume``): the check of :mod:`fairseq_local.models.resume` made before a script writes
anything: exit 1 with one ``error:`` line if fairseq-train with these
arguments would resume ``CKPT`` as another model, or cannot read it.  An
unreadable ``checkpoint_last.pt`` is first replaced by the run's newest
readable checkpoint, with one ``note:`` line (:mod:`fairseq_local.recover`)."""

import argparse
import logging
import sys
from pathlib import Path
from typing import List, Optional

from fairseq_local.checkpoint_compat import Checkpoint
from fairseq_local.errors import InputError
from fairseq_local.models.resume import check_resume, model_signature
from fairseq_local.recover import LAST, recover_last
from .common import command_parser

DETAILS = """
Made by the training scripts before they write anything (scripts/lib.sh):
exit status 0 if fairseq-train with FAIRSEQ_TRAIN_ARGS would resume CKPT as
the same model (its arch, attention layout and learned head kinds:
e.g. Pande et al.'s band heads are not resumed as all-global ones), else 1
with one error: line naming what differs.  An unreadable checkpoint_last.pt
is first replaced by the run's newest readable checkpoint (one note: line).
"""


def main(argv: Optional[List[str]] = None) -> int:
    """Exit status 0 if the resume is safe; raises a one-line error if not."""
    p = command_parser("check-resume", DETAILS)
    p.add_argument("checkpoint", metavar="CKPT", help="the checkpoint fairseq-train would resume")
    p.add_argument("train_args", nargs=argparse.REMAINDER, metavar="FAIRSEQ_TRAIN_ARGS",
                   help="the arguments of fairseq-train")
    a = p.parse_args(argv)
    from fairseq import options

    logging.getLogger("fairseq.utils").setLevel(logging.WARNING)  # "--user-dir ... already imported"
    path, train_args = a.checkpoint, a.train_args
    try:
        ckpt = Checkpoint.read(path)
    except (OSError, ValueError) as e:
        ckpt = _recovered(Path(path), e)
    args = options.parse_args_and_arch(options.get_training_parser(), train_args)
    # The signature the encoder saved, as the plugin compares it; from the
    # saved options for checkpoints written before signatures.
    saved = ckpt.signature()
    if saved is None:
        saved = model_signature(ckpt.options("model"))
    check_resume(saved, model_signature(args), args, f"'{path}'")
    return 0


def _recovered(path: Path, error: Exception) -> Checkpoint:
    """The run's newest readable checkpoint, made ``checkpoint_last.pt``
    (:func:`fairseq_local.recover.recover_last`) when ``path`` is an
    unreadable ``checkpoint_last.pt``: a job killed while fairseq wrote it."""
    reason = str(error).splitlines()[0]
    if path.name != LAST or not path.is_file():
        raise InputError(f"cannot resume from '{path}': {reason} (move it away to start the run afresh)")
    try:
        used, updates, kept = recover_last(path.parent)
    except FileNotFoundError as e:
        raise InputError(f"cannot resume from '{path}': {reason}, and {e} (move it away to start the run "
                         "afresh)") from None
    print(f"note: '{path}' cannot be read (a job killed while writing it?): kept as '{kept.name}'; resuming from "
          f"'{used.name}' (update {updates:,}), the run's newest readable checkpoint", file=sys.stderr)
    return Checkpoint.read(str(path))


if __name__ == "__main__":
    from .main import main as cli_main

    sys.exit(cli_main(["check-resume", *sys.argv[1:]]))
