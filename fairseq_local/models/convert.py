"""Turn a stock fairseq RoBERTa checkpoint into one of the ``roberta_local``
architectures (``fairseq-local convert-roberta``).

Adaptive Axis Attention (Wang et al. 2022, §4) and the fine-tune-only
baselines of its Table 1 start from a *pretrained full-attention* model.  The
converted model keeps the input's dimensions, dictionary, LM head and
classification heads; only the attention changes:

* a stock layer's Wq, Wk (``self_attn.{q,k}_proj``, head h = rows
  h·d_h:(h+1)·d_h, or the legacy fused ``in_proj_weight``/``in_proj_bias``
  with q, k, v stacked on dim 0) become the Q/K groups of the layout
  (``self_attn.qk.{g}.{q,k}_proj``).  A group with several member heads
  (Q/K tying, Pande et al. §4.2/§5.4) starts from its first member's slice
  (layers in order, then heads; ``first``) or the mean of its members'
  slices (``mean``);
* Wv, Wo and every other tensor are copied unchanged;
* the learned extras that a stock model lacks (DAM logits, the AAA axis
  selector, head gates) keep their fresh initialisation.

With an all-global, untied layout the converted model computes exactly the
stock model's function.  Any stock tensor without a place in the new model,
or a tensor of the new model without a stock source, is an error.
"""

import argparse
import copy
import os
import re
from typing import Any, Dict, List, Optional, Tuple

import torch
from torch import Tensor

from ..checkpoint_compat import Checkpoint
from ..errors import InputError
from ..attention.layout import LayoutError
from ..attention.config import LEARNED_KEYS, OPTION_NAMES
from ..outputs import checkpoint_marked, save_torch

TIE_INITS = ("first", "mean")
PREFIX = "encoder.sentence_encoder"
# Learned parameters of our attention that a stock model has no counterpart for.
_IN_PROJ = re.compile(r"^(?P<attn>.*\.self_attn)\.in_proj_(?P<p>weight|bias)$")
# Top-level key of a converted checkpoint: the input's file name.  It marks
# the file as convert-roberta's output, which a re-run replaces without
# --force; fairseq ignores unknown top-level keys.
MARKER = "converted_from"
# Whether a file is a checkpoint written by :func:`convert_checkpoint`, judged
# from its pickle's strings (nothing in the file is run).
is_converted = checkpoint_marked(MARKER)


class ConversionError(InputError):
    """A checkpoint that cannot be converted (one-line message)."""


def read_stock_checkpoint(path: str) -> Tuple[Dict[str, Any], argparse.Namespace]:
    """The checkpoint dict at ``path`` and a copy of its model options.

    Raises FileNotFoundError, or :class:`ConversionError` for a file that is
    not a fairseq checkpoint of a stock RoBERTa model (fairseq's
    ``roberta``/``xlmr`` archs, not one already converted)."""
    from fairseq.models import ARCH_MODEL_REGISTRY
    from fairseq.models.roberta import RobertaModel

    from .roberta import LocalRobertaModel

    try:
        ckpt = Checkpoint.read(path, mmap=False)
    except FileNotFoundError:
        raise FileNotFoundError(f"no checkpoint '{path}'") from None
    except InputError as e:
        raise ConversionError(str(e)) from None
    arch = ckpt.arch
    if arch is None:
        raise ConversionError(f"'{path}' has no model options (cfg.model or args): not a fairseq RoBERTa checkpoint")
    model_cls = ARCH_MODEL_REGISTRY.get(arch)
    if model_cls is not None and issubclass(model_cls, LocalRobertaModel):
        raise ConversionError(f"'{path}' is already a roberta_local checkpoint (arch '{arch}'); "
                              f"convert the stock RoBERTa checkpoint it came from")
    if model_cls is None or not issubclass(model_cls, RobertaModel):
        raise ConversionError(f"'{path}' is not a stock RoBERTa checkpoint (arch '{arch}')")
    return ckpt.state, argparse.Namespace(**copy.deepcopy(ckpt.options("model")))


def normalise_stock_state(state_dict: Dict[str, Tensor]) -> Dict[str, Tensor]:
    """The stock state dict in fairseq 0.12's key names: ``decoder.`` →
    ``encoder.`` and ``emb_layer_norm`` → ``layernorm_embedding`` (as
    ``RobertaModel.upgrade_state_dict_named``), and a fused ``in_proj_*``
    split into ``{q,k,v}_proj`` (as ``MultiheadAttention.upgrade_state_dict_named``)."""
    out: Dict[str, Tensor] = {}
    for key, value in state_dict.items():
        if key.startswith("decoder."):
            key = "encoder." + key[len("decoder."):]
        key = key.replace(".emb_layer_norm.", ".layernorm_embedding.")
        match = _IN_PROJ.match(key)
        if match is None:
            out[key] = value
            continue
        if value.shape[0] % 3:
            raise ConversionError(f"'{key}' has {value.shape[0]} rows, not q, k and v stacked (a multiple of 3)")
        for name, part in zip("qkv", value.chunk(3, dim=0)):
            out[f"{match['attn']}.{name}_proj.{match['p']}"] = part
    return out


