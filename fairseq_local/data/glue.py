"""The GLUE benchmark's folder layout, its preparation for fairseq, and a
generated stand-in with the same files and columns.

Layout (as written by the GLUE download script, and read by fairseq's
``examples/roberta/preprocess_GLUE_tasks.sh``): ``GLUE/TASK/{train,dev,test}.tsv``,
MNLI with ``dev_matched``/``dev_mismatched``/``test_matched``/``test_mismatched``,
and the diagnostic set (AX) in ``GLUE/diagnostic/diagnostic.tsv``.  Every file
has a header line except CoLA's train and dev.  The columns read (1-based,
as fairseq's recipe cuts them) are in :data:`TASKS`.

Subcommands (``python -m fairseq_local.data.glue CMD``):

* ``check``: every requested task folder and TSV exists (one-line error);
* ``extract``: ``SPLIT.raw.input0``/``.raw.input1``/``.label`` per split, in
  fairseq's split names (MNLI dev_matched -> valid, dev_mismatched -> valid1);
* ``encode``: BPE of one file (GPT-2 byte-level, SentencePiece or none);
* ``binarize``: ``fairseq-preprocess --only-source`` of input0/input1/label
  into ``TASK-bin`` as fairseq's recipe lays it out (STS-B labels as text,
  divided by 5 into [0, 1]);
* ``count``: the number of sentences of a binarised dataset;
* ``fake``: a stand-in GLUE folder whose labels follow from the text.
"""
from __future__ import annotations

import argparse
import os
import random
import struct
import sys
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Sequence, Tuple


class GlueError(ValueError):
    """Bad GLUE input: a missing folder or file, or a malformed row."""


@dataclass(frozen=True)
class GlueTask:
    """One GLUE task: its files and the (1-based) columns fairseq's recipe reads."""

    name: str
    inputs: Tuple[int, ...]          # input columns of train/dev
    test_inputs: Tuple[int, ...]     # input columns of test
    label: int                       # label column of train (and dev)
    num_classes: int                 # 1: regression (STS-B)
    dev: Tuple[str, ...] = ("dev",)  # -> valid, valid1, ...
    test: Tuple[str, ...] = ("test",)  # -> test, test1, ...
    dev_label: int = 0               # label column of dev, if not `label`
    header: bool = True              # CoLA's train and dev have none
    fields: int = 0                  # keep only rows with this many fields (QQP)
    submission: Tuple[str, ...] = ()  # GLUE submission file per test set
    columns: Dict[str, Tuple[str, ...]] = field(default_factory=dict)  # headers of the stand-in

    @property
    def splits(self) -> Tuple[str, ...]:
        return ("train",) + self.dev + self.test


_NLI = ("index", "sentence1", "sentence2")
_MNLI = ("index", "promptID", "pairID", "genre", "sentence1_binary_parse", "sentence2_binary_parse",
         "sentence1_parse", "sentence2_parse", "sentence1", "sentence2")
_STSB = ("index", "genre", "filename", "year", "old_index", "source1", "source2", "sentence1", "sentence2")
_MRPC = ("Quality", "#1 ID", "#2 ID", "#1 String", "#2 String")
TASKS: Dict[str, GlueTask] = {t.name: t for t in (
    GlueTask("CoLA", (4,), (2,), 2, 2, header=False, submission=("CoLA",),
             columns={"train": ("source", "label", "original_label", "sentence"), "test": ("index", "sentence")}),
    GlueTask("SST-2", (1,), (2,), 2, 2, submission=("SST-2",),
             columns={"train": ("sentence", "label"), "test": ("index", "sentence")}),
    GlueTask("MRPC", (4, 5), (4, 5), 1, 2, submission=("MRPC",),
             columns={"train": _MRPC, "test": ("index",) + _MRPC[1:]}),
    GlueTask("STS-B", (8, 9), (8, 9), 10, 1, submission=("STS-B",),
             columns={"train": _STSB + ("score",), "test": _STSB}),
    GlueTask("QQP", (4, 5), (2, 3), 6, 2, fields=6, submission=("QQP",),
             columns={"train": ("id", "qid1", "qid2", "question1", "question2", "is_duplicate"),
                      "test": ("id", "question1", "question2")}),
    GlueTask("MNLI", (9, 10), (9, 10), 12, 3, dev=("dev_matched", "dev_mismatched"),
             test=("test_matched", "test_mismatched"), dev_label=16, submission=("MNLI-m", "MNLI-mm"),
             columns={"train": _MNLI + ("label1", "gold_label"),
                      "dev": _MNLI + ("label1", "label2", "label3", "label4", "label5", "gold_label"),
                      "test": _MNLI}),
    GlueTask("QNLI", (2, 3), (2, 3), 4, 2, submission=("QNLI",),
             columns={"train": ("index", "question", "sentence", "label"), "test": ("index", "question", "sentence")}),
    GlueTask("RTE", (2, 3), (2, 3), 4, 2, submission=("RTE",), columns={"train": _NLI + ("label",), "test": _NLI}),
    GlueTask("WNLI", (2, 3), (2, 3), 4, 2, submission=("WNLI",), columns={"train": _NLI + ("label",), "test": _NLI}),
)}
# The diagnostic set (AX) is labelled with the MNLI model; prepared as MNLI's third test set.
DIAGNOSTIC = os.path.join("diagnostic", "diagnostic.tsv")


