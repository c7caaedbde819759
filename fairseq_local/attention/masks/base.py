"""Mask data types: the base class and its rule, ``global``, the families of
kinds (relative, positional, looked up in a table), unions, and the helpers
that turn masks into dense tensors.

Positions count *real* tokens from 0 (padding excluded); for a query at
position i and a key at position j the offset is ``d = j − i``.

A fixed mask is its rule, :meth:`HeadMask.allows`, written once and used by
every path: :meth:`HeadMask.dense` evaluates it on broadcast position
tensors, FlexAttention's mask_mod (:func:`~.flex_rule.mask_mod`) on the
scalar indices it vmaps over, and the window path reads a window mask's
offsets from :attr:`HeadMask.offset_window`.
"""

from dataclasses import dataclass
from functools import reduce
from typing import Callable, Optional, Sequence, Tuple, Union

import torch

from ..context import cached
from ...errors import OneLineError

Length = Union[torch.Tensor, int, None]
Rule = Callable[[torch.Tensor, torch.Tensor, Length], torch.Tensor]
"""``rule(i, j, n) -> bool``: i, j long positions and n the real length,
broadcast against each other; written with tensor operations only."""


class MaskSpecError(OneLineError, ValueError):
    """A mask token that cannot be parsed (unknown kind or bad parameter)."""


def isin(x: torch.Tensor, values: Sequence[int]) -> torch.Tensor:
    """x ∈ values, elementwise, as an OR chain over the (constant) values:
    unlike torch.isin, it runs under vmap (FlexAttention).  Empty: all False."""
    return reduce(torch.logical_or, (x == v for v in values), torch.zeros_like(x, dtype=torch.bool))


@dataclass(frozen=True)
class HeadMask:
    """Base class of a head's mask.  Subclasses are frozen dataclasses.

    A fixed kind defines its rule, :meth:`allows`; :meth:`dense` and
    FlexAttention's mask_mod are derived from it.  A registered kind also has
    ``from_params(kind, params)`` (:func:`~.registry.register_mask_kind`)."""

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

    @property
    def offset_window(self) -> Optional[Tuple[int, int]]:
        """(lo, hi) when the mask allows exactly the offsets lo <= j − i <= hi
        (a window, which the window path reads key by key), else None."""
        return None

    def allows(self, i: torch.Tensor, j: torch.Tensor, n: Length) -> torch.Tensor:
        """The mask's rule: may query position i attend to key position j in
        a sentence of n real tokens?

        i, j: long, real-token positions (−1 at padding) or, for a relative
        mask, padded indices; n: long, the real length (None for a relative
        mask, whose rule reads j − i only); all broadcast against each other.
        Returns bool of their broadcast shape.  Written with tensor operations
        only (no Python branch on a tensor's value, no read back to the host)
        so that FlexAttention can vmap it over scalar indices.  Pads need not
        be excluded here: :meth:`rule` does it for kinds that are not relative."""
        raise NotImplementedError(f"{type(self).__name__} has no rule: define allows(i, j, n)")

    def bind(self, n: Length, size: int, device: torch.device) -> Rule:
        """The rule for one batch: n (any shape) its real lengths, ``size`` its
        padded length (a host int).  Kinds that look the answer up in a table
        build it here and return a closure over it; the others return
        :meth:`allows`."""
        return self.allows

    def rule(self, n: Length, size: int, device: torch.device) -> Rule:
        """:meth:`bind`, with pad positions (−1) never allowed unless the mask
        is relative: the rule the dense path and FlexAttention evaluate."""
        allows = self.bind(n, size, device)
        if self.relative:
            return allows

        def real_pairs(i: torch.Tensor, j: torch.Tensor, n: Length) -> torch.Tensor:
            return allows(i, j, n) & (i >= 0) & (j >= 0)

        return real_pairs

    def dense(self, pos_q: torch.Tensor, pos_k: torch.Tensor) -> torch.Tensor:
        """Dense boolean mask, :meth:`rule` on every (query, key) pair.

        Args:
            pos_q: (B, T) or (T,) long, real-token position of each query.
            pos_k: (B, S) or (S,) long, real-token position of each key.
        Returns:
            bool tensor broadcastable to (B, T, S); True = may attend.  n, the
            sentence's real length, is taken as max(pos_k) + 1 per sentence.
        """
        i, j = pos_q.unsqueeze(-1), pos_k.unsqueeze(-2)  # (..., T, 1), (..., 1, S)
        n = None if self.relative else pos_k.amax(-1, keepdim=True).unsqueeze(-1) + 1  # (..., 1, 1)
        return self.rule(n, max(i.shape[-2], j.shape[-1]), pos_q.device)(i, j, n)

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


