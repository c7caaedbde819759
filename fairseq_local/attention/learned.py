"""Learned attention masks, the parts of
:class:`~fairseq_local.attention.module.LocalMultiheadAttention` whose
pattern has parameters (head gates are in :mod:`fairseq_local.attention.gates`).

* :class:`DamMask` — SparseBERT's Differentiable Attention Mask (Shi et al.
  2021, §3.1, §4.1, Algorithm 1, Eq. 3–5): parameters α per head.  In
  training, the Gumbel-sigmoid sample ``sigmoid((α + G1 − G2)/τ)`` with
  either estimator: ``hard`` (default, as the authors' released code runs it:
  the forward value is the 0/1 sample 1[α + G1 − G2 > 0], the backward pass
  the soft sample's gradient, "straight-through") or ``soft`` (the paper's
  literal Eq. 3: the soft sample itself).  In evaluation ``M = 1[α > 0]``,
  deterministic (the authors' code samples in evaluation too).  ``dam-u``
  (unstructured) has one α per position pair, α_ij = α_ji, up to a maximum
  length; ``dam-s`` (structured) has one α per offset |i − j| (M is Toeplitz,
  the noise is shared along each diagonal) and keeps the first and last
  tokens' rows and columns on (the paper's §4.1; the authors' code omits it).
* :class:`AxisSelector` — Adaptive Axis Attention (Wang et al. 2022, §4.2,
  Eq. 11–12): a fully connected layer maps each token to a row and a column
  logit; a Gumbel-sigmoid "retrieves a 0/1 indicator" I_r, I_c
  (straight-through: 0/1 forward, the soft sample's gradient backward) and
  ``B_ij = I_r,i + I_c,j − I_r,i·I_c,j``, OR-ed with ``local-W`` (W = 2 by
  default) so no row is empty.  Training therefore sees exactly the kind of
  0/1 pattern that evaluation (1[logit > 0]) uses.

Noise is drawn in float32 (in fp16, U's clamp bounds round to 0 and 1 and
the Gumbel difference can be ±inf or NaN), and the samples and their
straight-through gradients are float32 whatever the model's dtype.  Noise is
drawn from torch's global generator, which fairseq reseeds at every
update (``seed + num_updates``), so a resumed run draws the same noise as an
uninterrupted one.  The temperature τ follows :class:`TauSchedule` on the
update number, which fairseq hands to every module through
``set_num_updates``.
"""

from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Dict, Iterator, Optional

import torch
from torch import Tensor, nn

from .masks import MaskSpecError
from .masks.learned import AxisAdaptiveSpec, DamSpec, LearnedMask  # noqa: F401  (registers dam-u, dam-s, aaa)

TAU_SCHEDULES = ("constant", "linear", "exponential")

_SHARED: ContextVar[Optional[Dict]] = ContextVar("fairseq_local_shared_dam_masks", default=None)


@contextmanager
def shared_masks() -> Iterator[None]:
    """Within one encoder forward pass, a DAM mask shared by several layers
    (SparseBERT §3.1: one mask per head for all layers) is gathered once for
    the batch's positions and reused by every layer (:meth:`DamMask.gather`)."""
    token = _SHARED.set({})
    try:
        yield
    finally:
        _SHARED.reset(token)


@dataclass(frozen=True)
class TauSchedule:
    """Gumbel-sigmoid temperature as a function of the update number.

    ``constant``: τ = start.  ``linear``/``exponential``: from ``start`` at
    update 0 to ``end`` at update ``updates`` (linearly, or geometrically),
    then constant at ``end``."""

    start: float = 1.0
    end: float = 1.0
    updates: int = 0
    kind: str = "constant"

    def __post_init__(self) -> None:
        if self.kind not in TAU_SCHEDULES:
            raise ValueError(f"tau schedule must be one of {TAU_SCHEDULES}, not {self.kind!r}")
        if self.start <= 0 or self.end <= 0:
            raise ValueError(f"tau must be > 0 (got start {self.start}, end {self.end})")
        if self.updates < 0:
            raise ValueError(f"the anneal length must be >= 0 updates, not {self.updates}")

    def __call__(self, num_updates: int) -> float:
        if self.kind == "constant" or self.updates <= 0:
            return self.start if self.kind == "constant" else self.end
        t = min(max(num_updates, 0) / self.updates, 1.0)
        if self.kind == "linear":
            return self.start + t * (self.end - self.start)
        return self.start * (self.end / self.start) ** t