def converted_args(stock_args: argparse.Namespace, arch: str, attention: Dict[str, Any]) -> argparse.Namespace:
    """The model options of the converted model: the stock model's (so its
    dimensions), with ``arch`` and the given attention options; filled in
    and checked by the arch (a layout that does not fit the stock model's
    layers and heads raises :class:`~fairseq_local.attention.layout.LayoutError`)."""
    from fairseq.models import ARCH_CONFIG_REGISTRY, ARCH_MODEL_NAME_REGISTRY

    if ARCH_MODEL_NAME_REGISTRY.get(arch) != "roberta_local":
        raise ConversionError(f"'{arch}' is not a roberta_local arch")
    args = copy.deepcopy(stock_args)
    for name in OPTION_NAMES:
        setattr(args, name, attention.get(name))
    args.arch = args._name = arch
    try:
        ARCH_CONFIG_REGISTRY[arch](args)
    except LayoutError as e:
        raise LayoutError(f"the layout does not fit the checkpoint's {stock_args.encoder_layers} layers x "
                          f"{stock_args.encoder_attention_heads} heads: {e}") from None
    return args


def build_converted_model(args: argparse.Namespace, stock: Dict[str, Tensor]):
    """A :class:`~fairseq_local.models.roberta.LocalRobertaModel` of ``args``
    with the stock model's vocabulary size and classification heads."""
    from .roberta import build_roberta

    embed = stock.get(f"{PREFIX}.embed_tokens.weight")
    if embed is None:
        raise ConversionError(f"the checkpoint has no '{PREFIX}.embed_tokens.weight': not a RoBERTa encoder")
    model = build_roberta(args.arch, vars(copy.deepcopy(args)), vocab_size=embed.shape[0])
    for key in stock:
        match = re.fullmatch(r"classification_heads\.([^.]+)\.out_proj\.weight", key)
        if match:
            name = match[1]
            dense = stock.get(f"classification_heads.{name}.dense.weight")
            if dense is None:
                raise ConversionError(f"classification head '{name}' has no dense.weight")
            model.register_classification_head(name, num_classes=stock[key].shape[0], inner_dim=dense.shape[0])
    return model


def qk_groups(model) -> List[Tuple[List[str], List[Tuple[int, int]]]]:
    """Each Q/K group of the encoder once: the state-dict prefixes under which
    it appears (one per layer that uses it) and its member heads
    [(layer, head)], in layer order, then head order."""
    groups: Dict[int, Tuple[List[str], List[Tuple[int, int]]]] = {}
    for l, layer in enumerate(model.encoder.sentence_encoder.layers):
        attn = layer.self_attn
        for g, proj in enumerate(attn.qk):
            groups.setdefault(id(proj), ([], []))[0].append(f"{PREFIX}.layers.{l}.self_attn.qk.{g}")
        for h, g in enumerate(attn.head_to_group):
            groups[id(attn.qk[g])][1].append((l, h))
    return list(groups.values())


