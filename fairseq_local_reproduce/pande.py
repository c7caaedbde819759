"""Pande et al., "On the Importance of Local Information in Transformer Based
Models": the plan of ``fairseq-local reproduce pande``.

* Tables 1–3 (§5.2–5.4): the twelve NMT configurations (a)–(l) of Fig. 4.
* Table 4 (§5.5): six BERT-base layouts (BERT-base, All Band2/Band6 Untied,
  Band6 AllTied, 132Tied, 120Tied), pretrained with the masked LM and
  fine-tuned on QQP, SST-2, MNLI and QNLI.
* Figs. 1–3 (§3.1–3.2): gradient sensitivity and attention bias of the
  all-global NMT baseline (a) on its test sentences, and of BERT-base
  *fine-tuned on each GLUE task* (seed 1) on that task's test sentences with
  their dependency trees (Fig. 1's caption: "Distribution of the γlocal
  (blue), γsyntactic (orange), and γneither (green) for the the four GLUE
  tasks").  §3.1: "we show the distribution of γlocal,
  γsyntactic and γunrelated for 100 randomly sampled sentences each from the
  test sets of the 4 GLUE tasks"; §3.2: "We compute the locality and non-local
  syntactic bias scores for 1,000 sentences each from the test sets of the
  tasks that we considered".  At ``tiny`` and ``small`` the stand-in tasks'
  sentences carry the generator's gold trees (``glue fake --hard --trees``:
  TASK/SPLIT.conllu); at ``paper`` scale the GLUE sentences are parsed by a
  named parser (:mod:`.pande_parse`, stanza) in a step of the plan.

``paper`` scale runs the paper's own settings through the WMT'14, BERT-corpus
and GLUE scripts (for GPUs).  ``tiny`` and ``small`` run the same steps on
the hard synthetic corpus (``prepare-synthetic.sh --hard``) and the hard
stand-in GLUE tasks (``glue fake --hard``), whose labels need non-local
information, with smaller models and fewer updates.
"""

from dataclasses import dataclass
from pathlib import Path
from typing import List, Sequence, Tuple

from . import models
# What every scale shares; the other plans and the report read it from here as this plan's.
from .pande_steps import (ANALYSIS_SEED, BERT_ROWS, LETTERS, PAPER, PAPER_SENTENCES, SEGMENTS,  # noqa: F401
                          TASKS, TEST_SPLIT, add_predictions, analysed, analysis_dir, analysis_steps, bert_analysis,
                          bert_run, finetuned, ft_dir, predictions_dir)
from .plan import Plan

TITLE = "# Pande et al., reproduced"  # the report's first line starts so


@dataclass(frozen=True)
class Scale:
    """The sizes of one reduced scale (stand-in data, small models)."""

    nmt_train: int               # synthetic sentence pairs (hard setting)
    nmt_updates: int             # the NMT models' updates (plateau rule, :mod:`.models`)
    base_seeds: Tuple[int, ...]  # seeds of the baselines (a) and BERT-base: the spread
    seeds: Tuple[int, ...]       # seeds of every other configuration
    glue_rows: int               # training rows per stand-in task
    bert_updates: int            # masked-LM updates per layout
    ft_updates: int              # fine-tuning updates per task
    sentences: int               # sentences analysed for Figs. 1-3
    # estimated minutes per step as it runs beside another (--jobs 2, one thread each; measured at tiny):
    # NMT train, translate, pretrain, fine-tune, sensitivity analysis
    minutes: Tuple[float, float, float, float, float]
    nmt_width: int = 64          # the NMT layouts' 6 encoder layers of 8 heads at this width
    # the stand-in GLUE tasks' lexicon (nouns, adjectives, verbs) and longest sentence (glue fake --hard)
    glue_lexicon: Tuple[int, int, int] = (40, 16, 20)
    glue_max_len: int = 20
    letters: Tuple[str, ...] = tuple("abcdefghijkl")  # the NMT configurations run (Tables 1-3)
    bert_rows: Tuple[str, ...] = BERT_ROWS              # the Table 4 rows run


