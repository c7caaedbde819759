"""Resuming after a preemption: ``checkpoint_last.pt`` unreadable, another
checkpoint of the run whole.

fairseq saves a checkpoint under its first name atomically (a temporary
file, then a rename) and then *copies* it to its other names
(``checkpoint_best.pt``, ``checkpoint_last.pt``).  A job killed during that
copy leaves ``checkpoint_last.pt`` truncated beside a complete copy.  The
plugin makes that copy atomic
(:func:`fairseq_local.checkpoint_compat.atomic_copies`), and the training
scripts recover runs broken before it (:func:`recover_last`): the broken file
is kept aside and the newest readable checkpoint becomes
``checkpoint_last.pt``.
"""

import os
import re
from pathlib import Path
from typing import List, Optional, Tuple

from .checkpoint_compat import Checkpoint, atomic_copy

LAST = "checkpoint_last.pt"
_CKPT = re.compile(r"checkpoint(\d+|_\d+_\d+|_best)\.pt$")


def _readable(path: Path) -> Optional[int]:
    """The update count of the checkpoint at ``path``, None if unreadable."""
    try:
        return Checkpoint.read(str(path)).num_updates
    except (OSError, ValueError):  # truncated, not a checkpoint, refused (InputError): not a candidate
        return None


def recover_last(save_dir: Path) -> Tuple[Path, int, Path]:
    """Replace an unreadable ``save_dir/checkpoint_last.pt`` by the run's
    newest readable checkpoint (most updates; an epoch checkpoint before
    ``checkpoint_best.pt`` on a tie).  Returns (the checkpoint used, its
    updates, where the broken file was kept); raises FileNotFoundError if no
    checkpoint of the run can be read."""
    save_dir = Path(save_dir)
    found: List[Tuple[int, int, Path]] = []
    for p in save_dir.iterdir():
        if _CKPT.fullmatch(p.name) and p.is_file():
            updates = _readable(p)
            if updates is not None:
                found.append((updates, 0 if p.name == "checkpoint_best.pt" else 1, p))
    if not found:
        raise FileNotFoundError(f"no other checkpoint in '{save_dir}' can be read")
    updates, _, best = max(found)
    kept = save_dir / f"{LAST}.unreadable"
    k = 1
    while kept.exists():
        k += 1
        kept = save_dir / f"{LAST}.unreadable-{k}"
    os.replace(save_dir / LAST, kept)
    atomic_copy(str(best), str(save_dir / LAST), overwrite=True)
    return best, updates, kept
