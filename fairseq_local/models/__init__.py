"""Models registered with fairseq, and their named architectures."""

from . import transformer  # noqa: F401
from .archs import NAMED_ARCHS, NMT_CONFIGS, METHOD_CONFIGS, PaperConfig, get_config  # noqa: F401
from .transformer import LocalTransformerModel, build_encoder, encoder_attention_weight_count  # noqa: F401

__all__ = ["LocalTransformerModel", "METHOD_CONFIGS", "NAMED_ARCHS", "NMT_CONFIGS", "PaperConfig",
           "build_encoder", "encoder_attention_weight_count", "get_config", "transformer"]
