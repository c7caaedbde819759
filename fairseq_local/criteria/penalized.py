"""The sparsity mixin: a fairseq criterion plus the penalties of the model's
learned masks and gates.

:class:`SparsityLoss` is written once and mixed into any fairseq criterion
(see :mod:`fairseq_local.criteria.label_smoothed`).  After the criterion's own
forward pass it asks the model for its sparsity terms
(``model.get_sparsity_terms(net_output)``,
:mod:`fairseq_local.attention.penalties`) and adds, each weighed against the
criterion's mean loss per sample-size unit:

* each learned kind's penalty
  (:meth:`~fairseq_local.attention.learned.kind.LearnedKind.penalty`), weighed
  by its own option or ``--learned-lambda KIND=W``: DAM's L1 term (SparseBERT,
  Eq. 5) by ``--dam-lambda`` (``--dam-l1``; by default ‖M‖₁ as in the
  authors' code, where the paper's λ is 1e-4 to 1e-1);
* the sparsity hinge (Adaptive Axis Attention, Eq. 10): ``α · max(0,
  ρ_target − ρ)``, ρ the mean of Eq. 9 over sentences and the heads of
  ``--aaa-hinge-heads`` (``aaa`` by default; ``learned``: ``aaa`` and DAM
  heads, Wang et al. §4.1's task(-and-layer)-adaptive diagonal models;
  ``all``: every head, Eq. 9 as written), α = ``--aaa-alpha``, constant or
  rising linearly from 0 at update 0 to its value at update
  ``--aaa-alpha-updates``;
* head gates (Voita et al. 2019): ``--gate-lambda`` · the model's L0 term
  (``--gate-penalty``).

Training optimises the sum.  The logged ``loss`` is the criterion's own (task)
loss, in training and validation, so ``checkpoint_best.pt``, ``--patience`` and
result tables rank runs by the task; each penalty is its own scalar
(``<kind>_loss`` such as ``dam_loss``, ``aaa_loss``, ``gate_loss``, in the
base-2 units of ``loss``).
fairseq sums logging outputs over micro-batches (``--update-freq``) and
workers before :meth:`reduce_metrics`, so every rate is logged as a (sum,
count) pair and divided there: ρ overall and per layer (``rho``,
``rho_l1``, ...), ρ of the ``aaa`` heads and of the hinge's heads
(``aaa_rho``, ``hinge_rho``), each kind's own rates (the DAM density, the
active AAA rows and columns), τ, ``aaa_alpha`` and the share of open gates.
``--mask-image-interval N`` writes the
learned masks as heatmaps to the run's TensorBoard directory every N updates.
"""

import math
import os
from dataclasses import dataclass, field
from typing import Dict, Optional, Tuple

import torch
from fairseq import metrics
from fairseq.dataclass import ChoiceEnum, FairseqDataclass
from omegaconf import II
from torch import Tensor

from ..errors import OptionError, warn_once
from ..attention.learned.kind import LEARNED_KINDS
from ..attention.penalties import HINGE_HEADS, SparsityTerms

# Logged rates besides the learned kinds' own (LearnedKind.rates): name -> (sum key, count key).
RATES = {"rho": ("rho_sum", "rho_count"), "tau": ("tau_sum", "tau_count"),
         "aaa_alpha": ("aaa_alpha_sum", "aaa_alpha_count"), "gates_open": ("gate_open", "gate_count"),
         "hinge_rho": ("hinge_rho_sum", "hinge_count")}


def penalty_names() -> Tuple[str, ...]:
    """The logged penalties: each learned kind's ``<key>_loss``, the hinge ``aaa_loss``, ``gate_loss``."""
    return (*(f"{k}_loss" for k in LEARNED_KINDS if k != "aaa"), "aaa_loss", "gate_loss")


def rates() -> Dict[str, Tuple[str, str]]:
    """Every logged rate: :data:`RATES` and the learned kinds' own."""
    out = dict(RATES)
    for kind in LEARNED_KINDS.values():
        out.update(kind.rates)
    return out


def parse_weights(text: str) -> Dict[str, float]:
    """``--learned-lambda KIND=W[,KIND=W...]`` as {kind key: weight >= 0}; one-line OptionError."""
    out: Dict[str, float] = {}
    for item in filter(None, (t.strip() for t in (text or "").split(","))):
        key, sep, value = item.partition("=")
        if not sep or key not in LEARNED_KINDS:
            raise OptionError(f"--learned-lambda takes KIND=WEIGHT pairs for the learned kinds "
                              f"{', '.join(LEARNED_KINDS)}, not {item!r}")
        try:
            out[key] = float(value)
        except ValueError:
            raise OptionError(f"--learned-lambda {item!r}: the weight must be a number") from None
        if not out[key] >= 0:
            raise OptionError(f"--learned-lambda {item!r}: the weight must be >= 0")
    return out


