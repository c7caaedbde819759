"""Transformer NMT models whose encoder heads are local and/or Q/K-tied.

Only the encoder self-attention differs from fairseq's ``transformer``: every
layer's ``self_attn`` is a :class:`LocalMultiheadAttention` configured from
``--attn-layout`` (see :mod:`fairseq_local.modules.layout`) and
``--mask-mode``.  The decoder is fairseq's own.
"""

import functools
import logging
from typing import Callable, Dict, List, Optional

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

from ..errors import OptionError
from ..modules.layout import LayoutError, check_layout, format_layout, parse_layout
from ..modules.learned import (
    TAU_SCHEDULES,
    AxisAdaptiveSpec,
    AxisSelector,
    DamMask,
    DamSpec,
    HeadGates,
    TauSchedule,
)
from ..modules.local_attention import (
    MASK_MODES,
    LocalMultiheadAttention,
    QKProjection,
    build_qk_groups,
)
from ..modules.masks import FileMask, MaskSpecError
from ..paper_configs import NAMED_ARCHS

logger = logging.getLogger(__name__)

# Defaults of the plugin's options (set on the args by every named arch).
_DEFAULTS = dict(mask_mode="post", dam_init=3.0, aaa_neg=-1e4, gate_init=3.0, gate_beta=2 / 3,
                 gate_gamma=-0.1, gate_zeta=1.1, tau_start=1.0, tau_anneal="constant",
                 tau_anneal_updates=0)


def option(cfg, name: str):
    """``cfg.name``, or its default when unset (None or missing)."""
    value = getattr(cfg, name, None)
    return _DEFAULTS.get(name) if value is None else value


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
        self.mask_mode = option(cfg, "mask_mode")
        # Plain attributes (set before nn.Module.__init__), used while the base
        # class builds the layers; the modules end up under layers[i].self_attn.
        self._qk_groups = build_qk_groups(
            [layer.groups for layer in self.layout],
            cfg.encoder.embed_dim,
            cfg.encoder.embed_dim // cfg.encoder.attention_heads,
        )
        self._dam_masks: Dict[str, DamMask] = {}
        self._layers_built = 0
        self.num_updates = 0
        super().__init__(cfg, dictionary, embed_tokens, return_fc=return_fc)
        del self._qk_groups, self._dam_masks

    def build_dam_mask(self, layer_idx: int, head: int, spec: DamSpec, cfg) -> DamMask:
        """The α of a DAM head: one per head index shared by all layers (seed
        001, §3.1.1), or one per layer with ``--dam-per-layer`` (seed 004, §4.1)."""
        key = f"{spec}.H{head}" + (f".L{layer_idx}" if getattr(cfg, "dam_per_layer", False) else "")
        if key not in self._dam_masks:
            max_len = getattr(cfg, "dam_max_len", None)
            max_len = cfg.max_source_positions if max_len is None else max_len
            if max_len < 1:
                raise OptionError(f"--dam-max-len must be >= 1, not {max_len}")
            self._dam_masks[key] = DamMask(spec.structured, max_len, option(cfg, "dam_init"))
        return self._dam_masks[key]

    def build_self_attention(self, layer_idx: int, cfg: TransformerConfig) -> nn.Module:
        """Build layer ``layer_idx``'s self-attention (extension hook)."""
        spec = self.layout[layer_idx]
        masks = list(spec.masks)
        mask_file = getattr(cfg, "mask_file", None)
        for h, m in enumerate(masks):
            if isinstance(m, FileMask):
                if not mask_file:
                    raise MaskSpecError(f"layout head '{m}' (layer {layer_idx + 1}) needs --mask-file")
                masks[h] = FileMask(m.layer, m.head, mask_file)
                masks[h].entry()  # fail now, with a clear message, if it is missing
        dam = [self.build_dam_mask(layer_idx, h, m, cfg) for h, m in enumerate(masks)
               if isinstance(m, DamSpec)]
        axis = AxisSelector(cfg.encoder.embed_dim) if any(
            isinstance(m, AxisAdaptiveSpec) for m in masks) else None
        gates = None
        if spec.gated_heads:
            try:
                gates = HeadGates(len(spec.gated_heads), *(option(cfg, f"gate_{p}")
                                                           for p in ("init", "beta", "gamma", "zeta")))
            except ValueError as e:
                raise OptionError(f"--gate-*: {e}") from None
        return LocalMultiheadAttention(
            cfg.encoder.embed_dim,
            masks,
            spec.head_to_group,
            [self._qk_groups[g] for g in spec.groups],
            mask_mode=self.mask_mode,
            dropout=cfg.attention_dropout,
            dam=dam,
            axis=axis,
            gates=gates,
            gated_heads=spec.gated_heads,
            tau=tau_schedule(cfg),
            dam_noise=not getattr(cfg, "dam_no_noise", False),
            aaa_neg=option(cfg, "aaa_neg"),
        )

    def attention_modules(self) -> List[LocalMultiheadAttention]:
        return [layer.self_attn for layer in self.layers]

    def set_num_updates(self, num_updates: int) -> None:
        """Record the update number (read by the sparsity criterion) and pass it on."""
        self.num_updates = num_updates
        super().set_num_updates(num_updates)

    LEARNED_KEYS = (".self_attn.dam.", ".self_attn.axis.", ".self_attn.gates.")

    def upgrade_state_dict_named(self, state_dict, name):
        """Load checkpoints across stages (``--restore-file``): learned-mask and
        gate parameters that this model lacks are dropped (a DAM mask exported to
        ``file`` heads, seed 001 §4.3), and those it has but the checkpoint lacks
        keep their initial values (gates or AAA fine-tuned from a trained
        model, seeds 003 and 004)."""
        super().upgrade_state_dict_named(state_dict, name)
        prefix = f"{name}." if name else ""
        own = {prefix + k: v for k, v in self.state_dict().items()}

        def learned(key: str) -> bool:
            return key.startswith(prefix + "layers.") and any(p in key for p in self.LEARNED_KEYS)

        dropped = [k for k in state_dict if learned(k) and k not in own]
        added = [k for k in own if learned(k) and k not in state_dict]
        for k in dropped:
            del state_dict[k]
        for k in added:
            state_dict[k] = own[k]
        if dropped or added:
            logger.info(f"checkpoint: dropped {len(dropped)} and initialised {len(added)} "
                        f"learned-mask/gate tensors that the two models do not share")

    def forward(self, src_tokens, src_lengths=None, return_all_hiddens: bool = False,
                token_embeddings=None):
        if self.training:  # one noise sample per DAM mask and update, shared by its layers
            for m in {id(d): d for a in self.attention_modules() for d in a.dam}.values():
                m.resample()
        return super().forward(src_tokens, src_lengths, return_all_hiddens, token_embeddings)

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
        parser.add_argument("--mask-file", metavar="FILE",
                            help="masks exported by fairseq_local.export_masks, for 'file' heads")
        parser.add_argument("--dam-max-len", type=int, metavar="N",
                            help="dam-u/dam-s: longest sentence the mask covers "
                            "(default --max-source-positions)")
        parser.add_argument("--dam-per-layer", action="store_true",
                            help="one DAM mask per layer and head (default: per head, shared by layers)")
        parser.add_argument("--dam-init", type=float, metavar="A",
                            help="initial DAM logits alpha (default 3.0: nearly all open)")
        parser.add_argument("--dam-no-noise", action="store_true",
                            help="train DAM with P = sigmoid(alpha), without Gumbel noise (seed 001, 3.1)")
        parser.add_argument("--tau-start", type=float, metavar="T",
                            help="Gumbel-sigmoid temperature at update 0 (default 1.0)")
        parser.add_argument("--tau-end", type=float, metavar="T",
                            help="temperature reached at --tau-anneal-updates (default --tau-start)")
        parser.add_argument("--tau-anneal", choices=TAU_SCHEDULES,
                            help="temperature schedule over the update number (default constant)")
        parser.add_argument("--tau-anneal-updates", type=int, metavar="N",
                            help="updates over which tau goes from start to end (default 0)")
        parser.add_argument("--aaa-neg", type=float, metavar="C",
                            help="aaa: the large negative constant C of seed 004 Eq. 5 (default -1e4)")
        parser.add_argument("--gate-init", type=float, metavar="A",
                            help="initial gate log-alpha (default 3.0: open)")
        parser.add_argument("--gate-beta", type=float, metavar="B",
                            help="hard-concrete temperature (default 2/3)")
        parser.add_argument("--gate-gamma", type=float, metavar="G",
                            help="hard-concrete stretch lower end, < 0 (default -0.1)")
        parser.add_argument("--gate-zeta", type=float, metavar="Z",
                            help="hard-concrete stretch upper end, > 1 (default 1.1)")

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


