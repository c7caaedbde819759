"""Fixed per-head masks through PyTorch FlexAttention.

Each fixed :class:`~fairseq_local.attention.masks.HeadMask` becomes a mask_mod
equal to ``mask.dense(pos, pos)``: the mask's own rule, the one the dense path
evaluates, written once in its class (:mod:`~fairseq_local.attention.masks`)
and turned into a mask_mod by
:func:`~fairseq_local.attention.masks.flex_rule.mask_mod`.  A new kind needs
nothing here.

:func:`flex_attention_heads` runs every head of a layer with one BlockMask:
``pre`` is the softmax over the allowed real keys (a row without one is 0);
``post`` (Pande et al., Eq. 9) is M ⊙ softmax over all real keys, i.e. the
``pre`` output times exp(lse_M − lse), log-sum-exps from FlexAttention
(:func:`flex_lse`), in float32 whatever the inputs' dtype.

On CUDA the kernel is fused by torch.compile once per layout (the layer's mask
tuple): the mask_mod closures hold tensors and layout constants only, sizes are
dynamic, and no-grad calls reuse the training kernel (:func:`_flex`).  On CPU
it runs eagerly (unfused: it materialises the scores), forward only.
:func:`flex_available` says where it runs; :func:`set_compile_backend` picks
the compiler.  Within one forward pass (the memo of the encoder's
:func:`~fairseq_local.attention.context.attention_context`), layers with equal
masks share one BlockMask.  :func:`flex_path` is the path of the common
signature (:mod:`~fairseq_local.attention.plan`).  Nothing in the forward reads
a device value back to the host.
"""

import importlib.util
import inspect
import warnings
from functools import reduce
from typing import Callable, Dict, Hashable, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor

from .masks import HeadMask
from .masks.base import constant
from .masks.flex_rule import flex_positions, mask_mod
from .config import MASK_MODES
from .context import cached, memoised
from .plan import HeadPlan, PathInputs

try:
    from torch.nn.attention.flex_attention import AuxRequest, BlockMask, create_block_mask, flex_attention
except ImportError:  # torch without FlexAttention
    flex_attention = None

_NO_BACKWARD = ("cpu", "mps")  # device types where torch's FlexAttention has no backward


def flex_available(device: torch.device, needs_grad: bool) -> Optional[str]:
    """None when :func:`flex_attention_heads` can run on ``device`` (with a
    backward if ``needs_grad``), else a one-line reason why not."""
    device = torch.device(device)
    version = torch.__version__.split("+")[0]
    if flex_attention is None:
        return f"FlexAttention needs torch >= 2.5 (this is torch {version}); use --attn-impl window or dense"
    if device.type not in ("cuda", "cpu", "xpu", "hpu", "mps"):
        return f"FlexAttention does not run on {device.type} devices; use --attn-impl window or dense"
    if needs_grad and device.type in _NO_BACKWARD:
        return (f"FlexAttention has no backward on {device.type.upper()} in torch {version}; "
                f"use --attn-impl window or dense")
    if device.type == "cuda" and importlib.util.find_spec("triton") is None:
        return "FlexAttention on CUDA needs Triton (torch.compile), which is not installed; use --attn-impl dense"
    return None


Backend = Union[str, Callable[..., object]]
_BACKENDS: Dict[str, Backend] = {"cuda": "inductor"}  # device type -> torch.compile backend; unlisted: eager
SHAPE_SETTINGS = {"use_duck_shape": False, "backed_size_oblivious": True}
"""torch.fx.experimental._config while compiling: no duck shaping (B == H or
T == d_h must not tie a dynamic size to a static one) and no 0/1
specialisation (B = 1, or T within one 128-block, must not recompile).  The
scale is specialised too (a float input is read back with .item() per call)."""


def set_compile_backend(device_type: str, backend: Optional[Backend]) -> Optional[Backend]:
    """Compile FlexAttention on ``device_type`` with ``backend`` (a torch.compile
    backend: ``"eager"``, a CompileCounter...), or not at all with None.
    Returns the previous setting."""
    previous = _BACKENDS.pop(device_type, None)
    if backend is not None:
        _BACKENDS[device_type] = backend
    return previous


_ISOLATE = "isolate_recompiles" in inspect.signature(torch.compile).parameters
RECOMPILE_LIMIT = 64
"""Dynamo's recompile limit for FlexAttention where torch.compile has no
``isolate_recompiles``: all layouts then share the cache entries of the one
``flex_attention`` code object (8 by default)."""


@cached(maxsize=None)
def _compiled(backend: Backend, layout: Hashable) -> Callable[..., object]:
    """torch.compile(flex_attention) for one layout, with dynamic sizes and, where
    torch has it, its own recompile budget (dynamo's limit of 8 cache entries
    per code object would otherwise be shared by all layouts: :func:`_dynamo_settings`)."""
    return torch.compile(flex_attention, backend=backend, dynamic=True,
                         **({"isolate_recompiles": True} if _ISOLATE else {}))


