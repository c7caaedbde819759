"""One encoder self-attention module for every head variant.

Each head h has a mask (:mod:`fairseq_local.attention.masks`) and uses the Wq/Wk
of a Q/K group g(h) (:class:`QKProjection`); Wv and Wo are per head.  For a
layer with G groups and H heads (Pande et al., Eq. 9 and §4.2):

    S_g  = (X Wq_g)(X Wk_g)^T / sqrt(d_h)                 (B, G, T, S)
    post:  A_h = mask_h ⊙ softmax(S_g(h))                  softmax over all real keys
    pre:   A_h = softmax(S_g(h) restricted to mask_h)      renormalised in the window
    Y    = concat_h(z_h · A_h X Wv_h) Wo                   z_h: the head's gate, or 1

In ``post`` mode the probabilities of a group are computed once and masked per
head.  A query with no allowed key gets A_h = 0 (a zero head output) in both
modes; nothing is ever NaN.  A :class:`QKProjection` shared by several layers
is one module (one parameter set, one gradient).

Learned heads (:mod:`fairseq_local.attention.learned`) have a mask M with
values in [0, 1] (exactly 0/1 under the straight-through estimators):

* ``dam-u``/``dam-s`` (SparseBERT): in ``pre`` mode M enters before the
  softmax as the additive C·(1 − M), C = ``--mask-neg`` (−10000 in the
  authors' code); in ``post`` mode it multiplies the softmax (Eq. 4).
* ``aaa`` (Adaptive Axis Attention): the axis pattern B OR ``local-W``
  enters before the softmax as C·(1 − B) (Eq. 5), whatever the mask mode.
* Keys where a pre-softmax M is 0 are excluded, as a fixed mask's are, so a
  row whose M is all 0 is a zero row.
* ``:gate``: the head's output is scaled by its hard-concrete gate
  (:mod:`fairseq_local.attention.gates`).

``attn_impl`` picks how this is computed, with the same result: the dense
(B, H, T, S) path above (:meth:`attention_probs`, the reference), the
structured path of :mod:`fairseq_local.attention.window` (window heads in
O(n·w), post-mode rows normalised by a fused log-sum-exp, one softmax per
tied group, global heads through the fused kernel) or FlexAttention
(:mod:`fairseq_local.attention.flex`); see :meth:`path`.

While a :func:`~fairseq_local.attention.penalties.recording` context is open
(the encoders open one per forward pass), each forward pass appends a
:class:`~fairseq_local.attention.penalties.AttentionRecord` of its realised
pattern, from which the sparsity terms are computed on request.
"""

import contextlib
import math
from functools import lru_cache
from typing import Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from fairseq.modules.fairseq_dropout import FairseqDropout
from torch import Tensor, nn

from ..errors import OptionError
from .flex import flex_attention_heads, flex_available
from .gates import HeadGates
from .layout import LayerSpec
from .window import WindowPlan, auto_min_len, fast_dtypes, global_attention, window_attention, window_of
from .learned import AxisAdaptiveSpec, AxisSelector, DamMask, DamSpec, TauSchedule
from .masks import GlobalMask, HeadMask, OffsetMask, real_positions, stack_masks
from .config import ATTN_IMPLS, MASK_MODES, AttentionConfig, resolved, tau_schedule
from .penalties import AttentionRecord, active_record_list


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


@lru_cache(maxsize=16)
def _relative_masks(masks: Tuple[HeadMask, ...], tgt_len: int, device: torch.device) -> Tensor:
    """(H, T, T) bool masks of offset-only kinds, cached per length."""
    pos = torch.arange(tgt_len, device=device)
    return stack_masks(masks, pos, pos)


def pre_softmax_bias(m: Tensor, c: float) -> Tensor:
    """C·(1 − M) in the forward pass; in the backward, ∂/∂M = 1 instead of −C.

    With C = −1e4 the exact gradient is 1e4 times the task's: it pins fp16's
    loss scale and ties AAA's α to C.  Dropping the constant factor leaves
    the direction of every update; Adam's steps are invariant to it, and the
    DAM L1 term is scaled alike (:func:`~fairseq_local.attention.penalties.sparsity_terms`)
    so that λ keeps SparseBERT's meaning."""
    hard = m.detach()
    return c * (1.0 - hard) + (m - hard)


