"""Attention modules, masks, layouts and the options that build them."""

from .module import LocalMultiheadAttention, QKProjection
from .build import AttentionBuilder
from .config import (MASK_MODES, AttentionConfig, AttentionOptions, add_attention_args, attention_options,
                     set_attention_defaults)
from .context import AttentionCapture, AttentionContext, CapturedCall, attention_context, current
from .gates import HeadGates
from .layout import HeadSpec, LayerSpec, LayoutError, check_layout, format_layout, parse_layout
from .learned import LEARNED_KINDS, LearnedKind, TauSchedule, register_learned_kind  # registers dam and aaa
from .masks import HeadMask, MaskSpecError, parse_mask, register_mask_kind
from .penalties import AttentionRecord, SparsityTerms, sparsity_terms
from .plan import HeadPlan, PathInputs

__all__ = [
    "AttentionBuilder", "AttentionCapture", "AttentionConfig", "AttentionContext", "AttentionOptions",
    "AttentionRecord", "CapturedCall", "HeadGates", "HeadMask", "HeadPlan", "HeadSpec", "LEARNED_KINDS",
    "LayerSpec", "LayoutError", "LearnedKind", "LocalMultiheadAttention", "MASK_MODES", "MaskSpecError",
    "PathInputs", "QKProjection", "SparsityTerms", "TauSchedule", "add_attention_args", "attention_context",
    "attention_options", "check_layout", "current", "format_layout", "parse_layout", "parse_mask",
    "register_learned_kind", "register_mask_kind", "set_attention_defaults", "sparsity_terms",
]
