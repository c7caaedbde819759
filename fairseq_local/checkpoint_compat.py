"""Reading fairseq checkpoints: the plugin's one reader, and fairseq's own
loader on torch >= 2.6.

:class:`Checkpoint` is how every command of the plugin reads a checkpoint
(``inspect``, ``average``, ``convert-roberta``, ``glue``, ``export``,
``gates``, ``results``, the scripts' resume check): its saved options, state
dict, update count and the signature its encoder saved, with one-line
:class:`InputError` messages for a file that is not a fairseq checkpoint.
Files found at an *output* path are never read here: they are judged from
their pickle's opcodes (:func:`fairseq_local.outputs.pickled_strings`).

torch 2.6 changed ``torch.load``'s default to ``weights_only=True``, which
refuses fairseq checkpoints as it stands: they pickle an argparse namespace
(older ones), omegaconf containers, numpy scalars.  Every fairseq path that
reads a checkpoint (``fairseq-generate``, ``fairseq-interactive``,
``--restore-file``, ``from_pretrained``) goes through
:mod:`fairseq.checkpoint_utils`; we give that module a ``torch`` whose
``load`` is :func:`fairseq_local.safe_pickle.load`: weights only, with exactly
those types allowed, so that no checkpoint runs code.  Nothing else in the
process is affected.
"""

import contextlib
import functools
import logging
import os
import re
import shutil
import types
import zipfile
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

import torch

from .errors import InputError, irregular_file


_FULL: Dict[str, Exception] = {}  # checkpoint files a full disk stopped: fairseq retries them


class _TorchWithCheckpointLoad(types.ModuleType):
    """Proxy of the ``torch`` module whose ``load`` is :func:`.safe_pickle.load`."""

    def __init__(self) -> None:
        super().__init__("torch")

    def __getattr__(self, name: str):
        return getattr(torch, name)

    @staticmethod
    def save(obj: Any, f: Any, *args: Any, **kwargs: Any) -> None:
        """``torch.save``; on a full disk the error is one line and the partial
        file (fairseq writes ``NAME.tmp``, then renames it) is removed.  Its
        descriptor then points at /dev/null, so that fairseq's close does not
        fail again, and fairseq's retries get the same error without writing."""
        from .outputs import full_disk

        name = str(getattr(f, "name", f))
        if name in _FULL:
            raise _FULL[name]
        try:
            return torch.save(obj, f, *args, **kwargs)
        except Exception as e:
            full = full_disk(name[:-len(".tmp")] if name.endswith(".tmp") else name, e)
            if full is None:
                raise
            with contextlib.suppress(OSError):
                os.unlink(name)
            with contextlib.suppress(OSError, AttributeError, ValueError):
                null = os.open(os.devnull, os.O_WRONLY)
                os.dup2(null, f.fileno())
                os.close(null)
            _FULL[name] = full
            raise full from None

    @staticmethod
    @functools.wraps(torch.load)
    def load(*args, **kwargs):
        from .safe_pickle import load

        kwargs.pop("weights_only", None)  # always weights only, unless the user trusts the files
        return load(*args, **kwargs)


def enable_fairseq_checkpoint_loading() -> None:
    """Idempotently patch :mod:`fairseq.checkpoint_utils` (see module
    docstring), and make its copies to ``checkpoint_last.pt`` and
    ``checkpoint_best.pt`` atomic (:func:`atomic_copies`)."""
    from fairseq import checkpoint_utils

    if not isinstance(checkpoint_utils.torch, _TorchWithCheckpointLoad):
        checkpoint_utils.torch = _TorchWithCheckpointLoad()
        # fairseq logs the traceback of a failed save before re-raising it; a full disk is our one line instead
        logging.getLogger(checkpoint_utils.__name__).addFilter(
            lambda record: "OutputError: cannot write" not in record.getMessage())
    atomic_copies()


def atomic_copy(src: str, dst: str, overwrite: bool = False) -> bool:
    """``shutil.copyfile`` through :func:`fairseq_local.outputs.atomic_path`
    (a temporary name beside ``dst``, then a rename; a full disk is one
    line): a kill leaves either the old ``dst`` or the new one, never a part."""
    if os.path.exists(dst) and not overwrite:
        return False
    from .outputs import atomic_path

    with atomic_path(dst) as tmp:
        shutil.copyfile(src, tmp)
    return True


