"""Random patterns, fixed by the seed and the positions alone: BigBird's random
keys, SparseBERT's random drop (§3.3), the Longformer and BigBird baselines of
SparseBERT §4.2, and Wang et al.'s random pattern (Adaptive Axis Attention §2.2).

SparseBERT draws its random patterns once, as one n×n mask at its length
n = 128 (§3.1.1; "the fixed value (128) in Shi et al.", Wang et al. §4.1 at Eq. 9),
and a pair (i, j) is kept or dropped whatever the sentence.  So here: each
kind's random part is one :data:`SPAN`×:data:`SPAN` tile, drawn once per
(kind, parameters, seed); a sentence of n tokens takes the top-left n×n block
of that tile repeated periodically, ``tile[i mod SPAN, j mod SPAN]``.  The
pattern of a shorter sentence is the top-left block of a longer one's.

Each definition (R keys per row, n entries dropped, G global positions, 2N·R
positions) holds exactly at n = SPAN.  A shorter sentence keeps those of the
tile's entries that fall inside it: a row of ``random-R`` keeps the keys among
its R that are < n (R·n/128 on average), ``random-drop`` drops the tile's
entries inside n×n (n²/128 on average), ``longformer`` keeps the global
positions < n.  A longer one repeats the tile: at n = k·128 a row of
``random-R`` has k·R keys and ``longformer`` k·G global positions, i.e. the
density of the tile.  The window of ``longformer`` and ``bigbird`` is the
offset rule |i − j| ≤ W at every length, not part of the tile.

The rule reads one constant (SPAN, SPAN) bool table per (mask, device), so no
length is read back to the host and FlexAttention's mask_mod closes over a
tensor of one shape.
"""

import hashlib
from dataclasses import dataclass
from typing import List, Optional

import torch

from ..context import cached
from .base import HeadMask, Length, Rule, TableMask, to_device
from .registry import int_params, no_params, register_mask_kind, seed_param

SPAN = 128  # the tile's side: SparseBERT's n (§3.1.1, §3.3: "128 entries", n = 128)


def _draw(seed: int, what: str, population: int, k: int, rows: int = 1) -> torch.Tensor:
    """Seeded draw: (rows, min(k, population)) long; each row holds distinct
    indices drawn uniformly from range(population).  The torch.Generator is
    seeded from (what, seed, SPAN) alone, so equal seeds give equal draws."""
    digest = hashlib.sha256(f"{what}:{seed}:{SPAN}".encode()).digest()
    gen = torch.Generator().manual_seed(int.from_bytes(digest[:8], "little"))
    # A uniformly random permutation per row (float64 keys: ties are negligible).
    keys = torch.rand(rows, population, generator=gen, dtype=torch.float64)
    return keys.argsort(-1)[:, :k]


@cached(maxsize=256)
def _tile(mask: "SeededMask") -> torch.Tensor:
    return mask.draw_tile()


@cached(maxsize=256)
def _tile_on(mask: "SeededMask", device: torch.device) -> torch.Tensor:
    with torch.inference_mode(False):  # usable by autograd later, whichever mode built it
        return to_device(_tile(mask), device)


@dataclass(frozen=True)
class SeededMask(TableMask):
    """A random mask: the periodic repetition of one (SPAN, SPAN) tile drawn
    from the seed (:meth:`draw_tile`), OR an offset window (:meth:`band`)."""

    def draw_tile(self) -> torch.Tensor:
        """The random part: (SPAN, SPAN) bool on the CPU."""
        raise NotImplementedError

    def band(self) -> Optional[int]:
        """W when the mask also allows |i − j| ≤ W at every length, else None."""
        return None

    def tile(self) -> torch.Tensor:
        """:meth:`draw_tile`, drawn once per mask: (SPAN, SPAN) bool on the CPU."""
        return _tile(self)

    def matrix(self, n: int) -> torch.Tensor:
        """(n, n) bool on the CPU: the mask of a sentence of n tokens."""
        pos = torch.arange(n)
        return self.dense(pos, pos).expand(n, n)

    def bind(self, n: Length, size: int, device: torch.device) -> Rule:
        """tile[i mod SPAN, j mod SPAN] (OR the window), for i, j < n: the same
        rule at every length and on every device, from one table per device."""
        table = _tile_on(self, torch.device(device))  # bool (SPAN, SPAN)
        w = self.band()

        def periodic(i, j, n):
            s = table.shape[0]  # a size, not a closed-over int: no guard on it
            allowed = table[i % s, j % s]
            if w is not None:
                allowed = allowed | ((j - i).abs() <= w)
            return allowed & (i < n) & (j < n)

        return periodic


