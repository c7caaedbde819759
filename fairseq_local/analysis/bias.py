"""Locality and non-local syntactic attention bias of every head (Pande et al. §3.2, Eq. 8).

For a head h, a query position i and a set X_i of key positions,

    a_h(i, X) = (sum_{j in X_i} alpha_h[i, j] / |X_i|) / (sum_{j < T} alpha_h[i, j] / T),

the mean weight on X_i relative to the mean weight on all T positions: a head that
attends uniformly scores exactly 1.  a_h(i, X) is undefined (skipped) when X_i is
empty or the row sums to 0.  A sentence's score is the mean over its defined i; the
corpus score is the mean over sentences with a defined score.  X is L_i (locality)
or S_i (syntactic), see :mod:`fairseq_local.analysis.relations`.

Plain torch; no fairseq import.
"""

import math
from typing import Iterable, List, Optional

import torch
from torch import Tensor
from tqdm import tqdm

from .relations import RecordError, position_sets

__all__ = ["sentence_bias", "bias_scores", "bias_table", "mean_defined", "format_cell"]


def sentence_bias(attn: Tensor, allowed: Tensor, queries: Tensor) -> Tensor:
    """Eq. 8 of Pande et al. averaged over the query positions of one sentence.

    Args:
        attn: (L, H, T, T) attention weights, ``attn[l, h, i, j]`` of query i on key j.
        allowed: bool (T, T), ``allowed[i, j]`` iff j is in X_i.
        queries: bool (T,), the query positions i.

    Returns:
        float64 (L, H): the mean of a_h(i, X) over the queries i where it is
        defined (X_i non-empty, row sum > 0); NaN where no i is defined.
    """
    a = attn.detach().to(torch.float64)
    length = a.shape[-1]
    allowed = allowed.to(a.device)
    size = allowed.sum(-1).to(torch.float64)  # (T,) |X_i|
    total = a.sum(-1)  # (L, H, T)
    inside = (a * allowed).sum(-1)  # (L, H, T)
    defined = (queries.to(a.device) & (size > 0)) & (total > 0)  # (L, H, T)
    # (inside / |X|) / (total / T), written as one quotient
    ratio = (inside * length) / torch.where(defined, total * size, torch.ones_like(total))
    ratio = torch.where(defined, ratio, torch.zeros_like(ratio))
    count = defined.sum(-1)
    score = ratio.sum(-1) / count.clamp(min=1)
    return torch.where(count > 0, score, torch.full_like(score, math.nan))


class _Mean:
    """Running (L, H) means that skip NaN entries."""

    def __init__(self) -> None:
        self.total: Optional[Tensor] = None
        self.count: Optional[Tensor] = None

    def add(self, values: Tensor) -> None:
        ok = ~torch.isnan(values)
        if self.total is None:
            self.total = torch.zeros_like(values)
            self.count = torch.zeros(values.shape, dtype=torch.long)
        self.total += torch.where(ok, values, torch.zeros_like(values))
        self.count += ok

    def lists(self, layers: int, heads: int) -> List[List[Optional[float]]]:
        if self.total is None:
            return [[None] * heads for _ in range(layers)]
        mean = self.total / self.count.clamp(min=1)
        return [
            [float(mean[l, h]) if self.count[l, h] > 0 else None for h in range(heads)]
            for l in range(layers)
        ]


def bias_scores(records: Iterable[dict], progress: bool = False) -> dict:
    """Corpus locality and syntactic bias scores of every layer and head.

    Args:
        records: sentence records with ``attn`` (L, H, T, T), all with the same L and H.
        progress: show a tqdm progress bar.

    Returns:
        ``{"local": [[score per head] per layer], "syntactic": [[...] per layer],
        "sentences": N}``, scores as floats or None where undefined (every
        syntactic score is None when no record has ``heads``); N = records read.

    Raises:
        RecordError: a malformed record (the message names it) or no records.
    """
    local, syntactic = _Mean(), _Mean()
    shape = None
    count = 0
    total = len(records) if hasattr(records, "__len__") else None
    for index, record in enumerate(
        tqdm(records, total=total, disable=not progress, desc="bias", unit="sentence")
    ):
        try:
            if isinstance(record, dict) and "attn" not in record:
                raise RecordError("missing key 'attn'")
            sets = position_sets(record)
            attn = record["attn"]
            if shape is not None and tuple(attn.shape[:2]) != shape:
                raise RecordError(
                    f"'attn' has {attn.shape[0]} layers x {attn.shape[1]} heads, "
                    f"expected {shape[0]} x {shape[1]} as in the first record"
                )
        except RecordError as err:
            raise RecordError(f"record {index}: {err}") from None
        shape = tuple(attn.shape[:2])
        local.add(sentence_bias(attn, sets.local, sets.queries))
        if sets.syntactic is not None:
            syntactic.add(sentence_bias(attn, sets.syntactic, sets.queries))
        count += 1
    if shape is None:
        raise RecordError("no records")
    layers, heads = shape
    return {
        "local": local.lists(layers, heads),
        "syntactic": syntactic.lists(layers, heads),
        "sentences": count,
    }


def mean_defined(values: Iterable[Optional[float]]) -> Optional[float]:
    """The mean of the non-None values, or None when there are none."""
    kept = [v for v in values if v is not None]
    return sum(kept) / len(kept) if kept else None


def format_cell(value: Optional[float], digits: int = 3) -> str:
    """A table cell: the value with ``digits`` decimals, or an en dash for None."""
    return "–" if value is None else f"{value:.{digits}f}"


def _above(row: List[Optional[float]], threshold: float) -> str:
    heads = [h for h, v in enumerate(row) if v is not None and v > threshold]
    if all(v is None for v in row):
        return "–"
    names = ", ".join(f"h{h}" for h in heads)
    return f"{len(heads)}/{len(row)}" + (f" ({names})" if heads else "")


def bias_table(scores: dict, threshold: float = 3.0) -> str:
    """A Markdown table of :func:`bias_scores`: per layer the mean score over its heads
    (locality, syntactic) and the heads scoring above ``threshold``."""
    lines = [
        f"| layer | mean locality | mean syntactic | locality > {threshold:g} | syntactic > {threshold:g} |",
        "|---:|---:|---:|:---|:---|",
    ]
    for layer, (loc, syn) in enumerate(zip(scores["local"], scores["syntactic"])):
        lines.append(
            f"| {layer} | {format_cell(mean_defined(loc))} | {format_cell(mean_defined(syn))} "
            f"| {_above(loc, threshold)} | {_above(syn, threshold)} |"
        )
    return "\n".join(lines) + "\n"