SCALES = {
    # tiny's NMT baseline, measured: its best dev loss is within 2 % of its 6,000-update best by update
    # 4,500 (40 epochs of 113 updates, 0.2 s an update beside another step), test BLEU 47-55 against
    # 11.5 ± 1.7 after the 600 updates tiny trained before (the reports check each run's plateau).
    # Three seeds of (a) fill most of the 45 minutes, and a configuration against them needs three seeds of its own (one run against three gave
    # intervals of ± 8.5 BLEU), so tiny runs (a) only and small runs all twelve.  Of Table 4, tiny runs
    # BERT-base, Band2 and Band6 (P14, P15) and small adds the tied rows (P16, P17).
    "tiny": Scale(nmt_train=6000, nmt_updates=4500, base_seeds=(1, 2, 3), seeds=(1,), glue_rows=8000,
                  bert_updates=300, ft_updates=1000, sentences=100, minutes=(15.0, 0.2, 1.0, 1.8, 0.3),
                  letters=("a",), bert_rows=BERT_ROWS[:3]),
    # small: not run here; its estimates scale tiny's measured times with the updates
    "small": Scale(nmt_train=20000, nmt_updates=15000, base_seeds=(1, 2, 3), seeds=(1, 2, 3), glue_rows=20000,
                   bert_updates=1000, ft_updates=2000, sentences=200, minutes=(35.0, 0.3, 1.4, 2.2, 0.3),
                   glue_lexicon=(200, 60, 60), glue_max_len=30),
}

# The reduced NMT models' decoder: Voita et al. prune both decoder attention types
# (2 x 8 heads each), in the baseline that the three NMT papers share.
NMT_DECODER_LAYERS = 2
# The reduced scales' BERT: 4 layers of 4 heads at width 64 (FFN 128), pre-norm (it trains at lr 1e-3
# without warm-up trouble), every Table 4 layout scaled to that shape by :func:`table4_layout`, pretrained
# for the scale's few updates.  Not to a plateau: pretrained for 6,000 updates instead of 300 (dev loss
# 6.78 bits a token instead of 8.5), it fine-tunes to 66.6 on the MNLI stand-in instead of 90.2 (seed 1,
# the same 1,000 updates at lr 1e-3), and so does an 8-layer model at width 48 (66.8; QQP at chance) and
# either on a corpus written in the tasks' lexicon (66.8): these stand-ins need a fine-tuning recipe of
# their own before BERT can be trained longer or deeper.  The reports print each pretraining's plateau check.
BERT_LAYERS, BERT_HEADS, BERT_WIDTH = 4, 4, 64
BERT_MODEL = ["--encoder-layers", str(BERT_LAYERS), "--encoder-attention-heads", str(BERT_HEADS),
              "--encoder-embed-dim", str(BERT_WIDTH), "--encoder-ffn-embed-dim", str(2 * BERT_WIDTH),
              "--encoder-normalize-before", "--num-workers", "0", "--log-interval", "100"]
FT_BATCH, FT_LR = 32, "1e-3"  # the reduced scales' fine-tuning batch and peak lr


def table4_layout(arch: str, layers: int = BERT_LAYERS, heads: int = BERT_HEADS) -> str:
    """A Table 4 row's layout at ``layers`` x ``heads``: BERT-base all global,
    Band2/Band6 every head, AllTied every layer tied, 132Tied all but the last
    layer tied (132 = 11 x 12 heads), 120Tied all but the last two (at 12 x 12
    these are the archs' own layouts)."""
    band = {"roberta_local_base": "global", "roberta_band2": "band-2"}.get(arch, "band-6")
    tied = {"roberta_band6_all_tied": layers, "roberta_band6_132_tied": layers - 1,
            "roberta_band6_120_tied": layers - 2}.get(arch, 0)
    parts = [(f"[{band}@@t*{heads}]", tied), (f"[{band}*{heads}]", layers - tied)]
    return ";".join(f"{layer}*{n}" if n > 1 else layer for layer, n in parts if n)


