"""Per-head attention masks, kept as data.

A head's mask is a small frozen object (its kind and parameters), not an n×n
tensor: the dense matrix is materialised only on demand, so that windowed fast
paths can read the parameters directly.

Positions count *real* tokens from 0 (padding excluded).  For a query at
position i and a key at position j, the offset is ``d = j − i``.  The local
kinds of Pande et al. (seed 000, §4.1) are:

=============  =====================================  ==================
kind           allowed keys for query i               allowed offsets d
=============  =====================================  ==================
``global``     every key (no mask)                    all
``identity``   j = i                                  {0}
``prev-k``     j = i − k (the token k positions back) {−k}
``next-k``     j = i + k (the token k positions on)   {+k}
``band-k``     |i − j| ≤ k                            [−k, k]
=============  =====================================  ==================

The paper's text states ``prev-k`` as ``j − i = k``, which contradicts the
names; we use the meanings above (prev looks back, next looks ahead).

New kinds are added with :func:`register_mask_kind`.
"""

from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Tuple

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

    def __str__(self) -> str:
        raise NotImplementedError


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

    def __str__(self) -> str:
        return "global"


@dataclass(frozen=True)
class OffsetMask(HeadMask):
    """Allows the offsets ``lo <= j − i <= hi`` (seed 000, §4.1).

    ``identity`` is (0, 0), ``prev-k`` is (−k, −k), ``next-k`` is (k, k) and
    ``band-k`` is (−k, k).  ``name`` is the kind it was written as."""

    name: str
    lo: int
    hi: int

    @property
    def relative(self) -> bool:
        return True

    def dense(self, pos_q: torch.Tensor, pos_k: torch.Tensor) -> torch.Tensor:
        d = pos_k.unsqueeze(-2) - pos_q.unsqueeze(-1)  # (..., T, S)
        return (d >= self.lo) & (d <= self.hi)

    def __str__(self) -> str:
        if self.name == "identity":
            return "identity"
        k = self.hi if self.name != "prev" else -self.lo
        return f"{self.name}-{k}"


MaskFactory = Callable[[List[str]], HeadMask]
MASK_KINDS: Dict[str, Tuple[MaskFactory, str]] = {}


def register_mask_kind(name: str, syntax: str) -> Callable[[MaskFactory], MaskFactory]:
    """Register a factory that turns a token's parameters into a :class:`HeadMask`.

    ``name`` is the part of the token before the first '-'; the factory gets
    the remaining '-'-separated parameters as strings.  ``syntax`` is shown in
    error messages (e.g. ``"band-K"``)."""

    def wrapper(factory: MaskFactory) -> MaskFactory:
        if name in MASK_KINDS:
            raise ValueError(f"mask kind {name!r} is already registered")
        MASK_KINDS[name] = (factory, syntax)
        return factory

    return wrapper


def _no_params(kind: str, params: List[str]) -> None:
    if params:
        raise MaskSpecError(f"'{kind}' takes no parameter")


def _one_k(kind: str, params: List[str]) -> int:
    if len(params) != 1 or not params[0].isdigit() or int(params[0]) < 1:
        raise MaskSpecError(f"'{kind}' needs an integer k >= 1, as in '{kind}-2'")
    return int(params[0])


@register_mask_kind("global", "global")
def _global(params: List[str]) -> HeadMask:
    _no_params("global", params)
    return GlobalMask()


@register_mask_kind("identity", "identity")
def _identity(params: List[str]) -> HeadMask:
    _no_params("identity", params)
    return OffsetMask("identity", 0, 0)


@register_mask_kind("prev", "prev-K")
def _prev(params: List[str]) -> HeadMask:
    k = _one_k("prev", params)
    return OffsetMask("prev", -k, -k)


@register_mask_kind("next", "next-K")
def _next(params: List[str]) -> HeadMask:
    k = _one_k("next", params)
    return OffsetMask("next", k, k)


@register_mask_kind("band", "band-K")
def _band(params: List[str]) -> HeadMask:
    k = _one_k("band", params)
    return OffsetMask("band", -k, k)


def parse_mask(token: str) -> HeadMask:
    """Parse one mask token such as ``band-2`` (raises :class:`MaskSpecError`)."""
    kind, *params = token.split("-")
    if kind not in MASK_KINDS:
        known = ", ".join(syntax for _, syntax in MASK_KINDS.values())
        raise MaskSpecError(f"unknown mask kind '{token}' (known: {known})")
    return MASK_KINDS[kind][0](params)


def real_positions(padding_mask: Optional[torch.Tensor], length: int) -> torch.Tensor:
    """Real-token positions (B, T) from a (B, T) padding mask (True = pad).

    Pad entries get −1.  Without a padding mask, returns ``arange(length)``."""
    if padding_mask is None:
        return torch.arange(length)
    pos = (~padding_mask).long().cumsum(-1) - 1
    return pos.masked_fill(padding_mask, -1)


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
