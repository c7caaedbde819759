"""``fairseq-local analyze bias|sensitivity|hta|roles|importance|table``: what
the heads do, with the papers' figures (Pande et al. §3; Pascual et al.,
"Telling BERT's Full Story"; Voita et al. 2019).

Each analysis is one module of this package, registered in :data:`ANALYSES`
and imported only when analyze runs: ``HELP`` (its one-line summary),
``add_arguments(parser)``, ``outputs(args)`` (the files it may write) and
``run(args)`` (the names of the files written).  An analysis writes into
``--out DIR``, checked before anything is written, unless its ``FOLDER`` is
False (``table``, which prints)."""

import argparse
import importlib
import os
from typing import List, Optional

from ..common import check_output_folder, command_parser

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

# name -> module of this package, in the order of the help.
ANALYSES = {"bias": "bias", "sensitivity": "sensitivity", "hta": "hta", "roles": "roles",
            "importance": "importance", "table": "table"}
# The options an analysis may read files from: never among its outputs.
INPUTS = ("dump", "path", "text", "conllu", "pairs", "counts", "ref", "bpe_model")


def parser() -> argparse.ArgumentParser:
    """The parser of ``analyze``, one subparser per analysis (its module is ``args.module``)."""
    from fairseq_local import outputs

    p = command_parser("analyze", DETAILS)
    sub = p.add_subparsers(dest="action", required=True, metavar="{" + ",".join(ANALYSES) + "}")
    for name, module_name in ANALYSES.items():
        module = importlib.import_module(f"{__package__}.{module_name}")
        q = sub.add_parser(name, help=module.HELP, description=module.HELP)
        q.error = p.error  # type: ignore[method-assign]
        module.add_arguments(q)
        if getattr(module, "FOLDER", True):
            q.add_argument("--out", required=True, metavar="DIR", help="folder for the JSON, table and figures")
        outputs.add_force_option(q)
        q.set_defaults(module=module)
    return p


def main(argv: Optional[List[str]] = None) -> int:
    p = parser()
    args = p.parse_args(argv)
    module = args.module
    if not getattr(module, "FOLDER", True):
        from fairseq_local.errors import InputError

        try:
            module.run(args)
        except InputError as e:
            p.exit(1, f"error: {e}\n")
        return 0
    import logging

    logging.getLogger("matplotlib").setLevel(logging.WARNING)
    from fairseq_local.analysis.model import AnalysisError
    from fairseq_local.analysis.relations import RecordError

    check_output_folder(args.out, module.outputs(args), [getattr(args, k, None) for k in INPUTS], args.force,
                        "analysis folder")
    try:
        written = module.run(args)
    except (AnalysisError, RecordError, OSError) as e:
        p.exit(1, f"error: {str(e).splitlines()[0]}\n")
    print(f"{args.action}: " + " ".join(os.path.join(args.out, f) for f in written))
    table = os.path.join(args.out, f"{args.action}.md")
    if os.path.exists(table):
        with open(table) as f:
            print(f.read().rstrip())
    return 0
