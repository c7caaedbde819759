"""``fairseq-local analyze bias|sensitivity|hta|roles|importance|table``: what
the heads do, with the papers' figures (Pande et al. §3; Pascual et al.,
"Telling BERT's Full Story"; Voita et al. 2019).

``roles`` and ``importance`` are modules of their own (:data:`MODULES`), each
with ``add_arguments(parser)``, ``outputs(args)`` (the files it may write in
``--out``) and ``run(args)`` (the names of the files written)."""

import argparse
import importlib
import json
import os
import sys
from pathlib import Path
from typing import Callable, List, Optional, Sequence

from .. import outputs
from ..outputs import Output, OutputError
from .centres import centres_writer
from .dump import add_model_args, load_inputs, report_skipped
from .hta import add_hta_arguments, hta_figures, run_hta
from .common import command_parser

DETAILS = """
bias DUMP.pt --out DIR          attention bias (Pande et al. §3.2, Eq. 8) of every head
    from an attention dump: locality (L_i = |i-j| <= 2) and non-local syntactic
    (S_i = tokens of the word's syntactic head and dependents, minus L_i; needs
    --conllu in the dump). A head attending uniformly scores 1.
    -> bias.json, bias.md, bias_thresholds.png (Fig. 2), bias_heads.png (Fig. 3)
sensitivity --path CKPT (--text|--conllu|--pairs) FILE --out DIR
    gradient sensitivity (Pande et al. §3.1, Eq. 5-7): beta[i, j] = ||dY[i]/dX[j]||_F
    of every self-attention block, in closed form; gamma_local, gamma_syntactic,
    gamma_unrelated per sentence and layer.
    -> sensitivity.json, sensitivity.md, sensitivity.png (Fig. 1)
table DIR...                    one row per analysis folder (a model): mean scores
    of bias.json, sensitivity.json and hta.json; --markdown FILE also writes it;
    --centres FILE.png draws the hta.json centres of mass, one colour a folder (Fig. 4-5)
hta --path CKPT (--text|--conllu|--pairs) FILE --out DIR
    Hidden Token Attribution per head (Pascual et al. Eq. 1): previous-layer and
    input contributions, their Pearson/Spearman correlation with attention
    (Fig. 1, 6), relative-position histograms (Fig. 2-3) and centres of mass
    (Fig. 4-5). Sentences longer than the head dimension are skipped (§5).
    --examples 0,5 [--example-heads 0:1,3:2]: attention beside contribution (Fig. 7)
    -> hta.json, hta.md, hta_*.png
roles DUMP.pt --out DIR [--counts FILE] [--rare-top 500]
    head roles (Voita et al. 2019 §4-5) from an attention dump: confidence
    (mean maximum weight), positional (>= 90% of argmaxes at one offset),
    syntactic (argmax on the nsubj/obj/amod/advmod partner, both directions,
    >= 10 points above the most-frequent-offset baseline; needs --conllu in
    the dump), rare words (the head points at the least frequent token).
    Special tokens are left out as rows and as columns.
    -> roles.json, roles.md, roles.png, roles_syntactic.png
importance --path CKPT (--text|--conllu) FILE --out DIR [--method lrp|grad|both]
    how much each head matters: LRP head relevance (Voita et al. 2019) and
    gradient x gate (Michel et al. 2019); also under "importance" in the
    folder's roles.json when analyze roles wrote one there.
    -> importance.json, importance.md, importance.png
"""

# Subcommands with a module of their own, imported only when analyze runs.
MODULES = {"roles": "roles", "importance": "importance"}


def _write_json(obj: dict, path: str) -> None:
    outputs.write_text(path, json.dumps(obj, indent=1))


def _write_text(text: str, path: str) -> None:
    outputs.write_text(path, text if text.endswith("\n") else text + "\n")


def json_with(*keys: str) -> Callable[[Path], bool]:
    """``ours`` for a JSON object holding ``keys`` (a previous analysis result)."""
    def ours(path: Path) -> bool:
        try:
            obj = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return False
        return isinstance(obj, dict) and all(k in obj for k in keys)
    return ours


