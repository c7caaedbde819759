"""The encoder attention layout: for each layer and head, its mask and Q/K group.

Grammar (whitespace is ignored)::

    LAYOUT := ITEM (';' ITEM)*            one ITEM per layer, or a repeated layer
    ITEM   := '[' HEADS ']' ['*' N]       a layer, repeated N times
            | HEADS                       a single layer
    HEADS  := HEAD (',' HEAD)*
    HEAD   := MASK [':gate'] ['@' NAME | '@@' NAME] ['*' N]

* ``MASK`` is a mask token (``global``, ``identity``, ``prev-K``, ``next-K``,
  ``band-K``, the sparse patterns ``star``, ``bigbird-1-2-2``, ... and unions
  such as ``local-2+global-1``; see :mod:`fairseq_local.attention.masks`).
* Learned kinds: ``dam-u``, ``dam-s`` (SparseBERT's Differentiable Attention
  Mask) and ``aaa`` (Adaptive Axis Attention); ``file`` is the head's mask
  exported to ``--mask-file`` (see :mod:`fairseq_local.attention.learned`).
* ``:gate`` gives the head a hard-concrete gate (Voita et al. 2019).
* A head without a group has its own Wq/Wk.
* ``@NAME`` ties Wq/Wk among the heads of *one layer* that carry the same name
  (Pande et al., §4.2/§5.3).  In a repeated layer each copy has its own group.
* ``@@NAME`` ties Wq/Wk across *layers*: every head tagged ``@@NAME``, in any
  layer, uses one shared parameter set (Pande et al., §5.4).
* ``HEAD*N`` repeats a head N times (with the same group).

Limits, checked while parsing and *before* any repeat is expanded, so that a
huge count is a one-line :class:`LayoutError` at once (not minutes of work or
an exhausted memory): at most :data:`MAX_LAYERS` layers, :data:`MAX_HEADS`
heads in a layer and :data:`MAX_TOTAL_HEADS` heads in all (the largest
published Transformers have about 100 layers of at most 128 heads; a layout
is a tuple of per-head objects, so the total bounds its memory and parse
time).  Mask parameters are bounded by the mask registry
(:data:`fairseq_local.attention.masks.registry.MAX_PARAM`).

Examples: ``[band-1,band-2,global*6]*6`` is config (b); ``[identity@a,band-2@a,
identity@b,band-2@b,identity@c,band-2@c,identity@d,band-2@d]*6`` is config (g);
``[prev-1@@t,prev-2@@t,next-1@@t,next-2@@t,band-1@@t,band-2@@t,identity@@t*2]*6``
is config (l).
"""

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import List, Tuple

from ..errors import OneLineError
from .masks import FileMask, HeadMask, MaskSpecError, parse_mask


class LayoutError(OneLineError, ValueError):
    """A malformed layout, or one that disagrees with the model's dimensions."""


@dataclass(frozen=True)
class HeadSpec:
    """One head: its mask, and the key of the Q/K group it uses.

    Keys are ``"L{l}.H{h}"`` (own), ``"L{l}@{name}"`` (layer-local group) or
    ``"@@{name}"`` (cross-layer group)."""

    mask: HeadMask
    group: str
    gated: bool = False


@dataclass(frozen=True)
class LayerSpec:
    """The heads of one layer, and the Q/K groups they use in first-use order."""

    heads: Tuple[HeadSpec, ...]

    @property
    def groups(self) -> Tuple[str, ...]:
        return tuple(dict.fromkeys(h.group for h in self.heads))

    @property
    def head_to_group(self) -> Tuple[int, ...]:
        """For each head, the index of its group in :attr:`groups`."""
        index = {g: i for i, g in enumerate(self.groups)}
        return tuple(index[h.group] for h in self.heads)

    @property
    def masks(self) -> Tuple[HeadMask, ...]:
        return tuple(h.mask for h in self.heads)

    @property
    def gated_heads(self) -> Tuple[int, ...]:
        return tuple(h for h, spec in enumerate(self.heads) if spec.gated)


_ITEM = re.compile(r"\[(?P<body>[^\[\]]*)\](?:\*(?P<n>[^;]*))?")
_HEAD = re.compile(
    r"(?P<mask>[^@*:]+)(?P<gate>:[^@*]*)?(?:(?P<at>@@?)(?P<name>[^@*]*))?(?:\*(?P<n>.*))?"
)


MAX_LAYERS = 10_000
MAX_HEADS = 10_000
MAX_TOTAL_HEADS = 100_000
_ORDER = "MASK[:gate][@NAME|@@NAME][*N]"


def _short(text: str, width: int = 60) -> str:
    """``text``, cut to ``width`` characters with '...' (for messages)."""
    return text if len(text) <= width else text[:width - 3] + "..."


def _count(text: str, where: str, limit: int, what: str) -> int:
    """A repeat count: an integer in 1..``limit`` (checked on its digits, so a
    huge one is never converted or expanded)."""
    digits = text.lstrip("0")
    if not re.fullmatch(r"[0-9]+", text) or not digits:
        raise LayoutError(f"{where}: repeat count '{_short(text)}' must be an integer >= 1")
    if len(digits) > len(str(limit)) or int(digits) > limit:
        raise LayoutError(f"{where}: repeat count {_short(text)} is too large: a layout has at most {limit:,} {what}")
    return int(text)


def _order_problem(token: str) -> str:
    """What is out of order in a head token whose parts follow :data:`_ORDER`
    in another order ('' if nothing is)."""
    at, star, gate = token.find("@"), token.find("*"), token.find(":")
    if gate >= 0 and 0 <= at < gate:
        return "':gate' must come before the group ('@NAME' or '@@NAME')"
    if star >= 0 and (star < at or star < gate):
        return "the repeat '*N' must come last"
    return ""


