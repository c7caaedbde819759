"""Documents and sentences for BERT pretraining (scripts/prepare-bert-corpus.sh).

Reads English Wikipedia as extracted by WikiExtractor (its ``<doc>`` or
``--json`` output) and a zip of Project Gutenberg plain-text books (the
Lahiri (2014) corpus), then

1. splits each document into paragraphs and sentences with BlingFire's
   sentence splitter, dropping headings (paragraphs of fewer than three words)
   and, for books, the Project Gutenberg header, footer and licence;
2. removes exact duplicate documents (same sentences; the first one is kept);
3. holds out validation and test documents, chosen by a seeded hash of their
   text, so the choice is deterministic and does not depend on input order;
4. writes ``train.txt``, ``valid.txt`` and ``test.txt``: one sentence a line,
   documents separated by a blank line, the layout fairseq's ``masked_lm``
   task reads (RoBERTa's pretraining README; ``--sample-break-mode complete``
   packs whole sentences, ``complete_doc`` also stops at the blank lines).

The pipeline runs it as ``python -m fairseq_local_data.bert_corpus``
(``check-wiki``, ``check-gutenberg``, ``split``, and ``summary``: the lines of
the prepared corpus's summary.txt). Bad inputs raise :class:`CorpusError`,
printed as one ``error:`` line.
"""
from __future__ import annotations

import argparse
import bz2
import hashlib
import heapq
import json
import re
import sys
import zipfile
from multiprocessing import Pool
from pathlib import Path
from typing import Iterable, Iterator, Sequence

from tqdm import tqdm

from .errors import OneLineError

MIN_WORDS = 3  # shorter paragraphs are headings ("History.", "CHAPTER IV.")
_DOC_OPEN = re.compile(r'^<doc id="[^"]*"(?: revid="[^"]*")? url="[^"]*" title="([^"]*)">$')
# Project Gutenberg's header and footer markers, old and new styles.
_PG_START = re.compile(r"^\s*\*{3} ?START OF (THE|THIS) PROJECT GUTENBERG|^\*END\*THE SMALL PRINT", re.I | re.M)
_PG_END = re.compile(r"^\s*(\*{3} ?END OF (THE|THIS) PROJECT GUTENBERG|End of (the )?Project Gutenberg)", re.I | re.M)
_PRODUCED = re.compile(r"^\s*(Produced by|E-text prepared by|Transcribed from)", re.I)


class CorpusError(OneLineError):
    """A missing, empty or mismatched input, reported as one ``error:`` line."""


# --------------------------------------------------------------------------- input checks


def check_wiki_dump(path: Path) -> None:
    """Raise :class:`CorpusError` unless ``path`` is a bzip2-compressed MediaWiki XML dump."""
    if not path.is_file():
        raise CorpusError(f"missing Wikipedia dump: {path}")
    if path.stat().st_size == 0:
        raise CorpusError(f"empty Wikipedia dump: {path}")
    with open(path, "rb") as f:
        if f.read(3) != b"BZh":
            raise CorpusError(f"not a bzip2-compressed XML dump (*-pages-articles*.xml.bz2): {path}")
    try:
        with bz2.open(path, "rb") as f:
            head = f.read(4096)
    except (OSError, EOFError) as e:
        raise CorpusError(f"unreadable bzip2 file {path}: {e}") from None
    if b"<mediawiki" not in head:
        raise CorpusError(f"not a MediaWiki XML export (no <mediawiki> element): {path}")


def book_members(path: Path) -> list[str]:
    """The ``.txt`` members of a Gutenberg zip; :class:`CorpusError` if there are none."""
    if not path.is_file():
        raise CorpusError(f"missing Gutenberg zip: {path}")
    if path.stat().st_size == 0:
        raise CorpusError(f"empty Gutenberg zip: {path}")
    if not zipfile.is_zipfile(path):
        raise CorpusError(f"not a zip archive of plain-text books: {path}")
    with zipfile.ZipFile(path) as z:
        names = [i.filename for i in z.infolist() if not i.is_dir() and i.filename.lower().endswith(".txt")
                 and not i.filename.startswith("__MACOSX/") and i.file_size > 0]
    if not names:
        raise CorpusError(f"no .txt books in {path}")
    return sorted(names)


