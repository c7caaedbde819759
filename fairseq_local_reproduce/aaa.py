"""Wang et al., "Learning Adaptive Axis Attentions in Fine-tuning: Beyond Fixed
Sparse Attention Patterns" (ACL Findings 2022): the plan of ``fairseq-local
reproduce aaa``.

* Table 1 (§3.1): Local₂+Global₂ and Local₂+Global₁+Random₁ pre-trained with
  the pattern, or fine-tuned only from the full-attention model, and Full.
* Fig. 2 (§3.2): Local_k+Global₂ and Local₂+Global_g for k, g in the sizes,
  fine-tuned from the full model, on MNLI, QNLI, QQP.
* Table 3 (§4.1): a diagonal pattern (``dam-s``: SparseBERT's structured DAM,
  which keeps the first and last tokens' rows and columns, its global part)
  fixed, learned per task (one α per head, shared by the layers) and per task
  and layer (``--dam-per-layer``), the learned ones held at ρ_target by Eq.
  10's hinge on the DAM heads (:data:`HINGE`).
* Table 4 (§4.3): Full, Local₂+Global₂, Local₃+Global₁, Local₂+Global₁+Random₁,
  Local₁+Global₁+Random₂, and AAA (axis OR Local₂, Eq. 11–12: the ``aaa``
  token) trained by Eq. 10 to each fixed pattern's ρ (one AAA row serves
  Local₂+Global₂ and Local₃+Global₁, whose ρ is the same, as in the paper).
* Table 5 (§4.3) reads Table 1's pre-trained rows against the AAA rows;
  Table 6 (§4.3) the share of row and column tokens the AAA runs select
  (``aaa_rows``, ``aaa_cols`` of the validation).  Table 2 (LRA) and Table 7
  (MobileBERT) are not planned.
* Every row's first seed also writes its dev predictions example by example
  (``eval/predictions/TASK.json``): the units of the bootstrap that gives a
  comparison its interval where a row has fewer than three seeds
  (:mod:`.aaa_examples`).

Wang et al.'s patterns are the project's mask tokens (:func:`pattern`):
Local_k is ``local-k`` (|i − j| ≤ k, §2.2 "offsets {0, 1, ..., N_o}"; Local₂
keeps 5N − 6 entries, footnote 5), Global_g is ``global-g`` (the first g
tokens as rows and columns, r_k = k, c_l = l, Eq. 7), Random_r is
``random-wang-r`` (2rN positions, "the number of positions selected divided
by 2N"), joined by ``+`` (the OR of Eq. 8); every fixed pattern enters before
the softmax (Eq. 5: ``--mask-mode pre``).

Reduced scales (``tiny``, ``small``) use the stand-in corpus and hard GLUE
stand-ins every paper shares (:func:`.pande.add_data_steps`), the reduced
BERT of Pande's plan (:data:`.pande.BERT_MODEL`, 4 layers of 4 heads at width
64) *with BERT's segment embedding* (:data:`.pande.SEGMENTS`): Wang et al.
fine-tune bert-base-cased, which has one, and without it the reduced model
stays near the pair tasks' floors (docs/reproductions/README.md), while every
task here is a pair task.  ``convert-roberta`` reads stock fairseq RoBERTa,
which has no segment embedding; so the full model is pretrained as
``roberta_local_base`` (all heads global; at the reduced scales it is the
BERT-base that Pande's and Pascual's plans share, :func:`.pande.add_bert_base`)
and each fine-tuning run names its
layout (``--attn-layout``, after ``--``: a new stage from the checkpoint, its
learned extras freshly initialised).  ``tiny`` runs MNLI and QQP: the largest
two of Fig. 2's tasks, one on each side of its local/global finding (W5), and
the learnable stand-in pair tasks (QNLI's stand-in stays near 74 %);
``small`` adds QNLI.  Table 3's fixed diagonal cannot come from a
masked-LM SparseBERT here: a dam-s mask keeps whole offsets, and offsets learnt
on 64–128-token blocks keep far more of a 31-token pair than their ρ says.
It is copied from the task-adaptive run on the next task of the list instead
(learned at the same ρ_target on sentences of similar length, not on this
task: the fixed/adaptive contrast of Table 3), exported with ``fairseq-local
export`` and fixed with ``--mask-file``.  AAA's ρ_target for a task is the
fixed pattern's ρ at the task's mean dev length (:data:`DEV_LENGTHS`, measured
on the stand-ins), where the paper sets it to each pattern's measured dev ρ.

``paper`` is Wang et al.'s setting for GPUs (``--dry-run`` prints it):
three 12 × 12 models pretrained for 1M updates of 256 sequences, a SparseBERT
(dam-s, SparseBERT's λ 1e-4) pretrained as the source of Table 3's fixed
pattern, every run fine-tuned with ``--recipe aaa`` (30k updates of 32 × 4,
Hugging Face's defaults) on the eight GLUE tasks, Fig. 2's sizes 1–8 on
MNLI, QNLI, QQP, and ρ_target the paper's own per-task values.
"""

