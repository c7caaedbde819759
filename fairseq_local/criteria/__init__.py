"""Criteria (registered with fairseq on import)."""

from .label_smoothed import LabelSmoothedCrossEntropyWithSparsity
from .sparsity import SparsityLoss, SparsityLossConfig

__all__ = ["LabelSmoothedCrossEntropyWithSparsity", "SparsityLoss", "SparsityLossConfig"]
