"""Fixed sparse patterns given by a rule on the offset or on the positions:
SparseBERT (Shi et al. 2021, §3.3, §4.2, Table 3) and Adaptive Axis
Attention (Wang et al. 2022, §2.2, Eq. 5–8)."""

from dataclasses import dataclass
from typing import Sequence, Tuple

import torch

from .base import HeadMask, RelativeMask, constant

@dataclass(frozen=True)
class DiagonalMask(RelativeMask):
    """|i − j| ∈ ``offsets`` (Adaptive Axis Attention, Eq. 6); offsets are kept sorted, unique."""

    offsets: Tuple[int, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "offsets", tuple(sorted(set(self.offsets))))

    def allows(self, d: torch.Tensor) -> torch.Tensor:
        return torch.isin(d.abs(), constant(self.offsets, d.device))

    def __str__(self) -> str:
        return f"diagonal-{_fmt_set(self.offsets)}"


@dataclass(frozen=True)
class NoDiagMask(RelativeMask):
    """i ≠ j: SparseBERT's "no diag-attention" (SparseBERT, §3.3)."""

    def allows(self, d: torch.Tensor) -> torch.Tensor:
        return d != 0

    def __str__(self) -> str:
        return "no-diag"


@dataclass(frozen=True)
class LogSparseMask(RelativeMask):
    """i = j or |i − j| = 2^k, k ≥ 0 (LogSparse, SparseBERT Fig. 1(b), made symmetric)."""

    def allows(self, d: torch.Tensor) -> torch.Tensor:
        a = d.abs()
        return (a & (a - 1)) == 0  # true for a = 0 and for the powers of two

    def __str__(self) -> str:
        return "logsparse"


@dataclass(frozen=True)
class StridedMask(RelativeMask):
    """|i − j| ≤ L or (i − j) mod L = 0 (Sparse Transformer, SparseBERT Fig. 1(c))."""

    stride: int

    def allows(self, d: torch.Tensor) -> torch.Tensor:
        a = d.abs()
        return (a <= self.stride) | (a % self.stride == 0)

    def __str__(self) -> str:
        return f"strided-{self.stride}"


@dataclass(frozen=True)
class PositionMask(HeadMask):
    """A mask given by a rule on the real-token positions (i, j) and length n.

    Not relative: built per batch from the (B, T) positions of
    :func:`real_positions`.  Pad positions (−1) are never allowed."""

    def dense(self, pos_q: torch.Tensor, pos_k: torch.Tensor) -> torch.Tensor:
        """pos_q (B, T), pos_k (B, S) -> (B, T, S); or (T,), (S,) -> (T, S).

        n, the sentence's real length, is max(pos_k) + 1 per sentence."""
        i, j = pos_q.unsqueeze(-1), pos_k.unsqueeze(-2)  # (..., T, 1), (..., 1, S)
        n = pos_k.amax(-1, keepdim=True).unsqueeze(-1) + 1  # (..., 1, 1)
        return self.allows(i, j, n) & (i >= 0) & (j >= 0)

    def allows(self, i: torch.Tensor, j: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
        """i (..., T, 1), j (..., 1, S), n (..., 1, 1) -> bool (..., T, S)."""
        raise NotImplementedError


def _axis(i: torch.Tensor, j: torch.Tensor, rows, cols) -> torch.Tensor:
    """i ∈ rows or j ∈ cols (Adaptive Axis Attention, Eq. 7): the rows and columns of a
    position set.  ``rows``/``cols``: int sequences or 1-D long tensors."""
    rows = rows.to(i.device) if torch.is_tensor(rows) else constant(tuple(rows), i.device)
    cols = cols.to(j.device) if torch.is_tensor(cols) else constant(tuple(cols), j.device)
    return torch.isin(i, rows) | torch.isin(j, cols)


@dataclass(frozen=True)
class GlobalTokensMask(PositionMask):
    """i < G or j < G: the first G tokens' rows and columns (Adaptive Axis Attention, §2.2)."""

    count: int

    def allows(self, i, j, n):
        return _axis(i, j, range(self.count), range(self.count))

    def __str__(self) -> str:
        return f"global-{self.count}"


@dataclass(frozen=True)
class AxisMask(PositionMask):
    """i ∈ rows or j ∈ cols (Adaptive Axis Attention, Eq. 7); sets are kept sorted, unique."""

    rows: Tuple[int, ...]
    cols: Tuple[int, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "rows", tuple(sorted(set(self.rows))))
        object.__setattr__(self, "cols", tuple(sorted(set(self.cols))))

    def allows(self, i, j, n):
        return _axis(i, j, self.rows, self.cols)

    def __str__(self) -> str:
        return f"axis-{_fmt_set(self.rows)}-{_fmt_set(self.cols)}"


@dataclass(frozen=True)
class StarMask(PositionMask):
    """|i − j| ≤ 1 or i = 0 or j = 0 (Star-Transformer, SparseBERT Fig. 1(a))."""

    def allows(self, i, j, n):
        return ((j - i).abs() <= 1) | _axis(i, j, [0], [0])

    def __str__(self) -> str:
        return "star"


@dataclass(frozen=True)
class FixedMask(PositionMask):
    """⌊i/L⌋ = ⌊j/L⌋ or j mod L ≥ L − C (Sparse Transformer "fixed", SparseBERT Fig. 1(d))."""

    length: int
    columns: int

    def allows(self, i, j, n):
        L = self.length
        return (i.div(L, rounding_mode="floor") == j.div(L, rounding_mode="floor")) | (
            j % L >= L - self.columns
        )

    def __str__(self) -> str:
        return f"fixed-{self.length}-{self.columns}"



def _fmt_set(values: Sequence[int]) -> str:
    return ".".join(map(str, values)) or "_"

