"""A stand-in GLUE folder: the official file names, headers and columns of
the nine tasks (and the diagnostic set), filled with sentences of the
project's synthetic language whose labels follow from the text, so that a
tiny model can learn them.

The rules (one per task, see :func:`_record`): CoLA unacceptable = words in
reverse order; SST-2 negative = the negation word; STS-B similarity = the
share of words kept; MRPC/QQP/WNLI paraphrase = the second sentence is the
first less one word; MNLI/QNLI/RTE entailment likewise, contradiction = a
negated derivation, neutral = an unrelated sentence.  With ``--hard``, CoLA,
SST-2, MNLI, QNLI and QQP follow the rules of :mod:`fairseq_local_data.glue_hard`
instead (labels that need the sentence's structure); ``--trees`` also writes
each dev and test split's sentences with their generator trees as
``TASK/SPLIT.conllu`` beside ``TASK/SPLIT.tsv`` (:func:`glue_hard.conllu`), the
gold syntax of Pande et al.'s analysis of the fine-tuned models (§3).

Command line: ``python -m fairseq_local_data.glue_fake --out DIR [--tasks ...]
[--rows N] [--eval-rows N] [--seed N] [--hard [--trees]]`` (also ``python -m
fairseq_local_data.glue fake ...``).
"""
from __future__ import annotations

import argparse
import os
import random
import sys
from typing import Dict, List, Optional, Sequence, Tuple

from . import glue_hard
from .errors import OneLineError
from .glue_tasks import DIAGNOSTIC, DIAGNOSTIC_COLUMNS, TASKS, GlueError, GlueTask, task, write_lines
from .language import Grammar, Lexicon, SyntheticConfig

# MNLI's genres: the matched dev/test sets share the training genres, the mismatched ones do not.
MATCHED = ("fiction", "government", "slate", "telephone", "travel")
MISMATCHED = ("facetoface", "letters", "nineeleven", "oup", "verbatim")


class _Text:
    """Sentences of the project's synthetic language (its source side,
    without sentence-initial markers) and the keywords the labels use."""

    def __init__(self, seed: int, rng: random.Random, max_len: int = 24) -> None:
        lex = Lexicon(SyntheticConfig(seed=seed))
        self.gram, self.rng, self.max_len = Grammar(lex, rng), rng, max_len
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
                   eval_rows: Optional[int] = None, seed: int = 1, hard: bool = False, max_len: int = 30,
                   lexicon: Optional[Tuple[int, int, int]] = None, trees: bool = False) -> Dict[str, Dict[str, int]]:
    """Write a stand-in GLUE folder to ``out``: the official file names,
    headers and columns of each task in ``names`` (and diagnostic/diagnostic.tsv
    with MNLI), ``rows`` training rows and ``eval_rows`` (default
    max(20, rows // 4)) rows per dev and test set; ``hard``: the rows of
    :mod:`fairseq_local_data.glue_hard` (its tasks only), with sentences of at
    most ``max_len`` words and ``lexicon`` (nouns, adjectives, verbs; default
    the language's own sizes); ``hard`` and ``trees``: also TASK/SPLIT.conllu,
    the gold trees of every dev and test split's sentences.  Returns {task: {split: rows}}."""
    if rows < 1 or (eval_rows is not None and eval_rows < 1):
        raise GlueError("--rows and --eval-rows must be positive")
    if trees and not hard:
        raise GlueError("--trees goes with --hard (only its sentences have gold trees)")
    bad = [t.name for t in map(task, names) if t.name not in glue_hard.HARD_TASKS] if hard else []
    if bad:
        raise GlueError(f"--hard has no rule for {', '.join(bad)} (it has {', '.join(glue_hard.HARD_TASKS)})")
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
            rows_hard = glue_hard.examples(t.name, n, random.Random(f"glue-hard:{t.name}:{split}:{seed}"), seed,
                                           max_len, lexicon) if hard else []
            recs = [e.record() for e in rows_hard] if hard else [_record(t.name, text) for _ in range(n)]
            if trees and kind != "train":
                write_lines(os.path.join(out, t.name, split + ".conllu"),
                            glue_hard.conllu(rows_hard, split).rstrip("\n").split("\n") + [""])
            body = [_row(t, kind, k, *rec, genres=genres) for k, rec in enumerate(recs)]
            header = [] if (kind != "test" and not t.header) else [list(t.columns.get(kind, t.columns["train"]))]
            write_lines(os.path.join(out, t.name, split + ".tsv"), ("\t".join(r) for r in header + body))
            sizes[t.name][split] = n
        if t.name == "MNLI":
            text = _Text(seed, random.Random(f"glue:AX:{seed}"))
            recs = glue_hard.records("MNLI", eval_rows, random.Random(f"glue-hard:AX:{seed}"), seed, max_len, lexicon) \
                if hard else [_record("MNLI", text) for _ in range(eval_rows)]
            body = [[str(k), *rec[:2]] for k, rec in enumerate(recs)]
            os.makedirs(os.path.join(out, "diagnostic"), exist_ok=True)
            write_lines(os.path.join(out, DIAGNOSTIC), ("\t".join(r) for r in [list(DIAGNOSTIC_COLUMNS)] + body))
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


def main(argv: Optional[Sequence[str]] = None, prog: str = "python -m fairseq_local_data.glue_fake") -> int:
    """Write a stand-in GLUE folder; prints ``TASK split=rows ...`` per task."""
    p = argparse.ArgumentParser(prog=prog, description="Write a stand-in GLUE folder (the official layout).")
    p.add_argument("--out", required=True)
    p.add_argument("--tasks", nargs="+", default=list(TASKS))
    p.add_argument("--rows", type=int, default=300, help="training rows per task")
    p.add_argument("--eval-rows", type=int, help="rows per dev/test set (default max(20, rows/4))")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--hard", action="store_true",
                   help="CoLA, SST-2, MNLI, QNLI, QQP: labels that need structure (fairseq_local_data.glue_hard)")
    p.add_argument("--trees", action="store_true",
                   help="with --hard: also TASK/SPLIT.conllu, each dev and test sentence with its gold tree")
    p.add_argument("--max-len", type=int, default=30, help="with --hard: words per sentence at most (default 30)")
    p.add_argument("--lexicon", metavar="N,A,V",
                   help="with --hard: numbers of nouns, adjectives and verbs (default the language's 3000,800,800)")
    a = p.parse_args(argv)
    try:
        if (a.lexicon or a.max_len != 30) and not a.hard:
            raise GlueError("--lexicon and --max-len go with --hard")
        try:
            lexicon = tuple(int(x) for x in a.lexicon.split(",")) if a.lexicon else None
        except ValueError:
            raise GlueError(f"--lexicon needs three numbers N,A,V, not {a.lexicon!r}") from None
        for name, splits in make_fake_glue(a.out, a.tasks, a.rows, a.eval_rows, a.seed, a.hard, a.max_len,
                                           lexicon, a.trees).items():
            print(name, " ".join(f"{s}={n}" for s, n in splits.items()))
    except (OneLineError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
