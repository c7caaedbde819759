"""The axis selector of Adaptive Axis Attention (Wang et al. 2022, §4.2,
Eq. 11–12): per token, a row and a column indicator, and the pattern
B OR ``local-W`` they make (:class:`AxisSelector`); the learned kind ``aaa``
that realises it (:class:`AxisAdaptiveSpec`)."""

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch
from torch import Tensor, nn

from ..masks.patterns import OffsetMask
from ..masks.registry import int_params
from .kind import KindBuild, KindUse, LearnedKind, Realised, register_learned_kind
from .noise import gumbel_sigmoid


class AxisSelector(nn.Module):
    """The FC layer of Adaptive Axis Attention (Eq. 11): token
    representation (d) -> a row logit and a column logit.

    ``lr_scale`` s (``--aaa-lr-scale``) multiplies the selector's learning
    rate under Adam-type optimizers: the layer computes s·(W'x + b') from
    stored parameters W' = W/s, b' = b/s.  Adam moves each stored parameter
    by about lr per update whatever its gradient's scale, so the effective
    W, b move s times as far (under plain SGD s² times).  A gradient scaling
    (:func:`~.noise.scale_grad`) would not do it: Adam divides it out.  The
    fine-tuning learning rate (1e-5 … 2e-4) leaves a freshly initialised
    selector, whose logits must move by O(1) to reach a target ρ (Eq. 10),
    nearly where it started in a few hundred updates.  Checkpoints hold the
    effective W and b (a state-dict hook multiplies by s, loading divides),
    so they do not depend on s; ``state_dict(keep_vars=True)`` gives detached
    effective tensors, not the parameters, when s ≠ 1."""

    def __init__(self, embed_dim: int, lr_scale: float = 1.0) -> None:
        super().__init__()
        if not lr_scale > 0:
            raise ValueError(f"the AAA selector's learning-rate scale (--aaa-lr-scale) must be > 0, not {lr_scale}")
        self.lr_scale = float(lr_scale)
        self.fc = nn.Linear(embed_dim, 2)
        self.reset_parameters()
        self.register_state_dict_post_hook(_save_effective)
        self.register_load_state_dict_pre_hook(_load_effective)

    def reset_parameters(self) -> None:
        """Xavier-uniform weights, zero bias (so that a fresh selector is
        not biased towards rows or columns), as effective weights: the
        stored W' is W/s.  RoBERTa models call it again after fairseq's
        ``init_bert_params``."""
        nn.init.xavier_uniform_(self.fc.weight)
        nn.init.zeros_(self.fc.bias)
        if self.lr_scale != 1.0:
            with torch.no_grad():
                self.fc.weight.div_(self.lr_scale)

    def effective(self) -> Dict[str, Tensor]:
        """The effective (s-independent) ``weight`` (2, d) and ``bias`` (2,), detached."""
        return {"weight": self.fc.weight.detach() * self.lr_scale, "bias": self.fc.bias.detach() * self.lr_scale}

    def logits(self, x: Tensor) -> Tensor:
        """x (T, B, d) -> (T, B, 2): the row and column logits s·(W'x + b')
        (Eq. 11's f_FC), not back-propagating into ``x`` (see :meth:`indicators`)."""
        out = self.fc(x.detach())
        return out * self.lr_scale if self.lr_scale != 1.0 else out

    def indicators(self, x: Tensor, tau: float, padding_mask: Optional[Tensor] = None) -> Tensor:
        """x (T, B, d) -> (2, B, T) float32: I_r and I_c, exactly 0/1.  Training: the
        straight-through Gumbel-sigmoid sample (Eq. 11); evaluation: the
        noise's expected pattern, :func:`expected_topk`.

        ``padding_mask`` (B, T) bool, True at padding (None: every position
        is real): padding is never an axis, in training or evaluation, and
        evaluation counts and ranks only the real tokens.

        The FC layer reads ``x`` without back-propagating into it: through
        C·(1 − B), C = −1e4, the straight-through gradient is ~1e4 times the
        task's, and flowing into the residual stream it would compound layer
        by layer (a gradient norm of ~1e18 after 12 layers)."""
        logits = self.logits(x).permute(2, 1, 0)  # (2, B, T)
        if not self.training:
            return expected_topk(logits, padding_mask)
        sample = gumbel_sigmoid(logits, tau, hard=True)
        return sample if padding_mask is None else sample * (~padding_mask).unsqueeze(0)

    @staticmethod
    def pattern(ind: Tensor, local: Tensor) -> Tensor:
        """B (Eq. 12) OR ``local``: 1 − (1 − B)(1 − L).

        Args:
            ind: (2, B, T) indicators.  local: bool (B, T, S) or (T, S).
        Returns: (B, T, S), 0/1 for 0/1 indicators."""
        r, c = ind[0].unsqueeze(-1), ind[1].unsqueeze(-2)
        axis = r + c - r * c
        return torch.where(local, torch.ones_like(axis), axis)

    @staticmethod
    def pattern_count(ind: Tensor, real: Tensor, window: int) -> Tensor:
        """|B OR local-W| over each sentence's real pairs (|M| of Eq. 9 for
        Eq. 12), from the indicators alone, in O(B·T).

        With r, c the indicators zeroed at padding, n real tokens and
        L_i = {j : |i − j| ≤ W} among them (|L^j| = |L_j|, L is symmetric):

            |B| = |L| + Σ_i r_i (n − |L_i|) + Σ_j c_j (n − |L_j|)
                  − (Σ_i r_i)(Σ_j c_j) + Σ_i r_i Σ_{j ∈ L_i} c_j,

        the sum of r_i + c_j − r_i·c_j over the real pairs outside L, plus |L|.
        It is the same polynomial in (r, c) as the dense sum, so value and
        gradient equal those of ``(pattern(ind, local) * real_pairs).sum()``.

        Args:
            ind: (2, B, T) indicators I_r, I_c.
            real: (B, T) bool, True at real tokens (contiguous, as fairseq pads).
            window: W of ``local-W``.
        Returns: (B,) float32.
        """
        mask = real.float()
        r, c = ind.float().unbind(0)
        r, c = r * mask, c * mask  # (B, T)
        n = mask.sum(-1, keepdim=True)  # (B, 1)
        row = _window_sum(mask, window)  # |L_i| at real i, (B, T)
        local = (row * mask).sum(-1)
        outside = ((r + c) * (n - row)).sum(-1)
        both = r.sum(-1) * c.sum(-1) - (r * _window_sum(c, window)).sum(-1)
        return local + outside - both


