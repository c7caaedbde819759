"""A layer's heads, frozen: what every path and every reader of a layer needs
to know about them, built once from its
:class:`~fairseq_local.attention.layout.LayerSpec` and the mask mode.

:class:`HeadPlan` says, per head, its mask and Q/K group, which heads are
learned (grouped by kind; before or after the softmax), gated, global or windowed,
and in which order the window path computes them.  The three paths
(:mod:`~fairseq_local.attention.dense`, :mod:`~fairseq_local.attention.window`,
:mod:`~fairseq_local.attention.flex`) share one signature,
:data:`AttentionPath`: ``path(q, k, v, plan, inputs) -> (out, weights)`` with
the per-call :class:`PathInputs`.
"""

from dataclasses import dataclass
from typing import Callable, Optional, Tuple, Type

import torch
from torch import Tensor

from .config import MASK_MODES
from .context import cached
from .layout import LayerSpec
from .learned.kind import LEARNED_KINDS, LearnedKind, kinds_in
from .masks import GlobalMask, HeadMask, MaskSpecError
from .masks.base import to_device


def window_of(mask: HeadMask) -> Optional[Tuple[int, int]]:
    """(lo, hi) of a window mask (offsets lo <= j − i <= hi), else None."""
    return mask.offset_window


@dataclass(frozen=True)
class WindowPlan:
    """The window heads of a layer: which heads, their Q/K groups and windows.

    ``heads``: head indices; ``groups``: each head's group index;
    ``windows``: each head's (lo, hi).  ``lo``/``hi`` bound their union."""

    heads: Tuple[int, ...]
    groups: Tuple[int, ...]
    windows: Tuple[Tuple[int, int], ...]

    @property
    def lo(self) -> int:
        return min(lo for lo, _ in self.windows)

    @property
    def hi(self) -> int:
        return max(self.lo, *(hi for _, hi in self.windows))  # a plan of empty windows keeps one offset

    def within(self, length: int) -> "WindowPlan":
        """The plan with each window cut to the offsets |o| < ``length`` that a
        sentence of ``length`` positions has (an empty one becomes (0, -1)):
        the same attention, with a width of at most 2·length − 1 whatever k."""
        b = length - 1
        if -b <= self.lo and self.hi <= b:
            return self
        cut = ((max(lo, -b), min(hi, b)) for lo, hi in self.windows)
        return WindowPlan(self.heads, self.groups, tuple(w if w[0] <= w[1] else (0, -1) for w in cut))

    @property
    def width(self) -> int:
        return self.hi - self.lo + 1

    def allowed(self, device: torch.device) -> Tensor:
        """bool (1, len(heads), 1, w): head h allows union offset lo + o
        (built once per (plan, device); do not modify it)."""
        return _allowed(self, torch.device(device))


@cached(maxsize=1024)
def _allowed(plan: WindowPlan, device: torch.device) -> Tensor:
    off = torch.arange(plan.lo, plan.hi + 1)
    lo = torch.tensor([a for a, _ in plan.windows])[:, None]
    hi = torch.tensor([b for _, b in plan.windows])[:, None]
    with torch.inference_mode(False):
        return to_device(((off >= lo) & (off <= hi))[None, :, None, :], device)


@dataclass(frozen=True)
class KindHeads:
    """A layer's heads of one learned kind: the kind (its class), the heads'
    indices and their specs, in head order."""

    kind: Type[LearnedKind]
    heads: Tuple[int, ...]
    specs: Tuple[LearnedKind, ...]


