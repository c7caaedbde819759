"""WMT test sets: where their files are (scripts/prepare-wmt14.sh), and what
scripts/evaluate-wmt14.sh needs to score a translation of one.

* :func:`find_test`: the source and reference files of a test set, among
  plain files (``newstest2013.en``) and SGML files (``newstest2014-deen-src.en.sgm``);
* :func:`write_reference`: the raw (untokenised) reference, one segment a line;
* :func:`describe_split`: the BPE method and the test set name of a split of a
  prepared directory, from its ``summary.json`` (``wmt summary``);
* :func:`split_compounds`: Vaswani et al.'s compound splitting for tokenised
  BLEU (tensor2tensor's ``get_ende_bleu.sh``);
* :func:`bleu_summary`: the name, score and signature of a sacreBLEU JSON result.

The command line is that of :mod:`fairseq_local_data.wmt` (``find-test``,
``reference``, ``describe-split``, ``split-compounds``, ``bleu-summary``).
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Sequence

from .cleaning import WmtError, read_sgm


def test_set_names(name: str, src: str, tgt: str) -> list[tuple[str, str]]:
    """(source file, target file) names that may hold test set ``name``, best first."""
    s, t = src, tgt
    return [
        (f"{name}-{s}{t}-src.{s}.sgm", f"{name}-{s}{t}-ref.{t}.sgm"),  # one direction (newstest2018-ende-*)
        (f"{name}-{t}{s}-src.{s}.sgm", f"{name}-{t}{s}-ref.{t}.sgm"),  # both directions (newstest2014-deen-*)
        (f"{name}.{s}", f"{name}.{t}"),  # plain text (newstest2013.en)
        (f"{name}-src.{s}.sgm", f"{name}-ref.{t}.sgm"),  # newstest2013-src.en.sgm
    ]


def find_test(name: str, src: str, tgt: str, dirs: Sequence[Path]) -> tuple[Path, Path]:
    """The source and target files of test set ``name`` for ``src``-``tgt``,
    searched recursively in ``dirs`` (earlier directories first); both files
    come from the same naming scheme of :func:`test_set_names`."""
    files: dict[str, Path] = {}
    for d in dirs:
        for root, _, names in sorted(os.walk(d)):
            for n in sorted(names):
                if n.startswith(name):
                    files.setdefault(n, Path(root) / n)
    for a, b in test_set_names(name, src, tgt):
        if a in files and b in files:
            return files[a], files[b]
    tried = ", ".join(f"{a} + {b}" for a, b in test_set_names(name, src, tgt))
    raise WmtError(f"test set {name} not found for {src}-{tgt}: no {tried} in {', '.join(map(str, dirs))}")


def write_reference(name: str, src: str, tgt: str, dirs: Sequence[Path], out: Path) -> Path | None:
    """Write the raw reference of test set ``name`` (:func:`find_test`; the
    segments of an SGML file, or the lines of a plain one) to ``out``, one
    line each; returns the reference file, or None (and writes nothing) if
    the test set is not in ``dirs``."""
    try:
        _, ref = find_test(name, src, tgt, dirs)
    except WmtError:
        return None
    lines = read_sgm(ref) if ref.suffix == ".sgm" else ref.read_text(encoding="utf-8").splitlines()
    out.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return ref


def describe_split(summary: Path, split: str) -> tuple[str, str]:
    """(BPE method, test set name) of ``split`` in a prepared directory's
    ``summary.json``; the name is the split's own for a split it does not list."""
    if not summary.is_file():
        raise WmtError(f"missing summary {summary}")
    try:
        data = json.loads(summary.read_text(encoding="utf-8"))
        method = data["bpe"]["method"]
    except (ValueError, KeyError, TypeError):
        raise WmtError(f"{summary} is not the summary of a prepared directory (no bpe.method)") from None
    return str(method), str(data.get("splits", {}).get(split, {}).get("name", split))


def split_compounds(line: str) -> str:
    """A Moses-tokenised line with hyphenated compounds split as tensor2tensor's
    get_ende_bleu.sh does (Vaswani et al. 2017's tokenised BLEU): the
    aggressive-dash tokens "a @-@ b" joined back to "a-b", then written
    "a ##AT##-##AT## b"."""
    return re.sub(r"(\S)-(\S)", r"\1 ##AT##-##AT## \2", line.replace(" @-@ ", "-"))


def split_compounds_file(src: Path, dst: Path) -> int:
    """:func:`split_compounds` of every line of ``src`` into ``dst``; returns the line count."""
    lines = src.read_text(encoding="utf-8").splitlines()
    dst.write_text("".join(split_compounds(s) + "\n" for s in lines), encoding="utf-8")
    return len(lines)


def bleu_summary(path: Path) -> str:
    """"NAME SCORE SIGNATURE" of a sacreBLEU result in its JSON format (sacreBLEU's default output)."""
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
        return f"{d['name']} {d['score']} {d['signature']}"
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise WmtError(f"{path} is not a sacreBLEU JSON result ({e.__class__.__name__}: {e})") from None
