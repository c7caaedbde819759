"""Pande et al.'s plan at ``paper`` scale (:mod:`.pande`): the paper's own
settings (§5), WMT'14 En-De and En-Ru with Transformer-base, BERT-base
pretrained on Wikipedia and Gutenberg, real GLUE, and Figs. 1–3 on test
sentences parsed by a named parser.  With ``bert=HF_DIR`` (``reproduce
pande --scale paper --bert HF_DIR``) the BERT-base row is the given Hugging
Face model (:mod:`.given_bert`) instead of this recipe's pretraining."""

from pathlib import Path
from typing import Optional

from .pande_steps import (BERT_ROWS, LETTERS, PAPER, PAPER_SENTENCES, SEGMENTS, TASKS, TEST_SPLIT, analysis_steps,
                          add_predictions, bert_analysis, bert_run, finetuned, ft_dir)
from .given_bert import add_given_bert
from .plan import Plan


def build_paper(runs: Path, device: str = "cpu", bert: Optional[str] = None) -> Plan:
    """The paper's own settings (§5): WMT'14 En-De and En-Ru with
    Transformer-base, BERT-base pretrained on Wikipedia and Gutenberg, real
    GLUE.  For GPUs (the scripts choose the device; ``device`` is recorded);
    ``--dry-run`` prints it.  ``bert``: a Hugging Face BERT-base folder
    that replaces the BERT-base row's pretraining (its GLUE is prepared with
    its own WordPiece, and Figs. 1-3 analyse it)."""
    plan = Plan(PAPER, "paper", runs, (1,), device=device, bert=bert)
    data = runs / "data-paper"
    for pair in ("en-de", "en-ru"):
        plan.add(f"data-paper/wmt14_{pair}", f"WMT'14 {pair}: download, clean, BPE, binarise",
                 ["bash", "scripts/prepare-wmt14.sh", pair, "--out", data / f"wmt14_{pair}"])
        for letter in LETTERS:
            run = plan.out / f"wmt14_{pair}" / letter
            plan.add(f"{PAPER}/wmt14_{pair}/{letter}/train", f"{pair}, config ({letter}): Transformer-base, 100k updates",
                     ["bash", "scripts/train-wmt14.sh", pair, letter, "--data", data / f"wmt14_{pair}",
                      "--save-dir", run])
            plan.add(f"{PAPER}/wmt14_{pair}/{letter}/test", f"{pair}, config ({letter}): newstest2014 BLEU",
                     ["bash", "scripts/evaluate-wmt14.sh", pair, run, "--data", data / f"wmt14_{pair}"])
    # GLUE itself: the official folder (GLUE's download script) in RUNS/data-paper/glue
    corpus, glue_raw, glue = data / "bert-corpus", data / "glue", data / "glue-bin"
    plan.add("data-paper/bert-corpus", "English Wikipedia + Gutenberg: extract, split, GPT-2 BPE, binarise",
             ["bash", "scripts/prepare-bert-corpus.sh", "--download", data / "bert-downloads", "--bpe", "gpt2",
              "--out", corpus])
    plan.add("data-paper/glue", "GLUE: QQP, SST-2, MNLI, QNLI (GPT-2 BPE)",
             ["bash", "scripts/prepare-glue.sh", "--glue-dir", glue_raw, "--src-dict", corpus / "dict.txt",
              "--tasks", " ".join(TASKS), "--out", glue])
    given = add_given_bert(plan, bert, glue_raw, TASKS) if bert is not None else None
    for arch in BERT_ROWS:
        run, data_of = bert_run(plan, arch), glue
        if given is not None and arch == BERT_ROWS[0]:  # the given BERT-base, on its own WordPiece GLUE
            start, data_of = given.checkpoint, given.glue
        else:
            start = run / "checkpoint_last.pt"
            plan.add(f"{PAPER}/bert/{arch}/pretrain", f"{arch}: 300k updates at 128, 1k at 512, batch 2K",
                     ["bash", "scripts/pretrain-bert.sh", arch, "--data", corpus, "--save-dir", run, "--", SEGMENTS])
        for task in TASKS:
            plan.add(f"{PAPER}/bert/{arch}/glue-s1/{task}", f"{arch}: fine-tuning on {task} (RoBERTa recipe)",
                     ["bash", "scripts/finetune-glue.sh", "--data", data_of / f"{task}-bin", "--task", task,
                      "--arch", arch, "--checkpoint", start, "--save-dir", ft_dir(plan, arch, 1) / task])
        plan.add(f"{PAPER}/bert/{arch}/glue-s1/eval", f"{arch}: GLUE dev metrics",
                 ["bash", "scripts/evaluate-glue.sh", "--runs", ft_dir(plan, arch, 1), "--data", data_of,
                  "--glue-dir", glue_raw, "--out", ft_dir(plan, arch, 1) / "eval", "--tasks", " ".join(TASKS),
                  "--cuda"])
        add_predictions(plan, arch, 1, data_of, glue_raw)
    d = {"corpus": corpus, "glue": given.glue if given else glue, "glue_raw": glue_raw, "parsed": data / "parsed",
         "bpe": given.bpe if given else ["--bpe", "gpt2"]}
    nmt = data / "wmt14_en-de"
    add_analysis_paper(plan, plan.out / "wmt14_en-de" / "a" / "checkpoint_best.pt", nmt, d)
    return plan


def parsed_conllu(parsed: Path, name: str) -> Path:
    """The parser's CoNLL-U of a paper-scale test set (``name``: a GLUE task
    or newstest2014); the parser's name and version are in FILE.json."""
    return parsed / f"{name}.conllu"


def add_analysis_paper(plan: Plan, nmt_ckpt: Path, nmt_data: Path, d: dict) -> None:
    """Figs. 1–3 at paper scale.  The syntactic sets need trees the paper
    does not say how it made ("syntactically related tokens", parser not
    named): each test set is parsed by :data:`.pande_parse.PARSER` (Universal
    Dependencies) in a step of its own, its name and version recorded beside
    the CoNLL-U and stated in the report.  §3.1 samples 100 sentences of each
    task's test set (Fig. 1), §3.2 1,000 (Figs. 2-3): 1,000 are parsed, the
    sensitivity reads the first 100 of them (a random sample too)."""
    from .pande_parse import PARSER, PARSER_VERSION

    n_sens, n_bias = PAPER_SENTENCES
    parse = ["python", "-m", "fairseq_local_reproduce.pande_parse", "--sentences", n_bias, "--seed", 1]
    by = f"parsed by {PARSER} {PARSER_VERSION}"
    news = parsed_conllu(d["parsed"], "newstest2014")
    plan.add(f"{PAPER}/parse/newstest2014", f"newstest2014 English side: {n_bias} sentences {by}",
             [*parse, "--text", nmt_data / "tok" / "test.en", "--pretokenized", "--out", news])
    analysis_steps(plan, "nmt", ["--path", nmt_ckpt, "--data", nmt_data, "--conllu", news, "--cuda"],
                    PAPER_SENTENCES, None)
    for task in TASKS:
        conllu = parsed_conllu(d["parsed"], task)
        plan.add(f"{PAPER}/parse/{task}", f"{task} test set: {n_bias} sentences {by}",
                 [*parse, "--glue-dir", d["glue_raw"], "--task", task, "--split", TEST_SPLIT.get(task, "test"),
                  "--out", conllu])
        analysis_steps(plan, bert_analysis(task),
                        ["--path", finetuned(plan, task, 1), "--data", d["glue"] / f"{task}-bin", "--conllu", conllu,
                         *d["bpe"], "--cuda"], PAPER_SENTENCES, None)
