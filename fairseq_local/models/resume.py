"""Refusing to continue training a checkpoint as another model.

The fixed-mask archs share their parameter names and shapes with the
all-global one, so fairseq would load a run of ``transformer_local_8lochead_all6``
into ``transformer_local_baseline`` without complaint and train on with every
head global.  Each encoder therefore saves its **signature** (arch, layout,
mask mode, and the options that define its learned and file masks) in its
state dict (``<encoder>._extra_state``), and the models compare it with their
own when fairseq loads a checkpoint to *resume* (its optimizer state is
loaded: ``checkpoint_last.pt`` of ``--save-dir``, or ``--restore-file``
without ``--reset-optimizer``).  A difference is a :class:`ResumeError`, one
line naming both sides.  Starting a new stage from another model
(``--restore-file X --reset-optimizer``, ``--finetune-from-model``) is
allowed and logged.  ``fairseq-local check-resume CKPT ARGS...``
makes the same check from a checkpoint's saved options and a fairseq-train
command line, before a script writes anything.
"""

import hashlib
import logging
import os
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ..checkpoint_compat import EXTRA_STATE
from ..errors import ResumeError
from ..attention.layout import format_layout
from ..attention.learned import LearnedMask, kinds_in
from ..attention.masks import FileMask
from ..attention.config import AttentionOptions, attention_options
from ..attention.gates import parse_decoder_gates

logger = logging.getLogger(__name__)
# Option names as a user types them, for messages.
FLAGS = {"arch": "--arch", "attn_layout": "--attn-layout", "mask_mode": "--mask-mode",
         "mask_neg": "--mask-neg", "dam_max_len": "--dam-max-len", "dam_per_layer": "--dam-per-layer",
         "dam_estimator": "--dam-estimator", "dam_no_noise": "--dam-no-noise", "gate_beta": "--gate-beta",
         "gate_gamma": "--gate-gamma", "gate_zeta": "--gate-zeta", "mask_file": "--mask-file (contents)",
         "decoder_gates": "--decoder-gates", "segment_embeddings": "--segment-embeddings",
         "layernorm_eps": "--layernorm-eps", "positions": "--positions"}


def _getter(cfg: Any):
    if isinstance(cfg, Mapping):
        return cfg.get
    return lambda name, default=None: getattr(cfg, name, default)


def _file_digest(path: Optional[str]) -> str:
    if not path:
        return "-"
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()[:16]
    except OSError:
        return f"unreadable {path}"


def model_signature(cfg: Any, options: Optional[AttentionOptions] = None) -> Dict[str, str]:
    """The options that define a model's encoder attention, as strings:
    always the arch, layout (canonical) and mask mode; BERT's options when
    set (``--segment-embeddings``, ``--layernorm-eps``, ``--positions``);
    what each learned kind adds (its options; DAM's mask length), C with learned masks, the
    decoder's gated attention types (``--decoder-gates``), the hard-concrete
    constants with gated heads, and the mask file's digest with ``file`` heads.  ``cfg`` is a
    fairseq model config (namespace, omegaconf or dict) with arch defaults
    applied; ``options`` its attention options where the caller has them
    (default: :func:`~fairseq_local.attention.config.attention_options` of ``cfg``)."""
    get = _getter(cfg)
    arch = str(get("arch", None) or get("_name", None) or "-")
    decoder_gates = ",".join(parse_decoder_gates(get("decoder_gates", None)))
    segments = {"segment_embeddings": "True"} if get("segment_embeddings", False) else {}
    if get("layernorm_eps", None) is not None:  # BERT's options, named only when set (older signatures hold)
        segments["layernorm_eps"] = repr(float(get("layernorm_eps", None)))
    if (get("positions", None) or "fairseq") != "fairseq":
        segments["positions"] = str(get("positions", None))
    if not get("attn_layout", None):
        return {"arch": arch, **({"decoder_gates": decoder_gates} if decoder_gates else {}), **segments}
    options = options if options is not None else attention_options(cfg)
    heads = [h for layer in options.layout for h in layer.heads]
    sig = {"arch": arch, "attn_layout": format_layout(options.layout), "mask_mode": options.mask_mode}
    names: List[str] = []
    for kind in kinds_in(h.mask for h in heads):
        sig.update(kind.signature(options, get))
    if any(isinstance(h.mask, LearnedMask) for h in heads):
        names.append("mask_neg")
    if decoder_gates:
        sig["decoder_gates"] = decoder_gates
    if any(h.gated for h in heads) or decoder_gates:
        names += ["gate_beta", "gate_gamma", "gate_zeta"]
    sig.update({name: str(getattr(options, name)) for name in names})
    if any(isinstance(h.mask, FileMask) for h in heads):
        sig["mask_file"] = _file_digest(get("mask_file", None))
    return {**sig, **segments}


