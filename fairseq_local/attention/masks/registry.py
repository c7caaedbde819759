"""Mask tokens: the registry of kinds, unions (Adaptive Axis Attention, Eq. 8)
and :func:`parse_mask`.

Every integer parameter is bounded, checked on its digits before it is
converted: windows, offsets, counts, strides and position sets at most
:data:`MAX_PARAM` (a million positions, far beyond any sequence a model
reads, so a larger value would mean the same mask; the bound keeps the
offset arithmetic of the dense, window and flex paths inside int32 and
exact in float32, where ``band-99999999999999999999`` overflowed), seeds at
most :data:`MAX_SEED` (int64), ``file-L.H`` at most the layout's limits.
"""

import re
from dataclasses import dataclass
from functools import reduce
from typing import Callable, Dict, List, Tuple

import torch

from .base import GlobalMask, HeadMask, MaskSpecError, OffsetMask
from .file import FileMask
from .patterns import (AxisMask, DiagonalMask, FixedMask, GlobalTokensMask, LogSparseMask, NoDiagMask,
                       StarMask, StridedMask)
from .seeded import BigBirdMask, LongformerMask, RandomDropMask, RandomMask

@dataclass(frozen=True)
class OrMask(HeadMask):
    """The union of ``parts`` (Adaptive Axis Attention, Eq. 8), written ``A+B+...``."""

    parts: Tuple[HeadMask, ...]

    @property
    def is_global(self) -> bool:
        return any(p.is_global for p in self.parts)

    @property
    def relative(self) -> bool:
        return all(p.relative for p in self.parts)

    def dense(self, pos_q: torch.Tensor, pos_k: torch.Tensor) -> torch.Tensor:
        """Shapes as the parts'; broadcast to their common shape."""
        out = reduce(torch.logical_or, (p.dense(pos_q, pos_k) for p in self.parts))
        if not self.relative:  # pad positions (−1) stay False, as in PositionMask
            out = out & (pos_q.unsqueeze(-1) >= 0) & (pos_k.unsqueeze(-2) >= 0)
        return out

    def __str__(self) -> str:
        return "+".join(str(p) for p in self.parts)


MaskFactory = Callable[[List[str]], HeadMask]
MASK_KINDS: Dict[str, Tuple[MaskFactory, str]] = {}


def register_mask_kind(name: str, syntax: str) -> Callable[[MaskFactory], MaskFactory]:
    """Register a factory that turns a token's parameters into a :class:`HeadMask`.

    ``name`` may contain '-': a token's kind is the longest registered name
    that the token equals or that is followed by '-' in it.  The factory gets
    the rest of the token's '-'-separated parameters as strings, and raises
    :class:`MaskSpecError` on a bad one.  ``syntax`` is shown in error
    messages (e.g. ``"band-K"``)."""

    def wrapper(factory: MaskFactory) -> MaskFactory:
        if name in MASK_KINDS:
            raise ValueError(f"mask kind {name!r} is already registered")
        MASK_KINDS[name] = (factory, syntax)
        return factory

    return wrapper


_INT = re.compile(r"[0-9]+")
MAX_PARAM = 1_000_000
MAX_SEED = 2 ** 63 - 1
_MAX_LAYER_HEAD = 10_000  # fairseq_local.attention.layout.MAX_LAYERS and MAX_HEADS


def _short(text: str, width: int = 40) -> str:
    return text if len(text) <= width else text[:width - 3] + "..."


def _bounded(text: str, name: str, low: int, high: int = MAX_PARAM) -> int:
    """``text`` as an integer in ``low..high`` (its digits are checked before
    it is converted), else :class:`MaskSpecError` naming ``name``."""
    if not _INT.fullmatch(text):
        raise MaskSpecError(f"{name} must be an integer >= {low}, not '{_short(text)}'")
    digits = text.lstrip("0") or "0"
    if len(digits) > len(str(high)) or int(digits) > high:
        raise MaskSpecError(f"{name} must be at most {high:,}, not {_short(text)}")
    if int(digits) < low:
        raise MaskSpecError(f"{name} must be an integer >= {low}, not '{text}'")
    return int(digits)


def no_params(kind: str, params: List[str]) -> None:
    if params:
        raise MaskSpecError(f"'{kind}' takes no parameter")


def _one_k(kind: str, params: List[str]) -> int:
    if len(params) != 1 or not _INT.fullmatch(params[0]) or not params[0].strip("0"):
        raise MaskSpecError(f"'{kind}' needs an integer k >= 1, as in '{kind}-2'")
    return _bounded(params[0], "k", 1)


@register_mask_kind("global", "global[-G]")
def _global(params: List[str]) -> HeadMask:
    if not params:
        return GlobalMask()
    (g,) = int_params(params, ("G", 1))
    return GlobalTokensMask(g)


@register_mask_kind("identity", "identity")
def _identity(params: List[str]) -> HeadMask:
    no_params("identity", params)
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


def int_params(params: List[str], *spec: Tuple[str, int]) -> List[int]:
    """Exactly ``len(spec)`` integer parameters, each given as (name, minimum)."""
    if len(params) != len(spec):
        names = "-".join(name for name, _ in spec) or "none"
        raise MaskSpecError(f"takes {len(spec)} parameter(s) ({names}), got {len(params)}")
    return [_bounded(text, name, low, MAX_SEED if name == "SEED" else MAX_PARAM)
            for text, (name, low) in zip(params, spec)]


def _seeded(params: List[str]) -> Tuple[List[str], int]:
    """Split an optional trailing 'sSEED' (default 0) off the parameters."""
    if params and params[-1].startswith("s"):
        (seed,) = int_params([params[-1][1:]], ("SEED", 0))
        return params[:-1], seed
    return params, 0