def _dynamo_settings() -> Dict[str, object]:
    """torch._dynamo.config while a compiled FlexAttention runs: the scale
    specialised; without ``isolate_recompiles``, the shared recompile limit
    raised to :data:`RECOMPILE_LIMIT` and, where torch has the option, an error
    on hitting it (dynamo would otherwise run FlexAttention eagerly, with
    (T, T) scores, without a word)."""
    settings: Dict[str, object] = {"specialize_float": True}
    if not _ISOLATE:
        config = torch._dynamo.config
        limit = "recompile_limit" if hasattr(config, "recompile_limit") else "cache_size_limit"  # older torch
        settings[limit] = RECOMPILE_LIMIT
        if hasattr(config, "fail_on_recompile_limit_hit"):
            settings["fail_on_recompile_limit_hit"] = True
    return settings


def _flex(q: Tensor, k: Tensor, v: Tensor, block_mask: "BlockMask", scale: float, lse: bool, layout: Hashable,
          trains: Tuple[bool, bool, bool] = (True, True, True)) -> Tuple[Tensor, Optional[Tensor]]:
    """FlexAttention, compiled per ``layout`` where a backend is set, else eager:
    out (B, H, T, Ev) and, with ``lse``, the natural-log LSE (B, H, T) float32
    (−inf on empty rows).  Dynamo guards on grad mode and requires_grad, so a
    call that builds no graph runs in the training form where a backward
    exists (grad on, the inputs ``trains`` names as fresh leaves, outputs
    detached: validation reuses the training kernel), else in no-grad form."""
    aux = AuxRequest(lse=True) if lse else None
    backend = _BACKENDS.get(q.device.type)
    graph = torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v))
    if not graph:
        q, k, v = q.detach(), k.detach(), v.detach()
    if backend is None:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="flex_attention called without torch.compile")
            res = flex_attention(q, k, v, block_mask=block_mask, scale=scale, return_aux=aux)
    else:
        fn = _compiled(backend, layout)
        # One memory layout per compiled graph: q, k, v that are slices of
        # projections of other widths must not reuse a graph's strides.
        q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
        from torch.fx.experimental import _config
        shapes = {key: value for key, value in SHAPE_SETTINGS.items() if hasattr(_config, key)}  # older torch
        with _config.patch(**shapes), torch._dynamo.config.patch(**_dynamo_settings()):
            if graph or torch.is_inference_mode_enabled():
                res = fn(q, k, v, block_mask=block_mask, scale=scale, return_aux=aux)
            elif q.device.type in _NO_BACKWARD:
                with torch.no_grad():
                    res = fn(q, k, v, block_mask=block_mask, scale=scale, return_aux=aux)
            else:
                with torch.enable_grad():
                    q, k, v = (t.requires_grad_(r) for t, r in zip((q, k, v), trains))
                    res = fn(q, k, v, block_mask=block_mask, scale=scale, return_aux=aux)
                res = (res[0].detach(), res[1]._replace(lse=res[1].lse.detach())) if lse else res.detach()
    return (res[0], res[1].lse.float()) if lse else (res, None)


def _real(key_padding_mask: Optional[Tensor], batch: int, length: int, device: torch.device) -> Tensor:
    """(B, T) bool, True at real keys (all True without padding: the same closure either way)."""
    if key_padding_mask is None:
        return torch.ones(batch, length, dtype=torch.bool, device=device)
    return ~key_padding_mask.to(device)


def head_block_mask(masks: Sequence[HeadMask], pos: Tensor, n: Tensor,
                    key_padding_mask: Optional[Tensor]) -> "BlockMask":
    """One BlockMask for all heads: head h allows ``masks[h]`` on real keys.

    Takes H fixed masks, pos (B, T) and n (B,) from :func:`flex_positions` and
    the (B, T) padding mask or None.  Returns a (B, H, T, T) BlockMask, or
    (B, 1, T, T) when the heads share one mask; its mask_mod closes over pos,
    n, real (B, T), which (H,) and the layout's constants only."""
    B, T = pos.shape
    kinds = list(dict.fromkeys(masks))  # distinct masks, first-use order
    mods = tuple(mask_mod(m, pos, n) for m in kinds)
    which = constant(tuple(kinds.index(m) for m in masks), pos.device)
    real = _real(key_padding_mask, B, T, pos.device)

    def mod(b, h, q_idx, kv_idx):
        if len(mods) == 1:  # a constant of the layout
            out = mods[0](b, h, q_idx, kv_idx)
        else:
            u = which[h]
            out = reduce(torch.logical_or, ((u == c) & f(b, h, q_idx, kv_idx) for c, f in enumerate(mods)))
        return out & real[b, kv_idx]

    return create_block_mask(mod, B, None if len(mods) == 1 else len(masks), T, T, device=pos.device)


