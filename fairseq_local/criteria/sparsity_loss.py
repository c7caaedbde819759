"""Criteria that add the sparsity terms reported by the attention modules.

:class:`SparsityLoss` is written once and mixed into a fairseq criterion:
``label_smoothed_cross_entropy_with_sparsity`` is fairseq's
``label_smoothed_cross_entropy`` plus, for the model's
:class:`~fairseq_local.modules.local_attention.LocalMultiheadAttention` layers:

* DAM (seed 001, Eq. 5): ``--dam-lambda`` · mean over sentences and DAM heads
  of ‖M‖₁/N², the L1 norm of the (soft) mask over a sentence's N² real position
  pairs, i.e. its density 1 − ρ;
* AAA (seed 004, Eq. 10): ``α · max(0, ρ_target − ρ)``, ρ the mean over
  sentences and ``aaa`` heads of Eq. 9, α = ``--aaa-alpha``, constant, or
  rising linearly from 0 to it at update ``--aaa-alpha-updates``;
* head gates (seed 003): ``--gate-lambda`` · Σ over gates of P(gate ≠ 0), the
  expected L0 norm.

Each term is a per-target-token quantity, like fairseq's loss: the criterion
adds it multiplied by the sample size, so that after fairseq divides by the
sample size, λ weighs it against the mean token loss.  Every logged value is a
sum (fairseq's convention, exact across workers); TensorBoard shows the loss
terms (in the base-2 units of ``loss``), ρ overall and per layer
(``rho``, ``rho_l1``..), the DAM density, τ, the fraction of open gates and of
active AAA rows and columns.  ``--mask-image-interval N`` writes the learned
masks as heatmaps to the run's TensorBoard directory every N updates.
"""

import math
import os
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import torch
from fairseq import metrics
from fairseq.criterions import register_criterion
from fairseq.criterions.label_smoothed_cross_entropy import (
    LabelSmoothedCrossEntropyCriterion,
    LabelSmoothedCrossEntropyCriterionConfig,
)
from fairseq.dataclass import FairseqDataclass
from omegaconf import II
from torch import Tensor

from ..errors import OptionError
from ..modules.local_attention import LocalMultiheadAttention


@dataclass
class SparsityLossConfig(FairseqDataclass):
    dam_lambda: float = field(default=0.0, metadata={"help": "DAM: weight of the mask's L1 norm (seed 001, Eq. 5)"})
    aaa_alpha: float = field(default=0.0, metadata={"help": "AAA: (maximum) weight of the sparsity hinge (seed 004, Eq. 10)"})
    aaa_target: float = field(default=0.0, metadata={"help": "AAA: target sparsity rho_target in [0, 1]"})
    aaa_alpha_updates: int = field(
        default=0, metadata={"help": "AAA: alpha rises linearly to --aaa-alpha at this update, then stays (0: constant)"})
    gate_lambda: float = field(default=0.0, metadata={"help": "head gates: weight of the L0 penalty"})
    mask_image_interval: int = field(
        default=0, metadata={"help": "write learned masks as TensorBoard images every N updates (0: never)"})
    mask_image_len: int = field(default=64, metadata={"help": "sentence length of DAM mask images"})
    tensorboard_logdir: Optional[str] = II("common.tensorboard_logdir")


def attention_modules(model) -> List[LocalMultiheadAttention]:
    """The model's local attention modules, in layer order."""
    return [m for m in model.modules() if isinstance(m, LocalMultiheadAttention)]


