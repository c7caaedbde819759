"""The window path: attention of layers whose heads are all global or window
heads, in less work than the dense path.

:class:`~fairseq_local.attention.module.LocalMultiheadAttention` keeps each
head's mask as data (:mod:`fairseq_local.attention.masks`); its
:class:`~fairseq_local.attention.plan.HeadPlan` says which heads are windows.
:func:`window_path` (the path signature of
:mod:`~fairseq_local.attention.plan`) and the functions it runs give the dense
path's result (:func:`fairseq_local.attention.dense.attention_probs`) to
float rounding, forward and backward:

* **Window heads** (``identity``, ``prev-k``, ``next-k``, ``band-k``,
  ``local-w``: an :class:`~fairseq_local.attention.masks.OffsetMask` allowing
  the offsets ``lo <= j − i <= hi``) read only the w = hi − lo + 1 keys of
  their window: scores, softmax and output take O(n·w·d) time and O(n·w)
  memory (:func:`window_attention`).  Offsets are taken on padded indices,
  which equal offsets between real tokens because fairseq pads contiguously.
* ``pre`` mode: the softmax runs inside the window.
* ``post`` mode (Pande et al., Eq. 9): A_ij = M_ij · exp(s_ij − lse_i) with
  lse_i the log-sum-exp of row i over *all* real keys (:func:`group_lse`).
* **Tied heads** (Pande et al., §4.2): the window scores, and in ``post``
  mode lse and exp(s − lse), are computed once per Q/K group and masked per
  head; the backward of lse is taken once per group, for the sum of its heads.
* **Global heads** of a layer run through the fused
  :func:`torch.nn.functional.scaled_dot_product_attention`.

Memory.  ``pre`` mode holds no n×n tensor on any device.  ``post`` mode
holds none on the CPU, where lse comes from PyTorch's fused flash kernel
(:class:`GroupLSE`, forward and backward, fp32/bf16, fp16 upcast to fp32).
Off the CPU it may: on CUDA, FlexAttention's LSE (``flex.flex_lse``) is fused,
but its BlockMask is built by ``create_block_mask``, which evaluates the
real-key mask as a dense bool (B, 1, n, n) tensor (once per forward pass and
padding mask); elsewhere, and on CUDA without FlexAttention,
:class:`ChunkedLSE` holds (B, G, rows, n) score blocks with up to 2^24
entries, a whole (B, G, n, n) block when B·G·n² is below that.

Mixed precision: whatever the input dtype, the window scores, lse,
exp(s − lse), the ``pre`` softmax and the weighted sum over the window are
float32 (as the dense path's softmax); only the output is cast back to the
value dtype.  fp16/bf16 q and k are upcast (O(n·d)) so that the window's and
the lse's gradients cancel in fp32 before they are rounded; on CUDA the LSE
pass itself runs on the input-dtype q/k (FlexAttention on tensor cores) and
returns fp32.  Index tensors are built once per device (cached), so a forward
copies no Python list to the device and reads no device value back.
"""

from typing import Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor

from .fallbacks import announce
from .masks.base import constant
from .plan import HeadPlan, PathInputs, WindowPlan

_flash = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
_HALF = (torch.float16, torch.bfloat16)
# Dtypes GroupLSE runs the fused CPU kernel in; fp16 is upcast to fp32 first
# (the padding bias −1e9 and the backward's −lse bias do not fit fp16's range).
CPU_FLASH_DTYPES = (torch.float32, torch.bfloat16)

# --attn-impl auto: below this many positions a layer with window heads runs the dense
# path, whose few large operations cost less than the window's many small ones; in post
# mode the window path also pays the row normaliser's extra pass.  CPU: crossovers
# measured on a 2-core CPU (`fairseq-local benchmark kernels`).  Other devices (CUDA):
# NOT MEASURED ON A GPU YET -- guesses: a GPU runs the dense matmuls near peak and pays a
# launch per window offset, so the window path wins later; post mode adds a FlexAttention
# LSE pass.  Replace with `fairseq-local benchmark kernels --device cuda` numbers.
AUTO_MIN_LEN_CPU = {"pre": 128, "post": 512}
AUTO_MIN_LEN_GPU = {"pre": 1024, "post": 2048}


