"""``fairseq-local sparsity``: the sparsity of attention mask patterns.

The sparsity of an n×n mask M is ρ = 1 − |M|/n² (SparseBERT §3; Wang et al.
(Adaptive Axis Attention) Eq. 9 uses the same definition).  Each PATTERN is a
mask token of :mod:`fairseq_local.attention.masks` (``star``,
``local-2+global-1``, ...).  A pattern with a random part (``random``,
``random-wang``, ``random-drop``, ``longformer``, ``bigbird``) is evaluated for seeds 0..S−1
(``--seeds S``, overriding its seed) and printed as mean ± standard deviation
over them.  Without a PATTERN, prints the baselines of SparseBERT's Table 3
with the parameters of its §4.2 next to the paper's values.  ``file-L.H``
is head L.H of a mask file written by ``fairseq-local export``
(``--mask-file``).

Limits, checked before any mask is built: ``--n`` at most :data:`MAX_N`
(position masks are evaluated as dense n×n matrices with int64
intermediates: about 0.9 GB at n = 4096, 8.7 GB at 16384, measured), and
``--seeds`` at most :data:`MAX_SEEDS`.
"""
import dataclasses
import statistics
import sys
from typing import List, Optional, Sequence

from fairseq_local.attention.masks import FileMask, HeadMask, MaskSpecError, OrMask, parse_mask
from fairseq_local.attention.masks.measure import is_random, sparsity
from .common import command_parser

MAX_N = 4096  # Long Range Arena's longest sequences; ~0.9 GB peak (dense n x n evaluation)
MAX_SEEDS = 1000  # more seeds do not change a mean +- sd printed to 0.1 %

# SparseBERT Table 3 (n = 128): (name, our token, the paper's sparsity in %).
TABLE3 = [
    ("Star", "star", 96.1),
    ("LogSparse", "logsparse", 89.8),
    ("Strided", "strided-4", 70.4),
    ("Fixed", "fixed-4-1", 72.7),
    ("Longformer", "longformer-2-2", 88.7),  # §4.2: window 2, two random globals
    ("BigBird", "bigbird-1-2-2", 93.2),  # §4.2: window 1, global 2, random 2
]


def with_mask_file(mask: HeadMask, token: str, mask_file: Optional[str], n: int) -> HeadMask:
    """``mask`` with its ``file-L.H`` parts reading ``mask_file``; raises
    :class:`MaskSpecError` naming what is missing (a layer.head, the file,
    the head in it, or positions for ``n``) before any work."""
    if isinstance(mask, OrMask):
        return OrMask(tuple(with_mask_file(p, token, mask_file, n) for p in mask.parts))
    if not isinstance(mask, FileMask):
        return mask
    if mask.layer < 0:
        raise MaskSpecError(f"'{token}': 'file' alone is a layout head's own exported mask; here name the head, "
                            f"as in 'file-0.3', and give the mask file with --mask-file FILE "
                            f"(written by fairseq-local export)")
    if not mask_file:
        raise MaskSpecError(f"'{token}' is head {mask.layer}.{mask.head} of a mask file: give the file with "
                            f"--mask-file FILE (written by fairseq-local export)")
    mask = dataclasses.replace(mask, path=mask_file)
    size = mask.entry()["matrix"].shape[0]
    if n > size:
        raise MaskSpecError(f"--n {n} is longer than mask {mask} of '{mask_file}' ({size} positions)")
    return mask


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
paper's values. 'file-L.H' is head L.H of a mask file written by
fairseq-local export (--mask-file FILE). --n is at most 4096 (the masks are
evaluated as dense n x n matrices) and --seeds at most 1000."""


def build_parser():
    parser = command_parser("sparsity", DETAILS)
    parser.add_argument("patterns", nargs="*", metavar="PATTERN",
                        help="mask tokens (default: SparseBERT Table 3's baselines)")
    parser.add_argument("--n", type=int, default=128, metavar="N",
                        help=f"sequence length, at most {MAX_N} (default 128)")
    parser.add_argument("--seeds", type=int, default=10, metavar="S",
                        help=f"seeds 0..S-1 for patterns with a random part, at most {MAX_SEEDS} (default 10)")
    parser.add_argument("--mask-file", metavar="FILE",
                        help="mask file of fairseq-local export, for patterns 'file-L.H' (layer.head)")
    return parser


def main(argv: Optional[Sequence[str]] = None) -> None:
    """Print the sparsity table; bad options and patterns are one ``error:`` line."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.n < 1:
        parser.error(f"--n must be >= 1, not {args.n}")
    if args.n > MAX_N:
        parser.error(f"--n must be at most {MAX_N}, not {args.n} (masks are evaluated as dense n x n matrices)")
    if args.seeds < 1:
        parser.error(f"--seeds must be >= 1, not {args.seeds}")
    if args.seeds > MAX_SEEDS:
        parser.error(f"--seeds must be at most {MAX_SEEDS}, not {args.seeds}")
    rows: List[List[str]] = []
    if args.patterns:
        try:
            masks = [with_mask_file(parse_mask(t), t, args.mask_file, args.n) for t in args.patterns]
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
    from .main import main as cli_main

    sys.exit(cli_main(["sparsity", *sys.argv[1:]]))
