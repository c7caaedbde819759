"""The base of the learned head kinds' specs.

A spec only names the kind; its pattern is realised by a parameter module of
the attention layer (:mod:`fairseq_local.attention.learned`: each kind is one
:class:`~fairseq_local.attention.learned.kind.LearnedKind` class), never by
:meth:`~fairseq_local.attention.masks.base.HeadMask.dense`."""

from dataclasses import dataclass
from torch import Tensor

from .base import HeadMask, MaskSpecError


@dataclass(frozen=True)
class LearnedMask(HeadMask):
    """A head mask whose pattern is learned; realised by a parameter module of
    the attention layer, never by :meth:`dense` (it is not a fixed pattern)."""

    @property
    def learned(self) -> bool:
        return True

    def dense(self, pos_q: Tensor, pos_k: Tensor) -> Tensor:
        raise MaskSpecError(f"'{self}' is learned: it has no fixed dense matrix")
