"""Transformer NMT models whose encoder heads are local, Q/K-tied or sparse.

Only the encoder self-attention differs from fairseq's ``transformer``: every
layer's ``self_attn`` is a
:class:`~fairseq_local.attention.module.LocalMultiheadAttention` built by an
:class:`~fairseq_local.attention.build.AttentionBuilder` from the attention
options and ``--attn-layout``, resolved and parsed once per encoder into an
:class:`~fairseq_local.attention.config.AttentionOptions`.  The decoder is fairseq's own; ``--decoder-gates`` gives
its attention head gates (:mod:`fairseq_local.models.decoder`), and
``--train-gates-only`` trains the gates alone.  The named architectures
are layout data (:mod:`fairseq_local.models.archs`).
"""

import argparse
import functools
import logging
from typing import Any, List, Optional

from fairseq.distributed import fsdp_wrap
from fairseq.models import register_model, register_model_architecture
from fairseq.models.transformer import (
    TransformerConfig,
    TransformerEncoderBase,
    TransformerModel,
    transformer_wmt_en_de,
)
from fairseq.modules.checkpoint_activations import checkpoint_wrapper
from fairseq.modules.transformer_layer import TransformerEncoderLayerBase
from torch import nn

from ..attention.module import LocalMultiheadAttention
from ..attention.build import AttentionBuilder
from ..attention.context import attention_context
from ..attention.masks import FileMask
from ..attention.config import LEARNED_KEYS, add_attention_args, attention_options, set_attention_defaults
from ..attention.penalties import SparsityTerms, sparsity_terms
from ..errors import OptionError
from .archs import NAMED_ARCHS
from ..attention.gates import parse_decoder_gates
from ..attention.learned.kind import upgrade_learned_keys
from .decoder import GatedTransformerDecoder
from .resume import EXTRA_STATE, check_resume, model_signature, saved_signature, sync_learned

logger = logging.getLogger(__name__)


class LocalTransformerEncoderLayer(TransformerEncoderLayerBase):
    """fairseq's encoder layer with an injected self-attention module."""

    def __init__(self, cfg: TransformerConfig, build_self_attention, return_fc: bool = False) -> None:
        # Set before nn.Module.__init__, as fairseq's TransformerEncoder does with
        # self.args: the base __init__ calls build_self_attention().
        self._build_attention = build_self_attention
        super().__init__(cfg, return_fc=return_fc)

    def build_self_attention(self, embed_dim: int, cfg: TransformerConfig) -> nn.Module:
        return self._build_attention()


