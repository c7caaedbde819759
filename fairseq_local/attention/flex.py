"""Fixed per-head masks through PyTorch FlexAttention.

Each fixed :class:`~fairseq_local.attention.masks.HeadMask` becomes a mask_mod
(:func:`mask_mod`, by type from :func:`register_flex_mask`) equal to
``mask.dense(pos, pos)``: offset kinds test d = pos[kv] − pos[q]; position
kinds test the positions and never allow a pad (−1); seeded and ``file`` kinds
index a lookup tensor (SparseBERT §4.2, §4.3); unions OR their parts (AAA, Eq. 8).

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
the compiler; :func:`flex_block_masks` shares BlockMasks between the layers of
one forward.  Nothing in the forward reads a device value back to the host
(seeded kinds do on the CPU, where it costs nothing, and past their table).
"""

import importlib.util
import inspect
import warnings
from contextlib import contextmanager
from contextvars import ContextVar
from functools import lru_cache, reduce
from typing import Callable, Dict, Hashable, Iterator, Optional, Sequence, Tuple, Type, Union

import torch
from torch import Tensor

from .masks import (AxisMask, BigBirdMask, DiagonalMask, FileMask, FixedMask, GlobalMask, GlobalTokensMask,
                    HeadMask, LogSparseMask, LongformerMask, MaskSpecError, NoDiagMask, OffsetMask, OrMask,
                    RandomDropMask, RandomMask, SeededMask, StarMask, StridedMask, real_positions)
from .masks.base import constant
from .masks.file import matrix_on
from .config import MASK_MODES

try:
    from torch.nn.attention.flex_attention import AuxRequest, BlockMask, create_block_mask, flex_attention
except ImportError:  # torch without FlexAttention
    flex_attention = None

MaskMod = Callable[[Tensor, Tensor, Tensor, Tensor], Tensor]  # (b, h, q_idx, kv_idx) int tensors -> bool
FlexRule = Callable[[HeadMask, Tensor, Tensor], MaskMod]  # (mask, pos (B, T), n (B,)) -> mask_mod

_RULES: Dict[Type[HeadMask], FlexRule] = {}


def register_flex_mask(*classes: Type[HeadMask]) -> Callable[[FlexRule], FlexRule]:
    """Register ``rule(mask, pos, n) -> mask_mod`` for masks of exactly these types.

    The mask_mod must equal ``mask.dense(pos, pos)`` for pos (B, T) long
    (−1 at padding) and n (B,) the real lengths; it may close over tensors
    built from pos and n (on pos's device) and constants of the mask, but no
    Python value that changes between batches (dynamo guards on it)."""

    def wrapper(rule: FlexRule) -> FlexRule:
        for cls in classes:
            if cls in _RULES:
                raise ValueError(f"a FlexAttention rule for {cls.__name__} is already registered")
            _RULES[cls] = rule
        return rule

    return wrapper


def mask_mod(mask: HeadMask, pos: Tensor, n: Tensor) -> MaskMod:
    """The FlexAttention mask_mod of a fixed (not learned) mask: for pos (B, T)
    long, the positions it is evaluated on (:func:`real_positions`, −1 at
    padding, or ``arange(T)``) and n (B,) long, the real lengths, returns
    ``f(b, h, q_idx, kv_idx)`` with ``f(b, ·, i, j) == mask.dense(pos, pos)[b, i, j]``."""
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


_HOST_READS_ARE_FREE = ("cpu",)  # device types where seeded kinds may read lengths on the host


@register_flex_mask(RandomMask, RandomDropMask, LongformerMask, BigBirdMask)
def _seeded(mask: SeededMask, pos: Tensor, n: Tensor) -> MaskMod:
    """Seeded masks (SparseBERT §3.3, §4.2): each sentence's (n, n) matrix.  Off
    the CPU, from the bit-packed table of every length (``sync_free_table``,
    indexed by n: no host read); else, or past its size, the matrices of the
    batch's distinct lengths (``length_table``: reads the lengths)."""
    packed = None
    if pos.device.type not in _HOST_READS_ARE_FREE and hasattr(mask, "sync_free_table"):
        packed = mask.sync_free_table(pos.shape[-1], pos.device)
    if packed is not None:
        table = packed[0]  # uint8 (m + 1, m·m/8)

        def mod(b, h, q_idx, kv_idx):
            i, j = pos[b, q_idx], pos[b, kv_idx]
            out = mask.lookup(table, table.shape[0] - 1, i, j, n[b])  # m from the shape: no guard on it
            return out & (i < n[b]) & (i >= 0) & (j >= 0)

        return mod
    table, which = mask.length_table(n)  # (L, m, m), (B,)
    table = table.to(pos.device)

    def mod(b, h, q_idx, kv_idx):
        m = table.shape[-1]  # a size, not a closed-over int: no guard on it
        i, j = pos[b, q_idx], pos[b, kv_idx]
        out = table[which[b], i.clamp(0, m - 1), j.clamp(0, m - 1)] & (i < n[b])
        return out & (i >= 0) & (j >= 0)

    return mod