def task(name: str) -> GlueTask:
    """The task called ``name`` (GLUE's spelling), or a GlueError."""
    if name not in TASKS:
        raise GlueError(f"unknown GLUE task '{name}' (one of {', '.join(TASKS)})")
    return TASKS[name]


def fairseq_split(t: GlueTask, split: str) -> str:
    """fairseq-preprocess's name of a GLUE split: train, valid, valid1, test, test1, ..."""
    for kind, names in (("valid", t.dev), ("test", t.test)):
        if split in names:
            k = names.index(split)
            return kind if k == 0 else f"{kind}{k}"
    return split


def check(glue_dir: str, names: Sequence[str]) -> None:
    """Raise a one-line GlueError unless every task folder and TSV exists."""
    if not os.path.isdir(glue_dir):
        raise GlueError(f"no GLUE folder '{glue_dir}'")
    for name in names:
        t = task(name)
        folder = os.path.join(glue_dir, t.name)
        if not os.path.isdir(folder):
            raise GlueError(f"GLUE folder '{glue_dir}' has no task folder '{t.name}' "
                            f"(expected {t.name}/{{{','.join(t.splits)}}}.tsv)")
        for split in t.splits:
            if not os.path.isfile(os.path.join(folder, split + ".tsv")):
                raise GlueError(f"missing {t.name}/{split}.tsv in GLUE folder '{glue_dir}'")


def read_rows(glue_dir: str, t: GlueTask, split: str) -> List[List[str]]:
    """The rows of ``TASK/SPLIT.tsv`` as lists of fields, without the header,
    filtered as fairseq's recipe filters them (QQP train/dev: exactly 6 fields)."""
    path = os.path.join(glue_dir, t.name, split + ".tsv")
    if not os.path.isfile(path):
        raise GlueError(f"missing {t.name}/{split}.tsv in GLUE folder '{glue_dir}'")
    with open(path, encoding="utf-8-sig", newline="\n") as f:  # MRPC's files start with a BOM
        lines = f.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    skip = 1 if (t.header or split == "test") else 0
    rows = [line.rstrip("\r").split("\t") for line in lines[skip:]]
    if t.fields and split != "test":
        rows = [r for r in rows if len(r) == t.fields]
    return rows


def _column(rows: List[List[str]], col: int, where: str) -> List[str]:
    for k, r in enumerate(rows):
        if len(r) < col:
            raise GlueError(f"{where}: row {k + 1} has {len(r)} fields, column {col} is needed")
    return [r[col - 1] for r in rows]


def extract(glue_dir: str, t: GlueTask) -> Dict[str, Dict[str, List[str]]]:
    """{fairseq split: {"input0": texts, "input1": texts, "label": labels, "index": ids}},
    the columns fairseq's recipe cuts (labels only for train and dev; ``index``,
    the first column, for test sets).  MNLI gets the diagnostic set as test2
    when ``GLUE/diagnostic/diagnostic.tsv`` exists."""
    out: Dict[str, Dict[str, List[str]]] = {}
    for split in t.splits:
        rows, where = read_rows(glue_dir, t, split), f"{t.name}/{split}.tsv"
        is_test = split in t.test
        cols = t.test_inputs if is_test else t.inputs
        data = {f"input{k}": _column(rows, c, where) for k, c in enumerate(cols)}
        if is_test:
            data["index"] = _column(rows, 1, where)
        else:
            label = t.dev_label if (split in t.dev and t.dev_label) else t.label
            data["label"] = [x.strip() for x in _column(rows, label, where)]
        out[fairseq_split(t, split)] = data
    diag = os.path.join(glue_dir, DIAGNOSTIC)
    if t.name == "MNLI" and os.path.isfile(diag):
        with open(diag, encoding="utf-8-sig") as f:
            rows = [line.rstrip("\r\n").split("\t") for line in f.readlines()[1:]]
        out[f"test{len(t.test)}"] = {"input0": _column(rows, 2, DIAGNOSTIC),
                                     "input1": _column(rows, 3, DIAGNOSTIC), "index": _column(rows, 1, DIAGNOSTIC)}
    return out


