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

import contextlib
import importlib.util
import inspect
import warnings
from functools import reduce
from typing import Callable, Dict, Hashable, Iterator, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor

from .masks import HeadMask
from .masks.base import constant
from .masks.flex_rule import flex_positions, mask_mod
from .config import MASK_MODES
from .context import cached, memoised
from .flex_blocks import BLOCK, offset_block_tables, offset_windows
from .plan import HeadPlan, PathInputs

try:
    from torch.nn.attention.flex_attention import BlockMask, create_block_mask, flex_attention
except ImportError:  # torch without FlexAttention
    flex_attention = None
try:
    from torch.nn.attention.flex_attention import AuxRequest
except ImportError:  # torch < 2.9: FlexAttention without return_aux
    AuxRequest = None

_NO_BACKWARD = ("cpu", "mps")  # device types where torch's FlexAttention has no backward


def flex_available(device: torch.device, needs_grad: bool) -> Optional[str]:
    """None when :func:`flex_attention_heads` can run on ``device`` (with a
    backward if ``needs_grad``), else a one-line reason why not."""
    device = torch.device(device)
    version = torch.__version__.split("+")[0]
    if flex_attention is None or AuxRequest is None:
        return (f"FlexAttention with log-sum-exps (AuxRequest) needs torch >= 2.9, this is torch {version}; "
                f"use --attn-impl window or dense")
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
SHAPE_SETTINGS = {"use_duck_shape": False}
"""torch.fx.experimental._config while compiling: no duck shaping (B == H or
T == d_h must not tie a dynamic size to a static one).  Sizes 0 and 1 stay
specialised (B = 1 and T = 1 compile graphs of their own): the
size-oblivious setting (``backed_size_oblivious``) would spare those, but
AOTAutograd then gives the backward's saved tensors the first call's strides,
which dynamo does not guard, and the backward at the next length fails
(``test_compiled_backward_at_every_length``).  The scale is specialised too
(a float input is read back with .item() per call)."""


# The same for create_block_mask: none yet.  Compiled, it fuses away the (B, H, T, T)
# evaluation, and its guards hold across batches (test_flex_blocks.py, CompileCounter);
# inductor's CPU code generation fails on it (left padding, torch 2.13), and it waits
# for tests/cuda/test_cuda_flex_training.py on a GPU (scripts/check-gpu.sh) before it
# becomes CUDA's default: set_compile_backend("cuda", "inductor", block_masks=True).
_MASK_BACKENDS: Dict[str, Backend] = {}


def set_compile_backend(device_type: str, backend: Optional[Backend], block_masks: bool = False) -> Optional[Backend]:
    """Compile FlexAttention (with ``block_masks``: ``create_block_mask``) on
    ``device_type`` with ``backend`` (a torch.compile backend: ``"eager"``, a
    CompileCounter...), or not at all with None.  Returns the previous setting."""
    table = _MASK_BACKENDS if block_masks else _BACKENDS
    previous = table.pop(device_type, None)
    if backend is not None:
        table[device_type] = backend
    return previous


_COMPILE_ARGS = inspect.signature(torch.compile).parameters
_ISOLATE = "isolate_recompiles" in _COMPILE_ARGS
LAYOUT_RECOMPILE_LIMIT = 32
"""Graphs one layout may compile where torch.compile takes
``isolate_recompiles`` and ``recompile_limit``: up to 5 size classes (B = 1
or more; T = 1, within one 128-block, or more: :data:`SHAPE_SETTINGS`) per
form (training, inference mode) and dtype.  One more is an error, not an
eager FlexAttention."""
RECOMPILE_LIMIT = 64
"""Dynamo's recompile limit for FlexAttention where torch.compile has no
``isolate_recompiles``: all layouts then share the cache entries of the one
``flex_attention`` code object (8 by default)."""


@cached(maxsize=None)
def _compiled(backend: Backend, layout: Hashable) -> Callable[..., object]:
    """torch.compile(flex_attention) for one layout: dynamic sizes, the whole
    graph or an error (``fullgraph``: a graph break in a mask rule fails), and,
    where torch has it, the layout's own recompile budget (else dynamo's limit
    of 8 cache entries per code object is shared by all layouts:
    :func:`_dynamo_settings`)."""
    return torch.compile(flex_attention, backend=backend, dynamic=True, fullgraph=True, **_own_budget())