def nmt_flags(s: Scale) -> List:
    """The reduced NMT recipe: width d (FFN 2d), :data:`NMT_DECODER_LAYERS`
    decoder layers, pre-norm, no dropout, batches of 2048 tokens, a short
    warm-up (the demo's reasons, scripts/lib.sh demo_recipe), trained for
    ``nmt_updates`` updates (the plateau rule of :mod:`.models`)."""
    d = s.nmt_width
    return ["--encoder-embed-dim", d, "--encoder-ffn-embed-dim", 2 * d, "--decoder-embed-dim", d,
            "--decoder-ffn-embed-dim", 2 * d, "--decoder-layers", NMT_DECODER_LAYERS, "--encoder-normalize-before",
            "--decoder-normalize-before", "--lr", "3e-3", "--warmup-updates", 100, "--clip-norm", "1.0",
            "--dropout", 0, "--max-tokens", 2048, "--log-interval", 100, "--no-epoch-checkpoints",
            *models.budget_flags(s.nmt_updates)]


def add_nmt_steps(plan: Plan, s: Scale, data: Path, letter: str, seed: int) -> Path:
    """Train config ``letter`` with ``seed`` (:func:`nmt_flags`) and translate
    the test set with its best checkpoint; the run's folder.  The baseline (a)
    is the reduced scale's shared model (:func:`nmt_run`): Voita's and
    Pascual's plans add these very steps, and whichever runs first trains it."""
    run = nmt_run(plan, letter, seed)
    pre = models.shared_id(plan.scale, "nmt") if letter == "a" else f"{PAPER}/nmt"
    plan.add(f"{pre}/{letter}-s{seed}/train", f"config ({letter}), seed {seed}: training, {s.nmt_updates:,} updates",
             ["bash", "scripts/train.sh", "--data", data, "--arch", letter, "--save-dir", run, "--",
              *nmt_flags(s), "--seed", seed, *plan.cpu_flag()], s.minutes[0])
    plan.add(f"{pre}/{letter}-s{seed}/test", f"config ({letter}), seed {seed}: translating the test set",
             ["bash", "scripts/generate.sh", "--data", data, "--checkpoint", run / "checkpoint_best.pt",
              "--out", run, "--ref", data / "raw" / "test.tgt"], s.minutes[1])
    return run


def data_dirs(runs: Path, scale: str) -> dict:
    """The stand-in data folders of a reduced scale (shared by the papers)."""
    d = runs / f"data-{scale}"
    return {"nmt": d / "nmt-hard", "standins": d / "bert-standins", "corpus": d / "bert-corpus",
            "glue_raw": d / "glue-hard-raw", "glue": d / "glue-hard"}


def add_data_steps(plan: Plan, s: Scale, nmt: bool = True, bert: bool = True) -> dict:
    """The data steps of a reduced scale: with ``bert`` the stand-in corpus
    and every hard stand-in task of :func:`glue_tasks` (with the gold trees of
    their dev and test sentences, ``--trees``: :func:`task_conllu`), with
    ``nmt`` the hard synthetic corpus; ids are shared, so a second paper skips them."""
    d, pre = data_dirs(plan.runs, plan.scale), f"data-{plan.scale}"
    if nmt:
        plan.add(f"{pre}/nmt-hard", "the hard synthetic corpus (deeper nesting, longer sentences)",
                 ["bash", "scripts/prepare-synthetic.sh", "--out", d["nmt"], "--hard", "--train", s.nmt_train,
                  "--valid", 300, "--test", 300], 0.2)
    if not bert:
        return d
    plan.add(f"{pre}/bert-standins", "stand-in Wikipedia dump and Gutenberg books",
             ["python", "-m", "fairseq_local_data.standins", "--out", d["standins"]], 0.1)
    plan.add(f"{pre}/bert-corpus", "the masked-LM corpus (SentencePiece)",
             ["bash", "scripts/prepare-bert-corpus.sh", "--wiki", d["standins"] / "enwiki-standin-pages-articles.xml.bz2",
              "--gutenberg", d["standins"] / "gutenberg-standin.zip", "--bpe", "sentencepiece", "--out", d["corpus"]], 0.2)
    plan.add(f"{pre}/glue-hard-raw", "the hard stand-in GLUE tasks (labels need non-local information)",
             ["python", "-m", "fairseq_local_data.glue", "fake", "--hard", "--trees", "--out", d["glue_raw"],
              "--tasks", *glue_tasks(), "--rows", s.glue_rows, "--eval-rows", 500,
              "--lexicon", ",".join(map(str, s.glue_lexicon)),
              "--max-len", s.glue_max_len], 0.5)
    plan.add(f"{pre}/glue-hard", "GLUE tasks encoded and binarised",
             ["bash", "scripts/prepare-glue.sh", "--glue-dir", d["glue_raw"], "--src-dict", d["corpus"] / "dict.txt",
              "--bpe", "sentencepiece", "--bpe-model", d["corpus"] / "bpe" / "spm.model", "--tasks",
              " ".join(glue_tasks()), "--out", d["glue"]], 1.0)
    return d


