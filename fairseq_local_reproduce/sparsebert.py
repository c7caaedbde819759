"""Shi et al., "SparseBERT: Rethinking the Importance Analysis in
Self-attention" (ICML 2021): the plan of ``fairseq-local reproduce sparsebert``.

* Fig. 2 (§3.1, findings S1–S3): the importance P = sigmoid(α) (Eq. 3) learned
  as §3.1 learns it: the soft mask P ⊙ A after the softmax (Eq. 4, ``--mask-mode
  post``), no Gumbel noise (§3.1 uses the sigmoid; the Gumbel-sigmoid is §4.1's
  DAM: "Instead of using the sigmoid function ... as in (3), we use the
  Gumbel-sigmoid") and no sparsity penalty (the L1 term is Eq. 5 of §4.1), α
  symmetric and shared among blocks (§3.1.1): ``roberta_dam_u --dam-no-noise
  --mask-mode post --dam-lambda 0``.
* Table 1 (§3.3): BERT-base with full attention, with random entries dropped
  (``random-drop``), and without the diagonal (``no-diag``); three seeds.
* Table 3 (§4.2): DAM_u and DAM_s (Alg. 1, Eq. 5) at a sweep of λ against
  Star, LogSparse, Strided, Fixed, Longformer and BigBird with §4.2's parameters.
* Fig. 3 (§3.4): two-stage masks, P pruned per head against as many entries
  pruned at random, then fine-tuned with the mask fixed (``--mask-file F
  --attn-layout '[file*H]*L'``).
* Fig. 6 (§4.3): the one-stage DAM runs of Table 3 against those two-stage runs.

"At the same sparsity" is matched on the evaluated sentences (the dev
sentences' ρ = 1 − |M|/n², their mean; :mod:`.sparsebert_masks`): Fig. 3's
masks at every scale, and at the reduced scales also the random drop (matched
to the diagonal's n entries per sentence; §3.3's "the same number (128)" holds
at n = 128 only) and the random parts of Longformer and BigBird (§4.2's "two
input locations randomly selected" drawn among the positions the sentences
have; drawn among 128 they lie beyond the stand-in sentences of 10-40 tokens).
At paper scale those three keep the authors' n = 128 patterns, pretrained at
n = 128; the report gives both sparsities.

Reduced scales (``tiny``, ``small``) use the hard stand-in GLUE tasks and
the stand-in corpus that every paper shares, pretrain ONE full-attention
model (fairseq's ``roberta_base`` in Pande's reduced shape, ``pande.BERT_MODEL``:
4 layers of 4 heads at width 64, pre-norm), convert it into every layout
(``fairseq-local convert-roberta``) and fine-tune with ``finetune-glue.sh
--recipe sparsebert`` and fewer updates.  The paper learns its masks and P in
pre-training; here they are learned while fine-tuning, what 2 CPU cores
afford, and P's α with its learning rate scaled so that it can move as far as
in the paper's pre-training (:func:`p_lr_scale`).  ``tiny`` fine-tunes on CoLA
alone, every row with three seeds: its hard labels (subject–verb agreement
across a relative clause or PP with an attractor) need a token to reach a
non-adjacent subject, which is what the masks differ in; Table 1 shows the
paper's largest no-diag gain on CoLA (+1.0 dev); and the one task-specific
claim of Fig. 3 (S9) is CoLA's.  ``small`` adds SST-2 and QNLI (Fig. 6's
task), with one seed per Table 3 and Fig. 3 row.

``paper`` is the paper's own setting, for GPUs: BERT-base on the BERT corpus,
every row pretrained with its mask (Devlin et al.'s recipe at n = 128) and
fine-tuned on Table 1's eight GLUE tasks (Appendix C, ``--recipe
sparsebert``), the four λ of Table 3, the §3.1 run as the source of Figs. 2,
3 and 6.
"""

from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from .pande import BERT_MODEL, FT_BATCH, SCALES as PANDE_SCALES, add_data_steps
from .plan import Plan
from .sparsebert_runs import columns, gather, mean, metric, valid_rho  # noqa: F401 (the report's and aaa's readers)

PAPER = "sparsebert"
TITLE = "# SparseBERT, reproduced"  # the report's first line starts so
N = 128  # SparseBERT's sequence length (§3.1.1): masks are exported and compared at n = 128
TABLE1 = {"base": "BERT-base (ours)", "random-drop": "BERT-base (randomly dropped)",
          "no-diag": "BERT-base (no diag-attention)"}
