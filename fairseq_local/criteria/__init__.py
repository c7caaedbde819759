"""Criteria (registered with fairseq on import)."""

from .sparsity_loss import (  # noqa: F401
    LabelSmoothedCrossEntropyWithSparsity,
    SparsityLoss,
    SparsityLossConfig,
    attention_modules,
)

__all__ = ["LabelSmoothedCrossEntropyWithSparsity", "SparsityLoss", "SparsityLossConfig", "attention_modules"]
