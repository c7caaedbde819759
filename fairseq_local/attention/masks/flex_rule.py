"""A fixed mask as a FlexAttention mask_mod: the mask's own rule
(:meth:`~.base.HeadMask.rule`, the one the dense path evaluates) on the
positions of a batch.

FlexAttention vmaps the mask_mod over scalar (b, h, q_idx, kv_idx) and, on
CUDA, torch.compile traces it once per layout.  So the mask_mod closes over
tensors (pos, n, and a kind's table) and constants of the mask only, never a
Python value that changes between batches (dynamo would guard on it and
recompile), and the rules are written with tensor operations only.
"""

from typing import Callable, Optional, Sequence, Tuple

import torch
from torch import Tensor

from .base import HeadMask, real_positions

MaskMod = Callable[[Tensor, Tensor, Tensor, Tensor], Tensor]  # (b, h, q_idx, kv_idx) int tensors -> bool


def mask_mod(mask: HeadMask, pos: Tensor, n: Tensor) -> MaskMod:
    """The FlexAttention mask_mod of a fixed (not learned) mask: for pos (B, T)
    long, the positions it is evaluated on (:func:`flex_positions`: real
    positions, −1 at padding, or ``arange(T)``) and n (B,) long, the real
    lengths, returns ``f(b, h, q_idx, kv_idx)`` with
    ``f(b, ·, i, j) == mask.dense(pos, pos)[b, i, j]``.  Kinds with a table
    (seeded, ``file``) build it here, once per batch, on pos's device."""
    if mask.learned:
        raise NotImplementedError(f"mask '{mask}' is learned: FlexAttention takes fixed masks only")
    rule = mask.rule(n, pos.shape[-1], pos.device)

    def mod(b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        return rule(pos[b, q_idx], pos[b, kv_idx], n[b])

    return mod


def flex_positions(masks: Sequence[HeadMask], key_padding_mask: Optional[Tensor], batch: int, length: int,
                   device: torch.device) -> Tuple[Tensor, Tensor]:
    """The positions and lengths a layer's masks are evaluated on, as the dense
    path (``LocalMultiheadAttention.fixed_mask``) takes them: padded indices
    ``arange(T)`` if every mask is relative (offsets between real tokens are
    the same, fairseq pads contiguously), else the real positions (−1 at
    padding).  Returns pos (B, T) long, contiguous either way (padding must
    not change a compiled kernel's guards), and n (B,) long, the real lengths."""
    n = (torch.full((batch,), length, dtype=torch.long, device=device) if key_padding_mask is None
         else (~key_padding_mask.to(device)).long().sum(-1))
    if key_padding_mask is None or all(m.relative for m in masks):
        return torch.arange(length, device=device).repeat(batch, 1), n
    return real_positions(key_padding_mask.to(device), length), n