# Table 3's fixed baselines with §4.2's parameters (fairseq-local sparsity's TABLE3): row -> (paper name, token)
FIXED = {"star": ("Star", "star"), "logsparse": ("LogSparse", "logsparse"), "strided": ("Strided", "strided-4"),
         "fixed": ("Fixed", "fixed-4-1"), "longformer": ("Longformer", "longformer-2-2"),
         "bigbird": ("BigBird", "bigbird-1-2-2")}
RANDOM_DROP = "random-drop-s1"  # paper scale: one random pattern of 128 dropped entries (§3.3.3), every head's
PRUNE_SEED = 1  # the random baseline of Fig. 3 (sparsebert_masks prune --random SEED)
# Reduced scales: rows whose random part is drawn on the evaluated sentences (sparsebert_masks KIND PARAMS)
FILE_ROWS = {"random-drop": ("random-drop",), "longformer": ("longformer", 2, 2), "bigbird": ("bigbird", 1, 2, 2)}
P_OPTS = ("--dam-no-noise", "--mask-mode", "post", "--dam-lambda", 0)  # §3.1: sigmoid P, P ⊙ A, no penalty
P_SEED = 1  # the reduced scales' P is learned once per task, with this seed
# Σ_t lr_t that α gets in §3.1's pre-training: Devlin et al.'s lr 1e-4 over 1M updates, warm-up then linear
# decay (Σ = lr·T/2); the reduced P runs scale α's learning rate (--dam-lr-scale) to the same sum.
P_LR_SUM = 1e-4 * 1_000_000 / 2
MASKS = "python", "-m", "fairseq_local_reproduce.sparsebert_masks"
# The models converted from (reduced) or pretrained as (paper) each row: key -> (arch, head token or None).
MODELS: Dict[str, Tuple[str, Optional[str]]] = {
    "base": ("roberta_local_base", None), "random-drop": ("roberta_local_base", RANDOM_DROP),
    "no-diag": ("roberta_local_base", "no-diag"), "dam-u": ("roberta_dam_u", "dam-u"),
    "dam-s": ("roberta_dam_s", "dam-s"), **{k: (f"roberta_sparse_{k}", tok) for k, (_, tok) in FIXED.items()}}
PAPER_TASKS = ("CoLA", "SST-2", "MRPC", "STS-B", "QQP", "MNLI", "QNLI", "RTE")  # Table 1's GLUE tasks


@dataclass(frozen=True)
class Scale:
    """What one scale runs."""

    tasks: Tuple[str, ...]
    seeds: Tuple[int, ...]        # Table 1's fine-tuning seeds: the spread
    sweep_seeds: Tuple[int, ...]  # Table 3, Figs. 3 and 6
    lambdas: Tuple[float, ...]    # DAM's λ (Eq. 5)
    prune: Tuple[int, ...]        # Fig. 3: ρ (%) realised on the dev sentences by pruning P, and at random
    bert_updates: int             # masked-LM updates
    ft_updates: Optional[int]     # fine-tuning updates (None: the recipe's 3 epochs)
    ft_lr: Optional[str]          # fine-tuning peak lr (None: the recipe's 2e-5)
    # estimated minutes on 2 CPU cores: pretrain, convert, fine-tune (one task), evaluate (one group), mask file
    minutes: Optional[Tuple[float, float, float, float, float]]
    fig6_prune: Tuple[int, ...] = ()     # further two-stage masks of Fig. 6 only
    fig6_tasks: Tuple[str, ...] = ()


