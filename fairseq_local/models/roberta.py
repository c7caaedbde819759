"""RoBERTa (masked-LM pretraining, GLUE fine-tuning) whose encoder heads are
local, Q/K-tied or sparse.

fairseq's own encoder-swap pattern (``examples/linformer``): a
:class:`~fairseq.models.roberta.RobertaModel` subclass whose
:class:`~fairseq.models.roberta.RobertaEncoder` builds a different sentence
encoder, here the
:class:`~fairseq_local.models.transformer.LocalTransformerEncoder` of the NMT
models.  Heads, the LM head, the hub interface and the tasks
(``masked_lm``, ``sentence_prediction``) are fairseq's.

Named architectures (:mod:`fairseq_local.models.archs`): ``roberta_local_base``
and ``roberta_local_large`` (``--attn-layout``, default all global: exactly
``roberta_base``/``roberta_large``), Pande et al.'s Table 4 rows
(``roberta_band2``, ``roberta_band6``, ``roberta_band6_{all,132,120}_tied``)
and the method archs ``roberta_dam_u``, ``roberta_dam_s``, ``roberta_aaa``,
``roberta_head_gates``, ``roberta_sparse_<kind>``.
"""

import argparse
import os
from typing import Dict, Optional

import torch
from torch import nn
from fairseq.data import Dictionary
from fairseq.models import register_model, register_model_architecture
from fairseq.models.roberta import (
    RobertaEncoder,
    RobertaModel,
    roberta_base_architecture,
    roberta_large_architecture,
)
from fairseq.models.transformer import TransformerConfig
from fairseq.modules import LearnedPositionalEmbedding
from fairseq.modules.transformer_sentence_encoder import init_bert_params
from fairseq.utils import safe_hasattr

from ..errors import OptionError
from ..outputs import checkpoint_marked
from ..attention.config import add_attention_args, set_attention_defaults
from ..attention.penalties import SparsityTerms
from .archs import ROBERTA_ARCHS
from .resume import check_resume, saved_signature
from .transformer import (LocalTransformerEncoder, dummy_dictionary, local_encoder, mask_position_limits,
                          register_named_archs)


def segment_ids(tokens: torch.Tensor, eos: int) -> torch.Tensor:
    """BERT's segment of each token (Devlin et al., §3.2): 0 up to and
    including the first ``</s>``, 1 after it.  ``tokens`` (B, T) as
    fairseq's ``sentence_prediction`` joins a pair, ``<s> A </s> </s> B </s>``
    (right- or left-padded); returns (B, T) int64.  A single sentence is
    all 0 but a padded tail; a masked-LM block of several sentences is its
    first sentence (0) and the rest (1)."""
    ends = (tokens == eos).long()
    return (ends.cumsum(1) - ends).clamp(max=1)


class SegmentEmbedding(nn.Embedding):
    """The token embedding plus BERT's segment embedding (``--segment-embeddings``;
    Devlin et al., §3.2; RoBERTa has none).  The segment is read from the
    tokens (:func:`segment_ids`), so fairseq's tasks, the hub interface and
    the analyses, which call ``embed_tokens(src_tokens)``, need nothing else.
    The LM head stays tied to ``weight``, the token table."""

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx: int, eos: int) -> None:
        super().__init__(num_embeddings, embedding_dim, padding_idx)
        self.eos = eos
        self.segments = nn.Embedding(2, embedding_dim)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """(B, T) token ids -> (B, T, C) token + segment embeddings."""
        return super().forward(tokens) + self.segments(segment_ids(tokens, self.eos))


POSITIONS = ("fairseq", "absolute")
# Top-level key of a checkpoint written by convert-hf (its input folder).
HF_MARKER = "converted_from_hf"


class AbsolutePositionalEmbedding(LearnedPositionalEmbedding):
    """BERT's positions (``--positions absolute``; Devlin et al. §3.2, as
    Hugging Face's ``position_ids = arange(T)``): token t of every row is at
    position t, padding or not, read from row ``padding_idx + 1 + t`` of
    fairseq's table, so that right-padded input reads the rows that
    fairseq's positions (which count only real tokens) read."""

    def forward(self, input: torch.Tensor, incremental_state=None, positions=None) -> torch.Tensor:
        """(B, T) token ids -> (B, T, C) position embeddings."""
        index = torch.arange(input.size(1), device=input.device) + self.padding_idx + 1
        return nn.functional.embedding(index, self.weight).unsqueeze(0).expand(input.size(0), -1, -1)


