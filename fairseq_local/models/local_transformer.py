"""Transformer NMT models whose encoder heads are local and/or Q/K-tied.

Only the encoder self-attention differs from fairseq's ``transformer``: every
layer's ``self_attn`` is a :class:`LocalMultiheadAttention` configured from
``--attn-layout`` (see :mod:`fairseq_local.modules.layout`) and
``--mask-mode``.  The decoder is fairseq's own.
"""

import functools
from typing import Callable, Dict

from fairseq.distributed import fsdp_wrap
from fairseq.models import register_model, register_model_architecture
from fairseq.models.transformer import (
    TransformerConfig,
    TransformerEncoderBase,
    TransformerModel,
    transformer_wmt_en_de,
)
from fairseq.modules.transformer_layer import TransformerEncoderLayerBase
from fairseq.modules.checkpoint_activations import checkpoint_wrapper
from torch import nn

from ..modules.layout import LayoutError, check_layout, format_layout, parse_layout
from ..modules.local_attention import (
    MASK_MODES,
    LocalMultiheadAttention,
    QKProjection,
    build_qk_groups,
)
from ..paper_configs import NMT_CONFIGS


class LocalTransformerEncoderLayer(TransformerEncoderLayerBase):
    """fairseq's encoder layer with an injected self-attention module."""

    def __init__(
        self,
        cfg: TransformerConfig,
        build_self_attention: Callable[[TransformerConfig], nn.Module],
        return_fc: bool = False,
    ) -> None:
        # Set before nn.Module.__init__, as fairseq's TransformerEncoder does with
        # self.args: the base __init__ calls build_self_attention().
        self._build_attention = build_self_attention
        super().__init__(cfg, return_fc=return_fc)

    def build_self_attention(self, embed_dim: int, cfg: TransformerConfig) -> nn.Module:
        return self._build_attention(cfg)


class LocalTransformerEncoder(TransformerEncoderBase):
    """TransformerEncoderBase whose layers use the attention layout of ``cfg``.

    Q/K groups named ``@@name`` are one :class:`QKProjection` object shared by
    the ``self_attn`` of every layer that uses them."""

    def __init__(self, cfg: TransformerConfig, dictionary, embed_tokens, return_fc: bool = False):
        self.layout = parse_layout(cfg.attn_layout)
        check_layout(self.layout, cfg.encoder.layers, cfg.encoder.attention_heads)
        self.mask_mode = getattr(cfg, "mask_mode", "post")
        # Plain attributes (set before nn.Module.__init__), used while the base
        # class builds the layers; the modules end up under layers[i].self_attn.
        self._qk_groups = build_qk_groups(
            [layer.groups for layer in self.layout],
            cfg.encoder.embed_dim,
            cfg.encoder.embed_dim // cfg.encoder.attention_heads,
        )
        self._layers_built = 0
        super().__init__(cfg, dictionary, embed_tokens, return_fc=return_fc)
        del self._qk_groups

    def build_self_attention(self, layer_idx: int, cfg: TransformerConfig) -> nn.Module:
        """Build layer ``layer_idx``'s self-attention (extension hook)."""
        spec = self.layout[layer_idx]
        return LocalMultiheadAttention(
            cfg.encoder.embed_dim,
            spec.masks,
            spec.head_to_group,
            [self._qk_groups[g] for g in spec.groups],
            mask_mode=self.mask_mode,
            dropout=cfg.attention_dropout,
        )

    def build_encoder_layer(self, cfg: TransformerConfig) -> nn.Module:
        layer_idx, self._layers_built = self._layers_built, self._layers_built + 1
        layer = LocalTransformerEncoderLayer(
            cfg,
            functools.partial(self.build_self_attention, layer_idx),
            return_fc=self.return_fc,
        )
        # As TransformerEncoderBase.build_encoder_layer.
        checkpoint = cfg.checkpoint_activations
        if checkpoint:
            layer = checkpoint_wrapper(layer, offload_to_cpu=cfg.offload_activations)
        min_params_to_wrap = cfg.min_params_to_wrap if not checkpoint else 0
        return fsdp_wrap(layer, min_num_params=min_params_to_wrap)


@register_model("transformer_local")
class LocalTransformerModel(TransformerModel):
    """fairseq's Transformer with a per-head local/tied encoder self-attention."""

    @classmethod
    def add_args(cls, parser) -> None:
        super().add_args(parser)
        parser.add_argument(
            "--attn-layout",
            metavar="LAYOUT",
            help="encoder self-attention layout: per layer and head, a mask "
            "(global, identity, prev-K, next-K, band-K) and an optional Q/K group "
            "('@name' ties within a layer, '@@name' across layers), e.g. "
            "'[band-1,band-2,global*6]*6'. Default: all heads global",
        )
        parser.add_argument(
            "--mask-mode",
            choices=MASK_MODES,
            help="post: multiply the softmax by the mask, no renormalisation "
            "(seed 000, Eq. 9; default); pre: exclude masked keys before the softmax",
        )

    @classmethod
    def build_encoder(cls, cfg, src_dict, embed_tokens):
        return LocalTransformerEncoder(
            TransformerConfig.from_namespace(cfg), src_dict, embed_tokens
        )


def encoder_attention_weight_count(model: nn.Module) -> int:
    """Unique ≥2-D parameters under ``encoder.layers[*].self_attn`` (shared once)."""
    encoder = getattr(model, "encoder", model)
    unique = {
        id(p): p.numel()
        for layer in encoder.layers
        for p in layer.self_attn.parameters()
        if p.dim() >= 2
    }
    return sum(unique.values())


@register_model_architecture("transformer_local", "transformer_local")
def local_base_architecture(args) -> None:
    """Transformer-base (as ``transformer_wmt_en_de``); layout default all global."""
    transformer_wmt_en_de(args)
    if getattr(args, "attn_layout", None) is None:
        args.attn_layout = f"[global*{args.encoder_attention_heads}]*{args.encoder_layers}"
    args.mask_mode = getattr(args, "mask_mode", None) or "post"
    layout = parse_layout(args.attn_layout)
    check_layout(layout, args.encoder_layers, args.encoder_attention_heads)
    args.attn_layout = format_layout(layout)


def _register_paper_arch(arch: str, layout: str) -> None:
    @register_model_architecture("transformer_local", arch)
    def arch_fn(args) -> None:
        args.attn_layout = getattr(args, "attn_layout", None) or layout
        local_base_architecture(args)


for _cfg in NMT_CONFIGS:
    _register_paper_arch(_cfg.arch, _cfg.layout)

__all__ = [
    "LayoutError",
    "LocalTransformerEncoder",
    "LocalTransformerEncoderLayer",
    "LocalTransformerModel",
    "QKProjection",
    "encoder_attention_weight_count",
]
