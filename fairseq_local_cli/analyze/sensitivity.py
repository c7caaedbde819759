"""``fairseq-local analyze sensitivity --path CKPT (--text|--conllu|--pairs)
FILE --out DIR``: the gradient sensitivity of every self-attention block
(Pande et al. §3.1, Eq. 5-7), in closed form."""

import argparse
import os
from typing import List

from fairseq_local.outputs import Output
from ..attention import add_model_args, load_inputs, report_skipped
from .bias import result_files, write_result

HELP = "gradient sensitivity of every layer (Pande et al. §3.1)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``analyze sensitivity`` (``--out`` and ``--force`` are analyze's)."""
    add_model_args(p)


def outputs(args: argparse.Namespace) -> List[Output]:
    """Every file ``analyze sensitivity`` may write into ``--out``."""
    return result_files(args.out, "sensitivity", ("local", "unrelated"), ["sensitivity"])


def run(args: argparse.Namespace) -> List[str]:
    """beta[i, j] = ||dY[i]/dX[j]||_F per block and sentence, summarised as
    gamma_local, gamma_syntactic and gamma_unrelated; the names of the files written."""
    import torch

    from fairseq_local.analysis.dump import analysed_batches, record
    from fairseq_local.analysis.figures import plot_sensitivity
    from fairseq_local.analysis.jacobian import block_jacobian_norms
    from fairseq_local.analysis.relations import position_sets
    from fairseq_local.analysis.sensitivity import SensitivityAccumulator, sensitivity_table

    model, items, skipped = load_inputs(args)
    report_skipped(skipped, len(items) + skipped, "longer than the length limit")
    acc, gammas = SensitivityAccumulator(), {}
    for chosen, src_tokens, _, cap in analysed_batches(model, items, args.max_tokens, not args.quiet, "sensitivity"):
        pad = src_tokens.eq(model.dictionary.pad())
        betas = [block_jacobian_norms(a, x, pad)[0] for a, x in zip(model.attention, cap.inputs)]  # (B, T, T) each
        for b, item in enumerate(chosen):
            n = len(item.input.ids)
            beta = torch.stack([bt[b, :n, :n] for bt in betas]).double().cpu()  # (L, T, T)
            gammas[item.index] = (beta, position_sets(record(item, cap, b)))
    for k in sorted(gammas):  # in input order
        acc.add(*gammas[k])
    result = acc.result()
    write_result(args.out, "sensitivity", result, sensitivity_table(result))
    plot_sensitivity(result, os.path.join(args.out, "sensitivity.png"))
    return ["sensitivity.json", "sensitivity.md", "sensitivity.png"]
