"""Pande et al.'s plan, the part every scale shares (:mod:`.pande` builds the
reduced scales, :mod:`.pande_paper` the paper's own): the paper's tasks,
configurations and Table 4 rows, the folders of the runs, and the steps of
the dev predictions and of Figs. 1-3's analyses."""

from pathlib import Path
from typing import Dict, List, Tuple

from . import models
from .plan import Plan

PAPER = "pande"
TASKS = ("QQP", "SST-2", "MNLI", "QNLI")
LETTERS = tuple("abcdefghijkl")
BERT_ROWS = ("roberta_local_base", "roberta_band2", "roberta_band6", "roberta_band6_all_tied",
             "roberta_band6_132_tied", "roberta_band6_120_tied")
# Table 4's rows are BERT (Devlin et al.), which has a segment embedding; RoBERTa has none (every scale).
# Without it the reduced model stays near the pair tasks' floors (docs/reproductions/README.md).
SEGMENTS = "--segment-embeddings"
ANALYSIS_SEED = 1  # the fine-tuning seed of the BERT-base models analysed for Figs. 1-3
# §3.1 and §3.2 sample each task's *test* sentences; MNLI's test split of the matched genres
TEST_SPLIT = {"MNLI": "test_matched"}
PAPER_SENTENCES = (100, 1000)  # paper scale: sentences of the sensitivity (Fig. 1) and bias (Figs. 2-3) analyses


def bert_run(plan: Plan, arch: str) -> Path:
    """The pretraining folder of Table 4's row ``arch``: BERT-base at the
    reduced scales is their shared model (:mod:`.models`; Pascual's and Wang's
    plans add the very step), the other rows are the paper's own."""
    if arch == BERT_ROWS[0] and plan.scale != "paper":
        return models.shared_dir(plan.runs, plan.scale) / "bert" / "base"
    return plan.out / "bert" / arch


def ft_dir(plan: Plan, arch: str, seed: int) -> Path:
    """The fine-tuning runs of one layout and seed: TASK/ and eval/TASK.json
    (in the paper's folder, whichever folder the layout pretrained in)."""
    return plan.out / "bert" / arch / f"glue-s{seed}"


def analysis_dir(plan: Plan, what: str) -> Path:
    return plan.out / "analysis" / what


def bert_analysis(task: str) -> str:
    """The analysis folder's name of BERT-base fine-tuned on ``task``."""
    return f"bert-{task}"


def analysed(scale: str) -> Dict[str, str]:
    """The analysed models of Figs. 1-3: {analysis folder name: the model in words}."""
    nmt = "NMT baseline (a), WMT'14 En-De, newstest2014" if scale == "paper" else \
        f"NMT baseline (a), seed {ANALYSIS_SEED}, synthetic test set"
    return {"nmt": nmt, **{bert_analysis(t): f"BERT-base fine-tuned on {t}, seed {ANALYSIS_SEED}, {t} test sentences"
                           for t in TASKS}}


def finetuned(plan: Plan, task: str, seed: int = ANALYSIS_SEED) -> Path:
    """BERT-base fine-tuned on ``task``: the checkpoint ``evaluate-glue.sh`` scores."""
    return ft_dir(plan, BERT_ROWS[0], seed) / task / "checkpoint_best.pt"


def predictions_dir(plan: Plan, arch: str, seed: int) -> Path:
    """Per-example dev predictions of a layout and seed (:mod:`.pande_predict`)."""
    return ft_dir(plan, arch, seed) / "eval" / "predictions"


def add_predictions(plan: Plan, arch: str, seed: int, glue: Path, glue_raw: Path,
                    minutes: "float | None" = None) -> None:
    """Each task's dev predictions of one layout and seed, example by
    example: the units of the bootstrap over dev examples that decides Table 4's
    comparisons where a row has fewer than three seeds."""
    cmd = ["python", "-m", "fairseq_local_reproduce.pande_predict", "--runs", ft_dir(plan, arch, seed), "--data",
           glue, "--glue-dir", glue_raw, "--tasks", *TASKS, "--out", predictions_dir(plan, arch, seed)]
    plan.add(f"{PAPER}/bert/{arch}/glue-s{seed}/predictions", f"{arch}: dev predictions per example, seed {seed}",
             cmd + ([] if plan.device == "cpu" and plan.scale != "paper" else ["--cuda"]), minutes)


def analysis_steps(plan: Plan, what: str, model: List, n: Tuple[int, int], minutes: "float | None") -> None:
    """The three steps of one analysed model: its attention on ``n[1]``
    sentences, their bias (Figs. 2-3), and the sensitivity on the first
    ``n[0]`` (Fig. 1)."""
    out, short = analysis_dir(plan, what), None if minutes is None else 0.05
    name = analysed(plan.scale)[what]
    plan.add(f"{PAPER}/analysis/{what}/dump", f"{name}: attention of every head",
             ["fairseq-local", "attention", "dump", *model, "--max-sentences", n[1], "--quiet", "--out",
              out / "attention.pt", "--force"], short, folders=[out])
    plan.add(f"{PAPER}/analysis/{what}/bias", f"{name}: attention bias (Figs. 2-3)",
             ["fairseq-local", "analyze", "bias", out / "attention.pt", "--quiet", "--out", out, "--force"], short)
    plan.add(f"{PAPER}/analysis/{what}/sensitivity", f"{name}: gradient sensitivity (Fig. 1)",
             ["fairseq-local", "analyze", "sensitivity", *model, "--max-sentences", n[0], "--quiet", "--out", out,
              "--force"], minutes)
