"""``python -m fairseq_local.cli.check_resume CKPT FAIRSEQ_TRAIN_ARGS...``:
the check of :mod:`fairseq_local.models.resume` made before a script writes
anything: exit 1 with one ``error:`` line if fairseq-train with these
arguments would resume ``CKPT`` as another model, or cannot read it."""

import logging
import sys
from typing import List, Optional

from ..errors import InputError
from ..models.resume import check_resume, model_signature


def main(argv: Optional[List[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    from fairseq import options

    from ..checkpoint_compat import read_checkpoint

    logging.getLogger("fairseq.utils").setLevel(logging.WARNING)  # "--user-dir ... already imported"
    ckpt, train_args = argv[0], argv[1:]
    try:
        saved_cfg, _ = read_checkpoint(ckpt)
    except (OSError, ValueError) as e:
        raise InputError(f"cannot resume from '{ckpt}': {e} (move it away to start the run afresh)") from None
    args = options.parse_args_and_arch(options.get_training_parser(), train_args)
    check_resume(model_signature(saved_cfg), model_signature(args), args, f"'{ckpt}'")
    return 0


if __name__ == "__main__":
    sys.exit(main())
