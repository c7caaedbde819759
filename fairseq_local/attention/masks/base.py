"""Mask data types: the base class, ``global`` and the offset kinds of Pande
et al. (2021, §4.1), and the helpers that turn masks into dense tensors.

Positions count *real* tokens from 0 (padding excluded); for a query at
position i and a key at position j the offset is ``d = j − i``.
"""

from dataclasses import dataclass
from functools import lru_cache
from typing import Optional, Tuple

import torch

class MaskSpecError(ValueError):
    """A mask token that cannot be parsed (unknown kind or bad parameter)."""


@dataclass(frozen=True)
class HeadMask:
    """Base class of a head's mask.  Subclasses are frozen dataclasses."""

    @property
    def is_global(self) -> bool:
        """True when the head sees every key (no mask at all)."""
        return False

    @property
    def learned(self) -> bool:
        """True for learned kinds (``dam-u``, ``dam-s``, ``aaa``): the pattern
        comes from parameters of the attention layer, not from :meth:`dense`."""
        return False

    @property
    def relative(self) -> bool:
        """True when the mask depends on the offset j − i only.

        Such a mask is the same for every sentence of a batch (fairseq pads
        contiguously, so offsets between real tokens do not change with
        padding) and is built once per (T, S)."""
        return False

    def dense(self, pos_q: torch.Tensor, pos_k: torch.Tensor) -> torch.Tensor:
        """Dense boolean mask.

        Args:
            pos_q: (B, T) or (T,) long, real-token position of each query.
            pos_k: (B, S) or (S,) long, real-token position of each key.
        Returns:
            bool tensor broadcastable to (B, T, S); True = may attend.
        """
        raise NotImplementedError

    def pair_count(self, n: int) -> int:
        """The number of allowed (i, j) among the positions 0..n−1 of a
        sentence of n real tokens, i.e. ``dense(arange(n), arange(n)).sum()``
        (|M| of Adaptive Axis Attention, Eq. 9).  Cached per (mask, n)."""
        return _pair_count(self, n) if n > 0 else 0

    def _count_pairs(self, n: int) -> int:
        """:meth:`pair_count` for n ≥ 1, uncached.  Relative masks: Σ over the
        offsets d of allows(d)·(n − |d|), O(n); others: the dense (n, n) matrix."""
        if self.relative:
            d = torch.arange(1 - n, n)
            allowed = self.dense(torch.zeros(1, dtype=torch.long), d)[0]  # (2n − 1,): the rule on d
            return int((allowed.long() * (n - d.abs())).sum())
        pos = torch.arange(n)
        return int(self.dense(pos, pos).sum())

    def __str__(self) -> str:
        raise NotImplementedError


@lru_cache(maxsize=8192)
def _pair_count(mask: HeadMask, n: int) -> int:
    return mask._count_pairs(n)


def to_device(t: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A CPU tensor on ``device`` without waiting for the copy: on CUDA from
    pinned memory with ``non_blocking`` (a pageable copy synchronises the host)."""
    device = torch.device(device)
    if device.type != "cuda":
        return t.to(device)
    return t.pin_memory().to(device, non_blocking=True)


@lru_cache(maxsize=1024)
def constant(values: Tuple, device: torch.device, dtype: torch.dtype = torch.long) -> torch.Tensor:
    """``torch.tensor(values)`` on ``device``, made once per (values, device, dtype).

    Made outside inference mode, so that a first call under
    :func:`torch.inference_mode` does not cache a tensor autograd refuses."""
    with torch.inference_mode(False):
        return to_device(torch.tensor(values, dtype=dtype), device)


@lru_cache(maxsize=256)
def pair_count_table(masks: Tuple[HeadMask, ...], length: int, device: torch.device) -> torch.Tensor:
    """float32 (length + 1, H) on ``device``: row n holds each mask's
    :meth:`~HeadMask.pair_count` at n real tokens, so that a batch's counts are
    ``table[lengths]`` with no read of the lengths on the host.  Cached per
    (masks, padded length, device)."""
    rows = [[float(m.pair_count(n)) for m in masks] for n in range(length + 1)]
    with torch.inference_mode(False):
        return to_device(torch.tensor(rows, dtype=torch.float32), device)


@dataclass(frozen=True)
class GlobalMask(HeadMask):
    """No mask: the head attends to every real token."""

    @property
    def is_global(self) -> bool:
        return True

    @property
    def relative(self) -> bool:
        return True

    def dense(self, pos_q: torch.Tensor, pos_k: torch.Tensor) -> torch.Tensor:
        return torch.ones(
            pos_q.shape + pos_k.shape[-1:], dtype=torch.bool, device=pos_q.device
        )

    def _count_pairs(self, n: int) -> int:
        return n * n

    def __str__(self) -> str:
        return "global"


@dataclass(frozen=True)
class RelativeMask(HeadMask):
    """A mask given by a rule on the offset ``d = j − i`` alone."""

    @property
    def relative(self) -> bool:
        return True

    def dense(self, pos_q: torch.Tensor, pos_k: torch.Tensor) -> torch.Tensor:
        return self.allows(pos_k.unsqueeze(-2) - pos_q.unsqueeze(-1))  # d: (..., T, S)

    def allows(self, d: torch.Tensor) -> torch.Tensor:
        """Bool of d's shape: whether the offset d = j − i is allowed."""
        raise NotImplementedError


@dataclass(frozen=True)
class OffsetMask(RelativeMask):
    """Allows the offsets ``lo <= j − i <= hi`` (Pande et al., §4.1).

    ``identity`` is (0, 0), ``prev-k`` is (−k, −k), ``next-k`` is (k, k),
    ``band-k`` and ``local-k`` are (−k, k).  ``name`` is the kind it was
    written as."""

    name: str
    lo: int
    hi: int

    def allows(self, d: torch.Tensor) -> torch.Tensor:
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


def real_positions(padding_mask: Optional[torch.Tensor], length: int,
                   device: Optional[torch.device] = None) -> torch.Tensor:
    """Real-token positions (B, T) from a (B, T) padding mask (True = pad).

    Pad entries get −1.  Without a padding mask, returns ``arange(length)``.
    The result is on ``device`` (default: the padding mask's, else the CPU)."""
    if padding_mask is None:
        return torch.arange(length, device=device)
    pos = (~padding_mask).long().cumsum(-1) - 1
    return pos.masked_fill(padding_mask, -1).to(device or padding_mask.device)


def stack_masks(
    masks: Tuple[HeadMask, ...],
    pos_q: torch.Tensor,
    pos_k: torch.Tensor,
) -> torch.Tensor:
    """Stack per-head masks: returns bool (H, T, S) for 1-D positions, or
    (B, H, T, S) for batched (B, T) positions."""
    dense = [m.dense(pos_q, pos_k) for m in masks]
    shape = torch.broadcast_shapes(*(d.shape for d in dense))
    return torch.stack([d.expand(shape) for d in dense], dim=-3)
