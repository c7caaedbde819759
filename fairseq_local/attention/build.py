"""The builder that turns (options, layer index) into a layer's attention
(:class:`AttentionBuilder`); the options and their parsed layout are an
:class:`~fairseq_local.attention.config.AttentionOptions`."""

from typing import Dict

from torch import nn

from .module import LocalMultiheadAttention, QKProjection
from .layout import LayerSpec, check_layout
from .learned.kind import KindBuild
from .masks import FileMask, MaskSpecError
from .plan import HeadPlan
from ..errors import OptionError, warn_once
from .config import AttentionOptions


class AttentionBuilder:
    """Builds the :class:`LocalMultiheadAttention` of each layer from the
    options and their layout: one :class:`QKProjection` per Q/K group key (so
    ``@@name`` groups are one module shared by layers), and each learned
    kind's parameter module per layer
    (:meth:`~fairseq_local.attention.learned.kind.LearnedKind.build`, which
    shares modules across layers through one :class:`KindBuild` per model:
    a DAM mask per head index, SparseBERT §3.1).

    Args:
        options: the options and the layout (:func:`~fairseq_local.attention.config.attention_options`).
        embed_dim, num_layers, num_heads: the encoder's dimensions (the layout is checked against them).
        max_positions: the longest input (learned kinds' default lengths).
        dropout: attention-probability dropout.
    """

    def __init__(self, options: AttentionOptions, embed_dim: int, num_layers: int, num_heads: int,
                 max_positions: int, dropout: float = 0.0) -> None:
        self.options = options
        self.layout = options.layout
        check_layout(self.layout, num_layers, num_heads)
        if embed_dim % num_heads:
            raise OptionError(f"the embedding size {embed_dim} is not a multiple of the {num_heads} attention "
                              f"heads (--encoder-embed-dim, --encoder-attention-heads)")
        self.embed_dim, self.head_dim = embed_dim, embed_dim // num_heads
        heads = [h for layer in self.layout for h in layer.heads]
        if options.mask_file and not any(isinstance(h.mask, FileMask) for h in heads):
            warn_once(f"--mask-file {options.mask_file} is not used: the layout has no 'file' heads")
        self.dropout = dropout
        self.qk: Dict[str, QKProjection] = {}
        self.kinds = KindBuild(options, embed_dim, max_positions)

    def __call__(self, layer_idx: int) -> LocalMultiheadAttention:
        spec = self._with_mask_file(self.layout[layer_idx], layer_idx)
        for g in spec.groups:
            if g not in self.qk:
                self.qk[g] = QKProjection(self.embed_dim, self.head_dim)
        learned: Dict[str, nn.Module] = {
            g.kind.key: g.kind.build(self.kinds, layer_idx, tuple(zip(g.heads, g.specs)))
            for g in HeadPlan.build(spec, self.options.mask_mode).learned}
        return LocalMultiheadAttention(self.options, self.embed_dim, spec, [self.qk[g] for g in spec.groups],
                                       learned, self.dropout)

    def _with_mask_file(self, spec: LayerSpec, layer_idx: int) -> LayerSpec:
        """The layer with its ``file`` heads pointed at ``--mask-file``."""
        heads = []
        for h in spec.heads:
            if isinstance(h.mask, FileMask):
                if not self.options.mask_file:
                    raise MaskSpecError(f"layout head '{h.mask}' (layer {layer_idx + 1}) needs --mask-file")
                mask = FileMask(h.mask.layer, h.mask.head, self.options.mask_file)
                mask.entry()  # fail now, with a clear message, if it is missing
                h = type(h)(mask, h.group, h.gated)
            heads.append(h)
        return LayerSpec(tuple(heads))
