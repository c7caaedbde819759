"""Pascual et al., "Telling BERT's Full Story: from Local Attention to Global
Aggregation": the plan of ``fairseq-local reproduce hta``.

Every analysis is ``fairseq-local analyze hta`` (Hidden Token Attribution per
head, Eq. 1): the correlation of attention with the previous-layer
contribution (§6, Fig. 1) and with the input contribution (§9, Fig. 6), the
relative-position histograms of attention and of input contribution (§7-8,
Figs. 2-3) and their centres of mass per layer (Figs. 4-5).  It runs on

* the pretrained RoBERTa (Pande et al.'s BERT-base, ``roberta_local_base``)
  on MNLI dev-matched pairs of at most :data:`MAX_LEN` tokens, ``<s> A </s>
  </s> B </s>`` (§5: 1,800 pairs of at most 64 tokens): the paper's setting;
* the same model fine-tuned on MNLI (seed 1), on the same pairs;
* the pretrained RoBERTa on single gold-tree sentences of its corpus's style;
* the NMT baseline (Pande et al.'s configuration (a), seed 1) on the source
  side of its test set,

then ``analyze table --centres`` overlays the centres of mass of all four
(Figs. 4-5), and ``--examples`` draws attention above input contribution for
a few pairs (Fig. 7; Appendix C, Figs. 12-23).

The models are Pande et al.'s: their steps are taken from
:func:`.pande.build` with the same ids and commands, so that ``reproduce
all`` skips them when ``pande`` ran first, and the data steps are
:func:`.pande.add_data_steps`'.  ``tiny`` and ``small`` analyse the reduced
models (4 x 4 heads of dimension 16; NMT 6 x 8 heads of dimension 8) on the
stand-in data; ``paper`` analyses BERT-base on real MNLI and Transformer-base
on newstest2014 (for GPUs; ``--dry-run`` prints it).  With ``device="cuda"``
the reduced scales train (Pande et al.'s steps) and analyse on the GPU.
``paper`` with ``bert=HF_DIR`` (``reproduce hta --scale paper --bert
HF_DIR``) analyses the given Hugging Face BERT-base, as Pascual et al. did
(§5: the off-the-shelf BERT-base), converted exactly with ``convert-hf``,
and its own MNLI fine-tuning on WordPiece pairs, instead of pretraining one
(:mod:`.given_bert`).
"""

import inspect
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from . import models, pande
from .given_bert import add_given_bert
from .plan import Plan, Step

PAPER = "hta"
TITLE = "# Pascual et al. (Hidden Token Attribution), reproduced"  # the report's first line starts so
ARCH = pande.BERT_ROWS[0]  # BERT-base: roberta_local_base, all heads global
SEED = 1                   # the seed of the analysed NMT model and MNLI fine-tuning
# §5: at most 64 tokens, BERT-base's head dimension (identifiability, Brunner et al. 2020).  The reduced
# models' heads are 16 (RoBERTa) and 8 (NMT) wide: the same 64 tokens are kept, so the length range
# matches the paper's, but identifiability does not hold there (the report says so).
MAX_LEN = 64
EXAMPLE_MAX_LEN = 512  # the examples' limit: capped at the model's maximum positions
MNLI_COLUMNS = "sentence1,sentence2"  # GLUE's MNLI header (fairseq_local_data.glue)
# The analyses (folders under RUNS/hta/analysis/), in the order the report shows them.
MODELS = {
    "bert-pairs": "pretrained RoBERTa (BERT-base layout), MNLI dev-matched pairs: the paper's setting",
    "bert-mnli-pairs": "the same RoBERTa fine-tuned on MNLI (seed 1), the same pairs",
    "bert-sentences": "pretrained RoBERTa, single sentences",
    "nmt-sentences": "NMT encoder, configuration (a) (seed 1), single source sentences",
}
PAIR_MODELS = ("bert-pairs", "bert-mnli-pairs")  # drawn per example (Fig. 7)
# The same analyses of a BERT-base given with --bert (paper scale).
GIVEN = {"bert-pairs": "the given BERT-base, MNLI dev-matched pairs: the paper's setting",
         "bert-mnli-pairs": "the given BERT-base fine-tuned on MNLI (seed 1), the same pairs",
         "bert-sentences": "the given BERT-base, single sentences"}


def model_name(plan: Plan, what: str) -> str:
    """What one analysis (a key of :data:`MODELS`) is of, in this plan."""
    return GIVEN.get(what, MODELS[what]) if plan.bert else MODELS[what]


@dataclass(frozen=True)
class Scale:
    """What one scale analyses."""

    pairs: int          # MNLI dev-matched pairs read (those of at most MAX_LEN tokens kept)
    sentences: int      # single sentences of the pretrained RoBERTa
    nmt_sentences: int  # test-set source sentences of the NMT model
    examples: Tuple[int, ...] = (0, 1, 2)  # pairs drawn as Fig. 7 (0-based, in file order)
    # estimated minutes per item as a step runs beside another (--jobs 2, one thread each; measured at
    # tiny on the reduced models): a RoBERTa pair, a RoBERTa sentence, an NMT sentence; and a run's start
    per_item: Optional[Tuple[float, float, float]] = None
    startup: float = 0.3