def check_output_folder(folder: str, files: Sequence[Output], inputs: Sequence[str] = (),
                        force: bool = False, what: str = "output folder") -> None:
    """Check a command's output folder and the files it will write there
    (:func:`outputs.check_outputs`) before anything is written.  A missing
    folder (or sub-folder) is fine if it can be created: its nearest existing
    ancestor must be a writable folder."""
    path = Path(folder)
    if path.exists() and not path.is_dir():
        raise OutputError(f"cannot write the {what} '{folder}': it is a file, not a folder")
    present = []
    for out in files:
        parent = Path(out.path).parent
        if parent.is_dir():
            present.append(out)
            continue
        ancestor = parent.absolute()
        while not ancestor.exists() and ancestor != ancestor.parent:
            ancestor = ancestor.parent
        if not ancestor.is_dir():
            raise OutputError(f"cannot create the {what} '{parent}': '{ancestor}' is a file, not a folder")
        try:
            outputs.check_folder(ancestor, what)
        except OutputError as e:
            raise OutputError(f"cannot create the {what} '{parent}': {e}") from None
    outputs.check_outputs(present, inputs=[i for i in inputs if i], force=force)


def analysis_outputs(args: argparse.Namespace) -> List[Output]:
    """Every file ``analyze bias|sensitivity|hta`` may write into ``--out``."""
    out = args.out
    if args.action == "bias":
        jsons, pngs = ("bias", ("local", "syntactic")), ["bias_thresholds", "bias_heads"]
    elif args.action == "sensitivity":
        jsons, pngs = ("sensitivity", ("local", "unrelated")), ["sensitivity"]
    else:
        kinds = ["previous"] + ([] if args.no_input else ["input"]) + ["attention", "contribution", "centres"]
        jsons, pngs = ("hta", ("pearson_previous", "offsets")), [f"hta_{k}" for k in kinds] + hta_figures(args)
    name, keys = jsons
    files = [Output(os.path.join(out, f"{name}.json"), f"{name} result (JSON)", json_with(*keys)),
             Output(os.path.join(out, f"{name}.md"), f"{name} table", outputs.text_starting("| layer |"))]
    return files + [Output(os.path.join(out, f"{p}.png"), "figure", outputs.is_png) for p in pngs]


def run_bias(args: argparse.Namespace) -> List[str]:
    from ..analysis.bias import bias_scores, bias_table
    from ..analysis.dump import load_dump
    from ..analysis.figures import plot_bias_grid, plot_bias_thresholds

    records = load_dump(args.dump)
    scores = bias_scores(records, progress=not args.quiet)
    out = args.out
    os.makedirs(out, exist_ok=True)
    _write_json(scores, os.path.join(out, "bias.json"))
    _write_text(bias_table(scores, args.threshold), os.path.join(out, "bias.md"))
    plot_bias_thresholds(scores, os.path.join(out, "bias_thresholds.png"))
    plot_bias_grid(scores, os.path.join(out, "bias_heads.png"), threshold=args.threshold)
    return ["bias.json", "bias.md", "bias_thresholds.png", "bias_heads.png"]


def run_sensitivity(args: argparse.Namespace) -> List[str]:
    import torch

    from ..analysis.dump import analysed_batches, record
    from ..analysis.figures import plot_sensitivity
    from ..analysis.jacobian import block_jacobian_norms
    from ..analysis.relations import position_sets
    from ..analysis.sensitivity import SensitivityAccumulator, sensitivity_table

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
    os.makedirs(args.out, exist_ok=True)
    _write_json(result, os.path.join(args.out, "sensitivity.json"))
    _write_text(sensitivity_table(result), os.path.join(args.out, "sensitivity.md"))
    plot_sensitivity(result, os.path.join(args.out, "sensitivity.png"))
    return ["sensitivity.json", "sensitivity.md", "sensitivity.png"]


def _mean(values) -> Optional[float]:
    """The mean of the numbers in a nested list (None entries skipped)."""
    flat: List[float] = []
    stack = [values]
    while stack:
        v = stack.pop()
        if isinstance(v, list):
            stack.extend(v)
        elif v is not None:
            flat.append(float(v))
    return sum(flat) / len(flat) if flat else None


