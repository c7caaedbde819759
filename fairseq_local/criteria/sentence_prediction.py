"""``sentence_prediction_with_sparsity``: fairseq's ``sentence_prediction``
(GLUE fine-tuning; ``--classification-head-name``, ``--regression-target``)
plus the sparsity penalties (:mod:`fairseq_local.criteria.penalized`), e.g.
Adaptive Axis Attention's hinge while fine-tuning (Wang et al. 2022, Eq. 10)."""

from dataclasses import dataclass

from fairseq.criterions import register_criterion
from fairseq.criterions.sentence_prediction import SentencePredictionConfig, SentencePredictionCriterion

from .penalized import SparsityLoss, SparsityLossConfig


@dataclass
class SentencePredictionWithSparsityConfig(SentencePredictionConfig, SparsityLossConfig):
    pass


@register_criterion("sentence_prediction_with_sparsity", dataclass=SentencePredictionWithSparsityConfig)
class SentencePredictionWithSparsity(SparsityLoss, SentencePredictionCriterion):
    """``sentence_prediction`` plus the attention sparsity penalties."""

    def __init__(self, cfg: SentencePredictionWithSparsityConfig, task):
        super().__init__(cfg, task)
        self.init_sparsity(cfg)