from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from .numbers_aaa import AAA_FIG2, AAA_TABLE3, AAA_TABLE4, AAA_TASKS
from .pande import (BERT_MODEL, BERT_ROWS, FT_BATCH, FT_LR, SCALES as PANDE_SCALES, SEGMENTS, add_bert_base,
                    add_data_steps, pretrained)
from .pande import bert_run as pande_bert_run, pretrain_cmd as pande_pretrain_cmd
from .given_bert import add_given_bert
from .plan import Plan
from .sparsebert import layout, model_shape, paper_data_steps

PAPER = "aaa"
TITLE = "# Wang et al. (Adaptive Axis Attention), reproduced"  # the report's first line starts so
# Eq. 10's hinge on the learned heads (aaa and DAM: Wang et al. §4.1's sparsity-controllable training of
# the diagonal patterns), fairseq_local/criteria/penalized.py --aaa-hinge-heads.
HINGE = ("--aaa-hinge-heads", "learned")
PRE = ("--mask-mode", "pre")  # Eq. 5: B^S enters the scores before the softmax
N = 128                       # the reduced models' positions (DAM and exported masks cover them)
ALPHA = "1.0"                 # α of Eq. 10, rising linearly to half the updates (--recipe aaa's default)
# The AAA selector's learning-rate scale (--aaa-lr-scale, docs/methods.md): under Adam a fresh selector's
# logits move about lr per update and must move about 1; s·lr·updates ≈ 2 reached ρ_target without
# overshoot in a measured run.  Reduced scales: lr 1e-3 for 1000-2000 updates; the paper's lr: 1 (none).
AAA_LR_SCALE = {"tiny": "2", "small": "1", "paper": "1"}
# The same for Table 3's learned diagonals (--dam-lr-scale): at s = 1 a tiny fine-tune moved dev ρ only
# from 0.44 to 0.56 toward 0.80.
DAM_LR_SCALE = {"tiny": "3", "small": "2", "paper": "1"}
TABLE3_TARGET = 0.80          # reduced scales: ρ_target of Table 3 (paper rows 0.83-0.89; dam-s keeps 4N-4)
SPARSEBERT_LAMBDA = "1e-4"    # paper scale: the pre-trained SparseBERT's λ (its DAM_s, 91.2 % at n = 128)
# Mean dev length in tokens (<s> s1 </s> </s> s2 </s>) of the hard stand-ins, measured on
# RUNS/data-SCALE/glue-hard (tiny: --lexicon 40,16,20 --max-len 20; small: 200,60,60 and 30).
DEV_LENGTHS = {"tiny": {"MNLI": 31, "QQP": 39, "QNLI": 29, "CoLA": 20, "SST-2": 20},
               "small": {"MNLI": 44, "QQP": 60, "QNLI": 41, "CoLA": 31, "SST-2": 33}}
# Measured minutes per 1000 fine-tuning updates of batch 32, two steps at a time (tiny stand-ins,
# full attention; RUNS/.steps of reproduce pande and sparsebert: MNLI 1.8, from 108 s with nothing
# else running), and the factors of the layouts.
FT_MINUTES = {"MNLI": 1.8, "QQP": 2.2, "QNLI": 1.7, "SST-2": 1.4, "CoLA": 1.4}
SPARSE_COST, LEARNED_COST = 1.15, 1.4  # fixed masks before the softmax; DAM (measured 1.3) and AAA


@dataclass(frozen=True)
class Row:
    """One fine-tuning configuration: its name in the paper, the pretrained
    model it starts from, its kind and head token."""

    key: str
    name: str
    model: str                   # "full", "l2g2", "l2g1r1": the pretrained model it starts from
    kind: str                    # "full", "fixed", "file", "dam", "dam-layer", "aaa"
    token: Optional[str] = None  # the head token of a fixed pattern
    target_of: Optional[str] = None  # aaa: the fixed row whose ρ is its target