_FAST_DTYPES = {
    # fp32/bf16 through the fused CPU kernel, fp16 upcast to fp32 for it (measured on a 2-core
    # CPU, one thread: fp16's window path beats its dense path from 128 positions on, 2-3x at 1024)
    "cpu": (torch.float32, torch.bfloat16, torch.float16),
    "cuda": (torch.float32, torch.float16, torch.bfloat16),  # FlexAttention LSE in every one
}


def fast_dtypes(device: torch.device) -> Tuple[torch.dtype, ...]:
    """Dtypes the window path takes on ``device``; other dtypes (fp64) run dense.

    CPU: fp32 and bf16 run the fused CPU kernel, fp16 too after an fp32
    upcast of q/k (the kernel's biases do not fit fp16).  CUDA: fp32, fp16,
    bf16 (FlexAttention's LSE).  Other devices: the same three, through
    :class:`ChunkedLSE`."""
    return _FAST_DTYPES.get(torch.device(device).type, (torch.float32, torch.float16, torch.bfloat16))


def auto_min_len(mode: str, device: torch.device) -> int:
    """``--attn-impl auto``: the shortest input for which a layer with window
    heads takes the window path, by mask mode (``pre``/``post``) and device
    (CPU: measured; elsewhere: not measured on a GPU yet, see AUTO_MIN_LEN_GPU)."""
    table = AUTO_MIN_LEN_CPU if torch.device(device).type == "cpu" else AUTO_MIN_LEN_GPU
    return table[mode]


def _with_bias(queries: Tensor, keys: Tensor, values: Tensor, bias: Optional[Tensor], scale: float):
    """Flash attention with an additive per-key bias (B, G, S), or None.

    The bias rides in extra head coordinates (queries 1, keys bias/scale)
    rather than in ``attn_mask``, which the kernel would expand to (T, S).
    Below fp32 it rides as two coordinates, hi = bias/scale rounded and
    lo = the rest: the kernel sums products in fp32, so the bias (−lse in the
    backward, ~tens) keeps fp32 precision instead of bf16's 2⁻⁸."""
    if bias is None:
        return _flash(queries, keys, values, scale=scale)
    b = bias.float() / scale
    parts = [b.to(keys.dtype)]
    if keys.dtype != torch.float32:
        parts.append((b - parts[0].float()).to(keys.dtype))
    c = len(parts)
    queries = torch.cat([queries, torch.ones_like(queries[..., :1]).expand(*queries.shape[:-1], c)], -1)
    keys = torch.cat([keys, torch.stack(parts, -1)], -1)
    values = torch.cat([values, torch.zeros_like(values[..., :1]).expand(*values.shape[:-1], c)], -1)
    out, lse = _flash(queries, keys, values, scale=scale)
    return out[..., :-c], lse