def _seed_suffix(seed: int) -> str:
    return f"-s{seed}" if seed else ""


@register_mask_kind("random", "random-R[-sSEED]")
@dataclass(frozen=True)
class RandomMask(SeededMask):
    """Each row i of the tile allows R distinct keys drawn uniformly from the
    SPAN (every key if R ≥ SPAN): BigBird's random attention (SparseBERT
    Fig. 1(f)).  R·SPAN positions, Wang et al.'s size R/2 (§2.2)."""

    count: int
    seed: int = 0

    @classmethod
    def from_params(cls, kind: str, params: List[str]) -> HeadMask:
        """``R[-sSEED]``: the size R (>= 1) and the seed."""
        params, seed = seed_param(params)
        (r,) = int_params(params, ("R", 1))
        return cls(r, seed)

    def draw_tile(self):
        keys = _draw(self.seed, "random", SPAN, self.count, rows=SPAN)  # (SPAN, min(R, SPAN))
        return torch.zeros(SPAN, SPAN, dtype=torch.bool).scatter_(1, keys, True)

    def __str__(self) -> str:
        return f"random-{self.count}{_seed_suffix(self.seed)}"


@register_mask_kind("random-wang", "random-wang-R[-sSEED]")
@dataclass(frozen=True)
class RandomWangMask(SeededMask):
    """2·R·SPAN distinct entries of the tile drawn uniformly among its SPAN²
    (every entry if R ≥ SPAN/2): a random pattern of size R as Wang et al.
    define it, "the number of positions selected divided by 2N" (Adaptive Axis
    Attention §2.2, "Random Patterns"), at N = SPAN."""

    size: int
    seed: int = 0

    from_params = classmethod(RandomMask.from_params.__func__)  # the same parameters: R[-sSEED]

    def draw_tile(self):
        keep = _draw(self.seed, "random-wang", SPAN * SPAN, 2 * self.size * SPAN)[0]
        return torch.zeros(SPAN * SPAN, dtype=torch.bool).index_fill_(0, keep, True).view(SPAN, SPAN)

    def __str__(self) -> str:
        return f"random-wang-{self.size}{_seed_suffix(self.seed)}"


@register_mask_kind("random-drop", "random-drop[-sSEED]")
@dataclass(frozen=True)
class RandomDropMask(SeededMask):
    """All but SPAN entries of the tile drawn uniformly among its SPAN², as
    many as ``no-diag`` removes at n = SPAN: SparseBERT's "randomly dropped"
    (SparseBERT §3.3: "the same number (128) of entries")."""

    seed: int = 0

    @classmethod
    def from_params(cls, kind: str, params: List[str]) -> HeadMask:
        params, seed = seed_param(params)
        no_params(kind, params)
        return cls(seed)

    def draw_tile(self):
        drop = _draw(self.seed, "random-drop", SPAN * SPAN, SPAN)[0]
        return torch.ones(SPAN * SPAN, dtype=torch.bool).index_fill_(0, drop, False).view(SPAN, SPAN)

    def __str__(self) -> str:
        return f"random-drop{_seed_suffix(self.seed)}"


@register_mask_kind("longformer", "longformer-W-G[-sSEED]")
@dataclass(frozen=True)
class LongformerMask(SeededMask):
    """|i − j| ≤ W, or i or j among G distinct positions of the tile drawn
    uniformly from the SPAN (Longformer as in SparseBERT §4.2: window 2, two
    random globals)."""

    window: int
    globals: int
    seed: int = 0

    @classmethod
    def from_params(cls, kind: str, params: List[str]) -> HeadMask:
        params, seed = seed_param(params)
        return cls(*int_params(params, ("W", 0), ("G", 1)), seed=seed)

    def band(self):
        return self.window

    def draw_tile(self):
        pos = torch.arange(SPAN)
        g = _draw(self.seed, "global", SPAN, self.globals)[0]
        return torch.isin(pos[:, None], g) | torch.isin(pos[None, :], g)

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

    def band(self):
        return self.window

    def draw_tile(self):
        return LongformerMask(self.window, self.globals, self.seed).tile() | RandomMask(self.randoms, self.seed).tile()

    def __str__(self) -> str:
        return f"bigbird-{self.window}-{self.globals}-{self.randoms}{_seed_suffix(self.seed)}"
