"""Attention modules, masks and layouts."""

from .layout import HeadSpec, LayerSpec, LayoutError, check_layout, format_layout, parse_layout
from .local_attention import MASK_MODES, LocalMultiheadAttention, QKProjection
from .masks import HeadMask, MaskSpecError, parse_mask, register_mask_kind

__all__ = [
    "HeadMask", "HeadSpec", "LayerSpec", "LayoutError", "LocalMultiheadAttention",
    "MASK_MODES", "MaskSpecError", "QKProjection", "check_layout", "format_layout",
    "parse_layout", "parse_mask", "register_mask_kind",
]
