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
from typing import List, Optional, Tuple

import numpy as np
import torch

from ..context import cached
from .base import HeadMask, Length, Rule, TableMask, to_device
from .registry import int_params, no_params, register_mask_kind, seed_param

# The longest padded length whose every-length table is kept on a device: m = 512 takes
# 16.8 MB (bit-packed) and a one-time build of ~6 s per mask on a 2-core CPU (all 512
# draws; random-2 and random-drop are the slowest), once per power-of-two bucket.
SYNC_FREE_MAX_LEN = 512
HOST_READS_ARE_FREE = ("cpu",)  # device types where a seeded rule may read the lengths on the host


def _draw(seed: int, n: int, what: str, population: int, k: int, rows: int = 1) -> torch.Tensor:
    """Seeded draw: (rows, min(k, population)) long; each row holds distinct
    indices drawn uniformly from range(population).  The torch.Generator is
    seeded from (what, seed, n) alone, so equal (seed, n) give equal draws."""
    digest = hashlib.sha256(f"{what}:{seed}:{n}".encode()).digest()
    gen = torch.Generator().manual_seed(int.from_bytes(digest[:8], "little"))
    # A uniformly random permutation per row (float64 keys: ties are negligible).
    keys = torch.rand(rows, population, generator=gen, dtype=torch.float64)
    return keys.argsort(-1)[:, :k]


@cached(maxsize=256)
def _matrix(mask: "SeededMask", n: int) -> torch.Tensor:
    return mask.matrix(n)


def _bucket(size: int) -> int:
    """The table size for padded length ``size``: a power of two, at least 8."""
    return max(8, 1 << max(0, size - 1).bit_length())


