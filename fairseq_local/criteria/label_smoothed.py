"""``label_smoothed_cross_entropy_with_sparsity``: fairseq's
``label_smoothed_cross_entropy`` plus the sparsity penalties
(:mod:`fairseq_local.criteria.penalized`)."""

from dataclasses import dataclass

from fairseq.criterions import register_criterion
from fairseq.criterions.label_smoothed_cross_entropy import (
    LabelSmoothedCrossEntropyCriterion,
    LabelSmoothedCrossEntropyCriterionConfig,
)

from .penalized import SparsityLoss, SparsityLossConfig


@dataclass
class LabelSmoothedCrossEntropyWithSparsityConfig(LabelSmoothedCrossEntropyCriterionConfig, SparsityLossConfig):
    pass


@register_criterion(
    "label_smoothed_cross_entropy_with_sparsity", dataclass=LabelSmoothedCrossEntropyWithSparsityConfig
)
class LabelSmoothedCrossEntropyWithSparsity(SparsityLoss, LabelSmoothedCrossEntropyCriterion):
    """``label_smoothed_cross_entropy`` plus the attention sparsity penalties."""

    def __init__(self, cfg: LabelSmoothedCrossEntropyWithSparsityConfig, task):
        super().__init__(task, cfg.sentence_avg, cfg.label_smoothing, cfg.ignore_prefix_size,
                         cfg.report_accuracy)
        self.init_sparsity(cfg)

    @classmethod
    def build_criterion(cls, cfg, task):
        return cls(cfg, task)