def _share_above(values, threshold: float) -> Optional[float]:
    """The fraction of heads whose score exceeds ``threshold`` (of all heads)."""
    heads = [v for layer in values or [] for v in layer]
    return sum(v is not None and v > threshold for v in heads) / len(heads) if heads else None


def columns(threshold: float = 3.0) -> List[str]:
    """The summary table's columns; the share columns name ``threshold``."""
    return ["model", "heads", "locality", f"loc > {threshold:g}", "syntactic", f"syn > {threshold:g}", "γ local",
            "γ syntactic", "γ unrelated", "r prev", "r input", "attn centre", "contrib centre"]


COLUMNS = tuple(columns())
RESULTS = ("bias", "sensitivity", "hta")


def summary_inputs(dirs: Sequence[str]) -> List[str]:
    """The JSON files ``analyze table`` reads (those that exist)."""
    return [p for d in dirs for p in (os.path.join(d, f"{n}.json") for n in RESULTS) if os.path.isfile(p)]


def _cells(path: str, obj: dict, spec: Sequence[tuple], threshold: float) -> List[str]:
    """The table cells of one result file: ``spec`` is (key, "mean" or
    "share", format) per cell; a value of the wrong shape is an InputError
    naming the file."""
    from ..errors import InputError

    out = []
    try:
        for key, how, fmt in spec:
            v = _mean(obj.get(key)) if how == "mean" else _share_above(obj.get(key), threshold)
            out.append("-" if v is None else fmt.format(v))
    except (TypeError, ValueError, KeyError, IndexError, AttributeError) as e:
        raise InputError(f"'{path}' is not a result of fairseq-local analyze: its '{key}' is not a "
                         f"list of numbers per layer ({type(e).__name__})") from None
    return out


SPECS = {
    "bias": [("local", "mean", "{:.3f}"), ("local", "share", "{:.0%}"), ("syntactic", "mean", "{:.3f}"),
             ("syntactic", "share", "{:.0%}")],
    "sensitivity": [("local", "mean", "{:.4f}"), ("syntactic", "mean", "{:.4f}"), ("unrelated", "mean", "{:.4f}")],
    "hta": [("pearson_previous", "mean", "{:.3f}"), ("pearson_input", "mean", "{:.3f}"),
            ("attention_centre", "mean", "{:+.2f}"), ("contribution_centre", "mean", "{:+.2f}")],
}


def summary_table(dirs: List[str], threshold: float = 3.0) -> str:
    """One Markdown row per analysis folder: means over layers and heads (bias,
    HTA) or over layers and sentences (gamma); "-" where a file or value is
    missing.  A file that is not an analysis result is an InputError naming it."""
    from ..errors import InputError
    from .results import read_json_object

    cols = columns(threshold)
    rows = ["| " + " | ".join(cols) + " |", "|---|" + "---:|" * (len(cols) - 1)]
    for d in dirs:
        name = os.path.basename(os.path.normpath(d))
        if name == "analysis":
            name = os.path.basename(os.path.dirname(os.path.normpath(d)))
        cells = {}
        heads = "-"
        for result, spec in SPECS.items():
            path = os.path.join(d, f"{result}.json")
            obj = read_json_object(Path(path), f"result of fairseq-local analyze {result}") \
                if os.path.isfile(path) else {}
            cells[result] = _cells(path, obj, spec, threshold)
            local = obj.get("local") if result == "bias" else None
            if local:
                if not isinstance(local, list) or not isinstance(local[0], list):
                    raise InputError(f"'{path}' is not a result of fairseq-local analyze: "
                                     "its 'local' is not a list of scores per layer")
                heads = f"{len(local)}x{len(local[0])}"
        b, s, h = cells["bias"], cells["sensitivity"], cells["hta"]
        rows.append("| " + " | ".join([name, heads, *b, *s, *h]) + " |")
    return "\n".join(rows) + "\n"


def subcommand_modules() -> dict:
    """{name: module} of :data:`MODULES` (one not written yet is left out)."""
    found = {}
    for name, module in MODULES.items():
        try:
            found[name] = importlib.import_module(f"{__package__}.{module}")
        except ModuleNotFoundError as e:
            if e.name != f"{__package__}.{module}":
                raise
    return found


