"""Models registered with fairseq, and their named architectures."""

from . import roberta, transformer  # noqa: F401
from .archs import (  # noqa: F401
    METHOD_CONFIGS, NAMED_ARCHS, NMT_CONFIGS, ROBERTA_ARCHS, TABLE4_CONFIGS, PaperConfig, get_config)
from .roberta import LocalRobertaModel, build_roberta  # noqa: F401
from .transformer import LocalTransformerModel, build_encoder, encoder_attention_weight_count  # noqa: F401

__all__ = ["LocalRobertaModel", "LocalTransformerModel", "METHOD_CONFIGS", "NAMED_ARCHS", "NMT_CONFIGS",
           "PaperConfig", "ROBERTA_ARCHS", "TABLE4_CONFIGS", "build_encoder", "build_roberta",
           "encoder_attention_weight_count", "get_config", "roberta", "transformer"]