class SparsityLoss:
    """Mixin: adds the sparsity terms to a criterion's loss and logs them."""

    def init_sparsity(self, cfg: SparsityLossConfig) -> None:
        for name in ("dam_lambda", "aaa_alpha", "gate_lambda", "aaa_alpha_updates", "mask_image_interval"):
            if getattr(cfg, name) < 0:
                raise OptionError(f"--{name.replace('_', '-')} must be >= 0, not {getattr(cfg, name)}")
        if not 0.0 <= cfg.aaa_target <= 1.0:
            raise OptionError(f"--aaa-target must be in [0, 1], not {cfg.aaa_target}")
        self.sparsity_cfg = cfg
        self._image_writer = None

    def aaa_weight(self, num_updates: int) -> float:
        """α of Eq. 10 at this update: constant, or linear up to --aaa-alpha-updates."""
        cfg = self.sparsity_cfg
        if cfg.aaa_alpha_updates <= 0:
            return cfg.aaa_alpha
        return cfg.aaa_alpha * min(1.0, num_updates / cfg.aaa_alpha_updates)

    def prepare_sparsity(self, model) -> List[LocalMultiheadAttention]:
        mods = attention_modules(model)
        for m in mods:
            m.collect_stats = True
        return mods

    def sparsity_terms(
        self, model, mods: List[LocalMultiheadAttention], sample_size
    ) -> Tuple[Tensor, Dict[str, float]]:
        """After the forward pass: (the terms to add to the summed loss, their
        logging sums)."""
        cfg = self.sparsity_cfg
        total: Dict[str, Tensor] = defaultdict(float)
        log: Dict[str, float] = {}
        for layer, m in enumerate(mods, start=1):
            for key, value in m.stats.items():
                total[key] = total[key] + value
            if "rho_sum" in m.stats:
                log[f"rho_l{layer}_sum"] = float(m.stats["rho_sum"])
                log[f"rho_l{layer}_count"] = float(m.stats["rho_count"])
            m.stats = {}
        num_updates = getattr(getattr(model, "encoder", model), "num_updates", 0)
        extra = 0.0
        terms = {}
        if "dam_count" in total:
            terms["dam_loss"] = cfg.dam_lambda * total["dam_density_sum"] / total["dam_count"]
        if "aaa_count" in total:
            rho = total["aaa_rho_sum"] / total["aaa_count"]
            log["aaa_alpha"] = self.aaa_weight(num_updates)
            terms["aaa_loss"] = log["aaa_alpha"] * torch.relu(cfg.aaa_target - rho)
        if "gate_l0" in total:
            terms["gate_loss"] = cfg.gate_lambda * total["gate_l0"]
        for name, term in terms.items():
            extra = extra + term * sample_size
            log[name] = float(term) * sample_size
        for key, value in total.items():
            log[key] = float(value)
        if any(m.dam_heads or m.aaa_heads for m in mods):
            log["tau_sum"], log["tau_count"] = float(mods[0].tau), 1.0
        if model.training:
            self.maybe_write_images(mods, num_updates)
        return extra, log

    @staticmethod
    def reduce_sparsity_metrics(logging_outputs) -> None:
        def total(key: str) -> float:
            return sum(log.get(key, 0) for log in logging_outputs)

        sample_size = total("sample_size")
        keys = set().union(*(log.keys() for log in logging_outputs)) if logging_outputs else set()
        for name in ("dam_loss", "aaa_loss", "gate_loss"):
            if name in keys and sample_size > 0:
                metrics.log_scalar(name, total(name) / sample_size / math.log(2), sample_size, round=4)
        ratios = {"rho": ("rho_sum", "rho_count"), "dam_density": ("dam_density_sum", "dam_count"),
                  "aaa_rho": ("aaa_rho_sum", "aaa_count"), "tau": ("tau_sum", "tau_count"),
                  "gates_open": ("gate_open", "gate_count"), "aaa_rows": ("aaa_rows", "aaa_tokens"),
                  "aaa_cols": ("aaa_cols", "aaa_tokens")}
        ratios.update({k[:-4]: (k, k[:-4] + "_count") for k in keys
                       if k.startswith("rho_l") and k.endswith("_sum")})
        for name, (num, den) in sorted(ratios.items()):
            if num in keys and total(den) > 0:
                metrics.log_scalar(name, total(num) / total(den), total(den), round=4)
        if "aaa_alpha" in keys:
            metrics.log_scalar("aaa_alpha", total("aaa_alpha") / len(logging_outputs), round=6)

    # ------------------------------------------------------------ images

    def maybe_write_images(self, mods: List[LocalMultiheadAttention], num_updates: int) -> None:
        cfg = self.sparsity_cfg
        if not cfg.mask_image_interval or num_updates % cfg.mask_image_interval or not cfg.tensorboard_logdir:
            return
        if torch.distributed.is_available() and torch.distributed.is_initialized() \
                and torch.distributed.get_rank() != 0:
            return
        images = mask_images(mods, cfg.mask_image_len)
        if not images:
            return
        if self._image_writer is None:
            from torch.utils.tensorboard import SummaryWriter

            self._image_writer = SummaryWriter(os.path.join(cfg.tensorboard_logdir, "train"))
        for tag, img in images.items():
            self._image_writer.add_image(tag, img, num_updates, dataformats="HW")
        self._image_writer.flush()


def _upscale(m: Tensor, size: int = 128) -> Tensor:
    k = max(1, size // max(m.shape))
    return m.repeat_interleave(k, 0).repeat_interleave(k, 1)


def mask_images(mods: List[LocalMultiheadAttention], n: int) -> Dict[str, Tensor]:
    """One (H, W) heatmap in [0, 1] per learned head: P = sigmoid(α) of each
    DAM mask at length n (once per mask when layers share it), and the last batch's axis pattern (first sentence)
    of each ``aaa`` layer."""
    images, seen = {}, set()
    for layer, m in enumerate(mods, start=1):
        for d, h in zip(m.dam, m.dam_heads):
            if id(d) not in seen:  # an α shared by layers is drawn once, named by its first layer
                seen.add(id(d))
                images[f"masks/l{layer}_h{h + 1}_{m.masks[h]}_P"] = _upscale(d.matrix(min(n, d.max_len), "prob").cpu())
        axis = getattr(m, "last_axis", None)
        if axis is not None:
            images[f"masks/l{layer}_aaa"] = _upscale(axis[0, 0].detach().float().cpu())
    return images


@dataclass
class LabelSmoothedCrossEntropyWithSparsityConfig(LabelSmoothedCrossEntropyCriterionConfig, SparsityLossConfig):
    pass


@register_criterion(
    "label_smoothed_cross_entropy_with_sparsity", dataclass=LabelSmoothedCrossEntropyWithSparsityConfig
)
class LabelSmoothedCrossEntropyWithSparsity(SparsityLoss, LabelSmoothedCrossEntropyCriterion):
    """``label_smoothed_cross_entropy`` plus the attention sparsity terms."""

    def __init__(self, cfg: LabelSmoothedCrossEntropyWithSparsityConfig, task):
        super().__init__(task, cfg.sentence_avg, cfg.label_smoothing, cfg.ignore_prefix_size,
                         cfg.report_accuracy)
        self.init_sparsity(cfg)

    @classmethod
    def build_criterion(cls, cfg, task):
        return cls(cfg, task)

    def forward(self, model, sample, reduce=True):
        mods = self.prepare_sparsity(model)
        loss, sample_size, logging_output = super().forward(model, sample, reduce=reduce)
        extra, log = self.sparsity_terms(model, mods, sample_size)
        loss = loss + extra
        logging_output["loss"] = loss.data
        logging_output.update(log)
        return loss, sample_size, logging_output

    @classmethod
    def reduce_metrics(cls, logging_outputs) -> None:
        super().reduce_metrics(logging_outputs)
        cls.reduce_sparsity_metrics(logging_outputs)

    @staticmethod
    def logging_outputs_can_be_summed() -> bool:
        return True