class LocalMultiheadAttention(nn.Module):
    """Encoder self-attention with a mask and a Q/K group per head.

    Args:
        cfg: the attention options (:class:`AttentionConfig`; unset ones
            take their defaults).
        embed_dim: model dimension d (= H · d_h).
        layer: the layer's heads: mask, Q/K group and gate of each
            (:class:`~fairseq_local.attention.layout.LayerSpec`).
        qk: the layer's Q/K groups, in ``layer.groups`` order (may be shared
            with other layers).
        dam: one :class:`DamMask` per ``dam-u``/``dam-s`` head, in head order
            (may be shared with other layers).
        dropout: attention-probability dropout.
    """

    def __init__(self, cfg: AttentionConfig, embed_dim: int, layer: LayerSpec, qk: Sequence[QKProjection],
                 dam: Sequence[DamMask] = (), dropout: float = 0.0, bias: bool = True) -> None:
        super().__init__()
        cfg = resolved(cfg)
        masks = layer.masks
        num_heads = len(masks)
        if embed_dim % num_heads:
            raise ValueError(f"embed_dim {embed_dim} is not divisible by {num_heads} heads")
        mode = str(cfg.mask_mode)
        if mode not in MASK_MODES:
            raise ValueError(f"mask_mode must be one of {MASK_MODES}, not {mode!r}")
        if len(qk) != len(layer.groups):
            raise ValueError(f"the layer uses {len(layer.groups)} Q/K groups, got {len(qk)} projections")
        self.embed_dim, self.num_heads = embed_dim, num_heads
        self.head_dim = embed_dim // num_heads
        self.scaling = self.head_dim ** -0.5
        self.mask_mode = mode
        if str(cfg.attn_impl) not in ATTN_IMPLS:
            raise ValueError(f"attn_impl must be one of {ATTN_IMPLS}, not {cfg.attn_impl!r}")
        self.attn_impl = str(cfg.attn_impl)
        self.masks: Tuple[HeadMask, ...] = masks
        # The fixed part: learned heads see every key before their learned mask.
        self.fixed_masks = tuple(GlobalMask() if m.learned else m for m in masks)
        self.head_to_group = layer.head_to_group
        self.dam_heads = tuple(h for h, m in enumerate(masks) if isinstance(m, DamSpec))
        self.aaa_heads = tuple(h for h, m in enumerate(masks) if isinstance(m, AxisAdaptiveSpec))
        self.aaa_local = tuple(OffsetMask("local", -masks[h].window, masks[h].window) for h in self.aaa_heads)
        self.gated_heads = layer.gated_heads
        # The structured paths (fairseq_local.attention.window): unmasked heads through the fused
        # kernel, window heads through the windowed one; a layer with any other head runs dense.
        self.global_heads = tuple(h for h, m in enumerate(masks) if type(m) is GlobalMask)
        window = [(h, window_of(m)) for h, m in enumerate(masks) if window_of(m) is not None]
        self.window_plan = WindowPlan(tuple(h for h, _ in window), tuple(self.head_to_group[h] for h, _ in window),
                                      tuple(w for _, w in window)) if window else None
        self.structured = len(self.global_heads) + len(window) == num_heads
        order = self.global_heads + tuple(h for h, _ in window)  # the structured path's head order
        self.head_order = None if not self.structured or order == tuple(range(num_heads)) else order
        if len(dam) != len(self.dam_heads):
            raise ValueError(f"{len(self.dam_heads)} DAM heads need as many DamMask modules, got {len(dam)}")
        # Learned heads in (DAM..., AAA...) order; which of them enter before the softmax.
        self.learned_heads = self.dam_heads + self.aaa_heads
        self.pre_learned = tuple(h for h in self.learned_heads if mode == "pre" or h in self.aaa_heads)
        self.post_learned = tuple(h for h in self.learned_heads if h not in self.pre_learned)
        self.mask_neg = float(cfg.mask_neg)
        self.tau_schedule: TauSchedule = tau_schedule(cfg)
        self.tau = self.tau_schedule(0)
        self.num_updates = 0
        # A list while attention is being captured (fairseq_local.analysis):
        # every forward pass appends its per-head weights, (B, H, T, S).
        self.weights_sink: Optional[list] = None

        self.qk = nn.ModuleList(qk)
        self.dam = nn.ModuleList(dam)
        self.axis = AxisSelector(embed_dim) if self.aaa_heads else None
        self.gates = None
        if self.gated_heads:
            self.gates = HeadGates(len(self.gated_heads), init=cfg.gate_init, beta=cfg.gate_beta,
                                   gamma=cfg.gate_gamma, zeta=cfg.gate_zeta, num_heads=num_heads)
        self.v_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.dropout_module = FairseqDropout(dropout, module_name=self.__class__.__name__)
        inverse = sorted(range(num_heads), key=(self.head_order or range(num_heads)).__getitem__)
        for name, index in [("group_index", self.head_to_group), ("learned_index", self.learned_heads),
                            ("gate_index", self.gated_heads), ("window_index", self.window_plan.heads if window else ()),
                            ("global_index", self.global_heads), ("order_inverse", inverse)]:
            self.register_buffer(name, torch.tensor(index, dtype=torch.long), persistent=False)
        pre = torch.zeros(num_heads, dtype=torch.bool)
        pre[list(self.pre_learned)] = True
        self.register_buffer("pre_softmax", pre.view(1, -1, 1, 1), persistent=False)  # heads with C·(1 − M)
        # fairseq's MultiheadAttention initialisation (Wv gain 1/sqrt(2), Wo gain 1).
        nn.init.xavier_uniform_(self.v_proj.weight, gain=1 / math.sqrt(2))
        nn.init.xavier_uniform_(self.out_proj.weight)
        if bias:
            nn.init.constant_(self.out_proj.bias, 0.0)

    @property
    def num_groups(self) -> int:
        return len(self.qk)

    @property
    def untied(self) -> bool:
        return self.head_to_group == tuple(range(self.num_heads))

    def set_num_updates(self, num_updates: int) -> None:
        """Called by fairseq before every update: anneal τ, remember the count."""
        self.num_updates = num_updates
        self.tau = self.tau_schedule(num_updates)

    def fixed_mask(self, tgt_len: int, padding_mask: Optional[Tensor], device: torch.device) -> Optional[Tensor]:
        """Dense fixed masks: None if every head is global, else bool (H, T, T)
        for offset-only kinds or (B, H, T, T) for kinds that need real positions."""
        if all(m.is_global for m in self.fixed_masks):
            return None
        if all(m.relative for m in self.fixed_masks):
            return _relative_masks(self.fixed_masks, tgt_len, device)
        pos = real_positions(padding_mask, tgt_len, device)
        return stack_masks(self.fixed_masks, pos, pos)

    def learned_mask(self, x: Tensor, padding_mask: Optional[Tensor]) -> Tuple[Optional[Tensor], Optional[Tensor]]:
        """The learned heads' masks M.

        Args:
            x: (T, B, d) layer input; padding_mask: (B, T) bool or None.
        Returns:
            M (B, len(learned_heads), T, T) float32 in [0, 1], DAM heads first, then
            ``aaa`` heads (None without learned heads); and the ``aaa``
            indicators I_r, I_c (2, B, T) float32 (None without ``aaa`` heads).
        """
        if not self.learned_heads:
            return None, None
        T, B = x.shape[:2]
        pos = real_positions(padding_mask, T, x.device).expand(B, T)
        parts, ind = [d.gather(pos, pos, self.tau, padding_mask) for d in self.dam], None
        if self.aaa_heads:
            ind = self.axis.indicators(x, self.tau)  # (2, B, T)
            parts += [self.axis.pattern(ind, loc.dense(pos, pos)) for loc in self.aaa_local]
        return torch.stack(parts, 1), ind

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
            While ``weights_sink`` is a list, the per-head weights (B, H, T, T),
            gated heads scaled by their gate, are also appended to it.
        Returns:
            output (T, B, d) and the weights or None.
        """
        if (key is not None and key is not query) or (value is not None and value is not query):
            raise ValueError("LocalMultiheadAttention is encoder self-attention only")
        sink = self.weights_sink
        asked = need_weights or need_head_weights
        need_weights = asked or sink is not None
        tgt_len, bsz, _ = query.shape
        H, G, dh = self.num_heads, self.num_groups, self.head_dim
        q, k, v = self._in_proj(query)
        q = q.view(tgt_len, bsz, G, dh).permute(1, 2, 0, 3)  # (B, G, T, dh)
        k = k.view(tgt_len, bsz, G, dh).permute(1, 2, 0, 3)  # (B, G, S, dh)
        v = v.view(tgt_len, bsz, H, dh).permute(1, 2, 0, 3)  # (B, H, S, dh)
        records = active_record_list()
        # Under --checkpoint-activations fairseq runs the layer under no_grad and recomputes it in the
        # backward: the recorded masks still carry their graph to the parameters, so the penalties
        # computed from the records keep their gradient (the recomputation, with the same noise, gives
        # the task's).
        with torch.enable_grad() if records is not None and self.training else contextlib.nullcontext():
            learned, indicators = self.learned_mask(query, key_padding_mask)

        path = self.path(tgt_len, need_weights, attn_mask, q.dtype, q.device, q.requires_grad)
        if path == "structured":
            out = self.structured_attention(q, k, v, key_padding_mask)
            probs = weights = None
        elif path == "flex":
            out = flex_attention_heads(q, k, v, self.fixed_masks, self.head_to_group, key_padding_mask,
                                       self.mask_mode, self.scaling)
            probs = weights = None
        else:
            fixed = self.fixed_mask(tgt_len, key_padding_mask, query.device)
            probs = self.attention_probs(q, k, fixed, learned, key_padding_mask, attn_mask)
            out = torch.matmul(self.dropout_module(probs), v)  # (B, H, T, dh)
            weights = probs.transpose(0, 1) if asked else None  # (H, B, T, S)
            if weights is not None and not need_head_weights:
                weights = weights.mean(dim=0)
        gates = None
        if self.gates is not None:
            gates = self.gates()
            scale = torch.ones(H, dtype=out.dtype, device=out.device).index_copy(
                0, self.gate_index, gates.to(out.dtype)).view(1, H, 1, 1)
            out = out * scale
            if sink is not None:
                probs = probs * scale  # what the head's output is made of: z_h · A_h
        if sink is not None:
            sink.append(probs.detach())
        if records is not None:
            records.append(AttentionRecord(self, learned, indicators, key_padding_mask, tgt_len, bsz))
        out = out.permute(2, 0, 1, 3).reshape(tgt_len, bsz, self.embed_dim)
        return self.out_proj(out), weights

    def path(self, tgt_len: int, need_weights: bool, attn_mask: Optional[Tensor], dtype: torch.dtype,
             device: torch.device = torch.device("cpu"), needs_grad: bool = False) -> str:
        """The path of a forward pass, by ``attn_impl``: ``dense``
        (:meth:`attention_probs`, every head), ``structured``
        (:meth:`structured_attention`) or ``flex`` (FlexAttention).

        ``window`` takes the structured path wherever it applies; ``auto``
        too, except for window heads on short inputs (fewer than
        :func:`~fairseq_local.attention.window.auto_min_len` positions for the
        mask mode and device), and takes FlexAttention
        on CUDA for other fixed kinds.
        Weights, an ``attn_mask``, learned heads and (except under ``flex``)
        heads without a structured form always take the dense path.
        ``flex`` where FlexAttention cannot run is a one-line
        :class:`~fairseq_local.errors.OptionError`."""
        impl = self.attn_impl
        if impl == "dense" or need_weights or attn_mask is not None or self.learned_heads:
            return "dense"
        if impl == "flex" or (impl == "auto" and device.type == "cuda" and not self.structured):
            reason = flex_available(device, needs_grad)
            if reason is None and not (needs_grad and self.dropout_module.p > 0):
                return "flex"
            if impl == "flex":
                raise OptionError(reason or "--attn-impl flex has no attention dropout; use --attention-dropout 0")
        if not self.structured or dtype not in fast_dtypes(device):
            return "dense"
        if impl == "auto" and self.window_plan is not None and tgt_len < auto_min_len(self.mask_mode, device):
            return "dense"
        return "structured"

    def check_trainable(self) -> None:
        """One-line :class:`~fairseq_local.errors.OptionError` if ``--attn-impl
        flex`` cannot train where the module's weights are (checked before
        training starts, not at the first backward)."""
        if self.attn_impl == "flex":
            reason = flex_available(self.v_proj.weight.device, needs_grad=True)
            if reason is not None:
                raise OptionError(f"--attn-impl flex cannot train here: {reason}")

    def structured_attention(self, q: Tensor, k: Tensor, v: Tensor, key_padding_mask: Optional[Tensor]) -> Tensor:
        """Global heads through the fused kernel, window heads through the
        windowed one (:mod:`fairseq_local.attention.window`).

        Args:
            q, k: (B, G, T, dh); v: (B, H, T, dh); key_padding_mask: (B, T) or None.
        Returns:
            (B, H, T, dh), equal to ``attention_probs(...) @ v``.
        """
        drop = self.dropout_module
        p = drop.p if (self.training or drop.apply_during_inference) else 0.0
        parts = []
        if self.global_heads:
            groups = [self.head_to_group[h] for h in self.global_heads]
            v_global = v if len(self.global_heads) == self.num_heads else v.index_select(1, self.global_index)
            parts.append(global_attention(q, k, v_global, groups, key_padding_mask, self.scaling, p))
        if self.window_plan is not None:
            v_window = v if not self.global_heads else v.index_select(1, self.window_index)
            parts.append(window_attention(q, k, v_window, self.window_plan, key_padding_mask, self.mask_mode,
                                          self.scaling, drop if p > 0 else None))
        out = parts[0] if len(parts) == 1 else torch.cat(parts, 1)
        return out if self.head_order is None else out.index_select(1, self.order_inverse)

    def attention_probs(
        self,
        q: Tensor,
        k: Tensor,
        fixed: Optional[Tensor],
        learned: Optional[Tensor] = None,
        key_padding_mask: Optional[Tensor] = None,
        attn_mask: Optional[Tensor] = None,
    ) -> Tensor:
        """Masked attention probabilities per head.

        Args:
            q: (B, G, T, dh); k: (B, G, S, dh).
            fixed: None (all global), bool (H, T, S) or (B, H, T, S).
            learned: None, or M (B, len(learned_heads), T, S) in [0, 1].
            key_padding_mask: (B, S) bool, True at padding.
        Returns:
            (B, H, T, S): ``post`` = mask ⊙ softmax over real keys (Eq. 9);
            ``pre`` = softmax over allowed keys; rows without an allowed key are 0.
        """
        probs, weight = self.attention_parts(q, k, fixed, learned, key_padding_mask, attn_mask)
        return probs if weight is None else probs * weight

    def attention_parts(
        self,
        q: Tensor,
        k: Tensor,
        fixed: Optional[Tensor],
        learned: Optional[Tensor] = None,
        key_padding_mask: Optional[Tensor] = None,
        attn_mask: Optional[Tensor] = None,
    ) -> Tuple[Tensor, Optional[Tensor]]:
        """The probabilities as P ⊙ W (arguments as :meth:`attention_probs`).

        Returns:
            P (B, H, T, S): the softmax each head takes, over real keys
            (``post``) or over allowed keys (``pre``); W: None (all ones), or a
            per-entry factor (B, H, T, S) or (H, T, S) that does not depend on
            the scores (the fixed 0/1 mask, a post-softmax learned M).  The
            Jacobians in :mod:`fairseq_local.analysis.jacobian` use the split.
        """
        scores = torch.matmul(q * self.scaling, k.transpose(-1, -2))  # (B, G, T, S)
        if attn_mask is not None:
            scores = scores + attn_mask
        # The softmax runs in float32: a float64 minimum would become -inf there (NaN rows).
        neg = max(torch.finfo(scores.dtype).min, torch.finfo(torch.float32).min)
        allowed, weight = fixed, None
        if learned is not None:
            scores = self._per_head(scores)
            B, _, T, S = scores.shape
            learned = learned.to(scores.dtype)  # float32 M, half scores under CUDA autocast
            if self.learned_heads == tuple(range(self.num_heads)):
                m = learned
            else:  # 1 for the other heads
                m = torch.ones(B, self.num_heads, T, S, dtype=scores.dtype, device=scores.device)
                m = m.index_copy(1, self.learned_index, learned)
            pre = self.pre_softmax
            # Before the softmax: C·(1 − M), and M = 0 excluded (SparseBERT's code; AAA Eq. 5).
            bias = pre_softmax_bias(m, self.mask_neg)
            if len(self.pre_learned) == self.num_heads:
                scores, keep = scores + bias, m > 0
            else:
                scores = scores + torch.where(pre, bias, torch.zeros_like(m))
                keep = (m > 0) | ~pre
            allowed = keep if allowed is None else allowed & keep
            if self.post_learned:
                weight = torch.where(pre, torch.ones_like(m), m)  # after the softmax (Eq. 4)
        if key_padding_mask is not None:
            scores = scores.masked_fill(key_padding_mask[:, None, None, :], neg)
        if self.mask_mode == "post" or allowed is None:
            probs = F.softmax(scores, dim=-1, dtype=torch.float32).type_as(scores)
            probs = self._per_head(probs)
        else:
            scores = self._per_head(scores)
            if key_padding_mask is not None:
                allowed = allowed & ~key_padding_mask[:, None, None, :]  # (B, H, T, S)
            # A row with no allowed key is uniform over `neg` here; the weight zeroes it.
            probs = F.softmax(scores.masked_fill(~allowed, neg), dim=-1, dtype=torch.float32).type_as(scores)
        if allowed is not None:
            allowed = allowed.to(probs.dtype)
            weight = allowed if weight is None else allowed * weight
        return probs, weight

    def _per_head(self, t: Tensor) -> Tensor:
        """(B, G, T, S) -> (B, H, T, S) by each head's group (a no-op once per head)."""
        if self.untied or t.shape[1] == self.num_heads:
            return t
        return t.index_select(1, self.group_index)
