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
import json
import re
import sys
from pathlib import Path
from typing import Dict, List, Optional

from ..models.archs import NMT_CONFIGS
from .common import command_parser

COLUMNS = ["config", "arch", "attn weights", "best valid loss", "valid sparsity", "test BLEU", "train words/s"]
_SELF_ATTN = re.compile(r"^encoder\.(sentence_encoder\.)?layers\.\d+\.self_attn\.")


def attention_weight_count(state_dict: Dict[str, "object"]) -> int:
    """Unique ≥2-D tensors under ``encoder.layers.*.self_attn`` (RoBERTa:
    ``encoder.sentence_encoder.layers.*.self_attn``) in a state dict
    (tensors shared across layers are stored, and counted, once)."""
    seen = {}
    for key, t in state_dict.items():
        if _SELF_ATTN.match(key) and t.dim() >= 2:
            seen[(t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape))] = t.numel()
    return sum(seen.values())


def _checkpoint_info(run: Path) -> Dict[str, str]:
    for name in ("checkpoint_best.pt", "checkpoint_last.pt"):
        path = run / name
        if path.exists():
            from ..checkpoint_compat import read_checkpoint

            model_cfg, state_dict = read_checkpoint(str(path))
            arch = model_cfg.get("arch") or model_cfg.get("_name", "-")
            return {"arch": str(arch), "attn weights": f"{attention_weight_count(state_dict):,}"}
    return {}


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
    return {"test BLEU": f"{json.loads(path.read_text())['score']:.2f}"}


def collect(runs_dir: Path, order: Optional[List[str]] = None) -> List[Dict[str, str]]:
    """One row per run directory (in ``order`` if given, else sorted)."""
    names = order or sorted(p.name for p in runs_dir.iterdir() if p.is_dir())
    rows = []
    for name in names:
        run = runs_dir / name
        row = {c: "-" for c in COLUMNS}
        paper = {c.letter: c for c in NMT_CONFIGS if c.letter}.get(name)
        row["config"] = f"({name}) {paper.name}" if paper else name
        if run.is_dir():
            for part in (_checkpoint_info(run), _log_info(run), _bleu(run)):
                row.update(part)
        rows.append(row)
    return rows


def markdown(rows: List[Dict[str, str]], columns: List[str] = COLUMNS) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(r[c] for c in columns) + " |" for r in rows]
    return "\n".join(lines)


def write_table(rows: List[Dict[str, str]], columns: List[str], markdown_path: Optional[Path],
                csv_path: Optional[Path]) -> None:
    """Print the table as Markdown, and write it to the given Markdown and CSV files."""
    table = markdown(rows, columns)
    print(table)
    if markdown_path:
        markdown_path.write_text(table + "\n")
    if csv_path:
        with csv_path.open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=columns)
            writer.writeheader()
            writer.writerows(rows)


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
    return parser


def main(argv: Optional[List[str]] = None) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.runs_dir.is_dir():
        parser.error(f"no runs directory '{args.runs_dir}'")
    rows = collect(args.runs_dir, args.runs)
    write_table(rows, COLUMNS, args.markdown, args.csv)
    line = claim(rows)
    if line:
        print(f"\n{line}")
        if args.markdown:
            with args.markdown.open("a") as f:
                f.write(f"\n{line}\n")


if __name__ == "__main__":
    sys.exit(main())
