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
import types
from typing import Any, Dict, Tuple

import torch


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


def read_checkpoint(path: str) -> Tuple[Dict[str, Any], Dict[str, torch.Tensor]]:
    """A fairseq checkpoint's model options (as a dict) and its state dict,
    without building the model or its task.  Raises FileNotFoundError, or
    ValueError for a file that is not a fairseq checkpoint."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=False)
    except FileNotFoundError:
        raise
    except Exception as e:
        raise ValueError(f"cannot read checkpoint '{path}': {e}") from None
    if not isinstance(state, dict) or "model" not in state:
        raise ValueError(f"'{path}' is not a fairseq checkpoint")
    cfg = state.get("cfg") or {}
    model_cfg = cfg.get("model") if isinstance(cfg, dict) else getattr(cfg, "model", None)
    if model_cfg is None and state.get("args") is not None:
        model_cfg = state["args"]
    if model_cfg is not None and not isinstance(model_cfg, dict):
        model_cfg = dict(vars(model_cfg)) if hasattr(model_cfg, "__dict__") and not hasattr(model_cfg, "keys") \
            else {k: model_cfg[k] for k in model_cfg.keys()}
    return model_cfg or {}, state["model"]


def encoder_layers_prefix(state_dict: Dict[str, Any]) -> str:
    """Where a state dict keeps the encoder layers: ``encoder.layers.`` (the
    NMT models) or ``encoder.sentence_encoder.layers.`` (RoBERTa).  Raises
    ValueError if it has neither."""
    for prefix in ("encoder.sentence_encoder.layers.", "encoder.layers."):
        if any(key.startswith(prefix) for key in state_dict):
            return prefix
    raise ValueError("the checkpoint has no encoder layers (encoder.layers.* or encoder.sentence_encoder.layers.*)")
