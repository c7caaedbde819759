"""Fixed per-head masks through PyTorch FlexAttention.

Each fixed :class:`~fairseq_local.modules.masks.HeadMask` becomes a FlexAttention
``mask_mod(b, h, q_idx, kv_idx) -> bool`` (:func:`mask_mod`), chosen by the
mask's type from a small registry (:func:`register_flex_mask`).  A mask_mod
equals ``mask.dense(pos, pos)`` for the (B, T) positions it was built with:

* offset kinds (``identity``, ``prev-k``, ``next-k``, ``band-k``, ``local-w``,
  ``diagonal``, ``no-diag``, ``logsparse``, ``strided``) test d = pos[kv] − pos[q];
* position kinds (``global-G``, ``axis``, ``star``, ``fixed``) test the
  positions themselves, and never allow a pad position (−1);
* seeded kinds (``random``, ``random-drop``, ``longformer``, ``bigbird``) and
  ``file`` masks index a lookup tensor: the per-length matrices of the batch's
  distinct lengths, or the exported matrix (SparseBERT §4.2, §4.3);
* unions OR their parts (Adaptive Axis Attention, Eq. 8).

:func:`flex_attention_heads` runs every head of a layer with one
:class:`~torch.nn.attention.flex_attention.BlockMask`:

* ``pre``: softmax over the allowed real keys; a row without one is 0.
* ``post`` (Pande et al., Eq. 9): A = M ⊙ softmax over all real keys, which is
  the ``pre`` output times exp(lse_M − lse), both log-sum-exps from FlexAttention.

On CUDA the kernel is fused by torch.compile.  On CPU it runs eagerly (an
unfused reference that materialises the scores: the compiled CPU kernel
returns no LSE), forward only; :func:`flex_available` says where it can run.
"""

import importlib.util
import warnings
from functools import lru_cache, reduce
from typing import Callable, Dict, Optional, Sequence, Tuple, Type

import torch
from torch import Tensor

from .masks import (AxisMask, BigBirdMask, DiagonalMask, FileMask, FixedMask, GlobalMask, GlobalTokensMask,
                    HeadMask, LogSparseMask, LongformerMask, MaskSpecError, NoDiagMask, OffsetMask, OrMask,
                    RandomDropMask, RandomMask, SeededMask, StarMask, StridedMask, real_positions)

try:
    from torch.nn.attention.flex_attention import AuxRequest, BlockMask, create_block_mask, flex_attention
except ImportError:  # torch without FlexAttention
    flex_attention = None

MaskMod = Callable[[Tensor, Tensor, Tensor, Tensor], Tensor]
"""A FlexAttention mask_mod: (b, h, q_idx, kv_idx) scalar int tensors -> bool."""
FlexRule = Callable[[HeadMask, Tensor, Tensor], MaskMod]
"""Builds the mask_mod of one mask from positions pos (B, T) and lengths n (B,)."""

MASK_MODES = ("post", "pre")
_RULES: Dict[Type[HeadMask], FlexRule] = {}


def register_flex_mask(*classes: Type[HeadMask]) -> Callable[[FlexRule], FlexRule]:
    """Register ``rule(mask, pos, n) -> mask_mod`` for masks of exactly these types.

    The mask_mod must equal ``mask.dense(pos, pos)`` for pos (B, T) long
    (−1 at padding) and n (B,) the real lengths; it may close over tensors
    built from pos and n (they are on pos's device)."""

    def wrapper(rule: FlexRule) -> FlexRule:
        for cls in classes:
            if cls in _RULES:
                raise ValueError(f"a FlexAttention rule for {cls.__name__} is already registered")
            _RULES[cls] = rule
        return rule

    return wrapper


def mask_mod(mask: HeadMask, pos: Tensor, n: Tensor) -> MaskMod:
    """The FlexAttention mask_mod of a fixed mask.

    Args:
        mask: a fixed (not learned) head mask.
        pos: (B, T) long, the positions the mask is evaluated on (the real
            positions of :func:`real_positions`, −1 at padding; or ``arange(T)``).
        n: (B,) long, each sentence's real length.
    Returns:
        ``f(b, h, q_idx, kv_idx)`` with ``f(b, ·, i, j) == mask.dense(pos, pos)[b, i, j]``.
    """
    rule = _RULES.get(type(mask))
    if rule is None:
        if mask.learned:
            raise NotImplementedError(f"mask '{mask}' is learned: FlexAttention takes fixed masks only")
        raise NotImplementedError(f"no FlexAttention rule for mask '{mask}' ({type(mask).__name__}); "
                                  f"add one with register_flex_mask")
    return rule(mask, pos, n)


