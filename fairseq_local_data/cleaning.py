"""Text processing behind the ``tok``, ``clean``, ``spm-train``,
``spm-encode`` and ``summary`` commands of :mod:`fairseq_local_data.wmt`
(scripts/prepare-wmt14.sh):
Moses-style normalisation and tokenisation, the clean-corpus-n filter, a joint
SentencePiece BPE model and the JSON summary of a prepared directory.

It also holds the helpers shared with ``wmt.py`` (``WmtError``, progress bars,
line counting, SGML segments), so that ``wmt.py`` imports this module and not
the other way round. Like ``wmt.py`` it needs only the standard library,
sacremoses, regex, tqdm and (for SentencePiece) sentencepiece.
"""
from __future__ import annotations

import itertools
import os
import re
import struct
import sys
from multiprocessing import Pool
from pathlib import Path
from typing import Iterable, Iterator, Sequence

from tqdm import tqdm

from .errors import OneLineError


# --------------------------------------------------------------------------- shared with wmt.py


class WmtError(OneLineError):
    """A problem with the input data, reported as one ``error:`` line."""


def progress(total: int | None = None, large: int = 100_000, **kwargs) -> tqdm:
    """A progress bar on stderr: on a terminal always; in a log file only for
    ``total`` of at least ``large`` (lines or bytes), updated every 30 s."""
    tty = sys.stderr.isatty()
    return tqdm(total=total, mininterval=1 if tty else 30, leave=tty,
                disable=not tty and (total or 0) < large, **kwargs)


def _unterminated(path: Path) -> int:
    """1 if ``path`` ends in a line without a newline, else 0."""
    with open(path, "rb") as f:
        if f.seek(0, os.SEEK_END) == 0:
            return 0
        f.seek(-1, os.SEEK_END)
        return int(f.read(1) != b"\n")


def count_lines(path: Path) -> int:
    """Number of newline characters in ``path`` (as ``wc -l``)."""
    n = 0
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            n += block.count(b"\n")
    return n


# --------------------------------------------------------------------------- SGML segments

_SEG = re.compile(r"<seg[^>]*>\s*(.*?)\s*</seg>", re.IGNORECASE)


def read_sgm(path: Path) -> Iterator[str]:
    """The text of each ``<seg id="...">...</seg>`` line of an SGML file
    (tags removed, entities left as they are, like fairseq's recipes)."""
    with open(path, encoding="utf-8", errors="replace", newline="\n") as f:
        for line in f:
            m = _SEG.search(line)
            if m:
                yield m.group(1)


# --------------------------------------------------------------------------- tokenisation

_worker: tuple | None = None


def _init(lang: str) -> None:
    global _worker
    import regex
    from sacremoses import MosesPunctNormalizer, MosesTokenizer

    _worker = (MosesPunctNormalizer(lang), MosesTokenizer(lang), regex.compile(r"\p{C}"))


def normalize_tokenize(line: str) -> str:
    """normalize-punctuation.perl, remove-non-printing-char.perl and
    tokenizer.perl -a -no-escape for one line (after :func:`_init`)."""
    assert _worker is not None
    norm, tok, control = _worker
    text = control.sub(" ", norm.normalize(line.rstrip("\n")))
    text = tok.tokenize(text, aggressive_dash_splits=True, escape=False, return_str=True)
    return " ".join(text.split())


def _read_lines(path: Path) -> Iterator[str]:
    if path.suffix == ".sgm":
        yield from read_sgm(path)
    else:
        with open(path, encoding="utf-8", errors="replace", newline="\n") as f:
            yield from f


def tokenize_file(inp: Path, out: Path, lang: str, workers: int = 1) -> int:
    """Normalise and tokenise ``inp`` (plain text or SGML) into ``out``; returns
    the number of lines."""
    if not inp.is_file():
        raise WmtError(f"missing file: {inp}")
    total = sum(1 for _ in read_sgm(inp)) if inp.suffix == ".sgm" else count_lines(inp) + _unterminated(inp)
    tmp = out.with_name(out.name + ".tmp")
    n = 0
    with open(tmp, "w", encoding="utf-8") as f, progress(total=total, unit=" lines", desc=f"tokenising {inp.name}") as bar:
        if workers > 1 and total > 20000:  # worker processes pay off on large files only
            with Pool(workers, initializer=_init, initargs=(lang,)) as pool:
                lines: Iterable[str] = pool.imap(normalize_tokenize, _read_lines(inp), chunksize=256)
                for n, line in enumerate(lines, 1):
                    f.write(line + "\n")
                    bar.update()
        else:
            _init(lang)
            for n, line in enumerate(map(normalize_tokenize, _read_lines(inp)), 1):
                f.write(line + "\n")
                bar.update()
    if n != total:
        raise WmtError(f"{inp}: read {n} lines but counted {total}")
    os.replace(tmp, out)
    return n


# --------------------------------------------------------------------------- cleaning


def keep_pair(src: str, tgt: str, ratio: float, min_len: int, max_len: int, max_word: int = 1000) -> bool:
    """clean-corpus-n.perl's test on two whitespace-tokenised sentences: both
    have ``min_len``..``max_len`` tokens, neither is more than ``ratio`` times
    longer than the other (in tokens), and no token exceeds ``max_word`` characters."""
    s, t = src.split(), tgt.split()
    if not (min_len <= len(s) <= max_len and min_len <= len(t) <= max_len):
        return False
    if not s or not t or len(s) / len(t) > ratio or len(t) / len(s) > ratio:
        return False
    return all(len(w) <= max_word for w in s + t)


