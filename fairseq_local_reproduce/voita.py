"""Voita et al., "Analyzing Multi-Head Self-Attention: Specialized Heads Do
the Heavy Lifting, the Rest Can Be Pruned" (ACL 2019): the plan of
``fairseq-local reproduce voita``.

* §4–5, Fig. 1: every encoder head's LRP importance (``analyze
  importance --method lrp``), confidence and role (``attention dump``,
  ``analyze roles`` on gold trees) of a trained all-global Transformer.
* §6, Figs. 7–8: the pruning curve (``prune-curve``): the trained model
  fine-tuned with a hard-concrete gate on every head of the encoder
  self-attention, decoder self-attention and encoder–decoder attention at a
  sweep of L0 weights λ, each translated with its closed heads removed, with
  the heads kept per attention type and the roles of the encoder heads that
  remain.
* §8: which attention type keeps the most heads as λ grows.

``tiny`` and ``small`` train the all-global configuration (a) on the hard
synthetic corpus that Pande et al.'s reduced scales use (the shared data
step), with two decoder layers so that each decoder attention type has 16
heads, and train the gates alone (``prune-curve --gates-only`` at a
learning rate of 0.05): with every weight trained at a CPU's budget no gate
closes (docs/nmt.md).  ``paper`` is Voita et al.'s WMT EN-RU Transformer-base,
pruned with every weight fine-tuned (their ``train_concrete_heads.sh``), for
GPUs.

``device`` (``reproduce --device``) places the reduced scales: ``cpu`` passes
``--cpu`` to every fairseq-train run (the model's and the pruning curve's);
``cuda`` leaves fairseq on the GPU and runs the attention dump and the LRP
importance there too (``--cuda``).  At ``paper`` scale the scripts choose.
"""

from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Tuple

from .pande import SCALES as PANDE_SCALES, add_data_steps, add_nmt_steps, nmt_run
from .plan import Plan

PAPER = "voita"
TITLE = "# Voita et al., reproduced"  # the report's first line starts so


@dataclass(frozen=True)
class Scale:
    """What one scale runs."""

    lambdas: Tuple[float, ...]   # L0 weights of the pruning curve (--gate-preset voita's layer mean)
    prune_updates: int           # fine-tuning updates per λ
    prune_lr: float              # constant fine-tuning learning rate
    gates_only: bool             # train the gates alone (reduced scales)
    sentences: int               # gold-tree sentences for roles and importance
    rare_top: int                # the rare-word role's frequency cut (Voita §5.3: 500; 0: every sentence)
    # estimated minutes on 2 CPU cores: train, translate, dump + roles, importance, one λ of the curve
    minutes: Optional[Tuple[float, float, float, float, float]]


SCALES = {
    # the synthetic vocabulary has a few hundred symbols: every sentence counts for the rare-word role
    "tiny": Scale(lambdas=(0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5), prune_updates=300, prune_lr=0.05, gates_only=True,
                  sentences=200, rare_top=0, minutes=(2.3, 0.2, 0.5, 0.5, 1.0)),
    "small": Scale(lambdas=(0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0), prune_updates=600, prune_lr=0.05,
                   gates_only=True, sentences=500, rare_top=0, minutes=(6.0, 0.3, 0.4, 1.0, 2.0)),
    # Voita et al. fine-tune every weight from the converged model; λ as prune-curve's default sweep
    "paper": Scale(lambdas=(0.01, 0.05, 0.1, 0.2, 0.5), prune_updates=20000, prune_lr=1e-4, gates_only=False,
                   sentences=1000, rare_top=500, minutes=None),
}


def model_dir(plan: Plan) -> Path:
    """The analysed NMT model: the shared baseline (a), seed 1, at the reduced
    scales (:func:`.pande.nmt_run`); at paper scale the WMT en-ru run of
    :func:`paper_model_steps` (its ``test.bleu.json``)."""
    return plan.out / "wmt14_en-ru" / "a" if plan.scale == "paper" else nmt_run(plan, "a", 1)


def heads_dir(plan: Plan) -> Path:
    """Roles, confidence and importance of the trained model (Fig. 1)."""
    return plan.out / "heads"


def prune_dir(plan: Plan) -> Path:
    return plan.out / "prune"