@cached(maxsize=16)
def _packed_cpu(mask: "SeededMask", m: int) -> torch.Tensor:
    """uint8 (m + 1, m·m/8): bit i·m + j of row n is matrix(n)[i, j] (0 outside n×n)."""
    table = np.zeros((m + 1, m * m // 8), dtype=np.uint8)
    full = np.zeros((m, m), dtype=bool)
    for n in range(1, m + 1):
        full[:n, :n] = mask.matrix(n).numpy()
        table[n] = np.packbits(full.reshape(-1), bitorder="little")  # bit k of byte b: entry 8b + k
    return torch.from_numpy(table)


@cached(maxsize=32)
def _packed(mask: "SeededMask", m: int, device: torch.device) -> torch.Tensor:
    with torch.inference_mode(False):  # usable by autograd later, whichever mode built it
        return to_device(_packed_cpu(mask, m), device)


@dataclass(frozen=True)
class SeededMask(TableMask):
    """A random mask: one (n, n) matrix per length n, fixed by (seed, n)."""

    def matrix(self, n: int) -> torch.Tensor:
        """(n, n) bool on the CPU."""
        raise NotImplementedError

    def length_table(self, n: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """The matrices of the distinct lengths in ``n`` (any shape), zero-padded
        and stacked into bool (L, m, m) on the CPU, and long (max(n) + 1,) on
        n's device: at each of those lengths the index of its matrix.  Reads
        ``n`` on the host (a synchronisation on a GPU): see :meth:`sync_free_table`."""
        lengths = torch.unique(n)
        m = max(int(lengths.max()), 1)
        mats = torch.zeros(len(lengths), m, m, dtype=torch.bool)
        for k, length in enumerate(lengths.tolist()):
            if length > 0:
                mats[k, :length, :length] = _matrix(self, length)
        index = torch.zeros(int(lengths.max()) + 1, dtype=torch.long, device=n.device)
        index[lengths] = torch.arange(len(lengths), device=n.device)
        return mats, index

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

    def bind(self, n: Length, size: int, device: torch.device) -> Rule:
        """matrix(n)[i, j] for positions and lengths at most ``size``.  Off the
        devices of :data:`HOST_READS_ARE_FREE`, from the bit-packed table of
        every length (indexed by n itself: no host read); there, or past
        :data:`SYNC_FREE_MAX_LEN`, from the matrices of the batch's distinct
        lengths (:meth:`length_table`, which reads n)."""
        device = torch.device(device)
        packed = None if device.type in HOST_READS_ARE_FREE else self.sync_free_table(size, device)
        if packed is not None:
            table = packed[0]  # uint8 (m + 1, m·m/8)

            def from_every_length(i, j, n):
                return self.lookup(table, table.shape[0] - 1, i, j, n) & (i < n)  # m from a shape: no guard on it

            return from_every_length
        mats, index = self.length_table(n)  # (L, m, m), (max(n) + 1,)
        mats = mats.to(device)

        def from_batch_lengths(i, j, n):
            m = mats.shape[-1]  # a size, not a closed-over int: no guard on it
            return mats[index[n], i.clamp(0, m - 1), j.clamp(0, m - 1)] & (i < n)

        return from_batch_lengths


def _seed_suffix(seed: int) -> str:
    return f"-s{seed}" if seed else ""


@register_mask_kind("random", "random-R[-sSEED]")
@dataclass(frozen=True)
class RandomMask(SeededMask):
    """Each row i allows R distinct keys drawn uniformly from the n (every key
    if R ≥ n): BigBird's random attention (SparseBERT Fig. 1(f))."""

    count: int
    seed: int = 0

    @classmethod
    def from_params(cls, kind: str, params: List[str]) -> HeadMask:
        params, seed = seed_param(params)
        (r,) = int_params(params, ("R", 1))
        return cls(r, seed)

    def matrix(self, n):
        keys = _draw(self.seed, n, "random", n, self.count, rows=n)  # (n, min(R, n))
        return torch.zeros(n, n, dtype=torch.bool).scatter_(1, keys, True)

    def __str__(self) -> str:
        return f"random-{self.count}{_seed_suffix(self.seed)}"


@register_mask_kind("random-drop", "random-drop[-sSEED]")
@dataclass(frozen=True)
class RandomDropMask(SeededMask):
    """All but n entries drawn uniformly among the n², as many as ``no-diag``
    removes: SparseBERT's "randomly dropped" (SparseBERT, §3.3)."""

    seed: int = 0

    @classmethod
    def from_params(cls, kind: str, params: List[str]) -> HeadMask:
        params, seed = seed_param(params)
        no_params(kind, params)
        return cls(seed)

    def matrix(self, n):
        drop = _draw(self.seed, n, "random-drop", n * n, n)[0]
        return torch.ones(n * n, dtype=torch.bool).index_fill_(0, drop, False).view(n, n)

    def __str__(self) -> str:
        return f"random-drop{_seed_suffix(self.seed)}"


@register_mask_kind("longformer", "longformer-W-G[-sSEED]")
@dataclass(frozen=True)
class LongformerMask(SeededMask):
    """|i − j| ≤ W, or i or j among G distinct positions drawn uniformly from
    the n (Longformer as in SparseBERT §4.2: window 2, two random globals)."""

    window: int
    globals: int
    seed: int = 0

    @classmethod
    def from_params(cls, kind: str, params: List[str]) -> HeadMask:
        params, seed = seed_param(params)
        return cls(*int_params(params, ("W", 0), ("G", 1)), seed=seed)

    def matrix(self, n):
        pos = torch.arange(n)
        i, j = pos[:, None], pos[None, :]
        g = _draw(self.seed, n, "global", n, self.globals)[0]
        return ((j - i).abs() <= self.window) | torch.isin(i, g) | torch.isin(j, g)

    def __str__(self) -> str:
        return f"longformer-{self.window}-{self.globals}{_seed_suffix(self.seed)}"


@register_mask_kind("bigbird", "bigbird-W-G-R[-sSEED]")
@dataclass(frozen=True)
class BigBirdMask(SeededMask):
    """``longformer-W-G`` or ``random-R`` of the same seed (BigBird without
    blocks, as in SparseBERT §4.2: window 1, global 2, random 2)."""

    window: int
    globals: int
    randoms: int
    seed: int = 0

    @classmethod
    def from_params(cls, kind: str, params: List[str]) -> HeadMask:
        params, seed = seed_param(params)
        return cls(*int_params(params, ("W", 0), ("G", 1), ("R", 1)), seed=seed)

    def matrix(self, n):
        local_global = _matrix(LongformerMask(self.window, self.globals, self.seed), n)
        return local_global | _matrix(RandomMask(self.randoms, self.seed), n)

    def __str__(self) -> str:
        return f"bigbird-{self.window}-{self.globals}-{self.randoms}{_seed_suffix(self.seed)}"

