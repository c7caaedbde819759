"""Sparsity terms of the attention layers, pulled by a criterion after the
forward pass (as fairseq's ``examples/adaptive_span`` pulls ``get_aux_loss``).

An encoder's forward pass runs inside an
:func:`~fairseq_local.attention.context.attention_context` with records: each
:class:`~fairseq_local.attention.module.LocalMultiheadAttention` appends an
:class:`~fairseq_local.attention.record.AttentionRecord` (its learned masks,
what each learned kind realised, and the padding) to the context's list, and
the encoder returns that list with its output.  Nothing is kept on the
modules between calls, and no dense pattern of the fixed heads is built:
their |M| is counted from the masks' structure
(:meth:`~fairseq_local.attention.masks.HeadMask.pair_count`), the learned
heads' by their kind (:meth:`~fairseq_local.attention.learned.kind.LearnedKind.kept`).
:func:`sparsity_terms` turns the records, and the gates, into:

* each learned kind's penalty and logs, by kind
  (:meth:`~fairseq_local.attention.learned.kind.LearnedKind.penalty`; DAM's
  is SparseBERT's L1 term, Eq. 5, :class:`~fairseq_local.attention.learned.DamSpec`);
* ρ (Adaptive Axis Attention, Eq. 9), the mean over sentences, heads and
  layers of 1 − |M|/N², for the hinge of Eq. 10, over each head set of
  :data:`HINGE_HEADS` (:meth:`SparsityTerms.hinge_rho`): one kind's heads
  (``aaa``: |M| = |B OR local-W|), the learned heads (every kind: Wang et al.
  §4.1's "sparsity controllable training" of the diagonal patterns with
  DAM), or every head (Eq. 9 as written; fixed heads add a constant);
* the gates' L0 term (Voita et al. 2019): Σ P(open) (``--gate-penalty sum``)
  or the mean over gated layers of each layer's Σ P(open) (``layer-mean``);
* logging sums and counts: ρ per layer and overall, τ and open gates.
"""

from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, Tuple

import torch
from torch import Tensor, nn

from .learned.kind import LEARNED_KINDS, KindUse
from .record import AttentionRecord

if TYPE_CHECKING:  # pragma: no cover
    from .gates import HeadGates

# The heads whose ρ (Eq. 9) the hinge of Eq. 10 reads (--aaa-hinge-heads): a kind's, the learned ones, every head.
HINGE_HEADS = ("aaa", "learned", "all")
# Logging (sum, count) keys of ρ over each head set (filled by sparsity_terms).
HINGE_LOG_KEYS = {"aaa": ("aaa_rho_sum", "aaa_count"), "learned": ("learned_rho_sum", "learned_count"),
                  "all": ("rho_sum", "rho_count")}
__all__ = ["AttentionRecord", "HINGE_HEADS", "HINGE_LOG_KEYS", "SparsityTerms", "sparsity_terms"]


@dataclass
class SparsityTerms:
    """The penalties (differentiable; absent or None where the model has no
    such head) and the logging sums and counts of one forward pass.

    ``penalties[key]``: each learned kind's penalty (float32 scalar), by
    kind key (:class:`~fairseq_local.attention.learned.kind.LearnedKind`).
    ``uses[key]``: that kind's :class:`~fairseq_local.attention.learned.kind.KindUse`
    per layer.  ``rho_sums[heads]``: the float32 scalar Σ of 1 − |M|/N² (Eq. 9) over the
    (sentence, layer, head) slots of that head set of :data:`HINGE_HEADS`,
    differentiable in the learned heads; ``rho_counts[heads]``: the number of
    slots (a host number).  A set the model has no heads of is absent."""

    penalties: Dict[str, Tensor] = field(default_factory=dict)
    uses: Dict[str, List[KindUse]] = field(default_factory=dict)
    gate: Optional[Tensor] = None
    num_updates: int = 0
    log: Dict[str, float] = field(default_factory=dict)
    modules: Sequence[nn.Module] = ()
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


def sparsity_terms(options, modules: Sequence[nn.Module],
                   records: Sequence[AttentionRecord], gates: Sequence["HeadGates"] = ()) -> SparsityTerms:
    """The sparsity terms of ``modules`` (the model's attention layers, in
    order) after the forward pass that produced ``records``.

    ``options`` are the model's :class:`~fairseq_local.attention.config.AttentionOptions`
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
        log = _terms(options, modules, records, terms, gates)
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


def _terms(options, modules: Sequence[nn.Module], records: Sequence[AttentionRecord], terms: SparsityTerms,
           gates: Sequence["HeadGates"] = ()) -> Dict[str, object]:
    """Fills ``terms``' penalties; returns the logging values (tensors or numbers)."""
    log: Dict[str, object] = {}
    terms.num_updates = modules[0].num_updates
    all_rho = 0.0  # Σ of Eq. 9 over every slot (differentiable)
    log["rho_sum"], log["rho_count"] = 0.0, 0.0
    for layer, rec in enumerate(records, start=1):
        m = rec.module
        real = rec.real()
        n2 = real.sum(-1).float().pow(2)  # (B,)
        rho = 1.0 - rec.kept(real) / n2[:, None]  # (B, H), Eq. 9
        all_rho = all_rho + rho.sum()
        log[f"rho_l{layer}_sum"] = rho.detach().sum()
        log[f"rho_l{layer}_count"] = float(rho.numel())
        log["rho_sum"] = log["rho_sum"] + log[f"rho_l{layer}_sum"]
        log["rho_count"] += log[f"rho_l{layer}_count"]
        for g in m.plan.learned:
            terms.uses.setdefault(g.kind.key, []).append(KindUse(
                layer, m.learned[g.kind.key], g.heads, g.specs, rec.realised[g.kind.key], rho[:, list(g.heads)],
                real, m.tau, m.mask_neg, m.plan.mode))
    learned, learned_count = 0.0, 0
    for key, kind in LEARNED_KINDS.items():  # each kind's penalty and logs, and ρ of its heads (Eq. 9)
        uses = terms.uses.get(key)
        if not uses:
            continue
        penalty, kind_log = kind.penalty(options, uses)
        if penalty is not None:
            terms.penalties[key] = penalty
        log.update(kind_log)
        rho, count = 0.0, 0
        for use in uses:
            rho = rho + use.rho.sum()
            count += use.rho.shape[0] * use.rho.shape[1]
        terms.rho_sums[key], terms.rho_counts[key] = rho, float(count)
        log[f"{key}_rho_sum"], log[f"{key}_count"] = rho.detach(), float(count)  # every kind's ρ, logged once here
        learned, learned_count = learned + rho, learned_count + count
    if learned_count:  # ρ of the learned heads (Wang et al. §4.1, Eq. 9-10)
        terms.rho_sums["learned"], terms.rho_counts["learned"] = learned, float(learned_count)
        log["learned_rho_sum"], log["learned_count"] = learned.detach(), float(learned_count)
    if records:
        terms.rho_sums["all"], terms.rho_counts["all"] = all_rho, float(log["rho_count"])
    gated = [m.gates for m in modules if m.gates is not None] + list(gates)
    if gated:
        per_layer = [g.l0().sum() for g in gated]
        terms.gate = sum(per_layer) / (len(per_layer) if options.gate_penalty == "layer-mean" else 1)
        log["gate_open"] = sum((g.eval_values() > 0).sum() for g in gated)
        log["gate_count"] = float(sum(g.log_alpha.numel() for g in gated))
    if any(m.plan.learned_heads for m in modules):
        log["tau_sum"], log["tau_count"] = float(modules[0].tau), 1.0
    return log