def build(scale: str, runs: Path, device: str = "cpu") -> Plan:
    """The plan of ``scale`` with its runs under ``runs``, training and
    analysing on ``device`` ("cpu" or "cuda") at the reduced scales."""
    s = SCALES[scale]
    plan = Plan(PAPER, scale, runs, (1,), device=device)
    if scale == "paper":
        data, ckpt, conllu, ref, gen = paper_model_steps(plan)
    else:
        data = add_data_steps(plan, PANDE_SCALES[scale], bert=False)["nmt"]
        # the reduced scale's shared baseline (a), seed 1: Pande's very steps (pande.add_nmt_steps)
        run = add_nmt_steps(plan, PANDE_SCALES[scale], data, "a", 1)
        conllu, ref = data / "raw" / "test.src.conllu", data / "raw" / "test.tgt"
        ckpt, gen = run / "checkpoint_best.pt", ["--cuda"] if plan.device == "cuda" else []
    add_analysis_steps(plan, s, ckpt, data, conllu, ref, gen)
    return plan


def add_analysis_steps(plan: Plan, s: Scale, ckpt: Path, data: Path, conllu: Path, ref: Path,
                       gen: List[str]) -> None:
    """Fig. 1 (roles, confidence, LRP importance) and the pruning curve
    (Figs. 7–8, §8).  ``gen``: further options of the analyses (``--cuda``
    at paper scale and on ``--device cuda``); the pruning runs' fairseq-train
    gets ``--cpu`` on a CPU plan at the reduced scales."""
    est = s.minutes or (None,) * 5
    out = heads_dir(plan)
    model = ["--path", ckpt, "--data", data, "--conllu", conllu, "--max-sentences", s.sentences, *gen]
    plan.add(f"{PAPER}/heads/dump", "attention of every encoder head on gold-tree sentences",
             ["fairseq-local", "attention", "dump", *model, "--quiet", "--out", out / "attention.pt", "--force"],
             None if est[2] is None else est[2] / 2, folders=[out])
    plan.add(f"{PAPER}/heads/roles", "head roles and confidence (Voita §4-5)",
             ["fairseq-local", "analyze", "roles", out / "attention.pt", "--rare-top", s.rare_top, "--quiet",
              "--out", out, "--force"], None if est[2] is None else est[2] / 2)
    plan.add(f"{PAPER}/heads/importance", "LRP head importance (Voita §4, Fig. 1)",
             ["fairseq-local", "analyze", "importance", *model, "--method", "lrp", "--quiet", "--out", out,
              "--force"], est[3])
    plan.add(f"{PAPER}/prune", f"pruning curve: gates on all three attention types at {len(s.lambdas)} λ "
             f"(Figs. 7-8, §8)",
             ["fairseq-local", "prune-curve", ckpt, "--data", data, "--out", prune_dir(plan), "--lambdas",
              ",".join(f"{x:g}" for x in s.lambdas), "--max-update", s.prune_updates, "--lr", f"{s.prune_lr:g}",
              *(["--gates-only"] if s.gates_only else []), "--ref", ref, "--conllu", conllu,
              "--max-sentences", s.sentences, "--rare-top", s.rare_top, "--", "--seed", 1,
              *(["--max-tokens", 1024] if s.gates_only else []), *(plan.cpu_flag() if plan.scale != "paper" else [])],
             None if est[4] is None else est[4] * (len(s.lambdas) + 1))


def paper_model_steps(plan: Plan) -> tuple:
    """WMT EN-RU and Voita et al.'s Transformer-base (train-wmt14.sh's
    config (a)).  Returns the data folder, the checkpoint, the gold trees of
    newstest2014's English side (DATA/work/newstest2014.en.conllu, parsed
    with a UD parser, as for Pande et al.'s analyses), the reference the
    pruning curve scores against (the tokenised one, DATA/tok/test.ru, as
    generate.sh's hypotheses are tokenised) and the analyses' options."""
    data = plan.runs / "data-paper" / "wmt14_en-ru"
    run = model_dir(plan)
    plan.add("data-paper/wmt14_en-ru", "WMT'14 en-ru: download, clean, BPE, binarise",
             ["bash", "scripts/prepare-wmt14.sh", "en-ru", "--out", data])
    plan.add(f"{PAPER}/wmt14_en-ru/a/train", "en-ru, config (a): Transformer-base",
             ["bash", "scripts/train-wmt14.sh", "en-ru", "a", "--data", data, "--save-dir", run])
    plan.add(f"{PAPER}/wmt14_en-ru/a/test", "en-ru, config (a): newstest2014 BLEU",
             ["bash", "scripts/evaluate-wmt14.sh", "en-ru", run, "--data", data])
    return (data, run / "checkpoint_best.pt", data / "work" / "newstest2014.en.conllu", data / "tok" / "test.ru",
            ["--cuda"])
