"""Fixed masks given by a rule on the offset or on the positions: the local
kinds of Pande et al. (2021, §4.1), and the sparse patterns of SparseBERT
(Shi et al. 2021, §3.3, §4.2, Table 3) and Adaptive Axis Attention (Wang et
al. 2022, §2.2, Eq. 5–8).  Each class is one kind (``OffsetMask``: five),
registered once, with its rule."""

from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

import torch

from .base import GlobalMask, HeadMask, MaskSpecError, PositionMask, RelativeMask, isin
from .registry import int_params, int_set, no_params, one_k, register_mask_kind


@register_mask_kind("global", "global[-G]")
@dataclass(frozen=True)
class GlobalTokensMask(PositionMask):
    """i < G or j < G: the first G tokens' rows and columns (Adaptive Axis
    Attention, §2.2).  The kind ``global``: ``global-G`` is this mask,
    ``global`` alone is :class:`GlobalMask` (no mask)."""

    count: int

    @classmethod
    def from_params(cls, kind: str, params: List[str]) -> HeadMask:
        if not params:
            return GlobalMask()
        (g,) = int_params(params, ("G", 1))
        return cls(g)

    def allows(self, i, j, n):
        return (i < self.count) | (j < self.count)

    def __str__(self) -> str:
        return f"global-{self.count}"


@register_mask_kind("local", "local-W")
@register_mask_kind("band", "band-K")
@register_mask_kind("next", "next-K")
@register_mask_kind("prev", "prev-K")
@register_mask_kind("identity", "identity")
@dataclass(frozen=True)
class OffsetMask(RelativeMask):
    """Allows the offsets ``lo <= j − i <= hi`` (Pande et al., §4.1): a window.

    ``identity`` is (0, 0), ``prev-k`` is (−k, −k), ``next-k`` is (k, k),
    ``band-k`` (k >= 1) and ``local-k`` (k >= 0, Adaptive Axis Attention) are
    (−k, k).  ``name`` is the kind it was written as."""

    name: str
    lo: int
    hi: int

    @classmethod
    def from_params(cls, kind: str, params: List[str]) -> HeadMask:
        if kind == "identity":
            no_params(kind, params)
            return cls(kind, 0, 0)
        if kind == "local":
            (k,) = int_params(params, ("W", 0))
        else:
            k = one_k(kind, params)
        lo, hi = {"prev": (-k, -k), "next": (k, k)}.get(kind, (-k, k))
        return cls(kind, lo, hi)

    @property
    def offset_window(self) -> Optional[Tuple[int, int]]:
        return self.lo, self.hi

    def allows_offset(self, d: torch.Tensor) -> torch.Tensor:
        return (d >= self.lo) & (d <= self.hi)

    def _count_pairs(self, n: int) -> int:
        """Σ_{d=lo..hi} max(0, n − |d|), in closed form."""
        a, b = max(self.lo, 1 - n), min(self.hi, n - 1)
        if a > b:
            return 0
        return (b - a + 1) * n - _abs_sum(a, b)

    def __str__(self) -> str:
        if self.name == "identity":
            return "identity"
        k = self.hi if self.name != "prev" else -self.lo
        return f"{self.name}-{k}"


def _abs_sum(a: int, b: int) -> int:
    """Σ_{d=a..b} |d| for integers a ≤ b."""
    if a >= 0:
        return (a + b) * (b - a + 1) // 2
    if b <= 0:
        return -(a + b) * (b - a + 1) // 2
    return -a * (1 - a) // 2 + b * (b + 1) // 2


@register_mask_kind("diagonal", "diagonal-O1.O2...")
@dataclass(frozen=True)
class DiagonalMask(RelativeMask):
    """|i − j| ∈ ``offsets`` (Adaptive Axis Attention, Eq. 6); offsets are kept sorted, unique."""

    offsets: Tuple[int, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "offsets", tuple(sorted(set(self.offsets))))

    @classmethod
    def from_params(cls, kind: str, params: List[str]) -> HeadMask:
        if len(params) != 1 or params[0] == "_":
            raise MaskSpecError("takes one non-empty offset set, as in 'diagonal-0.1.4'")
        return cls(int_set(params[0], "O"))

    def allows_offset(self, d: torch.Tensor) -> torch.Tensor:
        return isin(d.abs(), self.offsets)

    def __str__(self) -> str:
        return f"diagonal-{_fmt_set(self.offsets)}"


