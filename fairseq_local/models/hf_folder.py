"""Read a Hugging Face BERT or RoBERTa model folder for ``fairseq-local
convert-hf`` (:mod:`fairseq_local.models.convert_hf`).

A folder is ``config.json``, the weights (``model.safetensors`` or
``pytorch_model.bin``, possibly sharded with an ``*.index.json``) and the
tokenizer files (``vocab.txt`` for BERT's WordPiece; ``vocab.json`` and
``merges.txt`` for RoBERTa's byte-level BPE, or ``tokenizer.json``).  Nothing
here needs ``transformers`` and nothing contacts the hub.  Whatever cannot be
mapped exactly onto the plugin's RoBERTa is refused with one line
(:class:`HfFolderError`).
"""

import json
import os
import re
from dataclasses import dataclass
from typing import Any, Dict, List, Optional

import torch
from torch import Tensor

from .convert import ConversionError

# The transformers classes convert-hf reads (transformers has no RobertaForPreTraining).
CLASSES = {
    "bert": ("BertModel", "BertForMaskedLM", "BertForPreTraining", "BertForSequenceClassification"),
    "roberta": ("RobertaModel", "RobertaForMaskedLM", "RobertaForSequenceClassification"),
}
# transformers' hidden_act -> fairseq's --activation-fn (gelu is exact erf GELU in both).
ACTIVATIONS = {"gelu": "gelu", "relu": "relu", "gelu_new": "gelu_accurate", "gelu_pytorch_tanh": "gelu_accurate"}
# fairseq's roles (Dictionary order <s> <pad> </s> <unk>, then <mask> last) -> the tokenizer_config key.
ROLES = {"bos": "cls_token", "pad": "pad_token", "eos": "sep_token", "unk": "unk_token", "mask": "mask_token"}
DEFAULT_SPECIALS = {
    "bert": {"bos": "[CLS]", "pad": "[PAD]", "eos": "[SEP]", "unk": "[UNK]", "mask": "[MASK]"},
    "roberta": {"bos": "<s>", "pad": "<pad>", "eos": "</s>", "unk": "<unk>", "mask": "<mask>"},
}
FAIRSEQ_SYMBOLS = ("<s>", "<pad>", "</s>", "<unk>", "<mask>")


class HfFolderError(ConversionError):
    """A Hugging Face folder that cannot be converted exactly (one line)."""


@dataclass(frozen=True)
class Vocabulary:
    """The fairseq dictionary of a converted model.

    ``perm[j]`` is the Hugging Face id of fairseq id ``j`` (``<s> <pad> </s>
    <unk>``, every other token in the tokenizer's order, ``<mask>`` last);
    ``symbols`` are the dict.txt symbols of the non-special ids, i.e. what
    the model's fairseq BPE emits: WordPiece strings for BERT (fairseq's
    ``bert`` BPE), the Hugging Face id as a string for RoBERTa (fairseq's
    ``gpt2`` BPE reading the folder's vocab.json as its encoder.json)."""

    perm: List[int]
    symbols: List[str]
    lowercase: bool


def _read_json(path: str, what: str) -> Any:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (ValueError, UnicodeDecodeError) as e:
        raise HfFolderError(f"'{path}' is not a valid {what}: {e}") from None


