"""``fairseq-local benchmark kernels|train|generate|all``: speed and memory of
the attention paths, of training and of generation, each as ratios against a
baseline measured in the same run.

Every level prints a settings line, one Markdown table and notes.  Within a
table row group, the candidates run round-robin in a shuffled order each
round after warm-up (:func:`fairseq_local_cli.benchmark.timing.round_robin`), and the median
is reported.  The levels are in :mod:`fairseq_local_cli.benchmark.kernels`
(kernels) and :mod:`fairseq_local_cli.benchmark.models` (train, generate).

Checked before any measurement: ``--markdown`` can be written (an existing
file is appended to only if it is a text file, never a checkpoint or other
binary file without ``--force``; each append replaces the file atomically),
and the kernel sizes fit (:data:`MAX_LENGTH`, :data:`MAX_HEADS`,
:data:`MAX_HEAD_DIM`, :data:`MAX_BATCH`, and the inputs and weights of a
row within ``--max-memory`` on the CPU).
"""

import argparse
import warnings
from pathlib import Path
from typing import Optional, Sequence

from fairseq_local.attention.config import ATTN_IMPLS, MASK_MODES
from ..common import command_parser

# Kernel sizes beyond which no row can run: the inputs alone of n = 65536 at
# 12 heads of 64 are 1.1 GiB, and dense attention 200 GiB.
MAX_LENGTH = 65536
MAX_HEADS = 1024
MAX_HEAD_DIM = 1024
MAX_BATCH = 1024
LEVELS = ("kernels", "train", "generate")
DEVICES = ("cpu", "cuda")
DTYPES = ("fp32", "fp16", "bf16")

DETAILS = """\
Levels (one or more; "all" runs the three in turn):
  kernels   forward+backward of one LocalMultiheadAttention layer for each case
            (band-2 heads in pre and post mode, Pande et al.'s tied (i) layer
            against its untied heads, a mixed global/band-2 layer, SparseBERT's Star
            and BigBird) at every --heads and --lengths, with each --impls, against
            the same layer with all heads global (fused scaled_dot_product_attention
            between the same projections). Also times scaled_dot_product_attention
            alone on (B, H, n, d_h) and the projections alone, and reports the peak
            tensor memory of each. In --dtype (fp32) on --device (cpu); on cuda the
            timings are taken between torch.cuda.synchronize calls and the peak
            memory is torch.cuda.max_memory_allocated's.
  train     training words/s (forward, loss, backward, Adam step) of stock fairseq
            transformer and configs (a), (f), (i), (l) at each --nmt-sizes, the
            learned archs (DAM_u, DAM_s, Adaptive Axis Attention, head gates) at
            --learned-sizes, and roberta_base against roberta_band6 and
            roberta_band6_120_tied (masked LM) at each --roberta-lengths; ratio to
            stock within each group.
  generate  sentences/s of beam search (fairseq's SequenceGenerator) of stock
            transformer and configs (f), (l). The models are untrained, so every
            hypothesis is held to --gen-len tokens: all models decode alike.

The numbers are medians of --repeats rounds; in each round every candidate of a
group runs once, in a new random order, after --warmup untimed rounds."""


def _positive(kind: type, minimum: float = 1):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"invalid {kind.__name__} value: '{text}'") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum:g}, not {text}")
        return value
    return parse