def glue_tasks() -> Tuple[str, ...]:
    """The hard stand-in tasks every paper's reduced scale prepares."""
    return ("CoLA", "SST-2", "MNLI", "QNLI", "QQP")


def nmt_run(plan: Plan, letter: str, seed: int) -> Path:
    """The folder of NMT config ``letter``, ``seed``: the baseline (a) in the
    scale's shared models (:mod:`.models`), the others in the paper's folder."""
    if letter == "a":
        return models.shared_dir(plan.runs, plan.scale) / "nmt" / f"a-s{seed}"
    return plan.out / "nmt" / f"{letter}-s{seed}"


def pretrained(plan: Plan, run: Path) -> Path:
    """The checkpoint that fine-tuning and analyses read from a pretraining
    folder: its last (``pretrain-bert.sh`` links it)."""
    return run / "checkpoint_last.pt"


def add_bert_base(plan: Plan, s: Scale, d: dict) -> Path:
    """The reduced scale's shared BERT-base (all heads global): one step that
    Pande's, Pascual's and Wang's plans add alike; its folder."""
    run = bert_run(plan, BERT_ROWS[0])
    plan.add(models.shared_id(plan.scale, "bert/base/pretrain"), "BERT-base, all heads global: masked-LM pretraining",
             pretrain_cmd(plan, s, d, run, ["--attn-layout", table4_layout(BERT_ROWS[0])]), s.minutes[2])
    return run


def pretrain_cmd(plan: Plan, s: Scale, d: dict, save: Path, opts: Sequence) -> List:
    """Masked-LM pretraining of the reduced BERT (:data:`BERT_MODEL`, BERT's
    segment embedding) with ``opts`` (its layout), sequences of 64 tokens, lr
    1e-3 with a tenth of the updates as warm-up, for ``bert_updates``
    updates (not to a plateau: see :data:`BERT_MODEL`'s note)."""
    return ["bash", "scripts/pretrain-bert.sh", "roberta_local_base", "--data", d["corpus"], "--save-dir", save,
            "--updates", s.bert_updates, "--updates-512", 0, "--lengths", "64,128", "--max-positions", 128,
            "--batch-size", 32, "--update-freq", 1, "--lr", "1e-3", "--warmup", s.bert_updates // 10,
            *plan.cpu_flag(), "--", *BERT_MODEL, SEGMENTS, *opts, "--dropout", "0.0", "--attention-dropout", "0.0",
            "--seed", 1, "--no-epoch-checkpoints"]


def task_conllu(glue_raw: Path, task: str) -> Path:
    """A stand-in task's test sentences with their generator trees (written
    by the data step with ``--trees``): TASK/test.conllu (MNLI: test_matched)."""
    return glue_raw / task / f"{TEST_SPLIT.get(task, 'test')}.conllu"


def seeds_of(s: Scale, base: bool) -> Tuple[int, ...]:
    return s.base_seeds if base else s.seeds


