"""Checkpoints are read without running code from them.

A fairseq checkpoint is a pickle, and unpickling an arbitrary pickle can run
any code its author chose.  fairseq and the plugin only ever store tensors,
numbers, strings, containers, an ``argparse.Namespace`` (older checkpoints'
``args``), omegaconf's containers and numpy scalars or arrays.  So every
checkpoint is read with ``torch.load(weights_only=True)`` and exactly those
types allowed (:func:`allowed_globals`): this module's :func:`load` is the
plugin's reader and, through :mod:`.checkpoint_compat`, fairseq's own loader
(``fairseq-train --restore-file``, ``fairseq-generate``, ``from_pretrained``).

A checkpoint that needs anything else is refused in one line that names the
type.  Whoever trusts such a file sets ``FAIRSEQ_LOCAL_TRUST_CHECKPOINTS=1``
(``fairseq-local --trust-checkpoint`` sets it), which unpickles fully, with a
warning.
"""

import argparse
import collections
import os
import pickle
import re
import typing
from typing import Any, List

import torch

from .errors import InputError, warn_once

TRUST_ENV = "FAIRSEQ_LOCAL_TRUST_CHECKPOINTS"
_UNSUPPORTED = re.compile(r"GLOBAL ([\w.]+)")  # torch: "Unsupported global: GLOBAL x.y", "unsupported GLOBAL x.y whose module"


def trusted() -> bool:
    """Whether the user opted into full unpickling (:data:`TRUST_ENV`)."""
    return os.environ.get(TRUST_ENV, "") not in ("", "0")


def allowed_globals() -> List[Any]:
    """The types fairseq's and the plugin's checkpoints hold besides tensors
    and plain containers: what ``torch.load(weights_only=True)`` may build."""
    import numpy as np

    out: List[Any] = [argparse.Namespace, collections.defaultdict, collections.OrderedDict, dict, list, int, float,
                      str, bool, typing.Any]
    core = getattr(np, "_core", None) or np.core  # numpy 2 / 1
    out += [core.multiarray.scalar, core.multiarray._reconstruct, np.ndarray, np.dtype]
    out += [getattr(np.dtypes, n) for n in dir(getattr(np, "dtypes", None) or object) if n.endswith("DType")]
    try:
        from omegaconf import DictConfig, ListConfig, base, nodes
    except ImportError:  # pragma: no cover - fairseq installs omegaconf
        return out
    out += [DictConfig, ListConfig, base.ContainerMetadata, base.Metadata]
    out += [getattr(nodes, n) for n in ("AnyNode", "StringNode", "IntegerNode", "FloatNode", "BooleanNode",
                                         "BytesNode", "PathNode") if hasattr(nodes, n)]
    return out


def load(path: Any, **kwargs: Any) -> Any:
    """``torch.load(path, **kwargs)`` with weights_only and :func:`allowed_globals`,
    or a full unpickle where :func:`trusted`.  A file that needs another type
    raises :class:`InputError` naming it; other errors pass unchanged."""
    if trusted():
        warn_once(f"{TRUST_ENV} is set: checkpoints are unpickled in full, which runs any code a file holds")
        return torch.load(path, **{**kwargs, "weights_only": False})
    kwargs["weights_only"] = True
    try:
        with torch.serialization.safe_globals(allowed_globals()):
            return torch.load(path, **kwargs)
    except pickle.UnpicklingError as e:
        found = _UNSUPPORTED.search(str(e))
        if found is None:
            raise
        name = path if isinstance(path, (str, os.PathLike)) else "the checkpoint"
        raise InputError(f"'{name}' holds a {found.group(1)} object, which no fairseq or fairseq-local checkpoint "
                         f"holds: not loaded, since unpickling it could run code (if you trust the file: "
                         f"{TRUST_ENV}=1, or fairseq-local --trust-checkpoint)") from None