class GroupLSE(torch.autograd.Function):
    """lse_i = log Σ_k exp(scale · q_i·k_k) over the real keys k, per group.

    Forward: the fused CPU flash kernel (it returns lse in fp32), with V = K
    so that its output P·K is the q-gradient's factor.  Backward, for an
    upstream gradient g (B, G, T), with P_ik = exp(s_ik − lse_i):
    ∂/∂q_i = scale · g_i Σ_k P_ik k_k (= scale · g_i (P K)_i) and
    ∂/∂k_k = scale · Σ_i g_i P_ik q_i, the latter as one more fused call with
    queries and keys swapped and −lse_i as a per-key bias:
    Σ_i exp(s_ik − lse_i) x_i = exp(lse'_k) · softmax-average'_k(x).
    Neither pass allocates a (T, T) tensor.  q, k: fp32 or bf16
    (:data:`CPU_FLASH_DTYPES`); the scalings run in fp32.
    """

    @staticmethod
    def forward(ctx, q: Tensor, k: Tensor, key_pad: Optional[Tensor], scale: float) -> Tensor:
        """q, k: (B, G, T, dh); key_pad: (B, T) bool or None.  Returns float32 (B, G, T)."""
        bias = None
        if key_pad is not None:  # a large finite negative: exp gives exactly 0, never inf - inf
            bias = (key_pad.float() * -1e9)[:, None, :].expand(q.shape[:3])
        pk, lse = _with_bias(q, k, k, bias, scale)
        ctx.save_for_backward(q, k, key_pad, pk, lse)
        ctx.scale = scale
        return lse.float()

    @staticmethod
    def backward(ctx, g: Tensor):
        q, k, key_pad, pk, lse = ctx.saved_tensors
        scale = ctx.scale
        g = g.float()
        dq = ((scale * g).unsqueeze(-1) * pk.float()).to(q.dtype)
        # keys k as queries over the rows i, each row's bias −lse_i
        avg, lse_t = _with_bias(k, q, (g.unsqueeze(-1) * q.float()).to(q.dtype), -lse, scale)
        dk = (scale * lse_t.float().exp()).unsqueeze(-1) * avg.float()
        if key_pad is not None:
            dk = dk.masked_fill(key_pad[:, None, :, None], 0.0)
        return dq, dk.to(k.dtype), None, None


class ChunkedLSE(torch.autograd.Function):
    """lse (B, G, T) as :class:`GroupLSE`, in plain tensor ops on any device
    and dtype: the scores of ``rows`` queries at a time, (B, G, rows, T), in
    the accumulation dtype (fp32, fp64 for fp64), recomputed block by block in
    the backward.  Nothing of size T×T is kept; the peak is one block."""

    @staticmethod
    def _scores(q: Tensor, k: Tensor, key_pad: Optional[Tensor], scale: float) -> Tensor:
        s = torch.matmul(q * scale, k.transpose(-1, -2))
        if key_pad is not None:  # finite: a row of padding gives lse = min, never inf - inf
            s = s.masked_fill(key_pad[:, None, None, :], torch.finfo(s.dtype).min)
        return s

    @staticmethod
    def forward(ctx, q: Tensor, k: Tensor, key_pad: Optional[Tensor], scale: float, rows: int) -> Tensor:
        """q, k: (B, G, T, dh); key_pad: (B, T) bool or None.  Returns (B, G, T) fp32 (fp64 for fp64)."""
        acc = torch.promote_types(q.dtype, torch.float32)
        k32 = k.to(acc)
        lse = torch.cat([torch.logsumexp(ChunkedLSE._scores(q[:, :, r:r + rows].to(acc), k32, key_pad, scale), -1)
                         for r in range(0, q.shape[2], rows)], -1)
        ctx.save_for_backward(q, k, key_pad, lse)
        ctx.scale, ctx.rows = scale, rows
        return lse

    @staticmethod
    def backward(ctx, g: Tensor):
        q, k, key_pad, lse = ctx.saved_tensors
        scale, rows = ctx.scale, ctx.rows
        k32 = k.to(lse.dtype)
        dq, dk = [], torch.zeros_like(k32)
        for r in range(0, q.shape[2], rows):
            qr = q[:, :, r:r + rows].to(lse.dtype)
            p = torch.exp(ChunkedLSE._scores(qr, k32, key_pad, scale) - lse[:, :, r:r + rows, None])
            if key_pad is not None:
                p = p.masked_fill(key_pad[:, None, None, :], 0.0)
            p = p * (scale * g[:, :, r:r + rows, None].to(p.dtype))  # (B, G, rows, T)
            dq.append(torch.matmul(p, k32))
            dk = dk + torch.matmul(p.transpose(-1, -2), qr)
        return torch.cat(dq, 2).to(q.dtype), dk.to(k.dtype), None, None, None


