"""A Hugging Face BERT or RoBERTa as one of the ``roberta_local`` archs
(``fairseq-local convert-hf``).

The folder (:mod:`~fairseq_local.models.hf_folder`) is first mapped onto the
state dict of a stock fairseq RoBERTa of the same dimensions, built with
BERT's own choices (Devlin et al. 2019, §3 and the released code):

* token-type embeddings -> ``--segment-embeddings`` (segment 0 up to the
  first ``</s>``, as ``[CLS] A [SEP] B [SEP]``); one token type (RoBERTa) is
  a constant added to every position row;
* BERT's position t reads row t; stored at row ``padding_idx + 1 + t`` and
  read with ``--positions absolute`` (0..T-1 whatever the padding);
* ``--layernorm-eps`` from ``layer_norm_eps``; GELU is exact in both;
* the pooler and classifier -> a fairseq classification head
  (dense -> tanh -> out_proj; NSP -> a two-class ``next_sentence`` head);
* the MLM head (transform, LayerNorm, tied decoder and bias);
* the vocabulary reordered to fairseq's ``<s> <pad> </s> <unk> ... <mask>``.

Then :func:`~fairseq_local.models.convert.convert_state`, as for
``convert-roberta``, fills the arch's Q/K groups and leaves the learned
extras fresh: with an all-global layout the result computes the Hugging Face
model's function exactly (tested in fp32 to 1e-5); any other layout is a new
stage.
"""

import argparse
import os
from typing import Any, Dict, List, Optional, Tuple

import torch
from torch import Tensor

from ..outputs import atomic_path, checkpoint_marked, save_torch
from .convert import build_converted_model, convert_state, converted_args, converted_checkpoint, qk_groups
from .roberta import HF_MARKER
from .hf_folder import (HfFolderError, Vocabulary, model_options, position_offset, read_config, read_weights,
                        tokenizer_files, vocabulary)

E = "encoder.sentence_encoder"
CLS_HEAD = "sentence_classification_head"  # fairseq's sentence_prediction --classification-head-name
NSP_HEAD = "next_sentence"
is_hf_converted = checkpoint_marked(HF_MARKER)
# The (Hugging Face, fairseq) names of one layer's tensors other than Wq/Wk.
LAYER_KEYS = (("attention.self.value", "self_attn.v_proj"), ("attention.output.dense", "self_attn.out_proj"),
              ("attention.output.LayerNorm", "self_attn_layer_norm"), ("intermediate.dense", "fc1"),
              ("output.dense", "fc2"), ("output.LayerNorm", "final_layer_norm"))


class _Source:
    """The folder's tensors, each taken at most once."""

    def __init__(self, weights: Dict[str, Tensor], kind: str) -> None:
        prefix = kind + "."
        self.weights = {(k[len(prefix):] if k.startswith(prefix) else k): v for k, v in weights.items()}
        self.used: set = set()

    def __contains__(self, key: str) -> bool:
        return key in self.weights

    def take(self, key: str) -> Tensor:
        if key not in self.weights:
            raise HfFolderError(f"the weights lack '{key}' (missing weight)")
        self.used.add(key)
        return self.weights[key]

    def unused(self) -> List[str]:
        return [k for k in self.weights if k not in self.used]