def build(scale: str, runs: Path, device: str = "cpu", bert: "str | None" = None) -> Plan:
    """The plan of ``scale`` with its runs under ``runs``; ``device`` ("cpu"
    or "cuda") where the reduced scales train and analyse; ``bert``
    (``paper`` only): a Hugging Face BERT-base folder instead of pretraining
    the BERT-base row (:mod:`.pande_paper`)."""
    if bert is not None and scale != "paper":
        raise ValueError(f"--bert replaces the paper scale's BERT-base; the {scale} scale keeps its reduced one")
    if scale == "paper":
        from .pande_paper import build_paper

        return build_paper(runs, device, bert)
    s = SCALES[scale]
    plan = Plan(PAPER, scale, runs, sorted(set(s.base_seeds) | set(s.seeds)), device=device)
    cuda = [] if device == "cpu" else ["--cuda"]
    d = add_data_steps(plan, s)
    _, _, t_pre, t_ft, t_an = s.minutes
    for letter in s.letters:
        for seed in seeds_of(s, letter == "a"):
            add_nmt_steps(plan, s, d["nmt"], letter, seed)
    for arch in s.bert_rows:
        base = arch == BERT_ROWS[0]
        if base:
            add_bert_base(plan, s, d)
        else:
            plan.add(f"{PAPER}/bert/{arch}/pretrain", f"{arch}: masked-LM pretraining",
                     pretrain_cmd(plan, s, d, bert_run(plan, arch), ["--attn-layout", table4_layout(arch)]), t_pre)
        for seed in seeds_of(s, base):
            for task in TASKS:
                plan.add(f"{PAPER}/bert/{arch}/glue-s{seed}/{task}", f"{arch}: fine-tuning on {task}, seed {seed}",
                         finetune_cmd(plan, d, arch, task, seed, s.ft_updates), t_ft)
            plan.add(f"{PAPER}/bert/{arch}/glue-s{seed}/eval", f"{arch}: GLUE dev metrics, seed {seed}",
                     ["bash", "scripts/evaluate-glue.sh", "--runs", ft_dir(plan, arch, seed), "--data", d["glue"],
                      "--glue-dir", d["glue_raw"], "--out", ft_dir(plan, arch, seed) / "eval", "--tasks",
                      " ".join(TASKS), *cuda], 0.1)
            add_predictions(plan, arch, seed, d["glue"], d["glue_raw"], 0.1)
    add_analysis(plan, nmt_run(plan, "a", ANALYSIS_SEED) / "checkpoint_best.pt", d["nmt"], d, s.sentences, t_an)
    return plan


def finetune_cmd(plan: Plan, d: dict, arch: str, task: str, seed: int, updates: int) -> List:
    """Fine-tuning at a reduced scale: the RoBERTa recipe's schedule shape
    (Adam, 6 % warm-up, linear decay) over ``updates`` updates of FT_BATCH
    (the layout and shape come from the checkpoint)."""
    return ["bash", "scripts/finetune-glue.sh", "--data", d["glue"] / f"{task}-bin", "--task", task,
            "--checkpoint", pretrained(plan, bert_run(plan, arch)), "--save-dir",
            ft_dir(plan, arch, seed) / task, "--max-update", updates, "--batch-size", FT_BATCH, "--lr", FT_LR,
            "--max-positions", 128, *plan.cpu_flag(), "--", *BERT_MODEL, "--seed", seed]


def add_analysis(plan: Plan, nmt_ckpt: Path, nmt_data: Path, d: dict, n: int, minutes: "float | None",
                 seed: int = ANALYSIS_SEED) -> None:
    """Figs. 1–3 at a reduced scale: dump, attention bias and gradient
    sensitivity of the NMT baseline on its test sentences, and of BERT-base
    fine-tuned on each task (``seed``) on ``n`` of that task's test sentences
    with the generator's gold trees (:func:`task_conllu`)."""
    cuda = [] if plan.device == "cpu" else ["--cuda"]
    analysis_steps(plan, "nmt", ["--path", nmt_ckpt, "--data", nmt_data, "--conllu",
                                  nmt_data / "raw" / "test.src.conllu", *cuda], (n, n), minutes)
    bpe = ["--bpe", "sentencepiece", "--bpe-model", d["corpus"] / "bpe" / "spm.model"]
    for task in TASKS:
        analysis_steps(plan, bert_analysis(task),
                        ["--path", finetuned(plan, task, seed), "--data", d["glue"] / f"{task}-bin", "--conllu",
                         task_conllu(d["glue_raw"], task), *bpe, *cuda], (n, n), minutes)