SCALES = {
    # tiny: the input contribution costs T x d forward-mode products a batch (about 11 s a pair of 20-40
    # tokens, 27 s an NMT sentence, on one core beside another step: 38, 19 and 23 minutes for the 200
    # pairs, 100 and 50 sentences read before), so 100 of the 500 stand-in dev pairs, to fit 45 minutes
    "tiny": Scale(pairs=100, sentences=60, nmt_sentences=30, per_item=(0.16, 0.16, 0.4)),
    # small: longer stand-in sentences (glue --max-len 30), so fewer pairs fit MAX_LEN and each costs more
    "small": Scale(pairs=800, sentences=300, nmt_sentences=200, per_item=(0.21, 0.16, 0.4)),
    # paper: the first 2,000 of MNLI's 9,815 dev-matched pairs, those of at most 64 tokens kept (§5: 1,800)
    "paper": Scale(pairs=2000, sentences=2000, nmt_sentences=2000),
}


def analysis_dir(plan: Plan, what: str) -> Path:
    """The ``analyze hta`` folder of one analysis (a key of :data:`MODELS`)."""
    return plan.out / "analysis" / what


def examples_dir(plan: Plan, what: str) -> Path:
    """The folder of the per-example maps (Fig. 7) of a pair analysis."""
    return plan.out / "analysis" / f"{what}-examples"


def centres_png(plan: Plan) -> Path:
    """The centres of mass of every analysis in one figure (Figs. 4-5)."""
    return plan.out / "analysis" / "centres.png"


def summary_md(plan: Plan) -> Path:
    return plan.out / "analysis" / "summary.md"


def pande_step_ids(scale: str) -> List[str]:
    """The ids of Pande et al.'s model steps (and, at paper scale, data
    steps) this plan reuses: the NMT baseline (a), BERT-base's pretraining
    and its MNLI fine-tuning, seed 1."""
    bert = f"{pande.PAPER}/bert/{ARCH}"
    if scale == "paper":
        return ["data-paper/wmt14_en-de", f"{pande.PAPER}/wmt14_en-de/a/train", "data-paper/bert-corpus",
                "data-paper/glue", f"{bert}/pretrain", f"{bert}/glue-s{SEED}/MNLI"]
    return [models.shared_id(scale, f"nmt/a-s{SEED}/train"), models.shared_id(scale, "bert/base/pretrain"),
            f"{bert}/glue-s{SEED}/MNLI"]


def _borrow(plan: Plan, steps: Sequence[Step], ids: Sequence[str]) -> None:
    """Add Pande et al.'s steps ``ids`` as they are (same id, command and estimate)."""
    by_id = {s.id: s for s in steps}
    for i in ids:
        s = by_id[i]
        plan.add(s.id, s.what, s.cmd, s.minutes, s.folders, s.outputs)


def _pande_plan(scale: str, runs: Path, device: str) -> Plan:
    """Pande et al.'s plan on ``device`` (its ``build`` takes the device where
    it knows one; the steps borrowed must be its very steps)."""
    if "device" in inspect.signature(pande.build).parameters:
        return pande.build(scale, runs, device=device)
    return pande.build(scale, runs)


