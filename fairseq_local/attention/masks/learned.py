"""The learned head kinds as mask specs: ``dam-u``/``dam-s`` (SparseBERT
§3.1) and ``aaa[-W]`` (Adaptive Axis Attention, Wang et al. 2022, §4.2).

A spec only names the kind; its pattern is realised by a parameter module of
the attention layer (:mod:`fairseq_local.attention.learned`), never by
:meth:`~fairseq_local.attention.masks.base.HeadMask.dense`."""

from dataclasses import dataclass
from typing import List

from torch import Tensor

from .base import HeadMask, MaskSpecError
from .registry import int_params, no_params, register_mask_kind


@dataclass(frozen=True)
class LearnedMask(HeadMask):
    """A head mask whose pattern is learned; realised by a parameter module of
    the attention layer, never by :meth:`dense` (it is not a fixed pattern)."""

    @property
    def learned(self) -> bool:
        return True

    def dense(self, pos_q: Tensor, pos_k: Tensor) -> Tensor:
        raise MaskSpecError(f"'{self}' is learned: it has no fixed dense matrix")


@register_mask_kind("dam-s", "dam-s")
@register_mask_kind("dam-u", "dam-u")
@dataclass(frozen=True)
class DamSpec(LearnedMask):
    """``dam-u`` (unstructured) or ``dam-s`` (structured)."""

    structured: bool

    @classmethod
    def from_params(cls, kind: str, params: List[str]) -> HeadMask:
        no_params(kind, params)
        return cls(kind == "dam-s")

    def __str__(self) -> str:
        return "dam-s" if self.structured else "dam-u"


@register_mask_kind("aaa", "aaa[-W]")
@dataclass(frozen=True)
class AxisAdaptiveSpec(LearnedMask):
    """``aaa`` / ``aaa-W``: Adaptive Axis Attention OR ``local-W`` (W = 2)."""

    window: int = 2

    @classmethod
    def from_params(cls, kind: str, params: List[str]) -> HeadMask:
        if not params:
            return cls()
        (w,) = int_params(params, ("W", 0))
        return cls(w)

    def __str__(self) -> str:
        return "aaa" if self.window == 2 else f"aaa-{self.window}"
