"""Sparsity terms of the attention layers, pulled by a criterion after the
forward pass (as fairseq's ``examples/adaptive_span`` pulls ``get_aux_loss``).

An encoder's forward pass runs inside an
:func:`~fairseq_local.attention.context.attention_context` with records: each
:class:`~fairseq_local.attention.module.LocalMultiheadAttention` appends an
:class:`AttentionRecord` (its learned masks, AAA indicators and padding) to
the context's list, and the encoder returns that list with its output.  Nothing is kept on the modules between calls, and no dense pattern of
the fixed heads is built: their |M| is counted from the masks' structure
(:meth:`~fairseq_local.attention.masks.HeadMask.pair_count`), that of the
``aaa`` heads from the row and column indicators
(:meth:`~fairseq_local.attention.learned.AxisSelector.pattern_count`).
:func:`sparsity_terms` turns the records, and the parameters of the learned
masks and gates, into:

* the DAM L1 term (SparseBERT, Eq. 5), in the convention of ``--dam-l1``:
  ``sum`` — Σ over distinct DAM masks of ‖M‖₁ of the whole
  ``max_len``×``max_len`` mask of this update, as the authors' code computes
  it, times (128/max_len)²
  (:meth:`~fairseq_local.attention.learned.DamMask.scaled_l1`): their norm of a
  128×128 mask (their n, §3.1.1) as dense as ours, so that the paper's λ
  (1e-4 … 1e-1) pulls as it did for them whatever ``--dam-max-len``;
  ``density`` — the mean over sentences and DAM (layer, head) slots of
  ‖M‖₁/N² at the sentence's N real tokens.  The same penalty for the same
  density needs λ_density ≈ λ_sum · (distinct DAM masks) · 128².
* ρ (Adaptive Axis Attention, Eq. 9), the mean over sentences, heads and
  layers of 1 − |M|/N², for the hinge of Eq. 10, over each head set of
  :data:`HINGE_HEADS` (:meth:`SparsityTerms.hinge_rho`): the ``aaa`` heads
  (|M| = |B OR local-W|), the learned heads (``aaa`` and DAM: |M| = Σ M over
  the real pairs, Wang et al. §4.1's "sparsity controllable training" of the
  diagonal patterns), or every head (Eq. 9 as written; fixed heads add a
  constant).
* the gates' L0 term (Voita et al. 2019): Σ P(open) (``--gate-penalty sum``)
  or the mean over gated layers of each layer's Σ P(open) (``layer-mean``).
* logging sums and counts: ρ per layer and overall, the DAM density, τ,
  open gates, and the share of active AAA rows and columns.
"""

from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Dict, Optional, Sequence, Tuple

import torch
from torch import Tensor

from .learned import AxisSelector, scale_grad
from .masks.base import constant, pair_count_table

if TYPE_CHECKING:  # pragma: no cover
    from .gates import HeadGates
    from .module import LocalMultiheadAttention

# The heads whose ρ (Eq. 9) the hinge of Eq. 10 reads (--aaa-hinge-heads).
HINGE_HEADS = ("aaa", "learned", "all")
# Logging (sum, count) keys of ρ over each head set (filled by sparsity_terms).
HINGE_LOG_KEYS = {"aaa": ("aaa_rho_sum", "aaa_count"), "learned": ("learned_rho_sum", "learned_count"),
                  "all": ("rho_sum", "rho_count")}