def pattern(local: int, glob: int, rand: int = 0) -> str:
    """Wang et al.'s Local_k + Global_g [+ Random_r] as a head token (§2.2, Eq. 6–8)."""
    return f"local-{local}+global-{glob}" + (f"+random-wang-{rand}" if rand else "")


def pattern_name(local: int, glob: int, rand: int = 0) -> str:
    return f"Local{local} + Global{glob}" + (f" + Random{rand}" if rand else "")


# Table 4's fixed patterns (§4.3): row key -> (local, global, random)
FIXED = {"l2g2": (2, 2, 0), "l3g1": (3, 1, 0), "l2g1r1": (2, 1, 1), "l1g1r2": (1, 1, 2)}
PRETRAINED = ("l2g2", "l2g1r1")  # Table 1's sparse pre-trained patterns
AAA_ROWS = {"aaa-l2g2": "l2g2", "aaa-l2g1r1": "l2g1r1", "aaa-l1g1r2": "l1g1r2"}  # AAA row -> its fixed row


@dataclass(frozen=True)
class Scale:
    """What one scale runs."""

    tasks: Tuple[str, ...]
    fig2_tasks: Tuple[str, ...]
    sizes: Tuple[int, ...]         # Fig. 2's pattern sizes (2 included)
    seeds: Tuple[int, ...]         # the rows of SPREAD_ROWS: the spread over seeds
    bert_updates: int
    ft_updates: Optional[int]      # None: --recipe aaa's 30k
    length_factor: float           # fine-tuning time against tiny's (longer sentences)
    minutes: Optional[Tuple[float, float, float]]  # pretrain, evaluate (one group), export


SCALES = {
    # tiny: Fig. 2's ends and base (1, 2, 8) on MNLI only, and 750 fine-tuning updates (measured: Full at
    # 90.2 / 90.8 on MNLI / QQP against 93.0 / 92.0 at 1,000; AAA's ρ at its target by update 250), to fit
    # 45 minutes; small adds size 4, QNLI and 2,000 updates
    "tiny": Scale(tasks=("MNLI", "QQP"), fig2_tasks=("MNLI",), sizes=(1, 2, 8), seeds=(1, 2, 3),
                  bert_updates=300, ft_updates=750, length_factor=1.0, minutes=(1.2, 0.19, 0.05)),
    "small": Scale(tasks=("MNLI", "QQP", "QNLI"), fig2_tasks=("MNLI", "QQP", "QNLI"), sizes=(1, 2, 4, 8),
                   seeds=(1, 2, 3), bert_updates=1000, ft_updates=2000, length_factor=1.45,
                   minutes=(1.4, 0.15, 0.05)),
    # §3.1: 8 GLUE tasks (no WNLI), Fig. 2 on the three largest with sizes 1-8
    "paper": Scale(tasks=AAA_TASKS, fig2_tasks=AAA_FIG2["tasks"], sizes=AAA_FIG2["sizes"], seeds=(1, 2, 3),
                   bert_updates=1_000_000, ft_updates=None, length_factor=1.0, minutes=None),
}
SPREAD_ROWS = ("full", "l2g2", "aaa-l2g2")  # run with every seed of the scale (the spread); the rest with the first


def rows(s: Scale) -> Dict[str, Row]:
    """Every fine-tuning row of the plan, in report order."""
    out: Dict[str, Row] = {"full": Row("full", "Full", "full", "full")}
    for key in PRETRAINED:
        name = pattern_name(*FIXED[key])
        out[f"{key}-pt"] = Row(f"{key}-pt", f"{name} (pre-train & fine-tune)", key, "fixed", pattern(*FIXED[key]))
    for key, sizes in FIXED.items():
        out[key] = Row(key, pattern_name(*sizes), "full", "fixed", pattern(*sizes))
    for k in s.sizes:  # Fig. 2: one size varies, the other stays at the base size 2
        for key, sizes in ((f"l{k}g2", (k, 2)), (f"l2g{k}", (2, k))):
            out.setdefault(key, Row(key, pattern_name(*sizes), "full", "fixed", pattern(*sizes)))
    out["diag-fixed"] = Row("diag-fixed", "Fixed", "full", "file")
    out["diag-task"] = Row("diag-task", "Task-adaptive", "full", "dam")
    out["diag-task-layer"] = Row("diag-task-layer", "Task & Layer-adaptive", "full", "dam-layer")
    for key, fixed in AAA_ROWS.items():
        out[key] = Row(key, f"AAA (at the rho of {pattern_name(*FIXED[fixed])})", "full", "aaa", "aaa", fixed)
    return out