@register_flex_mask(FileMask)
def _file(mask: FileMask, pos: Tensor, n: Tensor) -> MaskMod:
    """Exported masks (SparseBERT §4.3, "two-stage"): matrix[:n, :n], with
    ``ends`` also the first and last rows and columns.  A batch padded to more
    positions than the matrix has is refused (no sentence length is read)."""
    entry = mask.entry()
    table = matrix_on(mask, pos.device)
    size, ends, T = table.shape[0], bool(entry["ends"]), pos.shape[-1]
    if T > size:
        raise MaskSpecError(f"a batch of {T} positions is longer than mask {mask} of '{mask.path}' "
                            f"({size} positions)")

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
    path (``LocalMultiheadAttention.fixed_mask``) takes them: padded indices
    ``arange(T)`` if every mask is relative (offsets between real tokens are
    the same, fairseq pads contiguously), else the real positions (−1 at
    padding).  Returns pos (B, T) long, contiguous either way (padding must
    not change a compiled kernel's guards), and n (B,) long, the real lengths."""
    n = (torch.full((batch,), length, dtype=torch.long, device=device) if key_padding_mask is None
         else (~key_padding_mask.to(device)).long().sum(-1))
    if key_padding_mask is None or all(m.relative for m in masks):
        return torch.arange(length, device=device).repeat(batch, 1), n
    return real_positions(key_padding_mask.to(device), length), n


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


@lru_cache(maxsize=None)
def _compiled(backend: Backend, layout: Hashable) -> Callable[..., object]:
    """torch.compile(flex_attention) for one layout, with dynamic sizes and, where
    torch has it, its own recompile budget (dynamo's limit of 8 cache entries
    per code object would otherwise be shared by all layouts)."""
    isolate = "isolate_recompiles" in inspect.signature(torch.compile).parameters
    return torch.compile(flex_attention, backend=backend, dynamic=True,
                         **({"isolate_recompiles": True} if isolate else {}))


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
        from torch.fx.experimental import _config
        shapes = {key: value for key, value in SHAPE_SETTINGS.items() if hasattr(_config, key)}  # older torch
        with _config.patch(**shapes), torch._dynamo.config.patch(specialize_float=True):
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


_BLOCK_MASKS: ContextVar[Optional[Dict]] = ContextVar("fairseq_local_flex_block_masks", default=None)


@contextmanager
def flex_block_masks() -> Iterator[None]:
    """Within one encoder forward, layers with equal masks (and the same padding
    tensor, B and T) share one BlockMask: ``create_block_mask`` runs once per
    distinct mask set, not per layer; outside it each call builds its own.
    The encoder wraps its layers: ``with flex_block_masks(): for layer ...``."""
    token = _BLOCK_MASKS.set({})
    try:
        yield
    finally:
        _BLOCK_MASKS.reset(token)


def _block_mask(key: Hashable, key_padding_mask: Optional[Tensor], build: Callable[[], "BlockMask"]) -> "BlockMask":
    """``build()``, or the BlockMask already built for ``key`` and this padding
    tensor (by identity: the entry keeps it alive) in this forward."""
    cache = _BLOCK_MASKS.get()
    if cache is None:
        return build()
    key = (key, None if key_padding_mask is None else id(key_padding_mask))
    if key not in cache:
        cache[key] = (build(), key_padding_mask)
    return cache[key][0]


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

    block = _block_mask(("real", B, T, q.device), key_padding_mask, build)
    # v is unused, takes no gradient and must not alias k; FlexAttention keeps
    # the head count static: one compilation per G.
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

    block = _block_mask(("heads", masks, B, T, q.device), key_padding_mask, build)
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
