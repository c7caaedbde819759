"""Mask tokens: the registry of kinds, the parsers of their parameters and
:func:`parse_mask`.

A kind is one :class:`~fairseq_local.attention.masks.base.HeadMask` class,
registered once by decorating it::

    @register_mask_kind("sink", "sink-K")
    @dataclass(frozen=True)
    class SinkMask(PositionMask):
        count: int

        @classmethod
        def from_params(cls, kind: str, params: List[str]) -> HeadMask:
            (k,) = int_params(params, ("K", 1))
            return cls(k)

        def allows(self, i, j, n):
            return (j < self.count) | (j == i)

A class may be registered under several names (``OffsetMask``: ``identity``,
``prev``, ``next``, ``band``, ``local``); ``from_params`` gets the name the
token was written with.

Every integer parameter is bounded, checked on its digits before it is
converted: windows, offsets, counts, strides and position sets at most
:data:`MAX_PARAM` (a million positions, far beyond any sequence a model
reads, so a larger value would mean the same mask; the bound keeps the
offset arithmetic of the dense, window and flex paths inside int32 and
exact in float32, where ``band-99999999999999999999`` would overflow), seeds at
most :data:`MAX_SEED` (int64), ``file-L.H`` at most :data:`MAX_LAYER_HEAD`.
"""

import re
from typing import Callable, Dict, List, Tuple, Type, TypeVar

from .base import HeadMask, MaskSpecError, OrMask

K = TypeVar("K", bound=Type[HeadMask])
MASK_KINDS: Dict[str, Tuple[Type[HeadMask], str]] = {}  # name -> (class, syntax)


def register_mask_kind(name: str, syntax: str) -> Callable[[K], K]:
    """Class decorator: register a :class:`HeadMask` class as the kind ``name``.

    :func:`parse_mask` calls ``cls.from_params(name, params)`` (a classmethod)
    with the rest of the token's '-'-separated parameters as strings; it
    returns the mask and raises :class:`MaskSpecError` on a bad parameter
    (:func:`int_params`, :func:`no_params`, ... check them).  ``name`` may
    contain '-': a token's kind is the longest registered name that the token
    equals or that is followed by '-' in it.  ``syntax`` is shown in error
    messages (e.g. ``"band-K"``)."""

    def wrapper(cls: K) -> K:
        if name in MASK_KINDS:
            raise ValueError(f"mask kind {name!r} is already registered")
        if not callable(getattr(cls, "from_params", None)):
            raise TypeError(f"mask kind {name!r}: {cls.__name__} has no from_params(kind, params) classmethod")
        MASK_KINDS[name] = (cls, syntax)
        return cls

    return wrapper


def unregister_mask_kind(name: str) -> None:
    """Remove the kind ``name`` (a kind registered for a while, as a test does)."""
    del MASK_KINDS[name]


_INT = re.compile(r"[0-9]+")
MAX_PARAM = 1_000_000
MAX_SEED = 2 ** 63 - 1
MAX_LAYER_HEAD = 10_000  # fairseq_local.attention.layout.MAX_LAYERS and MAX_HEADS


def _short(text: str, width: int = 40) -> str:
    return text if len(text) <= width else text[:width - 3] + "..."


def bounded(text: str, name: str, low: int, high: int = MAX_PARAM) -> int:
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
    """A kind without parameters: :class:`MaskSpecError` if any is given."""
    if params:
        raise MaskSpecError(f"'{kind}' takes no parameter")


def one_k(kind: str, params: List[str]) -> int:
    """The one parameter k >= 1 of ``prev-k``, ``next-k``, ``band-k``."""
    if len(params) != 1 or not _INT.fullmatch(params[0]) or not params[0].strip("0"):
        raise MaskSpecError(f"'{kind}' needs an integer k >= 1, as in '{kind}-2'")
    return bounded(params[0], "k", 1)


def int_params(params: List[str], *spec: Tuple[str, int]) -> List[int]:
    """Exactly ``len(spec)`` integer parameters, each given as (name, minimum)."""
    if len(params) != len(spec):
        names = "-".join(name for name, _ in spec) or "none"
        raise MaskSpecError(f"takes {len(spec)} parameter(s) ({names}), got {len(params)}")
    return [bounded(text, name, low, MAX_SEED if name == "SEED" else MAX_PARAM)
            for text, (name, low) in zip(params, spec)]


def seed_param(params: List[str]) -> Tuple[List[str], int]:
    """Split an optional trailing 'sSEED' (default 0) off the parameters."""
    if params and params[-1].startswith("s"):
        (seed,) = int_params([params[-1][1:]], ("SEED", 0))
        return params[:-1], seed
    return params, 0


def int_set(text: str, name: str) -> Tuple[int, ...]:
    """'0.5.7' -> (0, 5, 7); '_' -> () (the empty set)."""
    if text == "_":
        return ()
    if not re.fullmatch(r"[0-9]+(\.[0-9]+)*", text):
        raise MaskSpecError(
            f"{name} must be '.'-separated integers >= 0 or '_' (empty), not '{_short(text)}'"
        )
    return tuple(bounded(t, name, 0) for t in text.split("."))


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
    cls, syntax = MASK_KINDS[kind]
    try:
        return cls.from_params(kind, token[len(kind):].split("-")[1:])
    except MaskSpecError as e:
        raise MaskSpecError(f"bad mask '{_short(token)}': {e} (expected {syntax})") from None
