"""``fairseq-local analyze table DIR... [--markdown FILE] [--centres FILE.png]``:
one row per analysis folder (a model), the mean scores of its ``bias.json``,
``sensitivity.json`` and ``hta.json``, printed (and written to ``--markdown``).

``--centres`` draws the centres of mass per layer of the folders' ``analyze
hta`` results in one figure, one colour per model (Pascual et al. Fig. 4, one
line per language), attention solid and input contribution dashed (Fig. 5).
The folders holding ``hta.json`` are drawn, labelled as their table row; a
folder without one is left out (its row in the table has "-"); none with one
is a one-line error.

Unlike the other analyses, the table writes no ``--out`` folder (:data:`FOLDER`)."""

import argparse
import os
import sys
from pathlib import Path
from typing import Callable, List, Optional, Sequence, Tuple

from fairseq_local import outputs as files
from fairseq_local.errors import InputError
from fairseq_local.outputs import Output

HELP = "one row per analysis folder"
FOLDER = False  # prints its table; writes only --markdown and --centres


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``analyze table`` (``--force`` is analyze's)."""
    p.add_argument("dirs", nargs="+", metavar="DIR", help="folders holding bias/sensitivity/hta.json")
    p.add_argument("--markdown", metavar="FILE", help="also write the table to FILE")
    p.add_argument("--threshold", type=float, default=3.0, help="score above which a head counts (default 3)")
    p.add_argument("--centres", metavar="FILE.png", help="also draw the centres of mass per layer of the folders' "
                   "hta.json, one colour a folder (Pascual et al. Fig. 4-5)")


def outputs(args: argparse.Namespace) -> List[Output]:
    """The files ``analyze table`` may write: ``--markdown`` (``--centres`` is
    checked by :func:`centres_writer`, which also reads its inputs)."""
    if not args.markdown:
        return []
    return [Output(args.markdown, "Markdown table", files.text_starting("| model | heads |"))]


def run(args: argparse.Namespace) -> List[str]:
    """Check every output and input, then print the table and write the files
    asked for; the paths written."""
    missing = [d for d in args.dirs if not os.path.isdir(d)]
    if missing:
        raise InputError(f"no analysis folder '{missing[0]}'")
    files.check_outputs(outputs(args), inputs=summary_inputs(args.dirs), force=args.force)
    draw = centres_writer(args.centres, args.dirs, args.force) if args.centres else None  # checked first
    text = summary_table(args.dirs, args.threshold)
    sys.stdout.write(text)
    written = []
    if args.markdown:
        files.write_text(args.markdown, text)
        written.append(args.markdown)
    if draw is not None:
        written.append(draw())
        print(f"centres: {written[-1]}")
    return written


def folder_label(folder: str) -> str:
    """A folder's name, its parent's when it is called ``analysis`` (as the table's rows)."""
    name = os.path.basename(os.path.normpath(folder))
    return os.path.basename(os.path.dirname(os.path.normpath(folder))) if name == "analysis" else name


def read_hta_results(dirs: Sequence[str]) -> List[Tuple[str, dict]]:
    """``[(label, hta result)]`` of the folders holding ``hta.json``; a file
    that is not an hta result is an InputError naming it."""
    from fairseq_local.outputs import read_json_object

    found = []
    for folder in dirs:
        path = Path(folder) / "hta.json"
        if not path.is_file():
            continue
        obj = read_json_object(path, "result of fairseq-local analyze hta")
        centre = obj.get("attention_centre")
        if not isinstance(centre, list) or not all(v is None or isinstance(v, (int, float)) for v in centre):
            raise InputError(f"'{path}' is not a result of fairseq-local analyze hta: no 'attention_centre' "
                             f"list of numbers per layer")
        contrib = obj.get("contribution_centre")
        if contrib is not None and (not isinstance(contrib, list) or len(contrib) != len(centre)
                                    or not all(v is None or isinstance(v, (int, float)) for v in contrib)):
            raise InputError(f"'{path}': 'contribution_centre' is not a list of {len(centre)} numbers (one a layer)")
        found.append((folder_label(folder), obj))
    if not found:
        raise InputError(f"--centres: none of the {len(dirs)} folder(s) holds an hta.json (run analyze hta first)")
    return found


def centres_writer(path: str, dirs: Sequence[str], force: bool) -> Callable[[], str]:
    """Check the figure's path (a PNG, not an input; without ``force`` not a
    file other than a PNG: OutputError) and read the folders' hta results
    (InputError), before anything is written; returns the function drawing
    the figure into ``path`` (and returning it)."""
    from fairseq_local.analysis.figures import plot_centres_overlay

    if not path.lower().endswith(".png"):
        raise InputError(f"--centres '{path}': the figure is a PNG, give a FILE.png")
    files.check_outputs([Output(path, "centres figure", files.is_png)],
                          inputs=[os.path.join(d, "hta.json") for d in dirs], force=force)
    results = read_hta_results(dirs)
    return lambda: str(plot_centres_overlay(results, path))


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
    from fairseq_local.outputs import read_json_object

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