def _int_set(text: str, name: str) -> Tuple[int, ...]:
    """'0.5.7' -> (0, 5, 7); '_' -> () (the empty set)."""
    if text == "_":
        return ()
    if not re.fullmatch(r"[0-9]+(\.[0-9]+)*", text):
        raise MaskSpecError(
            f"{name} must be '.'-separated integers >= 0 or '_' (empty), not '{_short(text)}'"
        )
    return tuple(_bounded(t, name, 0) for t in text.split("."))



@register_mask_kind("local", "local-W")
def _local(params: List[str]) -> HeadMask:
    (w,) = int_params(params, ("W", 0))
    return OffsetMask("local", -w, w)


@register_mask_kind("axis", "axis-ROWS-COLS")
def _axis_kind(params: List[str]) -> HeadMask:
    if len(params) != 2:
        raise MaskSpecError(f"takes 2 parameter(s) (ROWS-COLS), got {len(params)}")
    return AxisMask(_int_set(params[0], "ROWS"), _int_set(params[1], "COLS"))


@register_mask_kind("diagonal", "diagonal-O1.O2...")
def _diagonal(params: List[str]) -> HeadMask:
    if len(params) != 1 or params[0] == "_":
        raise MaskSpecError("takes one non-empty offset set, as in 'diagonal-0.1.4'")
    return DiagonalMask(_int_set(params[0], "O"))


@register_mask_kind("random", "random-R[-sSEED]")
def _random(params: List[str]) -> HeadMask:
    params, seed = _seeded(params)
    (r,) = int_params(params, ("R", 1))
    return RandomMask(r, seed)


@register_mask_kind("no-diag", "no-diag")
def _no_diag(params: List[str]) -> HeadMask:
    no_params("no-diag", params)
    return NoDiagMask()


@register_mask_kind("random-drop", "random-drop[-sSEED]")
def _random_drop(params: List[str]) -> HeadMask:
    params, seed = _seeded(params)
    no_params("random-drop", params)
    return RandomDropMask(seed)


@register_mask_kind("star", "star")
def _star(params: List[str]) -> HeadMask:
    no_params("star", params)
    return StarMask()


@register_mask_kind("logsparse", "logsparse")
def _logsparse(params: List[str]) -> HeadMask:
    no_params("logsparse", params)
    return LogSparseMask()


@register_mask_kind("strided", "strided-L")
def _strided(params: List[str]) -> HeadMask:
    (stride,) = int_params(params, ("L", 1))
    return StridedMask(stride)


@register_mask_kind("fixed", "fixed-L-C")
def _fixed(params: List[str]) -> HeadMask:
    length, columns = int_params(params, ("L", 1), ("C", 0))
    if columns > length:
        raise MaskSpecError(f"C must be <= L, not {columns} > {length}")
    return FixedMask(length, columns)


@register_mask_kind("longformer", "longformer-W-G[-sSEED]")
def _longformer(params: List[str]) -> HeadMask:
    params, seed = _seeded(params)
    return LongformerMask(*int_params(params, ("W", 0), ("G", 1)), seed=seed)


@register_mask_kind("bigbird", "bigbird-W-G-R[-sSEED]")
def _bigbird(params: List[str]) -> HeadMask:
    params, seed = _seeded(params)
    return BigBirdMask(*int_params(params, ("W", 0), ("G", 1), ("R", 1)), seed=seed)


@register_mask_kind("file", "file[-L.H]")
def _file(params: List[str]) -> HeadMask:
    if not params:  # resolved to the head's own layer and head by the layout
        return FileMask(-1, -1)
    if len(params) != 1 or not re.fullmatch(r"[0-9]+\.[0-9]+", params[0]):
        raise MaskSpecError("takes a layer.head pair, as in 'file-0.3'")
    layer, head = params[0].split(".")
    return FileMask(_bounded(layer, "L", 0, _MAX_LAYER_HEAD - 1), _bounded(head, "H", 0, _MAX_LAYER_HEAD - 1))


def parse_mask(token: str) -> HeadMask:
    """Parse one mask token such as ``band-2``, ``bigbird-1-2-2-s3`` or
    ``local-2+global-1`` (raises :class:`MaskSpecError`, naming the token and
    the expected syntax)."""
    extra = next((c for c in ":@*" if c in token), None)
    if extra is not None:  # a layout head's modifiers (the layout splits them off before parsing its mask)
        raise MaskSpecError(f"'{_short(token)}' is not a mask token: '{extra}' belongs to a layout head "
                            f"MASK[:gate][@NAME|@@NAME][*N] (--attn-layout), not to its mask")
    if "+" in token:  # Adaptive Axis Attention, Eq. 8
        parts = token.split("+")
        if "" in parts:
            raise MaskSpecError(f"empty part in mask '{token}' (expected A+B+...)")
        try:
            union = OrMask(tuple(parse_mask(p) for p in parts))
        except MaskSpecError as e:
            raise MaskSpecError(f"in mask '{token}': {e}") from None
        learned = [str(p) for p in union.parts if p.learned]
        if learned:
            raise MaskSpecError(
                f"in mask '{token}': learned kind '{learned[0]}' cannot be part of a union"
            )
        return union
    names = [k for k in MASK_KINDS if token == k or token.startswith(k + "-")]
    if not names:
        known = ", ".join(syntax for _, syntax in MASK_KINDS.values())
        raise MaskSpecError(f"unknown mask kind '{_short(token)}' (known: {known})")
    kind = max(names, key=len)
    factory, syntax = MASK_KINDS[kind]
    try:
        return factory(token[len(kind):].split("-")[1:])
    except MaskSpecError as e:
        raise MaskSpecError(f"bad mask '{_short(token)}': {e} (expected {syntax})") from None
