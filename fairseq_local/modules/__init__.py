"""Attention modules, masks and layouts."""

from .layout import HeadSpec, LayerSpec, LayoutError, check_layout, format_layout, parse_layout
from .learned import AxisSelector, DamMask, HeadGates, TauSchedule  # registers dam-u, dam-s, aaa
from .local_attention import MASK_MODES, LocalMultiheadAttention, QKProjection
from .masks import HeadMask, MaskSpecError, parse_mask, register_mask_kind

__all__ = [
    "AxisSelector", "DamMask", "HeadGates", "HeadMask", "HeadSpec", "TauSchedule", "LayerSpec", "LayoutError", "LocalMultiheadAttention",
    "MASK_MODES", "MaskSpecError", "QKProjection", "check_layout", "format_layout",
    "parse_layout", "parse_mask", "register_mask_kind",
]
