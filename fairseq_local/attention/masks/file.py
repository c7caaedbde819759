"""``file`` masks: fixed masks exported from a trained DAM (SparseBERT §4.3,
"two-stage"), read from ``--mask-file``."""

import os
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Dict

import torch

from ...outputs import pickled_strings as _pickled_strings
from .base import MaskSpecError, to_device
from .patterns import PositionMask, _axis

MASK_FILE_FORMAT = "fairseq-local-masks/1"


def _what_else(path: str, data: Any = None) -> str:
    """What file ``path`` is instead of a mask file, for messages: " (it is
    a fairseq checkpoint)", " (truncated, or not a torch file)", ..."""
    if data is not None:
        from ...checkpoint_compat import describe

        what = describe(data)
        return f" (it is {what})" if what else f" (a torch file holding a {type(data).__name__})"
    strings = _pickled_strings(path)
    if strings is None:
        return " (truncated, or not a torch file)"
    if "model" in strings and strings & {"cfg", "args", "optimizer_history"}:
        return " (it is a fairseq checkpoint)"
    return " (a torch file holding more than tensors)"


def check_masks(path: str, masks: Any) -> Dict[str, dict]:
    """The ``masks`` of mask file ``path``, checked: a non-empty dict of
    entries, each with a square 2-D ``matrix`` of 0/1 values and an optional
    bool ``ends`` (set to False where missing); :class:`MaskSpecError`
    naming the entry and the problem."""
    if not isinstance(masks, dict) or not masks:
        raise MaskSpecError(f"mask file '{path}' has no masks (expected a dict of 'L.H' entries)")
    for key, entry in masks.items():
        where = f"mask file '{path}', entry '{key}'"
        matrix = entry.get("matrix") if isinstance(entry, dict) else None
        if not isinstance(matrix, torch.Tensor):
            raise MaskSpecError(f"{where}: no 'matrix' tensor")
        if matrix.dim() != 2 or matrix.shape[0] != matrix.shape[1] or matrix.numel() == 0:
            raise MaskSpecError(f"{where}: matrix of shape {tuple(matrix.shape)} is not square")
        if matrix.dtype != torch.bool:
            bad = ~((matrix == 0) | (matrix == 1))
            if bad.any():
                raise MaskSpecError(f"{where}: matrix has values other than 0/1 "
                                    f"(e.g. {matrix[bad].flatten()[0].item()!r})")
        ends = entry.setdefault("ends", False)  # hand-made files may leave it out
        if not isinstance(ends, bool):
            raise MaskSpecError(f"{where}: 'ends' must be True or False, not {ends!r}")
    return masks


@lru_cache(maxsize=8)
def load_mask_file(path: str) -> Dict[str, dict]:
    """The masks of an exported mask file (``fairseq-local export``):
    ``{"L.H": {"matrix": bool (N, N), "ends": bool, ...}}``, checked
    (:func:`check_masks`); :class:`MaskSpecError` (one line) for a file that
    is missing, not a mask file (a checkpoint, truncated) or malformed."""
    if not os.path.exists(path):
        raise MaskSpecError(f"mask file '{path}' does not exist (--mask-file)")
    if os.path.isdir(path):
        raise MaskSpecError(f"mask file '{path}' is a folder (--mask-file)")
    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
    except Exception:  # not a torch file, truncated, or one that holds more than tensors
        raise MaskSpecError(f"'{path}' is not a mask file written by fairseq-local export"
                            f"{_what_else(path)}") from None
    if not isinstance(data, dict) or data.get("format") != MASK_FILE_FORMAT:
        raise MaskSpecError(f"'{path}' is not a mask file written by fairseq-local export"
                            f"{_what_else(path, data)}")
    return check_masks(path, data.get("masks"))


@dataclass(frozen=True)
class FileMask(PositionMask):
    """A fixed mask exported from a learned one (SparseBERT, §4.3 "two-stage"):
    head ``head`` of layer ``layer`` (0-based) in the mask file ``path``.

    At real length n it allows ``matrix[:n, :n]``, and with ``ends`` also the
    first and last tokens' rows and columns (as ``dam-s`` does).  Written
    ``file-L.H`` (``file`` alone in a layout means the head's own layer and
    head); the path comes from ``--mask-file``."""

    layer: int
    head: int
    path: str = ""

    def entry(self) -> dict:
        if not self.path:
            raise MaskSpecError(f"mask '{self}' needs --mask-file")
        masks = load_mask_file(self.path)
        key = f"{self.layer}.{self.head}"
        if key not in masks:
            raise MaskSpecError(f"mask file '{self.path}' has no head {key} (has {', '.join(masks)})")
        return masks[key]

    def allows(self, i, j, n):
        entry = self.entry()
        m = matrix_on(self, i.device)
        if max(i.shape[-2], j.shape[-1]) > m.shape[0]:  # the padded length: no read of n on the host
            raise MaskSpecError(
                f"a batch of {max(i.shape[-2], j.shape[-1])} positions is longer than mask {self} of "
                f"'{self.path}' ({m.shape[0]} positions)"
            )
        out = m[i.clamp(0, m.shape[0] - 1), j.clamp(0, m.shape[0] - 1)]
        if entry.get("ends", False):
            out = out | _axis(i, j, [0], [0]) | (i == n - 1) | (j == n - 1)
        return out

    def __str__(self) -> str:
        return "file" if self.layer < 0 else f"file-{self.layer}.{self.head}"


@lru_cache(maxsize=256)
def matrix_on(mask: FileMask, device: torch.device) -> torch.Tensor:
    """The mask's bool (N, N) matrix on ``device``, copied once (no copy per forward)."""
    with torch.inference_mode(False):
        return to_device(mask.entry()["matrix"].bool(), device)

