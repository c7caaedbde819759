"""``fairseq-local reproduce PAPER --scale tiny|small|paper``: a paper's
experiments as a plan of runs through the project's scripts, run, resumed
and reported (:mod:`fairseq_local_reproduce`)."""

import argparse
import os
import sys
from pathlib import Path
from typing import List, Optional

from .common import command_parser

DETAILS = """\
Plans the paper's experiments as steps (data, training, evaluation,
analysis), prints the plan with an estimated time, runs the steps not yet
done, and writes RUNS/PAPER/report.md with its figures: every table beside
the paper's numbers, and one line per finding: reproduced, contradicted,
inconclusive or not comparable, with the estimate and 95 % interval that
decide it (Welch's t over three seeds or more, else a bootstrap over
sentences, heads or dev examples).

  tiny   stand-in data whose labels need non-local information, small models:
         at most 45 minutes per paper on 2 CPU cores
  small  the same with more data and updates, every configuration and 3 seeds:
         1 to 12 hours per paper on 2 CPU cores
         (--device cuda: both on one GPU)
  paper  the paper's own data and settings, for GPUs (--dry-run prints it)

Steps run --jobs at a time (default: 2 on a CPU with 2 cores or more at
tiny and small scale, each with half the cores; 1 at paper scale), a step
once the steps whose outputs it reads have finished. A finished step is
skipped and an interrupted one resumes (the scripts resume from their
checkpoints); a re-run of a finished plan only rewrites the report. Logs are
in RUNS/logs/. One reproduction at a time writes a runs folder (RUNS/.lock):
a second is refused, naming the first one's process id."""


def build_parser() -> argparse.ArgumentParser:
    from fairseq_local_reproduce import PAPERS, SCALES

    p = command_parser("reproduce", DETAILS)
    p.add_argument("paper", metavar="PAPER", choices=[*PAPERS, "all"],
                   help="; ".join(f"{k}: {v}" for k, v in PAPERS.items()) + "; all: every paper in turn, "
                        "then RUNS/summary.md")
    p.add_argument("--scale", choices=SCALES, default="tiny", help="tiny (default), small or paper")
    p.add_argument("--runs", default="runs/reproduce", metavar="DIR",
                   help="folder of the data, runs and reports (default %(default)s)")
    p.add_argument("--jobs", type=_positive, metavar="N",
                   help="steps at a time (default 2 at tiny and small scale on 2 or more cores, else 1)")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                   help="where the tiny and small scales train and analyse (default %(default)s; cuda: one GPU, "
                        "fairseq's own choice of device at paper scale)")
    p.add_argument("--bert", metavar="HF_DIR",
                   help="paper scale (hta, aaa, pande): start from this Hugging Face BERT-base folder (converted "
                        "with convert-hf, fine-tuned on GLUE prepared with its WordPiece) instead of pretraining "
                        "the full model; the report says which model was used")
    p.add_argument("--dry-run", action="store_true", help="print the plan and every command; run nothing")
    return p


BERT_PAPERS = ("hta", "aaa", "pande")  # the plans that take --bert HF_DIR


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"--jobs needs a whole number of at least 1, not {text!r}")
    return value


def default_jobs(scale: str) -> int:
    """2 steps at a time at the reduced scales on 2 or more cores, else 1."""
    return 1 if scale == "paper" else max(1, min(2, os.cpu_count() or 1))


def main(argv: Optional[List[str]] = None) -> int:
    p = build_parser()
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    from fairseq_local.errors import OneLineError

    try:
        return _main(args)
    except BrokenPipeError:  # the printed plan piped into head
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (OneLineError, OSError) as e:
        p.exit(1, f"error: {str(e).splitlines()[0]}\n")


