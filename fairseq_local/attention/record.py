"""What one attention forward pass realised (:class:`AttentionRecord`): each
:class:`~fairseq_local.attention.module.LocalMultiheadAttention` appends one to
the open context's records, and
:func:`~fairseq_local.attention.penalties.sparsity_terms` reads them."""

from dataclasses import dataclass, field
from typing import Dict, Optional

import torch
from torch import Tensor, nn

from .learned.kind import Realised
from .masks.base import constant, pair_count_table


@dataclass
class AttentionRecord:
    """What one attention forward pass realised.

    ``module``: the layer (its ``plan``, its kinds' modules ``learned``, its
    ``tau`` and ``mask_neg``).  ``learned``: None or M (B, L, T, T) of
    ``module.plan.learned_heads``; ``realised``: each kind's
    :class:`~fairseq_local.attention.learned.kind.Realised`, by kind key;
    ``padding_mask``: None or (B, T) bool.  The fixed heads' patterns are
    ``module.plan.fixed_masks``, counted from their structure, never stored."""

    module: nn.Module
    learned: Optional[Tensor]
    realised: Dict[str, Realised] = field(default_factory=dict)
    padding_mask: Optional[Tensor] = None
    T: int = 0
    B: int = 0

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
        learned heads: their kind's
        :meth:`~fairseq_local.attention.learned.kind.LearnedKind.kept`."""
        plan = self.module.plan
        kept = pair_count_table(plan.fixed_masks, self.T, real.device)[real.sum(-1)]  # (B, H)
        if not plan.learned_heads:
            return kept
        parts = [g.kind.kept(self.module.learned[g.kind.key], g.specs, self.realised[g.kind.key], real)
                 for g in plan.learned]
        return kept.index_copy(1, constant(plan.learned_heads, kept.device), torch.cat(parts, 1))