@dataclass
class AttentionRecord:
    """What one attention forward pass realised.

    ``learned``: None or M (B, L, T, T) of the first L of
    ``module.plan.learned_heads`` (DAM heads first; only the DAM heads' slices
    are read); ``indicators``: None or I_r, I_c (2, B, T) of the ``aaa``
    heads; ``padding_mask``: None or (B, T) bool.  The fixed heads' patterns
    are ``module.plan.fixed_masks``, counted from their structure, never stored."""

    module: "LocalMultiheadAttention"
    learned: Optional[Tensor]
    indicators: Optional[Tensor]
    padding_mask: Optional[Tensor]
    T: int
    B: int

    def real(self) -> Tensor:
        """(B, T) bool, True at real tokens."""
        if self.padding_mask is None:
            device = self.module.out_proj.weight.device
            return torch.ones(self.B, self.T, dtype=torch.bool, device=device)
        return ~self.padding_mask

    def kept(self, real: Tensor) -> Tensor:
        """(B, H) float32: the number of each sentence's real pairs that the
        head allows (|M| of Adaptive Axis Attention, Eq. 9), differentiable in
        the learned heads.  ``real`` is :meth:`real`.

        Fixed heads: :meth:`~fairseq_local.attention.masks.HeadMask.pair_count`
        at the sentence's length, from a per-length table (no host read);
        ``aaa`` heads: :meth:`AxisSelector.pattern_count` of the indicators
        (Eq. 12 OR ``local-W``); DAM heads: Σ of M over the real pairs."""
        plan = self.module.plan
        kept = pair_count_table(plan.fixed_masks, self.T, real.device)[real.sum(-1)]  # (B, H)
        if not plan.learned_heads:
            return kept
        parts = []
        if plan.dam_heads:
            w = real.float()
            dam = self.learned[:, : len(plan.dam_heads)].float()  # (B, D, T, T)
            parts.append(torch.einsum("bhts,bt,bs->bh", dam, w, w))
        parts += [AxisSelector.pattern_count(self.indicators, real, loc.hi)[:, None] for loc in plan.aaa_local]
        return kept.index_copy(1, constant(plan.learned_heads, kept.device), torch.cat(parts, 1))


@dataclass
class SparsityTerms:
    """The penalties (differentiable, None where the model has no such head)
    and the logging sums and counts of one forward pass.

    ``rho_sums[heads]``: the float32 scalar Σ of 1 − |M|/N² (Eq. 9) over the
    (sentence, layer, head) slots of that head set of :data:`HINGE_HEADS`,
    differentiable in the learned heads; ``rho_counts[heads]``: the number of
    slots (a host number).  A set the model has no heads of is absent."""

    dam: Optional[Tensor] = None
    aaa_rho: Optional[Tensor] = None
    gate: Optional[Tensor] = None
    num_updates: int = 0
    log: Dict[str, float] = field(default_factory=dict)
    modules: Sequence["LocalMultiheadAttention"] = ()
    records: Sequence[AttentionRecord] = ()
    rho_sums: Dict[str, Tensor] = field(default_factory=dict)
    rho_counts: Dict[str, float] = field(default_factory=dict)

    def hinge_rho(self, heads: str = "aaa") -> Optional[Tensor]:
        """ρ of Eq. 9 (a float32 scalar) over the head set ``heads`` (one of
        :data:`HINGE_HEADS`), the ρ of Eq. 10's hinge; None without such heads."""
        if heads not in HINGE_HEADS:
            raise ValueError(f"hinge heads must be one of {HINGE_HEADS}, not {heads!r}")
        if not self.rho_counts.get(heads):
            return None
        return self.rho_sums[heads] / self.rho_counts[heads]

    def hinge_log(self, heads: str = "aaa") -> Tuple[float, float]:
        """The logged (sum, count) of :meth:`hinge_rho` (host numbers, read
        with the other logging values); (0, 0) without such heads."""
        num, den = HINGE_LOG_KEYS[heads]
        return float(self.log.get(num, 0.0)), float(self.log.get(den, 0.0))


def sparsity_terms(cfg, modules: Sequence["LocalMultiheadAttention"],
                   records: Sequence[AttentionRecord], gates: Sequence["HeadGates"] = ()) -> SparsityTerms:
    """The sparsity terms of ``modules`` (the model's attention layers, in
    order) after the forward pass that produced ``records``.

    ``cfg`` is the model's :class:`~fairseq_local.attention.config.AttentionConfig`
    (``dam_l1`` and ``gate_penalty`` pick the conventions).  The penalties
    and counts are float32 whatever the model's dtype or autocast (a pair
    count above 65,504 is inf in fp16); the logging values are read back to
    the host once, at the end.  ``gates`` are further gated layers outside
    ``modules`` (the decoder's, Voita et al. 2019 §6): they join the L0 term
    as layers of their own."""
    terms = SparsityTerms(modules=modules, records=records)
    if not modules:
        return terms
    device = modules[0].out_proj.weight.device
    with _no_autocast(device):
        log = _terms(cfg, modules, records, terms, gates)
    tensors = [k for k, v in log.items() if isinstance(v, Tensor)]
    if tensors:  # one read of the device for all logging values
        values = torch.stack([log[k].detach().float().reshape(()) for k in tensors]).tolist()
        log.update(zip(tensors, values))
    terms.log = log
    return terms


def _no_autocast(device: torch.device):
    """A context with autocast off on ``device`` (a no-op where autocast has no such device)."""
    try:
        return torch.autocast(device.type, enabled=False)
    except RuntimeError:
        return nullcontext()


