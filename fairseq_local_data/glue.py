"""The GLUE benchmark's folder layout and its preparation for fairseq (the
generated stand-in with the same files and columns is
:mod:`fairseq_local_data.glue_fake`).

Layout (as written by the GLUE download script, and read by fairseq's
``examples/roberta/preprocess_GLUE_tasks.sh``): ``GLUE/TASK/{train,dev,test}.tsv``,
MNLI with ``dev_matched``/``dev_mismatched``/``test_matched``/``test_mismatched``,
and the diagnostic set (AX) in ``GLUE/diagnostic/diagnostic.tsv``.  Every file
has a header line except CoLA's train and dev.  The columns read (1-based,
as fairseq's recipe cuts them) are in :data:`TASKS`.

Subcommands (``python -m fairseq_local_data.glue CMD``):

* ``check``: every requested task folder and TSV exists (one-line error);
* ``extract``: ``SPLIT.raw.input0``/``.raw.input1``/``.label`` per split, in
  fairseq's split names (MNLI dev_matched -> valid, dev_mismatched -> valid1);
* ``encode``: BPE of files (GPT-2 byte-level or SentencePiece, through
  :mod:`fairseq_local_data.bpe`, or none);
* ``binarize``: ``fairseq-preprocess --only-source`` of input0/input1/label
  into ``TASK-bin`` as fairseq's recipe lays it out (STS-B labels as text,
  divided by 5 into [0, 1]), fairseq's own program run as a child process;
* ``count``: the number of sentences of a binarised dataset;
* ``fake``: a stand-in GLUE folder whose labels follow from the text
  (:func:`fairseq_local_data.glue_fake.main`).
"""
from __future__ import annotations

import argparse
import os
import struct
import subprocess
import sys
from typing import Callable, Dict, List, Optional, Sequence

from . import bpe
from .errors import OneLineError
# The tasks' names are also imported from here by the commands and the plugin.
from .glue_tasks import DIAGNOSTIC, TASKS, GlueError, GlueTask, task, write_lines


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
            write_lines(path, values)
            written.append(path)
    return written


# ---------------------------------------------------------------- tokenisation

def encoder(kind: str, model: Optional[str] = None) -> Callable[[str], str]:
    """A function line -> space-separated tokens: ``gpt2`` (RoBERTa's
    byte-level BPE as GPT-2 ids; ``model`` is the folder of encoder.json and
    vocab.bpe, see :func:`fairseq_local_data.bpe.gpt2_files`) or
    ``sentencepiece`` (pieces; ``model`` is the .model file), ``wordpiece``
    (BERT's pieces; ``model`` is vocab.txt) or ``byte_bpe`` (a Hugging Face
    RoBERTa's ids; ``model`` is the folder of vocab.json and merges.txt), all
    from :mod:`fairseq_local_data.bpe`, or ``none`` (text that is already
    tokenised: whitespace is normalised)."""
    if kind == "none":
        return lambda line: " ".join(line.split())
    if kind not in bpe.ENCODERS:
        raise GlueError(f"unknown --bpe '{kind}' ({', '.join(bpe.ENCODERS)} or none)")
    try:
        return bpe.make_encoder(kind, model)
    except bpe.TokenizerError as e:
        raise GlueError(f"--bpe {kind}: {e}") from None


def encode_file(enc: Callable[[str], str], src: str, dst: str) -> int:
    """Encode ``src`` into ``dst`` line by line with ``enc`` (:func:`encoder`;
    empty lines kept, as fairseq's ``--keep-empty``), with a progress bar;
    returns the line count."""
    from tqdm import tqdm

    with open(src, encoding="utf-8") as f:
        lines = f.read().split("\n")[:-1]
    write_lines(dst, (enc(x) for x in tqdm(lines, desc=os.path.basename(dst), unit=" lines",
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
        write_lines(os.path.join(dest, "label", f"{dst}.label"), (f"{v:.6g}" for v in values))


def binarize(name: str, work: str, dest: str, src_dict: str, workers: int = 1) -> None:
    """Run :func:`preprocess_commands` with fairseq-preprocess (fairseq's
    ``fairseq_cli.preprocess``, in a child process of this interpreter), and
    write STS-B's text labels.  A failed command is a :class:`GlueError`."""
    t = task(name)
    splits = sorted({os.path.basename(p).split(".")[0] for p in os.listdir(work) if p.endswith(".input0")})
    for args in preprocess_commands(name, work, dest, src_dict, workers, splits):
        print("fairseq-preprocess " + " ".join(args), file=sys.stderr, flush=True)
        status = subprocess.run([sys.executable, "-m", "fairseq_cli.preprocess", *args]).returncode
        if status != 0:
            raise GlueError(f"fairseq-preprocess failed (status {status}) writing {args[args.index('--destdir') + 1]}")
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


# ---------------------------------------------------------------- command line

def main(argv: Optional[Sequence[str]] = None) -> int:
    """``python -m fairseq_local_data.glue CMD ...`` (see the module docstring)."""
    prog = "python -m fairseq_local_data.glue"
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["fake"]:
        from . import glue_fake  # here: only the fake subcommand needs the generator

        return glue_fake.main(argv[1:], prog=f"{prog} fake")
    p = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check", help="every task folder and TSV exists")
    c.add_argument("--glue-dir", required=True)
    c.add_argument("--tasks", nargs="+", default=list(TASKS))
    c = sub.add_parser("extract", help="SPLIT.raw.inputK and SPLIT.label of one task")
    c.add_argument("--glue-dir", required=True)
    c.add_argument("--task", required=True)
    c.add_argument("--out", required=True)
    c = sub.add_parser("encode", help="BPE-encode files")
    c.add_argument("--bpe", choices=(*bpe.ENCODERS, "none"), required=True)
    c.add_argument("--bpe-model", help=f"gpt2: folder of encoder.json and vocab.bpe (default: ${bpe.GPT2_DIR_ENV}); "
                   "sentencepiece: the .model file; wordpiece: vocab.txt; byte_bpe: folder of vocab.json, merges.txt")
    c.add_argument("--inputs", nargs="+", required=True)
    c.add_argument("--outputs", nargs="+", required=True)
    c = sub.add_parser("binarize", help="fairseq-preprocess --only-source into OUT/TASK-bin")
    c.add_argument("--tasks", nargs="+", required=True)
    c.add_argument("--out", required=True, help="OUT/processed/TASK/SPLIT.{inputK,label} -> OUT/TASK-bin")
    c.add_argument("--src-dict", required=True)
    c.add_argument("--workers", type=int, default=1)
    c = sub.add_parser("count", help="sentences of a binarised dataset")
    c.add_argument("prefix")
    sub.add_parser("fake", help="a stand-in GLUE folder (fake --help: its options)")
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
        else:
            print(count(a.prefix))
    except (OneLineError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
