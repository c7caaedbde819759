"""BLEU per test sentence, so that a corpus BLEU can be resampled: the
sufficient statistics sacreBLEU sums over a corpus (hypothesis and reference
length, then matches and totals of 1- to 4-grams), one row a sentence, read
from the ``SUBSET.hyp`` / ``SUBSET.ref`` files that ``scripts/generate.sh``
keeps.  The reports' paired bootstraps over test sentences recompute corpus
BLEU on every resample from these rows (:mod:`.verdicts`)."""

from functools import lru_cache
from pathlib import Path
from typing import Optional, Sequence

import numpy as np


@lru_cache(maxsize=1)
def _bleu():
    from sacrebleu.metrics import BLEU

    return BLEU()  # sacreBLEU's defaults, as scripts/generate.sh scores (13a, exp smoothing)


def sentence_stats(hyps: Sequence[str], refs: Sequence[str]) -> np.ndarray:
    """(N, 10) statistics, one row per sentence."""
    if len(hyps) != len(refs):
        raise ValueError(f"{len(hyps)} hypotheses for {len(refs)} references")
    return np.asarray(_bleu()._extract_corpus_statistics(list(hyps), [list(refs)]), dtype=np.int64)


def corpus_bleu(stats: np.ndarray) -> float:
    """Corpus BLEU from (N, 10) sentence statistics or their sum (10,)."""
    stats = np.asarray(stats)
    total = stats.sum(0) if stats.ndim == 2 else stats
    return float(_bleu()._compute_score_from_stats([int(x) for x in total]).score)


def read_stats(hyp: Path, ref: Path) -> Optional[np.ndarray]:
    """The (N, 10) statistics of ``hyp`` against ``ref``, lines split at
    "\\n" only as sacreBLEU reads them; None when either file is missing or
    unreadable, or they differ in length."""
    try:
        hyps, refs = (Path(p).read_text(encoding="utf-8").split("\n") for p in (hyp, ref))
    except (OSError, UnicodeDecodeError):
        return None
    hyps, refs = (x[:-1] if x and x[-1] == "" else x for x in (hyps, refs))
    if not hyps or len(hyps) != len(refs):
        return None
    return sentence_stats(hyps, refs)