def _isin(x: Tensor, values: Sequence[int]) -> Tensor:
    """x ∈ values, elementwise (an OR chain: torch.isin does not run under vmap)."""
    return reduce(torch.logical_or, (x == v for v in values), torch.zeros_like(x, dtype=torch.bool))


def _relative(allows: Callable[[HeadMask, Tensor], Tensor]) -> FlexRule:
    """A rule on the offset d = pos[kv] − pos[q] alone (RelativeMask.dense)."""

    def rule(mask: HeadMask, pos: Tensor, n: Tensor) -> MaskMod:
        def mod(b, h, q_idx, kv_idx):
            return allows(mask, pos[b, kv_idx] - pos[b, q_idx])

        return mod

    return rule


def _positional(allows: Callable[[HeadMask, Tensor, Tensor, Tensor], Tensor]) -> FlexRule:
    """A rule on the positions i, j and length n; pad positions (−1) are never
    allowed (PositionMask.dense)."""

    def rule(mask: HeadMask, pos: Tensor, n: Tensor) -> MaskMod:
        def mod(b, h, q_idx, kv_idx):
            i, j = pos[b, q_idx], pos[b, kv_idx]
            return allows(mask, i, j, n[b]) & (i >= 0) & (j >= 0)

        return mod

    return rule


@register_flex_mask(GlobalMask)
def _global(mask: GlobalMask, pos: Tensor, n: Tensor) -> MaskMod:
    return lambda b, h, q_idx, kv_idx: torch.ones_like(q_idx, dtype=torch.bool)


# Offset kinds: Pande et al. §4.1; AAA Eq. 6; SparseBERT §3.3, Fig. 1(b, c).
register_flex_mask(OffsetMask)(_relative(lambda m, d: (d >= m.lo) & (d <= m.hi)))
register_flex_mask(DiagonalMask)(_relative(lambda m, d: _isin(d.abs(), m.offsets)))
register_flex_mask(NoDiagMask)(_relative(lambda m, d: d != 0))
register_flex_mask(LogSparseMask)(_relative(lambda m, d: (d.abs() & (d.abs() - 1)) == 0))
register_flex_mask(StridedMask)(_relative(lambda m, d: (d.abs() <= m.stride) | (d.abs() % m.stride == 0)))

# Position kinds: AAA §2.2, Eq. 7; SparseBERT Fig. 1(a, d).
register_flex_mask(GlobalTokensMask)(_positional(lambda m, i, j, n: (i < m.count) | (j < m.count)))
register_flex_mask(AxisMask)(_positional(lambda m, i, j, n: _isin(i, m.rows) | _isin(j, m.cols)))
register_flex_mask(StarMask)(_positional(lambda m, i, j, n: ((j - i).abs() <= 1) | (i == 0) | (j == 0)))
register_flex_mask(FixedMask)(_positional(
    lambda m, i, j, n: (torch.div(i, m.length, rounding_mode="floor") == torch.div(j, m.length, rounding_mode="floor"))
    | (j % m.length >= m.length - m.columns)))


@register_flex_mask(RandomMask, RandomDropMask, LongformerMask, BigBirdMask)
def _seeded(mask: SeededMask, pos: Tensor, n: Tensor) -> MaskMod:
    """Seeded masks (SparseBERT §3.3, §4.2): the (n, n) matrices of the batch's
    distinct lengths, stacked into (L, m, m), indexed per sentence."""
    table, which = mask.length_table(n)  # (L, m, m), (B,)
    m = table.shape[-1]
    table = table.to(pos.device)

    def mod(b, h, q_idx, kv_idx):
        i, j = pos[b, q_idx], pos[b, kv_idx]
        out = table[which[b], i.clamp(0, m - 1), j.clamp(0, m - 1)] & (i < n[b])
        return out & (i >= 0) & (j >= 0)

    return mod