class LocalTransformerEncoder(TransformerEncoderBase):
    """TransformerEncoderBase whose layers use the attention layout of ``cfg``.

    Q/K groups named ``@@name`` are one
    :class:`~fairseq_local.attention.module.QKProjection` shared by the
    ``self_attn`` of every layer that uses them.  The forward pass runs in an
    :func:`~fairseq_local.attention.context.attention_context` of its own
    (fresh records and memo; a training pass draws the DAM masks' noise on
    entry), and the output dict carries its attention records under
    ``"sparsity"``.

    The attention options of ``cfg`` are resolved and its layout parsed here,
    once (:func:`~fairseq_local.attention.config.attention_options`), into
    :attr:`attention_options`, which the layers, the resume signature and the
    sparsity terms read; :attr:`layout` is its layout.  ``model_cfg``: the
    model options whose signature is saved (:mod:`..resume`; default ``cfg``)."""

    def __init__(self, cfg: TransformerConfig, dictionary, embed_tokens, return_fc: bool = False,
                 model_cfg: Any = None):
        # Plain attributes (set before nn.Module.__init__), used while the base
        # class builds the layers.
        self.attention_options = options = attention_options(cfg, cfg.encoder.layers, cfg.encoder.attention_heads)
        self.signature = model_signature(cfg if model_cfg is None else model_cfg, options)
        self._build_attention = AttentionBuilder(
            options, cfg.encoder.embed_dim, cfg.encoder.layers, cfg.encoder.attention_heads,
            max_positions=cfg.max_source_positions, dropout=cfg.attention_dropout)
        self._layers_built = 0
        super().__init__(cfg, dictionary, embed_tokens, return_fc=return_fc)
        self.layout = options.layout
        del self._build_attention

    def build_self_attention(self, layer_idx: int, cfg: TransformerConfig) -> nn.Module:
        """Build layer ``layer_idx``'s self-attention (extension hook)."""
        return self._build_attention(layer_idx)

    def build_encoder_layer(self, cfg: TransformerConfig) -> nn.Module:
        layer_idx, self._layers_built = self._layers_built, self._layers_built + 1
        layer = LocalTransformerEncoderLayer(
            cfg, functools.partial(self.build_self_attention, layer_idx, cfg), return_fc=self.return_fc)
        # As TransformerEncoderBase.build_encoder_layer.
        checkpoint = cfg.checkpoint_activations
        if checkpoint:
            layer = checkpoint_wrapper(layer, offload_to_cpu=cfg.offload_activations)
        min_params_to_wrap = cfg.min_params_to_wrap if not checkpoint else 0
        return fsdp_wrap(layer, min_num_params=min_params_to_wrap)

    def attention_modules(self) -> List[LocalMultiheadAttention]:
        return [layer.self_attn for layer in self.layers]

    LEARNED_KEYS = LEARNED_KEYS

    def get_extra_state(self) -> dict:
        """Saved with the weights: the model's signature (:mod:`..resume`)."""
        return {"signature": dict(self.signature)}

    def set_extra_state(self, state: Any) -> None:
        """Nothing to restore: the models compare signatures before loading."""

    def max_positions(self) -> int:
        """fairseq's limit, lowered to the positions that DAM and ``file``
        masks cover, so that fairseq skips (training) or refuses (validation,
        generation) longer sentences as it does for any arch."""
        limits = [super().max_positions(), *mask_position_limits(self.attention_modules())]
        return min(limits)

    def upgrade_state_dict_named(self, state_dict, name):
        """Load checkpoints across stages (``--restore-file``): learned-mask and
        gate parameters that this model lacks are dropped (a DAM mask exported to
        ``file`` heads, SparseBERT §4.3), and those it has but the checkpoint
        lacks keep their initial values (gates or AAA fine-tuned from a trained
        model, Voita et al. 2019 and Adaptive Axis Attention)."""
        super().upgrade_state_dict_named(state_dict, name)
        upgrade_learned_keys(state_dict)  # saved before learned kinds
        prefix = f"{name}." if name else ""
        own = self.state_dict()
        state_dict.setdefault(prefix + EXTRA_STATE, own[EXTRA_STATE])  # saved before signatures
        sync_learned(state_dict, own, prefix, self.LEARNED_KEYS)

    def train(self, mode: bool = True) -> "LocalTransformerEncoder":
        """As nn.Module's; refuses in one line to train where a chosen path has
        no backward (fairseq calls this before its first step, so nothing,
        not even ``crash.pt``, is written)."""
        if mode:
            for module in self.attention_modules():
                module.check_trainable()
        return super().train(mode)

    def forward(self, src_tokens, src_lengths=None, return_all_hiddens: bool = False, token_embeddings=None):
        # one noise sample per DAM mask and training update, shared by its layers
        noise = self.attention_modules() if self.training else ()
        with attention_context(records=True, memo=True, sample_noise=noise) as ctx:
            out = super().forward(src_tokens, src_lengths, return_all_hiddens, token_embeddings)
        out["sparsity"] = ctx.records
        return out

    def sparsity_terms(self, records, gates=()) -> SparsityTerms:
        """The terms of this encoder's ``records``; ``gates``: further gated
        layers (the decoder's) that join the L0 term."""
        return sparsity_terms(self.attention_options, self.attention_modules(), records, gates)