def differences(saved: Mapping[str, str], current: Mapping[str, str]) -> List[str]:
    """``"--flag SAVED vs CURRENT"`` for every option that differs."""
    return [f"{FLAGS.get(k, k)} {saved.get(k, '-')} vs {current.get(k, '-')}"
            for k in dict.fromkeys([*saved, *current]) if saved.get(k, "-") != current.get(k, "-")]


def is_resume(run_cfg: Any) -> bool:
    """Whether fairseq-train with options ``run_cfg`` (a namespace or dict;
    None: not a training run) loads the optimizer state with the model: not
    under ``--reset-optimizer``, and not a first ``--finetune-from-model``."""
    if run_cfg is None:
        return False
    get = _getter(run_cfg)
    if get("save_dir", None) is None or get("reset_optimizer", False):
        return False
    if get("finetune_from_model", None):
        return os.path.exists(os.path.join(get("save_dir"), "checkpoint_last.pt"))
    return True


def check_resume(saved: Optional[Mapping[str, str]], current: Mapping[str, str], run_cfg: Any,
                 source: str = "the checkpoint") -> None:
    """Raise :class:`ResumeError` if a resume (:func:`is_resume`) would load
    a model with signature ``saved`` into one with ``current``; log the
    differences of a new stage.  ``saved`` None (a checkpoint from before
    signatures) is not checked."""
    if saved is None:
        return
    diff = differences(saved, current)
    if not diff:
        return
    if is_resume(run_cfg):
        raise ResumeError(f"cannot resume {source} as another model ({'; '.join(diff)}; saved vs this run): "
                          f"give the options (and mask file) it was saved with, use another --save-dir, or "
                          f"start a new stage from it with --restore-file and --reset-optimizer")
    logger.info(f"new stage from {source}: {'; '.join(diff)} (saved vs this run)")


def saved_signature(state_dict: Mapping[str, Any], prefix: str) -> Optional[Dict[str, str]]:
    """The signature an encoder at ``prefix`` saved in ``state_dict``, or None."""
    extra = state_dict.get(prefix + EXTRA_STATE)
    return dict(extra["signature"]) if isinstance(extra, Mapping) and "signature" in extra else None


def sync_learned(state_dict: dict, own: dict, prefix: str, keys: Sequence[str]) -> Tuple[int, int]:
    """Make ``state_dict``'s learned tensors (layer keys under ``prefix``
    holding one of ``keys``) those of a model whose own state is ``own``
    (unprefixed): drop the ones the model lacks, add its initial values of
    the ones the checkpoint lacks.  Returns (dropped, added)."""
    own = {prefix + k: v for k, v in own.items()}

    def learned(key: str) -> bool:
        return key.startswith(prefix + "layers.") and any(p in key for p in keys)

    dropped = [k for k in state_dict if learned(k) and k not in own]
    added = [k for k in own if learned(k) and k not in state_dict]
    for k in dropped:
        del state_dict[k]
    for k in added:
        state_dict[k] = own[k]
    if dropped or added:
        logger.info(f"checkpoint: dropped {len(dropped)} and initialised {len(added)} "
                    f"learned-mask/gate tensors that the two models do not share")
    return len(dropped), len(added)
