"""Per-head attention masks, kept as data.

A head's mask is a small frozen object (its kind and parameters), not an n×n
tensor: the dense matrix is materialised only on demand, so that windowed fast
paths can read the parameters directly.

Positions count *real* tokens from 0 (padding excluded).  For a query at
position i and a key at position j, the offset is ``d = j − i``.  The local
kinds of Pande et al. (Pande et al., §4.1) are:

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

The fixed sparse patterns of SparseBERT (SparseBERT, §3.3, §4.2, Table 3) and of
Adaptive Axis Attention (Wang et al. 2022, §2.2, Eq. 5–8).  n is the sentence's real length; positions are
0-based (Wang et al. count rows and columns from 1):

==========================  ===================================================
kind                        allowed (i, j)
==========================  ===================================================
``local-W``                 |i − j| ≤ W, W ≥ 0 (the local pattern of Adaptive Axis Attention)
``global-G``                i < G or j < G (the first G rows and columns), G ≥ 1
``axis-ROWS-COLS``          i ∈ ROWS or j ∈ COLS (Adaptive Axis Attention, Eq. 7); a set is
                            '.'-separated integers ≥ 0 or '_' (empty)
``diagonal-O1.O2...``       |i − j| ∈ {O1, O2, ...} (Adaptive Axis Attention, Eq. 6)
``random-R[-sSEED]``        j among R distinct keys of row i, drawn uniformly
                            from the 128 keys (at n = 128; see below)
``random-wang-R[-sSEED]``   2·R·128 entries drawn uniformly among the 128²: a
                            random pattern of size R (Adaptive Axis Attention §2.2)
``no-diag``                 i ≠ j (SparseBERT §3.3)
``random-drop[-sSEED]``     all but 128 entries drawn uniformly among the 128²
                            (as many as ``no-diag`` removes at n = 128; SparseBERT §3.3)
``star``                    |i − j| ≤ 1 or i = 0 or j = 0
``logsparse``               i = j or |i − j| = 2^k for some k ≥ 0
``strided-L``               |i − j| ≤ L or (i − j) mod L = 0, L ≥ 1
``fixed-L-C``               ⌊i/L⌋ = ⌊j/L⌋ or j mod L ≥ L − C, L ≥ 1, 0 ≤ C ≤ L
``longformer-W-G[-sSEED]``  |i − j| ≤ W, or i or j in G distinct positions drawn
                            uniformly from the 128 (SparseBERT §4.2: W=2, G=2)
``bigbird-W-G-R[-sSEED]``   ``longformer-W-G-sSEED`` or ``random-R-sSEED``
                            (SparseBERT §4.2: W=1, G=2, R=2)
``A+B+...``                 the union of the parts (Adaptive Axis Attention, Eq. 8)
==========================  ===================================================

``global`` alone means no mask.  ``local``, ``diagonal``, ``no-diag``,
``logsparse`` and ``strided`` depend on j − i only (:attr:`HeadMask.relative`;
``A+B+...`` is relative iff all its parts are, and global iff any part is); the
others depend on the positions themselves (pad positions −1 are never
allowed).  The random kinds are fixed by SEED (default 0) and the positions
alone, never by the length or the batch: their random part is one 128×128
tile drawn at SparseBERT's length (:data:`~.seeded.SPAN`, SparseBERT
§3.1.1, §3.3) and repeated periodically, and a sentence of n tokens takes its
top-left n×n block, so each definition above holds exactly at n = 128 (a
shorter row keeps those of its entries below n; :mod:`.seeded`).  A
``bigbird`` mask draws the same global positions as the ``longformer`` mask and
the same keys as the ``random`` mask of its seed.

Each kind is one class, registered once, and holds its own rule.  The class
(a frozen dataclass) is decorated with :func:`register_mask_kind` (its name
and syntax) and has a ``from_params(kind, params)`` classmethod that parses
the token's parameters with the public parsers of :mod:`.registry`
(:func:`~.registry.int_params`, :func:`~.registry.no_params`, ...).  Its rule
is :meth:`HeadMask.allows` (i, j, n) → bool, written with tensor operations
only, or :meth:`RelativeMask.allows_offset` (d) for a relative kind; a kind
whose offsets form one window also gives :attr:`HeadMask.offset_window`.
Every path uses that rule: :meth:`HeadMask.dense` (the dense path, and so the
sparsity counts), FlexAttention's mask_mod (:func:`mask_mod` in
:mod:`.flex_rule`) and the window path (``plan.window_of`` reads
``offset_window``).  Only the kinds whose answer is looked up in a table
(:class:`TableMask`: the seeded kinds of :mod:`.seeded`, ``file`` masks of
:mod:`.file`) build it in :meth:`HeadMask.bind`, once per batch, and return
the rule as a closure over it.  Unions OR their parts' rules.  Where the
classes live: ``global`` in :mod:`.base` (``global-G`` in :mod:`.patterns`),
the local, offset and position kinds in :mod:`.patterns`, the random kinds in
:mod:`.seeded`, ``file`` (and the mask-file format: :func:`write_mask_file`,
:func:`load_mask_file`) in :mod:`.file`, the learned specs' base in :mod:`.learned` (the learned kinds
themselves are in :mod:`fairseq_local.attention.learned`).

:meth:`HeadMask.pair_count` is the number of allowed pairs at length n (|M|
of Adaptive Axis Attention, Eq. 9): in closed form for ``global`` and the
offset kinds, in O(n) over the offsets for the other relative kinds and their
unions, and from the (n, n) matrix, once per (mask, n), for the others.
"""

from .base import (GlobalMask, HeadMask, MaskSpecError, OrMask, PositionMask, RelativeMask, Rule, TableMask,
                   real_positions, stack_masks)
from .registry import MASK_KINDS, int_params, no_params, parse_mask, register_mask_kind, unregister_mask_kind
from .patterns import (AxisMask, DiagonalMask, FixedMask, GlobalTokensMask, LogSparseMask, NoDiagMask, OffsetMask,
                       StarMask, StridedMask)
from .seeded import BigBirdMask, LongformerMask, RandomDropMask, RandomMask, RandomWangMask, SeededMask
from .file import MASK_FILE_FORMAT, FileMask, load_mask_file, write_mask_file
from .learned import LearnedMask
from .flex_rule import MaskMod, flex_positions, mask_mod

__all__ = [
    "AxisMask", "BigBirdMask", "DiagonalMask", "FileMask", "FixedMask", "GlobalMask",
    "GlobalTokensMask", "HeadMask", "LearnedMask", "LogSparseMask", "LongformerMask", "MASK_FILE_FORMAT",
    "MASK_KINDS", "MaskMod", "MaskSpecError", "NoDiagMask", "OffsetMask", "OrMask", "PositionMask",
    "RandomDropMask", "RandomMask", "RandomWangMask", "RelativeMask", "Rule", "SeededMask", "StarMask",
    "StridedMask", "TableMask", "flex_positions", "int_params", "load_mask_file", "mask_mod", "no_params",
    "parse_mask", "real_positions", "register_mask_kind", "stack_masks", "unregister_mask_kind", "write_mask_file",
]