def read_config(hf_dir: str) -> Dict[str, Any]:
    """``config.json`` of ``hf_dir``, checked: a supported class, absolute
    positions, an encoder, an activation fairseq has, at most two token types."""
    if not os.path.isdir(hf_dir):
        raise HfFolderError(f"'{hf_dir}' is not a local folder: convert-hf reads a downloaded model folder "
                            f"(e.g. huggingface-cli download NAME --local-dir DIR) and never contacts the hub")
    path = os.path.join(hf_dir, "config.json")
    if not os.path.isfile(path):
        raise HfFolderError(f"'{hf_dir}' has no config.json: not a Hugging Face model folder")
    cfg = _read_json(path, "config.json")
    kind = cfg.get("model_type") if isinstance(cfg, dict) else None
    if kind not in CLASSES:
        raise HfFolderError(f"'{hf_dir}' is a {kind!r} model, not BERT or RoBERTa (model_type in config.json)")
    archs = cfg.get("architectures") or [CLASSES[kind][0]]
    if len(archs) != 1 or archs[0] not in CLASSES[kind]:
        raise HfFolderError(f"'{hf_dir}' holds {', '.join(map(str, archs))}; convert-hf reads "
                            f"{', '.join(CLASSES[kind])}")
    cfg["_class"] = archs[0]
    # transformers 5 ignores position_embedding_type (it would run absolute positions): refuse it here.
    if cfg.get("position_embedding_type", "absolute") != "absolute":
        raise HfFolderError(f"position_embedding_type {cfg['position_embedding_type']!r} in config.json: only "
                            f"absolute positions map onto the plugin's learned positions")
    if cfg.get("is_decoder") or cfg.get("add_cross_attention"):
        raise HfFolderError("config.json sets is_decoder/add_cross_attention: a decoder, not a BERT encoder")
    act = cfg.get("hidden_act", "gelu")
    if act not in ACTIVATIONS:
        raise HfFolderError(f"hidden_act {act!r} in config.json has no fairseq --activation-fn "
                            f"({', '.join(ACTIVATIONS)} have)")
    if kind == "roberta" and act != "gelu":  # transformers' RoBERTa LM head applies exact GELU whatever hidden_act
        raise HfFolderError(f"hidden_act {act!r}: RoBERTa's LM head uses exact GELU, fairseq's the model's "
                            f"--activation-fn, so only 'gelu' converts exactly")
    for key in ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
                "max_position_embeddings", "vocab_size"):
        if not isinstance(cfg.get(key), int) or cfg[key] <= 0:
            raise HfFolderError(f"config.json has no positive integer {key}")
    if cfg["hidden_size"] % cfg["num_attention_heads"]:
        raise HfFolderError("hidden_size in config.json is not a multiple of num_attention_heads")
    if cfg.get("type_vocab_size", 2) > 2:
        raise HfFolderError(f"type_vocab_size {cfg['type_vocab_size']} in config.json: the plugin's "
                            f"--segment-embeddings has two segments")
    return cfg


def _load_file(path: str) -> Dict[str, Tensor]:
    if path.endswith(".safetensors"):
        from safetensors.torch import load_file

        try:
            return load_file(path)
        except Exception as e:  # safetensors raises its own error types for a damaged file
            raise HfFolderError(f"'{path}' cannot be read as safetensors: {str(e).splitlines()[0]}") from None
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # weights_only refuses anything but tensors; a truncated file is a RuntimeError
        raise HfFolderError(f"'{path}' cannot be read as a PyTorch state dict: {str(e).splitlines()[0]}") from None


def read_weights(hf_dir: str) -> Dict[str, Tensor]:
    """The folder's tensors in fp32, with old TF-port names (``gamma``/``beta``)
    renamed and integer buffers (``position_ids``) dropped."""
    files = None
    for name in ("model.safetensors", "pytorch_model.bin"):
        if os.path.isfile(os.path.join(hf_dir, name)):
            files = [name]
            break
        index = os.path.join(hf_dir, name + ".index.json")
        if os.path.isfile(index):
            weight_map = _read_json(index, "weight index").get("weight_map", {})
            files = sorted(set(weight_map.values()))
            break
    if not files:
        raise HfFolderError(f"'{hf_dir}' has no model.safetensors or pytorch_model.bin (missing weights)")
    out: Dict[str, Tensor] = {}
    for name in files:
        path = os.path.join(hf_dir, name)
        if not os.path.isfile(path):
            raise HfFolderError(f"'{path}', named by the weight index, does not exist (missing weights)")
        for key, value in _load_file(path).items():
            if not torch.is_floating_point(value):
                continue  # position_ids / token_type_ids buffers
            key = re.sub(r"\.gamma$", ".weight", re.sub(r"\.beta$", ".bias", key))
            out[key] = value.float()
    return out