def _parse_heads(body: str, where: str) -> List[Tuple[HeadMask, str, str, bool]]:
    """Parse 'HEADS' into (mask, scope, name, gated), expanding '*N' (at most
    :data:`MAX_HEADS` heads, checked before expanding)."""
    if not body:
        raise LayoutError(f"{where}: no heads")
    heads: List[Tuple[HeadMask, str, str, bool]] = []
    for token in body.split(","):
        order = _order_problem(token)
        if order:
            raise LayoutError(f"{where}: head '{_short(token)}': {order} (a head is {_ORDER})")
        m = _HEAD.fullmatch(token)
        if not m:
            raise LayoutError(f"{where}: cannot parse head '{_short(token)}'")
        try:
            mask = parse_mask(m["mask"])
        except MaskSpecError as e:
            raise LayoutError(f"{where}: head '{_short(token)}': {e}") from None
        if m["at"] and not re.fullmatch(r"[A-Za-z0-9_]+", m["name"]):
            raise LayoutError(
                f"{where}: head '{_short(token)}': group name must be letters, digits or '_'"
            )
        if m["gate"] not in (None, ":gate"):
            raise LayoutError(f"{where}: head '{_short(token)}': unknown modifier '{m['gate']}' (only ':gate')")
        n = 1
        if m["n"] is not None:
            n = _count(m["n"], f"{where}: head '{_short(token)}'", MAX_HEADS, "heads in a layer")
        if len(heads) + n > MAX_HEADS:
            raise LayoutError(f"{where}: more than {MAX_HEADS:,} heads in a layer")
        heads.extend([(mask, m["at"] or "", m["name"] or "", bool(m["gate"]))] * n)
    return heads


def parse_layout(text: str) -> Tuple[LayerSpec, ...]:
    """Parse a layout string into one :class:`LayerSpec` per layer.

    Each text is parsed once per process: the result, immutable (frozen
    specs in tuples), is cached by its whitespace-free text, so the modules,
    the resume signature, export and the commands share one parse.
    Raises :class:`LayoutError` with a one-line message naming the offending part."""
    compact = "".join(str(text).split())
    if not compact:
        raise LayoutError("empty attention layout")
    return _parse(compact)


@lru_cache(maxsize=256)
def _parse(compact: str) -> Tuple[LayerSpec, ...]:
    layers: List[LayerSpec] = []
    total = 0
    for i, item in enumerate(compact.split(";"), start=1):
        where = f"layout item {i} '{_short(item)}'"
        m = _ITEM.fullmatch(item)
        if m:
            body, n = m["body"], _count(m["n"], where, MAX_LAYERS, "layers") if m["n"] is not None else 1
        elif "[" in item or "]" in item:
            raise LayoutError(f"{where}: unbalanced or nested brackets")
        else:
            body, n = item, 1
        parsed = _parse_heads(body, where)
        if len(layers) + n > MAX_LAYERS:
            raise LayoutError(f"{where}: the layout has more than {MAX_LAYERS:,} layers")
        total += n * len(parsed)
        if total > MAX_TOTAL_HEADS:
            raise LayoutError(f"{where}: the layout has more than {MAX_TOTAL_HEADS:,} heads in all")
        for _ in range(n):
            l = len(layers)
            layers.append(
                LayerSpec(
                    tuple(
                        HeadSpec(
                            FileMask(l, h) if mask == FileMask(-1, -1) else mask,
                            {
                                "": f"L{l}.H{h}",
                                "@": f"L{l}@{name}",
                                "@@": f"@@{name}",
                            }[scope],
                            gated,
                        )
                        for h, (mask, scope, name, gated) in enumerate(parsed)
                    )
                )
            )
    return tuple(layers)


def check_layout(layers: Tuple[LayerSpec, ...], num_layers: int, num_heads: int) -> None:
    """Raise :class:`LayoutError` if the layout does not fit the encoder."""
    if len(layers) != num_layers:
        raise LayoutError(
            f"attention layout has {len(layers)} layers but the encoder has "
            f"{num_layers} (--encoder-layers)"
        )
    for l, layer in enumerate(layers, start=1):
        if len(layer.heads) != num_heads:
            raise LayoutError(
                f"attention layout layer {l} has {len(layer.heads)} heads but the "
                f"encoder has {num_heads} (--encoder-attention-heads)"
            )


def format_layout(layers: Tuple[LayerSpec, ...]) -> str:
    """Canonical text of a layout (inverse of :func:`parse_layout`)."""

    def head_text(l: int, h: int, spec: HeadSpec) -> str:
        mask = "file" if spec.mask == FileMask(l, h) else str(spec.mask)  # its own head's
        mask = f"{mask}:gate" if spec.gated else mask
        if spec.group == f"L{l}.H{h}":
            return mask
        if spec.group.startswith("@@"):
            return f"{mask}{spec.group}"
        return f"{mask}@{spec.group.split('@', 1)[1]}"

    def runs(items: List[str]) -> List[Tuple[str, int]]:
        out: List[Tuple[str, int]] = []
        for it in items:
            if out and out[-1][0] == it:
                out[-1] = (it, out[-1][1] + 1)
            else:
                out.append((it, 1))
        return out

    layer_texts = []
    for l, layer in enumerate(layers):
        heads = [head_text(l, h, s) for h, s in enumerate(layer.heads)]
        # A group that is not "own" must not be split by '*N' ambiguity: '*N'
        # repeats the same group, which is exactly what equal texts mean.
        layer_texts.append(",".join(t if n == 1 else f"{t}*{n}" for t, n in runs(heads)))
    return ";".join(f"[{t}]" if n == 1 else f"[{t}]*{n}" for t, n in runs(layer_texts))