def _main(args: argparse.Namespace) -> int:
    from fairseq_local_reproduce import PAPERS, paper_module
    from fairseq_local_reproduce.plan import check_plan_file, print_plan, run_plan

    from fairseq_local import outputs
    from fairseq_local.locks import folder_lock
    from .common import check_output_folder

    runs = Path(args.runs).absolute()
    check_runs(runs)
    papers = list(PAPERS) if args.paper == "all" else [args.paper]
    given = {}
    if args.bert is not None:
        from fairseq_local.errors import InputError
        from fairseq_local.models.hf_folder import read_config

        if args.paper not in BERT_PAPERS or args.scale != "paper":
            raise InputError(f"--bert HF_DIR is read by 'reproduce {'|'.join(BERT_PAPERS)} --scale paper' only: "
                             f"the reduced scales keep their reduced models")
        cfg = read_config(args.bert)  # a local Hugging Face BERT folder, checked before the plan
        shape = (cfg["num_hidden_layers"], cfg["num_attention_heads"])
        if args.paper != "hta" and shape != (12, 12):
            raise InputError(f"--bert '{args.bert}' has {shape[0]} layers x {shape[1]} heads: the {args.paper} "
                             f"plan's layouts are BERT-base's 12 x 12")
        given = {"bert": str(Path(args.bert).absolute())}
    plans = [paper_module(paper).build(args.scale, runs, device=args.device, **given) for paper in papers]
    reports = [outputs.Output(str(plan.out / "report.md"), "report", outputs.text_starting(paper_module(p).TITLE))
               for p, plan in zip(papers, plans)]
    summary = outputs.Output(str(runs / "summary.md"), "summary", outputs.text_starting(SUMMARY_TITLE))
    check_output_folder(str(runs), reports + ([summary] if args.paper == "all" else []), what="runs folder")
    for plan in plans:  # every plan is checked before any runs
        check_plan_file(plan)
    jobs = args.jobs or default_jobs(args.scale)
    for plan in plans:
        print_plan(plan, commands=args.dry_run, jobs=jobs)
    if args.dry_run:
        return 0
    if args.scale == "paper":
        print("note: paper scale trains Transformer-base and BERT-base on the full data; it is meant for GPUs")
    written = []
    with folder_lock(runs, "reproduce"):  # one reproduction per runs folder
        for paper, plan in zip(papers, plans):
            run_plan(plan, jobs)
            written.append(paper_module(paper, "report").write_report(plan))
            print(f"reproduce {paper}: report in {written[-1]}")
        if args.paper == "all":
            print(f"reproduce all: summary in {write_summary(runs, args.scale, papers, written)}")
    return 0


def check_runs(runs: Path) -> None:
    """Refuse a ``--runs`` folder where a run's folders (``data-tiny/``,
    ``logs/``, one per paper) would land among other things: the file-system
    root, the checkout itself or one of its source folders, or a fairseq data
    folder."""
    from fairseq_local.errors import OptionError
    from fairseq_local_reproduce.plan import ROOT

    r = runs.resolve()
    where = ("the file-system root" if r == Path(r.anchor) else f"the checkout {ROOT}" if r == ROOT else
             f"the checkout's source folder {r}" if ROOT in r.parents and r.relative_to(ROOT).parts[0] in SOURCES
             else f"a fairseq data folder ({r}: dict.txt, *.idx)" if (r / "dict.txt").is_file() or any(r.glob("*.idx"))
             else None)
    if where:
        raise OptionError(f"--runs {runs} is {where}: give the runs a folder of their own (default runs/reproduce)")


# the checkout's own folders
SOURCES = ("fairseq_local", "fairseq_local_reproduce", "fairseq_local_cli", "fairseq_local_data", "scripts", "tests",
           "docs", ".git")


SUMMARY_TITLE = "# The papers, reproduced"


def write_summary(runs: Path, scale: str, papers: List[str], reports: List[Path]) -> Path:
    """RUNS/summary.md: each paper's report and its count of findings
    (the report's line "N findings: ..."), then every finding with its
    verdict and the estimate and 95 % interval it rests on, paper by paper."""
    from fairseq_local import outputs
    from fairseq_local_reproduce import PAPERS
    from fairseq_local_reproduce.report import read_findings, table

    rows, sections = [], []
    for paper, report in zip(papers, reports):
        text = report.read_text(encoding="utf-8")
        counts = next((line for line in text.splitlines() if " findings: " in line), "-")
        link = f"[{paper}/report.md]({report.relative_to(runs).as_posix()})"
        rows.append([PAPERS[paper], counts.rstrip("."), link])
        found = read_findings(text)
        if found:
            cells = [[f.id, f.text.replace("|", "\\|"), f.verdict, f.estimate.replace("|", "\\|")] for f in found]
            sections.append(f"\n## {PAPERS[paper]}\n\nFrom {link}.\n\n"
                            + table(["", "finding", "verdict", "estimate [95 % interval] (basis)"], cells))
    path = runs / "summary.md"
    outputs.write_text(path, f"{SUMMARY_TITLE} at `{scale}` scale\n\n"
                       + table(["paper", "findings", "report"], rows) + "".join(sections))
    return path


if __name__ == "__main__":
    from .main import main as cli_main

    sys.exit(cli_main(["reproduce", *sys.argv[1:]]))
