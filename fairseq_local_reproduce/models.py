"""The reduced scales' shared models, and the rule for how long they train.

Three papers analyse one NMT baseline, config (a): Pande et al. (Tables 1-3,
Figs. 1-3), Voita et al. (Fig. 1, the pruning curve) and Pascual et al.
(Figs. 1-7); and three one BERT-base: Pande et al. (Table 4, Figs. 1-3),
Pascual et al. and Wang et al. (the full model).  At ``tiny`` and ``small``
each is one step whose id starts ``models-SCALE/`` and whose folder is
``RUNS/models-SCALE/``: the first paper that needs it trains it, the next
skips the step (its stamp holds the same command), as the data steps are
shared.

**The plateau rule** (NMT).  Every NMT model trains for the same number of
updates, the scale's budget, chosen from a pilot run in which
the baseline's dev loss had flattened; it validates once an epoch and every
later step reads ``checkpoint_best.pt``, the checkpoint of the lowest dev
loss.  A fixed budget keeps the configurations comparable: stopping each run
on its own noisy dev loss (fairseq ``--patience 5``) stopped one seed of the
tiny baseline at update 4,746 (BLEU 47.1) and let another go on to 6,000
(BLEU 55.4).  Whether each run did reach its plateau is checked, not
assumed: :func:`plateau_of` compares the best dev loss of its last
:data:`WINDOW` validations with the best before them, a run whose loss still
fell by more than :data:`FLAT` is reported as "still falling", and the
reports print the check for every run (:func:`stops_line`), BERT's
pretrainings too, which are not trained to a plateau (:data:`.pande.BERT_MODEL`).
"""

import re
from pathlib import Path
from typing import Dict, List, NamedTuple, Optional

WINDOW = 10   # validations (one an epoch) the plateau check looks back over
FLAT = 0.01   # the largest relative fall of the best dev loss over WINDOW that counts as a plateau
PLATEAU_RULE = (f"trained for the scale's fixed number of updates and read at its lowest dev loss "
                f"(checkpoint_best.pt); at a plateau when its best dev loss fell by less than {FLAT:.0%} over "
                f"its last {WINDOW} epochs")
_VALID = re.compile(r"\| valid on '[^']*' subset \| loss ([0-9.]+) .*?\| num_updates (\d+)")


class Plateau(NamedTuple):
    """How one training ended: its updates, its best dev loss, and the
    relative fall of the best dev loss over the last :data:`WINDOW`
    validations (``fall``; None with fewer than WINDOW + 1)."""

    updates: int
    best: float
    fall: Optional[float]

    @property
    def flat(self) -> bool:
        return self.fall is not None and self.fall < FLAT

    def words(self) -> str:
        """"8,000 updates, best dev loss 2.46, −0.4 % over the last 10 epochs (plateau)"."""
        if self.fall is None:
            return f"{self.updates:,} updates, best dev loss {self.best:.3g} (too few epochs to check the plateau)"
        return (f"{self.updates:,} updates, best dev loss {self.best:.3g}, {-100 * self.fall:+.1f} % over the last "
                f"{WINDOW} epochs ({'plateau' if self.flat else 'still falling'})")


def shared_dir(runs: Path, scale: str) -> Path:
    """The folder of the reduced scale's shared models."""
    return runs / f"models-{scale}"


def shared_id(scale: str, rest: str) -> str:
    """A shared model step's id: ``models-SCALE/REST``."""
    return f"models-{scale}/{rest}"


def budget_flags(updates: int) -> List:
    """fairseq-train's options of the rule: ``updates`` updates, no early stop."""
    return ["--max-update", updates]


def plateau_of(run: Path) -> Optional[Plateau]:
    """The plateau check of the finished training in ``run`` (its
    ``train.log``); None without a finished log or a validation."""
    try:
        text = (run / "train.log").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    if "done training" not in text:
        return None
    valid = [(float(loss), int(n)) for loss, n in _VALID.findall(text)]
    if not valid:
        return None
    losses = [loss for loss, _ in valid]
    best = min(losses)
    fall = None
    if len(losses) > WINDOW:
        before = min(losses[:-WINDOW])
        fall = (before - min(best, before)) / before
    return Plateau(max(n for _, n in valid), best, fall)


def stops_line(runs: Dict[str, Path]) -> str:
    """The plateau check of each named run ("name: 8,000 updates, ...") in
    one line, or "" when none has a finished log."""
    return "; ".join(f"{name}: {p.words()}" for name, run in runs.items() if (p := plateau_of(run)) is not None)
