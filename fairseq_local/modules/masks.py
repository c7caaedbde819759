"""Per-head attention masks, kept as data.

A head's mask is a small frozen object (its kind and parameters), not an n×n
tensor: the dense matrix is materialised only on demand, so that windowed fast
paths can read the parameters directly.

Positions count *real* tokens from 0 (padding excluded).  For a query at
position i and a key at position j, the offset is ``d = j − i``.  The local
kinds of Pande et al. (seed 000, §4.1) are:

=============  =====================================  ==================
kind           allowed keys for query i               allowed offsets d
=============  =====================================  ==================
``global``     every key (no mask)                    all
``identity``   j = i                                  {0}
``prev-k``     j = i − k (the token k positions back) {−k}
``next-k``     j = i + k (the token k positions on)   {+k}
``band-k``     |i − j| ≤ k                            [−k, k]
=============  =====================================  ==================

The paper's text states ``prev-k`` as ``j − i = k``, which contradicts the
names; we use the meanings above (prev looks back, next looks ahead).

The fixed sparse patterns of SparseBERT (seed 001, §3.3, §4.2, Table 3) and of
seed 004 (§2.2, Eq. 5–8).  n is the sentence's real length; positions are
0-based (seed 004 counts rows and columns from 1):

==========================  ===================================================
kind                        allowed (i, j)
==========================  ===================================================
``local-W``                 |i − j| ≤ W, W ≥ 0 (seed 004's local pattern)
``global-G``                i < G or j < G (the first G rows and columns), G ≥ 1
``axis-ROWS-COLS``          i ∈ ROWS or j ∈ COLS (seed 004, Eq. 7); a set is
                            '.'-separated integers ≥ 0 or '_' (empty)
``diagonal-O1.O2...``       |i − j| ∈ {O1, O2, ...} (seed 004, Eq. 6)
``random-R[-sSEED]``        j among R distinct keys of row i, drawn uniformly
                            from the n keys (every key if R ≥ n)
``no-diag``                 i ≠ j (SparseBERT §3.3)
``random-drop[-sSEED]``     all but n entries drawn uniformly among the n²
                            (as many as ``no-diag`` removes; SparseBERT §3.3)
``star``                    |i − j| ≤ 1 or i = 0 or j = 0
``logsparse``               i = j or |i − j| = 2^k for some k ≥ 0
``strided-L``               |i − j| ≤ L or (i − j) mod L = 0, L ≥ 1
``fixed-L-C``               ⌊i/L⌋ = ⌊j/L⌋ or j mod L ≥ L − C, L ≥ 1, 0 ≤ C ≤ L
``longformer-W-G[-sSEED]``  |i − j| ≤ W, or i or j in G distinct positions drawn
                            uniformly from the n (SparseBERT §4.2: W=2, G=2)
``bigbird-W-G-R[-sSEED]``   ``longformer-W-G-sSEED`` or ``random-R-sSEED``
                            (SparseBERT §4.2: W=1, G=2, R=2)
``A+B+...``                 the union of the parts (seed 004, Eq. 8)
==========================  ===================================================

``global`` alone still means no mask.  ``local``, ``diagonal``, ``no-diag``,
``logsparse`` and ``strided`` depend on j − i only (:attr:`HeadMask.relative`;
``A+B+...`` is relative iff all its parts are, and global iff any part is); the
others depend on the positions themselves (pad positions −1 are never
allowed), and the random ones on n: their
draws are fixed by (SEED, n) (SEED defaults to 0), never by the batch.  A
``bigbird`` mask draws the same global positions as the ``longformer`` mask and
the same keys as the ``random`` mask of its seed.

New kinds are added with :func:`register_mask_kind`.
"""

import hashlib
import re
from dataclasses import dataclass
from functools import lru_cache, reduce
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import torch


class MaskSpecError(ValueError):
    """A mask token that cannot be parsed (unknown kind or bad parameter)."""


