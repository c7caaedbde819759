"""``masked_lm_with_sparsity``: fairseq's ``masked_lm`` plus the sparsity
penalties (:mod:`fairseq_local.criteria.penalized`), for pretraining the
RoBERTa archs (SparseBERT learns DAM during masked-LM pretraining, §4.1)."""

from dataclasses import dataclass

from fairseq.criterions import register_criterion
from fairseq.criterions.masked_lm import MaskedLmConfig, MaskedLmLoss

from .penalized import SparsityLoss, SparsityLossConfig


@dataclass
class MaskedLmWithSparsityConfig(MaskedLmConfig, SparsityLossConfig):
    pass


@register_criterion("masked_lm_with_sparsity", dataclass=MaskedLmWithSparsityConfig)
class MaskedLmWithSparsity(SparsityLoss, MaskedLmLoss):
    """``masked_lm`` plus the attention sparsity penalties."""

    def __init__(self, cfg: MaskedLmWithSparsityConfig, task):
        super().__init__(cfg, task)
        self.init_sparsity(cfg)
