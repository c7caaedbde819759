"""Learned attention masks and head gates, the parts of
:class:`~fairseq_local.modules.local_attention.LocalMultiheadAttention` that
have parameters.

* :class:`DamMask` — the Differentiable Attention Mask of SparseBERT (seed 001,
  §3.1, §4.1, Algorithm 1, Eq. 3–5): parameters α per head, and in training
  ``M = sigmoid((α + G1 − G2)/τ)`` with Gumbel noise G1, G2; in evaluation
  ``M = 1[α > 0]``.  ``dam-u`` (unstructured) has one α per position pair,
  α_ij = α_ji, up to a maximum length; ``dam-s`` (structured) has one α per
  offset |i − j| (M is Toeplitz, the noise is shared along each diagonal) and
  keeps the first and last tokens' rows and columns on.
* :class:`AxisSelector` — Adaptive Axis Attention (seed 004, §4.2, Eq. 11–12):
  a fully connected layer maps each token to a row and a column logit; a
  Gumbel-sigmoid gives indicators I_r, I_c and ``B_ij = I_r,i + I_c,j −
  I_r,i·I_c,j``, OR-ed with ``local-W`` (W = 2 by default) so no row is empty.
* :class:`HeadGates` — hard-concrete gates with an L0 penalty (Louizos et al.
  2018, as used by Voita et al. 2019, seed 003), one per gated head.

Noise is drawn from torch's global generator, which fairseq reseeds at every
update (``seed + num_updates``), so a resumed run draws the same noise as an
uninterrupted one.  The temperature τ follows :class:`TauSchedule` on the
update number, which fairseq hands to every module through
``set_num_updates``.
"""

import math
from dataclasses import dataclass
from typing import Optional

import torch
from torch import Tensor, nn

from .masks import HeadMask, MaskSpecError, register_mask_kind, _ints, _no_params

TAU_SCHEDULES = ("constant", "linear", "exponential")


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


def gumbel_noise_difference(shape, device=None, dtype=torch.float32) -> Tensor:
    """G1 − G2 with G_k = −log(−log U_k), U_k ~ U(0, 1) (seed 001, §4.1)."""
    u = torch.rand((2,) + tuple(shape), device=device, dtype=dtype).clamp_(1e-10, 1 - 1e-7)
    g = -torch.log(-torch.log(u))
    return g[0] - g[1]


def gumbel_sigmoid(logits: Tensor, tau: float, noise: Optional[Tensor] = None) -> Tensor:
    """sigmoid((logits + noise)/τ); ``noise`` = G1 − G2, drawn if None."""
    if noise is None:
        noise = gumbel_noise_difference(logits.shape, logits.device, logits.dtype)
    return torch.sigmoid((logits + noise) / tau)


# --------------------------------------------------------------------- specs


@dataclass(frozen=True)
class LearnedMask(HeadMask):
    """A head mask whose pattern is learned; realised by a parameter module of
    the attention layer, never by :meth:`dense` (it is not a fixed pattern)."""

    @property
    def learned(self) -> bool:
        return True

    def dense(self, pos_q: Tensor, pos_k: Tensor) -> Tensor:
        raise MaskSpecError(f"'{self}' is learned: it has no fixed dense matrix")


@dataclass(frozen=True)
class DamSpec(LearnedMask):
    """``dam-u`` (unstructured) or ``dam-s`` (structured)."""

    structured: bool

    def __str__(self) -> str:
        return "dam-s" if self.structured else "dam-u"


@dataclass(frozen=True)
class AxisAdaptiveSpec(LearnedMask):
    """``aaa`` / ``aaa-W``: Adaptive Axis Attention OR ``local-W`` (W = 2)."""

    window: int = 2

    def __str__(self) -> str:
        return "aaa" if self.window == 2 else f"aaa-{self.window}"


@register_mask_kind("dam-u", "dam-u")
def _dam_u(params) -> HeadMask:
    _no_params("dam-u", params)
    return DamSpec(False)


@register_mask_kind("dam-s", "dam-s")
def _dam_s(params) -> HeadMask:
    _no_params("dam-s", params)
    return DamSpec(True)


@register_mask_kind("aaa", "aaa[-W]")
def _aaa(params) -> HeadMask:
    if not params:
        return AxisAdaptiveSpec()
    (w,) = _ints(params, ("W", 0))
    return AxisAdaptiveSpec(w)


# ------------------------------------------------------------------- modules