def _specials(hf_dir: str, kind: str) -> Dict[str, str]:
    specials = dict(DEFAULT_SPECIALS[kind])
    for name in ("special_tokens_map.json", "tokenizer_config.json"):
        path = os.path.join(hf_dir, name)
        if os.path.isfile(path):
            conf = _read_json(path, name)
            for role, key in ROLES.items():
                value = conf.get(key)
                value = value.get("content") if isinstance(value, dict) else value
                if isinstance(value, str):
                    specials[role] = value
    return specials


def _tokens(hf_dir: str, kind: str) -> List[Optional[str]]:
    """The tokenizer's tokens by Hugging Face id."""
    if kind == "bert" and os.path.isfile(os.path.join(hf_dir, "vocab.txt")):
        with open(os.path.join(hf_dir, "vocab.txt"), encoding="utf-8") as f:
            return [line.rstrip("\n") for line in f]
    if kind == "roberta" and os.path.isfile(os.path.join(hf_dir, "vocab.json")):
        ids = _read_json(os.path.join(hf_dir, "vocab.json"), "vocab.json")
    elif os.path.isfile(os.path.join(hf_dir, "tokenizer.json")):
        ids = (_read_json(os.path.join(hf_dir, "tokenizer.json"), "tokenizer.json").get("model") or {}).get("vocab")
        if not isinstance(ids, dict):
            raise HfFolderError(f"'{hf_dir}/tokenizer.json' has no vocabulary (model.vocab)")
    else:
        files = "vocab.txt" if kind == "bert" else "vocab.json and merges.txt"
        raise HfFolderError(f"'{hf_dir}' has no tokenizer files ({files}, or tokenizer.json)")
    tokens: List[Optional[str]] = [None] * (max(ids.values(), default=-1) + 1)
    for token, i in ids.items():
        tokens[i] = token
    return tokens


def tokenizer_files(hf_dir: str, kind: str) -> Dict[str, bytes]:
    """The tokenizer files a converted folder holds, by name: BERT's
    vocab.txt and tokenizer_config.json; RoBERTa's vocab.json and merges.txt (written from
    tokenizer.json if the folder has only that)."""
    def read(name: str) -> Optional[bytes]:
        path = os.path.join(hf_dir, name)
        if not os.path.isfile(path):
            return None
        with open(path, "rb") as f:
            return f.read()

    if kind == "bert":  # tokenizer_config.json: do_lower_case, strip_accents (read by the WordPiece of the analyses)
        vocab = read("vocab.txt")
        if vocab is None:
            vocab = "".join(f"{t}\n" for t in _tokens(hf_dir, kind)).encode("utf-8")
        config = read("tokenizer_config.json") or b'{"do_lower_case": true}\n'
        return {"vocab.txt": vocab, "tokenizer_config.json": config}
    vocab, merges = read("vocab.json"), read("merges.txt")
    if vocab is None or merges is None:
        model = _read_json(os.path.join(hf_dir, "tokenizer.json"), "tokenizer.json").get("model") or {} \
            if os.path.isfile(os.path.join(hf_dir, "tokenizer.json")) else {}
        if not isinstance(model.get("vocab"), dict) or not isinstance(model.get("merges"), list):
            raise HfFolderError(f"'{hf_dir}' has no vocab.json and merges.txt, nor a BPE tokenizer.json")
        vocab = json.dumps(model["vocab"], ensure_ascii=False).encode("utf-8")
        pairs = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
        merges = ("#version: 0.2\n" + "".join(p + "\n" for p in pairs)).encode("utf-8")
    return {"vocab.json": vocab, "merges.txt": merges}


