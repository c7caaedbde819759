"""The sparsity of a mask pattern: ρ = 1 − |M|/n² of an n×n mask (SparseBERT
§3; Wang et al. (Adaptive Axis Attention) Eq. 9), with the seeds of its
random parts set or varied.  ``fairseq-local sparsity`` prints it; the
reproductions use it to match sparsities."""

import dataclasses
from typing import Optional, Union

import torch

from .base import HeadMask, OrMask
from .registry import parse_mask


def with_seed(mask: HeadMask, seed: int) -> HeadMask:
    """``mask`` with the seed of each of its random parts set to ``seed``."""
    if isinstance(mask, OrMask):
        return OrMask(tuple(with_seed(p, seed) for p in mask.parts))
    if any(f.name == "seed" for f in dataclasses.fields(mask)):
        return dataclasses.replace(mask, seed=seed)
    return mask


def is_random(mask: HeadMask) -> bool:
    """Whether ``mask`` has a random (seeded) part."""
    return with_seed(mask, 1) != with_seed(mask, 0)


def sparsity(mask: Union[HeadMask, str], n: int, seed: Optional[int] = None) -> float:
    """ρ = 1 − |M|/n² of ``mask`` (or a mask token) at length n, as a fraction
    in [0, 1]; ``seed``, if given, replaces the seed of its random parts."""
    if isinstance(mask, str):
        mask = parse_mask(mask)
    if seed is not None:
        mask = with_seed(mask, seed)
    pos = torch.arange(n)
    ones = mask.dense(pos, pos).expand(n, n).sum().item()
    return 1.0 - ones / (n * n)
