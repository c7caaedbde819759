"""Attention against Hidden Token Attribution, and relative-position statistics per head
(Pascual et al., "Telling BERT's Full Story", §6-9).

Maps use the attention orientation: ``a[l, h, j, i]`` is the weight of query token j
on key token i, and ``c[l, h, j, i]`` the contribution of input token i to head h's
output at token j (each contribution row sums to 1, Pascual et al. Eq. 1).

- Correlations (Fig. 1 and 6): the Pearson and Spearman correlation of each attention
  row with its contribution row, averaged per head over rows where it is defined;
  against the previous-layer contribution and against the input contribution.
- Relative-position histograms (Fig. 2-3): offset = key position - query position, from
  -(n-1) to n-1; each bin is the sum over query tokens (and sentences) of the value at
  that offset, divided by the number of (query, key) pairs with that offset.
- Centre of mass (Fig. 4-5): sum(offset * hist) / sum(hist) per head, averaged over
  the heads of a layer.
- Mass on special tokens (Fig. 7, vertical heads): per head, the mean over non-special
  query rows (``word_ids != -1``) of the row's sum over special keys (``word_ids == -1``:
  ``<s>``, ``</s>``, a pair's two separator ``</s>``), of attention and of the input
  contribution.
- Own-sentence mass (pairs, Fig. 7's blocks): per head, the mean over the same rows of
  the input contribution's sum over the keys of the query's own sentence, beside the
  mean share of the input's tokens that are of the query's sentence (a uniform row's mass).

numpy, scipy and torch only; no fairseq import.
"""

import math
import warnings
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch
from scipy import stats
from torch import Tensor

from .bias import format_cell, mean_defined
from .relations import RecordError

__all__ = ["row_correlations", "PositionStats", "hta_table", "to_json"]

CONTRIBUTIONS = ("previous", "input")


def _numpy(x: Tensor) -> np.ndarray:
    return x.detach().to(torch.float64).cpu().numpy()


def row_correlations(a: Tensor, c: Tensor) -> Tuple[np.ndarray, np.ndarray]:
    """Pearson and Spearman correlation of every attention row with its contribution row.

    Args:
        a: (L, H, T, T) attention; c: (L, H, T, T) contributions, same orientation.

    Returns:
        (pearson, spearman), each a float64 array (L, H, T): the correlation of
        ``a[l, h, j, :]`` with ``c[l, h, j, :]``; NaN where undefined (a constant row,
        or T < 2).
    """
    if a.shape != c.shape:
        raise RecordError(f"attention {tuple(a.shape)} and contribution {tuple(c.shape)} differ in shape")
    x, y = _numpy(a), _numpy(c)
    if x.shape[-1] < 2:
        nan = np.full(x.shape[:-1], np.nan)
        return nan, nan.copy()
    with warnings.catch_warnings():
        # a constant row has no correlation: scipy warns and returns NaN
        warnings.simplefilter("ignore", stats.ConstantInputWarning)
        warnings.simplefilter("ignore", stats.NearConstantInputWarning)
        pearson = stats.pearsonr(x, y, axis=-1).statistic
        # Spearman's rho is Pearson's r of the ranks (average ranks for ties)
        spearman = stats.pearsonr(
            stats.rankdata(x, axis=-1), stats.rankdata(y, axis=-1), axis=-1
        ).statistic
    return np.asarray(pearson, dtype=np.float64), np.asarray(spearman, dtype=np.float64)


def to_json(array: np.ndarray) -> list:
    """Nested lists of floats, with None for NaN."""
    if array.ndim == 0:
        value = float(array)
        return None if math.isnan(value) else value
    return [to_json(item) for item in array]


