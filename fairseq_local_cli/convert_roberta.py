"""``fairseq-local convert-roberta``: a stock fairseq RoBERTa checkpoint as one
of the ``roberta_local`` archs (:mod:`fairseq_local.models.convert`).

Adaptive Axis Attention (Wang et al. 2022) and the fine-tune-only baselines
of its Table 1 start from a pretrained full-attention model; the converted
checkpoint is fine-tuned with fairseq's ``--finetune-from-model``.
"""

import os
import sys
from typing import List, Optional

from .common import command_parser

DETAILS = """\
Adaptive Axis Attention (Wang et al. 2022) and the fine-tune-only baselines of
its Table 1 start from a pretrained full-attention model. This command reads
IN.pt, a checkpoint of fairseq's RoBERTa (archs roberta_*, xlmr.*; the
separate q_proj/k_proj/v_proj format or the legacy fused in_proj_weight/
in_proj_bias with q, k, v stacked on dim 0), and writes OUT.pt, an ordinary
fairseq checkpoint of a roberta_local arch:

  * --arch and the attention options (--attn-layout, --mask-mode, ...; the
    fairseq-train options of the same names) choose only the attention. The
    converted model keeps the input's dimensions (layers, heads, embedding
    and FFN sizes, positions), dictionary, LM head and classification heads;
    a layout that does not fit the input's layers and heads is an error.
  * Wq/Wk of head h (rows h*d_h:(h+1)*d_h) go to the head's Q/K group. A
    group shared by several heads (Q/K tying, '@name'/'@@name' in the
    layout) starts from its first member head, in layer then head order
    (--tie-init first, the default) or from the mean of its members' slices
    (--tie-init mean), weights and biases alike.
  * Wv, Wo and every other tensor are copied. The learned extras that a stock
    model lacks (DAM logits, the AAA axis selector, head gates) keep their
    fresh initialisation.
  * Loading is strict: a stock tensor the new model has no place for, or a
    tensor of the new model that the input lacks, is an error.
  * OUT.pt records IN.pt's name (key 'converted_from'). An existing OUT.pt
    is replaced only if it is an earlier output of this command, or with
    --force; OUT.pt is written atomically (an interrupted run leaves it as
    it was).

With an all-global layout (roberta_local_base, the default layout) the
converted model computes the stock model's outputs. Fine-tune it with
fairseq-train --user-dir fairseq_local --arch ARCH (and the same attention
options) --finetune-from-model OUT.pt, or load it with
RobertaModel.from_pretrained(DIR, checkpoint_file='OUT.pt', user_dir=...)."""

EPILOG = """\
example:
  fairseq-local convert-roberta roberta.base/model.pt roberta.aaa/model.pt \\
      --arch roberta_aaa
  fairseq-local convert-roberta roberta.base/model.pt band6-tied.pt \\
      --arch roberta_band6_all_tied --tie-init mean"""


def roberta_local_archs() -> List[str]:
    """The archs registered for the ``roberta_local`` model."""
    from fairseq.models import ARCH_MODEL_NAME_REGISTRY

    from fairseq_local import models  # noqa: F401  (registers the archs)

    return sorted(a for a, m in ARCH_MODEL_NAME_REGISTRY.items() if m == "roberta_local")


def build_parser():
    from fairseq_local.models.convert import TIE_INITS
    from fairseq_local.attention.config import add_attention_args
    from fairseq_local.outputs import add_force_option

    parser = command_parser("convert-roberta", DETAILS, EPILOG)
    parser.add_argument("input", metavar="IN.pt", help="a stock fairseq RoBERTa checkpoint")
    parser.add_argument("output", metavar="OUT.pt", help="the converted checkpoint to write")
    parser.add_argument("--arch", required=True, choices=roberta_local_archs(), metavar="ARCH",
                        help="a roberta_local arch: " + ", ".join(roberta_local_archs()))
    parser.add_argument("--tie-init", choices=TIE_INITS, default="first",
                        help="initial Wq/Wk of a Q/K group shared by several heads: the first member "
                             "head's (default) or the mean of the members'")
    parser.add_argument("--seed", type=int, default=1,
                        help="seed of the learned extras' fresh initialisation (DAM logits, the AAA selector, "
                             "head gates): one seed, one file (default %(default)s)")
    add_force_option(parser)
    group = parser.add_argument_group("attention options (as in fairseq-train; default: the arch's)")
    add_attention_args(group)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    """Run ``fairseq-local convert-roberta``; every bad input or output is one
    ``error:`` line (exit status 2) and leaves OUT.pt as it was."""
    from fairseq_local.errors import OneLineError
    from fairseq_local.models.convert import convert_checkpoint, is_converted
    from fairseq_local.attention.config import OPTION_NAMES
    from fairseq_local.outputs import Output, check_outputs

    parser = build_parser()
    args = parser.parse_args(argv)
    if os.path.exists(args.output) and os.path.exists(args.input) and os.path.samefile(args.input, args.output):
        parser.error(f"OUT.pt must not be IN.pt (both are '{args.output}')")
    try:  # before the slow work: OUT.pt is writable and replaces nothing of the user's
        check_outputs([Output(args.output, "converted checkpoint", ours=is_converted, checkpoint=True)],
                      inputs=[args.input], force=args.force)
    except (OSError, ValueError) as e:
        parser.error(str(e).splitlines()[0] if str(e) else type(e).__name__)
    attention = {name: getattr(args, name, None) for name in OPTION_NAMES}
    try:
        summary = convert_checkpoint(args.input, args.output, args.arch, attention, args.tie_init, args.seed)
    except (FileNotFoundError, ValueError, OneLineError) as e:
        parser.error(str(e).splitlines()[0] if str(e) else type(e).__name__)
    heads = ", ".join(summary["classification_heads"]) or "none"
    print(f"wrote {args.output}: arch {summary['arch']}, {summary['layers']} layers x {summary['heads']} heads, "
          f"{summary['qk_groups']} Q/K group(s) (--tie-init {args.tie_init}), classification heads: {heads}, "
          f"{summary['fresh']} learned tensors initialised fresh")
    print(f"layout: {summary['layout']}")
    return 0


if __name__ == "__main__":
    from .main import main as cli_main

    sys.exit(cli_main(["convert-roberta", *sys.argv[1:]]))
