"""One encoder self-attention module for every head variant.

Each head h has a mask (:mod:`fairseq_local.attention.masks`) and uses the Wq/Wk
of a Q/K group g(h) (:class:`QKProjection`); Wv and Wo are per head.  For a
layer with G groups and H heads (Pande et al., Eq. 9 and §4.2):

    S_g  = (X Wq_g)(X Wk_g)^T / sqrt(d_h)                 (B, G, T, S)
    post:  A_h = mask_h ⊙ softmax(S_g(h))                  softmax over all real keys
    pre:   A_h = softmax(S_g(h) restricted to mask_h)      renormalised in the window
    Y    = concat_h(z_h · A_h X Wv_h) Wo                   z_h: the head's gate, or 1

A query with no allowed key gets A_h = 0 (a zero head output) in both modes;
nothing is ever NaN.  A :class:`QKProjection` shared by several layers is one
module (one parameter set, one gradient).  The layer's heads are described
once, by its frozen :class:`~fairseq_local.attention.plan.HeadPlan`
(:attr:`LocalMultiheadAttention.plan`).

Learned heads (:mod:`fairseq_local.attention.learned`) have a mask M with
values in [0, 1] (exactly 0/1 under the straight-through estimators):

* each learned kind (:class:`~fairseq_local.attention.learned.kind.LearnedKind`)
  has its parameter module in :attr:`LocalMultiheadAttention.learned` (an
  ``nn.ModuleDict`` keyed by kind) and realises M from it;
* M enters before the softmax as the additive C·(1 − M), C = ``--mask-neg``
  (−10000 in SparseBERT's code; Adaptive Axis Attention Eq. 5), where the
  kind says so (``dam-u``/``dam-s`` in ``pre`` mode, ``aaa`` always), or
  multiplies the softmax (SparseBERT Eq. 4).
* Keys where a pre-softmax M is 0 are excluded, as a fixed mask's are, so a
  row whose M is all 0 is a zero row.
* ``:gate``: the head's output is scaled by its hard-concrete gate
  (:mod:`fairseq_local.attention.gates`).

Three paths compute the same result, with one signature
(:data:`~fairseq_local.attention.plan.AttentionPath`): ``dense``
(:mod:`fairseq_local.attention.dense`, every head's (B, H, T, S) weights, the
reference), ``window`` (:mod:`fairseq_local.attention.window`: window heads in
O(n·w), post-mode rows normalised by a fused log-sum-exp, one softmax per
tied group, global heads through the fused kernel) and ``flex``
(:mod:`fairseq_local.attention.flex`, FlexAttention); ``--attn-impl`` or the
context's override picks one per forward pass (:meth:`LocalMultiheadAttention.path`).

The forward pass reads the open :class:`~fairseq_local.attention.context.AttentionContext`:
it appends an :class:`~fairseq_local.attention.record.AttentionRecord` of
its realised pattern to the context's records (the encoders open one per
forward pass), hands back what the context's capture asks for, and shares the
per-forward memo.
"""

import contextlib
import math
from typing import Dict, Mapping, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from fairseq.modules.fairseq_dropout import FairseqDropout
from torch import Tensor, nn

from ..errors import OptionError
from . import dense
from .config import ATTN_IMPLS, AttentionOptions
from .context import current
from .dense import dense_path
from .fallbacks import announce
from .flex import flex_available, flex_path
from .gates import HeadGates
from .layout import LayerSpec
from .learned import TauSchedule
from .learned.kind import KindBuild, Realised
from .masks import HeadMask, real_positions
from .masks.base import constant
from .record import AttentionRecord
from .plan import AttentionPath, HeadPlan, PathInputs
from .window import auto_min_len, fast_dtypes, window_path

PATHS: Dict[str, AttentionPath] = {"dense": dense_path, "window": window_path, "flex": flex_path}


class QKProjection(nn.Module):
    """Wq and Wk of one Q/K group: ``embed_dim -> head_dim`` each.

    Initialised like one head's slice of fairseq's MultiheadAttention (Xavier
    uniform of the full d×d matrix with gain 1/sqrt(2))."""

    def __init__(self, embed_dim: int, head_dim: int, bias: bool = True) -> None:
        super().__init__()
        self.q_proj = nn.Linear(embed_dim, head_dim, bias=bias)
        self.k_proj = nn.Linear(embed_dim, head_dim, bias=bias)
        bound = math.sqrt(6.0 / (2 * embed_dim)) / math.sqrt(2)
        for proj in (self.q_proj, self.k_proj):
            nn.init.uniform_(proj.weight, -bound, bound)