class _Histogram:
    """Sums of a map's values per relative offset, and how often each offset occurred."""

    def __init__(self, max_len: int) -> None:
        self.max_len = max_len
        self.sums: Optional[np.ndarray] = None  # (L, H, 2n-1)
        self.counts = np.zeros(2 * max_len - 1, dtype=np.int64)

    def add(self, values: Tensor) -> None:
        """values: (L, H, T, T), row = query, column = key."""
        layers, heads, length, _ = values.shape
        pos = np.arange(length)
        bins = (pos[None, :] - pos[:, None] + self.max_len - 1).reshape(-1)  # key - query
        if self.sums is None:
            self.sums = np.zeros((layers, heads, 2 * self.max_len - 1))
        width = 2 * self.max_len - 1
        rows = layers * heads
        index = (np.arange(rows)[:, None] * width + bins[None, :]).reshape(-1)
        weights = _numpy(values).reshape(-1)
        self.sums += np.bincount(index, weights=weights, minlength=rows * width).reshape(layers, heads, width)
        self.counts += np.bincount(bins, minlength=2 * self.max_len - 1)

    def histogram(self, offsets: np.ndarray) -> Tuple[Optional[np.ndarray], Optional[np.ndarray]]:
        """(L, H, 2n-1) histogram (NaN at offsets never seen) and (L, H) centres of mass."""
        if self.sums is None:
            return None, None
        seen = self.counts > 0
        hist = np.full(self.sums.shape, np.nan)
        hist[..., seen] = self.sums[..., seen] / self.counts[seen]
        mass = hist[..., seen].sum(-1)
        moment = (hist[..., seen] * offsets[seen]).sum(-1)
        with np.errstate(invalid="ignore", divide="ignore"):
            centre = np.where(mass > 0, moment / np.where(mass > 0, mass, 1.0), np.nan)
        return hist, centre


class _RowMass:
    """Per-head sums over query rows of a map's mass on chosen keys, and the rows counted."""

    def __init__(self) -> None:
        self.sums: Optional[np.ndarray] = None  # (L, H) float64
        self.rows = 0

    def add(self, values: Tensor, query: np.ndarray, keys: np.ndarray) -> None:
        """Add ``values[l, h, j, keys[r]].sum()`` of each row j = ``query[r]``.

        Args:
            values: (L, H, T, T), row = query, column = key.
            query: (R,) int64, the query rows counted.
            keys: (R, T) bool, the keys summed in each of those rows.
        """
        x = _numpy(values)
        if self.sums is None:
            self.sums = np.zeros(x.shape[:2])
        self.sums += np.einsum("lhrt,rt->lh", x[:, :, query, :], keys.astype(np.float64))
        self.rows += len(query)

    def mean(self) -> Optional[list]:
        """[[mean per head] per layer], or None when no row was counted."""
        if self.sums is None or self.rows == 0:
            return None
        return to_json(self.sums / self.rows)


def _token_ids(name: str, ids: Optional[Sequence[int]], length: int) -> Optional[np.ndarray]:
    """``ids`` (T,) as an int64 array, checked to have ``length`` entries; None stays None."""
    if ids is None:
        return None
    out = np.asarray(ids, dtype=np.int64).reshape(-1)
    if out.shape != (length,):
        raise RecordError(f"{name} has {out.size} entries, the attention {length} tokens")
    return out


