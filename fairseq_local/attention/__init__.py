"""Attention modules, masks, layouts and the options that build them."""

from .module import LocalMultiheadAttention, QKProjection
from .config import MASK_MODES
from .build import AttentionBuilder
from .config import AttentionConfig, add_attention_args, attention_config, set_attention_defaults
from .gates import HeadGates
from .layout import HeadSpec, LayerSpec, LayoutError, check_layout, format_layout, parse_layout
from .learned import AxisSelector, DamMask, TauSchedule  # registers dam-u, dam-s, aaa
from .masks import HeadMask, MaskSpecError, parse_mask, register_mask_kind
from .penalties import AttentionRecord, SparsityTerms, recording, sparsity_terms

__all__ = [
    "AttentionBuilder", "AttentionConfig", "AttentionRecord", "AxisSelector", "DamMask", "HeadGates",
    "HeadMask", "HeadSpec", "LayerSpec", "LayoutError", "LocalMultiheadAttention", "MASK_MODES",
    "MaskSpecError", "QKProjection", "SparsityTerms", "TauSchedule", "add_attention_args",
    "attention_config", "check_layout", "format_layout", "parse_layout", "parse_mask", "recording",
    "register_mask_kind", "set_attention_defaults", "sparsity_terms",
]
