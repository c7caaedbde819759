"""Random patterns, fixed by (seed, n) and never by the batch: BigBird's random
keys, SparseBERT's random drop (§3.3), and the Longformer and BigBird
baselines of SparseBERT §4.2."""

import hashlib
from dataclasses import dataclass
from functools import lru_cache
from typing import Tuple

import torch

from .patterns import PositionMask, _axis

def _draw(seed: int, n: int, what: str, population: int, k: int, rows: int = 1) -> torch.Tensor:
    """Seeded draw: (rows, min(k, population)) long; each row holds distinct
    indices drawn uniformly from range(population).  The torch.Generator is
    seeded from (what, seed, n) alone, so equal (seed, n) give equal draws."""
    digest = hashlib.sha256(f"{what}:{seed}:{n}".encode()).digest()
    gen = torch.Generator().manual_seed(int.from_bytes(digest[:8], "little"))
    # A uniformly random permutation per row (float64 keys: ties are negligible).
    keys = torch.rand(rows, population, generator=gen, dtype=torch.float64)
    return keys.argsort(-1)[:, :k]


@lru_cache(maxsize=256)
def _matrix(mask: "SeededMask", n: int) -> torch.Tensor:
    return mask.matrix(n)


@dataclass(frozen=True)
class SeededMask(PositionMask):
    """A random mask: one (n, n) matrix per length n, fixed by (seed, n)."""

    def matrix(self, n: int) -> torch.Tensor:
        """(n, n) bool on the CPU."""
        raise NotImplementedError

    def length_table(self, n: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """The matrices of the distinct lengths in ``n`` (any shape), zero-padded
        and stacked into bool (L, m, m) on the CPU, and for each entry of ``n``
        the index of its own matrix (``n``'s shape)."""
        lengths, which = torch.unique(n, return_inverse=True)
        m = max(int(lengths.max()), 1)
        mats = torch.zeros(len(lengths), m, m, dtype=torch.bool)
        for k, length in enumerate(lengths.tolist()):
            if length > 0:
                mats[k, :length, :length] = _matrix(self, length)
        return mats, which

    def allows(self, i, j, n):
        # each sentence's own matrix: (L, m, m)[(..., 1, 1), (..., T, 1), (..., 1, S)]
        mats, which = self.length_table(n)
        m = mats.shape[-1]
        mats = mats.to(i.device)
        return mats[which, i.clamp(0, m - 1), j.clamp(0, m - 1)] & (i < n)


def _seed_suffix(seed: int) -> str:
    return f"-s{seed}" if seed else ""


@dataclass(frozen=True)
class RandomMask(SeededMask):
    """Each row i allows R distinct keys drawn uniformly from the n (every key
    if R ≥ n): BigBird's random attention (SparseBERT Fig. 1(f))."""

    count: int
    seed: int = 0

    def matrix(self, n):
        keys = _draw(self.seed, n, "random", n, self.count, rows=n)  # (n, min(R, n))
        return torch.zeros(n, n, dtype=torch.bool).scatter_(1, keys, True)

    def __str__(self) -> str:
        return f"random-{self.count}{_seed_suffix(self.seed)}"


@dataclass(frozen=True)
class RandomDropMask(SeededMask):
    """All but n entries drawn uniformly among the n², as many as ``no-diag``
    removes: SparseBERT's "randomly dropped" (SparseBERT, §3.3)."""

    seed: int = 0

    def matrix(self, n):
        drop = _draw(self.seed, n, "random-drop", n * n, n)[0]
        return torch.ones(n * n, dtype=torch.bool).index_fill_(0, drop, False).view(n, n)

    def __str__(self) -> str:
        return f"random-drop{_seed_suffix(self.seed)}"


@dataclass(frozen=True)
class LongformerMask(SeededMask):
    """|i − j| ≤ W, or i or j among G distinct positions drawn uniformly from
    the n (Longformer as in SparseBERT §4.2: window 2, two random globals)."""

    window: int
    globals: int
    seed: int = 0

    def matrix(self, n):
        pos = torch.arange(n)
        i, j = pos[:, None], pos[None, :]
        g = _draw(self.seed, n, "global", n, self.globals)[0]
        return ((j - i).abs() <= self.window) | _axis(i, j, g, g)

    def __str__(self) -> str:
        return f"longformer-{self.window}-{self.globals}{_seed_suffix(self.seed)}"


@dataclass(frozen=True)
class BigBirdMask(SeededMask):
    """``longformer-W-G`` or ``random-R`` of the same seed (BigBird without
    blocks, as in SparseBERT §4.2: window 1, global 2, random 2)."""

    window: int
    globals: int
    randoms: int
    seed: int = 0

    def matrix(self, n):
        local_global = _matrix(LongformerMask(self.window, self.globals, self.seed), n)
        return local_global | _matrix(RandomMask(self.randoms, self.seed), n)

    def __str__(self) -> str:
        return f"bigbird-{self.window}-{self.globals}-{self.randoms}{_seed_suffix(self.seed)}"