@dataclass(frozen=True)
class HeadMask:
    """Base class of a head's mask.  Subclasses are frozen dataclasses."""

    @property
    def is_global(self) -> bool:
        """True when the head sees every key (no mask at all)."""
        return False

    @property
    def learned(self) -> bool:
        """True for learned kinds (``dam-u``, ``dam-s``, ``aaa``): the pattern
        comes from parameters of the attention layer, not from :meth:`dense`."""
        return False

    @property
    def relative(self) -> bool:
        """True when the mask depends on the offset j − i only.

        Such a mask is the same for every sentence of a batch (fairseq pads
        contiguously, so offsets between real tokens do not change with
        padding) and is built once per (T, S)."""
        return False

    def dense(self, pos_q: torch.Tensor, pos_k: torch.Tensor) -> torch.Tensor:
        """Dense boolean mask.

        Args:
            pos_q: (B, T) or (T,) long, real-token position of each query.
            pos_k: (B, S) or (S,) long, real-token position of each key.
        Returns:
            bool tensor broadcastable to (B, T, S); True = may attend.
        """
        raise NotImplementedError

    def __str__(self) -> str:
        raise NotImplementedError


@dataclass(frozen=True)
class GlobalMask(HeadMask):
    """No mask: the head attends to every real token."""

    @property
    def is_global(self) -> bool:
        return True

    @property
    def relative(self) -> bool:
        return True

    def dense(self, pos_q: torch.Tensor, pos_k: torch.Tensor) -> torch.Tensor:
        return torch.ones(
            pos_q.shape + pos_k.shape[-1:], dtype=torch.bool, device=pos_q.device
        )

    def __str__(self) -> str:
        return "global"


@dataclass(frozen=True)
class RelativeMask(HeadMask):
    """A mask given by a rule on the offset ``d = j − i`` alone."""

    @property
    def relative(self) -> bool:
        return True

    def dense(self, pos_q: torch.Tensor, pos_k: torch.Tensor) -> torch.Tensor:
        return self.allows(pos_k.unsqueeze(-2) - pos_q.unsqueeze(-1))  # d: (..., T, S)

    def allows(self, d: torch.Tensor) -> torch.Tensor:
        """Bool of d's shape: whether the offset d = j − i is allowed."""
        raise NotImplementedError


@dataclass(frozen=True)
class OffsetMask(RelativeMask):
    """Allows the offsets ``lo <= j − i <= hi`` (seed 000, §4.1).

    ``identity`` is (0, 0), ``prev-k`` is (−k, −k), ``next-k`` is (k, k),
    ``band-k`` and ``local-k`` are (−k, k).  ``name`` is the kind it was
    written as."""

    name: str
    lo: int
    hi: int

    def allows(self, d: torch.Tensor) -> torch.Tensor:
        return (d >= self.lo) & (d <= self.hi)

    def __str__(self) -> str:
        if self.name == "identity":
            return "identity"
        k = self.hi if self.name != "prev" else -self.lo
        return f"{self.name}-{k}"


# ---------------------------------------------------------------------------
# Fixed sparse patterns (SparseBERT, seed 001 §3.3, §4.2, Table 3; seed 004,
# §2.2, Eq. 5–8).  The relative ones are rules on d = j − i; the others are
# rules on the positions (i, j) and, for the random ones, the length n.


@dataclass(frozen=True)
class DiagonalMask(RelativeMask):
    """|i − j| ∈ ``offsets`` (seed 004, Eq. 6); offsets are kept sorted, unique."""

    offsets: Tuple[int, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "offsets", tuple(sorted(set(self.offsets))))

    def allows(self, d: torch.Tensor) -> torch.Tensor:
        return torch.isin(d.abs(), torch.tensor(self.offsets, dtype=torch.long, device=d.device))

    def __str__(self) -> str:
        return f"diagonal-{_fmt_set(self.offsets)}"


@dataclass(frozen=True)
class NoDiagMask(RelativeMask):
    """i ≠ j: SparseBERT's "no diag-attention" (seed 001, §3.3)."""

    def allows(self, d: torch.Tensor) -> torch.Tensor:
        return d != 0

    def __str__(self) -> str:
        return "no-diag"


@dataclass(frozen=True)
class LogSparseMask(RelativeMask):
    """i = j or |i − j| = 2^k, k ≥ 0 (LogSparse, seed 001 Fig. 1(b), made symmetric)."""

    def allows(self, d: torch.Tensor) -> torch.Tensor:
        a = d.abs()
        return (a & (a - 1)) == 0  # true for a = 0 and for the powers of two

    def __str__(self) -> str:
        return "logsparse"


