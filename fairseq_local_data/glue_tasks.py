"""The GLUE tasks: their files, the columns fairseq's recipe reads, and the
stand-in's headers (read by :mod:`fairseq_local_data.glue` to prepare the
real folder, and by :mod:`fairseq_local_data.glue_fake` and
:mod:`fairseq_local_data.glue_hard` to write a stand-in)."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Dict, Iterable, Tuple

from .errors import OneLineError


class GlueError(OneLineError, ValueError):
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
DIAGNOSTIC_COLUMNS = _NLI


def task(name: str) -> GlueTask:
    """The task called ``name`` (GLUE's spelling), or a GlueError."""
    if name not in TASKS:
        raise GlueError(f"unknown GLUE task '{name}' (one of {', '.join(TASKS)})")
    return TASKS[name]


def write_lines(path: str, lines: Iterable[str]) -> None:
    """Write ``lines`` (each without its newline) to ``path`` atomically."""
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8", newline="\n") as f:
        f.writelines(line + "\n" for line in lines)
    os.replace(tmp, path)
