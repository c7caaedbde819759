"""Random patterns, fixed by (seed, n) and never by the batch: BigBird's random
keys, SparseBERT's random drop (§3.3), and the Longformer and BigBird
baselines of SparseBERT §4.2.

Each sentence gets the matrix of its own length n.  Off the CPU, for padded
lengths up to :data:`SYNC_FREE_MAX_LEN`, the matrices of *every* length
0..m (m: the padded length rounded up to a power of two) sit in one
bit-packed table on the device, built once per (mask, m, device) and
indexed by n itself: no device value is read back to the host.  Longer
inputs, and the CPU (where a host read stalls nothing), take the matrices of
the batch's distinct lengths (``torch.unique``, ``.tolist()``: a host
synchronisation on a GPU, once per seeded head per forward).
"""

import hashlib
from dataclasses import dataclass
from functools import lru_cache
from typing import Optional, Tuple

import numpy as np
import torch

from .base import to_device
from .patterns import PositionMask, _axis

# The longest padded length whose every-length table is kept on a device: m = 512 takes
# 16.8 MB (bit-packed) and a one-time build of ~6 s per mask on a 2-core CPU (all 512
# draws; random-2 and random-drop are the slowest), once per power-of-two bucket.
SYNC_FREE_MAX_LEN = 512

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


def _bucket(size: int) -> int:
    """The table size for padded length ``size``: a power of two, at least 8."""
    return max(8, 1 << max(0, size - 1).bit_length())


@lru_cache(maxsize=16)
def _packed_cpu(mask: "SeededMask", m: int) -> torch.Tensor:
    """uint8 (m + 1, m·m/8): bit i·m + j of row n is matrix(n)[i, j] (0 outside n×n)."""
    table = np.zeros((m + 1, m * m // 8), dtype=np.uint8)
    full = np.zeros((m, m), dtype=bool)
    for n in range(1, m + 1):
        full[:n, :n] = mask.matrix(n).numpy()
        table[n] = np.packbits(full.reshape(-1), bitorder="little")  # bit k of byte b: entry 8b + k
    return torch.from_numpy(table)


@lru_cache(maxsize=32)
def _packed(mask: "SeededMask", m: int, device: torch.device) -> torch.Tensor:
    with torch.inference_mode(False):  # usable by autograd later, whichever mode built it
        return to_device(_packed_cpu(mask, m), device)


@dataclass(frozen=True)
class SeededMask(PositionMask):
    """A random mask: one (n, n) matrix per length n, fixed by (seed, n)."""

    def matrix(self, n: int) -> torch.Tensor:
        """(n, n) bool on the CPU."""
        raise NotImplementedError

    def length_table(self, n: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """The matrices of the distinct lengths in ``n`` (any shape), zero-padded
        and stacked into bool (L, m, m) on the CPU, and for each entry of ``n``
        the index of its own matrix (``n``'s shape).  Reads ``n`` on the host
        (a synchronisation on a GPU): see :meth:`sync_free_table`."""
        lengths, which = torch.unique(n, return_inverse=True)
        m = max(int(lengths.max()), 1)
        mats = torch.zeros(len(lengths), m, m, dtype=torch.bool)
        for k, length in enumerate(lengths.tolist()):
            if length > 0:
                mats[k, :length, :length] = _matrix(self, length)
        return mats, which

    def sync_free_table(self, size: int, device: torch.device) -> Optional[Tuple[torch.Tensor, int]]:
        """(table, m) holding the matrices of every length 0..m, m >= ``size``
        (see :meth:`lookup`), built once per (mask, m, device); None when
        ``size`` > :data:`SYNC_FREE_MAX_LEN`.  ``size``: a host int (a shape)."""
        m = _bucket(size)
        return None if m > SYNC_FREE_MAX_LEN else (_packed(self, m, torch.device(device)), m)

    @staticmethod
    def lookup(table: torch.Tensor, m: int, i: torch.Tensor, j: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
        """matrix(n)[i, j] from a :meth:`sync_free_table`, broadcasting i, j, n
        (long, on the table's device; i, j < m, n <= m); False outside n×n."""
        idx = i.clamp(0, m - 1) * m + j.clamp(0, m - 1)
        byte = table[n.clamp(0, m), idx >> 3]
        return ((byte.to(torch.int32) >> (idx & 7)) & 1).bool()

    def allows(self, i, j, n):
        """i (..., T, 1), j (..., 1, S), n (..., 1, 1), positions and n at most
        max(T, S) (as :meth:`dense` gives them) -> bool (..., T, S)."""
        if i.device.type != "cpu" and i.dim() >= 2 and j.dim() >= 1:
            table = self.sync_free_table(max(i.shape[-2], j.shape[-1]), i.device)
            if table is not None:  # no host read
                return self.lookup(*table, i, j, n) & (i < n)
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