def fig2_rows(s: Scale) -> List[str]:
    return [f"l{k}g2" for k in s.sizes] + [f"l2g{k}" for k in s.sizes if k != 2]


def row_seeds(s: Scale, key: str) -> Tuple[int, ...]:
    return s.seeds if key in SPREAD_ROWS else s.seeds[:1]


def row_tasks(s: Scale, key: str) -> Tuple[str, ...]:
    """Fig. 2's rows (other than Table 1's and Table 4's) run on its tasks only."""
    shared = set(FIXED) | {"full"}
    return s.fig2_tasks if key in fig2_rows(s) and key not in shared else s.tasks


def target(scale: str, row: Row, task: str) -> float:
    """ρ_target of Eq. 10 for ``row`` on ``task`` (0 for the rows without a
    hinge): Table 4's AAA rows the fixed pattern's ρ (reduced: at the task's
    mean dev length, :data:`DEV_LENGTHS`; paper: Table 4's printed ρ), Table
    3's learned diagonals :data:`TABLE3_TARGET` (paper: Table 3's Fixed ρ)."""
    if row.kind == "aaa":
        fixed = FIXED[row.target_of]  # type: ignore[index]
        if scale == "paper":
            return AAA_TABLE4[pattern_name(*fixed)][task][0] / 100
        from fairseq_local.attention.masks.measure import sparsity

        return round(sparsity(pattern(*fixed), DEV_LENGTHS[scale][task]), 3)
    if row.kind in ("dam", "dam-layer"):
        return AAA_TABLE3["Fixed"][task][0] / 100 if scale == "paper" else TABLE3_TARGET
    return 0.0


def bert_dir(plan: Plan, key: str) -> Path:
    """A pretrained model's folder: the full model at the reduced scales is
    their shared BERT-base (:func:`.pande.bert_run`, Pande's very step)."""
    if key == "full" and plan.scale != "paper":
        return pande_bert_run(plan, BERT_ROWS[0])
    return plan.out / "bert" / key


def ft_dir(plan: Plan, row: str, seed: int) -> Path:
    """The fine-tuning runs of one row and seed: TASK/ and eval/TASK.json."""
    return plan.out / "glue" / row / f"s{seed}"


def source_task(s: Scale, task: str) -> str:
    """Reduced scales: the task whose task-adaptive diagonal is Table 3's fixed one on ``task`` (the next)."""
    return s.tasks[(s.tasks.index(task) + 1) % len(s.tasks)]


def mask_file(plan: Plan, s: Scale, task: str) -> Path:
    """Table 3's fixed diagonal for ``task``: the pre-trained SparseBERT's
    (paper) or the task-adaptive run's on :func:`source_task` (reduced)."""
    if plan.scale == "paper":
        return bert_dir(plan, "sparsebert") / "hard.pt"
    return plan.out / "masks" / f"dam-s-{source_task(s, task)}.pt"


def row_options(plan: Plan, s: Scale, row: Row, task: str, shape: Tuple[int, int]) -> List:
    """The options after ``--`` that give ``row``'s attention (a new stage from its pretrained model)."""
    if row.kind == "full":
        return []
    if row.kind == "fixed":
        return ["--attn-layout", layout(row.token, shape), *PRE]  # type: ignore[arg-type]
    if row.kind == "file":
        return ["--mask-file", mask_file(plan, s, task), "--attn-layout", layout("file", shape), *PRE]
    if row.kind == "aaa":
        return ["--attn-layout", layout("aaa", shape), *PRE, *HINGE, "--aaa-lr-scale", AAA_LR_SCALE[plan.scale]]
    per_layer = ["--dam-per-layer"] if row.kind == "dam-layer" else []
    return ["--attn-layout", layout("dam-s", shape), *PRE, *HINGE, "--dam-lr-scale", DAM_LR_SCALE[plan.scale],
            *per_layer]


