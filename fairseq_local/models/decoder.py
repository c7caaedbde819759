"""Hard-concrete gates on the decoder's two attention types (Voita et al.
2019, §6: encoder self-attention, decoder self-attention and
encoder–decoder attention are pruned alike).

``--decoder-gates self,cross`` gives every head of every decoder layer's
self-attention (``self``) and encoder–decoder attention (``cross``) a gate
z_h (:class:`~fairseq_local.attention.gates.HeadGates`, the same ``--gate-*``
options as the encoder's ``:gate`` heads), applied to the head's output
before the output projection W_o, as in the encoder:

    MultiHead(Q, K, V) = concat_h(z_h · head_h) W_o

The attention itself is fairseq's ``MultiheadAttention``, built by the
decoder layer's own ``build_self_attention`` / ``build_encoder_attention``
hooks; :func:`gate_heads` adds the gates and a pre-hook on its ``out_proj``
that scales each head's slice of the input.  A gated module takes fairseq's
general path (the one ``_set_skip_embed_dim_check`` selects, used by
fairseq's own head pruning), which ends in ``out_proj``.  A closed gate
(z = 0) removes the head exactly: :func:`remove_heads` deletes heads with
fairseq's ``_adaptive_prune_heads`` after folding the gate values into W_o,
and the tests check that both give the same output and translation.
"""

import functools
from typing import Callable, List, Optional, Sequence, Tuple

import torch
from fairseq.distributed import fsdp_wrap
from fairseq.models.transformer import TransformerConfig, TransformerDecoderBase
from fairseq.modules import MultiheadAttention
from fairseq.modules.checkpoint_activations import checkpoint_wrapper
from fairseq.modules.transformer_layer import TransformerDecoderLayerBase
from torch import Tensor, nn

from ..attention.gates import DECODER_GATE_KINDS, HeadGates
from .resume import sync_learned

# The decoder layer attribute of each kind.
ATTRIBUTES = {"self": "self_attn", "cross": "encoder_attn"}
# State-dict key fragments of the decoder's gates (as LEARNED_KEYS for the encoder).
DECODER_GATE_KEYS = (".self_attn.gates.", ".encoder_attn.gates.")


def _gate_head_outputs(attn: MultiheadAttention, out_proj: nn.Module,
                       args: Tuple[Tensor]) -> Optional[Tuple[Tensor]]:
    """``out_proj`` pre-hook: scale head h's slice of the input (T, B, H·d_h)
    by z_h (drawn in float32, cast to the input's dtype)."""
    gates = getattr(attn, "gates", None)
    if gates is None:
        return None
    (x,) = args
    z = gates().to(x.dtype)  # (H,)
    return ((x.unflatten(-1, (attn.num_heads, attn.head_dim)) * z[:, None]).flatten(-2),)


def gate_heads(attn: MultiheadAttention, gates: HeadGates) -> MultiheadAttention:
    """Give fairseq's ``attn`` one gate per head: ``attn.gates``, applied
    to the head outputs before ``out_proj``.  Returns ``attn``."""
    if gates.log_alpha.numel() != attn.num_heads:
        raise ValueError(f"{attn.num_heads} heads need as many gates, got {gates.log_alpha.numel()}")
    attn.gates = gates
    attn._set_skip_embed_dim_check()  # the general path: it calls out_proj as a module
    attn.out_proj.register_forward_pre_hook(functools.partial(_gate_head_outputs, attn))
    return attn


@torch.no_grad()
def remove_heads(attn: MultiheadAttention) -> List[int]:
    """Delete the heads of gated ``attn`` whose evaluation-mode gate is 0,
    after folding every open gate's value into its W_o columns; the module
    then has no gates.  Deletion is fairseq's ``_adaptive_prune_heads``
    (Q, K, V rows and W_o columns).  A layer with every head closed keeps one
    head with zero W_o columns (its output is W_o's bias, as with all gates
    closed).  Returns the indices of the kept heads."""
    gates = attn.gates
    z = gates.eval_values().to(attn.out_proj.weight.dtype)
    d = attn.head_dim
    weight = attn.out_proj.weight.view(-1, attn.num_heads, d)
    weight.mul_(z[None, :, None])
    keep = [h for h in range(attn.num_heads) if float(z[h]) > 0] or [0]
    attn._adaptive_prune_heads([(h * d, (h + 1) * d) for h in keep])
    attn.gates = None
    return keep


