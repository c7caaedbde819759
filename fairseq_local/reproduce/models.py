"""The reduced scales' shared models, and the rule that ends their training.

Three papers analyse one NMT baseline, config (a): Pande et al. (Tables 1-3,
Figs. 1-3), Voita et al. (Fig. 1, the pruning curve) and Pascual et al.
(Figs. 1-7).  At ``tiny`` and ``small`` it is one model per seed, trained by
one step whose id starts ``models-SCALE/`` into ``RUNS/models-SCALE/``: the
first paper that needs it trains it, the next skips the step (its stamp holds
the same command), as the data steps are shared.

**The plateau rule.**  Every NMT model of the reduced scales validates once an
epoch and stops when its dev loss has not reached a new minimum for
:data:`PATIENCE` validations in a row (fairseq ``--patience``), or at the
scale's cap of updates, whichever comes first.  Every later step reads
``checkpoint_best.pt``, the checkpoint of the lowest dev loss.  Whether a
model stopped on the rule or at the cap is read from its log
(:func:`stop_of`) and printed in the reports.  A resumed run counts its
patience again from the resume (fairseq keeps the best loss in the
checkpoint, not the count), so it trains at most :data:`PATIENCE` more epochs.
"""

import re
from pathlib import Path
from typing import List, Optional, Tuple

PATIENCE = 5  # validations (one an epoch) without a new best dev loss
PLATEAU_RULE = (f"trained until the dev loss had not reached a new minimum for {PATIENCE} epochs in a row "
                "(fairseq --patience), or to the cap of updates; every step reads checkpoint_best.pt")
_EARLY = "early stop since valid performance hasn't improved"
_UPDATES = re.compile(r"num_updates (\d+)")


def shared_dir(runs: Path, scale: str) -> Path:
    """The folder of the reduced scale's shared models."""
    return runs / f"models-{scale}"


def shared_id(scale: str, rest: str) -> str:
    """A shared model step's id: ``models-SCALE/REST``."""
    return f"models-{scale}/{rest}"


def plateau_flags(cap: int) -> List:
    """fairseq-train's options of the plateau rule with a cap of ``cap`` updates."""
    return ["--patience", PATIENCE, "--max-update", cap]


def stop_of(run: Path) -> Optional[Tuple[str, int]]:
    """How the training in ``run`` ended, from its ``train.log``:
    ``("plateau", updates)`` when the plateau rule stopped it, ``("cap",
    updates)`` when it reached the cap; None without a finished log."""
    try:
        text = (run / "train.log").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    updates = [int(u) for u in _UPDATES.findall(text)]
    if not updates or "done training" not in text:
        return None
    return ("plateau" if _EARLY in text else "cap", max(updates))


def stops_line(runs: "dict[str, Path]") -> str:
    """One line of how each named run's training ended (``name: plateau at
    update N`` or ``name: cap of N updates reached``), or "" when none has a log."""
    parts = []
    for name, run in runs.items():
        stop = stop_of(run)
        if stop is not None:
            parts.append(f"{name}: plateau at update {stop[1]}" if stop[0] == "plateau" else
                         f"{name}: cap of {stop[1]} updates reached")
    return "; ".join(parts)