# --------------------------------------------------------------------------- readers


def read_wikiextractor(root: Path) -> Iterator[str]:
    """Article texts from WikiExtractor's output files under ``root`` (``AA/wiki_00``, ...),
    in file order; each text has one paragraph a line, the title line removed."""
    files = sorted(p for p in root.rglob("wiki_*") if p.is_file())
    if not files:
        raise CorpusError(f"no WikiExtractor output (wiki_*) under {root}")
    for path in files:
        with open(path, encoding="utf-8") as f:
            title, lines = None, []
            for line in f:
                line = line.rstrip("\n")
                if line.startswith("{") and title is None:  # --json output
                    doc = json.loads(line)
                    yield _drop_title(doc["text"].split("\n"), doc.get("title", ""))
                    continue
                m = _DOC_OPEN.match(line)
                if m:
                    title, lines = m.group(1), []
                elif line == "</doc>" and title is not None:
                    yield _drop_title(lines, title)
                    title = None
                elif title is not None:
                    lines.append(line)


def _drop_title(lines: list[str], title: str) -> str:
    from html import unescape

    if lines and lines[0].strip() in (title, unescape(title)):
        lines = lines[1:]
    return "\n".join(line for line in lines if line.strip())


def strip_gutenberg(text: str) -> str:
    """The body of a Project Gutenberg book: the text between the ``*** START OF``
    and ``*** END OF`` (or ``End of the Project Gutenberg``) lines, without a
    leading "Produced by ..." paragraph. Text without markers is returned whole."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    m = _PG_START.search(text)
    if m:
        text = text[text.find("\n", m.end()) + 1:] if "\n" in text[m.end():] else ""
    m = _PG_END.search(text)
    if m:
        text = text[:m.start()]
    paras = re.split(r"\n\s*\n", text.strip("\n"))
    while paras and (_PRODUCED.match(paras[0]) or not paras[0].strip()):
        paras = paras[1:]
    return "\n\n".join(paras)


def read_gutenberg_zip(path: Path) -> Iterator[str]:
    """Book bodies (:func:`strip_gutenberg`) with one paragraph a line: the
    hard-wrapped lines of each blank-line-separated block joined by spaces."""
    with zipfile.ZipFile(path) as z:
        for name in book_members(path):
            raw = z.read(name)
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                text = raw.decode("latin-1")
            paras = re.split(r"\n\s*\n", strip_gutenberg(text))
            yield "\n".join(" ".join(p.split()) for p in paras if p.strip())


# --------------------------------------------------------------------------- sentences


def split_sentences(paragraph: str) -> list[str]:
    """Sentences of one paragraph (BlingFire's ``text_to_sentences``), whitespace normalised."""
    import blingfire

    text = " ".join(paragraph.split())
    if not text:
        return []
    return [s for s in (" ".join(s.split()) for s in blingfire.text_to_sentences(text).split("\n")) if s]


def document_sentences(text: str, min_words: int = MIN_WORDS) -> list[str]:
    """Sentences of a document given one paragraph a line; paragraphs of fewer
    than ``min_words`` words (headings) are dropped."""
    out: list[str] = []
    for para in text.split("\n"):
        if len(para.split()) >= min_words:
            out.extend(split_sentences(para))
    return out


def doc_key(sentences: Sequence[str], seed: str = "") -> bytes:
    """SHA-256 of a document's sentences (with ``seed`` prefixed, for holdout order)."""
    return hashlib.sha256((seed + "\n".join(sentences)).encode("utf-8")).digest()


def dedup(docs: Iterable[list[str]]) -> Iterator[list[str]]:
    """Documents with exact duplicates (same sentences) removed, first kept; empty ones dropped."""
    seen: set[bytes] = set()
    for doc in docs:
        key = doc_key(doc)
        if doc and key not in seen:
            seen.add(key)
            yield doc


def holdout(keys: Sequence[bytes], n_valid: int, n_test: int) -> dict[int, str]:
    """Indices of the held-out documents -> "valid" or "test": the ``n_valid``
    smallest keys, then the next ``n_test``. Keys should be seeded :func:`doc_key`
    values, so the choice depends on the documents' text only."""
    if n_valid < 0 or n_test < 0:
        raise CorpusError("--valid-docs and --test-docs must be non-negative")
    if n_valid + n_test >= len(keys):
        raise CorpusError(f"cannot hold out {n_valid} valid and {n_test} test documents: "
                          f"only {len(keys)} distinct documents")
    chosen = heapq.nsmallest(n_valid + n_test, range(len(keys)), key=keys.__getitem__)
    return {i: ("valid" if r < n_valid else "test") for r, i in enumerate(chosen)}


def auto_holdout(n_docs: int, fraction: float = 0.05, cap: int = 1000) -> int:
    """Default documents per held-out split: 5% of the documents, at least 1, at most 1000."""
    return max(1, min(cap, round(fraction * n_docs)))


def write_docs(docs: Iterable[list[str]], path: Path) -> int:
    """One sentence a line, a blank line between documents; returns the document count."""
    tmp, n = path.with_name(path.name + ".tmp"), 0
    with open(tmp, "w", encoding="utf-8", newline="\n") as f:
        for n, doc in enumerate(docs, 1):
            f.write(("\n" if n > 1 else "") + "".join(s + "\n" for s in doc))
    tmp.replace(path)
    return n


def read_docs(path: Path) -> Iterator[list[str]]:
    """Documents of a :func:`write_docs` file."""
    doc: list[str] = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if line:
                doc.append(line)
            elif doc:
                yield doc
                doc = []
    if doc:
        yield doc


# --------------------------------------------------------------------------- the split step


def _sources(wiki_dir: Path | None, gutenberg: Path | None) -> Iterator[str]:
    if wiki_dir is not None:
        yield from read_wikiextractor(wiki_dir)
    if gutenberg is not None:
        yield from read_gutenberg_zip(gutenberg)


def build_splits(wiki_dir: Path | None, gutenberg: Path | None, out: Path, valid_docs: int | None,
                 test_docs: int | None, seed: int = 1, workers: int = 1) -> dict:
    """Split, deduplicate, hold out and write ``out/{train,valid,test}.txt``
    (``None`` holdout sizes: :func:`auto_holdout`). Two passes over an
    intermediate ``out/all.txt``, so memory grows only with the document count."""
    if wiki_dir is None and gutenberg is None:
        raise CorpusError("no corpus given: --wiki and/or --gutenberg")
    if gutenberg is not None:
        book_members(gutenberg)
    out.mkdir(parents=True, exist_ok=True)
    stats = {"documents_read": 0}

    def counted(texts: Iterator[str]) -> Iterator[str]:
        for stats["documents_read"], text in enumerate(texts, 1):
            yield text

    with Pool(workers) if workers > 1 else _Serial() as pool:
        docs = pool.imap(document_sentences, counted(_sources(wiki_dir, gutenberg)), chunksize=16)
        bar = tqdm(dedup(docs), unit=" docs", desc="splitting sentences", mininterval=1 if sys.stderr.isatty() else 30)
        n_all = write_docs(bar, out / "all.txt")
    if n_all == 0:
        raise CorpusError("the inputs hold no text (no documents with sentences)")
    keys = [doc_key(d, f"holdout:{seed}\n") for d in read_docs(out / "all.txt")]
    n_valid = auto_holdout(n_all) if valid_docs is None else valid_docs
    n_test = auto_holdout(n_all) if test_docs is None else test_docs
    where = holdout(keys, n_valid, n_test)
    splits: dict[str, list] = {"train": [], "valid": [], "test": []}
    handles = {s: open(out / f"{s}.txt.tmp", "w", encoding="utf-8", newline="\n") for s in splits}
    try:
        for i, doc in enumerate(read_docs(out / "all.txt")):
            s = where.get(i, "train")
            handles[s].write(("\n" if splits[s] else "") + "".join(x + "\n" for x in doc))
            splits[s].append(len(doc))
    finally:
        for h in handles.values():
            h.close()
    for s in splits:
        (out / f"{s}.txt.tmp").replace(out / f"{s}.txt")
    (out / "all.txt").unlink()
    stats.update({"documents": n_all, "duplicates_removed": stats["documents_read"] - n_all, "seed": seed})
    for s, lens in splits.items():
        stats[f"{s}_documents"], stats[f"{s}_sentences"] = len(lens), sum(lens)
    (out / "stats.json").write_text(json.dumps(stats, indent=1) + "\n")
    return stats


class _Serial:
    """A stand-in for :class:`multiprocessing.Pool` with one worker."""

    def __enter__(self) -> "_Serial":
        return self

    def __exit__(self, *exc) -> None:
        return None

    @staticmethod
    def imap(fn, items, chunksize: int = 1):
        return map(fn, items)


def summary_lines(bpe: str, spm_model: Path | None, dict_txt: Path, stats: Path) -> list[str]:
    """The lines of a prepared corpus's summary.txt, "KEY VALUE" each: the
    BPE kind, the pieces of its SentencePiece model (if any), the size of
    fairseq's dictionary (its lines) and the entries of the split's stats.json."""
    for path in (dict_txt, stats, *([spm_model] if spm_model is not None else [])):
        if not path.is_file():
            raise CorpusError(f"missing {path}")
    lines = [f"bpe {bpe}"]
    if spm_model is not None:
        import sentencepiece

        pieces = sentencepiece.SentencePieceProcessor(model_file=str(spm_model)).get_piece_size()
        lines.append(f"sentencepiece_pieces {pieces}")
    entries = dict_txt.read_bytes().count(b"\n")
    lines.append(f"dictionary_size {entries}")
    try:
        lines += [f"{k} {v}" for k, v in json.loads(stats.read_text(encoding="utf-8")).items()]
    except (ValueError, AttributeError):
        raise CorpusError(f"{stats} is not the stats.json of the split step") from None
    return lines


# --------------------------------------------------------------------------- command line


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m fairseq_local_data.bert_corpus", description=__doc__.split("\n\n")[0])
    p.error = lambda message: p.exit(2, f"error: {message}\n")  # type: ignore[method-assign]
    sub = p.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("check-wiki", help="check that a file is a bzip2 MediaWiki XML dump")
    a.add_argument("path", type=Path)
    a = sub.add_parser("check-gutenberg", help="check that a file is a zip of .txt books")
    a.add_argument("path", type=Path)
    a = sub.add_parser("split", help="documents -> sentences, dedup, holdout, {train,valid,test}.txt")
    a.add_argument("--wiki-dir", type=Path, help="WikiExtractor output directory")
    a.add_argument("--gutenberg", type=Path, help="zip of plain-text books")
    a.add_argument("--out", type=Path, required=True)
    a.add_argument("--valid-docs", default="auto", help="held-out documents (default: 5%%, at most 1000)")
    a.add_argument("--test-docs", default="auto")
    a.add_argument("--seed", type=int, default=1)
    a.add_argument("--workers", type=int, default=1)
    a = sub.add_parser("summary", help="print the lines of a prepared corpus's summary.txt")
    a.add_argument("--bpe", required=True, help="the BPE kind (gpt2 or sentencepiece)")
    a.add_argument("--spm-model", type=Path, help="the SentencePiece model, if any")
    a.add_argument("--dict", type=Path, required=True, help="fairseq's dict.txt of the corpus")
    a.add_argument("--stats", type=Path, required=True, help="the stats.json of the split step")
    return p


def _count(value: str, name: str) -> int | None:
    if value == "auto":
        return None
    if not value.isdigit():
        raise CorpusError(f"{name} must be a non-negative integer or 'auto', not '{value}'")
    return int(value)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.cmd == "check-wiki":
            check_wiki_dump(args.path)
        elif args.cmd == "check-gutenberg":
            print(f"{len(book_members(args.path))} books")
        elif args.cmd == "summary":
            print("\n".join(summary_lines(args.bpe, args.spm_model, args.dict, args.stats)))
        else:
            stats = build_splits(args.wiki_dir, args.gutenberg, args.out, _count(args.valid_docs, "--valid-docs"),
                                 _count(args.test_docs, "--test-docs"), args.seed, max(1, args.workers))
            print(json.dumps(stats))
    except OneLineError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