# tiny: the shared data, then 8 conversions, 3 mask files, the P run, 57 fine-tunes of 1000 updates and their
# 57 evaluations (three seeds per row), and 6 Fig. 3 masks, two steps at a time (estimates per step as it runs).
SCALES = {
    "tiny": Scale(tasks=("CoLA",), seeds=(1, 2, 3), sweep_seeds=(1, 2, 3), lambdas=(1e-4, 1e-1), prune=(30, 60, 90),
                  bert_updates=300, ft_updates=1000, ft_lr="1e-3", minutes=(1.2, 0.05, 1.3, 0.15, 0.05)),
    "small": Scale(tasks=("CoLA", "SST-2", "QNLI"), seeds=(1, 2, 3), sweep_seeds=(1,), lambdas=(1e-4, 1e-2, 1e-1),
                   prune=(30, 50, 70, 90), bert_updates=1000, ft_updates=2000, ft_lr="1e-3",
                   minutes=(1.4, 0.05, 2.0, 0.1, 0.05)),
    # §4.2 and Appendix C (numbers_sparsebert.SPARSEBERT_SETUP, _FIG3, _FIG6); 1M updates of 256 at n = 128
    # are Devlin et al.'s recipe (§A.2), which SparseBERT follows (§3.1.1)
    "paper": Scale(tasks=PAPER_TASKS, seeds=(1, 2, 3), sweep_seeds=(1,), lambdas=(1e-4, 1e-3, 1e-2, 1e-1),
                   prune=(10, 20, 30, 40, 50, 60, 70, 80, 90), bert_updates=1000000, ft_updates=None, ft_lr=None,
                   minutes=None, fig6_prune=(80, 85, 90, 95), fig6_tasks=("QNLI", "MRPC")),
}


def lam_name(lam: float) -> str:
    """λ as the paper prints it: 1e-4, 1e-1 (else %g)."""
    for e in range(-8, 3):
        if lam == 10.0 ** e:
            return f"1e{e}"
    return f"{lam:g}"


def model_shape(flags: Sequence = BERT_MODEL) -> Tuple[int, int]:
    """(layers, heads) of the reduced model: BERT-base's 12 x 12 unless the flags say otherwise."""
    flags = [str(f) for f in flags]

    def value(name: str) -> int:
        return int(flags[flags.index(name) + 1]) if name in flags else 12
    return value("--encoder-layers"), value("--encoder-attention-heads")


def layout(token: str, shape: Tuple[int, int]) -> str:
    """Every head of every layer ``token``: '[no-diag*12]*12'."""
    return f"[{token}*{shape[1]}]*{shape[0]}"


def dam_row(kind: str, lam: float) -> str:
    """Table 3's DAM row: dam-u-1e-4, dam-s-1e-1."""
    return f"dam-{kind}-{lam_name(lam)}"


def dam_rows(s: Scale) -> List[str]:
    return [dam_row(k, lam) for k in ("u", "s") for lam in s.lambdas]


def fig3_rows(s: Scale) -> List[str]:
    return [f"{how}-{p}" for p in s.prune for how in ("prune", "random")]


def p_lr_scale(s: Scale) -> int:
    """``--dam-lr-scale`` of a reduced P run: α's summed learning rate (lr·T/2
    under warm-up and linear decay) made :data:`P_LR_SUM`, the paper's (tiny:
    100, small: 50).  With the plain lr P stayed within 0.49-0.51 (300 updates on
    the CoLA stand-in); × 100 it spans 0.001-0.999 after 1000."""
    return max(1, round(P_LR_SUM / (float(s.ft_lr) * s.ft_updates / 2)))  # type: ignore[arg-type, operator]


def bert_dir(plan: Plan, key: str = "roberta_base") -> Path:
    return plan.out / "bert" / key


def converted(plan: Plan, key: str) -> Path:
    """The pretrained model converted into ``key``'s layout (next to it)."""
    return bert_dir(plan) / f"as-{key}.pt"


def ft_dir(plan: Plan, row: str, seed: int) -> Path:
    """The fine-tuning runs of one row and seed: TASK/ and eval/TASK.json."""
    return plan.out / "glue" / row / f"s{seed}"


def p_checkpoint(plan: Plan, task: str) -> Path:
    """Where §3.1's P is: the pretrained P model (paper), the task's P run (reduced)."""
    if plan.scale == "paper":
        return bert_dir(plan, "p") / "checkpoint_last.pt"
    return ft_dir(plan, "p", P_SEED) / task / "checkpoint_last.pt"


def mask_path(plan: Plan, how: str, pct: int, task: str) -> Path:
    """Fig. 3's mask file of one task (matched on its dev sentences)."""
    return plan.out / "masks" / task / (f"{how}-{pct}.pt" if how == "prune" else f"random-{pct}-s{PRUNE_SEED}.pt")


def row_mask(plan: Plan, row: str, task: str) -> Path:
    """The reduced scales' mask file of a :data:`FILE_ROWS` row on one task."""
    return plan.out / "masks" / task / f"{row}.pt"


def scale_of(name: str) -> Scale:
    return SCALES[name]