def write_extracted(glue_dir: str, name: str, out_dir: str) -> List[str]:
    """Write ``out_dir/SPLIT.raw.inputK`` and ``SPLIT.label`` (fairseq split
    names) for task ``name``; returns the files written."""
    t = task(name)
    os.makedirs(out_dir, exist_ok=True)
    written = []
    for split, data in extract(glue_dir, t).items():
        for key, values in data.items():
            if key == "index":
                continue
            path = os.path.join(out_dir, f"{split}.{'raw.' if key.startswith('input') else ''}{key}")
            _write_lines(path, values)
            written.append(path)
    return written


def _write_lines(path: str, lines: Iterable[str]) -> None:
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8", newline="\n") as f:
        f.writelines(line + "\n" for line in lines)
    os.replace(tmp, path)


# ---------------------------------------------------------------- tokenisation

def encoder(kind: str, model: Optional[str] = None):
    """A function line -> space-separated BPE tokens: ``gpt2`` (RoBERTa's
    byte-level BPE as GPT-2 ids; ``model`` is a folder with encoder.json and
    vocab.bpe), ``sentencepiece`` (pieces; ``model`` is the .model file) or
    ``none`` (text that is already tokenised: whitespace is normalised)."""
    if kind == "none":
        return lambda line: " ".join(line.split())
    if not model or not os.path.exists(model):
        raise GlueError(f"--bpe {kind} needs its model (--bpe-model): '{model}' does not exist")
    if kind == "gpt2":
        get_encoder = _gpt2_bpe_utils().get_encoder
        files = [os.path.join(model, n) for n in ("encoder.json", "vocab.bpe")]
        for f in files:
            if not os.path.isfile(f):
                raise GlueError(f"--bpe gpt2: no {os.path.basename(f)} in '{model}'")
        bpe = get_encoder(*files)
        return lambda line: " ".join(map(str, bpe.encode(line.strip())))
    if kind == "sentencepiece":
        import sentencepiece as spm

        sp = spm.SentencePieceProcessor(model_file=model)
        return lambda line: " ".join(sp.encode(line.strip(), out_type=str))
    raise GlueError(f"unknown --bpe '{kind}' (gpt2, sentencepiece or none)")


def _gpt2_bpe_utils():
    """fairseq's ``gpt2_bpe_utils`` module, loaded from its file: it needs
    only the standard library and ``regex``, not the seconds of importing fairseq."""
    import importlib.util

    spec = importlib.util.find_spec("fairseq")
    if spec is None or not spec.submodule_search_locations:
        raise GlueError("--bpe gpt2 needs fairseq installed")
    path = os.path.join(list(spec.submodule_search_locations)[0], "data", "encoders", "gpt2_bpe_utils.py")
    mod_spec = importlib.util.spec_from_file_location("_gpt2_bpe_utils", path)
    mod = importlib.util.module_from_spec(mod_spec)
    mod_spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def encode_file(enc, src: str, dst: str) -> int:
    """Encode ``src`` into ``dst`` line by line with ``enc`` (:func:`encoder`;
    empty lines kept, as fairseq's ``--keep-empty``), with a progress bar;
    returns the line count."""
    from tqdm import tqdm

    with open(src, encoding="utf-8") as f:
        lines = f.read().split("\n")[:-1]
    _write_lines(dst, (enc(x) for x in tqdm(lines, desc=os.path.basename(dst), unit=" lines",
                                               leave=False, disable=len(lines) < 5000)))
    return len(lines)


# ---------------------------------------------------------------- binarising