def gumbel_noise_difference(shape, device=None) -> Tensor:
    """G1 − G2 with G_k = −log(−log U_k), U_k ~ U(0, 1) (SparseBERT §4.1),
    float32 (finite: |G1 − G2| < 40)."""
    u = torch.rand((2,) + tuple(shape), device=device, dtype=torch.float32).clamp_(1e-10, 1 - 1e-7)
    g = -torch.log(-torch.log(u))
    return g[0] - g[1]


class _StraightThrough(torch.autograd.Function):
    """Forward: ``hard`` exactly; backward: the gradient goes to ``soft``."""

    @staticmethod
    def forward(ctx, soft: Tensor, hard: Tensor) -> Tensor:
        return hard.clone()

    @staticmethod
    def backward(ctx, grad: Tensor):
        return grad, None


class _ScaleGrad(torch.autograd.Function):
    """Forward: x; backward: the gradient times ``factor``."""

    @staticmethod
    def forward(ctx, x: Tensor, factor: float) -> Tensor:
        ctx.factor = factor
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad: Tensor):
        return grad * ctx.factor, None


def scale_grad(x: Tensor, factor: float) -> Tensor:
    """``x`` unchanged, its gradient scaled by ``factor``."""
    return _ScaleGrad.apply(x, factor)


def gumbel_sigmoid(
    logits: Tensor, tau: float, noise: Optional[Tensor] = None, hard: bool = False
) -> Tensor:
    """sigmoid((logits + noise)/τ), ``noise`` = G1 − G2 (drawn if None), in
    float32 whatever the logits' dtype.

    With ``hard``, the straight-through sample: exactly 1[logits + noise > 0]
    in the forward pass, the soft sample's gradient in the backward pass (the
    ``hard=True`` of SparseBERT's released code, τ-independent forward)."""
    if noise is None:
        noise = gumbel_noise_difference(logits.shape, logits.device)
    z = logits.float() + noise
    soft = torch.sigmoid(z / tau)
    return _StraightThrough.apply(soft, (z > 0).to(soft.dtype)) if hard else soft


# ------------------------------------------------------------------- modules

DAM_ESTIMATORS = ("hard", "soft")


