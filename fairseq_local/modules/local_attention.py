"""One encoder self-attention module for every head variant.

Each head h has a mask (:mod:`fairseq_local.modules.masks`) and uses the Wq/Wk
of a Q/K group g(h) (:class:`QKProjection`); Wv and Wo are per head.  For a
layer with G groups and H heads (seed 000, Eq. 9 and §4.2):

    S_g  = (X Wq_g)(X Wk_g)^T / sqrt(d_h)                 (B, G, T, S)
    post:  A_h = mask_h ⊙ softmax(S_g(h))                  softmax over all real keys
    pre:   A_h = softmax(S_g(h) restricted to mask_h)      renormalised in the window
    Y    = concat_h(A_h X Wv_h) Wo

In ``post`` mode the probabilities of a group are computed once and masked per
head.  A query with no allowed key gets A_h = 0 (a zero head output) in both
modes; nothing is ever NaN.  A :class:`QKProjection` shared by several layers
is one module (one parameter set, one gradient).

Learned heads (:mod:`fairseq_local.modules.learned`) use the same path:

* ``dam-u``/``dam-s``: mask_h is the soft DAM mask M ∈ [0, 1] (seed 001,
  Eq. 4: ``A ⊙ M``).  ``post`` multiplies the softmax by M; ``pre`` is
  softmax(S + log M) = M·exp(S) / Σ M·exp(S), which for a binary M is the
  ``pre`` of a fixed mask.
* ``aaa``: the axis pattern B (OR ``local-W``) enters before the softmax as
  an additive C·(1 − B) (seed 004, Eq. 5), soft in training, a hard exclusion
  in evaluation, whatever the mask mode.
* ``:gate``: the head's output is scaled by its hard-concrete gate.

After each forward pass :attr:`LocalMultiheadAttention.stats` holds the
layer's sparsity terms for :mod:`fairseq_local.criteria` (see
:meth:`LocalMultiheadAttention.sparsity_stats`).
"""

import math
from functools import lru_cache
from typing import Dict, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from fairseq.modules.fairseq_dropout import FairseqDropout
from torch import Tensor, nn

from .learned import (
    AxisAdaptiveSpec,
    AxisSelector,
    DamMask,
    DamSpec,
    HeadGates,
    TauSchedule,
)
from .masks import GlobalMask, HeadMask, OffsetMask, real_positions, stack_masks

MASK_MODES = ("post", "pre")


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
def _relative_masks(
    masks: Tuple[HeadMask, ...], tgt_len: int, src_len: int, device: torch.device
) -> Tensor:
    """(H, T, S) bool masks of offset-only kinds, cached per length."""
    return stack_masks(
        masks,
        torch.arange(tgt_len, device=device),
        torch.arange(src_len, device=device),
    )