@dataclass
class SparsityLossConfig(FairseqDataclass):
    dam_lambda: float = field(default=0.0, metadata={
        "help": "DAM: weight of the mask's L1 norm (SparseBERT Eq. 5; the paper uses 1e-4 to 1e-1 with the "
                "default --dam-l1 sum)"})
    aaa_alpha: float = field(default=0.0, metadata={
        "help": "AAA: (maximum) weight of the sparsity hinge (Adaptive Axis Attention Eq. 10)"})
    aaa_target: float = field(default=0.0, metadata={"help": "AAA: target sparsity rho_target in [0, 1]"})
    aaa_hinge_heads: ChoiceEnum(HINGE_HEADS) = field(default="aaa", metadata={
        "help": "heads whose rho (Eq. 9) the hinge of --aaa-alpha/--aaa-target reads: aaa (default), learned "
                "(aaa and dam-u/dam-s heads: Wang et al. §4.1's adaptive diagonal models, alone or beside "
                "--dam-lambda) or all (every head, Eq. 9 as written; fixed heads only shift rho)"})
    aaa_alpha_updates: int = field(default=0, metadata={
        "help": "AAA: alpha rises linearly to --aaa-alpha at this update, then stays (0: constant)"})
    learned_lambda: str = field(default="", metadata={
        "help": "weights of the learned kinds' penalties, KIND=W[,KIND=W...] (e.g. dam=1e-3; a kind with an "
                "option of its own, such as --dam-lambda, may use either)"})
    gate_lambda: float = field(default=0.0, metadata={
        "help": "head gates: weight of the L0 penalty (Voita et al. use 0.1 with --gate-penalty layer-mean)"})
    mask_image_interval: int = field(default=0, metadata={
        "help": "write learned masks as TensorBoard images every N updates (0: never)"})
    mask_image_len: int = field(default=64, metadata={"help": "sentence length of DAM mask images"})
    tensorboard_logdir: Optional[str] = II("common.tensorboard_logdir")


class _OutputCapture:
    """Stands in for the model inside a fairseq criterion's forward pass and
    keeps the network output, so that the mixin can pull the sparsity terms
    of the same forward pass.  Every other attribute is the model's."""

    def __init__(self, model) -> None:
        self._model = model
        self.output = None

    def __call__(self, *args, **kwargs):
        self.output = self._model(*args, **kwargs)
        return self.output

    def __getattr__(self, name: str):
        return getattr(self._model, name)