def _masks(plan: Plan, glue: Path, task: str, pct: int, how: str, minutes) -> None:
    """Fig. 3's two masks of ``task`` at realised ρ = pct % (§3.4)."""
    cmd = [*MASKS, "prune", "--checkpoint", p_checkpoint(plan, task), "--prune", pct, "--data", glue / f"{task}-bin",
           "--out", mask_path(plan, how, pct, task)]
    what = f"{task}: {'P' if how == 'prune' else 'random'}-pruned mask at {pct}% realised on the dev sentences (§3.4)"
    plan.add(f"{PAPER}/masks/{task}/{how}-{pct}", what, cmd + (["--random", PRUNE_SEED] if how == "random" else []),
             minutes)


def _finetune(plan: Plan, s: Scale, d: dict, row: str, key: str, seed: int, task: str, extra: Sequence) -> List:
    return ["bash", "scripts/finetune-glue.sh", "--data", d["glue"] / f"{task}-bin", "--task", task,
            "--arch", MODELS[key][0], "--checkpoint", converted(plan, key),
            "--save-dir", ft_dir(plan, row, seed) / task,
            "--recipe", "sparsebert", "--max-update", s.ft_updates, "--batch-size", FT_BATCH, "--lr", s.ft_lr,
            "--max-positions", N, *plan.cpu_flag(), "--", *BERT_MODEL, "--seed", seed, *extra]


def _predictions(plan: Plan, d: dict, row: str, seeds: Sequence[int], tasks: Sequence[str], cuda: List,
                 minutes) -> None:
    """A row with fewer than three seeds: its first seed's per-example dev
    predictions (:mod:`.pande_predict`), the units of a bootstrap over dev examples."""
    if len(seeds) >= 3:
        return
    plan.add(f"{PAPER}/glue/{row}/s{seeds[0]}/predictions", f"{row}: dev predictions per example, seed {seeds[0]}",
             ["python", "-m", "fairseq_local_reproduce.pande_predict", "--runs", ft_dir(plan, row, seeds[0]), "--data",
              d["glue"], "--glue-dir", d["glue_raw"], "--tasks", *tasks, "--out",
              ft_dir(plan, row, seeds[0]) / "eval" / "predictions", *cuda], minutes)