def atomic_copies() -> None:
    """Idempotently give :mod:`fairseq.checkpoint_utils` a PathManager whose
    ``copy`` of local files is :func:`atomic_copy` (how fairseq writes
    ``checkpoint_last.pt`` and ``checkpoint_best.pt`` from the first name)."""
    from fairseq import checkpoint_utils
    from fairseq.file_io import PathManager

    if getattr(checkpoint_utils.PathManager, "_fairseq_local", False):
        return

    class _AtomicCopies(PathManager):
        _fairseq_local = True

        @staticmethod
        def copy(src_path: str, dst_path: str, overwrite: bool = False) -> bool:
            if "://" in src_path or "://" in dst_path:
                return PathManager.copy(src_path, dst_path, overwrite)
            return atomic_copy(src_path, dst_path, overwrite)

    checkpoint_utils.PathManager = _AtomicCopies


# The format tag of a mask file (fairseq_local.attention.masks.file) and the keys of every
# record (see fairseq_local.analysis.dump).
MASK_FILE_FORMAT = "fairseq-local-masks/1"
DUMP_KEYS = ("tokens", "word_ids", "words", "attn")
# Where the encoders save their signature (fairseq_local.models.resume):
# ``<prefix>_extra_state["signature"]``, NMT encoder first, then RoBERTa's.
ENCODER_PREFIXES = ("encoder.", "encoder.sentence_encoder.")
EXTRA_STATE = "_extra_state"


def describe(obj: Any) -> Optional[str]:
    """What the object of a torch file is, for messages: "a fairseq
    checkpoint" (a dict holding a ``model`` state dict), "a mask file written
    by fairseq-local export", "an attention dump (fairseq-local attention
    dump)", or None if none of these."""
    if isinstance(obj, dict) and obj.get("format") == MASK_FILE_FORMAT:
        return "a mask file written by fairseq-local export"
    if isinstance(obj, dict) and isinstance(obj.get("model"), dict):
        return "a fairseq checkpoint"
    if isinstance(obj, list) and obj and all(isinstance(r, dict) and all(k in r for k in DUMP_KEYS) for r in obj):
        return "an attention dump (fairseq-local attention dump)"
    return None


def _first_line(e: BaseException) -> str:
    """The first sentence of ``e``'s message (torch adds paragraphs of advice)."""
    text = str(e).strip()
    return text.splitlines()[0].split(". ")[0].rstrip(".") if text else type(e).__name__


def _load_torch_file(path: str, mmap: bool) -> Any:
    """The object in torch file ``path`` (``mmap``: tensors memory-mapped,
    where the file's format allows it).  Raises FileNotFoundError, or
    :class:`InputError` (one line) for a folder, a truncated file or one that
    is not a torch file."""
    if os.path.isdir(path):
        raise InputError(f"'{path}' is a folder, not a checkpoint")
    problem = irregular_file(path, "checkpoint")
    if problem:
        raise InputError(problem)
    from .safe_pickle import load

    try:
        if mmap and zipfile.is_zipfile(path):
            return load(path, map_location="cpu", mmap=True)
        return load(path, map_location="cpu")
    except (FileNotFoundError, InputError):
        raise
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
    holding = "a dict without a model state dict" if isinstance(obj, dict) else f"a {type(obj).__name__}"
    raise InputError(f"'{path}' is not a fairseq checkpoint (a torch file holding {holding})")


def _as_dict(section: Any) -> Dict[str, Any]:
    """A config section (dict, omegaconf object or argparse namespace) as a dict."""
    if section is None:
        return {}
    if isinstance(section, dict):
        return section
    if hasattr(section, "keys"):
        return {k: section[k] for k in section.keys()}
    return dict(vars(section))