class DamMask(nn.Module):
    """α of one DAM head (seed 001, Eq. 3–5), shared by the layers that use it.

    ``dam-u``: α is the upper triangle (i ≤ j) of a ``max_len``×``max_len``
    matrix, mirrored so that α_ij = α_ji.  ``dam-s``: α has one entry per
    offset |i − j| < ``max_len``, so M_ij = M_{i+k,j+k}; the first and last
    real tokens' rows and columns are always 1.

    Call :meth:`resample` once per forward pass (the encoder does): every layer
    that shares this α then uses the same noise, as one mask M(α) per update.
    """

    def __init__(self, structured: bool, max_len: int, init: float = 0.0) -> None:
        super().__init__()
        self.structured = structured
        self.max_len = max_len
        size = max_len if structured else max_len * (max_len + 1) // 2
        self.alpha = nn.Parameter(torch.full((size,), float(init)))
        self.noise: Optional[Tensor] = None

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

    def values(self, idx: Tensor, tau: float, noise: bool = True) -> Tensor:
        """M at α indices ``idx``: Gumbel-sigmoid in training (sigmoid(α) if
        ``noise`` is False), 1[α > 0] in evaluation."""
        alpha = self.alpha[idx]
        if not self.training:
            return (alpha > 0).to(alpha.dtype)
        if not noise:
            return torch.sigmoid(alpha)
        if self.noise is None or self.noise.shape != self.alpha.shape:
            self.resample()
        return gumbel_sigmoid(alpha, tau, self.noise[idx])

    def matrix(self, n: int, what: str = "hard") -> Tensor:
        """The (n, n) mask of a sentence of n tokens, detached: ``hard`` =
        1[α > 0] (evaluation), ``prob`` = P = sigmoid(α) (seed 001, Eq. 3).
        For ``dam-s`` the first and last rows and columns are 1."""
        pos = torch.arange(n, device=self.alpha.device)
        i, j = pos[:, None], pos[None, :]
        alpha = self.alpha.detach()[self.index(i, j)]
        m = (alpha > 0).float() if what == "hard" else torch.sigmoid(alpha)
        if self.structured:
            m = torch.where((i == 0) | (j == 0) | (i == n - 1) | (j == n - 1), torch.ones_like(m), m)
        return m

    def gather(self, pos_q: Tensor, pos_k: Tensor, tau: float, noise: bool = True) -> Tensor:
        """Each sentence's mask at its real positions.

        Args:
            pos_q, pos_k: (B, T) / (B, S) real positions, −1 at padding.
        Returns:
            (B, T, S): M (see :meth:`values`); 0 at padding; for ``dam-s`` 1
            on the first and last real tokens' rows and columns.
        """
        n = pos_k.amax(-1, keepdim=True).unsqueeze(-1) + 1  # (B, 1, 1)
        if int(n.max()) > self.max_len:
            raise MaskSpecError(
                f"a sentence of {int(n.max())} tokens is longer than the DAM mask's "
                f"maximum length {self.max_len} (--dam-max-len)"
            )
        i, j = pos_q.unsqueeze(-1), pos_k.unsqueeze(-2)
        real = (i >= 0) & (j >= 0)
        out = self.values(self.index(i.clamp(min=0), j.clamp(min=0)), tau, noise)
        if self.structured:
            ends = (i == 0) | (j == 0) | (i == n - 1) | (j == n - 1)
            out = torch.where(ends, torch.ones_like(out), out)
        return out * real


class AxisSelector(nn.Module):
    """The FC layer of Adaptive Axis Attention (seed 004, Eq. 11): token
    representation (d) -> a row logit and a column logit."""

    def __init__(self, embed_dim: int) -> None:
        super().__init__()
        self.fc = nn.Linear(embed_dim, 2)
        nn.init.xavier_uniform_(self.fc.weight)
        nn.init.zeros_(self.fc.bias)

    def indicators(self, x: Tensor, tau: float) -> Tensor:
        """x (T, B, d) -> (2, B, T): I_r and I_c; Gumbel-sigmoid in training,
        hard 1[logit > 0] in evaluation."""
        logits = self.fc(x).permute(2, 1, 0)  # (2, B, T)
        if not self.training:
            return (logits > 0).to(x.dtype)
        return gumbel_sigmoid(logits, tau)

    @staticmethod
    def pattern(ind: Tensor, local: Tensor) -> Tensor:
        """B (Eq. 12) OR ``local``, soft: 1 − (1 − B)(1 − L).

        Args:
            ind: (2, B, T) indicators.  local: bool (B, T, S) or (T, S).
        Returns: (B, T, S) in [0, 1]."""
        r, c = ind[0].unsqueeze(-1), ind[1].unsqueeze(-2)
        axis = r + c - r * c
        return torch.where(local, torch.ones_like(axis), axis)


class HeadGates(nn.Module):
    """Hard-concrete gates z ∈ [0, 1], one per gated head (Louizos et al. 2018).

    Training: s = sigmoid((log u − log(1 − u) + log α)/β), z = clamp(s(ζ − γ) + γ,
    0, 1).  Evaluation: z = clamp(sigmoid(log α)(ζ − γ) + γ, 0, 1).
    L0 penalty: Σ sigmoid(log α − β log(−γ/ζ)), the expected number of open gates.
    """

    def __init__(
        self, num_gates: int, init: float = 3.0, beta: float = 2 / 3,
        gamma: float = -0.1, zeta: float = 1.1,
    ) -> None:
        super().__init__()
        if not (gamma < 0 and zeta > 1 and beta > 0):
            raise ValueError(f"hard-concrete needs gamma < 0 < 1 < zeta and beta > 0 "
                             f"(got beta {beta}, gamma {gamma}, zeta {zeta})")
        self.log_alpha = nn.Parameter(torch.full((num_gates,), float(init)))
        self.beta, self.gamma, self.zeta = beta, gamma, zeta

    def forward(self) -> Tensor:
        """(num_gates,) gate values: sampled in training, :meth:`eval_values` otherwise."""
        if not self.training:
            return self.eval_values()
        u = torch.rand_like(self.log_alpha).clamp(1e-6, 1 - 1e-6)
        s = torch.sigmoid((u.log() - (-u).log1p() + self.log_alpha) / self.beta)
        return self._stretch(s)

    def eval_values(self) -> Tensor:
        """(num_gates,) deterministic gates clamp(sigmoid(log α)(ζ − γ) + γ, 0, 1)."""
        return self._stretch(torch.sigmoid(self.log_alpha))

    def _stretch(self, s: Tensor) -> Tensor:
        return (s * (self.zeta - self.gamma) + self.gamma).clamp(0.0, 1.0)

    def l0(self) -> Tensor:
        """(num_gates,) probability that each gate is non-zero."""
        return torch.sigmoid(self.log_alpha - self.beta * math.log(-self.gamma / self.zeta))