def stock_state(cfg: Dict[str, Any], weights: Dict[str, Tensor], vocab: Vocabulary,
                positions: int) -> Tuple[Dict[str, Tensor], List[str]]:
    """The state dict of a stock fairseq RoBERTa (``{q,k,v}_proj`` per layer,
    :func:`~fairseq_local.models.convert.normalise_stock_state`'s names) with
    ``positions`` rows of learned positions, and notes on what was dropped or
    is left fresh (no MLM head: ``encoder.lm_head.*`` other than its tied
    weight are absent here)."""
    kind, bert = cfg["model_type"], cfg["model_type"] == "bert"
    src, notes = _Source(weights, kind), []
    perm = torch.tensor(vocab.perm)
    out: Dict[str, Tensor] = {}
    word = src.take("embeddings.word_embeddings.weight")
    if word.shape[0] != len(vocab.perm):
        raise HfFolderError(f"the word embeddings have {word.shape[0]} rows, the tokenizer {len(vocab.perm)} ids")
    out[f"{E}.embed_tokens.weight"] = word[perm]
    pos, types = src.take("embeddings.position_embeddings.weight"), src.take("embeddings.token_type_embeddings.weight")
    offset = position_offset(cfg)
    table = pos.new_zeros(positions, pos.shape[1])
    rows = min(positions - 2, pos.shape[0] - offset)
    table[2:2 + rows] = pos[offset:offset + rows]  # fairseq's padding_idx is 1: real positions from row 2
    if not bert:
        table[1] = pos[offset - 1]  # the padding row
    if bert and types.shape[0] == 2:
        out[f"{E}.embed_tokens.segments.weight"] = types
    else:  # every token has type 0: a constant on every row (exact, padding row included)
        table = table + types[0]
    out[f"{E}.embed_positions.weight"] = table
    for p in ("weight", "bias"):
        out[f"{E}.layernorm_embedding.{p}"] = src.take(f"embeddings.LayerNorm.{p}")
    for layer in range(cfg["num_hidden_layers"]):
        hf, fs = f"encoder.layer.{layer}.", f"{E}.layers.{layer}."
        for p in ("weight", "bias"):
            out[f"{fs}self_attn.q_proj.{p}"] = src.take(f"{hf}attention.self.query.{p}")
            out[f"{fs}self_attn.k_proj.{p}"] = src.take(f"{hf}attention.self.key.{p}")
            for h_name, f_name in LAYER_KEYS:
                out[f"{fs}{f_name}.{p}"] = src.take(f"{hf}{h_name}.{p}")
    _mlm_head(cfg, src, out, perm, notes)
    pooler = ("pooler.dense.weight", "pooler.dense.bias")
    heads = {CLS_HEAD: ("classifier.weight", "classifier.bias"), NSP_HEAD: ("cls.seq_relationship.weight",
                                                                             "cls.seq_relationship.bias")}
    for name, (w, b) in heads.items():  # BertFor{SequenceClassification,PreTraining}: pooler + a linear layer
        if w in src:
            for part, key in zip(("dense.weight", "dense.bias", "out_proj.weight", "out_proj.bias"), (*pooler, w, b)):
                out[f"classification_heads.{name}.{part}"] = src.take(key)
    if "classifier.dense.weight" in src:  # RobertaForSequenceClassification: fairseq's own head, ported
        for part in ("dense.weight", "dense.bias", "out_proj.weight", "out_proj.bias"):
            out[f"classification_heads.{CLS_HEAD}.{part}"] = src.take(f"classifier.{part}")
    if all(k in src for k in pooler) and not any(k in src.used for k in pooler):
        src.used.update(pooler)
        notes.append("the pooler (no classifier on it) is not kept: a classification head starts fresh")
    unused = src.unused()
    if unused:
        raise HfFolderError(f"the weights hold {len(unused)} tensor(s) with no place in a {cfg['_class']}, "
                            f"e.g. '{unused[0]}'")
    return out, notes


def _mlm_head(cfg: Dict[str, Any], src: _Source, out: Dict[str, Tensor], perm: Tensor, notes: List[str]) -> None:
    """The MLM head's tensors into ``out``: transform, LayerNorm, bias and
    decoder (the word embeddings when tied), rows in fairseq's order."""
    bert = cfg["model_type"] == "bert"
    head = "cls.predictions." if bert else "lm_head."
    tied = cfg.get("tie_word_embeddings", True)
    if head + "bias" not in src and head + "decoder.bias" not in src:
        notes.append("no MLM head in the folder: encoder.lm_head starts fresh (its decoder stays tied)")
        if tied:
            out["encoder.lm_head.weight"] = out[f"{E}.embed_tokens.weight"]
        return
    inner = head + ("transform." if bert else "")
    for part, name in (("dense", "dense"), ("layer_norm", "LayerNorm" if bert else "layer_norm")):
        for p in ("weight", "bias"):
            out[f"encoder.lm_head.{part}.{p}"] = src.take(f"{inner}{name}.{p}")
    biases = [src.take(k) for k in (head + "bias", head + "decoder.bias") if k in src]
    if len(biases) == 2 and not torch.equal(*biases):
        raise HfFolderError(f"'{head}bias' and '{head}decoder.bias' differ (transformers ties them)")
    out["encoder.lm_head.bias"] = biases[0][perm]
    decoder = head + "decoder.weight"
    if tied:
        if decoder in src:
            src.take(decoder)  # transformers reads the word embeddings instead
        out["encoder.lm_head.weight"] = out[f"{E}.embed_tokens.weight"]
    else:
        out["encoder.lm_head.weight"] = src.take(decoder)[perm]