def ft_minutes(s: Scale, row: Row, task: str) -> Optional[float]:
    if s.minutes is None:
        return None
    cost = {"full": 1.0, "fixed": SPARSE_COST, "file": SPARSE_COST}.get(row.kind, LEARNED_COST)
    return round(FT_MINUTES[task] * cost * s.length_factor * s.ft_updates / 1000, 2)  # type: ignore[operator]


def predictions_dir(plan: Plan, row: str, seed: int) -> Path:
    """Per-example dev predictions of one row and seed (``TASK.json``: gold and predicted labels)."""
    return ft_dir(plan, row, seed) / "eval" / "predictions"


def build(scale: str, runs: Path, device: str = "cpu", bert: Optional[str] = None) -> Plan:
    """The plan of ``scale`` with its runs under ``runs``; ``device`` ("cpu"
    or "cuda") where the reduced scales train and evaluate (``paper``: GPUs);
    ``bert`` (``paper`` only): a Hugging Face BERT-base folder that replaces
    the pretrained full model (§3.1: "as in the official bert-base-cased"),
    converted and fine-tuned on GLUE prepared with its WordPiece."""
    if bert is not None and scale != "paper":
        raise ValueError(f"--bert replaces the paper scale's full model; the {scale} scale keeps its reduced one")
    s = SCALES[scale]
    paper = scale == "paper"
    plan = Plan(PAPER, scale, runs, s.seeds, device=device, bert=bert)
    cuda = ["--cuda"] if paper or device != "cpu" else []
    shape = (12, 12) if paper else model_shape()
    if paper:
        d = paper_data_steps(plan)
    else:
        d = add_data_steps(plan, PANDE_SCALES[scale], nmt=False)
    given = add_given_bert(plan, bert, d["glue_raw"], s.tasks) if bert is not None else None
    t_pre, t_eval, t_exp = s.minutes if s.minutes else (None, None, None)
    to_pretrain = {**({} if given else {"full": ("Full attention", [])}),
                   **{k: (pattern_name(*FIXED[k]), ["--attn-layout", layout(pattern(*FIXED[k]), shape), *PRE])
                      for k in PRETRAINED}}
    if paper:  # Table 3's source: a SparseBERT (dam-s) pre-trained with its L1 term
        to_pretrain["sparsebert"] = ("SparseBERT (dam-s)", ["--attn-layout", layout("dam-s", shape), *PRE,
                                                            "--dam-lambda", SPARSEBERT_LAMBDA])
    for key, (what, opts) in to_pretrain.items():
        if paper:  # §3.1: 1M updates of 32 x 8 devices, Hugging Face's defaults (lr 5e-5, no warm-up)
            cmd = ["bash", "scripts/pretrain-bert.sh", "roberta_local_base", "--data", d["corpus"], "--save-dir",
                   bert_dir(plan, key), "--updates", s.bert_updates, "--updates-512", 0, "--lengths", "512,512",
                   "--max-positions", 512, "--batch-size", 32, "--update-freq", 8, "--lr", "5e-5", "--warmup", 0,
                   "--", SEGMENTS, *opts, "--adam-betas", "(0.9, 0.999)", "--adam-eps", "1e-8",
                   "--weight-decay", "0.0"]
        elif key == "full":  # the shared BERT-base: Pande's very step
            add_bert_base(plan, PANDE_SCALES[scale], d)
            continue
        else:  # Pande's recipe (pande.pretrain_cmd) with the pattern's layout
            cmd = pande_pretrain_cmd(plan, PANDE_SCALES[scale], d, bert_dir(plan, key), opts)
        plan.add(f"{PAPER}/bert/{key}/pretrain", f"{what}: masked-LM pretraining", cmd,
                 t_pre if paper else PANDE_SCALES[scale].minutes[2])
    if paper:
        plan.add(f"{PAPER}/masks/sparsebert", "the pre-trained SparseBERT's mask 1[alpha > 0] (Table 3's Fixed)",
                 ["fairseq-local", "export", bert_dir(plan, "sparsebert") / "checkpoint_last.pt", "--out",
                  mask_file(plan, s, ""), "--n", 512], folders=[mask_file(plan, s, "").parent])
    all_rows = rows(s)

    def group(row: Row, seed: int) -> None:
        tasks = row_tasks(s, row.key)
        glue = given.glue if given and row.model == "full" else d["glue"]  # the given BERT's own WordPiece
        start = given.checkpoint if given and row.model == "full" else pretrained(plan, bert_dir(plan, row.model))
        for task in tasks:
            cmd = ["bash", "scripts/finetune-glue.sh", "--data", glue / f"{task}-bin", "--task", task,
                   "--checkpoint", start, "--save-dir",
                   ft_dir(plan, row.key, seed) / task, "--recipe", "aaa", "--aaa-target", target(scale, row, task),
                   "--aaa-alpha", ALPHA if row.kind in ("aaa", "dam", "dam-layer") else 0]
            if not paper:  # fewer updates of one batch of 32, the reduced lr and its warm-up
                cmd += ["--max-update", s.ft_updates, "--batch-size", FT_BATCH, "--lr", FT_LR, "--max-positions", N,
                        *plan.cpu_flag(), "--", *BERT_MODEL, "--update-freq", 1, "--warmup-updates",
                        s.ft_updates // 10]
            else:
                cmd += ["--"]
            cmd += [*row_options(plan, s, row, task, shape), "--seed", seed]
            plan.add(f"{PAPER}/glue/{row.key}/s{seed}/{task}", f"{row.name} [{row.key}]: fine-tuning on {task}, "
                     f"seed {seed}", cmd, ft_minutes(s, row, task))
        plan.add(f"{PAPER}/glue/{row.key}/s{seed}/eval", f"{row.key}: GLUE dev metrics, seed {seed}",
                 ["bash", "scripts/evaluate-glue.sh", "--runs", ft_dir(plan, row.key, seed), "--data", glue,
                  "--glue-dir", d["glue_raw"], "--out", ft_dir(plan, row.key, seed) / "eval", "--tasks",
                  " ".join(tasks), *cuda], t_eval)
        if seed == s.seeds[0]:  # the units of the bootstrap over dev examples (rows with fewer than 3 seeds)
            plan.add(f"{PAPER}/glue/{row.key}/s{seed}/predictions", f"{row.key}: dev predictions per example, "
                     f"seed {seed}", ["python", "-m", "fairseq_local_reproduce.pande_predict", "--runs",
                                      ft_dir(plan, row.key, seed), "--data", glue, "--glue-dir", d["glue_raw"],
                                      "--tasks", *tasks, "--out", predictions_dir(plan, row.key, seed), *cuda],
                     None if t_eval is None else round(t_eval * len(tasks) / 2, 2))

    for key in ("diag-task", *[k for k in all_rows if k != "diag-task"]):
        if key == "diag-fixed" and not paper:  # export each task's task-adaptive mask (seed 1) first
            for task in s.tasks:
                ckpt = ft_dir(plan, "diag-task", s.seeds[0]) / task / "checkpoint_best.pt"
                plan.add(f"{PAPER}/masks/dam-s-{task}", f"the task-adaptive diagonal learnt on {task}: "
                         "1[alpha > 0] (Table 3's Fixed on another task)",
                         ["fairseq-local", "export", ckpt, "--out", plan.out / "masks" / f"dam-s-{task}.pt",
                          "--n", N], t_exp, folders=[plan.out / "masks"])
        for seed in row_seeds(s, key):
            group(all_rows[key], seed)
        if key == "diag-task-layer" and not paper:  # its mask at n = N, for the report's ρ at n = 128
            for task in s.tasks:
                ckpt = ft_dir(plan, key, s.seeds[0]) / task / "checkpoint_best.pt"
                plan.add(f"{PAPER}/masks/dam-s-layer-{task}", f"the task & layer-adaptive diagonal learnt on {task}: "
                         "1[alpha > 0] at n = 128 (its sparsity there)",
                         ["fairseq-local", "export", ckpt, "--out", layer_mask_file(plan, task), "--n", N], t_exp,
                         folders=[plan.out / "masks"])
    return plan


def layer_mask_file(plan: Plan, task: str) -> Path:
    """Reduced scales: the task & layer-adaptive diagonal learnt on ``task`` (seed 1), exported at n = N."""
    return plan.out / "masks" / f"dam-s-layer-{task}.pt"


def col(task: str, table1: bool = False) -> str:
    """The column of ``task``: MNLI matched, or mismatched in Table 1 ("Acc (mm)")."""
    return ("MNLI-mm" if table1 else "MNLI-m") if task == "MNLI" else task
