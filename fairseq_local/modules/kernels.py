"""Fast attention for heads whose mask has a structured form.

:class:`~fairseq_local.modules.attention.LocalMultiheadAttention` keeps each
head's mask as data (:mod:`fairseq_local.modules.masks`).  The functions here
turn that structure into less work; each gives the dense path's result
(:meth:`LocalMultiheadAttention.attention_probs`) to float rounding, forward
and backward:

* **Window heads** (``identity``, ``prev-k``, ``next-k``, ``band-k``,
  ``local-w``: an :class:`~fairseq_local.modules.masks.OffsetMask` allowing
  the offsets ``lo <= j − i <= hi``) read only the w = hi − lo + 1 keys of
  their window: scores, softmax and output take O(n·w·d) time and O(n·w)
  memory (:func:`window_attention`).  Offsets are taken on padded indices,
  which equal offsets between real tokens because fairseq pads contiguously.
* ``pre`` mode: the softmax runs inside the window.
* ``post`` mode (Pande et al., Eq. 9): A_ij = M_ij · exp(s_ij − lse_i) with
  lse_i the log-sum-exp of row i over *all* real keys.  lse comes from
  PyTorch's fused CPU flash kernel (:class:`GroupLSE`), whose backward is two
  more fused calls, so no n×n tensor is ever allocated.
* **Tied heads** (Pande et al., §4.2): the window scores, and in ``post``
  mode lse and exp(s − lse), are computed once per Q/K group and masked per
  head; the backward of lse is taken once per group, for the sum of its heads.
* **Global heads** of a layer run through the fused
  :func:`torch.nn.functional.scaled_dot_product_attention`.
"""

from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor

from .masks import HeadMask, OffsetMask

_flash = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
FLASH_DTYPES = (torch.float32, torch.bfloat16)


def window_of(mask: HeadMask) -> Optional[Tuple[int, int]]:
    """(lo, hi) of a window mask (offsets lo <= j − i <= hi), else None."""
    if isinstance(mask, OffsetMask) and not mask.learned:
        return mask.lo, mask.hi
    return None


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
        return max(hi for _, hi in self.windows)

    @property
    def width(self) -> int:
        return self.hi - self.lo + 1

    def allowed(self, device: torch.device) -> Tensor:
        """bool (1, len(heads), 1, w): head h allows union offset lo + o."""
        off = torch.arange(self.lo, self.hi + 1, device=device)
        lo = torch.tensor([a for a, _ in self.windows], device=device)[:, None]
        hi = torch.tensor([b for _, b in self.windows], device=device)[:, None]
        return ((off >= lo) & (off <= hi))[None, :, None, :]


def _with_bias(queries: Tensor, keys: Tensor, values: Tensor, bias: Optional[Tensor], scale: float):
    """Flash attention with an additive per-key bias (B, G, S), or None.

    The bias rides in one extra head coordinate (queries 1, keys bias/scale)
    rather than in ``attn_mask``, which the kernel would expand to (T, S)."""
    if bias is None:
        return _flash(queries, keys, values, scale=scale)
    one = torch.ones_like(queries[..., :1])
    queries = torch.cat([queries, one], -1)
    keys = torch.cat([keys, (bias / scale).unsqueeze(-1)], -1)
    values = torch.cat([values, torch.zeros_like(values[..., :1])], -1)
    out, lse = _flash(queries, keys, values, scale=scale)
    return out[..., :-1], lse


class GroupLSE(torch.autograd.Function):
    """lse_i = log Σ_k exp(scale · q_i·k_k) over the real keys k, per group.

    Forward: the fused CPU flash kernel (it returns lse), with V = K so that
    its output P·K is the q-gradient's factor.  Backward, for an upstream
    gradient g (B, G, T), with P_ik = exp(s_ik − lse_i):
    ∂/∂q_i = scale · g_i Σ_k P_ik k_k (= scale · g_i (P K)_i) and
    ∂/∂k_k = scale · Σ_i g_i P_ik q_i, the latter as one more fused call with
    queries and keys swapped and −lse_i as a per-key bias:
    Σ_i exp(s_ik − lse_i) x_i = exp(lse'_k) · softmax-average'_k(x).
    Neither pass allocates a (T, T) tensor.
    """

    @staticmethod
    def forward(ctx, q: Tensor, k: Tensor, key_pad: Optional[Tensor], scale: float) -> Tensor:
        """q, k: (B, G, T, dh); key_pad: (B, T) bool or None.  Returns (B, G, T)."""
        bias = None
        if key_pad is not None:  # a large finite negative: exp gives exactly 0, never inf - inf
            bias = (key_pad.to(q.dtype) * -1e9)[:, None, :].expand(q.shape[:3])
        pk, lse = _with_bias(q, k, k, bias, scale)
        ctx.save_for_backward(q, k, key_pad, pk, lse)
        ctx.scale = scale
        return lse.to(q.dtype)

    @staticmethod
    def backward(ctx, g: Tensor):
        q, k, key_pad, pk, lse = ctx.saved_tensors
        scale = ctx.scale
        g = g.to(q.dtype)
        dq = (scale * g).unsqueeze(-1) * pk
        # keys k as queries over the rows i, each row's bias −lse_i
        avg, lse_t = _with_bias(k, q, g.unsqueeze(-1) * q, -lse.to(q.dtype), scale)
        dk = (scale * lse_t.exp()).unsqueeze(-1).to(q.dtype) * avg
        if key_pad is not None:
            dk = dk.masked_fill(key_pad[:, None, :, None], 0.0)
        return dq, dk, None, None