class PositionStats:
    """Per-head correlation and relative-position statistics over a corpus.

    Args:
        max_len: n, the longest sentence (in tokens) that will be added; the offsets
            run from -(n-1) to n-1.
    """

    def __init__(self, max_len: int) -> None:
        if max_len < 1:
            raise ValueError(f"max_len must be at least 1, got {max_len}")
        self.max_len = max_len
        self.offsets = np.arange(-(max_len - 1), max_len)
        self.shape: Optional[Tuple[int, int]] = None
        self.sentences = 0
        # kind -> [pearson sum, pearson count, spearman sum, spearman count], each (L, H)
        self.correlation: Dict[str, List[np.ndarray]] = {}
        self.attention = _Histogram(max_len)
        self.contribution = _Histogram(max_len)
        self.attention_special = _RowMass()
        self.contribution_special = _RowMass()
        self.pairs = False  # a sentence with sentence_ids was added
        self.same_sentence = _RowMass()  # input contribution on the query's own sentence
        self.share_sum = 0.0  # sum over the same rows of |own sentence| / T

    def _check(self, name: str, x: Tensor) -> None:
        if not isinstance(x, Tensor) or x.dim() != 4 or x.shape[-1] != x.shape[-2]:
            shape = tuple(x.shape) if isinstance(x, Tensor) else type(x).__name__
            raise RecordError(f"{name} must be a (L, H, T, T) tensor, got {shape}")

    def _correlate(self, kind: str, attn: Tensor, contrib: Tensor) -> None:
        pearson, spearman = row_correlations(attn, contrib)
        if kind not in self.correlation:
            self.correlation[kind] = [np.zeros(self.shape) for _ in range(4)]
        acc = self.correlation[kind]
        for k, values in enumerate((pearson, spearman)):
            ok = ~np.isnan(values)
            acc[2 * k] += np.where(ok, values, 0.0).sum(-1)
            acc[2 * k + 1] += ok.sum(-1)

    def add(
        self,
        attn: Tensor,
        prev_contrib: Optional[Tensor] = None,
        input_contrib: Optional[Tensor] = None,
        word_ids: Optional[Sequence[int]] = None,
        sentence_ids: Optional[Sequence[int]] = None,
    ) -> None:
        """Add one sentence.

        Args:
            attn: (L, H, T, T) attention, ``attn[l, h, j, i]`` of query j on key i.
            prev_contrib: (L, H, T, T) contributions of the layer's input (Pascual et al.
                Fig. 1), or None.
            input_contrib: (L, H, T, T) contributions of the input embeddings (Fig. 6;
                its histogram is the contribution histogram, Fig. 3), or None.  Rows are
                taken as given, as the histograms take them: :func:`~.contribution.
                input_contribution` has already divided each row by its sum (Eq. 1).
            word_ids: (T,) the word of each token, -1 for a special token; without it
                the sentence adds nothing to the special-token means.
            sentence_ids: (T,) a pair's 0 / 1 per token of sentence A / B (-1 for a
                special token); needs ``word_ids``.
        """
        self._check("attention", attn)
        layers, heads, length, _ = attn.shape
        if length > self.max_len:
            raise RecordError(f"a sentence of {length} tokens is longer than max_len {self.max_len}")
        if self.shape is not None and (layers, heads) != self.shape:
            raise RecordError(
                f"attention has {layers} layers x {heads} heads, expected {self.shape[0]} x {self.shape[1]}"
            )
        named = (("previous-layer contribution", prev_contrib), ("input contribution", input_contrib))
        for name, contrib in named:
            if contrib is not None:
                self._check(name, contrib)
                if contrib.shape != attn.shape:
                    raise RecordError(
                        f"{name} has shape {tuple(contrib.shape)}, attention {tuple(attn.shape)}"
                    )
        words = _token_ids("word_ids", word_ids, length)
        sentences = _token_ids("sentence_ids", sentence_ids, length)
        if sentences is not None and words is None:
            raise RecordError("sentence_ids need word_ids")
        self.shape = (layers, heads)
        for kind, contrib in zip(CONTRIBUTIONS, (prev_contrib, input_contrib)):
            if contrib is not None:
                self._correlate(kind, attn, contrib)
        self.attention.add(attn)
        if input_contrib is not None:
            self.contribution.add(input_contrib)
        self._add_special(attn, input_contrib, words, sentences)
        self.sentences += 1

    def _add_special(self, attn: Tensor, input_contrib: Optional[Tensor],
                     word_ids: Optional[np.ndarray], sentence_ids: Optional[np.ndarray]) -> None:
        """The mass on special tokens and (pairs) on the own sentence, of the rows of
        non-special queries.  attn, input_contrib: (L, H, T, T); the ids (T,) or None."""
        self.pairs |= sentence_ids is not None
        if word_ids is None:
            return
        special = word_ids == -1  # (T,)
        query = np.flatnonzero(~special)  # (R,)
        on_special = np.broadcast_to(special, (len(query), len(special)))  # (R, T)
        self.attention_special.add(attn, query, on_special)
        if input_contrib is None:
            return
        self.contribution_special.add(input_contrib, query, on_special)
        if sentence_ids is not None:
            own = (sentence_ids[None, :] == sentence_ids[query][:, None]) & ~special[None, :]  # (R, T)
            self.same_sentence.add(input_contrib, query, own)
            self.share_sum += float(own.sum()) / len(special)

    def _means(self, kind: str) -> Dict[str, Optional[list]]:
        if kind not in self.correlation:
            return {f"pearson_{kind}": None, f"spearman_{kind}": None, f"rows_{kind}": None}
        p_sum, p_count, s_sum, s_count = self.correlation[kind]
        with np.errstate(invalid="ignore", divide="ignore"):
            pearson = np.where(p_count > 0, p_sum / np.maximum(p_count, 1), np.nan)
            spearman = np.where(s_count > 0, s_sum / np.maximum(s_count, 1), np.nan)
        return {
            f"pearson_{kind}": to_json(pearson),
            f"spearman_{kind}": to_json(spearman),
            f"rows_{kind}": p_count.astype(int).tolist(),
        }

    def result(self) -> dict:
        """The JSON-ready statistics (lists; None for undefined values).

        Keys: ``sentences``, ``max_len``, ``layers``, ``heads``; ``pearson_previous``,
        ``spearman_previous``, ``pearson_input``, ``spearman_input`` ([[mean per head]
        per layer], None when that contribution was never given) and ``rows_previous``,
        ``rows_input`` (rows with a defined correlation per head); ``offsets``;
        ``attention_histogram``, ``contribution_histogram`` ([[[bin per offset] per
        head] per layer]); ``attention_offset_counts``, ``contribution_offset_counts``
        ((query, key) pairs per offset); ``attention_centre_per_head``,
        ``contribution_centre_per_head`` ([[...] per layer]); ``attention_centre``,
        ``contribution_centre`` ([mean over heads per layer]).

        ``attention_special``, ``contribution_special`` ([[mean per head] per layer],
        None without rows): the mean over the non-special query rows j (``word_ids[j]
        != -1``) of every sentence of sum_{i: word_ids[i] == -1} a[l, h, j, i], of the
        attention and of the input contribution (rows as given).  Pairs only (a
        sentence was added with ``sentence_ids``): ``contribution_same_sentence``, the
        mean over the same rows of the input contribution's sum over the keys i with
        ``sentence_ids[i] == sentence_ids[j]``; and ``same_sentence_share``, the mean
        over those rows of |{i : sentence_ids[i] == sentence_ids[j]}| / T, T counting
        every token of the input, special ones included: the mass a row spread
        uniformly over the T tokens would put on the own sentence (both None without
        input contribution).
        """
        layers, heads = self.shape if self.shape is not None else (0, 0)
        out = {"sentences": self.sentences, "max_len": self.max_len, "layers": layers, "heads": heads}
        for kind in CONTRIBUTIONS:
            out.update(self._means(kind))
        out["offsets"] = self.offsets.tolist()
        for name, acc in (("attention", self.attention), ("contribution", self.contribution)):
            hist, centre = acc.histogram(self.offsets)
            out[f"{name}_histogram"] = None if hist is None else to_json(hist)
            out[f"{name}_offset_counts"] = acc.counts.tolist()
            out[f"{name}_centre_per_head"] = None if centre is None else to_json(centre)
            out[f"{name}_centre"] = (
                None if centre is None else [mean_defined(row) for row in to_json(centre)]
            )
        out["attention_special"] = self.attention_special.mean()
        out["contribution_special"] = self.contribution_special.mean()
        if self.pairs:
            rows = self.same_sentence.rows
            out["contribution_same_sentence"] = self.same_sentence.mean()
            out["same_sentence_share"] = self.share_sum / rows if rows else None
        return out


def hta_table(result: dict) -> str:
    """A Markdown table of :meth:`PositionStats.result`: per layer the mean (over heads)
    Pearson and Spearman correlation of attention with the previous-layer and the input
    contribution, and the centre of mass of attention and of input contribution."""
    columns = ["pearson_previous", "spearman_previous", "pearson_input", "spearman_input"]
    lines = [
        "| layer | Pearson (previous) | Spearman (previous) | Pearson (input) | Spearman (input) "
        "| attention centre | contribution centre |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for layer in range(result["layers"]):
        cells = [
            format_cell(None if result[key] is None else mean_defined(result[key][layer]))
            for key in columns
        ]
        for key in ("attention_centre", "contribution_centre"):
            cells.append(format_cell(None if result[key] is None else result[key][layer]))
        lines.append(f"| {layer} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
