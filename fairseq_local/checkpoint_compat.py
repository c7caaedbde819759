"""Make fairseq checkpoints load on torch >= 2.6.

torch 2.6 changed ``torch.load``'s default to ``weights_only=True``, which
refuses fairseq checkpoints: they pickle the training config (argparse /
omegaconf objects), meters and iterator state.  Every fairseq path that reads a
checkpoint (``fairseq-generate``, ``fairseq-interactive``, ``--restore-file``,
``from_pretrained``) goes through :mod:`fairseq.checkpoint_utils`; we give that
module a ``torch`` whose ``load`` defaults to ``weights_only=False``, as on
older torch.  Nothing else in the process is affected.  As always with pickled
checkpoints, load only files you trust.
"""

import functools
import os
import types
import zipfile
from typing import Any, Dict, Optional, Tuple

import torch

from .errors import InputError


class _TorchWithCheckpointLoad(types.ModuleType):
    """Proxy of the ``torch`` module whose ``load`` defaults to weights_only=False."""

    def __init__(self) -> None:
        super().__init__("torch")

    def __getattr__(self, name: str):
        return getattr(torch, name)

    @staticmethod
    @functools.wraps(torch.load)
    def load(*args, **kwargs):
        kwargs.setdefault("weights_only", False)
        return torch.load(*args, **kwargs)


def enable_fairseq_checkpoint_loading() -> None:
    """Idempotently patch :mod:`fairseq.checkpoint_utils` (see module docstring)."""
    from fairseq import checkpoint_utils

    if not isinstance(checkpoint_utils.torch, _TorchWithCheckpointLoad):
        checkpoint_utils.torch = _TorchWithCheckpointLoad()


# The keys of every record of an attention dump (see fairseq_local.analysis.dump).
DUMP_KEYS = ("tokens", "word_ids", "words", "attn")


def describe(obj: Any) -> Optional[str]:
    """What the object of a torch file is, for messages: "a fairseq
    checkpoint", "a mask file written by fairseq-local export", "an attention
    dump (fairseq-local attention dump)", or None if none of these."""
    from .attention.masks.file import MASK_FILE_FORMAT

    if isinstance(obj, dict) and obj.get("format") == MASK_FILE_FORMAT:
        return "a mask file written by fairseq-local export"
    if isinstance(obj, dict) and "model" in obj:
        return "a fairseq checkpoint"
    if isinstance(obj, list) and obj and all(isinstance(r, dict) and all(k in r for k in DUMP_KEYS) for r in obj):
        return "an attention dump (fairseq-local attention dump)"
    return None


def _first_line(e: BaseException) -> str:
    """The first sentence of ``e``'s message (torch adds paragraphs of advice)."""
    text = str(e).strip()
    return text.splitlines()[0].split(". ")[0].rstrip(".") if text else type(e).__name__


def load_torch_file(path: str, mmap: bool = False) -> Any:
    """The object in torch file ``path`` (``mmap``: tensors memory-mapped,
    where the file's format allows it).  Raises FileNotFoundError, or
    :class:`InputError` (one line) for a truncated file or one that is not a
    torch file."""
    try:
        if mmap and zipfile.is_zipfile(path):
            return torch.load(path, map_location="cpu", weights_only=False, mmap=True)
        return torch.load(path, map_location="cpu", weights_only=False)
    except FileNotFoundError:
        raise
    except IsADirectoryError:
        raise InputError(f"'{path}' is a folder, not a fairseq checkpoint") from None
    except Exception as e:
        raise InputError(f"'{path}' is not a fairseq checkpoint (truncated, or not a torch file: "
                         f"{_first_line(e)})") from None


def check_checkpoint(path: str, obj: Any) -> None:
    """:class:`InputError` naming what ``obj`` (the contents of ``path``) is,
    unless it is a fairseq checkpoint."""
    what = describe(obj)
    if what == "a fairseq checkpoint":
        return
    if what is not None:
        raise InputError(f"'{path}' is {what}, not a fairseq checkpoint")
    raise InputError(f"'{path}' is not a fairseq checkpoint (a torch file holding a "
                     f"{type(obj).__name__}{'' if not isinstance(obj, dict) else ' without a model'})")


def check_checkpoint_file(path: str) -> None:
    """:class:`InputError` (one line) unless ``path`` is a fairseq
    checkpoint: missing, truncated, not a torch file, a mask file, an
    attention dump.  Reads no tensor data."""
    if not os.path.exists(path):
        raise InputError(f"no checkpoint '{path}'")
    check_checkpoint(path, load_torch_file(path, mmap=True))


def read_checkpoint(path: str) -> Tuple[Dict[str, Any], Dict[str, torch.Tensor]]:
    """A fairseq checkpoint's model options (as a dict) and its state dict,
    without building the model or its task (only the tensors: the
    ``_extra_state`` entries are left out).  Raises FileNotFoundError, or
    :class:`InputError` (a ValueError; one line) for a file that is not a
    fairseq checkpoint: truncated, not a torch file, a mask file, a dump."""
    state = load_torch_file(path)
    check_checkpoint(path, state)
    model = state["model"]
    if isinstance(model, dict):  # without the encoders' saved signatures (fairseq_local.models.resume)
        model = {k: v for k, v in model.items() if not k.endswith("_extra_state")}
    return model_options(state), model


def model_options(state: Dict[str, Any]) -> Dict[str, Any]:
    """The model options (as a dict) of a loaded fairseq checkpoint:
    ``cfg.model``, or ``args`` for older checkpoints; {} if it has neither."""
    cfg = state.get("cfg") or {}
    model_cfg = cfg.get("model") if isinstance(cfg, dict) else getattr(cfg, "model", None)
    if model_cfg is None and state.get("args") is not None:
        model_cfg = state["args"]
    if model_cfg is not None and not isinstance(model_cfg, dict):
        model_cfg = dict(vars(model_cfg)) if hasattr(model_cfg, "__dict__") and not hasattr(model_cfg, "keys") \
            else {k: model_cfg[k] for k in model_cfg.keys()}
    return model_cfg or {}


def local_layout(path: str, model_cfg: Dict[str, Any], needs: str) -> str:
    """The ``attn_layout`` of checkpoint ``path`` (its model options
    ``model_cfg``); :class:`InputError` for a stock fairseq checkpoint, which
    has none.  ``needs``: what the command looks for ("dam-u/dam-s heads")."""
    layout = model_cfg.get("attn_layout")
    if layout:
        return str(layout)
    arch = model_cfg.get("arch") or model_cfg.get("_name") or "unknown"
    stock = "RoBERTa" if "roberta" in str(arch) else "Transformer"
    hint = ": convert it with fairseq-local convert-roberta" if stock == "RoBERTa" else ""
    raise InputError(f"'{path}' is a stock {stock} checkpoint without local attention heads "
                     f"(arch {arch}; no --attn-layout), so it has no {needs}{hint}")


def encoder_layers_prefix(state_dict: Dict[str, Any]) -> str:
    """Where a state dict keeps the encoder layers: ``encoder.layers.`` (the
    NMT models) or ``encoder.sentence_encoder.layers.`` (RoBERTa).  Raises
    ValueError if it has neither."""
    for prefix in ("encoder.sentence_encoder.layers.", "encoder.layers."):
        if any(key.startswith(prefix) for key in state_dict):
            return prefix
    raise ValueError("the checkpoint has no encoder layers (encoder.layers.* or encoder.sentence_encoder.layers.*)")