def preprocess_commands(name: str, work: str, dest: str, src_dict: str, workers: int = 1,
                        splits: Optional[Sequence[str]] = None) -> List[List[str]]:
    """fairseq-preprocess argument lists (without the program name) that
    binarise ``work/SPLIT.inputK`` and ``work/SPLIT.label`` into
    ``dest/{input0,input1,label}``, as fairseq's preprocess_GLUE_tasks.sh does.
    ``splits``: the fairseq splits present in ``work`` (default: the task's)."""
    t = task(name)
    splits = list(splits or [fairseq_split(t, s) for s in t.splits])
    valid = [s for s in splits if s.startswith("valid")]
    test = [s for s in splits if s.startswith("test")]

    def prefs(lang: str, with_test: bool) -> List[str]:
        args = ["--trainpref", os.path.join(work, f"train.{lang}"),
                "--validpref", ",".join(os.path.join(work, f"{s}.{lang}") for s in valid)]
        if with_test and test:
            args += ["--testpref", ",".join(os.path.join(work, f"{s}.{lang}") for s in test)]
        return args

    cmds = [["--only-source", *prefs(f"input{k}", True), "--destdir", os.path.join(dest, f"input{k}"),
             "--workers", str(workers), "--srcdict", src_dict] for k in range(len(t.inputs))]
    if t.num_classes > 1:
        cmds.append(["--only-source", *prefs("label", False), "--destdir", os.path.join(dest, "label"),
                     "--workers", str(workers)])
    return cmds


def write_regression_labels(work: str, dest: str) -> None:
    """STS-B: labels stay text, scaled from [0, 5] into [0, 1] (fairseq's
    ``awk '{print $1 / 5.0}'``, printed like awk's %.6g)."""
    os.makedirs(os.path.join(dest, "label"), exist_ok=True)
    for src, dst in (("train", "train"), ("valid", "valid")):
        with open(os.path.join(work, f"{src}.label"), encoding="utf-8") as f:
            values = [float(x.split()[0]) / 5.0 for x in f if x.strip()]
        _write_lines(os.path.join(dest, "label", f"{dst}.label"), (f"{v:.6g}" for v in values))


def binarize(name: str, work: str, dest: str, src_dict: str, workers: int = 1) -> None:
    """Run :func:`preprocess_commands` in this process (one fairseq import for
    all), and write STS-B's text labels."""
    from fairseq import options
    from fairseq_cli import preprocess

    t = task(name)
    splits = sorted({os.path.basename(p).split(".")[0] for p in os.listdir(work) if p.endswith(".input0")})
    for args in preprocess_commands(name, work, dest, src_dict, workers, splits):
        print("fairseq-preprocess " + " ".join(args), file=sys.stderr)
        preprocess.main(options.get_preprocessing_parser().parse_args(args))
    if t.num_classes == 1:
        write_regression_labels(work, dest)


def count(prefix: str) -> int:
    """The number of sentences of the binarised (mmap) dataset ``prefix``
    (``prefix.idx``: 9-byte magic, version, dtype, then the length)."""
    with open(prefix + ".idx", "rb") as f:
        head = f.read(26)
    if len(head) < 26 or head[:9] != b"MMIDIDX\x00\x00":
        raise GlueError(f"'{prefix}.idx' is not a fairseq mmap index")
    return struct.unpack("<Q", head[18:26])[0]


# ---------------------------------------------------------------- stand-in data

MATCHED = ("fiction", "government", "slate", "telephone", "travel")
MISMATCHED = ("facetoface", "letters", "nineeleven", "oup", "verbatim")


class _Text:
    """Sentences of the project's synthetic language (its source side,
    without sentence-initial markers) and the keywords the labels use."""

    def __init__(self, seed: int, rng: random.Random, max_len: int = 24) -> None:
        try:
            from .synthetic import SyntheticConfig, _Grammar, _Lexicon
        except ImportError:  # run as a script (scripts/prepare-glue.sh), without the package
            from synthetic import SyntheticConfig, _Grammar, _Lexicon  # type: ignore[no-redef]

        lex = _Lexicon(SyntheticConfig(seed=seed))
        self.gram, self.rng, self.max_len = _Grammar(lex, rng), rng, max_len
        self.neg, self.q = lex.func["neg"][0], lex.func["q"][0]
        self.words = [w for w, _ in lex.nouns[:200] + lex.adjs[:100] + lex.verbs[:100]]

    def sentence(self) -> List[str]:
        while True:
            s = self.gram.sentence()[0]
            s = s[1:] if s[0] in (self.neg, self.q) else s
            if 4 <= len(s) <= self.max_len:
                return s

    def derive(self, s: List[str]) -> List[str]:
        """``s`` less one word (never the final "."): a paraphrase / entailed sentence."""
        k = self.rng.randrange(len(s) - 1)
        return s[:k] + s[k + 1:]

    def replace(self, s: List[str], k: int) -> List[str]:
        """``s`` with k of its words (not the final ".") replaced by random words."""
        out = list(s)
        for i in self.rng.sample(range(len(s) - 1), k):
            out[i] = self.rng.choice(self.words)
        return out