def convert_hf_model(hf_dir: str, arch: str = "roberta_local_base", attention: Optional[Dict[str, Any]] = None,
                     tie_init: str = "first", seed: int = 1):
    """The folder's model as a :class:`~fairseq_local.models.roberta.LocalRobertaModel`
    of ``arch`` with the attention options ``attention``.  Returns (model,
    its options, :class:`~fairseq_local.models.hf_folder.Vocabulary`, the
    folder's config, notes).  The learned extras are drawn with ``seed``."""
    cfg = read_config(hf_dir)
    vocab = vocabulary(hf_dir, cfg)
    weights = read_weights(hf_dir)
    options = model_options(cfg)
    args = converted_args(argparse.Namespace(**options), arch, attention or {})
    stock, notes = stock_state(cfg, weights, vocab, positions=args.max_positions + 2)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = build_converted_model(args, stock)
    for key, value in model.state_dict().items():
        if key.startswith("encoder.lm_head.") and key not in stock:
            stock[key] = value  # no MLM head in the folder: fresh
    state = convert_state(stock, model, tie_init)
    model.load_state_dict(state, strict=True)
    return model, args, vocab, cfg, notes


def checkpoint_options(args: argparse.Namespace, cfg: Dict[str, Any], vocab: Vocabulary,
                       out_dir: str) -> argparse.Namespace:
    """The options saved with the model: the model's, the ``masked_lm``
    task's and the fairseq BPE that reads the folder's tokenizer (``bert``
    over vocab.txt; ``gpt2`` over vocab.json and merges.txt, which are
    GPT-2's encoder.json and vocab.bpe formats)."""
    saved = argparse.Namespace(**{k: v for k, v in vars(args).items() if k != "_name"})  # flat args: no section name
    saved.task, saved.criterion, saved.data = "masked_lm", "masked_lm", os.path.abspath(out_dir)
    saved.tokens_per_sample = args.max_positions
    if cfg["model_type"] == "bert":
        saved.bpe, saved.bpe_cased = "bert", not vocab.lowercase
        saved.bpe_vocab_file = os.path.abspath(os.path.join(out_dir, "vocab.txt"))
    else:
        saved.bpe = "gpt2"
        saved.gpt2_encoder_json = os.path.abspath(os.path.join(out_dir, "vocab.json"))
        saved.gpt2_vocab_bpe = os.path.abspath(os.path.join(out_dir, "merges.txt"))
    return saved


def folder_files(hf_dir: str, cfg: Dict[str, Any], vocab: Vocabulary) -> Dict[str, bytes]:
    """The converted folder's files other than model.pt: dict.txt (counts are
    1: a Hugging Face folder has no frequencies) and the tokenizer."""
    files = dict(tokenizer_files(hf_dir, cfg["model_type"]))
    files["dict.txt"] = "".join(f"{s} 1\n" for s in vocab.symbols).encode("utf-8")
    return files


def write_folder(out_dir: str, files: Dict[str, bytes], checkpoint: Dict[str, Any]) -> None:
    """Write ``files`` and then ``OUT_DIR/model.pt``, each atomically (the
    caller checked them, :func:`fairseq_local.outputs.check_outputs`)."""
    for name, data in files.items():
        with atomic_path(os.path.join(out_dir, name)) as tmp:
            tmp.write_bytes(data)
    save_torch(checkpoint, os.path.join(out_dir, "model.pt"))


def hf_checkpoint(model, saved: argparse.Namespace, hf_dir: str) -> Dict[str, Any]:
    """A fairseq checkpoint of ``model`` (fresh training state), marked with
    :data:`HF_MARKER`, its options in fairseq's ``cfg`` layout (as
    fairseq-train saves them: its BPE section is kept by the hub loader)."""
    import logging

    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from omegaconf import OmegaConf

    hydra = logging.getLogger("hydra")
    level = hydra.level
    hydra.setLevel(logging.WARNING)  # fairseq's imports set the root logger to DEBUG
    try:
        cfg = OmegaConf.to_container(convert_namespace_to_omegaconf(saved), resolve=True, enum_to_str=True)
    finally:
        hydra.setLevel(level)
    state = {"cfg": cfg, "optimizer_history": [{"criterion_name": "MaskedLmLoss", "optimizer_name": "FairseqAdam"}]}
    checkpoint = converted_checkpoint(state, saved, model.state_dict(), os.path.basename(os.path.normpath(hf_dir)))
    checkpoint[HF_MARKER] = os.path.abspath(hf_dir)
    return checkpoint


def summary(model, args: argparse.Namespace, cfg: Dict[str, Any]) -> Dict[str, Any]:
    """What was converted, for the command's report."""
    return {"class": cfg["_class"], "arch": args.arch, "layout": args.attn_layout, "layers": args.encoder_layers,
            "heads": args.encoder_attention_heads, "qk_groups": len(qk_groups(model)),
            "classification_heads": sorted(model.classification_heads.keys()),
            "vocab": model.encoder.sentence_encoder.embed_tokens.weight.shape[0]}


__all__ = ["CLS_HEAD", "HF_MARKER", "NSP_HEAD", "checkpoint_options", "convert_hf_model", "folder_files",
           "hf_checkpoint", "is_hf_converted", "stock_state", "summary", "write_folder"]