def vocabulary(hf_dir: str, cfg: Dict[str, Any]) -> Vocabulary:
    """The fairseq dictionary of the folder's tokenizer (see :class:`Vocabulary`)."""
    kind = cfg["model_type"]
    tokens = _tokens(hf_dir, kind)
    if len(tokens) != cfg["vocab_size"] or any(t is None for t in tokens):
        raise HfFolderError(f"the tokenizer has {len(tokens)} ids, config.json's vocab_size is "
                            f"{cfg['vocab_size']}: the embedding rows cannot be matched to tokens")
    index = {t: i for i, t in enumerate(tokens)}
    if len(index) != len(tokens):
        raise HfFolderError("the tokenizer's vocabulary holds a token twice")
    specials = _specials(hf_dir, kind)
    for role, token in specials.items():
        if token not in index:
            raise HfFolderError(f"the special token {token!r} ({role}) is not in the tokenizer's vocabulary")
    if len({specials[r] for r in specials}) != len(specials):
        raise HfFolderError("two special tokens (cls, pad, sep, unk, mask) are the same token")
    pad_id = cfg.get("pad_token_id")
    if pad_id is not None and pad_id != index[specials["pad"]]:
        raise HfFolderError(f"pad_token_id {pad_id} in config.json is not {specials['pad']!r}")
    special_ids = {index[t] for t in specials.values()}
    rest = [i for i in range(len(tokens)) if i not in special_ids]
    if kind == "bert":
        symbols = [tokens[i] for i in rest]
        for s in symbols:
            if not s or s in FAIRSEQ_SYMBOLS or any(c.isspace() for c in s):
                raise HfFolderError(f"the WordPiece token {s!r} cannot be a fairseq dictionary symbol")
    else:
        symbols = [str(i) for i in rest]
    lowercase = True
    config_path = os.path.join(hf_dir, "tokenizer_config.json")
    if kind == "bert" and os.path.isfile(config_path):
        lowercase = bool(_read_json(config_path, "tokenizer_config.json").get("do_lower_case", True))
    perm = [index[specials[r]] for r in ("bos", "pad", "eos", "unk")] + rest + [index[specials["mask"]]]
    return Vocabulary(perm=perm, symbols=symbols, lowercase=lowercase)


def position_offset(cfg: Dict[str, Any]) -> int:
    """The first row of the folder's position table that a real token reads:
    0 for BERT (position t reads row t), pad_token_id + 1 for RoBERTa (as
    fairseq's learned positions, from padding_idx + 1)."""
    return 0 if cfg["model_type"] == "bert" else cfg.get("pad_token_id", 1) + 1


def model_options(cfg: Dict[str, Any]) -> Dict[str, Any]:
    """fairseq model options with the folder's dimensions and BERT's choices
    (``--segment-embeddings``, ``--layernorm-eps``, ``--positions``)."""
    bert = cfg["model_type"] == "bert"
    hidden_dropout = cfg.get("hidden_dropout_prob", 0.1)
    return {
        "encoder_layers": cfg["num_hidden_layers"],
        "encoder_embed_dim": cfg["hidden_size"],
        "encoder_ffn_embed_dim": cfg["intermediate_size"],
        "encoder_attention_heads": cfg["num_attention_heads"],
        "max_positions": cfg["max_position_embeddings"] - position_offset(cfg),
        "activation_fn": ACTIVATIONS[cfg.get("hidden_act", "gelu")],
        "dropout": hidden_dropout,
        "attention_dropout": cfg.get("attention_probs_dropout_prob", 0.1),
        "activation_dropout": 0.0,
        "pooler_dropout": hidden_dropout if cfg.get("classifier_dropout") is None else cfg["classifier_dropout"],
        "pooler_activation_fn": "tanh",
        "encoder_learned_pos": True,
        "segment_embeddings": bert and cfg.get("type_vocab_size", 2) == 2,
        "untie_weights_roberta": not cfg.get("tie_word_embeddings", True),
        "layernorm_eps": float(cfg.get("layer_norm_eps", 1e-12 if bert else 1e-5)),
        "positions": "absolute" if bert else "fairseq",
    }


__all__ = ["CLASSES", "HfFolderError", "Vocabulary", "model_options", "position_offset", "read_config", "read_weights",
           "tokenizer_files", "vocabulary"]