def build_parser() -> argparse.ArgumentParser:
    from .kernels import KERNEL_CASES
    from .models import GEN_ARCHS, LEARNED_ARCHS, NMT_ARCHS, ROBERTA_ARCHS, SIZES

    p = command_parser("benchmark", DETAILS)
    p.add_argument("levels", nargs="+", choices=(*LEVELS, "all"), metavar="LEVEL",
                   help="kernels, train, generate or all")
    g = p.add_argument_group("all levels")
    g.add_argument("--repeats", type=_positive(int), default=5, metavar="R",
                   help="interleaved rounds; the median is reported (default 5)")
    g.add_argument("--warmup", type=_positive(int, 0), default=1, metavar="W",
                   help="untimed rounds first (default 1)")
    g.add_argument("--threads", type=_positive(int), metavar="N", help="torch threads (default: torch's)")
    g.add_argument("--attn-impl", choices=ATTN_IMPLS, default="auto",
                   help="attention path of the models of train and generate (default auto)")
    g.add_argument("--seed", type=int, default=0, help="seed of the inputs, weights and round orders (default 0)")
    g.add_argument("--vocab", type=_positive(int, 10), default=3000, metavar="V",
                   help="dictionary size of the models of train and generate (default 3000)")
    g.add_argument("--markdown", metavar="FILE", help="also append every table, with its settings, to FILE")
    g.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    g.add_argument("--force", action="store_true",
                   help="append to an existing --markdown FILE that is not a text file (never a checkpoint)")
    k = p.add_argument_group("kernels")
    k.add_argument("--lengths", type=_positive(int), nargs="+", default=[128, 512, 2048, 4096], metavar="N",
                   help=f"sequence lengths n, at most {MAX_LENGTH} (default 128 512 2048 4096; 16384 is allowed)")
    k.add_argument("--heads", type=_positive(int, 2), nargs="+", default=[8, 12], metavar="H",
                   help="heads per layer (default 8 12)")
    k.add_argument("--head-dim", type=_positive(int), default=64, metavar="D", help="d_h (default 64)")
    k.add_argument("--batch", type=_positive(int), default=1, metavar="B", help="sentences (default 1)")
    k.add_argument("--cases", nargs="+", choices=list(KERNEL_CASES), default=list(KERNEL_CASES), metavar="CASE",
                   help="of: " + " ".join(KERNEL_CASES) + " (default all)")
    k.add_argument("--impls", nargs="+", choices=ATTN_IMPLS, default=["auto", "dense"], metavar="IMPL",
                   help="attention paths of the layer timed in each case; the first one also gets the core "
                        "×SDPA column and the tied/untied ratio (default auto dense)")
    k.add_argument("--device", choices=DEVICES, default="cpu",
                   help="where the kernels run: cpu or cuda (the current CUDA device) (default cpu)")
    k.add_argument("--dtype", choices=DTYPES, default="fp32",
                   help="dtype of the layer, its inputs and gradients: fp32, fp16 or bf16 (default fp32)")
    k.add_argument("--min-time", type=_positive(float, 0), default=0.05, metavar="S",
                   help="a timed sample repeats its call to last at least S seconds (default 0.05)")
    k.add_argument("--max-memory", type=_positive(float, 0), default=8.0, metavar="GIB",
                   help="allocation cap of one call, in GiB beyond what the process holds; a call "
                        "that needs more is shown as '-' (default 8; 0: no cap; CPU only: on cuda a call "
                        "that runs out of device memory is shown as '-')")
    t = p.add_argument_group("train")
    t.add_argument("--nmt-sizes", nargs="*", choices=list(SIZES), default=["demo", "base"], metavar="SIZE",
                   help="NMT dimensions: tiny, demo (scripts/demo.sh) or base (Transformer-base) "
                        "(default demo base; none: skip)")
    t.add_argument("--archs", nargs="*", default=list(NMT_ARCHS), metavar="KEY",
                   help="NMT configs (paper letters or arch names) at every --nmt-sizes (default a f i l)")
    t.add_argument("--learned-sizes", nargs="*", choices=list(SIZES), default=["demo"], metavar="SIZE",
                   help="sizes of --nmt-sizes at which the --learned-archs are also measured (default demo)")
    t.add_argument("--learned-archs", nargs="*", default=list(LEARNED_ARCHS), metavar="KEY",
                   help="default dam_s dam_u aaa head_gates")
    t.add_argument("--mask-mode", choices=MASK_MODES, help="mask mode of every NMT config (default: the arch's)")
    t.add_argument("--max-tokens", type=_positive(int, 40), default=4096, metavar="N",
                   help="NMT target tokens a batch (default 4096)")
    t.add_argument("--steps", type=_positive(int), default=4, metavar="S",
                   help="timed updates a round, each on its own batch (default 4)")
    t.add_argument("--roberta-lengths", type=_positive(int, 4), nargs="*", default=[128, 512], metavar="N",
                   help="masked-LM sequence lengths, at most 512 (default 128 512; none: skip)")
    t.add_argument("--roberta-archs", nargs="*", default=list(ROBERTA_ARCHS), metavar="ARCH",
                   help="against roberta_base (default roberta_band6 roberta_band6_120_tied)")
    t.add_argument("--roberta-tokens", type=_positive(int), default=256, metavar="N",
                   help="tokens a masked-LM batch: N // length sentences, at least one (default 256)")
    t.add_argument("--roberta-layers", type=_positive(int), default=12, metavar="L",
                   help="encoder layers (the first L of each layout; default 12)")
    t.add_argument("--plain-criterion", action="store_true",
                   help="fairseq's own criteria; default: their _with_sparsity versions with the demo's "
                        "penalty weights, which act on learned heads and log the realised sparsity")
    s = p.add_argument_group("generate")
    s.add_argument("--gen-size", choices=list(SIZES), default="demo", help="NMT dimensions (default demo)")
    s.add_argument("--gen-archs", nargs="+", default=list(GEN_ARCHS), metavar="KEY",
                   help="configs against stock transformer (default f l)")
    s.add_argument("--beam", type=_positive(int), default=4, help="beam size (default 4)")
    s.add_argument("--gen-sentences", type=_positive(int), default=64, metavar="N",
                   help="sentences a round (default 64)")
    s.add_argument("--gen-batch", type=_positive(int), default=32, metavar="N", help="sentences a batch (default 32)")
    s.add_argument("--gen-len", type=_positive(int), default=30, metavar="N",
                   help="tokens of every hypothesis (default 30)")
    return p


