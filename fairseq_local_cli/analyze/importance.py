"""``fairseq-local analyze importance``: how much each encoder head matters,
by LRP head relevance (Voita et al. 2019) and by gradient × gate
(Michel et al. 2019, §4.1); see :mod:`fairseq_local.analysis.importance`.

Writes DIR/importance.json (``lrp`` and ``grad_gate``: one list per layer of
one value per head), DIR/importance.md (a table) and, with both methods,
DIR/importance.png (the two estimates against each other); adds the same
under ``importance`` to DIR/roles.json when ``analyze roles`` wrote one there.
"""

import argparse
import json
import os
import warnings
from pathlib import Path
from typing import List, Optional

from fairseq_local.outputs import Output, is_png, text_starting, write_text
from ..common import json_with
from ..attention import add_model_args, load_inputs, report_skipped

KEYS = ("lrp", "grad_gate", "lrp_signed", "spearman", "sentences", "predictions", "skipped", "rule", "target",
        "grad_loss")

HELP = "head importance: LRP relevance (Voita et al. 2019), gradient x gate (Michel et al. 2019)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``analyze importance`` (``--out`` and ``--force`` are analyze's)."""
    add_model_args(p)
    p.add_argument("--method", default="both", choices=("lrp", "grad", "both"),
                   help="LRP head relevance (Voita et al. 2019), gradient x gate (Michel et al. 2019), "
                        "or both (default)")
    p.add_argument("--ref", metavar="FILE",
                   help="translation models: reference translations, one a line as --text (words; the "
                        "target-side BPE is applied); default: the model's own greedy translation")
    p.add_argument("--max-len-a", type=float, default=1.2, help="greedy translation: at most a*len+b tokens (1.2)")
    p.add_argument("--max-len-b", type=int, default=10, help="greedy translation: at most a*len+b tokens (10)")
    p.add_argument("--head", metavar="NAME",
                   help="RoBERTa: the classification head to explain, or 'lm' for the masked-LM head "
                        "(default: the checkpoint's only classification head, else the LM head)")
    p.add_argument("--positions", default="masked", choices=("masked", "all"),
                   help="RoBERTa's LM head: predictions at masked word pieces (default) or at every piece, unmasked")
    p.add_argument("--mask-prob", type=float, default=0.15, help="share of the word pieces masked (0.15)")
    p.add_argument("--seed", type=int, default=1, help="seed of the masked pieces (1)")


def outputs(args: argparse.Namespace) -> List[Output]:
    """Every file ``analyze importance`` may write into ``--out``."""
    out = args.out
    files = [Output(os.path.join(out, "importance.json"), "importance result (JSON)", json_with("lrp", "grad_gate")),
             Output(os.path.join(out, "importance.md"), "importance table", text_starting("| layer |")),
             Output(os.path.join(out, "roles.json"), "roles result (JSON)", json_with())]
    if args.method == "both":
        files.append(Output(os.path.join(out, "importance.png"), "figure", is_png))
    return files


def importance_table(result: dict) -> str:
    """One Markdown row per head: its LRP relevance and gradient × gate."""
    lrp, grad = result.get("lrp"), result.get("grad_gate")
    rows = lrp if lrp is not None else grad
    lines = ["| layer | head | LRP relevance | grad x gate |", "|---:|---:|---:|---:|"]
    for layer in range(len(rows or [])):
        for head in range(len(rows[layer])):
            cells = ["-" if v is None else f"{v[layer][head]:.4f}" for v in (lrp, grad)]
            lines.append(f"| {layer} | {head} | {cells[0]} | {cells[1]} |")
    rho = result.get("spearman")
    lines.append("")
    lines.append(f"{result.get('sentences', 0)} sentences, {result.get('predictions', 0)} predictions; "
                 f"Spearman rho {'-' if rho is None else f'{rho:.3f}'}")
    return "\n".join(lines) + "\n"


def plot_importance(result: dict, path: str) -> None:
    """The two estimates of every head against each other, coloured by layer,
    Spearman's rho in the title."""
    import numpy as np
    from matplotlib.figure import Figure

    from fairseq_local.analysis.figures import save

    lrp, grad = np.array(result["lrp"], dtype=float), np.array(result["grad_gate"], dtype=float)
    L, H = lrp.shape
    fig = Figure(figsize=(5.5, 4.5))
    ax = fig.add_subplot()
    colours = ax.scatter(lrp.ravel(), grad.ravel(), c=np.repeat(np.arange(L), H), cmap="viridis", s=28)
    fig.colorbar(colours, ax=ax, label="layer", ticks=range(L))
    rho = result.get("spearman")
    ax.set_title(f"Head importance ({L}x{H} heads): Spearman rho = {'-' if rho is None else f'{rho:.3f}'}")
    ax.set_xlabel("LRP relevance (Voita et al.), share of the layer")
    ax.set_ylabel("grad x gate (Michel et al.), l2-normalised per layer")
    ax.grid(alpha=0.3)
    save(fig, path)


def _roles(out: str) -> Optional[dict]:
    """DIR/roles.json, if there is one; an AnalysisError if it is not a JSON object."""
    from fairseq_local.analysis.model import AnalysisError

    path = os.path.join(out, "roles.json")
    if not os.path.exists(path):
        return None
    try:
        obj = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        obj = None
    if not isinstance(obj, dict):
        raise AnalysisError(f"'{path}' is not a JSON object (a result of analyze roles): cannot add the "
                            f"importance to it")
    return obj


def _refs(args: argparse.Namespace, count: int) -> Optional[dict]:
    """{sentence index: reference words} of ``--ref`` (as many as the source sentences read)."""
    from fairseq_local.analysis.dump import read_sentences
    from fairseq_local.analysis.model import AnalysisError

    if not args.ref:
        return None
    refs = read_sentences(text=args.ref)[:args.max_sentences]
    if len(refs) != count:
        raise AnalysisError(f"--ref has {len(refs)} sentences, {args.text or args.conllu} has {count}")
    return {k: s.words for k, s in enumerate(refs)}


def run(args: argparse.Namespace) -> List[str]:
    """Compute and write the outputs; returns the names written in ``--out``."""
    from fairseq_local.analysis.importance import ImportanceOptions, head_importance

    roles = _roles(args.out)  # refused before any computation
    model, items, skipped = load_inputs(args)
    total = len(items) + skipped
    opts = ImportanceOptions(method=args.method, refs=_refs(args, total), max_len_a=args.max_len_a,
                             max_len_b=args.max_len_b, positions=args.positions, mask_prob=args.mask_prob,
                             seed=args.seed, head=args.head, max_tokens=args.max_tokens)
    with warnings.catch_warnings():  # torch's fused attention on fairseq's two mask types, every call
        warnings.filterwarnings("ignore", message="Support for mismatched key_padding_mask")
        result = head_importance(model, items, opts, progress=not args.quiet)
    result["skipped"] = skipped
    result = {k: result.get(k) for k in KEYS}
    report_skipped(skipped, total, "longer than the length limit")
    os.makedirs(args.out, exist_ok=True)
    write_text(os.path.join(args.out, "importance.json"), json.dumps(result, indent=1) + "\n")
    write_text(os.path.join(args.out, "importance.md"), importance_table(result))
    written = ["importance.json", "importance.md"]
    if args.method == "both":
        plot_importance(result, os.path.join(args.out, "importance.png"))
        written.append("importance.png")
    if roles is not None:
        roles["importance"] = result
        write_text(os.path.join(args.out, "roles.json"), json.dumps(roles, indent=1) + "\n")
        written.append("roles.json")
    return written