def build(scale: str, runs: Path, device: str = "cpu") -> Plan:
    """The plan of ``scale`` with its runs under ``runs``; ``device``: where
    the reduced scales train ("cpu" or "cuda")."""
    if scale == "paper":
        return build_paper(runs, device)
    s = SCALES[scale]
    plan = Plan(PAPER, scale, runs, sorted(set(s.seeds) | set(s.sweep_seeds)), device=device)
    d = add_data_steps(plan, PANDE_SCALES[scale], nmt=False)
    t_pre, t_conv, t_ft, t_eval, t_exp = s.minutes  # type: ignore[misc]
    shape = model_shape()
    file_opts = ["--attn-layout", layout("file", shape), "--mask-mode", "pre"]
    plan.add(f"{PAPER}/bert/pretrain", "fairseq's roberta_base (full attention): masked-LM pretraining",
             ["bash", "scripts/pretrain-bert.sh", "roberta_base", "--data", d["corpus"], "--save-dir", bert_dir(plan),
              "--updates", s.bert_updates, "--updates-512", 0, "--lengths", "64,128", "--max-positions", N,
              "--batch-size", 32, "--update-freq", 1, "--lr", "1e-3", "--warmup", s.bert_updates // 10,
              *plan.cpu_flag(), "--", *BERT_MODEL, "--dropout", "0.0", "--attention-dropout", "0.0", "--seed", 1],
             t_pre)
    for key, (arch, token) in MODELS.items():
        if key in FILE_ROWS:  # fine-tuned from "base" with a mask file drawn on the task's sentences
            continue
        cmd = ["fairseq-local", "convert-roberta", bert_dir(plan) / "checkpoint_last.pt", converted(plan, key),
               "--arch", arch]
        if token:
            cmd += ["--attn-layout", layout(token, shape)]
        if key == "no-diag":
            cmd += ["--mask-mode", "pre"]  # SparseBERT's fixed masks act before the softmax, as the baselines'
        plan.add(f"{PAPER}/convert/{key}", f"the pretrained model as {arch}" + (f" ({token})" if token else ""),
                 cmd, t_conv, outputs=[converted(plan, key)])
    for task in s.tasks:
        for row, (kind, *params) in FILE_ROWS.items():
            plan.add(f"{PAPER}/masks/{task}/{row}", f"{task}: the {row} mask drawn on the dev sentences' positions",
                     [*MASKS, kind, *params, "--data", d["glue"] / f"{task}-bin", "--out", row_mask(plan, row, task),
                      "--shape", ",".join(map(str, shape)), "--seed", 1], t_exp)
        plan.add(f"{PAPER}/glue/p/s{P_SEED}/{task}", f"§3.1's P (sigmoid, P ⊙ A, no penalty) learned on {task}",
                 _finetune(plan, s, d, "p", "dam-u", P_SEED, task, [*P_OPTS, "--dam-lr-scale", p_lr_scale(s)]), t_ft)

    def group(row: str, key: str, seeds: Sequence[int], extra=lambda task: []) -> None:
        for seed in seeds:
            for task in s.tasks:
                plan.add(f"{PAPER}/glue/{row}/s{seed}/{task}", f"{row}: fine-tuning on {task}, seed {seed}",
                         _finetune(plan, s, d, row, key, seed, task, extra(task)), t_ft)
            plan.add(f"{PAPER}/glue/{row}/s{seed}/eval", f"{row}: GLUE dev metrics, seed {seed}",
                     ["bash", "scripts/evaluate-glue.sh", "--runs", ft_dir(plan, row, seed), "--data", d["glue"],
                      "--glue-dir", d["glue_raw"], "--out", ft_dir(plan, row, seed) / "eval", "--tasks",
                      " ".join(s.tasks), *(["--cuda"] if device == "cuda" else [])], t_eval)
        _predictions(plan, d, row, seeds, s.tasks, ["--cuda"] if device == "cuda" else [], t_eval)

    def file_row(row: str) -> None:
        group(row, "base", s.seeds if row in TABLE1 else s.sweep_seeds,
              lambda task: ["--mask-file", row_mask(plan, row, task), *file_opts])

    for row in TABLE1:
        file_row(row) if row in FILE_ROWS else group(row, row, s.seeds)
    for kind in ("u", "s"):
        for lam in s.lambdas:
            group(dam_row(kind, lam), f"dam-{kind}", s.sweep_seeds,
                  lambda task, lam=lam: ["--dam-lambda", lam_name(lam)])
    for row in FIXED:
        file_row(row) if row in FILE_ROWS else group(row, row, s.sweep_seeds)
    for task in s.tasks:
        for pct in s.prune:
            for how in ("prune", "random"):
                _masks(plan, d["glue"], task, pct, how, t_exp)
    for pct in s.prune:
        for how in ("prune", "random"):
            group(f"{how}-{pct}", "base", s.sweep_seeds,
                  lambda task, how=how, pct=pct: ["--mask-file", mask_path(plan, how, pct, task), *file_opts])
    return plan


def paper_data_steps(plan: Plan) -> dict:
    """The BERT corpus (the same step as ``reproduce pande``'s) and Table 1's GLUE tasks."""
    data = plan.runs / "data-paper"
    d = {"corpus": data / "bert-corpus", "glue_raw": data / "glue", "glue": data / "glue-bin"}
    plan.add("data-paper/bert-corpus", "English Wikipedia + Gutenberg: extract, split, GPT-2 BPE, binarise",
             ["bash", "scripts/prepare-bert-corpus.sh", "--download", data / "bert-downloads", "--bpe", "gpt2",
              "--out", d["corpus"]])
    # GLUE itself: the official folder (GLUE's download script) in RUNS/data-paper/glue
    plan.add("data-paper/glue-sparsebert", "GLUE: Table 1's eight tasks (GPT-2 BPE)",
             ["bash", "scripts/prepare-glue.sh", "--glue-dir", d["glue_raw"], "--src-dict", d["corpus"] / "dict.txt",
              "--tasks", " ".join(PAPER_TASKS), "--out", d["glue"]])
    return d


