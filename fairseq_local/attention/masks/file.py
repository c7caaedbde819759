"""``file`` masks: fixed masks exported from a trained DAM (SparseBERT §4.3,
"two-stage"), read from ``--mask-file``; and the mask-file format itself, its
writer (:func:`write_mask_file`, used by ``fairseq-local export``) beside its
reader (:func:`load_mask_file`)."""

import os
import re
from dataclasses import dataclass
from typing import Any, Dict, List, Union

import torch

from ..context import cached
from ...checkpoint_compat import MASK_FILE_FORMAT, describe
from ...errors import irregular_file
from ...outputs import pickled_strings as _pickled_strings
from .base import HeadMask, Length, MaskSpecError, Rule, TableMask, to_device
from .registry import MAX_LAYER_HEAD, bounded, register_mask_kind


def _what_else(path: str, data: Any = None) -> str:
    """What file ``path`` is instead of a mask file, for messages: " (it is
    a fairseq checkpoint)", " (truncated, or not a torch file)", ..."""
    if data is not None:
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


@cached(maxsize=8)
def load_mask_file(path: str) -> Dict[str, dict]:
    """The masks of an exported mask file (``fairseq-local export``):
    ``{"L.H": {"matrix": bool (N, N), "ends": bool, ...}}``, checked
    (:func:`check_masks`); :class:`MaskSpecError` (one line) for a file that
    is missing, not a mask file (a checkpoint, truncated) or malformed."""
    if not os.path.exists(path):
        raise MaskSpecError(f"mask file '{path}' does not exist (--mask-file)")
    if os.path.isdir(path):
        raise MaskSpecError(f"mask file '{path}' is a folder (--mask-file)")
    problem = irregular_file(path, "mask file")
    if problem:
        raise MaskSpecError(f"{problem} (--mask-file)")
    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
    except Exception:  # not a torch file, truncated, or one that holds more than tensors
        raise MaskSpecError(f"'{path}' is not a mask file written by fairseq-local export"
                            f"{_what_else(path)}") from None
    if not isinstance(data, dict) or data.get("format") != MASK_FILE_FORMAT:
        raise MaskSpecError(f"'{path}' is not a mask file written by fairseq-local export"
                            f"{_what_else(path, data)}")
    return check_masks(path, data.get("masks"))


def write_mask_file(path: Union[str, os.PathLike], masks: Dict[str, dict], **info: Any) -> None:
    """Write the mask file that :func:`load_mask_file` reads: ``masks``,
    ``{"L.H": {"matrix": bool (N, N), "ends": bool, ...}}`` (0-based layer
    and head), checked first (:func:`check_masks`), under the format tag
    :data:`MASK_FILE_FORMAT`; ``info``: what else the file records
    (``fairseq-local export``: the stage-2 ``layout``, the ``checkpoint``,
    the export ``method``)."""
    clash = {"format", "masks"} & set(info)
    if clash:
        raise ValueError(f"a mask file's {sorted(clash)} cannot be given as info")
    torch.save({"format": MASK_FILE_FORMAT, "masks": check_masks(path, masks), **info}, path)


@register_mask_kind("file", "file[-L.H]")
@dataclass(frozen=True)
class FileMask(TableMask):
    """A fixed mask exported from a learned one (SparseBERT, §4.3 "two-stage"):
    head ``head`` of layer ``layer`` (0-based) in the mask file ``path``.

    At real length n it allows ``matrix[:n, :n]``, and with ``ends`` also the
    first and last tokens' rows and columns (as ``dam-s`` does).  Written
    ``file-L.H`` (``file`` alone in a layout means the head's own layer and
    head); the path comes from ``--mask-file``."""

    layer: int
    head: int
    path: str = ""

    @classmethod
    def from_params(cls, kind: str, params: List[str]) -> HeadMask:
        if not params:  # resolved to the head's own layer and head by the layout
            return cls(-1, -1)
        if len(params) != 1 or not re.fullmatch(r"[0-9]+\.[0-9]+", params[0]):
            raise MaskSpecError("takes a layer.head pair, as in 'file-0.3'")
        layer, head = params[0].split(".")
        return cls(bounded(layer, "L", 0, MAX_LAYER_HEAD - 1), bounded(head, "H", 0, MAX_LAYER_HEAD - 1))

    def entry(self) -> dict:
        if not self.path:
            raise MaskSpecError(f"mask '{self}' needs --mask-file")
        masks = load_mask_file(self.path)
        key = f"{self.layer}.{self.head}"
        if key not in masks:
            raise MaskSpecError(f"mask file '{self.path}' has no head {key} (has {', '.join(masks)})")
        return masks[key]

    def bind(self, n: Length, size: int, device: torch.device) -> Rule:
        """matrix[i, j], with ``ends`` also i or j first or last (n − 1), for
        positions below ``size``.  A batch padded to more positions than the
        matrix has is refused by its padded length (no sentence length is read)."""
        ends = bool(self.entry()["ends"])
        table = matrix_on(self, torch.device(device))
        last = table.shape[0] - 1
        if size > table.shape[0]:
            raise MaskSpecError(f"a batch of {size} positions is longer than mask {self} of '{self.path}' "
                                f"({table.shape[0]} positions)")

        def from_file(i, j, n):
            out = table[i.clamp(0, last), j.clamp(0, last)]
            if ends:  # a constant of the file
                out = out | (i == 0) | (j == 0) | (i == n - 1) | (j == n - 1)
            return out

        return from_file

    def __str__(self) -> str:
        return "file" if self.layer < 0 else f"file-{self.layer}.{self.head}"


@cached(maxsize=256)
def matrix_on(mask: FileMask, device: torch.device) -> torch.Tensor:
    """The mask's bool (N, N) matrix on ``device``, copied once (no copy per forward)."""
    with torch.inference_mode(False):
        return to_device(mask.entry()["matrix"].bool(), device)