def lse_route(device: torch.device, dtype: torch.dtype, needs_grad: bool) -> str:
    """Which kernel :func:`group_lse` takes: ``group`` (:class:`GroupLSE`, CPU
    and meta), ``flex`` (FlexAttention, CUDA) or ``chunked``
    (:class:`ChunkedLSE`: fp64, other devices, and CUDA where FlexAttention
    cannot run, which is announced once with the reason)."""
    kind = torch.device(device).type
    if kind in ("cpu", "meta") and dtype in CPU_FLASH_DTYPES + (torch.float16,):
        return "group"
    if kind == "cuda" and dtype != torch.float64:
        from .flex import flex_available  # lazily: flex imports torch's FlexAttention
        reason = flex_available(device, needs_grad)
        if reason is None:
            return "flex"
        announce(("chunked-lse", reason), f"post-mode window heads on CUDA take their row normaliser from "
                 f"ChunkedLSE, which re-computes (rows, T) score blocks, not from FlexAttention: {reason}")
    return "chunked"


def group_lse(q: Tensor, k: Tensor, key_pad: Optional[Tensor], scale: float) -> Tensor:
    """Row log-sum-exp of the scores over real keys, float32 (B, G, T)
    (float64 for float64 inputs); q, k: (B, G, T, dh), key_pad: (B, T) or None.

    By :func:`lse_route`: CPU (and meta): :class:`GroupLSE`, fp16 upcast to
    fp32.  CUDA: ``flex.flex_lse`` (FlexAttention), or :class:`ChunkedLSE`
    where FlexAttention cannot run.  Elsewhere, and for fp64: :class:`ChunkedLSE`.
    None of them builds a (B, G, T, T) tensor."""
    route = lse_route(q.device, q.dtype, torch.is_grad_enabled() and (q.requires_grad or k.requires_grad))
    if route == "group":
        if q.dtype == torch.float16:
            q, k = q.float(), k.float()
        return GroupLSE.apply(q.contiguous(), k.contiguous(), key_pad, scale)
    if route == "flex":
        from .flex import flex_lse
        return flex_lse(q, k, key_pad, scale).float()
    B, G, T, _ = q.shape
    rows = max(1, min(T, (1 << 24) // max(1, B * G * T)))  # ≤ 16M scores a block
    return ChunkedLSE.apply(q, k, key_pad, scale, rows)


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
        (B, len(plan.heads), T, dh) in v's dtype.  A query without an allowed
        key gets 0.  Scores, probabilities and the weighted sum are float32
        for fp16/bf16 inputs (fp64 for fp64).
    """
    B, G, T, _ = q.shape
    acc = torch.promote_types(q.dtype, torch.float32)
    used = tuple(sorted(set(plan.groups)))
    if used != tuple(range(G)):  # only the window heads' groups (a mixed layer's global ones run elsewhere)
        index = constant(used, q.device)
        q, k = q.index_select(1, index), k.index_select(1, index)
        plan = WindowPlan(plan.heads, tuple(used.index(g) for g in plan.groups), plan.windows)
    plan = plan.within(T)
    q_in, k_in = q, k
    if q.dtype in _HALF:  # fp32 scores: products unrounded, and k's gradients summed in fp32
        q, k = q.to(acc), k.to(acc)
    lo, w = plan.lo, plan.width
    kp, start = _shifted(k, lo, plan.hi)
    vp, _ = _shifted(v, lo, plan.hi)
    # Scores of the union window, once per group: (B, G, T, w), in `acc`.
    scores = torch.stack([(q * kp[:, :, start + o:start + o + T]).sum(-1) for o in range(w)], -1)
    scores = scores * scale
    real = window_keys(key_pad, B, T, lo, plan.hi, q.device)  # (B, 1, T, w)
    allowed = plan.allowed(q.device) & real  # (B, Hw, T, w)
    # group -> head: a broadcast for one group, nothing for one group per head, else a gather
    as_heads = scores.shape[1] == 1 or plan.groups == tuple(range(scores.shape[1]))
    groups = None if as_heads else constant(plan.groups, q.device)
    if mode == "post":
        # CUDA: FlexAttention in the input dtype (tensor cores); elsewhere the fp32 copies
        lse = group_lse(*((q_in, k_in) if q.device.type == "cuda" else (q, k)), key_pad, scale).to(acc)
        # exp(s − lse) once per group; keys outside the sentence are −inf first (never inf · 0)
        probs = torch.exp(scores.masked_fill(~real, float("-inf")) - lse.unsqueeze(-1))  # (B, G, T, w)
        probs = probs if as_heads else probs.index_select(1, groups)
        probs = probs * allowed
    else:
        s = scores if as_heads else scores.index_select(1, groups)
        neg = max(torch.finfo(acc).min, torch.finfo(torch.float32).min)
        probs = F.softmax(s.masked_fill(~allowed, neg), dim=-1, dtype=acc) * allowed
    if dropout is not None:
        probs = dropout(probs)
    # Σ_o p_o · v_o in `acc` (the probabilities' dtype); v is read in its own dtype.
    out = probs[..., 0, None] * vp[:, :, start:start + T]
    for o in range(1, w):
        out = out + probs[..., o, None] * vp[:, :, start + o:start + o + T]
    return out.to(v.dtype)


def global_attention(q: Tensor, k: Tensor, v: Tensor, groups: Sequence[int], key_pad: Optional[Tensor],
                     scale: float, dropout_p: float = 0.0) -> Tensor:
    """Unmasked heads through the fused kernel.

    q, k: (B, G, T, dh); v: (B, Hg, T, dh) of the heads, whose groups are
    ``groups``; returns (B, Hg, T, dh)."""
    groups = tuple(groups)
    if groups != tuple(range(q.shape[1])):
        index = constant(groups, q.device)
        q, k = q.index_select(1, index), k.index_select(1, index)
    keep = None if key_pad is None else ~key_pad[:, None, None, :]
    return F.scaled_dot_product_attention(q, k, v, attn_mask=keep, dropout_p=dropout_p, scale=scale)


def window_path(q: Tensor, k: Tensor, v: Tensor, plan: HeadPlan, inputs: PathInputs) -> Tuple[Tensor, Optional[Tensor]]:
    """The window path of a layer whose heads are all global or window heads
    (``plan.windowed``): global heads through the fused kernel, window heads
    through the windowed one.

    Args:
        q, k: (B, G, T, d_h); v: (B, H, T, d_h); inputs: the padding mask,
            scale and attention dropout (no ``attn_mask``, no learned heads).
    Returns:
        (B, H, T, d_h), equal to the dense path's output; no weights (None).
    """
    p = inputs.dropout_p
    parts = []
    if plan.global_heads:
        groups = [plan.head_to_group[h] for h in plan.global_heads]
        v_global = v if len(plan.global_heads) == plan.num_heads else v.index_select(
            1, constant(plan.global_heads, v.device))
        parts.append(global_attention(q, k, v_global, groups, inputs.padding_mask, inputs.scale, p))
    if plan.window is not None:
        v_window = v if not plan.global_heads else v.index_select(1, constant(plan.window.heads, v.device))
        parts.append(window_attention(q, k, v_window, plan.window, inputs.padding_mask, plan.mode, inputs.scale,
                                      inputs.dropout if p > 0 else None))
    out = parts[0] if len(parts) == 1 else torch.cat(parts, 1)
    if plan.order_inverse is not None:
        out = out.index_select(1, constant(plan.order_inverse, out.device))
    return out, None
