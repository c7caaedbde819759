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
