"""Helpers for preparing WMT parallel data (scripts/prepare-wmt14.sh).

* ``extract``: copy the members of a (gzipped) tar archive whose file names
  match shell patterns into one flat directory.
* ``extract-corpus``: extract one parallel corpus as two files, one per
  language (splitting "A ||| B" files such as the Wiki Headlines).
* ``find-test``: locate a test set (e.g. newstest2014) for a language pair
  among plain files (``newstest2013.en``) and SGML files
  (``newstest2014-deen-src.en.sgm``).
* ``manifest``: read a manifest of extra parallel corpora (see
  :func:`read_manifest`).
* ``tok``: Moses-style punctuation normalisation, removal of non-printing
  characters and tokenisation (sacremoses, ``-a`` aggressive dash splits, no
  escaping), one output line per input line; ``.sgm`` input is read segment
  by segment.
* ``clean``: the filter of Moses' clean-corpus-n.perl (token counts within
  [min, max], length ratio at most ``ratio`` both ways).
* ``spm-train`` / ``spm-encode``: a joint SentencePiece BPE model.
* ``summary``: the JSON summary of a prepared data directory.

Every command writes ``OUT.tmp`` first and renames it, so an interrupted run
never leaves a complete-looking file. Errors in the input print one line
``error: ...`` and exit with status 1.

Usage: ``python -m fairseq_local.data.wmt COMMAND --help``. The pipeline
scripts run this file directly (``python fairseq_local/data/wmt.py``), which
skips importing the plugin package and fairseq; it needs only the standard
library, sacremoses, regex, tqdm and (for SentencePiece) sentencepiece.
"""
from __future__ import annotations

import argparse
import fnmatch
import json
import os
import re
import struct
import sys
import tarfile
import zlib
from multiprocessing import Pool
from pathlib import Path
from typing import Iterable, Iterator, Sequence

from tqdm import tqdm


class WmtError(Exception):
    """A problem with the input data, reported as one ``error:`` line."""


def _progress(total: int | None = None, large: int = 100_000, **kwargs) -> tqdm:
    """A progress bar on stderr: on a terminal always; in a log file only for
    ``total`` of at least ``large`` (lines or bytes), updated every 30 s."""
    tty = sys.stderr.isatty()
    return tqdm(total=total, mininterval=1 if tty else 30, leave=tty,
                disable=not tty and (total or 0) < large, **kwargs)


def count_lines(path: Path) -> int:
    """Number of newline characters in ``path`` (as ``wc -l``)."""
    n = 0
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            n += block.count(b"\n")
    return n


# --------------------------------------------------------------------------- archives


def extract(archive: Path, out_dir: Path, patterns: Sequence[str], optional: bool = False) -> list[Path]:
    """Copy the regular members of ``archive`` whose base name matches one of
    ``patterns`` (fnmatch) into ``out_dir`` under their base names; the first
    of several members with the same base name wins. Unless ``optional``, a
    pattern that matches nothing is an error."""
    if not archive.is_file():
        raise WmtError(f"missing archive: {archive}")
    out_dir.mkdir(parents=True, exist_ok=True)
    matched: set[str] = set()
    written: list[Path] = []
    try:
        with open(archive, "rb") as raw, _progress(
            total=archive.stat().st_size, large=100 << 20, unit="B", unit_scale=True, desc=f"extracting {archive.name}"
        ) as bar:
            with tarfile.open(fileobj=_CountingReader(raw, bar), mode="r|*") as tar:
                for member in tar:
                    name = os.path.basename(member.name)
                    hits = [p for p in patterns if fnmatch.fnmatchcase(name, p)]
                    if not member.isfile() or not hits or any(w.name == name for w in written):
                        continue
                    matched.update(hits)
                    src = tar.extractfile(member)
                    assert src is not None
                    tmp = out_dir / (name + ".tmp")
                    with open(tmp, "wb") as dst:
                        while block := src.read(1 << 20):
                            dst.write(block)
                    os.replace(tmp, out_dir / name)
                    written.append(out_dir / name)
    except (tarfile.TarError, EOFError, zlib.error, OSError) as e:
        raise WmtError(f"cannot read archive {archive}: {e}") from None
    missing = [p for p in patterns if p not in matched]
    if missing and not optional:
        raise WmtError(f"archive {archive} has no member named {missing[0]}")
    return written


class _CountingReader:
    """File wrapper that advances a progress bar by the bytes read."""

    def __init__(self, f, bar: tqdm) -> None:
        self.f, self.bar = f, bar

    def read(self, n: int = -1) -> bytes:
        data = self.f.read(n)
        self.bar.update(len(data))
        return data