def expected_topk(logits: Tensor, padding_mask: Optional[Tensor] = None) -> Tensor:
    """The evaluation indicators of Adaptive Axis Attention: per sentence and
    per indicator (row, column), the k real tokens of highest logit, with
    k = round(Σ over the sentence's real tokens of sigmoid(logit)).

    Training keeps token n as an axis when logit_n + G1 − G2 > 0 (Eq. 11, the
    straight-through sample), with probability sigmoid(logit_n) (G1 − G2 is
    logistic), so a sentence keeps Σ sigmoid(logit) axes on average: the
    count at which Eq. 10's hinge holds the training ρ (Eq. 9).  Evaluation
    keeps that many, deterministically, the most probable first: the noise's
    expected pattern, rounded to whole tokens.  The paper does not say how
    it evaluates; it reports that "AAA exhibits a similar sparsity value in
    the development set as in the training set" (§4.3).  1[logit > 0] keeps
    only the tokens with sigmoid > 1/2, far fewer where the hinge has pushed
    the logits below 0 (a sparser pattern than the one trained).

    No value is read back to the host: k is compared with each token's rank
    (a stable sort, then its inverse permutation) as tensors.  Ties keep the
    earlier position.

    Args:
        logits: (2, B, T) the row and column logits.
        padding_mask: (B, T) bool, True at padding, or None (no padding):
            padding neither counts in k nor is kept.
    Returns: (2, B, T) float32, exactly 0/1.
    """
    z = logits.float()
    T = z.shape[-1]
    real = torch.ones_like(z, dtype=torch.bool) if padding_mask is None else ~padding_mask.unsqueeze(0).expand_as(z)
    k = torch.floor((torch.sigmoid(z) * real).sum(-1, keepdim=True) + 0.5)  # round half up, (2, B, 1)
    ranked = z.masked_fill(~real, float("-inf"))
    order = ranked.argsort(dim=-1, descending=True, stable=True)  # (2, B, T): positions, best first
    positions = torch.arange(T, device=z.device).expand_as(order)
    rank = torch.empty_like(order).scatter_(-1, order, positions)  # the rank of each position
    return ((rank < k) & real).float()


def _window_sum(x: Tensor, window: int) -> Tensor:
    """(B, T) -> (B, T): Σ_{|j − i| ≤ window} x_j at every i (by a cumulative sum)."""
    T = x.shape[-1]
    w = min(window, T)
    cum = torch.nn.functional.pad(x.cumsum(-1), (1, 0))  # cum[k] = Σ_{j<k} x_j, (B, T + 1)
    i = torch.arange(T, device=x.device)
    return cum[..., (i + w + 1).clamp(max=T)] - cum[..., (i - w).clamp(min=0)]