class DamMask(nn.Module):
    """α of one DAM head (SparseBERT, Eq. 3–5), shared by the layers that use it.

    ``dam-u``: α is the upper triangle (i ≤ j) of a ``max_len``×``max_len``
    matrix, mirrored so that α_ij = α_ji.  ``dam-s``: α has one entry per
    offset |i − j| < ``max_len``, so M_ij = M_{i+k,j+k}; the first and last
    real tokens' rows and columns are always 1.

    Args:
        structured: ``dam-s`` (True) or ``dam-u``.
        max_len: the longest sentence the mask covers.
        init, init_std: α ~ N(init, init_std²) at the start (the authors'
            code: 1e-3·randn, P ≈ 0.5).
        estimator: ``hard`` (straight-through, the authors' code) or ``soft``.
        noise: False trains with P = sigmoid(α), no Gumbel noise (the
            importance analysis of SparseBERT §3.1).

    Call :meth:`resample` once per forward pass (the encoder does): every layer
    that shares this α then uses the same noise, as one mask M(α) per update.
    """

    def __init__(self, structured: bool, max_len: int, init: float = 0.0, init_std: float = 0.0,
                 estimator: str = "hard", noise: bool = True) -> None:
        super().__init__()
        if estimator not in DAM_ESTIMATORS:
            raise ValueError(f"DAM estimator must be one of {DAM_ESTIMATORS}, not {estimator!r}")
        self.structured = structured
        self.max_len = max_len
        self.estimator = estimator
        self.use_noise = noise
        size = max_len if structured else max_len * (max_len + 1) // 2
        self.alpha = nn.Parameter(torch.randn(size) * init_std + init)
        self.noise: Optional[Tensor] = None  # this update's G1 − G2, one per α

    def resample(self) -> None:
        """Draw new Gumbel noise G1 − G2 for every α (shared along diagonals
        for ``dam-s``, symmetric for ``dam-u``)."""
        self.noise = gumbel_noise_difference(self.alpha.shape, self.alpha.device)

    def index(self, i: Tensor, j: Tensor) -> Tensor:
        """The α index of each position pair (i, j ≥ 0, broadcast): |i − j| for
        ``dam-s``; the row-major upper-triangle index of (min, max) for ``dam-u``."""
        if self.structured:
            return (i - j).abs()
        a, b = torch.minimum(i, j), torch.maximum(i, j)
        return a * self.max_len - a * (a - 1) // 2 + (b - a)

    def values(self, idx: Tensor, tau: float) -> Tensor:
        """M at α indices ``idx``.  Training: the Gumbel-sigmoid sample of
        this update (hard or soft, see the class), or P = sigmoid(α) without
        noise (0/1 forward with P's gradient under ``hard``); evaluation:
        1[α > 0].  Float32 whatever α's dtype."""
        alpha = self.alpha[idx].float()
        if not self.training:
            return (alpha > 0).float()
        hard = self.estimator == "hard"
        if not self.use_noise:
            return gumbel_sigmoid(alpha, 1.0, torch.zeros_like(alpha), hard)
        if self.noise is None or self.noise.shape != self.alpha.shape:
            self.resample()
        return gumbel_sigmoid(alpha, tau, self.noise[idx], hard)

    def l1(self, tau: float) -> Tensor:
        """‖M‖₁ of the whole ``max_len``×``max_len`` mask of this update: the
        L1 term of SparseBERT Eq. 5 as the authors' code computes it
        (``torch.norm(mask, p=1)`` over the full mask, not per sentence), in
        float32 (max_len² entries: fp16 would overflow at max_len ~256)."""
        m = self.values(torch.arange(self.alpha.numel(), device=self.alpha.device), tau)
        L = self.max_len
        if not self.structured:  # each off-diagonal α stands for (i, j) and (j, i)
            diag = self.index(torch.arange(L, device=m.device), torch.arange(L, device=m.device))
            return 2 * m.sum() - m[diag].sum()
        # dam-s: the ends (4L − 4 entries) are 1; offset k occurs 2(L − 2 − k)
        # times inside them (L − 2 times for k = 0).
        inner = max(L - 2, 0)
        k = torch.arange(inner, device=m.device)
        counts = torch.where(k == 0, inner, 2 * (inner - k)).to(m.dtype)
        return (m[:inner] * counts).sum() + (L * L - inner * inner)

    def matrix(self, n: int, what: str = "hard") -> Tensor:
        """The (n, n) mask of a sentence of n tokens, detached: ``hard`` =
        1[α > 0] (evaluation), ``prob`` = P = sigmoid(α) (SparseBERT, Eq. 3).
        For ``dam-s`` the first and last rows and columns are 1."""
        pos = torch.arange(n, device=self.alpha.device)
        i, j = pos[:, None], pos[None, :]
        alpha = self.alpha.detach()[self.index(i, j)]
        m = (alpha > 0).float() if what == "hard" else torch.sigmoid(alpha)
        if self.structured:
            m = torch.where((i == 0) | (j == 0) | (i == n - 1) | (j == n - 1), torch.ones_like(m), m)
        return m

    def gather(self, pos_q: Tensor, pos_k: Tensor, tau: float, source: Optional[Tensor] = None) -> Tensor:
        """Each sentence's mask at its real positions.

        Args:
            pos_q, pos_k: (B, T) / (B, S) real positions, −1 at padding.
            source: the (B, T) padding mask the positions were made from
                (None: no padding).  Inside :func:`shared_masks`, calls with
                the same source share one gather (compared by identity: no
                read of the device).
        Returns:
            (B, T, S): M (see :meth:`values`); 0 at padding; for ``dam-s`` 1
            on the first and last real tokens' rows and columns.
        """
        memo = _SHARED.get()
        if memo is None:
            return self._gather(pos_q, pos_k, tau)
        key = (id(self), tau, self.training, torch.is_grad_enabled(), id(source), tuple(pos_q.shape),
               tuple(pos_k.shape))
        hit = memo.get(key)
        if hit is not None and hit[0] is source:
            return hit[1]
        memo[key] = (source, out := self._gather(pos_q, pos_k, tau))  # holds source: its id stays unique
        return out

    def _gather(self, pos_q: Tensor, pos_k: Tensor, tau: float) -> Tensor:
        T, S = pos_q.shape[-1], pos_k.shape[-1]
        if max(T, S) > self.max_len:  # the padded length: a host int, no device read
            raise MaskSpecError(
                f"a batch of {max(T, S)} positions is longer than the DAM mask's "
                f"maximum length {self.max_len} (--dam-max-len)"
            )
        n = pos_k.amax(-1, keepdim=True).unsqueeze(-1) + 1  # (B, 1, 1)
        i, j = pos_q.unsqueeze(-1), pos_k.unsqueeze(-2)
        real = (i >= 0) & (j >= 0)
        if self.structured:
            # dam-s by offset: M of each offset |i − j| once, then one (T, S) gather shared by the
            # batch (fairseq pads contiguously, so index offsets are position offsets)
            span = max(T, S)
            values = self.values(torch.arange(span, device=pos_q.device), tau)
            d = (torch.arange(T, device=pos_q.device)[:, None] - torch.arange(S, device=pos_q.device)).abs()
            out = values[d]
            ends = (i == 0) | (j == 0) | (i == n - 1) | (j == n - 1)
            out = torch.where(ends, torch.ones_like(out), out)
        else:
            out = self.values(self.index(i.clamp(min=0), j.clamp(min=0)), tau)
        return out * real