@register_model("transformer_local")
class LocalTransformerModel(TransformerModel):
    """fairseq's Transformer with a per-head local/tied/sparse encoder self-attention."""

    @classmethod
    def add_args(cls, parser) -> None:
        super().add_args(parser)
        add_attention_args(parser)
        parser.add_argument("--decoder-gates", metavar="KINDS", default=None,
                            help="hard-concrete gates on every head of the decoder's self-attention "
                                 "and/or encoder-decoder attention: a comma list of self and cross "
                                 "(Voita et al. 2019 §6); the --gate-* options apply")
        parser.add_argument("--train-gates-only", action="store_true",
                            help="train only the head gates (encoder ':gate' heads and --decoder-gates); every "
                                 "other parameter is frozen (a fast pruning pass; Voita et al. train all)")

    @classmethod
    def build_encoder(cls, cfg, src_dict, embed_tokens):
        encoder = LocalTransformerEncoder(TransformerConfig.from_namespace(cfg), src_dict, embed_tokens, model_cfg=cfg)
        if encoder.max_positions() < cfg.max_source_positions:
            logger.info(f"the encoder takes sentences of at most {encoder.max_positions()} tokens, the length "
                        f"its DAM/file masks cover: fairseq skips longer training sentences and refuses "
                        f"longer validation ones unless --skip-invalid-size-inputs-valid-test")
        return encoder

    @classmethod
    def build_model(cls, args, task):
        """fairseq's, then ``--train-gates-only``: every parameter but the
        gates' log α stops taking gradients (fairseq's optimizer skips them)."""
        model = super().build_model(args, task)
        if getattr(args, "train_gates_only", False):
            gates = [p for name, p in model.named_parameters() if ".gates." in name]
            if not gates:
                raise OptionError("--train-gates-only: the model has no head gates (':gate' in --attn-layout, "
                                  "or --decoder-gates)")
            for name, p in model.named_parameters():
                p.requires_grad_(".gates." in name)
        return model

    @classmethod
    def build_decoder(cls, cfg, tgt_dict, embed_tokens):
        """fairseq's decoder, with head gates where ``--decoder-gates`` asks
        (:mod:`fairseq_local.models.decoder`); the gates read the options'
        ``--gate-*`` values (:func:`~fairseq_local.attention.config.attention_options`)."""
        kinds = parse_decoder_gates(getattr(cfg, "decoder_gates", None))
        if not kinds:
            return super().build_decoder(cfg, tgt_dict, embed_tokens)
        tcfg = TransformerConfig.from_namespace(cfg)
        options = attention_options(cfg, tcfg.encoder.layers, tcfg.encoder.attention_heads)
        return GatedTransformerDecoder(tcfg, tgt_dict, embed_tokens, kinds, options,
                                       no_encoder_attn=tcfg.no_cross_attention)

    def decoder_gates(self) -> list:
        """The decoder's head gates (:class:`~fairseq_local.attention.gates.HeadGates`), in layer order."""
        return self.decoder.head_gates() if isinstance(self.decoder, GatedTransformerDecoder) else []

    def load_state_dict(self, state_dict, strict: bool = True, model_cfg=None, args=None):
        """As fairseq's, refusing to resume another model (:mod:`..resume`)."""
        check_resume(saved_signature(state_dict, "encoder."), self.encoder.signature, model_cfg)
        return super().load_state_dict(state_dict, strict=strict, model_cfg=model_cfg, args=args)

    def forward(self, src_tokens, src_lengths, prev_output_tokens, return_all_hiddens: bool = True,
                features_only: bool = False, alignment_layer: Optional[int] = None,
                alignment_heads: Optional[int] = None):
        """As fairseq's Transformer; the decoder's extra output also carries
        the encoder's attention records (``"sparsity"``)."""
        encoder_out = self.encoder(src_tokens, src_lengths=src_lengths, return_all_hiddens=return_all_hiddens)
        x, extra = self.decoder(prev_output_tokens, encoder_out=encoder_out, features_only=features_only,
                                alignment_layer=alignment_layer, alignment_heads=alignment_heads,
                                src_lengths=src_lengths, return_all_hiddens=return_all_hiddens)
        extra["sparsity"] = encoder_out["sparsity"]
        return x, extra

    def get_sparsity_terms(self, net_output) -> SparsityTerms:
        """The encoder's sparsity terms for the forward pass that gave
        ``net_output``, with the decoder's gates in the L0 term."""
        return self.encoder.sparsity_terms(net_output[1].get("sparsity", []), self.decoder_gates())


