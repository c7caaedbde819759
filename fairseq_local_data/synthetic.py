"""Seeded generator of an artificial parallel corpus (source -> target).

Used to test and demo NMT training with local-attention Transformer encoders.
Pure standard library; the same seed and sizes give byte-identical files. The
language (its lexicon, the source and target grammars and the dependency
relations) is documented in :mod:`fairseq_local_data.language`.

Splits
------
The target is a deterministic function of the source. All pairs in a corpus
are distinct, so valid/test pairs never appear in train. Valid and test are
generated first, each from its own seeded stream, and train last, so they do
not depend on the train size.

Gold source trees (--trees)
---------------------------
With ``--trees`` the generator also writes {split}.{src}.conllu: one CoNLL-U
sentence per line of {split}.{src}, with the same words, the lemma (a noun or
verb without "-s"), UPOS, a few FEATS (Number on nouns, Person/Number on
pronouns, PronType=Rel, Polarity=Neg), and the Universal Dependencies heads
and relations of :mod:`fairseq_local_data.language` (the text files do not
change).

Grammar knobs and the hard preset (--hard)
------------------------------------------
Every field of :class:`~fairseq_local_data.language.SyntheticConfig` is an
option: the sizes above, and the grammar's knobs (probabilities in [0, 1]:
--rel-clause --np-pp --neg --question --pron-subj --coord-subj --adjunct
--plural; nesting depths: --subj-depth --obj-depth), documented in
:mod:`fairseq_local_data.language`. Their defaults give the same files as
before the knobs existed. ``--hard`` starts from the preset
:data:`~fairseq_local_data.language.HARD` instead of the defaults: subject
depth 3, object depth 2, relative clauses 0.4, PPs 0.3, NEG and Q markers 0.2
each, 10 to 40 words; an option given explicitly overrides the preset.

Command line: ``python -m fairseq_local_data.synthetic --out-dir DIR [--hard] [--seed N --train N ...]``.
"""
from __future__ import annotations

import argparse
import os
import random
from dataclasses import fields

from .language import HARD, ConfigError, Grammar, Lexicon, SyntheticConfig


def _write_atomic(path: str, lines: list[str]) -> None:
    tmp = f"{path}.tmp{os.getpid()}"  # same directory, so os.replace is atomic
    try:
        with open(tmp, "w", encoding="utf-8", newline="\n") as f:
            f.writelines(line + "\n" for line in lines)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def generate_corpus(cfg: SyntheticConfig, out_dir: str, src: str = "src",
                    tgt: str = "tgt", trees: bool = False) -> dict:
    """Write {split}.{src} / {split}.{tgt} for train, valid and test into out_dir,
    and with ``trees`` the gold source trees {split}.{src}.conllu as well.

    Valid and test are generated first (each from its own seeded stream) and
    train last, all pairs globally distinct. Returns line counts per split.
    """
    if cfg.train <= 0 or cfg.valid < 0 or cfg.test < 0:
        raise ValueError("train must be > 0, valid and test must be >= 0")
    lex = Lexicon(cfg)
    seen: set[str] = set()
    data: dict[str, tuple[list, list, list]] = {}
    for split in ("valid", "test", "train"):
        n = getattr(cfg, split)
        gram = Grammar(lex, random.Random(f"{split}:{cfg.seed}"), cfg)
        srcs, tgts, parses, tries = [], [], [], 0
        while len(srcs) < n:
            tries += 1
            if tries > 50 * n + 10000:
                raise RuntimeError(f"could not generate {n} distinct {split} pairs")
            tree, t = gram.sentence_tree()
            if not cfg.min_len <= len(tree.rows) <= cfg.max_len:
                continue
            line = " ".join(tree.words)
            if line in seen:  # target is a function of source
                continue
            seen.add(line)
            srcs.append(line)
            tgts.append(" ".join(t))
            parses.append(tree)
        data[split] = (srcs, tgts, parses)
    os.makedirs(out_dir, exist_ok=True)
    for split in ("train", "valid", "test"):
        _write_atomic(os.path.join(out_dir, f"{split}.{src}"), data[split][0])
        _write_atomic(os.path.join(out_dir, f"{split}.{tgt}"), data[split][1])
        if trees:  # one CoNLL-U block per line of {split}.{src}, each ended by a blank line
            _write_atomic(os.path.join(out_dir, f"{split}.{src}.conllu"),
                          [tree.conllu(f"{split}-{k}") for k, tree in enumerate(data[split][2], 1)])
    return {split: len(data[split][0]) for split in ("train", "valid", "test")}


class _Parser(argparse.ArgumentParser):
    """ArgumentParser whose errors are a single stderr line (exit status 2)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point."""
    p = _Parser(prog="python -m fairseq_local_data.synthetic", description="Generate a synthetic parallel corpus.")
    p.add_argument("--out-dir", required=True)
    for f in fields(SyntheticConfig):  # None: not given (the default, or the --hard preset)
        hard = f", --hard: {HARD[f.name]}" if f.name in HARD else ""
        p.add_argument("--" + f.name.replace("_", "-"), type=float if isinstance(f.default, float) else int,
                       default=None, help=f"default: {f.default}{hard}")
    p.add_argument("--hard", action="store_true",
                   help="start from the hard preset (deeper nesting, more relative clauses, PPs and NEG/Q markers, "
                        "10 to 40 words); options given explicitly override it")
    p.add_argument("--src", default="src")
    p.add_argument("--tgt", default="tgt")
    p.add_argument("--trees", action="store_true",
                   help="also write the gold source trees as {split}.{src}.conllu")
    a = p.parse_args(argv)
    for f in fields(SyntheticConfig):
        if getattr(a, f.name) is None:
            setattr(a, f.name, HARD[f.name] if a.hard and f.name in HARD else f.default)
    if a.train <= 0:
        p.error("--train must be positive")
    if min(a.valid, a.test) < 0:
        p.error("--valid and --test must be non-negative")
    if min(a.nouns, a.adjectives, a.verbs, a.dets) <= 0 or a.preps < 2:
        p.error("lexicon sizes must be positive (--preps at least 2)")
    if a.src == a.tgt or not a.src or not a.tgt:
        p.error("--src and --tgt must be distinct, non-empty suffixes")
    if not 1 <= a.min_len <= a.max_len:
        p.error("need 1 <= --min-len <= --max-len")
    try:
        cfg = SyntheticConfig(**{f.name: getattr(a, f.name) for f in fields(SyntheticConfig)})
    except ConfigError as e:
        p.error(str(e))
    try:
        counts = generate_corpus(cfg, a.out_dir, a.src, a.tgt, a.trees)
    except OSError as e:
        p.error(f"cannot write corpus to {a.out_dir}: {e}".replace("\n", " "))
    except RuntimeError as e:
        p.error(str(e))
    print(" ".join(f"{k}={v}" for k, v in counts.items()) + f" pairs written to {a.out_dir}")


if __name__ == "__main__":
    main()
