"""Attention modules, masks, layouts and the options that build them."""

from .module import LocalMultiheadAttention, QKProjection
from .build import AttentionBuilder
from .config import MASK_MODES, AttentionConfig, add_attention_args, attention_config, set_attention_defaults
from .context import AttentionCapture, AttentionContext, CapturedCall, attention_context, current
from .gates import HeadGates
from .layout import HeadSpec, LayerSpec, LayoutError, check_layout, format_layout, parse_layout
from .learned import AxisSelector, DamMask, TauSchedule  # registers dam-u, dam-s, aaa
from .masks import HeadMask, MaskSpecError, parse_mask, register_mask_kind
from .penalties import AttentionRecord, SparsityTerms, sparsity_terms
from .plan import HeadPlan, PathInputs

__all__ = [
    "AttentionBuilder", "AttentionCapture", "AttentionConfig", "AttentionContext", "AttentionRecord",
    "AxisSelector", "CapturedCall", "DamMask", "HeadGates", "HeadMask", "HeadPlan", "HeadSpec", "LayerSpec",
    "LayoutError", "LocalMultiheadAttention", "MASK_MODES", "MaskSpecError", "PathInputs", "QKProjection",
    "SparsityTerms", "TauSchedule", "add_attention_args", "attention_config", "attention_context",
    "check_layout", "current", "format_layout", "parse_layout", "parse_mask", "register_mask_kind",
    "set_attention_defaults", "sparsity_terms",
]
