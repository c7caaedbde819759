"""``python -m fairseq_local.cli.check_resume CKPT FAIRSEQ_TRAIN_ARGS...``:
the check of :mod:`fairseq_local.models.resume` made before a script writes
anything: exit 1 with one ``error:`` line if fairseq-train with these
arguments would resume ``CKPT`` as another model, or cannot read it."""

import logging
import sys
from typing import List, Optional

from ..errors import InputError
from ..models.resume import check_resume, model_signature, saved_signature

PREFIXES = ("encoder.", "encoder.sentence_encoder.")  # where the NMT and RoBERTa encoders save theirs


def main(argv: Optional[List[str]] = None) -> int:
    """Exit status 0 if the resume is safe; raises a one-line error if not."""
    argv = list(sys.argv[1:] if argv is None else argv)
    from fairseq import options

    from ..checkpoint_compat import check_checkpoint, load_torch_file, model_options

    logging.getLogger("fairseq.utils").setLevel(logging.WARNING)  # "--user-dir ... already imported"
    ckpt, train_args = argv[0], argv[1:]
    try:
        state = load_torch_file(ckpt, mmap=True)
        check_checkpoint(ckpt, state)
    except (OSError, ValueError) as e:
        raise InputError(f"cannot resume from '{ckpt}': {e} (move it away to start the run afresh)") from None
    args = options.parse_args_and_arch(options.get_training_parser(), train_args)
    # The signature the encoder saved, as the plugin compares it; from the
    # saved options for checkpoints written before signatures.
    saved = next(filter(None, (saved_signature(state["model"], p) for p in PREFIXES)), None)
    if saved is None:
        saved = model_signature(model_options(state))
    check_resume(saved, model_signature(args), args, f"'{ckpt}'")
    return 0


if __name__ == "__main__":
    sys.exit(main())
