"""``fairseq-local analyze roles DUMP --out DIR``: the head roles of Voita et
al. 2019 (§4-5) from an attention dump: ``roles.json``, ``roles.md``,
``roles.png`` (roles shaded by confidence) and ``roles_syntactic.png``.

A subcommand module of ``analyze``: :func:`add_arguments`, :func:`outputs`
(the files it may write) and :func:`run` (the files it wrote)."""

import argparse
import json
import os
from pathlib import Path
from typing import List

from fairseq_local import outputs as files
from fairseq_local.outputs import Output

FILES = ("roles.json", "roles.md", "roles.png", "roles_syntactic.png")

HELP = "head roles: confidence, positional, syntactic, rare words (Voita et al. 2019)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``analyze roles`` (``--out`` and ``--force`` are added by analyze)."""
    from fairseq_local.analysis.roles import RARE_TOP

    p.add_argument("dump", metavar="DUMP.pt", help="written by fairseq-local attention dump")
    p.add_argument("--counts", metavar="FILE",
                   help="token counts ('symbol count' a line, a fairseq dict file) instead of the dump's")
    p.add_argument("--rare-top", type=int, default=RARE_TOP, metavar="N",
                   help=f"rare-word share over sentences whose least frequent token is not among the N most "
                        f"frequent (default {RARE_TOP}, Voita et al. §5.3; 0: every sentence)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def is_roles_json(path: Path) -> bool:
    """``ours`` for roles.json: a JSON object written by ``analyze roles``
    (``confidence`` and ``roles``) or ``analyze importance`` (``importance``)."""
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(obj, dict) and (("confidence" in obj and "roles" in obj) or "importance" in obj)


def outputs(args: argparse.Namespace) -> List[Output]:
    """Every file ``analyze roles`` may write into ``--out``."""
    out = args.out
    return [Output(os.path.join(out, "roles.json"), "roles result (JSON)", is_roles_json),
            Output(os.path.join(out, "roles.md"), "roles table", files.text_starting("| layer |")),
            Output(os.path.join(out, "roles.png"), "figure", files.is_png),
            Output(os.path.join(out, "roles_syntactic.png"), "figure", files.is_png)]


def run(args: argparse.Namespace) -> List[str]:
    """Compute and write the roles; the names of the files written.  An
    existing roles.json's ``importance`` (analyze importance) is kept."""
    from fairseq_local.analysis.dump import load_dump
    from fairseq_local.analysis.model import AnalysisError
    from fairseq_local.analysis.roles import KEPT_KEYS, head_roles, read_counts
    from fairseq_local.analysis.roles_figures import plot_roles, plot_syntactic, roles_table

    if args.rare_top < 0:
        raise AnalysisError("--rare-top must be 0 or more")
    counts = read_counts(args.counts) if args.counts else None
    records = load_dump(args.dump)
    result = head_roles(records, counts, progress=not args.quiet, rare_top=args.rare_top)
    os.makedirs(args.out, exist_ok=True)
    path = Path(args.out) / "roles.json"
    if is_roles_json(path):
        old = json.loads(path.read_text(encoding="utf-8"))
        result.update({k: old[k] for k in KEPT_KEYS if k in old})
    files.write_text(path, json.dumps(result, indent=1) + "\n")
    files.write_text(os.path.join(args.out, "roles.md"), roles_table(result))
    plot_roles(result, os.path.join(args.out, "roles.png"))
    plot_syntactic(result, os.path.join(args.out, "roles_syntactic.png"))
    return list(FILES)