def mask_position_limits(modules) -> List[int]:
    """The lengths that the learned kinds' masks (a DAM mask's maximum length)
    and ``file`` masks of attention ``modules`` cover (a longer sentence cannot be attended)."""
    limits = [lim for m in modules for g in m.plan.learned
              for lim in [g.kind.position_limit(m.learned[g.kind.key])] if lim is not None]
    limits += [f.entry()["matrix"].shape[0] for m in modules for f in m.plan.fixed_masks if isinstance(f, FileMask)]
    return limits


def local_encoder(model: nn.Module) -> nn.Module:
    """The encoder that holds the attention layers: ``model.encoder`` of the
    NMT models, ``model.encoder.sentence_encoder`` of RoBERTa, or ``model``
    itself if it is an encoder."""
    encoder = getattr(model, "encoder", model)
    return getattr(encoder, "sentence_encoder", encoder)


def attention_weight_count(modules) -> int:
    """Unique ≥2-D parameters of attention ``modules`` (a shared tensor once)."""
    unique = {id(p): p.numel() for m in modules for p in m.parameters() if p.dim() >= 2}
    return sum(unique.values())


def encoder_attention_weight_count(model: nn.Module) -> int:
    """:func:`attention_weight_count` of the encoder layers' ``self_attn``, for
    NMT and RoBERTa models and bare encoders."""
    return attention_weight_count(layer.self_attn for layer in local_encoder(model).layers)


def dummy_dictionary(vocab_size: int):
    """A fairseq Dictionary of ``vocab_size`` symbols (specials included)."""
    from fairseq.data import Dictionary

    dictionary = Dictionary()
    for i in range(vocab_size - len(dictionary)):
        dictionary.add_symbol(f"w{i}")
    return dictionary


@register_model_architecture("transformer_local", "transformer_local")
def local_base_architecture(args, **attention_defaults) -> None:
    """Transformer-base (as ``transformer_wmt_en_de``); layout default all global."""
    transformer_wmt_en_de(args)
    set_attention_defaults(args, args.encoder_layers, args.encoder_attention_heads, **attention_defaults)


def register_named_archs(model: str, configs, base_architecture) -> None:
    """Register each :class:`~fairseq_local.models.archs.PaperConfig` as an
    arch of ``model``: its layout (unless ``--attn-layout`` is given) and
    its attention defaults on top of ``base_architecture``."""
    def register(cfg) -> None:
        @register_model_architecture(model, cfg.arch)
        def arch_fn(args) -> None:
            args.attn_layout = getattr(args, "attn_layout", None) or cfg.layout
            base_architecture(args, **dict(cfg.defaults))

    for cfg in configs:
        register(cfg)


register_named_archs("transformer_local", NAMED_ARCHS, local_base_architecture)


def build_encoder(arch: str, overrides: Optional[dict] = None, vocab_size: int = 64):
    """Build the encoder of a registered arch (Transformer-base unless
    overridden) over a dummy dictionary of ``vocab_size`` symbols."""
    from fairseq.models import ARCH_CONFIG_REGISTRY
    from fairseq.models.transformer import TransformerConfig, TransformerModel

    args = argparse.Namespace(**(overrides or {}))
    ARCH_CONFIG_REGISTRY[arch](args)
    cfg = TransformerConfig.from_namespace(args)
    dictionary = dummy_dictionary(vocab_size)
    embed = TransformerModel.build_embedding(args, dictionary, cfg.encoder.embed_dim)
    return LocalTransformerModel.build_encoder(cfg, dictionary, embed)


__all__ = ["LocalTransformerEncoder", "LocalTransformerEncoderLayer", "LocalTransformerModel",
           "attention_weight_count", "build_encoder", "dummy_dictionary", "encoder_attention_weight_count",
           "local_encoder", "register_named_archs"]
