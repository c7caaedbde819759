"""SparseBERT's Differentiable Attention Mask (Shi et al. 2021, §3.1, §4.1,
Algorithm 1, Eq. 3–5): the α of one DAM head and the mask M(α) it samples
(:class:`DamMask`), and the learned kind ``dam`` (``dam-u``, ``dam-s``) that
realises it (:class:`DamSpec`)."""

import weakref
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import torch
from torch import Tensor, nn

from ...errors import OptionError
from ..context import memoised
from ..masks import MaskSpecError
from ..masks.registry import no_params
from .kind import KindBuild, KindUse, LearnedKind, Realised, register_learned_kind
from .noise import gumbel_noise_difference, gumbel_sigmoid, scale_grad

DAM_ESTIMATORS = ("hard", "soft")
AUTHORS_LEN = 128  # SparseBERT's n (§3.1.1), the length their λ (Eq. 5, Table 3) was tuned for


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
        estimator: how the Gumbel sample enters: ``hard`` (straight-through,
            the authors' code) or ``soft`` (Eq. 3 with noise).
        noise: False trains with P = sigmoid(α) itself in the forward pass, no
            Gumbel noise and no sample, whatever ``estimator`` (the importance
            analysis of SparseBERT §3.1, Eq. 3–4).
        lr_scale: s of ``--dam-lr-scale`` (> 0, default 1), see below.

    ``lr_scale`` s multiplies α's learning rate under Adam-type optimizers,
    as :class:`~.axis.AxisSelector`'s does its weights: the parameter
    ``alpha`` stores α' = α/s and every reader uses α = s·α'
    (:meth:`effective_alpha`), so Adam, which moves each stored entry by
    about lr per update whatever its gradient's scale, moves α s times as
    far (plain SGD: s² times).  Values, masks and initialisation (α ~
    N(init, init_std²)) do not depend on s, nor do checkpoints: the state
    dict holds the effective α (a hook multiplies by s, loading divides),
    one tensor for all the layers that share this module, as without a
    scale; ``state_dict(keep_vars=True)`` gives a detached tensor, not the
    parameter, when s ≠ 1.  ``.alpha`` itself is α' (= α at s = 1).

    The noise of an update is this module's own state, drawn by
    :meth:`resample` once per training forward pass (entering the encoder's
    :func:`~fairseq_local.attention.context.attention_context` draws it):
    every layer that shares this α then uses the same noise, as one mask M(α)
    per update, and a layer recomputed in the backward pass
    (``--checkpoint-activations``) uses it again.
    """

    def __init__(self, structured: bool, max_len: int, init: float = 0.0, init_std: float = 0.0,
                 estimator: str = "hard", noise: bool = True, lr_scale: float = 1.0) -> None:
        super().__init__()
        if estimator not in DAM_ESTIMATORS:
            raise ValueError(f"DAM estimator must be one of {DAM_ESTIMATORS}, not {estimator!r}")
        if not lr_scale > 0:
            raise ValueError(f"the DAM α's learning-rate scale (--dam-lr-scale) must be > 0, not {lr_scale}")
        self.lr_scale = float(lr_scale)
        self.structured = structured
        self.max_len = max_len
        self.estimator = estimator
        self.use_noise = noise
        size = max_len if structured else max_len * (max_len + 1) // 2
        alpha = torch.randn(size) * init_std + init  # the effective α
        self.alpha = nn.Parameter(alpha / self.lr_scale if self.lr_scale != 1.0 else alpha)  # α' = α/s
        self.noise: Optional[Tensor] = None  # this update's G1 − G2, one per α
        self.register_state_dict_post_hook(_save_effective)
        self.register_load_state_dict_pre_hook(_load_effective)

    @property
    def ends(self) -> bool:
        """``dam-s`` keeps its first and last rows and columns on."""
        return self.structured

    @property
    def kind(self) -> str:
        return "dam-s" if self.structured else "dam-u"

    def effective_alpha(self, idx: Optional[Tensor] = None) -> Tensor:
        """The effective α = s·α' (at indices ``idx``; None: all), float32,
        differentiable (detach for a value).  At s = 1 and ``idx`` None it is
        ``alpha`` itself when that is float32 (clone it to keep a value)."""
        alpha = (self.alpha if idx is None else self.alpha[idx]).float()
        return alpha * self.lr_scale if self.lr_scale != 1.0 else alpha

    def resample(self) -> None:
        """Draw new Gumbel noise G1 − G2 for every α (shared along diagonals
        for ``dam-s``, symmetric for ``dam-u``), float32."""
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
        this update (hard or soft, see the class), or without noise
        P = sigmoid(α) itself, forward and backward (SparseBERT §3.1, Eq. 3;
        no τ); evaluation: 1[α > 0].  Float32 whatever α's dtype."""
        alpha = self.effective_alpha(idx)
        if not self.training:
            return (alpha > 0).float()
        if not self.use_noise:
            return torch.sigmoid(alpha)
        if self.noise is None or self.noise.shape != self.alpha.shape:
            self.resample()
        return gumbel_sigmoid(alpha, tau, self.noise[idx], self.estimator == "hard")

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

    @property
    def l1_scale(self) -> float:
        """(128 / max_len)²: the share of the whole mask that SparseBERT's
        128×128 mask is (§3.1.1), so that λ·scale·‖M‖₁ is λ·128²·(mean of M)."""
        return (AUTHORS_LEN / self.max_len) ** 2

    def scaled_l1(self, tau: float) -> Tensor:
        """:meth:`l1` × :attr:`l1_scale`, float32: the authors' L1 term (Eq. 5)
        of a 128×128 mask as dense as this one, so that their λ pulls as it
        did for them whatever ``max_len`` (at max_len = 128: :meth:`l1`)."""
        return self.l1(tau) * self.l1_scale

    def matrix(self, n: int, what: str = "hard") -> Tensor:
        """The (n, n) mask of a sentence of n tokens, detached: ``hard`` =
        1[α > 0] (evaluation), ``prob`` = P = sigmoid(α) (SparseBERT, Eq. 3).
        For ``dam-s`` the first and last rows and columns are 1."""
        pos = torch.arange(n, device=self.alpha.device)
        i, j = pos[:, None], pos[None, :]
        alpha = self.effective_alpha(self.index(i, j)).detach()
        m = (alpha > 0).float() if what == "hard" else torch.sigmoid(alpha)
        if self.structured:
            m = torch.where((i == 0) | (j == 0) | (i == n - 1) | (j == n - 1), torch.ones_like(m), m)
        return m

    def gather(self, pos_q: Tensor, pos_k: Tensor, tau: float, source: Optional[Tensor] = None) -> Tensor:
        """Each sentence's mask at its real positions.

        Args:
            pos_q, pos_k: (B, T) / (B, S) real positions, −1 at padding.
            source: the (B, T) padding mask the positions were made from
                (None: no padding).  Within one forward pass (the context's
                memo, :func:`~fairseq_local.attention.context.memoised`),
                calls with the same source share one gather (compared by
                identity: no read of the device).
        Returns:
            (B, T, S): M (see :meth:`values`); 0 at padding; for ``dam-s`` 1
            on the first and last real tokens' rows and columns.
        """
        key = ("dam", id(self), tau, self.training, torch.is_grad_enabled(), tuple(pos_q.shape),
               tuple(pos_k.shape))
        return memoised(key, source, lambda: self._gather(pos_q, pos_k, tau))

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


# (id(module)) -> (the state dict being written, the effective α saved in it, α's version then), all weak:
# the layers that share one DamMask save one tensor, as they share one parameter without a scale.
_SAVED: Dict[int, Tuple["weakref.ref", "weakref.ref", int]] = {}


def _save_effective(module: DamMask, state_dict: Dict[str, Tensor], prefix: str, local_metadata) -> None:
    """State-dict post-hook: the stored α' times s, the effective α, one
    tensor per state dict however many layers share the module."""
    key = prefix + "alpha"
    if module.lr_scale == 1.0 or key not in state_dict:
        return
    version = module.alpha._version
    cached = _SAVED.get(id(module))
    effective = cached[1]() if cached is not None and cached[0]() is state_dict and cached[2] == version else None
    if effective is None:
        effective = module.alpha.detach() * module.lr_scale
        for k in [k for k, (d, t, _) in _SAVED.items() if d() is None or t() is None]:
            del _SAVED[k]
        try:
            _SAVED[id(module)] = (weakref.ref(state_dict), weakref.ref(effective), version)
        except TypeError:  # a destination that takes no weak reference: one tensor per layer
            pass
    state_dict[key] = effective


def _load_effective(module: DamMask, state_dict: Dict[str, Tensor], prefix: str, *args) -> None:
    """Load pre-hook: the effective α (a checkpoint's) to the stored α/s.
    ``state_dict`` is torch's shallow copy: the caller's dict is unchanged."""
    key = prefix + "alpha"
    if module.lr_scale != 1.0 and key in state_dict:
        state_dict[key] = state_dict[key] / module.lr_scale


@register_learned_kind("dam", ("dam-u", "dam-u"), ("dam-s", "dam-s"))
@dataclass(frozen=True)
class DamSpec(LearnedKind):
    """The learned kind ``dam``: ``dam-u`` (unstructured) or ``dam-s``
    (structured) heads, one :class:`DamMask` per head index shared by all
    layers (SparseBERT §3.1) or per (layer, head) with ``--dam-per-layer``.
    M enters before the softmax in ``pre`` mode (the authors' code) and
    multiplies it in ``post`` mode (Eq. 4); its penalty is the L1 term of
    Eq. 5 (:func:`dam_penalty`), weighed by ``--dam-lambda``."""

    structured: bool
    options = ("dam_per_layer", "dam_estimator", "dam_no_noise")
    weight = "dam_lambda"
    rates = {"dam_density": ("dam_density_sum", "dam_count")}
    legacy = "dam"

    @classmethod
    def from_params(cls, kind: str, params: List[str]) -> "DamSpec":
        no_params(kind, params)
        return cls(kind == "dam-s")

    def __str__(self) -> str:
        return "dam-s" if self.structured else "dam-u"

    @classmethod
    def build(cls, b: KindBuild, layer: Optional[int], heads: Sequence[Tuple[int, LearnedKind]]) -> nn.Module:
        cfg = b.cfg
        if cfg.dam_max_len and b.max_positions and cfg.dam_max_len > b.max_positions:
            raise OptionError(f"--dam-max-len {cfg.dam_max_len} is longer than the model's {b.max_positions} "
                              f"positions: no sentence reaches the rest of the mask (it would cost "
                              f"--dam-max-len² entries); use at most {b.max_positions}")
        max_len = cfg.dam_max_len or b.max_positions
        if not max_len:
            raise OptionError("dam-u/dam-s heads need --dam-max-len or the model's maximum positions")
        masks = []
        for h, spec in heads:
            key = f"dam:{spec}.H{h}" + (f".L{layer}" if cfg.dam_per_layer and layer is not None else "")
            if key not in b.shared:
                b.shared[key] = DamMask(spec.structured, max_len, init=cfg.dam_init, init_std=cfg.dam_init_std,
                                        estimator=str(cfg.dam_estimator), noise=not cfg.dam_no_noise,
                                        lr_scale=cfg.dam_lr_scale)
            masks.append(b.shared[key])
        return nn.ModuleList(masks)

    @classmethod
    def realise(cls, params: nn.Module, specs: Sequence[LearnedKind], x: Tensor, positions: Tensor, tau: float,
                padding_mask: Optional[Tensor]) -> Realised:
        return Realised(torch.stack([d.gather(positions, positions, tau, padding_mask) for d in params], 1))

    @classmethod
    def penalty(cls, cfg: Any, uses: Sequence[KindUse]) -> Tuple[Optional[Tensor], Dict[str, object]]:
        """SparseBERT's L1 term (Eq. 5) in the convention of ``--dam-l1``:
        ``sum``, ‖M‖₁ of each distinct mask at ``max_len`` times (128/max_len)²
        (:meth:`DamMask.scaled_l1`, the authors' code at their n = 128), or
        ``density``, the mean over sentences and heads of ‖M‖₁/N².  In ``pre``
        mode its gradient is divided by |C|, as the task's is (C·(1 − M))."""
        density, count = 0.0, 0
        for use in uses:
            density = density + (1.0 - use.rho).sum()
            count += use.rho.shape[0] * use.rho.shape[1]
        if not count:
            return None, {}
        if cfg.dam_l1 == "density":
            term = density / count
        else:
            masks = {id(d): (d, use.tau) for use in uses for d in use.params}
            term = sum(d.scaled_l1(tau) for d, tau in masks.values())
        pre = [u for u in uses if u.specs[0].before_softmax(u.mode)]
        if pre:
            term = scale_grad(term, 1.0 / abs(pre[0].mask_neg))
        return term, {"dam_density_sum": density.detach(), "dam_count": float(count)}

    @classmethod
    def signature(cls, options: Any, get: Callable[[str, Any], Any]) -> Dict[str, str]:
        sig = super().signature(options, get)
        sig["dam_max_len"] = str(options.dam_max_len or get("max_source_positions", None)
                                 or get("max_positions", None) or "-")
        return sig

    @classmethod
    def position_limit(cls, params: nn.Module) -> Optional[int]:
        return min((d.max_len for d in params), default=None)

    @classmethod
    def images(cls, uses: Sequence[KindUse], n: int) -> Dict[str, Tensor]:
        """P = sigmoid(α) of each distinct mask at length n, named by its first layer."""
        out, seen = {}, set()
        for use in uses:
            for d, h, spec in zip(use.params, use.heads, use.specs):
                if id(d) not in seen:
                    seen.add(id(d))
                    out[f"masks/l{use.layer}_h{h + 1}_{spec}_P"] = d.matrix(min(n, d.max_len), "prob")
        return out

    @classmethod
    def exportable(cls, layout: Sequence[Any], state: Mapping[str, Tensor],
                   prefix: str) -> Dict[Tuple[int, int], DamMask]:
        """The checkpoint's DAM heads, {(layer, head): DamMask} (0-based),
        with their trained α (``{prefix}{l}.self_attn.learned.dam.{k}.alpha``,
        the k-th DAM head of layer l); heads sharing α share one DamMask."""
        out: Dict[Tuple[int, int], DamMask] = {}
        by_storage: Dict[int, DamMask] = {}
        for l, layer in enumerate(layout):
            heads = [h for h, m in enumerate(layer.masks) if isinstance(m, DamSpec)]
            for k, h in enumerate(heads):
                key = f"{prefix}{l}.self_attn.learned.dam.{k}.alpha"
                if key not in state:
                    raise ValueError(f"checkpoint has no '{key}' for head {h + 1} of layer {l + 1}")
                alpha = state[key]
                ptr = alpha.untyped_storage().data_ptr()
                if ptr not in by_storage:
                    structured = layer.masks[h].structured
                    size = alpha.numel()
                    max_len = size if structured else int(((8 * size + 1) ** 0.5 - 1) / 2)
                    mask = DamMask(structured, max_len)
                    mask.alpha.data.copy_(alpha.float())
                    by_storage[ptr] = mask.eval()
                out[(l, h)] = by_storage[ptr]
        return out
