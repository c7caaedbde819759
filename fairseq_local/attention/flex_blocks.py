"""FlexAttention's block tables built from the masks' offsets, not from a
(B, H, T, T) evaluation of the mask.

``create_block_mask`` evaluates the mask_mod at every (b, h, i, j), eagerly
unless compiled: (B, H, T, T) booleans and int64 temporaries per forward.
Where every head is an offset window (``lo <= j − i <= hi``, Pande et al.'s
prev/next/band/identity, ``local-k``) or global, the key blocks a query block
can reach follow from (lo, hi) and T alone: :func:`offset_block_tables` builds
them once per (windows, T, device), O(H · (T/128)²) integers, and every forward
reuses them.  Padding is not in the tables: the mask_mod (which closes over the
batch's real keys) is evaluated inside every listed block, none is marked
full, so the tables only need to cover the allowed pairs, which they do.
"""

from typing import Optional, Sequence, Tuple

import torch
from torch import Tensor

from .context import cached
from .masks import HeadMask

BLOCK = 128  # FlexAttention's default sparse block size (rows and columns)


def offset_windows(masks: Sequence[HeadMask]) -> Optional[Tuple[Optional[Tuple[int, int]], ...]]:
    """Per head, (lo, hi) of an offset window or None for a global head; None
    when some head is neither (its block tables need the mask evaluated)."""
    out = []
    for m in masks:
        if m.is_global:
            out.append(None)
        elif m.offset_window is not None:
            out.append(tuple(m.offset_window))
        else:
            return None
    return tuple(out)


@cached(maxsize=256)
def offset_block_tables(windows: Tuple[Optional[Tuple[int, int]], ...], length: int,
                        device: torch.device) -> Tuple[Tensor, Tensor]:
    """The key blocks each query block of each head reaches.

    Args:
        windows: per head, (lo, hi) or None (global), from :func:`offset_windows`.
        length: T (queries and keys).
    Returns:
        kv_num_blocks (1, H, Q) int32 and kv_indices (1, H, Q, K) int32, with
        Q = K = ceil(T / 128): head h's query block q reaches key blocks
        ``kv_indices[0, h, q, :kv_num_blocks[0, h, q]]`` (ascending), every
        block holding a pair (i, j) with lo <= j − i <= hi, 0 <= i, j < T.
    """
    blocks = -(-length // BLOCK)
    q = torch.arange(blocks)
    first_row, last_row = q * BLOCK, torch.clamp(q * BLOCK + BLOCK - 1, max=length - 1)
    firsts, lasts = [], []
    for window in windows:
        lo, hi = window if window is not None else (-length, length)
        firsts.append(torch.clamp(torch.div(first_row + lo, BLOCK, rounding_mode="floor"), 0, blocks - 1))
        lasts.append(torch.clamp(torch.div(last_row + hi, BLOCK, rounding_mode="floor"), 0, blocks - 1))
    first, last = torch.stack(firsts), torch.stack(lasts)  # (H, Q)
    count = torch.clamp(last - first + 1, min=0)
    k = torch.arange(blocks)
    indices = torch.where(k < count[..., None], first[..., None] + k, 0)  # (H, Q, K)
    return (count.to(torch.int32)[None].to(device), indices.to(torch.int32)[None].to(device))