class AxisSelector(nn.Module):
    """The FC layer of Adaptive Axis Attention (Eq. 11): token
    representation (d) -> a row logit and a column logit."""

    def __init__(self, embed_dim: int) -> None:
        super().__init__()
        self.fc = nn.Linear(embed_dim, 2)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Xavier-uniform weights, zero bias (so that a fresh selector is
        not biased towards rows or columns); RoBERTa models call it again
        after fairseq's ``init_bert_params``."""
        nn.init.xavier_uniform_(self.fc.weight)
        nn.init.zeros_(self.fc.bias)

    def indicators(self, x: Tensor, tau: float) -> Tensor:
        """x (T, B, d) -> (2, B, T) float32: I_r and I_c, exactly 0/1.  Training: the
        straight-through Gumbel-sigmoid sample (Eq. 11); evaluation: 1[logit > 0].

        The FC layer reads ``x`` without back-propagating into it: through
        C·(1 − B), C = −1e4, the straight-through gradient is ~1e4 times the
        task's, and flowing into the residual stream it would compound layer
        by layer (a gradient norm of ~1e18 after 12 layers)."""
        logits = self.fc(x.detach()).permute(2, 1, 0)  # (2, B, T)
        if not self.training:
            return (logits > 0).float()
        return gumbel_sigmoid(logits, tau, hard=True)

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


def _window_sum(x: Tensor, window: int) -> Tensor:
    """(B, T) -> (B, T): Σ_{|j − i| ≤ window} x_j at every i (by a cumulative sum)."""
    T = x.shape[-1]
    w = min(window, T)
    cum = torch.nn.functional.pad(x.cumsum(-1), (1, 0))  # cum[k] = Σ_{j<k} x_j, (B, T + 1)
    i = torch.arange(T, device=x.device)
    return cum[..., (i + w + 1).clamp(max=T)] - cum[..., (i - w).clamp(min=0)]