def _record(name: str, text: _Text) -> Tuple[str, str, str]:
    """(sentence1, sentence2, label) of one stand-in row; the label follows
    from the text (a keyword, word order or word overlap)."""
    rng, s = text.rng, text.sentence()
    j = " ".join
    if name == "CoLA":  # unacceptable: words in reverse order
        y = rng.randint(0, 1)
        return j(s if y else s[::-1]), "", str(y)
    if name == "SST-2":  # negative: the negation word
        y = rng.randint(0, 1)
        return j(s if y else [text.neg] + s), "", str(y)
    if name == "STS-B":  # similarity: the share of words kept
        k = rng.randrange(len(s))
        return j(s), j(text.replace(s, k)), f"{5.0 * (1 - k / (len(s) - 1)):.3f}"
    if name == "MNLI":
        y = rng.choice(("entailment", "neutral", "contradiction"))
        h = {"entailment": text.derive(s), "neutral": text.sentence(),
             "contradiction": [text.neg] + text.derive(s)}[y]
        return j(s), j(h), y
    if name in ("QNLI", "RTE"):
        y = rng.choice(("entailment", "not_entailment"))
        if name == "QNLI":
            return j([text.q] + s), j(s if y == "entailment" else text.sentence()), y
        other = text.sentence() if rng.random() < 0.5 else [text.neg] + s
        return j(s), j(text.derive(s) if y == "entailment" else other), y
    y = rng.randint(0, 1)  # MRPC, QQP, WNLI: 1 if the second sentence is derived from the first
    pre = [text.q] if name == "QQP" else []
    return j(pre + s), j(pre + (text.derive(s) if y else text.sentence())), str(y)


