"""``fairseq-local export``: the learned masks of a checkpoint as fixed masks.

Every learned kind whose evaluation pattern does not depend on the input is
exported (:meth:`~fairseq_local.attention.learned.kind.LearnedKind.exportable`;
``aaa`` heads, whose axes are chosen per sentence, are not).  Built in are
SparseBERT's DAM heads: for every ``dam-u``/``dam-s`` head of the
checkpoint's encoder, it writes the
mask of a sentence of N tokens (``--n``, default: the mask's maximum length):

* by default the evaluation-mode hard mask 1[α > 0] (SparseBERT §4.1);
* with ``--prune PCT``, progressive pruning (SparseBERT §3.4): keep the
  largest entries of P = sigmoid(α) and drop the smallest PCT % of the head's
  N² entries.  Entries tied with the last kept value are kept too, so that a
  ``dam-s`` mask stays Toeplitz; a ``dam-s`` mask also keeps its first and
  last rows and columns on.  So a ``dam-s`` head cannot be pruned below its
  4N − 4 end entries, and its realised pruned share can be lower than PCT;
  the command prints the realised share;
* with ``--prune PCT --prune-random SEED``, SparseBERT's random baseline
  (§3.4: "a random baseline that randomly removes the same number of
  entries"): for each exported head, as many entries as its P-pruned mask
  removes (counted on that mask, ties included), chosen uniformly at random
  by a ``torch.Generator`` seeded with SEED and the head's key, never from
  the first and last rows and columns of a ``dam-s`` head.  Heads that share
  α (one α per head for all layers, SparseBERT's setting) share their P-pruned
  mask and so their random mask too, drawn with the key of the first of them.

Entries at positions (``dam-u``) or offsets (``dam-s``) that no training
sentence reached were never trained and keep their initial α (``--dam-init``):
export at the lengths the model was trained on.  The file loads as the fixed
mask kind ``file`` of a second training stage (SparseBERT §4.3,
"two-stage"): pass ``--mask-file masks.pt`` and the layout that the command
prints (the DAM heads become ``file`` heads; every other head and Q/K group is
unchanged); P-pruned and random masks are used the same way.  ``--png`` draws
one heatmap per exported head (layers as rows, heads as columns).
"""

import sys
from typing import Dict, List, Optional

from fairseq_local import outputs
from fairseq_local.checkpoint_compat import local_layout, read_checkpoint
from fairseq_local.attention.export import export, exportable_names, learned_masks, method_name, pruned_shares, stage2_layout
from fairseq_local.attention.config import attention_options
from fairseq_local.attention.layout import LayoutError
from fairseq_local.attention.masks import MASK_FILE_FORMAT, write_mask_file
from fairseq_local.attention.masks.file import check_masks
from .common import command_parser

DETAILS = """\
Writes, for every dam-u/dam-s head of the checkpoint's encoder, the mask of a
sentence of N tokens (--n, default: the masks' maximum length) to a mask file,
and prints the options of the second training stage (SparseBERT §4.3,
"two-stage"): --mask-file FILE and the layout with the DAM heads as 'file'
heads.

  default            the evaluation-mode hard mask 1[alpha > 0] (§4.1)
  --prune PCT        progressive pruning (§3.4): keep the largest entries
                     of P = sigmoid(alpha), drop the smallest PCT % per head
  --prune-random S   with --prune: SparseBERT's random baseline (§3.4),
                     removing exactly as many entries per head as the
                     P-pruned mask does, uniformly at random (seed S and the
                     head's key; reproducible)

dam-s masks stay Toeplitz (entries tied with the threshold are kept) and keep
their first and last rows and columns on, also under random pruning: a dam-s
head cannot be pruned below its 4N - 4 end entries, so its realised pruned
share can be lower than PCT (at most (N - 2)^2 / N^2). The realised share is
printed. Positions or offsets that no training sentence reached keep their
initial alpha: export at lengths the model was trained on."""


def figure(masks: Dict[str, dict], title: str):
    """A matplotlib figure of one heatmap per exported head: layers as rows,
    heads as columns."""
    import logging

    logging.getLogger("matplotlib").setLevel(logging.WARNING)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = sorted(masks, key=lambda k: tuple(map(int, k.split("."))))
    layers = sorted({int(k.split(".")[0]) for k in keys})
    heads = sorted({int(k.split(".")[1]) for k in keys})
    fig, axes = plt.subplots(len(layers), len(heads), squeeze=False,
                             figsize=(1.6 * len(heads) + 0.5, 1.6 * len(layers) + 0.6))
    for ax in axes.flat:
        ax.axis("off")
    for key in keys:
        l, h = map(int, key.split("."))
        m = masks[key]["matrix"]
        ax = axes[layers.index(l)][heads.index(h)]
        ax.imshow(m.float().numpy(), cmap="Greys", vmin=0, vmax=1, interpolation="nearest")
        ax.set_title(f"L{l + 1} H{h + 1}  {100 * m.float().mean():.0f}%", fontsize=7)
    fig.suptitle(f"{title}; black = allowed, % = share allowed", fontsize=8)
    fig.tight_layout()
    return fig


def draw(masks: Dict[str, dict], path: str, title: str) -> None:
    """Draw :func:`figure` into ``path`` (atomically)."""
    import matplotlib.pyplot as plt

    fig = figure(masks, title)
    try:
        outputs.save_figure(fig, path, dpi=120)
    finally:
        plt.close(fig)