class GatedDecoderLayer(TransformerDecoderLayerBase):
    """fairseq's decoder layer whose self-attention and/or encoder–decoder
    attention have head gates."""

    def __init__(self, cfg: TransformerConfig, kinds: Sequence[str], new_gates: Callable[[int], HeadGates],
                 no_encoder_attn: bool = False, add_bias_kv: bool = False, add_zero_attn: bool = False) -> None:
        # Plain attributes before nn.Module.__init__: the base __init__ calls the hooks.
        self._kinds, self._new_gates = tuple(kinds), new_gates
        super().__init__(cfg, no_encoder_attn, add_bias_kv, add_zero_attn)

    def _gated(self, kind: str, attn: MultiheadAttention) -> MultiheadAttention:
        return gate_heads(attn, self._new_gates(attn.num_heads)) if kind in self._kinds else attn

    def build_self_attention(self, embed_dim, cfg, add_bias_kv=False, add_zero_attn=False):
        return self._gated("self", super().build_self_attention(embed_dim, cfg, add_bias_kv, add_zero_attn))

    def build_encoder_attention(self, embed_dim, cfg):
        return self._gated("cross", super().build_encoder_attention(embed_dim, cfg))


class GatedTransformerDecoder(TransformerDecoderBase):
    """fairseq's decoder with head gates on the attention ``kinds``.

    Args:
        cfg, dictionary, embed_tokens, no_encoder_attn, output_projection: as
            fairseq's ``TransformerDecoderBase``.
        kinds: a subset of :data:`DECODER_GATE_KINDS`.
        gate_options: the attention options
            (:class:`~fairseq_local.attention.config.AttentionOptions`; its
            ``gate_init``, ``gate_beta``, ``gate_gamma``, ``gate_zeta``).
    """

    def __init__(self, cfg: TransformerConfig, dictionary, embed_tokens, kinds: Sequence[str], gate_options,
                 no_encoder_attn: bool = False, output_projection: Optional[nn.Module] = None) -> None:
        self.gate_kinds = tuple(kinds)
        opts = gate_options

        def new_gates(num_heads: int) -> HeadGates:
            return HeadGates(num_heads, init=opts.gate_init, beta=opts.gate_beta, gamma=opts.gate_gamma,
                             zeta=opts.gate_zeta, num_heads=num_heads)

        self._new_gates = new_gates
        super().__init__(cfg, dictionary, embed_tokens, no_encoder_attn=no_encoder_attn,
                         output_projection=output_projection)
        del self._new_gates

    def build_decoder_layer(self, cfg: TransformerConfig, no_encoder_attn: bool = False) -> nn.Module:
        layer = GatedDecoderLayer(cfg, self.gate_kinds, self._new_gates, no_encoder_attn)
        # As TransformerDecoderBase.build_decoder_layer.
        checkpoint = cfg.checkpoint_activations
        if checkpoint:
            layer = checkpoint_wrapper(layer, offload_to_cpu=cfg.offload_activations)
        min_params_to_wrap = cfg.min_params_to_wrap if not checkpoint else 0
        return fsdp_wrap(layer, min_num_params=min_params_to_wrap)

    def gated_attention(self) -> List[Tuple[str, int, MultiheadAttention]]:
        """(kind, 0-based layer, module) of every gated attention, in layer order."""
        out = []
        for l, layer in enumerate(self.layers):
            for kind in DECODER_GATE_KINDS:
                attn = getattr(layer, ATTRIBUTES[kind], None)
                if attn is not None and getattr(attn, "gates", None) is not None:
                    out.append((kind, l, attn))
        return out

    def head_gates(self) -> List[HeadGates]:
        """The gates of every gated attention, in layer order."""
        return [attn.gates for _, _, attn in self.gated_attention()]

    def upgrade_state_dict_named(self, state_dict, name):
        """Load checkpoints across stages: gates that the checkpoint lacks
        keep their initial values (gates fine-tuned from a trained model,
        Voita et al. 2019 §6)."""
        super().upgrade_state_dict_named(state_dict, name)
        sync_learned(state_dict, self.state_dict(), f"{name}." if name else "", DECODER_GATE_KEYS)