@dataclass(frozen=True)
class StridedMask(RelativeMask):
    """|i − j| ≤ L or (i − j) mod L = 0 (Sparse Transformer, seed 001 Fig. 1(c))."""

    stride: int

    def allows(self, d: torch.Tensor) -> torch.Tensor:
        a = d.abs()
        return (a <= self.stride) | (a % self.stride == 0)

    def __str__(self) -> str:
        return f"strided-{self.stride}"


@dataclass(frozen=True)
class PositionMask(HeadMask):
    """A mask given by a rule on the real-token positions (i, j) and length n.

    Not relative: built per batch from the (B, T) positions of
    :func:`real_positions`.  Pad positions (−1) are never allowed."""

    def dense(self, pos_q: torch.Tensor, pos_k: torch.Tensor) -> torch.Tensor:
        """pos_q (B, T), pos_k (B, S) -> (B, T, S); or (T,), (S,) -> (T, S).

        n, the sentence's real length, is max(pos_k) + 1 per sentence."""
        i, j = pos_q.unsqueeze(-1), pos_k.unsqueeze(-2)  # (..., T, 1), (..., 1, S)
        n = pos_k.amax(-1, keepdim=True).unsqueeze(-1) + 1  # (..., 1, 1)
        return self.allows(i, j, n) & (i >= 0) & (j >= 0)

    def allows(self, i: torch.Tensor, j: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
        """i (..., T, 1), j (..., 1, S), n (..., 1, 1) -> bool (..., T, S)."""
        raise NotImplementedError


def _axis(i: torch.Tensor, j: torch.Tensor, rows, cols) -> torch.Tensor:
    """i ∈ rows or j ∈ cols (seed 004, Eq. 7): the rows and columns of a
    position set.  ``rows``/``cols``: int sequences or 1-D long tensors."""
    rows = torch.as_tensor(rows, dtype=torch.long, device=i.device)
    cols = torch.as_tensor(cols, dtype=torch.long, device=j.device)
    return torch.isin(i, rows) | torch.isin(j, cols)


@dataclass(frozen=True)
class GlobalTokensMask(PositionMask):
    """i < G or j < G: the first G tokens' rows and columns (seed 004, §2.2)."""

    count: int

    def allows(self, i, j, n):
        return _axis(i, j, range(self.count), range(self.count))

    def __str__(self) -> str:
        return f"global-{self.count}"


@dataclass(frozen=True)
class AxisMask(PositionMask):
    """i ∈ rows or j ∈ cols (seed 004, Eq. 7); sets are kept sorted, unique."""

    rows: Tuple[int, ...]
    cols: Tuple[int, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "rows", tuple(sorted(set(self.rows))))
        object.__setattr__(self, "cols", tuple(sorted(set(self.cols))))

    def allows(self, i, j, n):
        return _axis(i, j, self.rows, self.cols)

    def __str__(self) -> str:
        return f"axis-{_fmt_set(self.rows)}-{_fmt_set(self.cols)}"


@dataclass(frozen=True)
class StarMask(PositionMask):
    """|i − j| ≤ 1 or i = 0 or j = 0 (Star-Transformer, seed 001 Fig. 1(a))."""

    def allows(self, i, j, n):
        return ((j - i).abs() <= 1) | _axis(i, j, [0], [0])

    def __str__(self) -> str:
        return "star"


@dataclass(frozen=True)
class FixedMask(PositionMask):
    """⌊i/L⌋ = ⌊j/L⌋ or j mod L ≥ L − C (Sparse Transformer "fixed", seed 001 Fig. 1(d))."""

    length: int
    columns: int

    def allows(self, i, j, n):
        L = self.length
        return (i.div(L, rounding_mode="floor") == j.div(L, rounding_mode="floor")) | (
            j % L >= L - self.columns
        )

    def __str__(self) -> str:
        return f"fixed-{self.length}-{self.columns}"


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

    def allows(self, i, j, n):
        # Stack the matrices of the batch's distinct lengths and index each
        # sentence's own: (L, m, m)[(..., 1, 1), (..., T, 1), (..., 1, S)].
        lengths, which = torch.unique(n, return_inverse=True)
        m = max(int(lengths.max()), 1)
        mats = torch.zeros(len(lengths), m, m, dtype=torch.bool)
        for k, length in enumerate(lengths.tolist()):
            if length > 0:
                mats[k, :length, :length] = _matrix(self, length)
        mats = mats.to(i.device)
        return mats[which, i.clamp(0, m - 1), j.clamp(0, m - 1)] & (i < n)


def _seed_suffix(seed: int) -> str:
    return f"-s{seed}" if seed else ""


@dataclass(frozen=True)
class RandomMask(SeededMask):
    """Each row i allows R distinct keys drawn uniformly from the n (every key
    if R ≥ n): BigBird's random attention (seed 001 Fig. 1(f))."""

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
    removes: SparseBERT's "randomly dropped" (seed 001, §3.3)."""

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


MASK_FILE_FORMAT = "fairseq-local-masks/1"


@lru_cache(maxsize=8)
def load_mask_file(path: str) -> Dict[str, dict]:
    """The masks of an exported mask file (``python -m fairseq_local.export_masks``):
    ``{"L.H": {"matrix": bool (N, N), "ends": bool, ...}}``."""
    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise MaskSpecError(f"mask file '{path}' does not exist (--mask-file)") from None
    except Exception as e:  # not a torch file, or not ours
        raise MaskSpecError(f"cannot read mask file '{path}': {e}") from None
    if not isinstance(data, dict) or data.get("format") != MASK_FILE_FORMAT:
        raise MaskSpecError(f"'{path}' is not a mask file written by fairseq_local.export_masks")
    return data["masks"]


@dataclass(frozen=True)
class FileMask(PositionMask):
    """A fixed mask exported from a learned one (seed 001, §4.3 "two-stage"):
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
        m = entry["matrix"].to(i.device)
        if int(n.max()) > m.shape[0]:
            raise MaskSpecError(
                f"a sentence of {int(n.max())} tokens is longer than mask {self} of "
                f"'{self.path}' ({m.shape[0]} positions)"
            )
        out = m[i.clamp(0, m.shape[0] - 1), j.clamp(0, m.shape[0] - 1)]
        if entry["ends"]:
            out = out | _axis(i, j, [0], [0]) | (i == n - 1) | (j == n - 1)
        return out

    def __str__(self) -> str:
        return f"file-{self.layer}.{self.head}"


@dataclass(frozen=True)
class OrMask(HeadMask):
    """The union of ``parts`` (seed 004, Eq. 8), written ``A+B+...``."""

    parts: Tuple[HeadMask, ...]

    @property
    def is_global(self) -> bool:
        return any(p.is_global for p in self.parts)

    @property
    def relative(self) -> bool:
        return all(p.relative for p in self.parts)

    def dense(self, pos_q: torch.Tensor, pos_k: torch.Tensor) -> torch.Tensor:
        """Shapes as the parts'; broadcast to their common shape."""
        out = reduce(torch.logical_or, (p.dense(pos_q, pos_k) for p in self.parts))
        if not self.relative:  # pad positions (−1) stay False, as in PositionMask
            out = out & (pos_q.unsqueeze(-1) >= 0) & (pos_k.unsqueeze(-2) >= 0)
        return out

    def __str__(self) -> str:
        return "+".join(str(p) for p in self.parts)


MaskFactory = Callable[[List[str]], HeadMask]
MASK_KINDS: Dict[str, Tuple[MaskFactory, str]] = {}


def register_mask_kind(name: str, syntax: str) -> Callable[[MaskFactory], MaskFactory]:
    """Register a factory that turns a token's parameters into a :class:`HeadMask`.

    ``name`` may contain '-': a token's kind is the longest registered name
    that the token equals or that is followed by '-' in it.  The factory gets
    the rest of the token's '-'-separated parameters as strings, and raises
    :class:`MaskSpecError` on a bad one.  ``syntax`` is shown in error
    messages (e.g. ``"band-K"``)."""

    def wrapper(factory: MaskFactory) -> MaskFactory:
        if name in MASK_KINDS:
            raise ValueError(f"mask kind {name!r} is already registered")
        MASK_KINDS[name] = (factory, syntax)
        return factory

    return wrapper


_INT = re.compile(r"[0-9]+")


def _no_params(kind: str, params: List[str]) -> None:
    if params:
        raise MaskSpecError(f"'{kind}' takes no parameter")


def _one_k(kind: str, params: List[str]) -> int:
    if len(params) != 1 or not _INT.fullmatch(params[0]) or int(params[0]) < 1:
        raise MaskSpecError(f"'{kind}' needs an integer k >= 1, as in '{kind}-2'")
    return int(params[0])


@register_mask_kind("global", "global[-G]")
def _global(params: List[str]) -> HeadMask:
    if not params:
        return GlobalMask()
    (g,) = _ints(params, ("G", 1))
    return GlobalTokensMask(g)


@register_mask_kind("identity", "identity")
def _identity(params: List[str]) -> HeadMask:
    _no_params("identity", params)
    return OffsetMask("identity", 0, 0)


@register_mask_kind("prev", "prev-K")
def _prev(params: List[str]) -> HeadMask:
    k = _one_k("prev", params)
    return OffsetMask("prev", -k, -k)


@register_mask_kind("next", "next-K")
def _next(params: List[str]) -> HeadMask:
    k = _one_k("next", params)
    return OffsetMask("next", k, k)


@register_mask_kind("band", "band-K")
def _band(params: List[str]) -> HeadMask:
    k = _one_k("band", params)
    return OffsetMask("band", -k, k)


def _ints(params: List[str], *spec: Tuple[str, int]) -> List[int]:
    """Exactly ``len(spec)`` integer parameters, each given as (name, minimum)."""
    if len(params) != len(spec):
        names = "-".join(name for name, _ in spec) or "none"
        raise MaskSpecError(f"takes {len(spec)} parameter(s) ({names}), got {len(params)}")
    out = []
    for text, (name, low) in zip(params, spec):
        if not _INT.fullmatch(text) or int(text) < low:
            raise MaskSpecError(f"{name} must be an integer >= {low}, not '{text}'")
        out.append(int(text))
    return out


def _seeded(params: List[str]) -> Tuple[List[str], int]:
    """Split an optional trailing 'sSEED' (default 0) off the parameters."""
    if params and params[-1].startswith("s"):
        (seed,) = _ints([params[-1][1:]], ("SEED", 0))
        return params[:-1], seed
    return params, 0


def _int_set(text: str, name: str) -> Tuple[int, ...]:
    """'0.5.7' -> (0, 5, 7); '_' -> () (the empty set)."""
    if text == "_":
        return ()
    if not re.fullmatch(r"[0-9]+(\.[0-9]+)*", text):
        raise MaskSpecError(
            f"{name} must be '.'-separated integers >= 0 or '_' (empty), not '{text}'"
        )
    return tuple(int(t) for t in text.split("."))


def _fmt_set(values: Sequence[int]) -> str:
    return ".".join(map(str, values)) or "_"


@register_mask_kind("local", "local-W")
def _local(params: List[str]) -> HeadMask:
    (w,) = _ints(params, ("W", 0))
    return OffsetMask("local", -w, w)


@register_mask_kind("axis", "axis-ROWS-COLS")
def _axis_kind(params: List[str]) -> HeadMask:
    if len(params) != 2:
        raise MaskSpecError(f"takes 2 parameter(s) (ROWS-COLS), got {len(params)}")
    return AxisMask(_int_set(params[0], "ROWS"), _int_set(params[1], "COLS"))


@register_mask_kind("diagonal", "diagonal-O1.O2...")
def _diagonal(params: List[str]) -> HeadMask:
    if len(params) != 1 or params[0] == "_":
        raise MaskSpecError("takes one non-empty offset set, as in 'diagonal-0.1.4'")
    return DiagonalMask(_int_set(params[0], "O"))


@register_mask_kind("random", "random-R[-sSEED]")
def _random(params: List[str]) -> HeadMask:
    params, seed = _seeded(params)
    (r,) = _ints(params, ("R", 1))
    return RandomMask(r, seed)


@register_mask_kind("no-diag", "no-diag")
def _no_diag(params: List[str]) -> HeadMask:
    _no_params("no-diag", params)
    return NoDiagMask()


@register_mask_kind("random-drop", "random-drop[-sSEED]")
def _random_drop(params: List[str]) -> HeadMask:
    params, seed = _seeded(params)
    _no_params("random-drop", params)
    return RandomDropMask(seed)


@register_mask_kind("star", "star")
def _star(params: List[str]) -> HeadMask:
    _no_params("star", params)
    return StarMask()


@register_mask_kind("logsparse", "logsparse")
def _logsparse(params: List[str]) -> HeadMask:
    _no_params("logsparse", params)
    return LogSparseMask()


@register_mask_kind("strided", "strided-L")
def _strided(params: List[str]) -> HeadMask:
    (stride,) = _ints(params, ("L", 1))
    return StridedMask(stride)


@register_mask_kind("fixed", "fixed-L-C")
def _fixed(params: List[str]) -> HeadMask:
    length, columns = _ints(params, ("L", 1), ("C", 0))
    if columns > length:
        raise MaskSpecError(f"C must be <= L, not {columns} > {length}")
    return FixedMask(length, columns)


@register_mask_kind("longformer", "longformer-W-G[-sSEED]")
def _longformer(params: List[str]) -> HeadMask:
    params, seed = _seeded(params)
    return LongformerMask(*_ints(params, ("W", 0), ("G", 1)), seed=seed)


@register_mask_kind("bigbird", "bigbird-W-G-R[-sSEED]")
def _bigbird(params: List[str]) -> HeadMask:
    params, seed = _seeded(params)
    return BigBirdMask(*_ints(params, ("W", 0), ("G", 1), ("R", 1)), seed=seed)


@register_mask_kind("file", "file[-L.H]")
def _file(params: List[str]) -> HeadMask:
    if not params:  # resolved to the head's own layer and head by the layout
        return FileMask(-1, -1)
    if len(params) != 1 or not re.fullmatch(r"[0-9]+\.[0-9]+", params[0]):
        raise MaskSpecError("takes a layer.head pair, as in 'file-0.3'")
    layer, head = params[0].split(".")
    return FileMask(int(layer), int(head))


def parse_mask(token: str) -> HeadMask:
    """Parse one mask token such as ``band-2``, ``bigbird-1-2-2-s3`` or
    ``local-2+global-1`` (raises :class:`MaskSpecError`, naming the token and
    the expected syntax)."""
    if "+" in token:  # seed 004, Eq. 8
        parts = token.split("+")
        if "" in parts:
            raise MaskSpecError(f"empty part in mask '{token}' (expected A+B+...)")
        try:
            union = OrMask(tuple(parse_mask(p) for p in parts))
        except MaskSpecError as e:
            raise MaskSpecError(f"in mask '{token}': {e}") from None
        learned = [str(p) for p in union.parts if p.learned]
        if learned:
            raise MaskSpecError(
                f"in mask '{token}': learned kind '{learned[0]}' cannot be part of a union"
            )
        return union
    names = [k for k in MASK_KINDS if token == k or token.startswith(k + "-")]
    if not names:
        known = ", ".join(syntax for _, syntax in MASK_KINDS.values())
        raise MaskSpecError(f"unknown mask kind '{token}' (known: {known})")
    kind = max(names, key=len)
    factory, syntax = MASK_KINDS[kind]
    try:
        return factory(token[len(kind):].split("-")[1:])
    except MaskSpecError as e:
        raise MaskSpecError(f"bad mask '{token}': {e} (expected {syntax})") from None

def real_positions(padding_mask: Optional[torch.Tensor], length: int) -> torch.Tensor:
    """Real-token positions (B, T) from a (B, T) padding mask (True = pad).

    Pad entries get −1.  Without a padding mask, returns ``arange(length)``."""
    if padding_mask is None:
        return torch.arange(length)
    pos = (~padding_mask).long().cumsum(-1) - 1
    return pos.masked_fill(padding_mask, -1)


def stack_masks(
    masks: Tuple[HeadMask, ...],
    pos_q: torch.Tensor,
    pos_k: torch.Tensor,
) -> torch.Tensor:
    """Stack per-head masks: returns bool (H, T, S) for 1-D positions, or
    (B, H, T, S) for batched (B, T) positions."""
    dense = [m.dense(pos_q, pos_k) for m in masks]
    shape = torch.broadcast_shapes(*(d.shape for d in dense))
    return torch.stack([d.expand(shape) for d in dense], dim=-3)
