"""``fairseq-local analyze bias DUMP.pt --out DIR``: the attention bias of
every head (Pande et al. §3.2, Eq. 8) from an attention dump."""

import argparse
import json
import os
from typing import List, Sequence

from fairseq_local import outputs as files
from fairseq_local.outputs import Output
from ..common import json_with

HELP = "attention bias of every head, from a dump (Pande et al. §3.2)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``analyze bias`` (``--out`` and ``--force`` are analyze's)."""
    p.add_argument("dump", metavar="DUMP.pt", help="written by fairseq-local attention dump")
    p.add_argument("--threshold", type=float, default=3.0, help="score marking a head in Fig. 3 (default 3)")
    p.add_argument("--quiet", action="store_true")


def result_files(out: str, name: str, keys: Sequence[str], figures: Sequence[str]) -> List[Output]:
    """``name``.json (holding ``keys``), ``name``.md and ``figures`` (PNG names without
    the suffix) in ``out``: the files of an analysis with a table per layer."""
    found = [Output(os.path.join(out, f"{name}.json"), f"{name} result (JSON)", json_with(*keys)),
             Output(os.path.join(out, f"{name}.md"), f"{name} table", files.text_starting("| layer |"))]
    return found + [Output(os.path.join(out, f"{p}.png"), "figure", files.is_png) for p in figures]


def write_result(out: str, name: str, result: dict, table: str) -> None:
    """``name``.json and ``name``.md in ``out`` (created if missing)."""
    os.makedirs(out, exist_ok=True)
    files.write_text(os.path.join(out, f"{name}.json"), json.dumps(result, indent=1))
    files.write_text(os.path.join(out, f"{name}.md"), table if table.endswith("\n") else table + "\n")


def outputs(args: argparse.Namespace) -> List[Output]:
    """Every file ``analyze bias`` may write into ``--out``."""
    return result_files(args.out, "bias", ("local", "syntactic"), ["bias_thresholds", "bias_heads"])


def run(args: argparse.Namespace) -> List[str]:
    """Score every head of the dump; the names of the files written."""
    from fairseq_local.analysis.bias import bias_scores, bias_table
    from fairseq_local.analysis.dump import load_dump
    from fairseq_local.analysis.figures import plot_bias_grid, plot_bias_thresholds

    scores = bias_scores(load_dump(args.dump), progress=not args.quiet)
    write_result(args.out, "bias", scores, bias_table(scores, args.threshold))
    plot_bias_thresholds(scores, os.path.join(args.out, "bias_thresholds.png"))
    plot_bias_grid(scores, os.path.join(args.out, "bias_heads.png"), threshold=args.threshold)
    return ["bias.json", "bias.md", "bias_thresholds.png", "bias_heads.png"]