@cached(maxsize=None)
def _compiled_block_mask(backend: Backend, layout: Hashable) -> Callable[..., "BlockMask"]:
    """torch.compile(create_block_mask) for one layout, as :func:`_compiled`:
    the (B, H, T, T) evaluation of the mask_mod fused away (a new mask_mod
    closure per batch reuses the graph: its guards are on the closure's code
    and tensors, not on the function object)."""
    return torch.compile(create_block_mask, backend=backend, dynamic=True, fullgraph=True, **_own_budget())


def _own_budget() -> Dict[str, object]:
    """torch.compile's arguments for a layout's own recompile budget, where it has them."""
    own: Dict[str, object] = {"isolate_recompiles": True} if _ISOLATE else {}
    if _ISOLATE and "recompile_limit" in _COMPILE_ARGS:
        own["recompile_limit"] = LAYOUT_RECOMPILE_LIMIT
    return own


def _dynamo_settings() -> Dict[str, object]:
    """torch._dynamo.config while a compiled FlexAttention runs: the scale
    specialised, and an error on hitting a recompile limit (dynamo would
    otherwise run FlexAttention eagerly, with (T, T) scores, with a log line
    only); without ``isolate_recompiles``, the shared limit raised to
    :data:`RECOMPILE_LIMIT`."""
    config = torch._dynamo.config
    settings: Dict[str, object] = {"specialize_float": True}
    if hasattr(config, "fail_on_recompile_limit_hit"):
        settings["fail_on_recompile_limit_hit"] = True
    if not _ISOLATE:
        limit = "recompile_limit" if hasattr(config, "recompile_limit") else "cache_size_limit"  # older torch
        settings[limit] = RECOMPILE_LIMIT
    return settings


@contextlib.contextmanager
def compile_settings() -> Iterator[None]:
    """The shape and dynamo settings every compiled FlexAttention call runs under
    (:data:`SHAPE_SETTINGS`, :func:`_dynamo_settings`)."""
    from torch.fx.experimental import _config
    shapes = {key: value for key, value in SHAPE_SETTINGS.items() if hasattr(_config, key)}  # older torch
    with _config.patch(**shapes), torch._dynamo.config.patch(**_dynamo_settings()):
        yield


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
        with compile_settings():
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
    n, real (B, T), which (H,) and the layout's constants only.  Offset and
    global heads only: block tables from the offsets
    (:func:`~fairseq_local.attention.flex_blocks.offset_block_tables`, batch
    dimension 1, no (T, T) evaluation); other kinds: ``create_block_mask``."""
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

    windows = offset_windows(kinds if len(kinds) == 1 else masks)
    return _block_mask(mod, windows, B, None if len(mods) == 1 else len(masks), T, pos.device, ("heads", tuple(masks)))


def _block_mask(mod: Callable[..., Tensor], windows: Optional[Tuple[Optional[Tuple[int, int]], ...]], batch: int,
                heads: Optional[int], length: int, device: torch.device, layout: Hashable) -> "BlockMask":
    """A (B | 1, H | 1, T, T) BlockMask of ``mod``: from the offset tables
    (:func:`~fairseq_local.attention.flex_blocks.offset_block_tables`, kept
    across forwards, no (T, T) evaluation) where ``windows`` gives every
    head's window, else by ``create_block_mask``, compiled per ``layout``
    where a block-mask backend is set (CUDA), eager elsewhere."""
    if windows is not None:
        counts, indices = offset_block_tables(windows, length, device)
        return BlockMask.from_kv_blocks(counts, indices, BLOCK_SIZE=BLOCK, mask_mod=mod, seq_lengths=(length, length))
    backend = _MASK_BACKENDS.get(torch.device(device).type)
    if backend is None:
        return create_block_mask(mod, batch, heads, length, length, device=device)
    with compile_settings():
        return _compiled_block_mask(backend, layout)(mod, batch, heads, length, length, device)


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
        return _block_mask(lambda b, h, q_idx, kv_idx: real[b, kv_idx], (None,), B, None, T, q.device, ("real",))

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