class LocalMultiheadAttention(nn.Module):
    """Encoder self-attention with a mask and a Q/K group per head.

    Args:
        embed_dim: model dimension d (= H · d_h).
        masks: one :class:`HeadMask` per head (H of them).
        head_to_group: for each head, the index of its group in ``qk``.
        qk: the G Q/K groups this layer uses (may be shared with other layers).
        mask_mode: ``"post"`` (seed 000, Eq. 9) or ``"pre"``.
        dropout: attention-probability dropout.
        dam: one :class:`DamMask` per ``dam-u``/``dam-s`` head, in head order
            (may be shared with other layers).
        axis: the :class:`AxisSelector` of this layer's ``aaa`` heads.
        gates: a :class:`HeadGates` with one gate per ``:gate`` head.
        gated_heads: the indices of the gated heads.
        tau: the Gumbel-sigmoid temperature schedule of the learned heads.
        dam_noise: False to train DAM with P = sigmoid(α), no noise (seed 001, §3.1).
        aaa_neg: the large negative constant C of seed 004, Eq. 5.
    """

    def __init__(
        self,
        embed_dim: int,
        masks: Sequence[HeadMask],
        head_to_group: Sequence[int],
        qk: Sequence[QKProjection],
        mask_mode: str = "post",
        dropout: float = 0.0,
        bias: bool = True,
        dam: Sequence[DamMask] = (),
        axis: Optional[AxisSelector] = None,
        gates: Optional[HeadGates] = None,
        gated_heads: Sequence[int] = (),
        tau: TauSchedule = TauSchedule(),
        dam_noise: bool = True,
        aaa_neg: float = -1e4,
    ) -> None:
        super().__init__()
        num_heads = len(masks)
        if embed_dim % num_heads:
            raise ValueError(f"embed_dim {embed_dim} is not divisible by {num_heads} heads")
        if mask_mode not in MASK_MODES:
            raise ValueError(f"mask_mode must be one of {MASK_MODES}, not {mask_mode!r}")
        if len(head_to_group) != num_heads or sorted(set(head_to_group)) != list(range(len(qk))):
            raise ValueError("head_to_group must map every head to one of the qk groups, using all")
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.scaling = self.head_dim ** -0.5
        self.masks: Tuple[HeadMask, ...] = tuple(masks)
        # The fixed part: learned heads see every key before their learned mask.
        self.fixed_masks = tuple(GlobalMask() if m.learned else m for m in self.masks)
        self.dam_heads = tuple(h for h, m in enumerate(self.masks) if isinstance(m, DamSpec))
        self.aaa_heads = tuple(h for h, m in enumerate(self.masks) if isinstance(m, AxisAdaptiveSpec))
        self.aaa_local = tuple(OffsetMask("local", -self.masks[h].window, self.masks[h].window)
                               for h in self.aaa_heads)
        self.gated_heads = tuple(gated_heads)
        if len(dam) != len(self.dam_heads):
            raise ValueError(f"{len(self.dam_heads)} DAM heads need as many DamMask modules, got {len(dam)}")
        if (axis is None) != (not self.aaa_heads):
            raise ValueError("an AxisSelector is needed exactly when there are 'aaa' heads")
        if (gates is None) != (not self.gated_heads) or (
            gates is not None and gates.log_alpha.numel() != len(self.gated_heads)
        ):
            raise ValueError("HeadGates must have one gate per gated head")
        self.dam = nn.ModuleList(dam)
        self.axis = axis
        self.gates = gates
        self.tau_schedule = tau
        self.tau = tau(0)
        self.dam_noise = dam_noise
        self.aaa_neg = aaa_neg
        self.collect_stats = False
        self.stats: Dict[str, Tensor] = {}
        self.last_axis: Optional[Tensor] = None  # (B, A, T, S) of the last forward, for images
        self._aaa_indicators: Optional[Tensor] = None  # (2, B, T) of the last forward
        self.mask_mode = mask_mode
        self.head_to_group = tuple(head_to_group)
        self.qk = nn.ModuleList(qk)
        self.v_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.dropout_module = FairseqDropout(dropout, module_name=self.__class__.__name__)
        for name, index in [("group_index", self.head_to_group), ("dam_index", self.dam_heads),
                            ("aaa_index", self.aaa_heads), ("gate_index", self.gated_heads)]:
            self.register_buffer(name, torch.tensor(index, dtype=torch.long), persistent=False)
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
        """Called by fairseq before every update: anneal τ."""
        self.tau = self.tau_schedule(num_updates)

    def head_masks(
        self, tgt_len: int, src_len: int, padding_mask: Optional[Tensor], device: torch.device
    ) -> Optional[Tensor]:
        """Dense fixed masks: None if every head is global, else bool (H, T, S)
        for offset-only kinds or (B, H, T, S) for kinds that need real positions."""
        if all(m.is_global for m in self.fixed_masks):
            return None
        if all(m.relative for m in self.fixed_masks):
            return _relative_masks(self.fixed_masks, tgt_len, src_len, device)
        pos = real_positions(padding_mask, src_len).to(device)
        return stack_masks(self.fixed_masks, pos[..., :tgt_len], pos)

    def learned_masks(
        self, x: Tensor, fixed: Optional[Tensor], padding_mask: Optional[Tensor]
    ) -> Tuple[Optional[Tensor], Optional[Tensor], Optional[Tensor]]:
        """Apply the learned heads.

        Args:
            x: (T, B, d) layer input; fixed: output of :meth:`head_masks`.
        Returns:
            ``keep``: the multiplicative mask, None, bool (H|B, ..., T, S) or
            float (B, H, T, S) with the DAM heads' M; ``bias``: None or the
            additive (B, H, T, S) pre-softmax term of the ``aaa`` heads;
            ``axis``: None or the (B, A, T, S) patterns of the ``aaa`` heads.
        """
        keep, bias, axis = fixed, None, None
        if not (self.dam_heads or self.aaa_heads):
            return keep, bias, axis
        T, B = x.shape[:2]
        pos = real_positions(padding_mask, T).to(x.device).expand(B, T)
        shape = (B, self.num_heads, T, T)
        if self.dam_heads:
            m = torch.stack(
                [d.gather(pos, pos, self.tau, self.dam_noise) for d in self.dam], 1
            ).to(x.dtype)  # (B, D, T, S)
            base = torch.ones(shape, dtype=x.dtype, device=x.device)
            if keep is not None:
                base = base * keep.to(x.dtype)
            keep = base.index_copy(1, self.dam_index, m)
        if self.aaa_heads:
            ind = self.axis.indicators(x, self.tau)  # (2, B, T)
            axis = torch.stack(
                [self.axis.pattern(ind, loc.dense(pos, pos)) for loc in self.aaa_local], 1
            )  # (B, A, T, S)
            if self.training:  # soft, so that gradients reach the FC layer (Eq. 5)
                term = self.aaa_neg * (1.0 - axis)
            else:
                term = torch.zeros_like(axis).masked_fill(axis < 0.5, torch.finfo(x.dtype).min)
            bias = torch.zeros(shape, dtype=x.dtype, device=x.device).index_copy(1, self.aaa_index, term)
            self._aaa_indicators = ind
            self.last_axis = axis.detach()
        return keep, bias, axis

    def _in_proj(self, x: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
        """One fused projection: (T, B, d) -> q, k (T, B, G·d_h) and v (T, B, d)."""
        groups = list(self.qk)
        weights = [g.q_proj.weight for g in groups] + [g.k_proj.weight for g in groups]
        weights.append(self.v_proj.weight)
        bias = None
        if self.v_proj.bias is not None:
            bias = torch.cat(
                [g.q_proj.bias for g in groups]
                + [g.k_proj.bias for g in groups]
                + [self.v_proj.bias]
            )
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
        Returns:
            output (T, B, d) and the weights or None.
        """
        if (key is not None and key is not query) or (value is not None and value is not query):
            raise ValueError("LocalMultiheadAttention is encoder self-attention only")
        need_weights = need_weights or need_head_weights
        tgt_len, bsz, _ = query.shape
        H, G, dh = self.num_heads, self.num_groups, self.head_dim
        q, k, v = self._in_proj(query)
        q = q.view(tgt_len, bsz, G, dh).permute(1, 2, 0, 3)  # (B, G, T, dh)
        k = k.view(tgt_len, bsz, G, dh).permute(1, 2, 0, 3)  # (B, G, S, dh)
        v = v.view(tgt_len, bsz, H, dh).permute(1, 2, 0, 3)  # (B, H, S, dh)
        if key_padding_mask is not None and not key_padding_mask.any():
            key_padding_mask = None
        masks = self.head_masks(tgt_len, tgt_len, key_padding_mask, query.device)
        masks, bias, axis = self.learned_masks(query, masks, key_padding_mask)

        if masks is None and bias is None and self.untied and not need_weights and attn_mask is None:
            # Plain multi-head attention: the fused kernel, as fairseq's fast path.
            keep = None if key_padding_mask is None else ~key_padding_mask[:, None, None, :]
            drop = self.dropout_module
            p = drop.p if (self.training or drop.apply_during_inference) else 0.0
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=keep, dropout_p=p)
            weights = None
        else:
            probs = self.attention_probs(q, k, masks, key_padding_mask, attn_mask, bias)
            out = torch.matmul(self.dropout_module(probs), v)  # (B, H, T, dh)
            weights = probs.transpose(0, 1) if need_weights else None  # (H, B, T, S)
            if weights is not None and not need_head_weights:
                weights = weights.mean(dim=0)
        gates = None
        if self.gates is not None:
            gates = self.gates()
            scale = torch.ones(H, dtype=out.dtype, device=out.device).index_copy(
                0, self.gate_index, gates.to(out.dtype))
            out = out * scale.view(1, H, 1, 1)
        if self.collect_stats:  # set by the sparsity criterion
            self.stats = self.sparsity_stats(masks, axis, gates, key_padding_mask, tgt_len, bsz)
        out = out.permute(2, 0, 1, 3).reshape(tgt_len, bsz, self.embed_dim)
        return self.out_proj(out), weights

    def sparsity_stats(
        self,
        keep: Optional[Tensor],
        axis: Optional[Tensor],
        gates: Optional[Tensor],
        padding_mask: Optional[Tensor],
        T: int,
        B: int,
    ) -> Dict[str, Tensor]:
        """The layer's sparsity terms, as sums (so they add up over layers,
        batches and workers).  Differentiable entries are marked *.

        * ``rho_sum``/``rho_count``: Σ over sentences and heads of
          ρ = 1 − |M|/N² (seed 004, Eq. 9; soft M in training) and their number.
        * ``dam_density_sum``\*/``dam_count``: Σ ‖M‖₁/N² over sentences and DAM heads.
        * ``aaa_rho_sum``\*/``aaa_count``: Σ ρ over sentences and ``aaa`` heads.
        * ``aaa_rows``/``aaa_cols``/``aaa_tokens``: active rows and columns
          (indicator > 0.5) and real tokens.
        * ``gate_l0``\*: Σ of P(gate ≠ 0); ``gate_open``/``gate_count``: gates open
          in evaluation (z > 0), and gates.
        """
        real = torch.ones(B, T, dtype=torch.bool, device=self.group_index.device)
        if padding_mask is not None:
            real = ~padding_mask
        n2 = real.sum(-1).to(torch.float32).pow(2)  # (B,)
        pair = (real[:, :, None] & real[:, None, :]).unsqueeze(1)  # (B, 1, T, S)
        full = torch.ones((B, self.num_heads, T, T), device=real.device)
        if keep is not None:
            full = full * keep.to(full.dtype)
        if axis is not None:
            full = full.index_copy(1, self.aaa_index, full.index_select(1, self.aaa_index) * axis.float())
        rho = 1.0 - (full * pair).sum((-1, -2)) / n2[:, None]  # (B, H)
        stats = {"rho_sum": rho.detach().sum(), "rho_count": torch.tensor(float(rho.numel()))}
        if self.dam_heads:
            stats["dam_density_sum"] = (1.0 - rho.index_select(1, self.dam_index)).sum()
            stats["dam_count"] = torch.tensor(float(B * len(self.dam_heads)))
        if self.aaa_heads:
            stats["aaa_rho_sum"] = rho.index_select(1, self.aaa_index).sum()
            stats["aaa_count"] = torch.tensor(float(B * len(self.aaa_heads)))
            on = (self._aaa_indicators > 0.5) & real.unsqueeze(0)  # (2, B, T)
            stats["aaa_rows"], stats["aaa_cols"] = on.sum((1, 2)).float().unbind(0)
            stats["aaa_tokens"] = real.sum().float()
        if self.gates is not None:
            stats["gate_l0"] = self.gates.l0().sum()
            stats["gate_open"] = (self.gates.eval_values() > 0).sum().float()
            stats["gate_count"] = torch.tensor(float(len(self.gated_heads)))
        return stats

    def attention_probs(
        self,
        q: Tensor,
        k: Tensor,
        masks: Optional[Tensor],
        key_padding_mask: Optional[Tensor] = None,
        attn_mask: Optional[Tensor] = None,
        bias: Optional[Tensor] = None,
    ) -> Tensor:
        """Masked attention probabilities per head.

        Args:
            q: (B, G, T, dh); k: (B, G, S, dh).
            masks: None (all global), bool (H, T, S) or (B, H, T, S), or float
                (B, H, T, S) with soft (DAM) entries in [0, 1].
            key_padding_mask: (B, S) bool, True at padding.
            bias: None or an additive (B, H, T, S) pre-softmax term (``aaa``).
        Returns:
            (B, H, T, S): ``post`` = mask ⊙ softmax over real keys (Eq. 9);
            ``pre`` = softmax over allowed keys, weighted by a soft mask;
            rows without allowed keys are 0.
        """
        scores = torch.matmul(q * self.scaling, k.transpose(-1, -2))  # (B, G, T, S)
        if attn_mask is not None:
            scores = scores + attn_mask
        neg = torch.finfo(scores.dtype).min
        if bias is not None:
            scores = self._per_head(scores) + bias
        if key_padding_mask is not None:
            scores = scores.masked_fill(key_padding_mask[:, None, None, :], neg)
        if self.mask_mode == "post":
            probs = F.softmax(scores, dim=-1, dtype=torch.float32).type_as(scores)
            probs = probs if bias is not None else self._per_head(probs)
            return probs if masks is None else probs * masks
        scores = scores if bias is not None else self._per_head(scores)
        if masks is None:
            return F.softmax(scores, dim=-1, dtype=torch.float32).type_as(scores)
        allowed = masks if masks.dtype == torch.bool else masks > 0
        if key_padding_mask is not None:
            allowed = allowed & ~key_padding_mask[:, None, None, :]  # (B, H, T, S)
        probs = F.softmax(scores.masked_fill(~allowed, neg), dim=-1, dtype=torch.float32)
        # A row with no allowed key is uniform over `neg` here; the product zeroes it.
        probs = probs.type_as(scores) * allowed
        if masks.dtype == torch.bool:
            return probs
        # Soft mask: M·exp(S) / Σ M·exp(S), i.e. softmax(S + log M).
        weighted = probs * masks
        return weighted / weighted.sum(-1, keepdim=True).clamp_min(torch.finfo(probs.dtype).tiny)

    def _per_head(self, t: Tensor) -> Tensor:
        """(B, G, T, S) -> (B, H, T, S) by each head's group."""
        return t if self.untied else t.index_select(1, self.group_index)


def build_qk_groups(
    layers: Sequence[Sequence[str]], embed_dim: int, head_dim: int, bias: bool = True
) -> Dict[str, QKProjection]:
    """Create one :class:`QKProjection` per distinct group key, in first-use order."""
    groups: Dict[str, QKProjection] = {}
    for keys in layers:
        for key in keys:
            if key not in groups:
                groups[key] = QKProjection(embed_dim, head_dim, bias)
    return groups