@dataclass(frozen=True)
class HeadPlan:
    """The heads of one layer (H heads, G Q/K groups), built by :meth:`build`.

    Attributes:
        masks: each head's mask.
        mode: ``post`` (mask after a softmax over all real keys, Pande et al.
            Eq. 9) or ``pre`` (softmax over the allowed keys).
        head_to_group: each head's Q/K group index (Pande et al. §4.2).
        gated_heads: heads scaled by a hard-concrete gate (Voita et al. 2019).
        fixed_masks: the fixed part of each mask: a learned head sees every
            key (:class:`GlobalMask`) before its learned mask M.
        learned: the learned heads as (head, kind) pairs, grouped by kind
            (:class:`KindHeads`, in the kinds' registration order).
        learned_heads: their heads in that order, the order of the learned M.
        pre_learned, post_learned: learned heads whose M enters before the
            softmax (C·(1 − M), the kind's ``before_softmax`` in this mode)
            or multiplies it (SparseBERT Eq. 4).
        global_heads: heads of type :class:`GlobalMask` (no mask at all).
        window: the window heads and their windows, or None.
        windowed: every head is global or a window head, so the window path
            (:func:`~fairseq_local.attention.window.window_path`) applies.
        head_order: the window path's head order (global heads, then window
            heads), or None where it is the heads' own order;
            ``order_inverse``: for each head, its place in ``head_order``.
    """

    masks: Tuple[HeadMask, ...]
    mode: str
    head_to_group: Tuple[int, ...]
    gated_heads: Tuple[int, ...]
    fixed_masks: Tuple[HeadMask, ...]
    learned: Tuple[KindHeads, ...]
    learned_heads: Tuple[int, ...]
    pre_learned: Tuple[int, ...]
    post_learned: Tuple[int, ...]
    global_heads: Tuple[int, ...]
    window: Optional[WindowPlan]
    windowed: bool
    head_order: Optional[Tuple[int, ...]]
    order_inverse: Optional[Tuple[int, ...]]

    @classmethod
    def build(cls, layer: LayerSpec, mode: str) -> "HeadPlan":
        """The plan of ``layer``'s heads under mask mode ``mode``."""
        if mode not in MASK_MODES:
            raise ValueError(f"mask_mode must be one of {MASK_MODES}, not {mode!r}")
        masks, head_to_group = layer.masks, layer.head_to_group
        H = len(masks)
        stray = [m for m in masks if m.learned and type(m) not in LEARNED_KINDS.values()]
        if stray:  # a learned spec that no kind realises would silently see every key
            raise MaskSpecError(f"'{stray[0]}' is learned, but {type(stray[0]).__name__} is not a registered "
                                f"learned kind (register_learned_kind)")
        kinds = tuple(KindHeads(k, tuple(h for h, m in enumerate(masks) if type(m) is k),
                                tuple(m for m in masks if type(m) is k)) for k in kinds_in(masks))
        learned = tuple(h for g in kinds for h in g.heads)
        pre = tuple(h for h in learned if masks[h].before_softmax(mode))
        global_heads = tuple(h for h, m in enumerate(masks) if type(m) is GlobalMask)
        windows = [(h, window_of(m)) for h, m in enumerate(masks) if window_of(m) is not None]
        window = WindowPlan(tuple(h for h, _ in windows), tuple(head_to_group[h] for h, _ in windows),
                            tuple(w for _, w in windows)) if windows else None
        windowed = len(global_heads) + len(windows) == H
        order = global_heads + tuple(h for h, _ in windows)
        head_order = None if not windowed or order == tuple(range(H)) else order
        return cls(
            masks=masks, mode=mode, head_to_group=head_to_group, gated_heads=layer.gated_heads,
            fixed_masks=tuple(GlobalMask() if m.learned else m for m in masks),
            learned=kinds, learned_heads=learned, pre_learned=pre,
            post_learned=tuple(h for h in learned if h not in pre),
            global_heads=global_heads, window=window, windowed=windowed,
            head_order=head_order,
            order_inverse=None if head_order is None else tuple(sorted(range(H), key=head_order.__getitem__)),
        )

    def heads_of(self, key: str) -> Tuple[int, ...]:
        """The heads of the learned kind ``key`` (none: ())."""
        return next((g.heads for g in self.learned if g.kind.key == key), ())

    @property
    def num_heads(self) -> int:
        return len(self.masks)

    @property
    def num_groups(self) -> int:
        return max(self.head_to_group) + 1

    @property
    def untied(self) -> bool:
        """One Q/K group per head, in head order."""
        return self.head_to_group == tuple(range(self.num_heads))


@dataclass(frozen=True)
class PathInputs:
    """What one call of a path needs besides q, k, v and the plan.

    Attributes:
        scale: the score scale, d_h^−1/2.
        padding_mask: (B, S) bool, True at padding, or None.
        attn_mask: (T, S) additive float mask, or None (dense path only).
        learned: the learned heads' M (B, len(plan.learned_heads), T, S) in
            [0, 1], or None (dense path only).
        mask_neg: C of C·(1 − M) for learned masks before the softmax.
        dropout: applied to the attention weights (a module that is the
            identity outside training), or None.
        dropout_p: the probability that ``dropout`` drops in this call (0
            outside training).
        need_weights: the path must return the weights (only the dense path can).
        detach_weights: the dense path treats the weights as constants (the
            AH-rule of conservative relevance propagation, Ali et al. 2022;
            the context's ``detach_weights``).
    """

    scale: float
    padding_mask: Optional[Tensor] = None
    attn_mask: Optional[Tensor] = None
    learned: Optional[Tensor] = None
    mask_neg: float = -1e4
    dropout: Optional[Callable[[Tensor], Tensor]] = None
    dropout_p: float = 0.0
    need_weights: bool = False
    detach_weights: bool = False


# (q (B, G, T, d_h), k (B, G, S, d_h), v (B, H, S, d_h), plan, inputs)
#   -> (out (B, H, T, d_h), weights (B, H, T, S) or None)
AttentionPath = Callable[[Tensor, Tensor, Tensor, HeadPlan, PathInputs], Tuple[Tensor, Optional[Tensor]]]