@cached(maxsize=8192)
def _pair_count(mask: HeadMask, n: int) -> int:
    return mask._count_pairs(n)


def to_device(t: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A CPU tensor on ``device`` without waiting for the copy: on CUDA from
    pinned memory with ``non_blocking`` (a pageable copy synchronises the host)."""
    device = torch.device(device)
    if device.type != "cuda":
        return t.to(device)
    return t.pin_memory().to(device, non_blocking=True)


@cached(maxsize=1024)
def constant(values: Tuple, device: torch.device, dtype: torch.dtype = torch.long) -> torch.Tensor:
    """``torch.tensor(values)`` on ``device``, made once per (values, device, dtype).

    Made outside inference mode, so that a first call under
    :func:`torch.inference_mode` does not cache a tensor autograd refuses."""
    with torch.inference_mode(False):
        return to_device(torch.tensor(values, dtype=dtype), device)


@cached(maxsize=256)
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

    def allows(self, i, j, n):
        return torch.ones_like(j - i, dtype=torch.bool)

    def _count_pairs(self, n: int) -> int:
        return n * n

    def __str__(self) -> str:
        return "global"


@dataclass(frozen=True)
class RelativeMask(HeadMask):
    """A mask given by a rule on the offset ``d = j − i`` alone,
    :meth:`allows_offset`."""

    @property
    def relative(self) -> bool:
        return True

    def allows(self, i, j, n):
        return self.allows_offset(j - i)

    def allows_offset(self, d: torch.Tensor) -> torch.Tensor:
        """Bool of d's shape: whether the offset d = j − i is allowed
        (tensor operations only, as :meth:`HeadMask.allows`)."""
        raise NotImplementedError


@dataclass(frozen=True)
class PositionMask(HeadMask):
    """A mask given by a rule on the real-token positions (i, j) and length n.

    Not relative: built per batch from the (B, T) positions of
    :func:`real_positions`.  Pad positions (−1) are never allowed."""


@dataclass(frozen=True)
class TableMask(PositionMask):
    """A positional mask whose rule looks the answer up in a table (the
    seeded random kinds: one tile per device; ``file`` masks): :meth:`bind`
    gets the table for a batch, on its device, and returns the rule as a
    closure over it."""

    def bind(self, n: Length, size: int, device: torch.device) -> Rule:
        raise NotImplementedError

    def allows(self, i, j, n):
        """The rule at once, for i (..., T, 1), j (..., 1, S) (binds a table
        for these shapes, so not under vmap: FlexAttention uses :meth:`bind`)."""
        n = torch.as_tensor(n, device=i.device)
        return self.bind(n, max(i.shape[-2], j.shape[-1]), i.device)(i, j, n)


@dataclass(frozen=True)
class OrMask(HeadMask):
    """The union of ``parts`` (Adaptive Axis Attention, Eq. 8), written ``A+B+...``:
    its rule ORs theirs.  Relative iff every part is (else pad positions stay
    out, as for :class:`PositionMask`); global iff any part is."""

    parts: Tuple[HeadMask, ...]

    @property
    def is_global(self) -> bool:
        return any(p.is_global for p in self.parts)

    @property
    def relative(self) -> bool:
        return all(p.relative for p in self.parts)

    def allows(self, i, j, n):
        return reduce(torch.logical_or, (p.allows(i, j, n) for p in self.parts))

    def bind(self, n: Length, size: int, device: torch.device) -> Rule:
        rules = [p.bind(n, size, device) for p in self.parts]

        def union(i: torch.Tensor, j: torch.Tensor, n: Length) -> torch.Tensor:
            return reduce(torch.logical_or, (r(i, j, n) for r in rules))

        return union

    def __str__(self) -> str:
        return "+".join(str(p) for p in self.parts)


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