def build_paper(runs: Path, device: str = "cpu") -> Plan:
    """The paper's own settings: each row pretrained with its mask (DAM with
    its λ; the §3.1 run with λ = 0, no noise and P ⊙ A), DAM masks fixed in
    fine-tuning (exported 1[α > 0]), every fine-tuning run with Appendix C's
    recipe on Table 1's tasks, Fig. 3's masks matched per task on its dev
    sentences.  For GPUs (``device`` is recorded; the scripts take the GPU);
    ``--dry-run`` prints it."""
    s = SCALES["paper"]
    plan = Plan(PAPER, "paper", runs, sorted(set(s.seeds) | set(s.sweep_seeds)), device=device)
    d = paper_data_steps(plan)
    shape = (12, 12)
    file_opts = ["--attn-layout", layout("file", shape), "--mask-mode", "pre"]
    models: Dict[str, Tuple[str, List]] = {}  # pretrained model -> (arch, options after "--")
    for key in TABLE1:
        arch, token = MODELS[key]
        models[key] = (arch, ["--attn-layout", layout(token, shape), "--mask-mode", "pre"] if token else [])
    for kind in ("u", "s"):
        for lam in s.lambdas:
            models[dam_row(kind, lam)] = (f"roberta_dam_{kind}", ["--dam-lambda", lam_name(lam)])
    for key in FIXED:
        models[key] = (MODELS[key][0], [])
    models["p"] = ("roberta_dam_u", list(P_OPTS))  # §3.1 exactly
    for key, (arch, opts) in models.items():
        plan.add(f"{PAPER}/bert/{key}/pretrain", f"{key}: {arch}, 1M updates of 256 sequences at n = 128",
                 ["bash", "scripts/pretrain-bert.sh", arch, "--data", d["corpus"], "--save-dir", bert_dir(plan, key),
                  "--updates", s.bert_updates, "--updates-512", 0, "--lengths", "128,128", "--max-positions", N,
                  "--batch-size", 32, "--update-freq", 8, "--lr", "1e-4", "--warmup", 10000, "--",
                  "--adam-betas", "(0.9, 0.999)", *opts])
    for row in dam_rows(s):  # masks learned in pre-training, fixed in fine-tuning (§4.2)
        plan.add(f"{PAPER}/masks/{row}/hard", f"{row}: the learned mask 1[alpha > 0]",
                 ["fairseq-local", "export", bert_dir(plan, row) / "checkpoint_last.pt", "--out",
                  bert_dir(plan, row) / "hard.pt", "--n", N])
    for pct in sorted(set(s.prune) | set(s.fig6_prune)):
        for how in ("prune", "random") if pct in s.prune else ("prune",):
            for task in s.tasks if pct in s.prune else s.fig6_tasks:
                _masks(plan, d["glue"], task, pct, how, None)

    def group(row: str, key: str, seeds: Sequence[int], tasks: Sequence[str], extra=lambda task: []) -> None:
        arch = models[key][0]
        for seed in seeds:
            for task in tasks:
                plan.add(f"{PAPER}/glue/{row}/s{seed}/{task}", f"{row}: fine-tuning on {task}, seed {seed}",
                         ["bash", "scripts/finetune-glue.sh", "--data", d["glue"] / f"{task}-bin", "--task", task,
                          "--arch", arch, "--checkpoint", bert_dir(plan, key) / "checkpoint_last.pt", "--save-dir",
                          ft_dir(plan, row, seed) / task, "--recipe", "sparsebert", "--", "--seed", seed, *extra(task)])
            plan.add(f"{PAPER}/glue/{row}/s{seed}/eval", f"{row}: GLUE dev metrics, seed {seed}",
                     ["bash", "scripts/evaluate-glue.sh", "--runs", ft_dir(plan, row, seed), "--data", d["glue"],
                      "--glue-dir", d["glue_raw"], "--out", ft_dir(plan, row, seed) / "eval", "--tasks",
                      " ".join(tasks), "--cuda"])
        _predictions(plan, d, row, seeds, tasks, ["--cuda"], None)

    for row in TABLE1:
        group(row, row, s.seeds, s.tasks)
    for row in dam_rows(s):
        group(row, row, s.sweep_seeds, s.tasks,
              lambda task, row=row: ["--mask-file", bert_dir(plan, row) / "hard.pt", *file_opts])
    for row in FIXED:
        group(row, row, s.sweep_seeds, s.tasks)
    for pct in sorted(set(s.prune) | set(s.fig6_prune)):
        for how in ("prune", "random") if pct in s.prune else ("prune",):
            tasks = s.tasks if pct in s.prune else s.fig6_tasks
            group(f"{how}-{pct}", "p", s.sweep_seeds, tasks,
                  lambda task, how=how, pct=pct: ["--mask-file", mask_path(plan, how, pct, task), *file_opts])
    return plan


