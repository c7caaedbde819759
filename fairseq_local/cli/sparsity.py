"""``fairseq-local sparsity``: the sparsity of attention mask patterns.

The sparsity of an n×n mask M is ρ = 1 − |M|/n² (SparseBERT §3; Wang et al.
(Adaptive Axis Attention) Eq. 9 uses the same definition).  Each PATTERN is a
mask token of :mod:`fairseq_local.modules.masks` (``star``,
``local-2+global-1``, ...).  A pattern with a random part (``random``,
``random-drop``, ``longformer``, ``bigbird``) is evaluated for seeds 0..S−1
(``--seeds S``, overriding its seed) and printed as mean ± standard deviation
over them.  Without a PATTERN, prints the baselines of SparseBERT's Table 3
with the parameters of its §4.2 next to the paper's values.
"""
import dataclasses
import statistics
import sys
from typing import List, Optional, Sequence, Union

import torch

from ..modules.masks import HeadMask, MaskSpecError, OrMask, parse_mask
from .common import command_parser

# SparseBERT Table 3 (n = 128): (name, our token, the paper's sparsity in %).
TABLE3 = [
    ("Star", "star", 96.1),
    ("LogSparse", "logsparse", 89.8),
    ("Strided", "strided-4", 70.4),
    ("Fixed", "fixed-4-1", 72.7),
    ("Longformer", "longformer-2-2", 88.7),  # §4.2: window 2, two random globals
    ("BigBird", "bigbird-1-2-2", 93.2),  # §4.2: window 1, global 2, random 2
]


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


def describe(mask: HeadMask, n: int, seeds: int) -> str:
    """ρ in percent with one decimal; for a random mask, mean ± standard
    deviation (sample, over seeds 0..seeds−1)."""
    if not is_random(mask):
        return f"{100 * sparsity(mask, n):.1f}"
    values = [100 * sparsity(mask, n, s) for s in range(seeds)]
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.mean(values):.1f} ± {sd:.2f} (seeds 0-{seeds - 1})"


DETAILS = """\
The sparsity of an n x n mask M is 1 - |M|/n^2 (SparseBERT §3; Wang et al.
(Adaptive Axis Attention) Eq. 9), printed in %. Each PATTERN is a mask token
of --attn-layout (star, logsparse, strided-4, local-2+global-1, ...); one with
a random part (random, random-drop, longformer, bigbird) is evaluated for
seeds 0..S-1 and printed as mean +- standard deviation. Without a PATTERN,
prints SparseBERT's Table 3 baselines with its §4.2 parameters next to the
paper's values."""


def build_parser():
    parser = command_parser("sparsity", DETAILS)
    parser.add_argument("patterns", nargs="*", metavar="PATTERN",
                        help="mask tokens (default: SparseBERT Table 3's baselines)")
    parser.add_argument("--n", type=int, default=128, metavar="N", help="sequence length (default 128)")
    parser.add_argument("--seeds", type=int, default=10, metavar="S",
                        help="seeds 0..S-1 for patterns with a random part (default 10)")
    return parser


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.n < 1:
        parser.error(f"--n must be >= 1, not {args.n}")
    if args.seeds < 1:
        parser.error(f"--seeds must be >= 1, not {args.seeds}")
    rows: List[List[str]] = []
    if args.patterns:
        try:
            masks = [parse_mask(t) for t in args.patterns]
        except MaskSpecError as e:
            parser.error(str(e))
        header = ["pattern", f"sparsity % (n={args.n})"]
        rows = [[t, describe(m, args.n, args.seeds)] for t, m in zip(args.patterns, masks)]
    else:
        header = ["SparseBERT Table 3", "pattern", f"sparsity % (n={args.n})", "paper"]
        for name, token, paper in TABLE3:
            rows.append([name, token, describe(parse_mask(token), args.n, args.seeds), f"{paper:.1f}"])
    widths = [max(len(r[c]) for r in rows + [header]) for c in range(len(header))]
    for row in [header] + rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())


if __name__ == "__main__":
    main(sys.argv[1:])
