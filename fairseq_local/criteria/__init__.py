"""Criteria (registered with fairseq on import): fairseq's own, plus the
sparsity penalties of :mod:`fairseq_local.criteria.penalized`."""

from .label_smoothed import LabelSmoothedCrossEntropyWithSparsity
from .masked_lm import MaskedLmWithSparsity
from .sentence_prediction import SentencePredictionWithSparsity
from .penalized import SparsityLoss, SparsityLossConfig

__all__ = ["LabelSmoothedCrossEntropyWithSparsity", "MaskedLmWithSparsity", "SentencePredictionWithSparsity",
           "SparsityLoss", "SparsityLossConfig"]
