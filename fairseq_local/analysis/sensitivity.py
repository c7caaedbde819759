"""Gradient sensitivity statistics (Pande et al. §3.1, Eq. 5-7).

beta[l, i, j] = ||dY[i] / dX[j]||_F is the Jacobian norm of layer l's attention block
(output token i, input token j); it is computed elsewhere.  For a set X of positions,

    gamma_X = mean over query positions i with X_i non-empty of
              (mean over j in X_i of beta[l, i, j]),

per sentence and layer, for X = L (local), S (syntactic) and U (unrelated); see
:mod:`fairseq_local.analysis.relations`.  gamma_X is None when no query has a
non-empty X_i, or for S when the sentence has no syntax.

Plain torch; no fairseq import.
"""

from typing import Dict, List, Optional

import torch
from torch import Tensor

from .bias import format_cell, mean_defined
from .relations import PositionSets, RecordError

__all__ = ["SETS", "sentence_gamma", "SensitivityAccumulator", "sensitivity_table"]

SETS = ("local", "syntactic", "unrelated")


def _gamma(beta: Tensor, allowed: Optional[Tensor]) -> List[Optional[float]]:
    """Eq. 5-7 for one set: beta (L, T, T), allowed bool (T, T) -> one value per layer."""
    layers = beta.shape[0]
    if allowed is None:
        return [None] * layers
    size = allowed.sum(-1)  # (T,)
    rows = size > 0
    if not bool(rows.any()):
        return [None] * layers
    per_row = (beta * allowed).sum(-1)[:, rows] / size[rows].to(beta.dtype)  # (L, rows)
    return [float(v) for v in per_row.mean(-1)]


def sentence_gamma(beta: Tensor, sets: PositionSets) -> Dict[str, List[Optional[float]]]:
    """gamma_local, gamma_syntactic and gamma_unrelated of one sentence.

    Args:
        beta: (L, T, T) Jacobian norms, ``beta[l, i, j]`` of output i on input j.
        sets: the sentence's position sets (rows of non-query positions are empty).

    Returns:
        ``{"local": [...], "syntactic": [...], "unrelated": [...]}``, one float or
        None per layer.
    """
    if beta.dim() != 3 or tuple(beta.shape[1:]) != (sets.length, sets.length):
        raise RecordError(
            f"beta has shape {tuple(beta.shape)}, expected (L, {sets.length}, {sets.length})"
        )
    beta = beta.detach().to(torch.float64)
    return {name: _gamma(beta, getattr(sets, name)) for name in SETS}


class SensitivityAccumulator:
    """Collects the per-sentence gammas of a corpus, in order.

    ``result()`` is ``{"local": [[gamma per sentence] per layer], "syntactic":
    [[...]], "unrelated": [[...]], "sentences": N}`` with None kept where a set is
    empty, so every inner list has N entries.
    """

    def __init__(self) -> None:
        self.layers: Optional[int] = None
        self.values: Dict[str, List[List[Optional[float]]]] = {name: [] for name in SETS}
        self.sentences = 0

    def add(self, beta: Tensor, sets: PositionSets) -> Dict[str, List[Optional[float]]]:
        """Add one sentence (beta (L, T, T) and its position sets); returns its gammas."""
        if self.layers is not None and beta.shape[0] != self.layers:
            raise RecordError(f"beta has {beta.shape[0]} layers, expected {self.layers}")
        gamma = sentence_gamma(beta, sets)
        if self.layers is None:
            self.layers = int(beta.shape[0])
            self.values = {name: [[] for _ in range(self.layers)] for name in SETS}
        for name in SETS:
            for layer, value in enumerate(gamma[name]):
                self.values[name][layer].append(value)
        self.sentences += 1
        return gamma

    def result(self) -> dict:
        """The JSON-ready result (lists of floats and None)."""
        out = {name: [list(v) for v in self.values[name]] for name in SETS}
        out["sentences"] = self.sentences
        return out


def sensitivity_table(result: dict) -> str:
    """A Markdown table: per layer the mean of each gamma over the sentences that have one."""
    lines = [
        "| layer | γ local | γ syntactic | γ unrelated |",
        "|---:|---:|---:|---:|",
    ]
    for layer in range(len(result["local"])):
        cells = [format_cell(mean_defined(result[name][layer]), 4) for name in SETS]
        lines.append(f"| {layer} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