class LocalRobertaEncoder(RobertaEncoder):
    """fairseq's RoBERTa encoder around a :class:`LocalTransformerEncoder`
    (``self.sentence_encoder``).  Its extra output carries the forward pass's
    attention records under ``"sparsity"``."""

    def build_embedding(self, vocab_size: int, embedding_dim: int, padding_idx: int) -> nn.Embedding:
        if getattr(self.args, "segment_embeddings", False):
            return SegmentEmbedding(vocab_size, embedding_dim, padding_idx, self.dictionary.eos())
        return super().build_embedding(vocab_size, embedding_dim, padding_idx)

    def build_encoder(self, args, dictionary, embed_tokens) -> LocalTransformerEncoder:
        encoder = LocalTransformerEncoder(TransformerConfig.from_namespace(args), dictionary, embed_tokens,
                                          model_cfg=args)
        if getattr(args, "positions", "fairseq") == "absolute":
            old = encoder.embed_positions  # same table, same state-dict key
            if not isinstance(old, LearnedPositionalEmbedding):
                raise OptionError("--positions absolute needs learned positions (--encoder-learned-pos)")
            encoder.embed_positions = AbsolutePositionalEmbedding(old.num_embeddings, old.embedding_dim,
                                                                  old.padding_idx)
        covered = min(mask_position_limits(encoder.attention_modules()), default=args.max_positions)
        block = getattr(args, "tokens_per_sample", None) if getattr(args, "task", None) == "masked_lm" else None
        if block is not None and block > covered:  # every masked-LM block would be skipped
            raise OptionError(f"the DAM/file masks cover {covered} positions, fewer than the {block} of "
                              f"--tokens-per-sample: use --dam-max-len {block}, or export the mask file "
                              f"with --n {block}")
        encoder.apply(init_bert_params)
        return encoder

    def max_positions(self) -> int:
        """fairseq's limit (``--max-positions``), lowered to the positions
        that DAM and ``file`` masks cover: fairseq skips (training) or refuses
        (validation) longer inputs, as for any model."""
        return min(self.args.max_positions, self.sentence_encoder.max_positions())

    def extract_features(self, src_tokens, return_all_hiddens: bool = False, **kwargs):
        """As :meth:`RobertaEncoder.extract_features`: features (B, T, C) and
        ``{"inner_states": [(T, B, C)] or None, "sparsity": records}``."""
        encoder_out = self.sentence_encoder(src_tokens, return_all_hiddens=return_all_hiddens,
                                            token_embeddings=kwargs.get("token_embeddings", None))
        features = encoder_out["encoder_out"][0].transpose(0, 1)
        inner_states = encoder_out["encoder_states"] if return_all_hiddens else None
        return features, {"inner_states": inner_states, "sparsity": encoder_out["sparsity"]}


@register_model("roberta_local")
class LocalRobertaModel(RobertaModel):
    """RoBERTa with a per-head local/tied/sparse self-attention."""

    def __init__(self, args, encoder: LocalRobertaEncoder) -> None:
        super().__init__(args, encoder)
        # RobertaModel.__init__ re-initialises every nn.Linear (init_bert_params);
        # each learned kind's module keeps its own initialisation.
        for attn in local_encoder(self).attention_modules():
            for g in attn.plan.learned:
                g.kind.reinit(attn.learned[g.kind.key])
        eps = getattr(args, "layernorm_eps", None)
        if eps is not None:  # every LayerNorm of the encoder and the LM head (fairseq builds them at 1e-5)
            for m in self.modules():
                if hasattr(m, "normalized_shape") and hasattr(m, "eps"):  # torch's LayerNorm or apex's fused one
                    m.eps = eps

    @staticmethod
    def add_args(parser) -> None:
        RobertaModel.add_args(parser)
        add_attention_args(parser)
        parser.add_argument("--segment-embeddings", action="store_true",
                            help="add BERT's segment embedding (0 up to the first </s>, 1 after; "
                                 "Devlin et al. §3.2) to the token embedding")
        parser.add_argument("--layernorm-eps", type=float, metavar="EPS",
                            help="epsilon of every LayerNorm (default: fairseq's 1e-5; BERT's is 1e-12)")
        parser.add_argument("--positions", choices=POSITIONS,
                            help="fairseq: a token's position counts the real tokens before it (default); "
                                 "absolute: token t is at position t, padding or not, as in BERT")

    @classmethod
    def from_pretrained(cls, model_name_or_path: str, checkpoint_file: str = "model.pt",
                        data_name_or_path: str = ".", bpe: Optional[str] = None, **kwargs):
        """fairseq's hub interface; a folder written by ``convert-hf`` reads
        its own tokenizer (vocab.txt, or vocab.json + merges.txt) where the
        folder now is, any other gets fairseq's default (``bpe="gpt2"``)."""
        defaults = hub_defaults(model_name_or_path, checkpoint_file) if bpe is None else {}
        kwargs = {**defaults, **kwargs}
        bpe = bpe or kwargs.pop("bpe", "gpt2")
        return super().from_pretrained(model_name_or_path, checkpoint_file, data_name_or_path, bpe=bpe, **kwargs)

    @classmethod
    def build_model(cls, args, task) -> "LocalRobertaModel":
        # As RobertaModel.build_model, with this model's encoder.
        local_roberta_base_architecture(args)
        if not safe_hasattr(args, "max_positions"):
            if not safe_hasattr(args, "tokens_per_sample"):
                args.tokens_per_sample = task.max_positions()
            args.max_positions = args.tokens_per_sample
        return cls(args, LocalRobertaEncoder(args, task.source_dictionary))

    def load_state_dict(self, state_dict, strict: bool = True, model_cfg=None, args=None):
        """As fairseq's, refusing to resume another model (:mod:`.resume`)."""
        check_resume(saved_signature(state_dict, "encoder.sentence_encoder."),
                     self.encoder.sentence_encoder.signature, model_cfg)
        return super().load_state_dict(state_dict, strict=strict, model_cfg=model_cfg, args=args)

    def get_sparsity_terms(self, net_output) -> SparsityTerms:
        """The encoder's sparsity terms for the forward pass that gave ``net_output``."""
        return self.encoder.sentence_encoder.sparsity_terms(net_output[1].get("sparsity", []))