def build(scale: str, runs: Path, device: str = "cpu", bert: Optional[str] = None) -> Plan:
    """The plan of ``scale`` with its runs under ``runs``; ``device`` ("cpu"
    or "cuda"): where the reduced scales train and analyse (``paper``: CUDA);
    ``bert``: a Hugging Face BERT-base folder analysed instead of Pande et
    al.'s pretraining (``paper`` only)."""
    if bert is not None and scale != "paper":
        raise ValueError(f"--bert starts the paper scale from a given BERT-base; the {scale} scale analyses the "
                         f"reduced models")
    s = SCALES[scale]
    plan = Plan(PAPER, scale, runs, (SEED,), device=device, bert=bert)
    theirs = _pande_plan(scale, runs, device)  # the paths of Pande et al.'s runs
    if scale == "paper":  # with a given BERT, only the NMT data and baseline (a) are Pande et al.'s
        _borrow(plan, theirs.steps, pande_step_ids(scale)[:2] if bert else pande_step_ids(scale))
        data = runs / "data-paper"
        wmt, corpus, glue = data / "wmt14_en-de", data / "bert-corpus", data / "glue-bin"
        inputs = {"pairs": data / "glue" / "MNLI" / "dev_matched.tsv",
                  # HTA needs no trees: newstest2014's tokenised English side, for both models
                  "bert-sentences": ["--text", wmt / "tok" / "test.en"],
                  "nmt-sentences": ["--text", wmt / "tok" / "test.en"]}
        nmt_ckpt, nmt_data = theirs.out / "wmt14_en-de" / "a" / "checkpoint_best.pt", wmt
        bpe: List = ["--bpe", "gpt2"]
        extra: List = ["--cuda"]
    else:
        d = pande.add_data_steps(plan, pande.SCALES[scale])
        _borrow(plan, theirs.steps, pande_step_ids(scale))
        corpus, glue = d["corpus"], d["glue"]
        inputs = {"pairs": d["glue_raw"] / "MNLI" / "dev_matched.tsv",
                  "bert-sentences": ["--conllu", d["standins"] / "standin-sentences.conllu"],
                  "nmt-sentences": ["--conllu", d["nmt"] / "raw" / "test.src.conllu"]}
        nmt_ckpt, nmt_data = pande.nmt_run(theirs, "a", SEED) / "checkpoint_best.pt", d["nmt"]
        bpe = ["--bpe", "sentencepiece", "--bpe-model", corpus / "bpe" / "spm.model"]
        extra = [] if device == "cpu" else ["--cuda"]
    pretrained = pande.pretrained(theirs, pande.bert_run(theirs, ARCH))
    finetuned = pande.ft_dir(theirs, ARCH, SEED) / "MNLI" / "checkpoint_best.pt"  # the one evaluate-glue.sh scores
    if bert is not None:  # the given model, converted, and its own MNLI fine-tuning (the RoBERTa recipe)
        given = add_given_bert(plan, bert, data / "glue", ["MNLI"])
        pretrained, corpus, glue, bpe = given.checkpoint, given.folder, given.glue, given.bpe
        finetuned = plan.out / f"glue-given-s{SEED}" / "MNLI" / "checkpoint_best.pt"
        plan.add(f"{PAPER}/bert-given/glue-s{SEED}/MNLI", "the given BERT-base: fine-tuning on MNLI (RoBERTa recipe)",
                 ["bash", "scripts/finetune-glue.sh", "--data", glue / "MNLI-bin", "--task", "MNLI", "--checkpoint",
                  pretrained, "--save-dir", finetuned.parent])
    pairs = ["--pairs", inputs["pairs"], "--columns", MNLI_COLUMNS]
    # (analysis, checkpoint, its data folder, input options, items read, kind of item)
    runs_of = [("bert-pairs", pretrained, corpus, [*pairs, *bpe], s.pairs, 0),
               ("bert-mnli-pairs", finetuned, glue / "MNLI-bin", [*pairs, *bpe], s.pairs, 0),
               ("nmt-sentences", nmt_ckpt, nmt_data, inputs["nmt-sentences"], s.nmt_sentences, 2),
               ("bert-sentences", pretrained, corpus, [*inputs["bert-sentences"], *bpe], s.sentences, 1)]
    models: Dict[str, list] = {}
    for what, ckpt, data, opts, n, kind in runs_of:
        models[what] = ["--path", ckpt, "--data", data, *opts, "--max-len", MAX_LEN, *extra]
        plan.add(f"{PAPER}/analysis/{what}", f"HTA of {model_name(plan, what)} (Figs. 1-6)",
                 ["fairseq-local", "analyze", "hta", *models[what], "--max-sentences", n, "--quiet",
                  "--out", analysis_dir(plan, what), "--force"], _minutes(s, n, kind))
    for what in PAIR_MODELS:
        # the first pairs only (a long pair cannot make the step fail): the same maps as in the full run
        plan.add(f"{PAPER}/examples/{what}", f"attention above input contribution, pairs "
                 f"{', '.join(map(str, s.examples))} of {what} (Fig. 7, Figs. 12-23)",
                 ["fairseq-local", "analyze", "hta", *_longest(models[what]), "--max-sentences", max(s.examples) + 1,
                  "--examples", ",".join(map(str, s.examples)), "--quiet", "--out", examples_dir(plan, what),
                  "--force"], _minutes(s, max(s.examples) + 1, 0))
    plan.add(f"{PAPER}/centres", "centres of mass of every analysis in one figure (Figs. 4-5)",
             ["fairseq-local", "analyze", "table", *(analysis_dir(plan, w) for w in MODELS), "--centres",
              centres_png(plan), "--markdown", summary_md(plan), "--force"],
             None if s.per_item is None else 0.1, outputs=[centres_png(plan), summary_md(plan)])
    return plan


def _longest(model: List) -> List:
    """The model options with the length limit lifted to the model's maximum
    positions (``--max-len`` is capped there): the examples are drawn
    whatever their length, so a long first pair cannot fail the step."""
    k = model.index("--max-len")
    return [*model[:k], "--max-len", EXAMPLE_MAX_LEN, *model[k + 2:]]


def _minutes(s: Scale, n: int, kind: int) -> Optional[float]:
    """A run's estimate: start-up and ``n`` items of ``kind`` (0 pair, 1
    RoBERTa sentence, 2 NMT sentence); None at paper scale."""
    return None if s.per_item is None else round(s.startup + n * s.per_item[kind], 2)