def flex_lse(q: Tensor, k: Tensor, key_padding_mask: Optional[Tensor], scale: float) -> Tensor:
    """Row log-sum-exp of the scores over the real keys by FlexAttention, which
    keeps no (T, T) tensor (the normaliser of ``post`` masks, Pande et al., Eq. 9).

    q, k: (B, G, T, dh); key_padding_mask: (B, T) bool, True at padding, or
    None.  Returns (B, G, T) float32, ``logsumexp_j(scale · q_i·k_j)`` over
    real keys j; differentiable w.r.t. q and k where FlexAttention has a
    backward (torch's takes the LSE's gradient, ``grad_logsumexp``)."""
    B, G, T, _ = q.shape
    reason = flex_available(q.device, torch.is_grad_enabled() and (q.requires_grad or k.requires_grad))
    if reason is not None:
        raise RuntimeError(reason)

    def build() -> "BlockMask":
        real = _real(key_padding_mask, B, T, q.device)
        return create_block_mask(lambda b, h, q_idx, kv_idx: real[b, kv_idx], B, None, T, T, device=q.device)

    block = memoised(("flex-real", B, T, q.device), key_padding_mask, build)
    # v is unused, takes no gradient and must not alias k; FlexAttention keeps
    # the head count static: one compilation per G (whatever q's and k's
    # strides: _flex makes them contiguous).
    return _flex(q, k, torch.zeros_like(k), block, scale, True, ("real", G), trains=(True, True, False))[1]


def flex_attention_heads(q: Tensor, k: Tensor, v: Tensor, masks: Sequence[HeadMask], head_to_group: Sequence[int],
                         key_padding_mask: Optional[Tensor], mode: str, scale: float) -> Tensor:
    """Masked multi-head attention with per-head fixed masks and shared Q/K groups.

    Args:
        q, k: (B, G, T, dh), one per Q/K group; v: (B, H, T, dh), one per head.
        masks: H fixed masks; head h uses ``masks[h]`` and group ``head_to_group[h]``.
        key_padding_mask: (B, T) bool, True at padding, or None (fairseq's
            encoder passes None for a batch without padding).
        mode: ``pre`` (softmax over the allowed real keys; rows with none are 0)
            or ``post`` (Pande et al., Eq. 9: mask ⊙ softmax over all real keys).
        scale: the score scale, d_h^−1/2.
    Returns:
        (B, H, T, dh) in v's dtype, equal to the dense ``attention_probs(...) @ v``
        (masks taken as :func:`flex_positions` says) to float rounding; ``post``
        adds a relative error of about one ulp of |lse| (float32 log-sum-exps).
    """
    B, G, T, _ = q.shape
    H = v.shape[1]
    if mode not in MASK_MODES:
        raise ValueError(f"mode must be one of {MASK_MODES}, not {mode!r}")
    if len(masks) != H or len(head_to_group) != H:
        raise ValueError(f"{H} heads need {H} masks and groups, got {len(masks)} and {len(head_to_group)}")
    reason = flex_available(q.device, torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v)))
    if reason is not None:
        raise RuntimeError(reason)
    masks = tuple(masks)
    tied = tuple(head_to_group) != tuple(range(H)) or G != H
    groups = constant(tuple(head_to_group), q.device)
    qh, kh = (q.index_select(1, groups), k.index_select(1, groups)) if tied else (q, k)
    post = mode == "post" and not all(m.is_global for m in masks)

    def build() -> "BlockMask":
        return head_block_mask(masks, *flex_positions(masks, key_padding_mask, B, T, q.device), key_padding_mask)

    block = memoised(("flex-heads", masks, B, T, q.device), key_padding_mask, build)
    out, lse_masked = _flex(qh, kh, v, block, scale, post, ("heads", masks, post))
    if not post:
        return out
    # Post (Pande et al., Eq. 9): Σ_j M_ij e^{s_ij − lse_i} v_j = out_M · e^{lse_M − lse},
    # lse over all real keys, taken once per Q/K group.
    lse = flex_lse(q, k, key_padding_mask, scale)
    if tied:
        lse = lse.index_select(1, groups)
    factor = torch.exp(lse_masked - lse).masked_fill(torch.isneginf(lse_masked), 0.0)
    return (out.float() * factor.unsqueeze(-1)).to(out.dtype)


def flex_path(q: Tensor, k: Tensor, v: Tensor, plan: HeadPlan, inputs: PathInputs) -> Tuple[Tensor, Optional[Tensor]]:
    """The FlexAttention path: :func:`flex_attention_heads` with the plan's
    fixed masks, Q/K groups and mask mode.

    Args:
        q, k: (B, G, T, d_h); v: (B, H, T, d_h); inputs: the padding mask and
            scale (no ``attn_mask``, no learned heads, no dropout).
    Returns:
        (B, H, T, d_h), equal to the dense path's output; no weights (None).
    """
    out = flex_attention_heads(q, k, v, plan.fixed_masks, plan.head_to_group, inputs.padding_mask, plan.mode,
                               inputs.scale)
    return out, None