def bert_options(args) -> None:
    """Defaults of the options in which BERT differs from RoBERTa
    (``--segment-embeddings``, ``--layernorm-eps``, ``--positions``), checked
    in one line (:class:`OptionError`)."""
    args.segment_embeddings = getattr(args, "segment_embeddings", False)
    args.layernorm_eps = getattr(args, "layernorm_eps", None)
    args.positions = getattr(args, "positions", None) or "fairseq"
    if args.layernorm_eps is not None and not args.layernorm_eps > 0:
        raise OptionError(f"--layernorm-eps must be > 0, not {args.layernorm_eps}")
    if args.positions not in POSITIONS:
        raise OptionError(f"--positions must be one of {', '.join(POSITIONS)}, not {args.positions!r}")


@register_model_architecture("roberta_local", "roberta_local_base")
def local_roberta_base_architecture(args, **attention_defaults) -> None:
    """BERT-base dimensions (``roberta_base``); layout default all global."""
    roberta_base_architecture(args)
    bert_options(args)
    set_attention_defaults(args, args.encoder_layers, args.encoder_attention_heads, **attention_defaults)


@register_model_architecture("roberta_local", "roberta_local_large")
def local_roberta_large_architecture(args) -> None:
    """BERT-large dimensions (``roberta_large``); layout default all global."""
    roberta_large_architecture(args)
    bert_options(args)
    set_attention_defaults(args, args.encoder_layers, args.encoder_attention_heads)


register_named_archs("roberta_local", ROBERTA_ARCHS, local_roberta_base_architecture)


def build_roberta(arch: str, overrides: Optional[dict] = None, vocab_size: int = 64,
                  dictionary: Optional[Dictionary] = None) -> RobertaModel:
    """Build a registered RoBERTa arch (ours or fairseq's, BERT-base unless
    overridden) over ``dictionary`` or a dummy one of ``vocab_size`` symbols,
    without a task."""
    from fairseq.models import ARCH_CONFIG_REGISTRY, ARCH_MODEL_REGISTRY

    args = argparse.Namespace(**(overrides or {}))
    ARCH_CONFIG_REGISTRY[arch](args)
    dictionary = dictionary if dictionary is not None else dummy_dictionary(vocab_size)
    task = argparse.Namespace(source_dictionary=dictionary, max_positions=lambda: 512)
    return ARCH_MODEL_REGISTRY[arch].build_model(args, task)


def hub_defaults(folder: str, checkpoint_file: str = "model.pt") -> Dict[str, str]:
    """fairseq hub options that load a convert-hf folder's own tokenizer
    wherever the folder now is ({} for any other folder)."""
    path = os.path.join(str(folder), checkpoint_file)
    if not os.path.isfile(path) or not checkpoint_marked(HF_MARKER)(path):
        return {}
    if os.path.isfile(os.path.join(folder, "vocab.txt")):
        return {"bpe": "bert", "bpe_vocab_file": os.path.join(folder, "vocab.txt")}
    return {"bpe": "gpt2", "gpt2_encoder_json": os.path.join(folder, "vocab.json"),
            "gpt2_vocab_bpe": os.path.join(folder, "merges.txt")}


__all__ = ["LocalRobertaEncoder", "LocalRobertaModel", "SegmentEmbedding", "build_roberta", "hub_defaults",
           "segment_ids"]