def write(args, masks: Dict[str, dict], **info: object) -> None:
    """Write the mask file of ``masks`` and ``info`` (:func:`write_mask_file`)
    to ``--out`` and, with ``--png``, its figure (drawn before either file is
    written): both go to temporary files first and are renamed into place
    only when both are written, so a failure leaves the old files as they were."""
    check_masks(args.out, masks)  # its errors name --out, not the temporary file
    fig = figure(masks, f"{args.checkpoint} ({info['method']})") if args.png else None
    try:
        with outputs.atomic_path(args.out) as out_tmp:
            write_mask_file(out_tmp, masks, **info)
            if fig is not None:
                fmt = outputs.figure_format(args.png)
                with outputs.atomic_path(args.png) as png_tmp:
                    fig.savefig(png_tmp, format=fmt, dpi=120)
    finally:
        if fig is not None:
            import matplotlib.pyplot as plt

            plt.close(fig)


def build_parser():
    """The parser of ``fairseq-local export``."""
    parser = command_parser("export", DETAILS)
    parser.add_argument("checkpoint", help="a checkpoint with dam-u/dam-s heads")
    parser.add_argument("--out", required=True, metavar="FILE", help="mask file to write (.pt)")
    parser.add_argument("--png", metavar="FILE", help="also draw the masks into this PNG")
    parser.add_argument("--prune", type=float, metavar="PCT",
                        help="progressive pruning (SparseBERT §3.4): drop the smallest PCT %% "
                             "of P = sigmoid(alpha) per head, 0 <= PCT < 100")
    parser.add_argument("--prune-random", type=int, metavar="SEED",
                        help="with --prune: SparseBERT's random baseline (§3.4), removing as many "
                             "entries per head as --prune does, at random (seed SEED)")
    parser.add_argument("--n", type=int, metavar="N",
                        help="sentence length of the exported masks (default: the masks' maximum length)")
    outputs.add_force_option(parser)
    return parser


def check_outputs(args) -> None:
    """Check the mask file and the figure before anything is written: neither
    may be the checkpoint, replace a checkpoint, or (without --force) replace
    a file that export did not write, and the figure's suffix must be a
    format matplotlib writes; raises OutputError."""
    wanted = [outputs.Output(args.out, "mask file", ours=outputs.torch_format(MASK_FILE_FORMAT))]
    if args.png:
        wanted.append(outputs.Output(args.png, "figure", ours=outputs.is_png))
    outputs.check_outputs(wanted, inputs=[args.checkpoint], force=args.force)
    if args.png:
        outputs.figure_format(args.png)  # a format matplotlib cannot write: one line, nothing written


def main(argv: Optional[List[str]] = None) -> None:
    """Run ``fairseq-local export``; bad options and checkpoints exit with
    status 2, bad outputs raise OutputError (one line, status 1, from
    ``fairseq-local``)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.prune is not None and not 0 <= args.prune < 100:
        parser.error(f"--prune must be in [0, 100), not {args.prune:g}")
    if args.prune_random is not None and args.prune is None:
        parser.error("--prune-random needs --prune PCT (it removes as many entries as --prune would)")
    if args.prune_random is not None and args.prune_random < 0:
        parser.error(f"--prune-random must be a seed >= 0, not {args.prune_random}")
    if args.n is not None and args.n < 1:
        parser.error(f"--n must be >= 1, not {args.n}")
    check_outputs(args)
    try:
        model_cfg, state_dict = read_checkpoint(args.checkpoint)
        local_layout(args.checkpoint, model_cfg, f"{exportable_names()} heads")
        options = attention_options(model_cfg)
        masks = learned_masks(options, state_dict)
        if not masks:
            raise ValueError(f"'{args.checkpoint}' has no {exportable_names()} heads "
                             f"(layout {model_cfg.get('attn_layout')!r})")
        exported = export(masks, args.n, args.prune, args.prune_random)
    except (FileNotFoundError, ValueError, LayoutError) as e:
        parser.error(str(e))
    layout = stage2_layout(options.layout, masks)
    method = method_name(args.prune, args.prune_random)
    write(args, exported, layout=layout, checkpoint=args.checkpoint, method=method)
    n = next(iter(exported.values()))["matrix"].shape[0]
    density = sum(float(e["matrix"].float().mean()) for e in exported.values()) / len(exported)
    print(f"wrote {len(exported)} masks ({method}, mean density {100 * density:.1f}% at n={n}) to {args.out}")
    if args.prune is not None:
        parts = []
        ends = {e["kind"] for e in exported.values() if e["ends"]}
        for kind, share in pruned_shares(exported).items():
            cap = f", at most {100 * max(n - 2, 0) ** 2 / n ** 2:.1f}% with its end rows/columns on" \
                if kind in ends else ""
            parts.append(f"{kind} {100 * share:.1f}%{cap}")
        print(f"realised pruned share ({method}, requested {args.prune:g}%): " + "; ".join(parts))
    print(f"stage-2 options: --mask-file {args.out} --attn-layout '{layout}'")


if __name__ == "__main__":
    from .main import main as cli_main

    sys.exit(cli_main(["export", *sys.argv[1:]]))