_EFFECTIVE = ("fc.weight", "fc.bias")


def _save_effective(module: AxisSelector, state_dict: Dict[str, Tensor], prefix: str, local_metadata) -> None:
    """State-dict post-hook: the stored W', b' times s, the effective W, b."""
    if module.lr_scale != 1.0:
        for name in _EFFECTIVE:
            if prefix + name in state_dict:
                state_dict[prefix + name] = state_dict[prefix + name].detach() * module.lr_scale


def _load_effective(module: AxisSelector, state_dict: Dict[str, Tensor], prefix: str, *args) -> None:
    """Load pre-hook: effective W, b (a checkpoint's) to the stored W/s, b/s.
    ``state_dict`` is torch's shallow copy: the caller's dict is unchanged."""
    if module.lr_scale != 1.0:
        for name in _EFFECTIVE:
            if prefix + name in state_dict:
                state_dict[prefix + name] = state_dict[prefix + name] / module.lr_scale


@register_learned_kind("aaa", ("aaa", "aaa[-W]"))
@dataclass(frozen=True)
class AxisAdaptiveSpec(LearnedKind):
    """The learned kind ``aaa`` / ``aaa-W``: Adaptive Axis Attention's
    pattern B (Eq. 12) OR ``local-W`` (W = 2), from one :class:`AxisSelector`
    per layer, entering before the softmax as C·(1 − B) whatever the mask
    mode (Eq. 5).  It has no penalty of its own: the hinge of Eq. 10 reads
    its ρ (``--aaa-alpha``, ``--aaa-target``)."""

    window: int = 2
    options = ()
    rates = {"aaa_rho": ("aaa_rho_sum", "aaa_count"), "aaa_rows": ("aaa_rows", "aaa_tokens"),
             "aaa_cols": ("aaa_cols", "aaa_tokens")}
    legacy = "axis"

    @classmethod
    def from_params(cls, kind: str, params: List[str]) -> "AxisAdaptiveSpec":
        if not params:
            return cls()
        (w,) = int_params(params, ("W", 0))
        return cls(w)

    def __str__(self) -> str:
        return "aaa" if self.window == 2 else f"aaa-{self.window}"

    def before_softmax(self, mode: str) -> bool:
        return True

    @property
    def local(self) -> OffsetMask:
        """The ``local-W`` mask OR-ed into the pattern."""
        return OffsetMask("local", -self.window, self.window)

    @classmethod
    def build(cls, b: KindBuild, layer: Optional[int], heads: Sequence[Tuple[int, LearnedKind]]) -> nn.Module:
        return AxisSelector(b.embed_dim, b.cfg.aaa_lr_scale)

    @classmethod
    def realise(cls, params: nn.Module, specs: Sequence[LearnedKind], x: Tensor, positions: Tensor, tau: float,
                padding_mask: Optional[Tensor]) -> Realised:
        """M of each head: B OR its ``local-W``; ``extra``: I_r, I_c (2, B, T)."""
        ind = params.indicators(x, tau, padding_mask)
        return Realised(torch.stack([params.pattern(ind, s.local.dense(positions, positions)) for s in specs], 1),
                        ind)

    @classmethod
    def kept(cls, params: nn.Module, specs: Sequence[LearnedKind], realised: Realised, real: Tensor) -> Tensor:
        """|B OR local-W| from the indicators alone, O(B·T) (:meth:`AxisSelector.pattern_count`)."""
        return torch.cat([AxisSelector.pattern_count(realised.extra, real, s.window)[:, None] for s in specs], 1)

    @classmethod
    def penalty(cls, cfg: Any, uses: Sequence[KindUse]) -> Tuple[Optional[Tensor], Dict[str, object]]:
        """No penalty; logs the active rows and columns (ρ of the ``aaa`` heads,
        ``aaa_rho_sum``/``aaa_count``, is logged for every kind by the penalties)."""
        log: Dict[str, object] = {}
        for use in uses:
            on = (use.realised.extra > 0.5) & use.real.unsqueeze(0)  # (2, B, T)
            rows, cols = on.sum((1, 2)).float().unbind(0)
            for key, value in (("aaa_rows", rows), ("aaa_cols", cols), ("aaa_tokens", use.real.sum())):
                log[key] = log.get(key, 0.0) + value
        return None, log

    @classmethod
    def images(cls, uses: Sequence[KindUse], n: int) -> Dict[str, Tensor]:
        """Each layer's first ``aaa`` head's pattern for the batch's first sentence."""
        out = {}
        for use in uses:
            real = use.real[0]
            out[f"masks/l{use.layer}_aaa"] = use.realised.masks[0, 0][real][:, real]
        return out
