"""The builder that turns (options, layout, layer index) into a layer's
attention (:class:`AttentionBuilder`); the options themselves are in
:mod:`fairseq_local.attention.config`."""

from typing import Dict, List

from .module import LocalMultiheadAttention, QKProjection
from .layout import LayerSpec, check_layout, parse_layout
from .learned import DamMask, DamSpec
from .masks import FileMask, MaskSpecError
from ..errors import OptionError, warn_once
from .config import AttentionConfig, resolved


class AttentionBuilder:
    """Builds the :class:`LocalMultiheadAttention` of each layer from the
    options and the layout: one :class:`QKProjection` per Q/K group key (so
    ``@@name`` groups are one module shared by layers) and one
    :class:`~fairseq_local.attention.learned.DamMask` per DAM head index
    (shared by all layers, SparseBERT §3.1) or per (layer, head) with
    ``--dam-per-layer``.

    Args:
        cfg: the resolved options.
        embed_dim, num_layers, num_heads: the encoder's dimensions.
        max_positions: the default ``--dam-max-len``.
        dropout: attention-probability dropout.
    """

    def __init__(self, cfg: AttentionConfig, embed_dim: int, num_layers: int, num_heads: int,
                 max_positions: int, dropout: float = 0.0) -> None:
        self.cfg = cfg = resolved(cfg)
        self.layout = parse_layout(cfg.attn_layout or f"[global*{num_heads}]*{num_layers}")
        check_layout(self.layout, num_layers, num_heads)
        if embed_dim % num_heads:
            raise OptionError(f"the embedding size {embed_dim} is not a multiple of the {num_heads} attention "
                              f"heads (--encoder-embed-dim, --encoder-attention-heads)")
        self.embed_dim, self.head_dim = embed_dim, embed_dim // num_heads
        self.dam_max_len = cfg.dam_max_len or max_positions
        heads = [h for layer in self.layout for h in layer.heads]
        if cfg.dam_max_len and cfg.dam_max_len > max_positions and any(isinstance(h.mask, DamSpec) for h in heads):
            raise OptionError(f"--dam-max-len {cfg.dam_max_len} is longer than the model's {max_positions} "
                              f"positions: no sentence reaches the rest of the mask (it would cost "
                              f"--dam-max-len² entries); use at most {max_positions}")
        if cfg.mask_file and not any(isinstance(h.mask, FileMask) for h in heads):
            warn_once(f"--mask-file {cfg.mask_file} is not used: the layout has no 'file' heads")
        self.dropout = dropout
        self.qk: Dict[str, QKProjection] = {}
        self.dam: Dict[str, DamMask] = {}

    def __call__(self, layer_idx: int) -> LocalMultiheadAttention:
        spec = self._with_mask_file(self.layout[layer_idx], layer_idx)
        for g in spec.groups:
            if g not in self.qk:
                self.qk[g] = QKProjection(self.embed_dim, self.head_dim)
        dam: List[DamMask] = [self._dam_mask(layer_idx, h, m) for h, m in enumerate(spec.masks)
                              if isinstance(m, DamSpec)]
        return LocalMultiheadAttention(self.cfg, self.embed_dim, spec, [self.qk[g] for g in spec.groups],
                                       dam, self.dropout)

    def _with_mask_file(self, spec: LayerSpec, layer_idx: int) -> LayerSpec:
        """The layer with its ``file`` heads pointed at ``--mask-file``."""
        heads = []
        for h in spec.heads:
            if isinstance(h.mask, FileMask):
                if not self.cfg.mask_file:
                    raise MaskSpecError(f"layout head '{h.mask}' (layer {layer_idx + 1}) needs --mask-file")
                mask = FileMask(h.mask.layer, h.mask.head, self.cfg.mask_file)
                mask.entry()  # fail now, with a clear message, if it is missing
                h = type(h)(mask, h.group, h.gated)
            heads.append(h)
        return LayerSpec(tuple(heads))

    def _dam_mask(self, layer_idx: int, head: int, spec: DamSpec) -> DamMask:
        key = f"{spec}.H{head}" + (f".L{layer_idx}" if self.cfg.dam_per_layer else "")
        if key not in self.dam:
            cfg = self.cfg
            self.dam[key] = DamMask(spec.structured, self.dam_max_len, init=cfg.dam_init,
                                    init_std=cfg.dam_init_std, estimator=str(cfg.dam_estimator),
                                    noise=not cfg.dam_no_noise, lr_scale=cfg.dam_lr_scale)
        return self.dam[key]
