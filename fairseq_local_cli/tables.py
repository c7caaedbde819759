"""``fairseq-local tables``: the WMT'14 runs as Pande et al., Tables 1–3,
or (``--bert``) the GLUE runs as their Table 4 (:mod:`fairseq_local_reproduce.table4`).

Reads the runs written by ``scripts/train-wmt14.sh`` and
``scripts/evaluate-wmt14.sh`` under ``RUNS_ROOT/wmt14_en-de/<config>`` and
``RUNS_ROOT/wmt14_en-ru/<config>``: one row per configuration, the twelve
configurations (a)–(l) of Pande et al. (Fig. 4) first, in order, then any
other run directory found (named by its arch).  Columns: the configuration's
letter, paper name and arch, its encoder self-attention weight count (read
from a checkpoint, as ``fairseq-local results`` does), detokenised sacreBLEU
on newstest2014 for each pair and tokenised, compound-split BLEU for En-De
(``test.bleu.json`` and ``test.tok-bleu.json``).  Cells a run has not
produced yet are "-", so a partly finished sweep gives a partly filled table.
"""
import sys
from pathlib import Path
from typing import Dict, List, Optional

from fairseq_local import outputs
from fairseq_local.models.archs import NMT_CONFIGS, get_config
from .common import command_parser
from .results import CHECKPOINTS, checkpoint_info, bleu_score, existing, table_outputs, write_table

PAIRS = ("en-de", "en-ru")
COLUMNS = ["config", "paper name", "arch", "attn weights",
           "en-de BLEU", "en-de tok BLEU", "en-ru BLEU"]
# column -> (pair, file in the run directory)
BLEU_FILES = {
    "en-de BLEU": ("en-de", "test.bleu.json"),
    "en-de tok BLEU": ("en-de", "test.tok-bleu.json"),
    "en-ru BLEU": ("en-ru", "test.bleu.json"),
}


def is_run(path: Path) -> bool:
    """A directory written by train.sh (not, e.g., the sweep's Slurm scripts)."""
    return path.is_dir() and any((path / f).exists() for f in ("command.sh", "train.log", "checkpoint_last.pt"))


def run_names(runs_root: Path) -> List[str]:
    """The paper letters a-l, then every other run name found for either pair, sorted."""
    letters = [c.letter for c in NMT_CONFIGS]
    found = set()
    for pair in PAIRS:
        root = runs_root / f"wmt14_{pair}"
        if root.is_dir():
            found.update(p.name for p in root.iterdir() if is_run(p))
    return letters + sorted(found - set(letters))


def _score(path: Path) -> Optional[str]:
    if not path.is_file():
        return None
    return bleu_score(path)


def input_files(runs_root: Path) -> List[Path]:
    """The files the WMT'14 table reads (those that exist)."""
    files = {"test.bleu.json", "test.tok-bleu.json", *CHECKPOINTS}
    return existing([runs_root / f"wmt14_{pair}" / name / f for name in run_names(runs_root)
                     for pair in PAIRS for f in sorted(files)])


def row(runs_root: Path, name: str) -> Dict[str, str]:
    """The table row of configuration ``name`` (a letter or a run directory name)."""
    out = {c: "-" for c in COLUMNS}
    try:
        cfg = get_config(name)
        out.update({"config": f"({cfg.letter})" if cfg.letter else name, "paper name": cfg.name, "arch": cfg.arch})
    except KeyError:
        out["config"] = name
    for pair in PAIRS:  # arch and weight count from the first run that has a checkpoint
        run = runs_root / f"wmt14_{pair}" / name
        info = checkpoint_info(run) if run.is_dir() else {}
        if info:
            out.update(info)
            break
    for column, (pair, filename) in BLEU_FILES.items():
        out[column] = _score(runs_root / f"wmt14_{pair}" / name / filename) or "-"
    return out


def collect(runs_root: Path) -> List[Dict[str, str]]:
    """All rows, in table order."""
    return [row(runs_root, name) for name in run_names(runs_root)]


DETAILS = """\
Reads the runs of scripts/train-wmt14.sh and scripts/evaluate-wmt14.sh under
RUNS_ROOT/wmt14_en-de/<config> and RUNS_ROOT/wmt14_en-ru/<config>: one row per
configuration, (a)-(l) of Pande et al. first, then any other run (named
by its arch). Columns: letter, paper name, arch, encoder attention weights
(from a checkpoint), detokenised sacreBLEU on newstest2014 for each pair
(test.bleu.json) and tokenised, compound-split BLEU for En-De
(test.tok-bleu.json). Cells a run has not produced yet are "-".

--bert: Table 4 instead (BERT-base with local and tied heads on GLUE dev),
from the runs of scripts/sweep-table4.sh under RUNS_ROOT/<arch>/ (default
runs/bert): per task the measured dev accuracy (MNLI: matched), the paper's
value and the majority-class accuracy; Table 4's rows first, then any other
arch found."""


def build_parser():
    parser = command_parser("tables", DETAILS)
    parser.add_argument("--runs-root", type=Path, metavar="DIR",
                        help="holds wmt14_en-de/ and wmt14_en-ru/ (default: runs), or with --bert one "
                             "directory per arch (default: runs/bert)")
    parser.add_argument("--bert", action="store_true", help="Pande et al. Table 4 from the GLUE runs")
    parser.add_argument("--tasks", nargs="+", metavar="TASK",
                        help="with --bert: the GLUE tasks (default: QQP SST-2 MNLI QNLI)")
    parser.add_argument("--markdown", type=Path, metavar="FILE", help="also write the table as Markdown")
    parser.add_argument("--csv", type=Path, metavar="FILE", help="also write the table as CSV")
    outputs.add_force_option(parser)
    return parser


def main(argv: Optional[List[str]] = None) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.tasks and not args.bert:
        parser.error("--tasks needs --bert")
    if args.tasks:
        from fairseq_local_data.glue import TASKS as GLUE_TASKS

        unknown = [t for t in args.tasks if t not in GLUE_TASKS]
        if unknown:
            parser.error(f"unknown GLUE task '{unknown[0]}' (one of {', '.join(GLUE_TASKS)})")
    root = args.runs_root or Path("runs/bert" if args.bert else "runs")
    if not root.is_dir():
        parser.error(f"no runs directory '{root}'")
    if args.bert:
        from fairseq_local_reproduce.table4 import TASKS, columns, is_table4_header
        from fairseq_local_reproduce.table4 import collect as collect_bert, input_files as bert_inputs

        outputs.check_outputs(table_outputs(args.markdown, args.csv, is_table4_header),
                              inputs=bert_inputs(root, args.tasks or TASKS), force=args.force)
        write_table(collect_bert(root, args.tasks), columns(args.tasks or TASKS), args.markdown, args.csv)
    else:
        outputs.check_outputs(table_outputs(args.markdown, args.csv, lambda cells: cells == COLUMNS),
                              inputs=input_files(root), force=args.force)
        write_table(collect(root), COLUMNS, args.markdown, args.csv)


if __name__ == "__main__":
    from .main import main as cli_main

    sys.exit(cli_main(["tables", *sys.argv[1:]]))