def tau_schedule(cfg) -> TauSchedule:
    """The Gumbel-sigmoid temperature schedule from the ``--tau-*`` options."""
    start, end = option(cfg, "tau_start"), getattr(cfg, "tau_end", None)
    try:
        return TauSchedule(start, start if end is None else end,
                           option(cfg, "tau_anneal_updates"), option(cfg, "tau_anneal"))
    except ValueError as e:
        raise OptionError(f"--tau-*: {e}") from None


@register_model_architecture("transformer_local", "transformer_local")
def local_base_architecture(args) -> None:
    """Transformer-base (as ``transformer_wmt_en_de``); layout default all global."""
    transformer_wmt_en_de(args)
    if getattr(args, "attn_layout", None) is None:
        args.attn_layout = f"[global*{args.encoder_attention_heads}]*{args.encoder_layers}"
    for name, value in _DEFAULTS.items():
        if getattr(args, name, None) is None:
            setattr(args, name, value)
    layout = parse_layout(args.attn_layout)
    check_layout(layout, args.encoder_layers, args.encoder_attention_heads)
    args.attn_layout = format_layout(layout)
    tau_schedule(args)


def _register_named_arch(arch: str, layout: str, mask_mode: Optional[str]) -> None:
    @register_model_architecture("transformer_local", arch)
    def arch_fn(args) -> None:
        args.attn_layout = getattr(args, "attn_layout", None) or layout
        if mask_mode and getattr(args, "mask_mode", None) is None:
            args.mask_mode = mask_mode
        local_base_architecture(args)


for _cfg in NAMED_ARCHS:
    _register_named_arch(_cfg.arch, _cfg.layout, _cfg.mask_mode)

__all__ = [
    "LayoutError",
    "LocalTransformerEncoder",
    "LocalTransformerEncoderLayer",
    "LocalTransformerModel",
    "QKProjection",
    "encoder_attention_weight_count",
]
