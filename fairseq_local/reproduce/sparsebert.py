"""Shi et al., "SparseBERT: Rethinking the Importance Analysis in
Self-attention" (ICML 2021): the plan of ``fairseq-local reproduce sparsebert``.

* Table 1 (§3.3): BERT-base with full attention, with 128 random entries of
  the 128×128 mask dropped (``random-drop``), and without the diagonal
  (``no-diag``); three seeds.
* Table 3 (§4.2): DAM_u and DAM_s (Alg. 1, Eq. 5) at a sweep of λ against
  Star, LogSparse, Strided, Fixed, Longformer and BigBird with §4.2's
  parameters; realised sparsity and the task metric.
* Fig. 3 (§3.4): two-stage masks, the smallest P % of P = sigmoid(α) pruned
  per head against as many entries pruned at random
  (``fairseq-local export --prune P [--prune-random SEED]``), then fine-tuned
  with the mask fixed (``--mask-file F --attn-layout '[file*H]*L'``).
* Fig. 6 (§4.3): the one-stage DAM runs of Table 3 against those two-stage
  runs (no runs of its own at the reduced scales).
* Fig. 2 (§3.1, findings S1–S3): read from a learned P.

Reduced scales (``tiny``, ``small``) use the hard stand-in GLUE tasks and
the stand-in corpus that every paper shares, pretrain ONE full-attention
model (fairseq's ``roberta_base`` in Pande's reduced shape, ``pande.BERT_MODEL``:
4 layers of 4 heads at width 64, pre-norm), convert it into every layout
(``fairseq-local convert-roberta``) and fine-tune with ``finetune-glue.sh
--recipe sparsebert`` and fewer updates.  The paper learns its masks in
pre-training; here DAM learns them while fine-tuning, what 2 CPU cores
afford.  ``tiny`` fine-tunes on CoLA alone: its hard labels (subject–verb
agreement across a relative clause or PP with an attractor) need a token to
reach a non-adjacent subject, which is what the masks differ in; Table 1 shows
the paper's largest no-diag gain on CoLA (+1.0 dev); and the one task-specific
claim of Fig. 3 (S9) is CoLA's.  ``small`` adds SST-2 and QNLI (Fig. 6's task).

``paper`` is the paper's own setting, for GPUs: BERT-base on the BERT corpus,
every row pretrained with its mask (Devlin et al.'s recipe at n = 128) and
fine-tuned on Table 1's eight GLUE tasks (Appendix C, ``--recipe
sparsebert``), the four λ of Table 3, the §3.1 run (λ = 0, no noise, P ⊙ A)
as the source of Figs. 2, 3 and 6.
"""

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from .pande import BERT_MODEL, FT_BATCH, SCALES as PANDE_SCALES, add_data_steps
from .plan import Plan
from .report import Values, glue_metric

PAPER = "sparsebert"
TITLE = "# SparseBERT, reproduced"  # the report's first line starts so
N = 128  # SparseBERT's sequence length (§3.1.1): masks are exported and compared at n = 128
TABLE1 = {"base": "BERT-base (ours)", "random-drop": "BERT-base (randomly dropped)",
          "no-diag": "BERT-base (no diag-attention)"}
# Table 3's fixed baselines with §4.2's parameters (fairseq-local sparsity's TABLE3): row -> (paper name, token)
FIXED = {"star": ("Star", "star"), "logsparse": ("LogSparse", "logsparse"), "strided": ("Strided", "strided-4"),
         "fixed": ("Fixed", "fixed-4-1"), "longformer": ("Longformer", "longformer-2-2"),
         "bigbird": ("BigBird", "bigbird-1-2-2")}
RANDOM_DROP = "random-drop-s1"  # one random pattern of 128 dropped entries (§3.3.3), the same for every head
PRUNE_SEED = 1  # export --prune-random SEED: the random baseline of Fig. 3
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
    prune: Tuple[int, ...]        # Fig. 3: % of P pruned per head, each also at random
    bert_updates: int             # masked-LM updates
    ft_updates: Optional[int]     # fine-tuning updates (None: the recipe's 3 epochs)
    ft_lr: Optional[str]          # fine-tuning peak lr (None: the recipe's 2e-5)
    # estimated minutes on 2 CPU cores: pretrain, convert, fine-tune (one task), evaluate (one group), export
    minutes: Optional[Tuple[float, float, float, float, float]]
    fig6_prune: Tuple[int, ...] = ()     # further two-stage masks of Fig. 6 only
    fig6_tasks: Tuple[str, ...] = ()