def check_args(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """One-line errors for option values that argparse cannot check alone."""
    from fairseq_local.models.archs import get_config

    if "all" in args.levels:
        args.levels = list(LEVELS)
    args.levels = [lv for lv in LEVELS if lv in args.levels]
    others = [lv for lv in args.levels if lv != "kernels"]
    if others and (args.device != "cpu" or args.dtype != "fp32"):
        p.error(f"--device and --dtype apply to the kernels level only ({' and '.join(others)} "
                f"run{'s' if len(others) == 1 else ''} on the CPU in fp32)")
    if "kernels" in args.levels and args.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            reason = ("this torch has no CUDA support" if torch.version.cuda is None
                      else "no CUDA device is visible")
            p.error(f"--device cuda: no CUDA device available ({reason}; torch {torch.__version__})")
    if "train" in args.levels and not (args.nmt_sizes or args.roberta_lengths):
        p.error("train: nothing to measure (give --nmt-sizes or --roberta-lengths)")
    if args.markdown:
        check_markdown(p, args.markdown, args.force)
    if "kernels" in args.levels:
        check_kernel_sizes(p, args)
    if any(n > 512 for n in args.roberta_lengths):
        p.error(f"--roberta-lengths must be at most 512 (RoBERTa's positions), not {max(args.roberta_lengths)}")
    for option, keys in (("--archs", args.archs), ("--learned-archs", args.learned_archs),
                         ("--gen-archs", args.gen_archs), ("--roberta-archs", args.roberta_archs)):
        for key in keys:
            try:
                cfg = get_config(key)
            except KeyError as e:
                p.error(f"{option}: {e.args[0]}")
            roberta = cfg.arch.startswith("roberta_")
            if roberta != (option == "--roberta-archs"):
                p.error(f"{option}: '{key}' is {'a RoBERTa' if roberta else 'an NMT'} arch")


def is_text(path: Path) -> bool:
    """Whether ``path`` is a UTF-8 text file (an earlier --markdown file, or
    notes the tables are appended to); reads its first 64 KiB only."""
    try:
        with open(path, "rb") as f:
            head = f.read(1 << 16)
    except OSError:
        return False
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as e:
        if e.start < len(head) - 3:  # not just a character cut at the 64 KiB boundary
            return False
    return b"\0" not in head


def check_markdown(p: argparse.ArgumentParser, markdown: str, force: bool) -> None:
    """One ``error:`` line, before any measurement and with nothing written,
    unless ``markdown`` can be appended to (see the module docstring)."""
    from fairseq_local.outputs import Output, OutputError, check_outputs

    path = Path(markdown)
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.exists():
        p.error(f"--markdown: No such file or directory: folder '{folder}' (of '{path}')")
    try:
        check_outputs([Output(path, "Markdown file", ours=is_text)], force=force)
    except (OutputError, OSError) as e:
        p.error(f"--markdown: {e}")


def kernel_bytes(args: argparse.Namespace, n: int, heads: int) -> int:
    """Bytes of the inputs, gradients and weights of one kernel row (before
    any attention runs): x and its gradient, q/k/v and theirs, and the
    projections of the layers compared."""
    elem = 4 if args.dtype == "fp32" else 2
    d = heads * args.head_dim
    activations = 2 * n * args.batch * d + 4 * args.batch * heads * n * args.head_dim
    weights = 4 * d * d * (2 + len(args.impls))
    return elem * (activations + weights)


def check_kernel_sizes(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """One ``error:`` line, before any measurement, for kernel sizes that no
    row could run (the explicit maxima, and on the CPU --max-memory)."""
    for option, values, limit in (("--lengths", args.lengths, MAX_LENGTH), ("--heads", args.heads, MAX_HEADS),
                                  ("--head-dim", [args.head_dim], MAX_HEAD_DIM), ("--batch", [args.batch], MAX_BATCH)):
        if max(values) > limit:
            p.error(f"argument {option}: must be at most {limit}, not {max(values)}")
    if args.device == "cpu" and args.max_memory > 0:
        n, heads = max(args.lengths), max(args.heads)
        need = kernel_bytes(args, n, heads) / 2 ** 30
        if need > args.max_memory:
            p.error(f"--lengths {n} with --heads {heads}, --head-dim {args.head_dim} and --batch {args.batch}: "
                    f"the inputs and weights alone take {need:.1f} GiB, above --max-memory {args.max_memory:g} GiB")


def append_markdown(path: str, text: str) -> None:
    """Append ``text`` and a blank line to ``path``, replacing it atomically."""
    from fairseq_local.outputs import atomic_path

    old = Path(path).read_bytes() if Path(path).exists() else b""
    with atomic_path(path) as tmp:
        tmp.write_bytes(old + (text + "\n\n").encode("utf-8"))


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run ``fairseq-local benchmark``; bad options are one ``error:`` line."""
    p = build_parser()
    args = p.parse_args(argv)
    check_args(p, args)
    import torch

    from .kernels import kernels
    from .models import generate, train

    threads = torch.get_num_threads()
    if args.threads:
        torch.set_num_threads(args.threads)
    runners = {"kernels": kernels, "train": train, "generate": generate}
    try:
        for i, level in enumerate(args.levels):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)  # fairseq's and torch's deprecation notices
                text = runners[level](args)
            print(("\n" if i else "") + text, flush=True)
            if args.markdown:
                append_markdown(args.markdown, text)
    finally:
        torch.set_num_threads(threads)
    return 0