def _terms(cfg, modules: Sequence["LocalMultiheadAttention"], records: Sequence[AttentionRecord],
           terms: SparsityTerms, gates: Sequence["HeadGates"] = ()) -> Dict[str, object]:
    """Fills ``terms``' penalties; returns the logging values (tensors or numbers)."""
    log: Dict[str, object] = {}
    terms.num_updates = modules[0].num_updates
    dam_density, dam_count, aaa_rho, aaa_count = 0.0, 0, 0.0, 0
    dam_rho, all_rho = 0.0, 0.0  # Σ of Eq. 9 over the DAM slots, over every slot (differentiable)
    log["rho_sum"], log["rho_count"] = 0.0, 0.0
    for layer, rec in enumerate(records, start=1):
        plan = rec.module.plan
        real = rec.real()
        n2 = real.sum(-1).float().pow(2)  # (B,)
        rho = 1.0 - rec.kept(real) / n2[:, None]  # (B, H), Eq. 9
        all_rho = all_rho + rho.sum()
        log[f"rho_l{layer}_sum"] = rho.detach().sum()
        log[f"rho_l{layer}_count"] = float(rho.numel())
        log["rho_sum"] = log["rho_sum"] + log[f"rho_l{layer}_sum"]
        log["rho_count"] += log[f"rho_l{layer}_count"]
        if plan.dam_heads:
            dam_density = dam_density + (1.0 - rho[:, list(plan.dam_heads)]).sum()
            dam_rho = dam_rho + rho[:, list(plan.dam_heads)].sum()
            dam_count += rec.B * len(plan.dam_heads)
        if plan.aaa_heads:
            aaa_rho = aaa_rho + rho[:, list(plan.aaa_heads)].sum()
            aaa_count += rec.B * len(plan.aaa_heads)
            on = (rec.indicators > 0.5) & real.unsqueeze(0)  # (2, B, T)
            rows, cols = on.sum((1, 2)).float().unbind(0)
            for key, value in (("aaa_rows", rows), ("aaa_cols", cols), ("aaa_tokens", real.sum())):
                log[key] = log.get(key, 0.0) + value
    if dam_count:
        log["dam_density_sum"], log["dam_count"] = dam_density.detach(), float(dam_count)
        if cfg.dam_l1 == "density":
            terms.dam = dam_density / dam_count
        else:  # SparseBERT's code: ||M||_1 of each distinct mask, whole max_len x max_len, at their n = 128
            masks = {id(d): (d, m.tau) for m in modules for d in m.dam}
            terms.dam = sum(d.scaled_l1(tau) for d, tau in masks.values())
        pre = [m for m in modules if m.plan.dam_heads and m.plan.dam_heads[0] in m.plan.pre_learned]
        if pre:  # the task's gradient through C·(1 − M) is taken without C: the same factor here
            terms.dam = scale_grad(terms.dam, 1.0 / abs(pre[0].mask_neg))
    if aaa_count:
        terms.aaa_rho = aaa_rho / aaa_count
        log["aaa_rho_sum"], log["aaa_count"] = aaa_rho.detach(), float(aaa_count)
        terms.rho_sums["aaa"], terms.rho_counts["aaa"] = aaa_rho, float(aaa_count)
    if aaa_count or dam_count:  # ρ of the learned heads, aaa and DAM (Wang et al. §4.1, Eq. 9-10)
        learned = aaa_rho + dam_rho
        terms.rho_sums["learned"], terms.rho_counts["learned"] = learned, float(aaa_count + dam_count)
        log["learned_rho_sum"], log["learned_count"] = learned.detach(), float(aaa_count + dam_count)
    if records:
        terms.rho_sums["all"], terms.rho_counts["all"] = all_rho, float(log["rho_count"])
    gated = [m.gates for m in modules if m.gates is not None] + list(gates)
    if gated:
        per_layer = [g.l0().sum() for g in gated]
        terms.gate = sum(per_layer) / (len(per_layer) if cfg.gate_penalty == "layer-mean" else 1)
        log["gate_open"] = sum((g.eval_values() > 0).sum() for g in gated)
        log["gate_count"] = float(sum(g.log_alpha.numel() for g in gated))
    if any(m.plan.learned_heads for m in modules):
        log["tau_sum"], log["tau_count"] = float(modules[0].tau), 1.0
    return log