# tiny: the shared data, then 11 conversions, 25 fine-tunes of 1000 updates, 25
# evaluations and 6 exports, two steps at a time (estimates per step as it runs).
SCALES = {
    "tiny": Scale(tasks=("CoLA",), seeds=(1, 2, 3), sweep_seeds=(1,), lambdas=(1e-4, 1e-1), prune=(30, 60, 90),
                  bert_updates=300, ft_updates=1000, ft_lr="1e-3", minutes=(0.4, 0.05, 0.95, 0.1, 0.05)),
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


def fig3_source(s: Scale) -> str:
    """The DAM_s run whose P the reduced scales prune (the smallest λ: the least L1 pull)."""
    return dam_row("s", min(s.lambdas))


def bert_dir(plan: Plan, key: str = "roberta_base") -> Path:
    return plan.out / "bert" / key


def converted(plan: Plan, key: str) -> Path:
    """The pretrained model converted into ``key``'s layout (next to it)."""
    return bert_dir(plan) / f"as-{key}.pt"


def ft_dir(plan: Plan, row: str, seed: int) -> Path:
    """The fine-tuning runs of one row and seed: TASK/ and eval/TASK.json."""
    return plan.out / "glue" / row / f"s{seed}"


def mask_path(plan: Plan, s: Scale, how: str, pct: int, task: str) -> Path:
    """Fig. 3's mask file: next to its stage-1 run (per task) at the reduced
    scales, next to the §3.1 model at paper scale."""
    name = f"{how}-{pct}.pt" if how == "prune" else f"random-{pct}-s{PRUNE_SEED}.pt"
    if plan.scale == "paper":
        return bert_dir(plan, "p") / name
    return ft_dir(plan, fig3_source(s), s.sweep_seeds[0]) / task / name


def scale_of(name: str) -> Scale:
    return SCALES[name]


def _export(plan: Plan, s: Scale, ckpt: Path, out: Path, pct: int, how: str, what: str, minutes) -> None:
    cmd = ["fairseq-local", "export", ckpt, "--out", out, "--prune", pct, "--n", N]
    plan.add(f"{PAPER}/masks/{what}{how}-{pct}", f"{what}{'P' if how == 'prune' else 'random'}-pruned mask, "
             f"{pct}% per head (§3.4)", cmd + (["--prune-random", PRUNE_SEED] if how == "random" else []), minutes)


def build(scale: str, runs: Path) -> Plan:
    """The plan of ``scale`` with its runs under ``runs``."""
    if scale == "paper":
        return build_paper(runs)
    s = SCALES[scale]
    plan = Plan(PAPER, scale, runs, sorted(set(s.seeds) | set(s.sweep_seeds)))
    d = add_data_steps(plan, PANDE_SCALES[scale], nmt=False)
    t_pre, t_conv, t_ft, t_eval, t_exp = s.minutes  # type: ignore[misc]
    shape = model_shape()
    plan.add(f"{PAPER}/bert/pretrain", "fairseq's roberta_base (full attention): masked-LM pretraining",
             ["bash", "scripts/pretrain-bert.sh", "roberta_base", "--data", d["corpus"], "--save-dir", bert_dir(plan),
              "--updates", s.bert_updates, "--updates-512", 0, "--lengths", "64,128", "--max-positions", N,
              "--batch-size", 32, "--update-freq", 1, "--lr", "1e-3", "--warmup", s.bert_updates // 10, "--cpu",
              "--", *BERT_MODEL, "--dropout", "0.0", "--attention-dropout", "0.0", "--seed", 1], t_pre)
    for key, (arch, token) in MODELS.items():
        cmd = ["fairseq-local", "convert-roberta", bert_dir(plan) / "checkpoint_last.pt", converted(plan, key),
               "--arch", arch]
        if token:
            cmd += ["--attn-layout", layout(token, shape)]
        if key in ("random-drop", "no-diag"):
            cmd += ["--mask-mode", "pre"]  # SparseBERT's fixed masks act before the softmax, as the baselines'
        plan.add(f"{PAPER}/convert/{key}", f"the pretrained model as {arch}" + (f" ({token})" if token else ""),
                 cmd, t_conv, outputs=[converted(plan, key)])

    def group(row: str, key: str, seeds: Sequence[int], extra=lambda task: []) -> None:
        arch = MODELS[key][0]
        for seed in seeds:
            for task in s.tasks:
                plan.add(f"{PAPER}/glue/{row}/s{seed}/{task}", f"{row}: fine-tuning on {task}, seed {seed}",
                         ["bash", "scripts/finetune-glue.sh", "--data", d["glue"] / f"{task}-bin", "--task", task,
                          "--arch", arch, "--checkpoint", converted(plan, key), "--save-dir",
                          ft_dir(plan, row, seed) / task, "--recipe", "sparsebert", "--max-update", s.ft_updates,
                          "--batch-size", FT_BATCH, "--lr", s.ft_lr, "--max-positions", N, "--cpu", "--", *BERT_MODEL,
                          "--seed", seed, *extra(task)], t_ft)
            plan.add(f"{PAPER}/glue/{row}/s{seed}/eval", f"{row}: GLUE dev metrics, seed {seed}",
                     ["bash", "scripts/evaluate-glue.sh", "--runs", ft_dir(plan, row, seed), "--data", d["glue"],
                      "--glue-dir", d["glue_raw"], "--out", ft_dir(plan, row, seed) / "eval", "--tasks",
                      " ".join(s.tasks)], t_eval)

    for row in TABLE1:
        group(row, row, s.seeds)
    for kind in ("u", "s"):
        for lam in s.lambdas:
            group(dam_row(kind, lam), f"dam-{kind}", s.sweep_seeds,
                  lambda task, lam=lam: ["--dam-lambda", lam_name(lam)])
    for row in FIXED:
        group(row, row, s.sweep_seeds)
    source = fig3_source(s)
    for task in s.tasks:
        ckpt = ft_dir(plan, source, s.sweep_seeds[0]) / task / "checkpoint_best.pt"
        for pct in s.prune:
            for how in ("prune", "random"):
                _export(plan, s, ckpt, mask_path(plan, s, how, pct, task), pct, how, f"{task}/", t_exp)
    for pct in s.prune:
        for how in ("prune", "random"):
            group(f"{how}-{pct}", "base", s.sweep_seeds,
                  lambda task, how=how, pct=pct: ["--mask-file", mask_path(plan, s, how, pct, task), "--attn-layout",
                                                  layout("file", shape), "--mask-mode", "pre"])
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


def build_paper(runs: Path) -> Plan:
    """The paper's own settings: each row pretrained with its mask (DAM with
    its λ; the §3.1 run with λ = 0, no noise and P ⊙ A), DAM masks fixed in
    fine-tuning (exported 1[α > 0]), every fine-tuning run with Appendix C's
    recipe on Table 1's tasks.  For GPUs; ``--dry-run`` prints it."""
    s = SCALES["paper"]
    plan = Plan(PAPER, "paper", runs, sorted(set(s.seeds) | set(s.sweep_seeds)))
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
    models["p"] = ("roberta_dam_u", ["--dam-no-noise", "--mask-mode", "post", "--dam-lambda", 0])  # §3.1 exactly
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
    p_ckpt = bert_dir(plan, "p") / "checkpoint_last.pt"
    for pct in sorted(set(s.prune) | set(s.fig6_prune)):
        for how in ("prune", "random") if pct in s.prune else ("prune",):
            _export(plan, s, p_ckpt, mask_path(plan, s, how, pct, ""), pct, how, "", None)

    def group(row: str, key: str, seeds: Sequence[int], tasks: Sequence[str], extra: List) -> None:
        arch = models[key][0]
        for seed in seeds:
            for task in tasks:
                plan.add(f"{PAPER}/glue/{row}/s{seed}/{task}", f"{row}: fine-tuning on {task}, seed {seed}",
                         ["bash", "scripts/finetune-glue.sh", "--data", d["glue"] / f"{task}-bin", "--task", task,
                          "--arch", arch, "--checkpoint", bert_dir(plan, key) / "checkpoint_last.pt", "--save-dir",
                          ft_dir(plan, row, seed) / task, "--recipe", "sparsebert", "--", "--seed", seed, *extra])
            plan.add(f"{PAPER}/glue/{row}/s{seed}/eval", f"{row}: GLUE dev metrics, seed {seed}",
                     ["bash", "scripts/evaluate-glue.sh", "--runs", ft_dir(plan, row, seed), "--data", d["glue"],
                      "--glue-dir", d["glue_raw"], "--out", ft_dir(plan, row, seed) / "eval", "--tasks",
                      " ".join(tasks), "--cuda"])

    for row in TABLE1:
        group(row, row, s.seeds, s.tasks, [])
    for row in dam_rows(s):
        group(row, row, s.sweep_seeds, s.tasks, ["--mask-file", bert_dir(plan, row) / "hard.pt", *file_opts])
    for row in FIXED:
        group(row, row, s.sweep_seeds, s.tasks, [])
    for pct in sorted(set(s.prune) | set(s.fig6_prune)):
        for how in ("prune", "random") if pct in s.prune else ("prune",):
            tasks = s.tasks if pct in s.prune else s.fig6_tasks
            group(f"{how}-{pct}", "p", s.sweep_seeds, tasks,
                  ["--mask-file", mask_path(plan, s, how, pct, ""), *file_opts])
    return plan


# Reading the runs (for the report)

def columns(tasks: Sequence[str]) -> List[str]:
    """The paper's column names of ``tasks`` (MNLI: matched and mismatched)."""
    return [c for t in tasks for c in (("MNLI-m", "MNLI-mm") if t == "MNLI" else (t,))]


def metric(eval_dir: Path, col: str) -> Optional[float]:
    """Column ``col`` of ``evaluate-glue.sh``'s TASK.json, in percent."""
    if col == "MNLI-mm":
        return glue_metric(eval_dir / "MNLI.json", "MNLI", "accuracy", set_name="MNLI-mm")
    task = "MNLI" if col == "MNLI-m" else col
    return glue_metric(eval_dir / f"{task}.json", task)


def valid_rho(run: Path) -> Optional[float]:
    """ρ of the validation that chose ``checkpoint_best.pt`` (the last with the
    best accuracy; else the last) in RUN/train.log, as ``fairseq-local results`` reads it."""
    try:
        lines = (run / "train.log").read_text(errors="replace").splitlines()
    except OSError:
        return None
    best: Optional[Tuple[float, float]] = None
    for line in lines:
        if not re.search(r"\| valid \| epoch .*?\| loss ", line):
            continue
        rho, acc = re.search(r"\| rho ([0-9.e-]+)", line), re.search(r"\| accuracy ([0-9.]+)", line)
        if rho:
            a = float(acc.group(1)) if acc else float("-inf")
            if best is None or a >= best[0]:
                best = (a, float(rho.group(1)))
    return None if best is None else best[1]


def gather(plan: Plan, rows: Sequence[str], seeds: Dict[str, Sequence[int]], tasks: Sequence[str]
           ) -> Tuple[Dict[str, Dict[str, Values]], Dict[str, Values], Dict[str, Dict[str, Optional[float]]]]:
    """Per row: {column: Values} over seeds, the per-seed averages over the
    columns (seeds with every column), and the dev ρ per task and overall."""
    cols = columns(tasks)
    scores: Dict[str, Dict[str, Values]] = {}
    avgs: Dict[str, Values] = {}
    rho: Dict[str, Dict[str, Optional[float]]] = {}
    for row in rows:
        per = {c: [metric(ft_dir(plan, row, k) / "eval", c) for k in seeds[row]] for c in cols}
        scores[row] = {c: Values(tuple(v for v in vs if v is not None)) for c, vs in per.items()}
        avgs[row] = Values(tuple(sum(per[c][i] for c in cols) / len(cols) for i in range(len(seeds[row]))
                                 if all(per[c][i] is not None for c in cols)))
        r = {t: [valid_rho(ft_dir(plan, row, k) / t) for k in seeds[row]] for t in tasks}
        rho[row] = {t: mean([x for x in v if x is not None]) for t, v in r.items()}
        rho[row]["all"] = mean([x for v in r.values() for x in v if x is not None])
    return scores, avgs, rho


def mean(xs: Sequence[float]) -> Optional[float]:
    return sum(xs) / len(xs) if xs else None


def class_means(p) -> Dict[str, float]:
    """Mean of an (n, n) P over §3.1.2's position classes: the diagonal,
    neighbours (|i − j| = 1), the first token's row and column ([CLS]/<s>;
    the last token's position varies with the sentence), and the rest, with
    the standard deviation of the rest ("other positions are similar")."""
    import torch

    n = p.shape[0]
    i, j = torch.arange(n)[:, None], torch.arange(n)[None, :]
    diag, special = i == j, ((i == 0) | (j == 0)) & (i != j)
    near = ((i - j).abs() == 1) & ~special
    other = ~(diag | special | near)
    p = p.float()
    return {"diag": float(p[diag].mean()), "neighbour": float(p[near].mean()), "special": float(p[special].mean()),
            "other": float(p[other].mean()), "other_sd": float(p[other].std())}