def extract_corpus(archive: Path, out_dir: Path, stem: str, langs: Sequence[str]) -> list[Path]:
    """Extract the parallel corpus ``stem`` of ``archive`` as ``out_dir/stem.L``
    for each language L of ``langs``: either from the members ``stem.L``, or
    from one member ``stem`` (e.g. wiki.ru-en of the Wiki Headlines) whose lines
    are "SENTENCE ||| SENTENCE" in the order of the stem's ".xx-yy" suffix."""
    names = [f"{stem}.{lang}" for lang in langs]
    got = {p.name for p in extract(archive, out_dir, names + [stem], optional=True)}
    if all(n in got for n in names):
        return [out_dir / n for n in names]
    m = re.search(r"\.([a-z]{2,3})-([a-z]{2,3})$", stem)
    if stem not in got or m is None or set(m.groups()) != set(langs):
        raise WmtError(f"archive {archive} has no member named {names[0]}")
    return split_bitext(out_dir / stem, m.groups(), out_dir)


def split_bitext(path: Path, columns: Sequence[str], out_dir: Path) -> list[Path]:
    """Split a "SENTENCE ||| SENTENCE" file into ``out_dir/NAME.L`` per language
    L of ``columns``; a line without exactly one separator becomes an empty
    pair (removed by cleaning)."""
    outs = [out_dir / f"{path.name}.{lang}" for lang in columns]
    tmps = [p.with_name(p.name + ".tmp") for p in outs]
    bad = 0
    with open(path, encoding="utf-8", errors="replace", newline="\n") as f, \
            open(tmps[0], "w", encoding="utf-8") as a, open(tmps[1], "w", encoding="utf-8") as b:
        for line in f:
            cols = line.rstrip("\n").split("|||")
            if len(cols) != 2:
                cols, bad = ["", ""], bad + 1
            a.write(cols[0].strip() + "\n")
            b.write(cols[1].strip() + "\n")
    if bad:
        print(f"warning: {bad} line(s) of {path} are not 'A ||| B' pairs (kept empty)", file=sys.stderr)
    for tmp, out in zip(tmps, outs):
        os.replace(tmp, out)
    return outs


# --------------------------------------------------------------------------- test sets

_SEG = re.compile(r"<seg[^>]*>\s*(.*?)\s*</seg>", re.IGNORECASE)


def read_sgm(path: Path) -> Iterator[str]:
    """The text of each ``<seg id="...">...</seg>`` line of an SGML file
    (tags removed, entities left as they are, like fairseq's recipes)."""
    with open(path, encoding="utf-8", errors="replace", newline="\n") as f:
        for line in f:
            m = _SEG.search(line)
            if m:
                yield m.group(1)


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


# --------------------------------------------------------------------------- manifests


def read_manifest(path: Path) -> list[tuple[str, Path, Path]]:
    """Parallel corpora listed in a manifest: one corpus per line,
    ``SOURCE_FILE<TAB>TARGET_FILE`` (source language first, as in the pair
    name), paths relative to the manifest's directory or absolute; blank
    lines and lines starting with ``#`` are ignored. Returns (name, source,
    target) with name the source file's base name without its extension."""
    if not path.is_file():
        raise WmtError(f"missing manifest: {path}")
    corpora = []
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            fields = line.split("\t")
            if len(fields) != 2:
                raise WmtError(f"{path} line {i}: expected SOURCE_FILE<TAB>TARGET_FILE, got {len(fields)} field(s)")
            s, t = ((path.parent / x.strip()).resolve() for x in fields)
            for p in (s, t):
                if not p.is_file():
                    raise WmtError(f"missing corpus file {p} (listed in {path} line {i})")
            name = s.name.rsplit(".", 1)[0] if "." in s.name else s.name
            corpora.append((name, s, t))
    if not corpora:
        raise WmtError(f"manifest {path} lists no corpus")
    return corpora


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
    total = sum(1 for _ in read_sgm(inp)) if inp.suffix == ".sgm" else count_lines(inp)
    tmp = out.with_name(out.name + ".tmp")
    n = 0
    with open(tmp, "w", encoding="utf-8") as f, _progress(total=total, unit=" lines", desc=f"tokenising {inp.name}") as bar:
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
            _progress(total, unit=" pairs", desc="cleaning") as bar:
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
    for x, y in zip(a, b):
        yield x, y
    for rest, path in ((a, a_path), (b, b_path)):
        if rest.readline():
            raise WmtError(f"parallel files differ in length: {path} has more lines")


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
        for n, line in enumerate(_progress(count_lines(inp), iterable=f, unit=" lines", desc=f"encoding {inp.name}"), 1):
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


# --------------------------------------------------------------------------- command line