@register_mask_kind("no-diag", "no-diag")
@dataclass(frozen=True)
class NoDiagMask(RelativeMask):
    """i ≠ j: SparseBERT's "no diag-attention" (SparseBERT, §3.3)."""

    @classmethod
    def from_params(cls, kind: str, params: List[str]) -> HeadMask:
        no_params(kind, params)
        return cls()

    def allows_offset(self, d: torch.Tensor) -> torch.Tensor:
        return d != 0

    def __str__(self) -> str:
        return "no-diag"


@register_mask_kind("logsparse", "logsparse")
@dataclass(frozen=True)
class LogSparseMask(RelativeMask):
    """i = j or |i − j| = 2^k, k ≥ 0 (LogSparse, SparseBERT Fig. 1(b), made symmetric)."""

    @classmethod
    def from_params(cls, kind: str, params: List[str]) -> HeadMask:
        no_params(kind, params)
        return cls()

    def allows_offset(self, d: torch.Tensor) -> torch.Tensor:
        a = d.abs()
        return (a & (a - 1)) == 0  # true for a = 0 and for the powers of two

    def __str__(self) -> str:
        return "logsparse"


@register_mask_kind("strided", "strided-L")
@dataclass(frozen=True)
class StridedMask(RelativeMask):
    """|i − j| ≤ L or (i − j) mod L = 0 (Sparse Transformer, SparseBERT Fig. 1(c))."""

    stride: int

    @classmethod
    def from_params(cls, kind: str, params: List[str]) -> HeadMask:
        (stride,) = int_params(params, ("L", 1))
        return cls(stride)

    def allows_offset(self, d: torch.Tensor) -> torch.Tensor:
        a = d.abs()
        return (a <= self.stride) | (a % self.stride == 0)

    def __str__(self) -> str:
        return f"strided-{self.stride}"


@register_mask_kind("axis", "axis-ROWS-COLS")
@dataclass(frozen=True)
class AxisMask(PositionMask):
    """i ∈ rows or j ∈ cols (Adaptive Axis Attention, Eq. 7); sets are kept sorted, unique."""

    rows: Tuple[int, ...]
    cols: Tuple[int, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "rows", tuple(sorted(set(self.rows))))
        object.__setattr__(self, "cols", tuple(sorted(set(self.cols))))

    @classmethod
    def from_params(cls, kind: str, params: List[str]) -> HeadMask:
        if len(params) != 2:
            raise MaskSpecError(f"takes 2 parameter(s) (ROWS-COLS), got {len(params)}")
        return cls(int_set(params[0], "ROWS"), int_set(params[1], "COLS"))

    def allows(self, i, j, n):
        return isin(i, self.rows) | isin(j, self.cols)

    def __str__(self) -> str:
        return f"axis-{_fmt_set(self.rows)}-{_fmt_set(self.cols)}"


@register_mask_kind("star", "star")
@dataclass(frozen=True)
class StarMask(PositionMask):
    """|i − j| ≤ 1 or i = 0 or j = 0 (Star-Transformer, SparseBERT Fig. 1(a))."""

    @classmethod
    def from_params(cls, kind: str, params: List[str]) -> HeadMask:
        no_params(kind, params)
        return cls()

    def allows(self, i, j, n):
        return ((j - i).abs() <= 1) | (i == 0) | (j == 0)

    def __str__(self) -> str:
        return "star"


@register_mask_kind("fixed", "fixed-L-C")
@dataclass(frozen=True)
class FixedMask(PositionMask):
    """⌊i/L⌋ = ⌊j/L⌋ or j mod L ≥ L − C (Sparse Transformer "fixed", SparseBERT Fig. 1(d))."""

    length: int
    columns: int

    @classmethod
    def from_params(cls, kind: str, params: List[str]) -> HeadMask:
        length, columns = int_params(params, ("L", 1), ("C", 0))
        if columns > length:
            raise MaskSpecError(f"C must be <= L, not {columns} > {length}")
        return cls(length, columns)

    def allows(self, i, j, n):
        L = self.length
        return (torch.div(i, L, rounding_mode="floor") == torch.div(j, L, rounding_mode="floor")) | (
            j % L >= L - self.columns
        )

    def __str__(self) -> str:
        return f"fixed-{self.length}-{self.columns}"


def _fmt_set(values: Sequence[int]) -> str:
    return ".".join(map(str, values)) or "_"