def convert_state(stock: Dict[str, Tensor], model, tie_init: str = "first") -> Dict[str, Tensor]:
    """The state dict of ``model`` (a ``roberta_local`` model with the stock
    model's dimensions) from the normalised stock state dict ``stock``
    (:func:`normalise_stock_state`).

    Q/K groups start from the first member head's rows of the stock
    ``{q,k}_proj`` (``tie_init="first"``) or the mean over the members
    (``"mean"``), weights and biases alike; the learned extras keep
    ``model``'s values; every other tensor is copied.  Raises
    :class:`ConversionError` for a missing, unexpected or misshapen tensor."""
    if tie_init not in TIE_INITS:
        raise ConversionError(f"--tie-init must be one of {', '.join(TIE_INITS)}, not {tie_init!r}")
    own = model.state_dict()
    attn = model.encoder.sentence_encoder.layers[0].self_attn
    head_dim, stock_rows = attn.head_dim, attn.num_heads * attn.head_dim
    out: Dict[str, Tensor] = {}
    used = set()
    missing: List[str] = []

    def source(key: str) -> Optional[Tensor]:
        if key not in stock:
            missing.append(key)
            return None
        used.add(key)
        return stock[key]

    for prefixes, members in qk_groups(model):
        for name in ("q_proj", "k_proj"):
            for p in ("weight", "bias"):
                keys = [f"{PREFIX}.layers.{l}.self_attn.{name}.{p}" for l, _ in members]
                parts = [source(key) for key in keys]
                if any(t is None for t in parts):
                    continue
                shape = (stock_rows, *own[f"{prefixes[0]}.{name}.{p}"].shape[1:])
                for key, t in zip(keys, parts):
                    if tuple(t.shape) != shape:
                        raise ConversionError(f"'{key}' has shape {tuple(t.shape)} in the checkpoint "
                                              f"but {shape} in a stock model of these dimensions")
                slices = [t[h * head_dim:(h + 1) * head_dim] for t, (_, h) in zip(parts, members)]
                value = slices[0].clone() if tie_init == "first" else \
                    torch.stack([s.float() for s in slices]).mean(0).to(slices[0].dtype)
                for prefix in prefixes:
                    out[f"{prefix}.{name}.{p}"] = value
    for key, value in own.items():
        if key in out:
            continue
        if any(k in key for k in LEARNED_KEYS):
            out[key] = value  # fresh initialisation
        elif key not in stock and (key.endswith(".version") or key.endswith("_extra_state")):
            out[key] = value  # a version buffer that older checkpoints lack, or the model's extra state
        elif (t := source(key)) is not None:
            if t.shape != value.shape:
                raise ConversionError(f"'{key}' has shape {tuple(t.shape)} in the checkpoint "
                                      f"but {tuple(value.shape)} in the converted model")
            out[key] = t
    unexpected = [k for k in stock if k not in used]
    missing = list(dict.fromkeys(missing))
    if missing:
        raise ConversionError(f"the checkpoint lacks {len(missing)} tensor(s) of the model, "
                              f"e.g. '{missing[0]}' (missing key)")
    if unexpected:
        raise ConversionError(f"the checkpoint has {len(unexpected)} tensor(s) the model has no place for, "
                              f"e.g. '{unexpected[0]}' (unexpected key)")
    return {k: out[k] for k in own}


def converted_checkpoint(state: Dict[str, Any], args: argparse.Namespace,
                         model_state: Dict[str, Tensor], source: str = "") -> Dict[str, Any]:
    """An ordinary fairseq checkpoint: the input's options (model options
    replaced by ``args``), the converted weights, a fresh training state
    (no optimizer state, update 0, epoch 1) and :data:`MARKER` (``source``,
    the input's file name)."""
    cfg = copy.deepcopy(state.get("cfg"))
    old_args = state.get("args")
    if isinstance(cfg, dict) and cfg.get("model") is not None:
        cfg["model"] = args if not isinstance(cfg["model"], dict) else dict(vars(args))
        old_args = None
    elif old_args is not None:
        old_args = args
    history = (state.get("optimizer_history") or [{}])[-1]
    return {
        "cfg": cfg,
        "args": old_args,
        "model": model_state,
        "criterion": state.get("criterion"),
        "optimizer_history": [{
            "criterion_name": history.get("criterion_name", "CrossEntropyCriterion"),
            "optimizer_name": history.get("optimizer_name", "FairseqAdam"),
            "lr_scheduler_state": {"best": None},
            "num_updates": 0,
        }],
        "task_state": state.get("task_state", {}),
        "extra_state": {"train_iterator": {"epoch": 1, "iterations_in_epoch": 0, "shuffle": True}},
        "last_optimizer_state": None,
        MARKER: source,
    }


def convert_checkpoint(in_path: str, out_path: str, arch: str, attention: Optional[Dict[str, Any]] = None,
                       tie_init: str = "first", seed: int = 1) -> Dict[str, Any]:
    """Convert the stock RoBERTa checkpoint ``in_path`` into ``arch`` (with
    the attention options ``attention``, e.g. ``{"attn_layout": ...}``) and
    write it to ``out_path`` atomically (the caller checks ``out_path`` first,
    :func:`fairseq_local.outputs.check_outputs`).  The fresh learned tensors
    are drawn with ``seed`` (torch's global generator is left as it was), so
    one input, arch and seed give the same file.  Returns a summary: arch,
    layout, layers, heads, Q/K groups, classification heads, fresh learned
    tensors."""
    state, stock_args = read_stock_checkpoint(in_path)
    stock = normalise_stock_state(state["model"])
    args = converted_args(stock_args, arch, attention or {})
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = build_converted_model(args, stock)
    new_state = convert_state(stock, model, tie_init)
    model.load_state_dict(dict(new_state), strict=True)  # as fairseq will load it
    save_torch(converted_checkpoint(state, args, new_state, os.path.basename(str(in_path))), out_path)
    return {
        "arch": arch, "layout": args.attn_layout, "layers": args.encoder_layers,
        "heads": args.encoder_attention_heads, "qk_groups": len(qk_groups(model)),
        "classification_heads": sorted(model.classification_heads.keys()),
        "fresh": sum(1 for k in new_state if any(p in k for p in LEARNED_KEYS)),
    }


__all__ = ["ConversionError", "MARKER", "TIE_INITS", "convert_checkpoint", "convert_state", "converted_args",
           "is_converted", "normalise_stock_state", "qk_groups", "read_stock_checkpoint"]