class LocalMultiheadAttention(nn.Module):
    """Encoder self-attention with a mask and a Q/K group per head.

    Args:
        options: the attention options at their effective values
            (:class:`~fairseq_local.attention.config.AttentionOptions`).
        embed_dim: model dimension d (= H · d_h).
        layer: the layer's heads: mask, Q/K group and gate of each
            (:class:`~fairseq_local.attention.layout.LayerSpec`).
        qk: the layer's Q/K groups, in ``layer.groups`` order (may be shared
            with other layers).
        learned: each learned kind's parameter module for this layer, by kind
            key (:meth:`~fairseq_local.attention.learned.kind.LearnedKind.build`;
            may be shared with other layers); a kind the layer has and
            ``learned`` lacks is built here, for this layer alone.
        dropout: attention-probability dropout.
    """

    def __init__(self, options: AttentionOptions, embed_dim: int, layer: LayerSpec, qk: Sequence[QKProjection],
                 learned: Optional[Mapping[str, nn.Module]] = None, dropout: float = 0.0, bias: bool = True) -> None:
        super().__init__()
        num_heads = len(layer.masks)
        if embed_dim % num_heads:
            raise ValueError(f"embed_dim {embed_dim} is not divisible by {num_heads} heads")
        self.plan = plan = HeadPlan.build(layer, options.mask_mode)
        if len(qk) != len(layer.groups):
            raise ValueError(f"the layer uses {len(layer.groups)} Q/K groups, got {len(qk)} projections")
        if options.attn_impl not in ATTN_IMPLS:
            raise ValueError(f"attn_impl must be one of {ATTN_IMPLS}, not {options.attn_impl!r}")
        self.embed_dim, self.num_heads = embed_dim, num_heads
        self.head_dim = embed_dim // num_heads
        self.scaling = self.head_dim ** -0.5
        self.attn_impl = options.attn_impl
        self.mask_neg = float(options.mask_neg)
        self.tau_schedule: TauSchedule = options.tau_schedule()
        self.tau = self.tau_schedule(0)
        self.num_updates = 0

        self.qk = nn.ModuleList(qk)
        given, alone = dict(learned or {}), KindBuild(options, embed_dim)
        self.learned = nn.ModuleDict({
            g.kind.key: given[g.kind.key] if g.kind.key in given
            else g.kind.build(alone, None, tuple(zip(g.heads, g.specs))) for g in plan.learned})
        self.gates = None
        if plan.gated_heads:
            self.gates = HeadGates(len(plan.gated_heads), init=options.gate_init, beta=options.gate_beta,
                                   gamma=options.gate_gamma, zeta=options.gate_zeta, num_heads=num_heads)
        self.v_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.dropout_module = FairseqDropout(dropout, module_name=self.__class__.__name__)
        # fairseq's MultiheadAttention initialisation (Wv gain 1/sqrt(2), Wo gain 1).
        nn.init.xavier_uniform_(self.v_proj.weight, gain=1 / math.sqrt(2))
        nn.init.xavier_uniform_(self.out_proj.weight)
        if bias:
            nn.init.constant_(self.out_proj.bias, 0.0)

    @property
    def num_groups(self) -> int:
        return len(self.qk)

    @property
    def mask_mode(self) -> str:
        return self.plan.mode

    @property
    def masks(self) -> Tuple[HeadMask, ...]:
        return self.plan.masks

    @property
    def head_to_group(self) -> Tuple[int, ...]:
        return self.plan.head_to_group

    def set_num_updates(self, num_updates: int) -> None:
        """Called by fairseq before every update: anneal τ, remember the count."""
        self.num_updates = num_updates
        self.tau = self.tau_schedule(num_updates)

    def fixed_mask(self, tgt_len: int, padding_mask: Optional[Tensor], device: torch.device) -> Optional[Tensor]:
        """Dense fixed masks (:func:`~fairseq_local.attention.dense.fixed_mask`): None
        if every head is global, else bool (H, T, T) or (B, H, T, T)."""
        return dense.fixed_mask(self.plan, tgt_len, padding_mask, device)

    def learned_mask(self, x: Tensor, padding_mask: Optional[Tensor]) -> Tuple[Optional[Tensor], Dict[str, Realised]]:
        """The learned heads' masks M, each kind's realised by its class.

        Args:
            x: (T, B, d) layer input; padding_mask: (B, T) bool or None.
        Returns:
            M (B, len(plan.learned_heads), T, T) float32 in [0, 1], in
            ``plan.learned_heads`` order (None without learned heads), and
            each kind's :class:`~fairseq_local.attention.learned.kind.Realised`
            by kind key.
        """
        if not self.plan.learned_heads:
            return None, {}
        T, B = x.shape[:2]
        pos = real_positions(padding_mask, T, x.device).expand(B, T)
        realised = {g.kind.key: g.kind.realise(self.learned[g.kind.key], g.specs, x, pos, self.tau, padding_mask)
                    for g in self.plan.learned}
        parts = [r.masks for r in realised.values()]
        return (parts[0] if len(parts) == 1 else torch.cat(parts, 1)), realised

    def project(self, x: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
        """The projections of ``x`` (T, B, d), in one fused matmul: q (B, G, T, d_h)
        and k (B, G, S, d_h) per Q/K group, v (B, H, S, d_h) per head."""
        T, B, _ = x.shape
        G, H, dh = self.num_groups, self.num_heads, self.head_dim
        q, k, v = self._in_proj(x)
        q = q.view(T, B, G, dh).permute(1, 2, 0, 3)
        k = k.view(T, B, G, dh).permute(1, 2, 0, 3)
        v = v.view(T, B, H, dh).permute(1, 2, 0, 3)
        return q, k, v

    def _in_proj(self, x: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
        """One fused projection: (T, B, d) -> q, k (T, B, G·d_h) and v (T, B, d)."""
        groups = list(self.qk)
        weights = [g.q_proj.weight for g in groups] + [g.k_proj.weight for g in groups]
        weights.append(self.v_proj.weight)
        bias = None
        if self.v_proj.bias is not None:
            bias = torch.cat([g.q_proj.bias for g in groups] + [g.k_proj.bias for g in groups]
                             + [self.v_proj.bias])
        qk_dim = self.num_groups * self.head_dim
        return F.linear(x, torch.cat(weights), bias).split([qk_dim, qk_dim, self.embed_dim], -1)

    def gate_scale(self, dtype: torch.dtype, device: torch.device) -> Optional[Tensor]:
        """(1, H, 1, 1) in ``dtype``: each head's gate z_h (1 for heads without
        one), sampled in training (Voita et al. 2019); None without gated heads."""
        if self.gates is None:
            return None
        H = self.num_heads
        index = constant(self.plan.gated_heads, device)
        return torch.ones(H, dtype=dtype, device=device).index_copy(0, index, self.gates().to(dtype)).view(1, H, 1, 1)

    def path_inputs(self, key_padding_mask: Optional[Tensor] = None, attn_mask: Optional[Tensor] = None,
                    learned: Optional[Tensor] = None, need_weights: bool = False,
                    detach_weights: bool = False) -> PathInputs:
        """The :class:`~fairseq_local.attention.plan.PathInputs` of a call of this layer."""
        drop = self.dropout_module
        p = drop.p if (self.training or drop.apply_during_inference) else 0.0
        return PathInputs(self.scaling, key_padding_mask, attn_mask, learned, self.mask_neg, drop, p, need_weights,
                          detach_weights)

    def forward(
        self,
        query: Tensor,
        key: Optional[Tensor] = None,
        value: Optional[Tensor] = None,
        key_padding_mask: Optional[Tensor] = None,
        need_weights: bool = False,
        attn_mask: Optional[Tensor] = None,
        need_head_weights: bool = False,
        **unused,
    ) -> Tuple[Tensor, Optional[Tensor]]:
        """Self-attention over ``query``.

        Args:
            query: (T, B, d); ``key``/``value`` must be None or ``query`` itself.
            key_padding_mask: (B, T) bool, True at padding.
            attn_mask: optional (T, T) additive float mask.
            need_weights: also return weights averaged over heads, (B, T, T).
            need_head_weights: return per-head weights, (H, B, T, T).
        Returns:
            output (T, B, d) and the weights or None.  What the open context
            asks for is recorded and captured (see the module docstring).
        """
        if (key is not None and key is not query) or (value is not None and value is not query):
            raise ValueError("LocalMultiheadAttention is encoder self-attention only")
        ctx = current()
        capture, records = ctx.capture, ctx.records
        asked = need_weights or need_head_weights
        tgt_len, bsz, _ = query.shape
        q, k, v = self.project(query)
        # Under --checkpoint-activations fairseq runs the layer under no_grad and recomputes it in the
        # backward: the recorded masks still carry their graph to the parameters, so the penalties
        # computed from the records keep their gradient (the recomputation, with the same noise, gives
        # the task's).
        with torch.enable_grad() if records is not None and self.training else contextlib.nullcontext():
            learned, realised = self.learned_mask(query, key_padding_mask)

        want = asked or (capture is not None and capture.weights)
        path = self.path(tgt_len, want, attn_mask, q.dtype, q.device, q.requires_grad, ctx.impl)
        inputs = self.path_inputs(key_padding_mask, attn_mask, learned, want, ctx.detach_weights)
        out, probs = PATHS[path](q, k, v, self.plan, inputs)
        weights = None
        if asked:
            weights = probs.transpose(0, 1)  # (H, B, T, S)
            if not need_head_weights:
                weights = weights.mean(dim=0)
        scale = self.gate_scale(out.dtype, out.device)
        if scale is not None:
            out = out * scale
            if probs is not None and capture is not None:
                probs = probs * scale  # what the head's output is made of: z_h · A_h
        if capture is not None:
            capture.add(self, query, probs, out, key_padding_mask)
        if records is not None:
            records.append(AttentionRecord(self, learned, realised, key_padding_mask, tgt_len, bsz))
        out = out.permute(2, 0, 1, 3).reshape(tgt_len, bsz, self.embed_dim)
        return self.out_proj(out), weights

    def path(self, tgt_len: int, need_weights: bool, attn_mask: Optional[Tensor], dtype: torch.dtype,
             device: torch.device = torch.device("cpu"), needs_grad: bool = False, impl: Optional[str] = None) -> str:
        """The path of a forward pass: ``dense``, ``window`` or ``flex``, by
        ``impl`` (the context's override, which ``forward`` hands in; None:
        the open context's) or else ``attn_impl``.

        ``window`` takes the window path wherever it applies (``plan.windowed``);
        ``auto`` too, except for window heads on short inputs (fewer than
        :func:`~fairseq_local.attention.window.auto_min_len` positions for the
        mask mode and device), and takes FlexAttention on CUDA for other fixed kinds.
        Weights, an ``attn_mask``, learned heads and (except under ``flex``)
        heads without a window form always take the dense path.
        ``flex`` where FlexAttention cannot run is a one-line
        :class:`~fairseq_local.errors.OptionError`."""
        impl, plan = impl or current().impl or self.attn_impl, self.plan
        if impl == "dense" or need_weights or attn_mask is not None or plan.learned_heads:
            return "dense"
        if impl == "flex" or (impl == "auto" and device.type == "cuda" and not plan.windowed):
            reason = flex_available(device, needs_grad)
            if reason is None and not (needs_grad and self.dropout_module.p > 0):
                return "flex"
            if impl == "flex":
                raise OptionError(reason or "--attn-impl flex has no attention dropout; use --attention-dropout 0")
            reason = reason or ("FlexAttention has no attention dropout (--attention-dropout 0 keeps this layout "
                                "sparse in training)")
            heads = ",".join(map(str, plan.masks))
            announce(("dense", plan.fixed_masks, reason),
                     f"--attn-impl auto: heads {heads} take the dense path, B·H·T² scores, "
                     f"on {device.type}: {reason}")
            return "dense"
        if not plan.windowed:
            return "dense"
        if dtype not in fast_dtypes(device):
            announce(("dtype", dtype, device.type), f"--attn-impl {impl}: window heads in {dtype} on {device.type} "
                     f"take the dense path, B·H·T² scores (the window path takes {fast_dtypes(device)})")
            return "dense"
        if impl == "auto" and plan.window is not None and tgt_len < auto_min_len(plan.mode, device):
            return "dense"
        return "window"

    def check_trainable(self) -> None:
        """One-line :class:`~fairseq_local.errors.OptionError` if ``--attn-impl
        flex`` (or the context's override) cannot train where the module's
        weights are (checked before training starts, not at the first backward)."""
        if (current().impl or self.attn_impl) == "flex":
            reason = flex_available(self.v_proj.weight.device, needs_grad=True)
            if reason is not None:
                raise OptionError(f"--attn-impl flex cannot train here: {reason}")

    def attention_probs(self, q: Tensor, k: Tensor, fixed: Optional[Tensor], learned: Optional[Tensor] = None,
                        key_padding_mask: Optional[Tensor] = None, attn_mask: Optional[Tensor] = None) -> Tensor:
        """:func:`fairseq_local.attention.dense.attention_probs` of this layer:
        q (B, G, T, d_h), k (B, G, S, d_h) -> (B, H, T, S)."""
        inputs = self.path_inputs(key_padding_mask, attn_mask, learned)
        return dense.attention_probs(q, k, self.plan, inputs, fixed)

    def attention_parts(self, q: Tensor, k: Tensor, fixed: Optional[Tensor], learned: Optional[Tensor] = None,
                        key_padding_mask: Optional[Tensor] = None,
                        attn_mask: Optional[Tensor] = None) -> Tuple[Tensor, Optional[Tensor]]:
        """:func:`fairseq_local.attention.dense.attention_parts` of this layer: (P, W)."""
        inputs = self.path_inputs(key_padding_mask, attn_mask, learned)
        return dense.attention_parts(q, k, self.plan, inputs, fixed)
