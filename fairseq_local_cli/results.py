"""``fairseq-local results``: finished (or partly finished) training runs as
one table.

Each sub-directory of RUNS_DIR is one run as written by ``scripts/train.sh``
and ``scripts/generate.sh``; a run named by a paper letter (``a``-``l``) is
shown with its name in Pande et al. (Fig. 4, Tables 1–3).  The table
reads the runs' own outputs: the arch and the encoder attention weight count
from ``checkpoint_best.pt`` (or ``checkpoint_last.pt``), the best validation
loss and the mean training words/s from ``train.log`` (and, for runs trained
with the sparsity criterion, the realised sparsity ρ of Wang et al. (Adaptive
Axis Attention) Eq. 9, and the share of open head gates (Voita et al. 2019),
at the last validation), and BLEU from ``test.bleu.json``.  Cells that a run
has not produced yet are shown as "-".
"""
import csv
import io
import math
import re
import sys
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

from fairseq_local import outputs
from fairseq_local.checkpoint_compat import RUN_CHECKPOINTS as CHECKPOINTS, checkpoint_info
from fairseq_local.errors import InputError
from fairseq_local.models.archs import NMT_CONFIGS
from .common import command_parser

COLUMNS = ["config", "arch", "attn weights", "best valid loss", "valid sparsity", "test BLEU", "train words/s"]


RUN_FILES = CHECKPOINTS + ("train.log", "test.bleu.json")


def bleu_score(path: Path) -> str:
    """The ``score`` of a BLEU file (``test.bleu.json``), formatted "%.2f"."""
    score = outputs.read_json_object(path, "BLEU file").get("score")
    if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score):
        raise InputError(f"'{path}' is not a BLEU file: no numeric 'score' (got {score!r})")
    return f"{score:.2f}"


def table_header(columns_ok: Callable[[List[str]], bool], markdown_table: bool) -> Callable[[Path], bool]:
    """``ours`` predicate for a table this command wrote: a Markdown (or CSV)
    file whose first line is a header row accepted by ``columns_ok``."""
    def ours(path: Path) -> bool:
        try:
            with open(path, encoding="utf-8") as f:
                first = f.readline().rstrip("\r\n")
        except (OSError, UnicodeDecodeError):
            return False
        if markdown_table:
            if not (first.startswith("| ") and first.endswith(" |")):
                return False
            cells = [c.strip() for c in first[2:-2].split(" | ")]
        else:
            cells = next(csv.reader(io.StringIO(first)), [])
        return columns_ok(cells)
    return ours


def table_outputs(markdown_path: Optional[Path], csv_path: Optional[Path],
                  columns_ok: Callable[[List[str]], bool]) -> List[outputs.Output]:
    """The Markdown and CSV outputs of a table command (those given)."""
    outs = []
    if markdown_path:
        outs.append(outputs.Output(markdown_path, "Markdown table", table_header(columns_ok, True)))
    if csv_path:
        outs.append(outputs.Output(csv_path, "CSV table", table_header(columns_ok, False)))
    return outs


def existing(paths: Sequence[Path]) -> List[Path]:
    """The paths that exist (the inputs a table command will read)."""
    return [p for p in paths if p.exists()]


def _log_info(run: Path) -> Dict[str, str]:
    log = run / "train.log"
    if not log.exists():
        return {}
    valid, wps, rho = [], [], []
    for line in log.read_text(errors="replace").splitlines():
        m = re.search(r"\| valid \| epoch .*?\| loss ([0-9.]+)", line)
        if m:
            valid.append(float(m.group(1)))
            m = re.search(r"\| rho ([0-9.]+)", line)  # logged by the sparsity criterion
            if m:
                gates = re.search(r"\| gates_open ([0-9.]+)", line)
                rho.append(f"{100 * float(m.group(1)):.1f}%"
                           + (f", {100 * float(gates.group(1)):.0f}% heads open" if gates else ""))
        m = re.search(r"\| train \| epoch .*?\| wps ([0-9.]+)", line)
        if m:
            wps.append(float(m.group(1)))
    out = {}
    if valid:
        out["best valid loss"] = f"{min(valid):.3f}"
    if wps:
        out["train words/s"] = f"{sum(wps) / len(wps):.0f}"
    if rho:
        out["valid sparsity"] = rho[-1]
    return out


def _bleu(run: Path) -> Dict[str, str]:
    path = run / "test.bleu.json"
    if not path.exists():
        return {}
    return {"test BLEU": bleu_score(path)}


def run_names(runs_dir: Path, order: Optional[List[str]] = None) -> List[str]:
    """``order`` (every name must be a run directory of ``runs_dir``: an
    :class:`InputError` names the missing ones), else every run, sorted."""
    found = sorted(p.name for p in runs_dir.iterdir() if p.is_dir())
    if not order:
        return found
    missing = [n for n in order if not (runs_dir / n).is_dir()]
    if missing:
        names = ", ".join(f"'{n}'" for n in missing)
        there = ", ".join(found) if found else "none"
        raise InputError(f"no run{'s' if len(missing) > 1 else ''} {names} in '{runs_dir}' (runs there: {there})")
    return list(order)


