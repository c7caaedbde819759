"""``file`` masks: fixed masks exported from a trained DAM (SparseBERT §4.3,
"two-stage"), read from ``--mask-file``."""

from dataclasses import dataclass
from functools import lru_cache
from typing import Dict

import torch

from .base import MaskSpecError, to_device
from .patterns import PositionMask, _axis

MASK_FILE_FORMAT = "fairseq-local-masks/1"


@lru_cache(maxsize=8)
def load_mask_file(path: str) -> Dict[str, dict]:
    """The masks of an exported mask file (``python -m fairseq_local.cli.export``):
    ``{"L.H": {"matrix": bool (N, N), "ends": bool, ...}}``."""
    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise MaskSpecError(f"mask file '{path}' does not exist (--mask-file)") from None
    except Exception as e:  # not a torch file, or not ours
        raise MaskSpecError(f"cannot read mask file '{path}': {e}") from None
    if not isinstance(data, dict) or data.get("format") != MASK_FILE_FORMAT:
        raise MaskSpecError(f"'{path}' is not a mask file written by fairseq_local.cli.export")
    return data["masks"]


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
        if entry["ends"]:
            out = out | _axis(i, j, [0], [0]) | (i == n - 1) | (j == n - 1)
        return out

    def __str__(self) -> str:
        return f"file-{self.layer}.{self.head}"


@lru_cache(maxsize=256)
def matrix_on(mask: FileMask, device: torch.device) -> torch.Tensor:
    """The mask's bool (N, N) matrix on ``device``, copied once (no copy per forward)."""
    with torch.inference_mode(False):
        return to_device(mask.entry()["matrix"].bool(), device)

