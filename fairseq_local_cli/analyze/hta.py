"""``fairseq-local analyze hta``: Hidden Token Attribution per head (Pascual
et al., "Telling BERT's Full Story"), with its options and its run; the
parser and the shared checks are :mod:`fairseq_local_cli.analyze`'s.  The previous-layer
contribution differentiates with respect to each layer's input (before a
pre-norm LayerNorm), the input contribution with respect to layer 1's input
(§3: "after position and sequence embeddings have been added"):
:mod:`~fairseq_local.analysis.contribution`.

``--examples 0,5,9`` also draws, per chosen sentence (0-based, in file order),
the attention map of some heads above their contribution map (Pascual et al.
Fig. 7 and Appendix C, Fig. 12-23): ``hta_example_K.png``."""

import argparse
import json
import os
from typing import Dict, List, Tuple

from fairseq_local import outputs as files
from fairseq_local.outputs import Output
from ..attention import add_model_args, load_inputs, report_skipped
from .bias import result_files

HELP = "Hidden Token Attribution per head (Pascual et al.)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``analyze hta`` (``--out`` and ``--force`` are analyze's)."""
    add_model_args(p)
    p.add_argument("--no-input", action="store_true",
                   help="skip the input contribution (the costly part: T x d forward-mode products a batch)")
    p.add_argument("--examples", metavar="K,K,...",
                   help="sentences (0-based, in file order) to draw attention beside contribution for "
                        "(Pascual et al. Fig. 7): hta_example_K.png each")
    p.add_argument("--example-heads", metavar="L:H,...",
                   help="--examples: the heads drawn, layer:head (default: head 0 of every layer)")


def _indices(text: str, option: str, pairs: bool) -> List[tuple]:
    """``"0,5"`` -> [(0,), (5,)]; with ``pairs``, ``"0:1,3:2"`` -> [(0, 1), (3, 2)]."""
    from fairseq_local.analysis.model import AnalysisError

    out = []
    for part in text.split(","):
        fields = part.strip().split(":")
        if len(fields) != (2 if pairs else 1) or not all(f.strip().isdigit() for f in fields):
            want = "layer:head pairs, e.g. 0:1,3:2" if pairs else "sentence numbers, e.g. 0,5,9"
            raise AnalysisError(f"{option} '{text}': give {want} (0-based)")
        out.append(tuple(int(f) for f in fields))
    if len(set(out)) != len(out):
        raise AnalysisError(f"{option} '{text}' names one twice")
    return out


def examples(args: argparse.Namespace) -> List[int]:
    """The sentence numbers of ``--examples`` (checked; [] without it)."""
    if getattr(args, "examples", None) is None:
        if getattr(args, "example_heads", None) is not None:
            from fairseq_local.analysis.model import AnalysisError

            raise AnalysisError("--example-heads needs --examples")
        return []
    return [k for (k,) in _indices(args.examples, "--examples", False)]


def outputs(args: argparse.Namespace) -> List[Output]:
    """Every file ``analyze hta`` may write into ``--out``."""
    kinds = ["previous"] + ([] if args.no_input else ["input"]) + ["attention", "contribution", "centres"]
    figures = [f"hta_{k}" for k in kinds] + [f"hta_example_{k}" for k in examples(args)]
    return result_files(args.out, "hta", ("pearson_previous", "offsets"), figures)


def _example_heads(args: argparse.Namespace, layers: int, heads: int) -> List[Tuple[int, int]]:
    from fairseq_local.analysis.model import AnalysisError

    if args.example_heads is None:
        return [(layer, 0) for layer in range(layers)]
    chosen = _indices(args.example_heads, "--example-heads", True)
    for layer, head in chosen:
        if layer >= layers or head >= heads:
            raise AnalysisError(f"--example-heads {layer}:{head}: the model has {layers} layers x {heads} heads")
    return chosen


