"""Printed numbers and findings of the method papers, as plain data.

Pande et al., "On the Importance of Local Information in Transformer Based Models": Tables 1-4,
Figs. 1-3, the fine-tuning recipe and findings, in ``numbers_pande``. Shi et al., "SparseBERT:
Rethinking the Importance Analysis in Self-attention": Tables 1-3, Figs. 3 and 6, setup and findings,
in ``numbers_sparsebert``. Wang et al., "Learning Adaptive Axis Attentions in Fine-tuning": Tables 1-7,
Fig. 2, setup and findings, in ``numbers_aaa``. The modules hold data only; this module gathers them
under one name.
"""
from .numbers_aaa import (  # noqa: F401
    AAA_FIG2,
    AAA_FINDINGS,
    AAA_METRICS,
    AAA_SETUP,
    AAA_TABLE1,
    AAA_TABLE2,
    AAA_TABLE3,
    AAA_TABLE4,
    AAA_TABLE5,
    AAA_TABLE6,
    AAA_TABLE7,
    AAA_TASKS,
)
from .numbers_pande import (  # noqa: F401
    PANDE_FIGURES,
    PANDE_FINDINGS,
    PANDE_FINETUNE,
    PANDE_NMT,
    PANDE_NMT_SETUP,
    PANDE_TABLE4,
)
from .numbers_sparsebert import (  # noqa: F401
    GLUE_COLUMNS,
    SPARSEBERT_FIG3,
    SPARSEBERT_FIG6,
    SPARSEBERT_FINDINGS,
    SPARSEBERT_METRICS,
    SPARSEBERT_SETUP,
    SPARSEBERT_TABLE1,
    SPARSEBERT_TABLE2,
    SPARSEBERT_TABLE3,
)

__all__ = [
    "PANDE_NMT", "PANDE_NMT_SETUP", "PANDE_TABLE4", "PANDE_FIGURES", "PANDE_FINETUNE", "PANDE_FINDINGS",
    "GLUE_COLUMNS", "SPARSEBERT_METRICS", "SPARSEBERT_TABLE1", "SPARSEBERT_TABLE2", "SPARSEBERT_TABLE3",
    "SPARSEBERT_FIG3", "SPARSEBERT_FIG6", "SPARSEBERT_SETUP", "SPARSEBERT_FINDINGS",
    "AAA_TASKS", "AAA_METRICS", "AAA_TABLE1", "AAA_TABLE2", "AAA_FIG2", "AAA_TABLE3", "AAA_TABLE4", "AAA_TABLE5",
    "AAA_TABLE6", "AAA_TABLE7", "AAA_SETUP", "AAA_FINDINGS",
]
