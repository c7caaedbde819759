"""``python -m fairseq_local.cli.check_resume CKPT FAIRSEQ_TRAIN_ARGS...``:
the check of :mod:`fairseq_local.models.resume` made before a script writes
anything: exit 1 with one ``error:`` line if fairseq-train with these
arguments would resume ``CKPT`` as another model, or cannot read it."""

import logging
import sys
from typing import List, Optional

from ..checkpoint_compat import Checkpoint
from ..errors import InputError
from ..models.resume import check_resume, model_signature


def main(argv: Optional[List[str]] = None) -> int:
    """Exit status 0 if the resume is safe; raises a one-line error if not."""
    argv = list(sys.argv[1:] if argv is None else argv)
    from fairseq import options

    logging.getLogger("fairseq.utils").setLevel(logging.WARNING)  # "--user-dir ... already imported"
    path, train_args = argv[0], argv[1:]
    try:
        ckpt = Checkpoint.read(path)
    except (OSError, ValueError) as e:
        raise InputError(f"cannot resume from '{path}': {e} (move it away to start the run afresh)") from None
    args = options.parse_args_and_arch(options.get_training_parser(), train_args)
    # The signature the encoder saved, as the plugin compares it; from the
    # saved options for checkpoints written before signatures.
    saved = ckpt.signature()
    if saved is None:
        saved = model_signature(ckpt.options("model"))
    check_resume(saved, model_signature(args), args, f"'{path}'")
    return 0


if __name__ == "__main__":
    sys.exit(main())