def group_lse(q: Tensor, k: Tensor, key_pad: Optional[Tensor], scale: float) -> Tensor:
    """Row log-sum-exp of the scores over real keys, (B, G, T) (:class:`GroupLSE`)."""
    if q.dtype not in FLASH_DTYPES or q.device.type != "cpu":
        scores = torch.matmul(q * scale, k.transpose(-1, -2))
        if key_pad is not None:
            scores = scores.masked_fill(key_pad[:, None, None, :], float("-inf"))
        return torch.logsumexp(scores.float(), -1).to(q.dtype)
    return GroupLSE.apply(q.contiguous(), k.contiguous(), key_pad, scale)


def _shifted(x: Tensor, lo: int, hi: int) -> Tuple[Tensor, int]:
    """x (B, *, T, d) padded with zeros along T so that the key at offset
    lo + o from query t sits at index t + o + start; returns (padded, start)."""
    front, back = max(0, -lo), max(0, hi)
    return F.pad(x, (0, 0, front, back)), lo + front


def window_keys(key_pad: Optional[Tensor], B: int, T: int, lo: int, hi: int, device: torch.device) -> Tensor:
    """bool (B, 1, T, w): whether the key at offset lo + o from query t exists
    (0 <= t + lo + o < T) and is a real token."""
    idx = torch.arange(T, device=device)[:, None] + torch.arange(lo, hi + 1, device=device)  # (T, w)
    inside = (idx >= 0) & (idx < T)
    if key_pad is None:
        return inside.expand(B, 1, T, hi - lo + 1)
    return ((~key_pad)[:, idx.clamp(0, T - 1)] & inside)[:, None]


def window_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    plan: WindowPlan,
    key_pad: Optional[Tensor],
    mode: str,
    scale: float,
    dropout=None,
) -> Tensor:
    """Attention of the window heads of ``plan``.

    Args:
        q, k: (B, G, T, dh) per Q/K group; v: (B, len(plan.heads), T, dh),
            the window heads' values in plan order.
        key_pad: (B, T) bool, True at padding, or None.
        mode: ``pre`` (softmax inside the window) or ``post`` (softmax over
            all real keys, then the window; Pande et al., Eq. 9).
        dropout: applied to the attention weights (a module), or None.
    Returns:
        (B, len(plan.heads), T, dh).  A query without an allowed key gets 0.
    """
    B, G, T, _ = q.shape
    used = sorted(set(plan.groups))
    if used != list(range(G)):  # only the window heads' groups (a mixed layer's global ones run elsewhere)
        index = torch.tensor(used, device=q.device)
        q, k = q.index_select(1, index), k.index_select(1, index)
        plan = WindowPlan(plan.heads, tuple(used.index(g) for g in plan.groups), plan.windows)
    lo, w = plan.lo, plan.width
    kp, start = _shifted(k, lo, plan.hi)
    vp, _ = _shifted(v, lo, plan.hi)
    # Scores of the union window, once per group: (B, G, T, w).
    scores = torch.stack([(q * kp[:, :, start + o:start + o + T]).sum(-1) for o in range(w)], -1) * scale
    real = window_keys(key_pad, B, T, lo, plan.hi, q.device)  # (B, 1, T, w)
    allowed = plan.allowed(q.device) & real  # (B, Hw, T, w)
    # group -> head: a broadcast for one group, nothing for one group per head, else a gather
    as_heads = scores.shape[1] == 1 or plan.groups == tuple(range(scores.shape[1]))
    groups = torch.tensor(plan.groups, device=q.device)
    if mode == "post":
        lse = group_lse(q, k, key_pad, scale)
        # exp(s − lse) once per group; keys outside the sentence are −inf first (never inf · 0)
        probs = torch.exp(scores.masked_fill(~real, float("-inf")) - lse.unsqueeze(-1))  # (B, G, T, w)
        probs = probs if as_heads else probs.index_select(1, groups)
        probs = probs * allowed
    else:
        s = scores if as_heads else scores.index_select(1, groups)
        neg = max(torch.finfo(s.dtype).min, torch.finfo(torch.float32).min)
        probs = F.softmax(s.masked_fill(~allowed, neg), dim=-1, dtype=torch.float32).type_as(s) * allowed
    if dropout is not None:
        probs = dropout(probs)
    out = probs[..., 0, None] * vp[:, :, start:start + T]
    for o in range(1, w):
        out = out + probs[..., o, None] * vp[:, :, start + o:start + o + T]
    return out


def global_attention(q: Tensor, k: Tensor, v: Tensor, groups: Sequence[int], key_pad: Optional[Tensor],
                     scale: float, dropout_p: float = 0.0) -> Tensor:
    """Unmasked heads through the fused kernel.

    q, k: (B, G, T, dh); v: (B, Hg, T, dh) of the heads, whose groups are
    ``groups``; returns (B, Hg, T, dh)."""
    if list(groups) != list(range(q.shape[1])):
        index = torch.tensor(list(groups), device=q.device)
        q, k = q.index_select(1, index), k.index_select(1, index)
    keep = None if key_pad is None else ~key_pad[:, None, None, :]
    return F.scaled_dot_product_attention(q, k, v, attn_mask=keep, dropout_p=dropout_p, scale=scale)