def run(args: argparse.Namespace) -> List[str]:
    """Compute and write the HTA statistics and figures; the names written.

    ``hta.json`` is :meth:`~fairseq_local.analysis.positions.PositionStats.result`
    and ``skipped``: with ``attention_special`` and ``contribution_special`` (the
    mean over non-special query rows of the mass on ``<s>``/``</s>``), and for
    ``--pairs`` ``contribution_same_sentence`` and ``same_sentence_share`` (the
    own-sentence input contribution and its uniform baseline, own-sentence
    tokens / all T tokens of the pair); see that method for the exact means."""

    from fairseq_local.analysis.contribution import input_contribution, previous_contribution
    from fairseq_local.analysis.dump import analysed_batches, record
    from fairseq_local.analysis.figures import plot_centres, plot_correlations, plot_example_maps, plot_histograms
    from fairseq_local.analysis.model import AnalysisError
    from fairseq_local.analysis.positions import PositionStats, hta_table

    wanted = examples(args)
    model, items, skipped = load_inputs(args)
    total = len(items) + skipped
    limit = args.max_len if args.max_len is not None else model.head_dim
    kept = [it for it in items if len(it.input.ids) <= limit]
    skipped += len(items) - len(kept)
    why = "--max-len" if args.max_len is not None else "the head dimension, Pascual et al. §5; see --max-len"
    report_skipped(skipped, total, f"longer than {limit} tokens ({why})")
    if not kept:
        raise AnalysisError(f"no sentence has at most {limit} tokens ({skipped} skipped; see --max-len)")
    kept_index = {it.index for it in kept}
    for k in wanted:
        if k not in kept_index:
            raise AnalysisError(f"--examples {k}: no such sentence of at most {limit} tokens "
                                f"({total} read, {skipped} skipped)")
    shown = _example_heads(args, model.num_layers, model.num_heads) if wanted else []
    stats = PositionStats(max(len(it.input.ids) for it in kept))
    per_sentence: Dict[int, tuple] = {}
    for chosen, src_tokens, src_lengths, cap in analysed_batches(model, kept, args.max_tokens, not args.quiet, "hta"):
        # Pascual et al. §4: e^{l-1} is the input of layer l (before a pre-norm LayerNorm), e^0 layer 1's input
        prev = previous_contribution(model, src_tokens, src_lengths)  # (B, L, H, T, T)
        inp = None if args.no_input else input_contribution(model, src_tokens, src_lengths)
        for b, item in enumerate(chosen):
            n = len(item.input.ids)
            rec = record(item, cap, b)
            per_sentence[item.index] = (rec["attn"], prev[b, :, :, :n, :n].float().cpu(),
                                        None if inp is None else inp[b, :, :, :n, :n].float().cpu())
    items_by_index = {it.index: it for it in kept}
    for k in sorted(per_sentence):  # word_ids: the special-token means; sentence_ids (pairs): the own-sentence ones
        tokenised = items_by_index[k].input
        stats.add(*per_sentence[k], word_ids=tokenised.word_ids, sentence_ids=tokenised.sentence_ids)
    result = stats.result()
    result["skipped"] = skipped
    out = args.out
    os.makedirs(out, exist_ok=True)
    files.write_text(os.path.join(out, "hta.json"), json.dumps(result, indent=1) + "\n")
    files.write_text(os.path.join(out, "hta.md"), hta_table(result))
    figures = [str(p) for p in plot_correlations(result, os.path.join(out, "hta"))]
    figures += [str(p) for p in plot_histograms(result, os.path.join(out, "hta"))]
    figures.append(str(plot_centres(result, os.path.join(out, "hta_centres.png"))))
    for k in wanted:  # Pascual et al. Fig. 7: attention (top) against contribution (bottom)
        attn, prev, inp = per_sentence[k]
        kind = "previous-layer contribution" if inp is None else "input contribution"
        item = items_by_index[k]
        figures.append(str(plot_example_maps(item.input.tokens, attn, prev if inp is None else inp, shown,
                                             os.path.join(out, f"hta_example_{k}.png"), kind,
                                             item.input.separator, title=f"sentence {k}")))
    return ["hta.json", "hta.md"] + [os.path.basename(f) for f in figures]