def collect(runs_dir: Path, order: Optional[List[str]] = None) -> List[Dict[str, str]]:
    """One row per run directory (in ``order`` if given, else sorted)."""
    names = run_names(runs_dir, order)
    rows = []
    for name in names:
        run = runs_dir / name
        row = {c: "-" for c in COLUMNS}
        paper = {c.letter: c for c in NMT_CONFIGS if c.letter}.get(name)
        row["config"] = f"({name}) {paper.name}" if paper else name
        if run.is_dir():
            for part in (checkpoint_info(run), _log_info(run), _bleu(run)):
                row.update(part)
        rows.append(row)
    return rows


def markdown(rows: List[Dict[str, str]], columns: List[str] = COLUMNS) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(r[c] for c in columns) + " |" for r in rows]
    return "\n".join(lines)


def csv_text(rows: List[Dict[str, str]], columns: List[str]) -> str:
    """The table as CSV (header row first)."""
    f = io.StringIO(newline="")
    writer = csv.DictWriter(f, fieldnames=columns)
    writer.writeheader()
    writer.writerows(rows)
    return f.getvalue()


def write_table(rows: List[Dict[str, str]], columns: List[str], markdown_path: Optional[Path],
                csv_path: Optional[Path], footer: Optional[str] = None) -> None:
    """Print the table as Markdown, and write it (atomically) to the given
    Markdown and CSV files; ``footer`` is printed and appended to the
    Markdown after a blank line.  The outputs must have been checked
    (:func:`table_outputs`) already."""
    table = markdown(rows, columns)
    print(table)
    if footer:
        print(f"\n{footer}")
    if markdown_path:
        outputs.write_text(markdown_path, table + "\n" + (f"\n{footer}\n" if footer else ""))
    if csv_path:
        outputs.write_text(csv_path, csv_text(rows, columns))


def claim(rows: List[Dict[str, str]]) -> Optional[str]:
    """The paper's claim against these runs: Pande et al. (Tables 1–3) find
    that local configurations match the all-global baseline (a).  None unless
    (a) and at least one local configuration (b)–(l) have a test BLEU."""
    bleu = {r["config"].split(")")[0].lstrip("("): r["test BLEU"] for r in rows if r["config"].startswith("(")}
    bleu = {k: float(v) for k, v in bleu.items() if v != "-"}
    local = {k: v for k, v in bleu.items() if k != "a"}
    if "a" not in bleu or not local:
        return None
    best = max(local, key=local.get)
    gap = local[best] - bleu["a"]
    verdict = "matches" if abs(gap) <= 5 else ("trails" if gap > 0 else "beats")
    return (f"Paper (Pande et al., Tables 1-3): local configurations match the baseline. "
            f"Here: (a) {bleu['a']:.2f} BLEU, best local ({best}) {local[best]:.2f}; "
            f"the baseline {verdict} it ({gap:+.2f} BLEU; 'matches' means within 5).")


DETAILS = """\
Each sub-directory of RUNS_DIR is one run of scripts/train.sh and
scripts/generate.sh; one named by a paper letter (a-l) is shown with its name
in Pande et al. Columns: config, arch and encoder attention weights
(from checkpoint_best.pt or checkpoint_last.pt), best validation loss and mean
training words/s (train.log), the realised sparsity rho of the last validation
(Wang et al. (Adaptive Axis Attention) Eq. 9; with the share of open head
gates, Voita et al. 2019) for runs trained with the sparsity criterion, and
test BLEU (test.bleu.json). Cells a run has not produced yet are "-". With
the baseline (a) and a local configuration among the runs, a closing line
compares them with the paper's finding that local configurations match the
baseline."""


def build_parser():
    parser = command_parser("results", DETAILS)
    parser.add_argument("runs_dir", type=Path, metavar="RUNS_DIR", help="a directory of run directories")
    parser.add_argument("--runs", nargs="+", metavar="NAME", help="run names, in this order (default: all, sorted)")
    parser.add_argument("--csv", type=Path, metavar="FILE", help="also write the table as CSV")
    parser.add_argument("--markdown", type=Path, metavar="FILE", help="also write the table as Markdown")
    outputs.add_force_option(parser)
    return parser


def main(argv: Optional[List[str]] = None) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.runs_dir.is_dir():
        parser.error(f"no runs directory '{args.runs_dir}'")
    names = run_names(args.runs_dir, args.runs)
    inputs = existing([args.runs_dir / n / f for n in names for f in RUN_FILES])
    outputs.check_outputs(table_outputs(args.markdown, args.csv, lambda cells: cells == COLUMNS),
                          inputs=inputs, force=args.force)
    rows = collect(args.runs_dir, names)
    write_table(rows, COLUMNS, args.markdown, args.csv, footer=claim(rows))


if __name__ == "__main__":
    from .main import main as cli_main

    sys.exit(cli_main(["results", *sys.argv[1:]]))