@register_flex_mask(FileMask)
def _file(mask: FileMask, pos: Tensor, n: Tensor) -> MaskMod:
    """Exported masks (SparseBERT §4.3, "two-stage"): matrix[:n, :n], with
    ``ends`` also the first and last rows and columns."""
    entry = mask.entry()
    table = entry["matrix"].to(device=pos.device, dtype=torch.bool)
    size, ends = table.shape[0], bool(entry["ends"])
    if int(n.max()) > size:
        raise MaskSpecError(f"a sentence of {int(n.max())} tokens is longer than mask {mask} of "
                            f"'{mask.path}' ({size} positions)")

    def mod(b, h, q_idx, kv_idx):
        i, j = pos[b, q_idx], pos[b, kv_idx]
        out = table[i.clamp(0, size - 1), j.clamp(0, size - 1)]
        if ends:
            last = n[b] - 1
            out = out | (i == 0) | (j == 0) | (i == last) | (j == last)
        return out & (i >= 0) & (j >= 0)

    return mod


@register_flex_mask(OrMask)
def _union(mask: OrMask, pos: Tensor, n: Tensor) -> MaskMod:
    """A+B+... (Adaptive Axis Attention, Eq. 8); pad positions stay out unless
    every part is relative (OrMask.dense)."""
    parts = [mask_mod(p, pos, n) for p in mask.parts]
    guard = not mask.relative

    def mod(b, h, q_idx, kv_idx):
        out = reduce(torch.logical_or, (f(b, h, q_idx, kv_idx) for f in parts))
        if guard:
            out = out & (pos[b, q_idx] >= 0) & (pos[b, kv_idx] >= 0)
        return out

    return mod


def flex_positions(masks: Sequence[HeadMask], key_padding_mask: Optional[Tensor], batch: int, length: int,
                   device: torch.device) -> Tuple[Tensor, Tensor]:
    """The positions and lengths a layer's masks are evaluated on, as the dense
    path (``LocalMultiheadAttention.fixed_mask``) takes them.

    If every mask is relative, padded indices ``arange(T)`` (offsets between
    real tokens are the same, fairseq pads contiguously); otherwise the real
    positions (−1 at padding).

    Returns:
        pos (B, T) long and n (B,) long, the real lengths.
    """
    if key_padding_mask is None:
        return (torch.arange(length, device=device).expand(batch, length),
                torch.full((batch,), length, dtype=torch.long, device=device))
    pad = key_padding_mask.to(device)
    n = (~pad).long().sum(-1)
    if all(m.relative for m in masks):
        return torch.arange(length, device=device).expand(batch, length), n
    return real_positions(pad, length).to(device), n


def flex_available(device: torch.device, needs_grad: bool) -> Optional[str]:
    """None when :func:`flex_attention_heads` can run on ``device`` (with a
    backward if ``needs_grad``), else a one-line reason why not."""
    device = torch.device(device)
    version = torch.__version__.split("+")[0]
    if flex_attention is None:
        return f"FlexAttention needs torch >= 2.5 (this is torch {version}); use --attn-impl window or dense"
    if device.type not in ("cuda", "cpu", "xpu", "hpu", "mps"):
        return f"FlexAttention does not run on {device.type} devices; use --attn-impl window or dense"
    if needs_grad and device.type in ("cpu", "mps"):
        return (f"FlexAttention has no backward on {device.type.upper()} in torch {version}; "
                f"use --attn-impl window or dense")
    if device.type == "cuda" and importlib.util.find_spec("triton") is None:
        return "FlexAttention on CUDA needs Triton (torch.compile), which is not installed; use --attn-impl dense"
    return None


@lru_cache(maxsize=None)
def _compiled_flex() -> Callable[..., object]:
    # Lengths change per batch: dynamo marks them dynamic after the first recompile.
    return torch.compile(flex_attention)


def _flex(q: Tensor, k: Tensor, v: Tensor, block_mask: Optional["BlockMask"], scale: float,
          lse: bool) -> Tuple[Tensor, Optional[Tensor]]:
    """FlexAttention, fused by torch.compile on CUDA and eager elsewhere (on CPU
    the compiled kernel returns no LSE).  Returns out (B, H, T, Ev) and, with
    ``lse``, the natural-log LSE (B, H, T) in float32 (−inf on empty rows)."""
    aux = AuxRequest(lse=True) if lse else None
    if q.device.type == "cuda":
        res = _compiled_flex()(q, k, v, block_mask=block_mask, scale=scale, return_aux=aux)
    else:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="flex_attention called without torch.compile")
            res = flex_attention(q, k, v, block_mask=block_mask, scale=scale, return_aux=aux)
    return (res[0], res[1].lse) if lse else (res, None)