class SparsityLoss:
    """Mixin (listed before the fairseq criterion): adds the sparsity penalties
    to the criterion's loss and logs them."""

    def init_sparsity(self, cfg: SparsityLossConfig) -> None:
        for name in ("dam_lambda", "aaa_alpha", "gate_lambda", "aaa_alpha_updates", "mask_image_interval"):
            if getattr(cfg, name) < 0:
                raise OptionError(f"--{name.replace('_', '-')} must be >= 0, not {getattr(cfg, name)}")
        if not 0.0 <= cfg.aaa_target <= 1.0:
            raise OptionError(f"--aaa-target must be in [0, 1], not {cfg.aaa_target}")
        if str(cfg.aaa_hinge_heads) not in HINGE_HEADS:
            raise OptionError(f"--aaa-hinge-heads must be one of {', '.join(HINGE_HEADS)}, not {cfg.aaa_hinge_heads}")
        self.sparsity_cfg = cfg
        self.penalty_weights = parse_weights(cfg.learned_lambda)
        for key, kind in LEARNED_KINDS.items():
            own = getattr(cfg, kind.weight, 0.0) if kind.weight else 0.0
            if key in self.penalty_weights and own:
                raise OptionError(f"--learned-lambda {key}=... and --{kind.weight.replace('_', '-')} both weigh "
                                  f"the {key} penalty: give one")
            self.penalty_weights.setdefault(key, own)
        self._image_writer = None

    def aaa_weight(self, num_updates: int) -> float:
        """α of Eq. 10 at this update: constant, or linear up to --aaa-alpha-updates."""
        cfg = self.sparsity_cfg
        if cfg.aaa_alpha_updates <= 0:
            return cfg.aaa_alpha
        return cfg.aaa_alpha * min(1.0, num_updates / cfg.aaa_alpha_updates)

    def forward(self, model, sample, reduce: bool = True):
        capture = _OutputCapture(model)
        loss, sample_size, logging_output = super().forward(capture, sample, reduce=reduce)
        if capture.output is None or not hasattr(model, "get_sparsity_terms"):
            self.warn_unused(None)
            return loss, sample_size, logging_output
        terms = model.get_sparsity_terms(capture.output)
        self.warn_unused(terms)
        penalty, log = self.penalties(terms, sample_size)
        logging_output.update(log)
        if model.training:
            self.maybe_write_images(terms)
        return loss + penalty, sample_size, logging_output

    def warn_unused(self, terms: Optional[SparsityTerms]) -> None:
        """Warn once (at the first step) about a penalty weight that the model
        has no heads for: it has no effect."""
        cfg = self.sparsity_cfg
        heads = str(cfg.aaa_hinge_heads)
        hinge = None if terms is None else terms.hinge_rho("aaa" if heads == "aaa" else "learned")
        hinge_kind = "aaa" if heads == "aaa" else "learned"
        checks = [(self.weight_option(key), self.penalty_weights.get(key, 0.0), "/".join(kind._names),
                   terms and terms.penalties.get(key)) for key, kind in LEARNED_KINDS.items()]
        checks += [(f"--aaa-alpha {cfg.aaa_alpha}", cfg.aaa_alpha, hinge_kind, hinge),
                   (f"--gate-lambda {cfg.gate_lambda}", cfg.gate_lambda, "':gate'", terms and terms.gate)]
        for option, weight, kind, term in checks:
            if weight > 0 and term is None:
                warn_once(f"{option} has no effect: the model has no {kind} heads")

    def weight_option(self, key: str) -> str:
        """The option and value that weigh the kind ``key``'s penalty, as the user wrote them."""
        own = LEARNED_KINDS[key].weight
        weight = self.penalty_weights.get(key, 0.0)
        if own and getattr(self.sparsity_cfg, own, 0.0):
            return f"--{own.replace('_', '-')} {weight}"
        return f"--learned-lambda {key}={weight}"

    def penalties(self, terms: SparsityTerms, sample_size) -> Tuple[Tensor, Dict[str, float]]:
        """(the penalties to add to the summed loss, the logging sums).  Each
        penalty is per sample-size unit, like fairseq's loss, so it is added
        times ``sample_size``; fairseq divides by the sample size again."""
        cfg = self.sparsity_cfg
        found = {}
        for key in LEARNED_KINDS:
            if key in terms.penalties:
                found[f"{key}_loss"] = self.penalty_weights.get(key, 0.0) * terms.penalties[key]
        heads = str(cfg.aaa_hinge_heads)
        rho = terms.hinge_rho(heads)
        if rho is not None and "learned" in terms.rho_counts:  # Eq. 10 on the chosen heads' ρ (Eq. 9)
            alpha = self.aaa_weight(terms.num_updates)
            found["aaa_loss"] = alpha * torch.relu(cfg.aaa_target - rho)
            terms.log["aaa_alpha_sum"], terms.log["aaa_alpha_count"] = alpha, 1.0
            terms.log["hinge_rho_sum"], terms.log["hinge_count"] = terms.hinge_log(heads)
        if terms.gate is not None:
            found["gate_loss"] = cfg.gate_lambda * terms.gate
        total = 0.0
        log = dict(terms.log)
        for name, term in found.items():
            total = total + term * sample_size
            log[name] = float(term.detach()) * sample_size
        return total, log

    @classmethod
    def reduce_metrics(cls, logging_outputs) -> None:
        """The criterion's own metrics, then the penalties and rates."""
        super().reduce_metrics(logging_outputs)
        cls.reduce_sparsity_metrics(logging_outputs)

    @staticmethod
    def logging_outputs_can_be_summed() -> bool:
        """Every logged rate is a (sum, count) pair (see the module docstring)."""
        return True

    @staticmethod
    def reduce_sparsity_metrics(logging_outputs) -> None:
        def total(key: str) -> float:
            return sum(log.get(key, 0) for log in logging_outputs)

        sample_size = total("sample_size")
        keys = set().union(*(log.keys() for log in logging_outputs)) if logging_outputs else set()
        for name in penalty_names():
            if name in keys and sample_size > 0:
                metrics.log_scalar(name, total(name) / sample_size / math.log(2), sample_size, round=4)
        logged = rates()
        logged.update({k[:-4]: (k, k[:-4] + "_count") for k in keys if k.startswith("rho_l") and k.endswith("_sum")})
        for name, (num, den) in sorted(logged.items()):
            if num in keys and total(den) > 0:
                metrics.log_scalar(name, total(num) / total(den), total(den), round=6)

    # ------------------------------------------------------------ images

    def maybe_write_images(self, terms: SparsityTerms) -> None:
        cfg = self.sparsity_cfg
        step = terms.num_updates
        if not cfg.mask_image_interval or step % cfg.mask_image_interval or not cfg.tensorboard_logdir:
            return
        if torch.distributed.is_available() and torch.distributed.is_initialized() \
                and torch.distributed.get_rank() != 0:
            return
        images = mask_images(terms, cfg.mask_image_len)
        if not images:
            return
        if self._image_writer is None:
            from torch.utils.tensorboard import SummaryWriter

            self._image_writer = SummaryWriter(os.path.join(cfg.tensorboard_logdir, "train"))
        for tag, img in images.items():
            self._image_writer.add_image(tag, img, step, dataformats="HW")
        self._image_writer.flush()


def _upscale(m: Tensor, size: int = 128) -> Tensor:
    k = max(1, size // max(m.shape))
    return m.repeat_interleave(k, 0).repeat_interleave(k, 1)


def mask_images(terms: SparsityTerms, n: int) -> Dict[str, Tensor]:
    """One (H, W) heatmap in [0, 1] per learned head, as its kind draws it
    (:meth:`~fairseq_local.attention.learned.kind.LearnedKind.images`: P =
    sigmoid(α) of each DAM mask at length n, once per mask when layers share
    it; each ``aaa`` layer's pattern for the batch's first sentence)."""
    images = {}
    for key, uses in terms.uses.items():
        for tag, img in LEARNED_KINDS[key].images(uses, n).items():
            images[tag] = _upscale(img.detach().float().cpu())
    return images