class Checkpoint:
    """A fairseq checkpoint read from a file.

    Args:
        path: the file it was read from, for messages.
        state: the unpickled checkpoint: ``cfg`` (or ``args`` for older
            checkpoints), ``model`` (the state dict), ``optimizer_history``,
            ``extra_state``, ... as ``fairseq.checkpoint_utils`` writes it.
    """

    def __init__(self, path: str, state: Dict[str, Any]) -> None:
        self.path = str(path)
        self.state = state

    @classmethod
    def read(cls, path: Any, mmap: bool = True) -> "Checkpoint":
        """The checkpoint in file ``path``.  With ``mmap`` (zip files) no
        tensor data is read until a tensor is used.  Raises FileNotFoundError,
        or :class:`InputError` (one line) for a folder, a truncated file, a
        file that is not a torch file, or a torch file that is not a fairseq
        checkpoint (a mask file, an attention dump, ...)."""
        path = str(path)
        state = _load_torch_file(path, mmap)
        check_checkpoint(path, state)
        return cls(path, state)

    def options(self, section: str = "model") -> Dict[str, Any]:
        """The saved options of ``section`` (``model``, ``task``,
        ``criterion``, ``common``, ...) as a dict: ``cfg.SECTION``, or the
        flat ``args`` namespace of older checkpoints; {} if it has neither."""
        cfg = self.state.get("cfg")
        sec = cfg.get(section) if isinstance(cfg, dict) else getattr(cfg, section, None)
        if sec is None:
            sec = self.state.get("args")
        return _as_dict(sec)

    @property
    def arch(self) -> Optional[str]:
        """The model's arch (``arch``, or the model name ``_name``)."""
        opts = self.options("model")
        return opts.get("arch") or opts.get("_name")

    @property
    def task(self) -> Optional[str]:
        """The task's name (``_name``, or ``task`` in older checkpoints)."""
        opts = self.options("task")
        return opts.get("_name") or opts.get("task")

    @property
    def model(self) -> Dict[str, Any]:
        """The model's state dict as saved (the encoders' ``_extra_state`` included)."""
        return self.state["model"]

    def tensors(self) -> Dict[str, torch.Tensor]:
        """The model's state dict without the encoders' saved ``_extra_state``."""
        return {k: v for k, v in self.model.items() if not k.endswith(EXTRA_STATE)}

    @property
    def num_updates(self) -> int:
        """The number of updates the model was trained for (0 if not recorded)."""
        history = self.state.get("optimizer_history") or [{}]
        return int(history[-1].get("num_updates", 0) or 0)

    def signature(self) -> Optional[Dict[str, str]]:
        """The signature (arch, layout, mask options) that the encoder saved
        with its weights (:mod:`fairseq_local.models.resume`), or None for a
        checkpoint saved without one (a stock model, an older checkpoint)."""
        for prefix in ENCODER_PREFIXES:
            extra = self.model.get(prefix + EXTRA_STATE)
            if isinstance(extra, dict) and isinstance(extra.get("signature"), dict):
                return {str(k): str(v) for k, v in extra["signature"].items()}
        return None


def check_checkpoint_file(path: str) -> None:
    """:class:`InputError` (one line) unless ``path`` is a fairseq
    checkpoint: missing, truncated, not a torch file, a mask file, an
    attention dump.  Reads no tensor data."""
    if not os.path.exists(path):
        raise InputError(f"no checkpoint '{path}'")
    Checkpoint.read(path, mmap=True)


def read_checkpoint(path: str) -> Tuple[Dict[str, Any], Dict[str, torch.Tensor]]:
    """A fairseq checkpoint's model options (as a dict) and its state dict,
    without building the model or its task (only the tensors: the
    ``_extra_state`` entries are left out).  Raises FileNotFoundError, or
    :class:`InputError` (a ValueError; one line) for a file that is not a
    fairseq checkpoint: truncated, not a torch file, a mask file, a dump."""
    ckpt = Checkpoint.read(path, mmap=False)
    return ckpt.options("model"), ckpt.tensors()


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


RUN_CHECKPOINTS = ("checkpoint_best.pt", "checkpoint_last.pt")  # a run's checkpoint to describe, best first
_SELF_ATTN = re.compile(r"^encoder\.(sentence_encoder\.)?layers\.\d+\.self_attn\.")


def stored_attention_weight_count(state_dict: Dict[str, "object"]) -> int:
    """Unique ≥2-D tensors under ``encoder.layers.*.self_attn`` (RoBERTa:
    ``encoder.sentence_encoder.layers.*.self_attn``) in a state dict
    (tensors shared across layers are stored, and counted, once)."""
    seen = {}
    for key, t in state_dict.items():
        if _SELF_ATTN.match(key) and t.dim() >= 2:
            seen[(t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape))] = t.numel()
    return sum(seen.values())


def checkpoint_info(run: Path) -> Dict[str, str]:
    """The arch and the encoder attention weight count of a run's best (else
    last) checkpoint, as ``fairseq-local results`` shows them; {} without one."""
    for name in RUN_CHECKPOINTS:
        path = run / name
        if path.exists():
            try:
                model_cfg, state_dict = read_checkpoint(str(path))
                if not isinstance(state_dict, dict) or not all(hasattr(t, "dim") for t in state_dict.values()):
                    raise ValueError(f"'{path}' is not a fairseq checkpoint (its 'model' is not a state dict)")
            except ValueError as e:
                raise InputError(str(e).splitlines()[0]) from None
            arch = model_cfg.get("arch") or model_cfg.get("_name", "-")
            return {"arch": str(arch), "attn weights": f"{stored_attention_weight_count(state_dict):,}"}
    return {}


__all__ = ["Checkpoint", "DUMP_KEYS", "ENCODER_PREFIXES", "RUN_CHECKPOINTS", "check_checkpoint",
           "check_checkpoint_file", "checkpoint_info", "describe", "enable_fairseq_checkpoint_loading",
           "encoder_layers_prefix", "local_layout", "read_checkpoint", "stored_attention_weight_count"]