def _write_json(obj: dict, path: Path) -> None:
    """Write ``obj`` as JSON, leaving the file (and its mtime) alone if unchanged."""
    text = json.dumps(obj, indent=2, ensure_ascii=False) + "\n"
    if path.is_file() and path.read_text(encoding="utf-8") == text:
        return
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m fairseq_local.data.wmt", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)

    a = sub.add_parser("extract", help="copy matching archive members into a directory")
    a.add_argument("archive", type=Path)
    a.add_argument("out_dir", type=Path)
    a.add_argument("patterns", nargs="+", help="file-name patterns (fnmatch)")
    a.add_argument("--optional", action="store_true", help="patterns may match nothing")

    a = sub.add_parser("extract-corpus", help="extract STEM.L1 and STEM.L2 (or split a 'A ||| B' STEM)")
    a.add_argument("archive", type=Path)
    a.add_argument("out_dir", type=Path)
    a.add_argument("stem", help="e.g. europarl-v7.de-en")
    a.add_argument("langs", nargs=2)

    a = sub.add_parser("find-test", help="print the source and target files of a test set")
    a.add_argument("name", help="e.g. newstest2014")
    a.add_argument("--src", required=True)
    a.add_argument("--tgt", required=True)
    a.add_argument("dirs", nargs="+", type=Path)

    a = sub.add_parser("manifest", help="print NAME<TAB>SOURCE<TAB>TARGET per corpus of a manifest")
    a.add_argument("manifest", type=Path)

    a = sub.add_parser("tok", help="normalise punctuation and tokenise (Moses, -a)")
    a.add_argument("--lang", required=True)
    a.add_argument("--workers", type=int, default=1)
    a.add_argument("input", type=Path, help="plain text or .sgm")
    a.add_argument("output", type=Path)

    a = sub.add_parser("clean", help="clean-corpus-n filter over several corpora")
    a.add_argument("--corpus", nargs=3, action="append", required=True, metavar=("NAME", "SRC", "TGT"))
    a.add_argument("--out-src", type=Path, required=True)
    a.add_argument("--out-tgt", type=Path, required=True)
    a.add_argument("--stats", type=Path, required=True, help="JSON file of sentence counts")
    a.add_argument("--ratio", type=float, default=1.5)
    a.add_argument("--min", type=int, default=1)
    a.add_argument("--max", type=int, default=250)

    a = sub.add_parser("spm-train", help="train a joint SentencePiece BPE model")
    a.add_argument("--input", nargs="+", type=Path, required=True)
    a.add_argument("--model-prefix", type=Path, required=True)
    a.add_argument("--vocab-size", type=int, required=True)
    a.add_argument("--threads", type=int, default=2)

    a = sub.add_parser("spm-encode", help="segment text with a SentencePiece model")
    a.add_argument("--model", type=Path, required=True)
    a.add_argument("input", type=Path)
    a.add_argument("output", type=Path)

    a = sub.add_parser("summary", help="write the JSON summary of a prepared directory")
    a.add_argument("--data", type=Path, required=True)
    a.add_argument("--src", required=True)
    a.add_argument("--tgt", required=True)
    a.add_argument("--split", action="append", required=True, metavar="SPLIT=NAME")
    a.add_argument("--clean-stats", type=Path, required=True)
    a.add_argument("--set", action="append", default=[], metavar="KEY=JSON", help="extra top-level entries")
    a.add_argument("--out", type=Path, required=True)
    return p


def main(argv: Sequence[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    try:
        if args.cmd == "extract":
            extract(args.archive, args.out_dir, args.patterns, args.optional)
        elif args.cmd == "extract-corpus":
            extract_corpus(args.archive, args.out_dir, args.stem, args.langs)
        elif args.cmd == "find-test":
            print("\n".join(map(str, find_test(args.name, args.src, args.tgt, args.dirs))))
        elif args.cmd == "manifest":
            for name, s, t in read_manifest(args.manifest):
                print(f"{name}\t{s}\t{t}")
        elif args.cmd == "tok":
            tokenize_file(args.input, args.output, args.lang, args.workers)
        elif args.cmd == "clean":
            pairs = [(n, Path(s), Path(t)) for n, s, t in args.corpus]
            stats = clean(pairs, args.out_src, args.out_tgt, args.ratio, args.min, args.max)
            stats.update(ratio=args.ratio, min_tokens=args.min, max_tokens=args.max)
            _write_json(stats, args.stats)
            print(f"cleaning kept {stats['after']} of {stats['before']} sentence pairs", file=sys.stderr)
        elif args.cmd == "spm-train":
            spm_train(args.input, args.model_prefix, args.vocab_size, args.threads)
        elif args.cmd == "spm-encode":
            spm_encode(args.model, args.input, args.output)
        elif args.cmd == "summary":
            splits = dict(s.split("=", 1) for s in args.split)
            extra = {k: json.loads(v) for k, v in (s.split("=", 1) for s in args.set)}
            stats = json.loads(args.clean_stats.read_text(encoding="utf-8"))
            _write_json(summary(args.data, args.src, args.tgt, splits, stats, extra), args.out)
    except WmtError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)
    except UnicodeDecodeError as e:
        print(f"error: input is not UTF-8 text ({e})", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