def _row(t: GlueTask, kind: str, k: int, s1: str, s2: str, y: str, genres=MATCHED) -> List[str]:
    """One TSV row of task ``t`` in split kind train/dev/test (official columns)."""
    test = kind == "test"
    if t.name == "CoLA":
        return [str(k), s1] if test else [f"fk{k % 97:02d}", y, "" if y == "1" else "*", s1]
    if t.name == "SST-2":
        return [str(k), s1] if test else [s1, y]
    if t.name == "MRPC":
        return [str(k) if test else y, str(2 * k + 1000), str(2 * k + 1001), s1, s2]
    if t.name == "STS-B":
        row = [str(k), "main-captions", "MSRvid", "2012test", str(k), "none", "none", s1, s2]
        return row if test else row + [y]
    if t.name == "QQP":
        return [str(k), s1, s2] if test else [str(k), str(2 * k + 1), str(2 * k + 2), s1, s2, y]
    if t.name == "MNLI":
        w1, w2 = s1.split(), s2.split()
        row = [str(k), str(k // 3), f"{k}n", genres[k % len(genres)], f"( {' '.join(w1)} )",
               f"( {' '.join(w2)} )", "(ROOT (S " + " ".join(f"(X {w})" for w in w1) + "))",
               "(ROOT (S " + " ".join(f"(X {w})" for w in w2) + "))", s1, s2]
        return row if test else row + [y] * (2 if kind == "train" else 6)
    return [str(k), s1, s2] if test else [str(k), s1, s2, y]


def make_fake_glue(out: str, names: Sequence[str] = tuple(TASKS), rows: int = 300,
                   eval_rows: Optional[int] = None, seed: int = 1) -> Dict[str, Dict[str, int]]:
    """Write a stand-in GLUE folder to ``out``: the official file names,
    headers and columns of each task in ``names`` (and diagnostic/diagnostic.tsv
    with MNLI), ``rows`` training rows and ``eval_rows`` (default
    max(20, rows // 4)) rows per dev and test set.  Returns {task: {split: rows}}."""
    if rows < 1 or (eval_rows is not None and eval_rows < 1):
        raise GlueError("--rows and --eval-rows must be positive")
    eval_rows = eval_rows or max(20, rows // 4)
    sizes: Dict[str, Dict[str, int]] = {}
    for name in names:
        t = task(name)
        os.makedirs(os.path.join(out, t.name), exist_ok=True)
        sizes[t.name] = {}
        for split in t.splits:
            kind = "train" if split == "train" else "test" if split in t.test else "dev"
            text = _Text(seed, random.Random(f"glue:{t.name}:{split}:{seed}"))
            genres = MISMATCHED if split.endswith("mismatched") else MATCHED
            n = rows if kind == "train" else eval_rows
            body = [_row(t, kind, k, *_record(t.name, text), genres=genres) for k in range(n)]
            header = [] if (kind != "test" and not t.header) else [list(t.columns.get(kind, t.columns["train"]))]
            _write_lines(os.path.join(out, t.name, split + ".tsv"), ("\t".join(r) for r in header + body))
            sizes[t.name][split] = n
        if t.name == "MNLI":
            text = _Text(seed, random.Random(f"glue:AX:{seed}"))
            body = [[str(k), *_record("MNLI", text)[:2]] for k in range(eval_rows)]
            os.makedirs(os.path.join(out, "diagnostic"), exist_ok=True)
            _write_lines(os.path.join(out, DIAGNOSTIC), ("\t".join(r) for r in [list(_NLI)] + body))
    return sizes


def sentences(n: int, seed: int = 1, rng_seed: str = "corpus") -> List[str]:
    """``n`` sentences of the language the stand-in uses (for a masked-LM corpus)."""
    text = _Text(seed, random.Random(f"glue:{rng_seed}:{seed}"))
    out = []
    for _ in range(n):
        s = text.sentence()
        r = text.rng.random()
        out.append(" ".join(([text.neg] if r < 0.15 else [text.q] if r < 0.3 else []) + s))
    return out


# ---------------------------------------------------------------- command line

def main(argv: Optional[Sequence[str]] = None) -> int:
    """``python -m fairseq_local.data.glue CMD ...`` (see the module docstring)."""
    p = argparse.ArgumentParser(prog="python -m fairseq_local.data.glue", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check", help="every task folder and TSV exists")
    c.add_argument("--glue-dir", required=True)
    c.add_argument("--tasks", nargs="+", default=list(TASKS))
    c = sub.add_parser("extract", help="SPLIT.raw.inputK and SPLIT.label of one task")
    c.add_argument("--glue-dir", required=True)
    c.add_argument("--task", required=True)
    c.add_argument("--out", required=True)
    c = sub.add_parser("encode", help="BPE-encode files")
    c.add_argument("--bpe", choices=("gpt2", "sentencepiece", "none"), required=True)
    c.add_argument("--bpe-model")
    c.add_argument("--inputs", nargs="+", required=True)
    c.add_argument("--outputs", nargs="+", required=True)
    c = sub.add_parser("binarize", help="fairseq-preprocess --only-source into OUT/TASK-bin")
    c.add_argument("--tasks", nargs="+", required=True)
    c.add_argument("--out", required=True, help="OUT/processed/TASK/SPLIT.{inputK,label} -> OUT/TASK-bin")
    c.add_argument("--src-dict", required=True)
    c.add_argument("--workers", type=int, default=1)
    c = sub.add_parser("count", help="sentences of a binarised dataset")
    c.add_argument("prefix")
    c = sub.add_parser("fake", help="a stand-in GLUE folder")
    c.add_argument("--out", required=True)
    c.add_argument("--tasks", nargs="+", default=list(TASKS))
    c.add_argument("--rows", type=int, default=300, help="training rows per task")
    c.add_argument("--eval-rows", type=int, help="rows per dev/test set (default max(20, rows/4))")
    c.add_argument("--seed", type=int, default=1)
    a = p.parse_args(argv)
    try:
        if a.cmd == "check":
            check(a.glue_dir, a.tasks)
        elif a.cmd == "extract":
            check(a.glue_dir, [a.task])
            write_extracted(a.glue_dir, a.task, a.out)
        elif a.cmd == "encode":
            if len(a.inputs) != len(a.outputs):
                raise GlueError("encode: --inputs and --outputs differ in number")
            enc = encoder(a.bpe, a.bpe_model)
            for src, dst in zip(a.inputs, a.outputs):
                encode_file(enc, src, dst)
        elif a.cmd == "binarize":
            for name in a.tasks:
                binarize(name, os.path.join(a.out, "processed", name), os.path.join(a.out, f"{name}-bin"),
                         a.src_dict, a.workers)
        elif a.cmd == "count":
            print(count(a.prefix))
        else:
            for name, splits in make_fake_glue(a.out, a.tasks, a.rows, a.eval_rows, a.seed).items():
                print(name, " ".join(f"{s}={n}" for s, n in splits.items()))
    except (GlueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
