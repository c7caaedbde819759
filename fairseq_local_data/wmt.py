"""Helpers for preparing WMT parallel data (scripts/prepare-wmt14.sh).

* ``extract``: copy the members of a (gzipped) tar archive whose file names
  match shell patterns into one flat directory.
* ``extract-corpus``: extract one parallel corpus as two files, one per
  language (splitting "A ||| B" files such as the Wiki Headlines).
* ``find-test``: locate a test set (e.g. newstest2014) for a language pair
  among plain files (``newstest2013.en``) and SGML files
  (``newstest2014-deen-src.en.sgm``).
* ``reference``, ``describe-split``, ``split-compounds``, ``bleu-summary``:
  what scripts/evaluate-wmt14.sh needs to score a test set (the raw
  reference, the BPE method and test set name of a prepared split, tokenised
  BLEU's compound splitting, a sacreBLEU result in one line).
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

This module holds the archives, manifests and the command line; ``tok``,
``clean``, ``spm-*`` and ``summary`` are implemented in
:mod:`fairseq_local_data.cleaning`, which also defines :class:`WmtError`,
:func:`read_sgm` and the other helpers shared by both, and the test sets in
:mod:`fairseq_local_data.testsets`.

Every command writes ``OUT.tmp`` first and renames it, so an interrupted run
never leaves a complete-looking file. Errors in the input print one line
``error: ...`` and exit with status 1.

Usage: ``python -m fairseq_local_data.wmt COMMAND --help``. It needs only
the standard library, sacremoses, regex, tqdm and (for SentencePiece)
sentencepiece.
"""
from __future__ import annotations

import argparse
import fnmatch
import json
import os
import re
import sys
import tarfile
import zlib
from pathlib import Path
from typing import Sequence

from tqdm import tqdm

from .cleaning import WmtError, clean, progress, spm_encode, spm_train, summary, tokenize_file
from .testsets import bleu_summary, describe_split, find_test, split_compounds_file, write_reference


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
        with open(archive, "rb") as raw, progress(
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
        missing = next(n for n in names if n not in got)
        raise WmtError(f"archive {archive} has no member named {missing}")
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
    p = argparse.ArgumentParser(prog="python -m fairseq_local_data.wmt", description=__doc__.split("\n\n")[0])
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

    a = sub.add_parser("reference", help="write a test set's raw reference; print its file (nothing if absent)")
    a.add_argument("name", help="e.g. newstest2014")
    a.add_argument("--src", required=True)
    a.add_argument("--tgt", required=True)
    a.add_argument("--out", type=Path, required=True)
    a.add_argument("dirs", nargs="+", type=Path)

    a = sub.add_parser("describe-split", help="print the BPE method and test set name of a prepared split")
    a.add_argument("--summary", type=Path, required=True, help="the summary.json of the prepared directory")
    a.add_argument("--split", required=True)

    a = sub.add_parser("split-compounds", help="split hyphenated compounds for tokenised BLEU")
    a.add_argument("input", type=Path)
    a.add_argument("output", type=Path)

    a = sub.add_parser("bleu-summary", help="print NAME SCORE SIGNATURE of a sacreBLEU JSON result")
    a.add_argument("result", type=Path)

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
        elif args.cmd == "reference":
            ref = write_reference(args.name, args.src, args.tgt, args.dirs, args.out)
            if ref is not None:
                print(ref)
        elif args.cmd == "describe-split":
            print(*describe_split(args.summary, args.split))
        elif args.cmd == "split-compounds":
            split_compounds_file(args.input, args.output)
        elif args.cmd == "bleu-summary":
            print(bleu_summary(args.result))
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