def clean(
    pairs: Sequence[tuple[str, Path, Path]], out_src: Path, out_tgt: Path,
    ratio: float = 1.5, min_len: int = 1, max_len: int = 250,
) -> dict:
    """Filter and concatenate the (name, source, target) corpora into
    ``out_src``/``out_tgt`` (whitespace collapsed, as clean-corpus-n writes
    them). Returns {"corpora": {name: {"before": n, "after": m}}, "before": N, "after": M}."""
    tmp_s, tmp_t = (p.with_name(p.name + ".tmp") for p in (out_src, out_tgt))
    stats: dict = {"corpora": {}, "before": 0, "after": 0}
    total = sum(count_lines(p[1]) for p in pairs)
    with open(tmp_s, "w", encoding="utf-8") as fs, open(tmp_t, "w", encoding="utf-8") as ft, \
            progress(total, unit=" pairs", desc="cleaning") as bar:
        for name, s_path, t_path in pairs:
            before = after = 0
            with open(s_path, encoding="utf-8", newline="\n") as a, open(t_path, encoding="utf-8", newline="\n") as b:
                for before, (s, t) in enumerate(_zip_strict(a, b, s_path, t_path), 1):
                    bar.update()
                    if keep_pair(s, t, ratio, min_len, max_len):
                        fs.write(" ".join(s.split()) + "\n")
                        ft.write(" ".join(t.split()) + "\n")
                        after += 1
            stats["corpora"][name] = {"before": before, "after": after}
            stats["before"] += before
            stats["after"] += after
    if stats["after"] == 0:
        raise WmtError(f"empty corpus: no sentence pair of {', '.join(str(p[1]) for p in pairs)} survives cleaning")
    os.replace(tmp_s, out_src)
    os.replace(tmp_t, out_tgt)
    return stats


def _zip_strict(a, b, a_path: Path, b_path: Path) -> Iterator[tuple[str, str]]:
    for x, y in itertools.zip_longest(a, b):
        if x is None or y is None:
            longer = a_path if y is None else b_path
            raise WmtError(f"parallel files differ in length: {longer} has more lines")
        yield x, y


# --------------------------------------------------------------------------- SentencePiece


def spm_train(inputs: Sequence[Path], prefix: Path, vocab_size: int, threads: int = 2) -> None:
    """Train a joint SentencePiece BPE model on ``inputs``: writes
    ``prefix.model`` and ``prefix.vocab``. ``vocab_size`` is a soft limit, so
    a small corpus gives a smaller vocabulary instead of failing."""
    import sentencepiece as spm

    tmp = prefix.with_name(prefix.name + ".tmp")
    spm.SentencePieceTrainer.train(
        input=[str(p) for p in inputs], model_prefix=str(tmp), vocab_size=vocab_size,
        model_type="bpe", character_coverage=1.0, hard_vocab_limit=False,
        input_sentence_size=10_000_000, shuffle_input_sentence=True,
        num_threads=threads, minloglevel=2,
    )
    for ext in ("vocab", "model"):  # the model last: its presence marks success
        os.replace(Path(f"{tmp}.{ext}"), Path(f"{prefix}.{ext}"))


def spm_encode(model: Path, inp: Path, out: Path) -> int:
    """Segment each line of ``inp`` into pieces; returns the number of lines."""
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=str(model))
    tmp = out.with_name(out.name + ".tmp")
    n = 0
    with open(inp, encoding="utf-8", newline="\n") as f, open(tmp, "w", encoding="utf-8") as g:
        for n, line in enumerate(progress(count_lines(inp), iterable=f, unit=" lines", desc=f"encoding {inp.name}"), 1):
            g.write(" ".join(sp.encode(line.rstrip("\n"), out_type=str)) + "\n")
    os.replace(tmp, out)
    return n


# --------------------------------------------------------------------------- summary


def indexed_size(idx: Path) -> int:
    """Number of sentences in a fairseq mmap dataset, read from its ``.idx`` header."""
    with open(idx, "rb") as f:
        head = f.read(26)
    if len(head) < 26 or not head.startswith(b"MMIDIDX\x00\x00"):
        raise WmtError(f"not a fairseq mmap index: {idx}")
    return struct.unpack("<Q", head[18:26])[0]


def summary(data: Path, src: str, tgt: str, splits: dict[str, str], clean_stats: dict, extra: dict) -> dict:
    """Summary of a prepared directory: sentences per split before and after
    cleaning and once binarised, dictionary size, plus ``extra`` settings."""
    out: dict = {"pair": f"{src}-{tgt}", "source_lang": src, "target_lang": tgt, **extra}
    out["cleaning"] = {k: clean_stats[k] for k in ("min_tokens", "max_tokens", "ratio")}
    out["cleaning"]["applied_to"] = ["train"]
    out["corpora"] = clean_stats["corpora"]
    out["splits"] = {}
    for split, name in splits.items():
        after = count_lines(data / "tok" / f"{split}.{src}")
        out["splits"][split] = {
            "name": name,
            "sentences_before_cleaning": clean_stats["before"] if split == "train" else after,
            "sentences_after_cleaning": after,
            "sentences_binarized": indexed_size(data / f"{split}.{src}-{tgt}.{src}.idx"),
        }
    entries = count_lines(data / f"dict.{src}.txt")
    # fairseq adds <s>, <pad>, </s> and <unk> to the entries of dict.txt
    out["dictionary"] = {"joined": True, "entries": entries, "vocab_size": entries + 4}
    return out