def main(argv: Optional[List[str]] = None) -> int:
    p = command_parser("analyze", DETAILS)
    modules = subcommand_modules()
    sub = p.add_subparsers(dest="action", required=True,
                           metavar="{" + ",".join(["bias", "sensitivity", "hta", *modules, "table"]) + "}")
    b = sub.add_parser("bias", help="attention bias of every head, from a dump (Pande et al. §3.2)")
    b.add_argument("dump", metavar="DUMP.pt", help="written by fairseq-local attention dump")
    b.add_argument("--threshold", type=float, default=3.0, help="score marking a head in Fig. 3 (default 3)")
    b.add_argument("--quiet", action="store_true")
    s = sub.add_parser("sensitivity", help="gradient sensitivity of every layer (Pande et al. §3.1)")
    add_model_args(s)
    t = sub.add_parser("table", help="one row per analysis folder")
    t.add_argument("dirs", nargs="+", metavar="DIR", help="folders holding bias/sensitivity/hta.json")
    t.add_argument("--markdown", metavar="FILE", help="also write the table to FILE")
    t.add_argument("--threshold", type=float, default=3.0, help="score above which a head counts (default 3)")
    t.add_argument("--centres", metavar="FILE.png", help="also draw the centres of mass per layer of the folders' "
                   "hta.json, one colour a folder (Pascual et al. Fig. 4-5)")
    outputs.add_force_option(t)
    t.error = p.error  # type: ignore[method-assign]
    h = sub.add_parser("hta", help="Hidden Token Attribution per head (Pascual et al.)")
    add_model_args(h)
    add_hta_arguments(h)
    summaries = {"roles": "head roles: confidence, positional, syntactic, rare words (Voita et al. 2019)",
                 "importance": "head importance: LRP relevance (Voita et al. 2019), gradient x gate "
                               "(Michel et al. 2019)"}
    own = []
    for name, module in modules.items():
        q = sub.add_parser(name, help=summaries.get(name), description=summaries.get(name))
        module.add_arguments(q)
        own.append(q)
    for q in (b, s, h, *own):
        q.error = p.error  # type: ignore[method-assign]
        q.add_argument("--out", required=True, metavar="DIR", help="folder for the JSON, table and figures")
        outputs.add_force_option(q)
    args = p.parse_args(argv)
    if args.action == "table":
        missing = [d for d in args.dirs if not os.path.isdir(d)]
        if missing:
            p.exit(1, f"error: no analysis folder '{missing[0]}'\n")
        if args.markdown:
            outputs.check_outputs([Output(args.markdown, "Markdown table", outputs.text_starting("| model | heads |"))],
                                  inputs=summary_inputs(args.dirs), force=args.force)
        draw = centres_writer(args.centres, args.dirs, args.force) if args.centres else None  # checked first
        text = summary_table(args.dirs, args.threshold)
        sys.stdout.write(text)
        if args.markdown:
            _write_text(text, args.markdown)
        if draw is not None:
            print(f"centres: {draw()}")
        return 0
    import logging

    logging.getLogger("matplotlib").setLevel(logging.WARNING)
    from ..analysis.model import AnalysisError
    from ..analysis.relations import RecordError

    inputs = [getattr(args, k, None)
              for k in ("dump", "path", "text", "conllu", "pairs", "counts", "ref", "bpe_model")]
    module = modules.get(args.action)
    files = module.outputs(args) if module else analysis_outputs(args)
    check_output_folder(args.out, files, inputs, args.force, "analysis folder")
    try:
        run = module.run if module else {"bias": run_bias, "sensitivity": run_sensitivity, "hta": run_hta}[args.action]
        written = run(args)
    except (AnalysisError, RecordError, OSError) as e:
        p.exit(1, f"error: {str(e).splitlines()[0]}\n")
    print(f"{args.action}: " + " ".join(os.path.join(args.out, f) for f in written))
    table = os.path.join(args.out, f"{args.action}.md")
    if os.path.exists(table):
        with open(table) as f:
            print(f.read().rstrip())
    return 0


if __name__ == "__main__":
    from .main import main as cli_main

    sys.exit(cli_main(["analyze", *sys.argv[1:]]))