def head_block_mask(masks: Sequence[HeadMask], pos: Tensor, n: Tensor,
                    key_padding_mask: Optional[Tensor]) -> "BlockMask":
    """One BlockMask for all heads: head h allows ``masks[h]`` on real keys.

    Args:
        masks: H fixed masks; pos (B, T), n (B,) from :func:`flex_positions`;
        key_padding_mask: (B, T) bool or None.
    Returns:
        a BlockMask of shape (B or 1, H or 1, T, T): 1 (broadcast) over the
        batch without padding, over the heads when they share one mask.
    """
    kinds = list(dict.fromkeys(masks))  # distinct masks, first-use order
    mods = [mask_mod(m, pos, n) for m in kinds]
    which = torch.tensor([kinds.index(m) for m in masks], device=pos.device)
    real = None if key_padding_mask is None else ~key_padding_mask.to(pos.device)

    def mod(b, h, q_idx, kv_idx):
        if len(mods) == 1:
            out = mods[0](b, h, q_idx, kv_idx)
        else:
            u = which[h]
            out = reduce(torch.logical_or, ((u == c) & f(b, h, q_idx, kv_idx) for c, f in enumerate(mods)))
        return out if real is None else out & real[b, kv_idx]

    T = pos.shape[-1]
    B = None if real is None else real.shape[0]
    H = None if len(mods) == 1 else len(masks)
    return create_block_mask(mod, B, H, T, T, device=pos.device)


def flex_attention_heads(q: Tensor, k: Tensor, v: Tensor, masks: Sequence[HeadMask], head_to_group: Sequence[int],
                         key_padding_mask: Optional[Tensor], mode: str, scale: float) -> Tensor:
    """Masked multi-head attention with per-head fixed masks and shared Q/K groups.

    Args:
        q, k: (B, G, T, dh), one per Q/K group; v: (B, H, T, dh), one per head.
        masks: H fixed masks; head h uses ``masks[h]`` and group ``head_to_group[h]``.
        key_padding_mask: (B, T) bool, True at padding, or None.
        mode: ``pre`` (softmax over the allowed real keys; rows with none are 0)
            or ``post`` (Pande et al., Eq. 9: mask ⊙ softmax over all real keys).
        scale: the score scale, d_h^−1/2.
    Returns:
        (B, H, T, dh), equal to the dense ``attention_probs(...) @ v`` (masks
        taken as :func:`flex_positions` says) to float rounding; ``post``
        adds a relative error of about one ulp of |lse| (the log-sum-exps).
    """
    B, G, T, _ = q.shape
    H = v.shape[1]
    if mode not in MASK_MODES:
        raise ValueError(f"mode must be one of {MASK_MODES}, not {mode!r}")
    if len(masks) != H or len(head_to_group) != H:
        raise ValueError(f"{H} heads need {H} masks and groups, got {len(masks)} and {len(head_to_group)}")
    if not torch.is_grad_enabled():
        q, k, v = q.detach(), k.detach(), v.detach()
    reason = flex_available(q.device, any(t.requires_grad for t in (q, k, v)))
    if reason is not None:
        raise RuntimeError(reason)
    if key_padding_mask is not None and not key_padding_mask.any():
        key_padding_mask = None
    pos, n = flex_positions(masks, key_padding_mask, B, T, q.device)
    groups = torch.tensor(head_to_group, dtype=torch.long, device=q.device)
    tied = tuple(head_to_group) != tuple(range(H)) or G != H
    qh, kh = (q.index_select(1, groups), k.index_select(1, groups)) if tied else (q, k)
    block = head_block_mask(masks, pos, n, key_padding_mask)
    if mode == "pre" or all(m.is_global for m in masks):
        return _flex(qh, kh, v, block, scale, lse=False)[0]
    # Post (Pande et al., Eq. 9): Σ_j M_ij e^{s_ij − lse_i} v_j = out_M · e^{lse_M − lse},
    # lse over all real keys, taken once per Q/K group.
    out, lse_masked = _flex(qh, kh, v, block, scale, lse=True)
    full = None
    if key_padding_mask is not None:
        real = ~key_padding_mask.to(q.device)
        full = create_block_mask(lambda b, h, q_idx, kv_idx: real[b, kv_idx], B, None, T, T, device=q.device)
    lse = _flex(q, k, torch.zeros_like(k), full, scale, lse=True)[1]  # v unused (and must not alias k)
    if tied:
        lse = lse.index_select(1, groups)
    factor = torch.exp(lse_masked - lse).masked_fill(torch.isneginf(lse_masked), 0.0)
    return (out.float() * factor.unsqueeze(-1)).to(out.dtype)
