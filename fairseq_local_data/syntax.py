"""Sentences with optional dependency trees: CoNLL-U and plain-text readers, a CoNLL-U writer.

A :class:`Sentence` holds the *syntactic words* of one sentence and, when the
input has them, each word's head and relation. CoNLL-U input is read with the
``conllu`` library, following the UD format (https://universaldependencies.org/format.html):

* comment lines (``# text = ...``) are ignored;
* a multiword token range (``2-3  du``) is dropped and its syntactic words
  (``2  de``, ``3  le``) are kept;
* empty nodes of enhanced graphs (``4.1``) are skipped;
* word IDs must run 1, 2, 3, ...; HEAD k becomes the 0-based index k - 1, and
  HEAD 0 (the root) becomes -1.

A file whose words all have ``_`` as HEAD gives sentences without heads. Bad
input raises :class:`SyntaxFileError`, whose message is one line naming the
file and, where it can, the line where the offending sentence starts.
"""
from __future__ import annotations

import codecs
import io
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, Iterator, TextIO

from .errors import OneLineError

if TYPE_CHECKING:  # conllu is imported where CoNLL-U is read or written (the [data] extra)
    from conllu.models import TokenList


class SyntaxFileError(OneLineError, ValueError):
    """A missing, unreadable or malformed sentence file (one-line message)."""


@dataclass
class Sentence:
    """One sentence: its words and, optionally, its dependency tree.

    ``heads[i]`` is the 0-based index of word i's syntactic head, -1 for the
    root; ``relations[i]`` is its dependency relation (UD ``DEPREL``).
    """

    words: list[str]
    heads: list[int] | None = None
    relations: list[str] | None = None


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


class _CountingLines:
    """File wrapper for ``conllu.parse_incr`` that remembers the line where the
    sentence being parsed starts (the parser reads a sentence up to the blank
    line that ends it, then parses it before reading on)."""

    def __init__(self, f: TextIO) -> None:
        self.f, self.line, self.start, self._blank = f, 0, 0, True

    def read(self, *args) -> str:  # parse_incr only checks that it exists
        return self.f.read(*args)

    def __iter__(self) -> Iterator[str]:
        for line in self.f:
            self.line += 1
            blank = not line.strip()
            if self._blank and not blank:
                self.start = self.line
            self._blank = blank
            yield line


def read_utf8(path: str, name: "str | None" = None) -> str:
    """The whole file as text (a UTF-8 byte-order mark is dropped); a
    :class:`SyntaxFileError` naming the file as ``name`` (default its path)
    or the line that is not UTF-8."""
    if os.path.exists(path) and not os.path.isdir(path) and not os.path.isfile(path):
        raise SyntaxFileError(f"cannot read {name or path}: not a regular file (a FIFO or a device)")
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise SyntaxFileError(f"cannot read {name or path}: {_one_line(e.strerror or e)}") from None
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8):]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise SyntaxFileError(f"{path}: line {line}: not UTF-8 text") from None


def _words(tokens: TokenList) -> tuple[list[str], list[int | None], list[str]]:
    """Syntactic words of one parsed sentence: (forms, 1-based heads, relations)."""
    forms: list[str] = []
    heads: list[int | None] = []
    rels: list[str] = []
    for token in tokens:
        for column in ("id", "form", "head", "deprel"):
            if column not in token:
                raise ValueError(f"a token line has no {column.upper()} column (CoNLL-U has 10 columns)")
        tid = token["id"]
        if isinstance(tid, tuple):  # (2, "-", 3): multiword range; (4, ".", 1): empty node
            continue
        if tid is None:
            raise ValueError("a token line has no ID")
        if tid != len(forms) + 1:
            raise ValueError(f"word IDs must run 1, 2, 3, ...; found {tid} after {len(forms)}")
        forms.append(token["form"])
        heads.append(token["head"])
        rels.append(token["deprel"] or "_")
    return forms, heads, rels


def _sentence(tokens: TokenList) -> Sentence:
    forms, heads, rels = _words(tokens)
    if not forms:
        raise ValueError("a sentence has no words")
    if all(h is None for h in heads):
        return Sentence(forms)
    n = len(forms)
    for i, h in enumerate(heads, 1):
        if h is None:
            raise ValueError(f"word {i} ({forms[i - 1]}) has no HEAD")
        if not 0 <= h <= n:
            raise ValueError(f"word {i} ({forms[i - 1]}) has HEAD {h}, outside 0..{n}")
        if h == i:
            raise ValueError(f"word {i} ({forms[i - 1]}) is its own HEAD")
    roots = [i for i, h in enumerate(heads, 1) if h == 0]
    if len(roots) != 1:
        raise ValueError(f"{len(roots)} words have HEAD 0 ({', '.join(map(str, roots)) or 'none'}): a tree has "
                         "exactly one root")
    for i in range(1, n + 1):  # every chain of HEADs reaches the root: no cycle
        path, j = [], i
        while j != 0:
            if j in path:
                cycle = path[path.index(j):]
                raise ValueError(f"words {', '.join(map(str, cycle))} form a cycle of HEADs: not a tree")
            path.append(j)
            j = heads[j - 1]
    return Sentence(forms, [h - 1 for h in heads], rels)


def read_conllu(path: str) -> list[Sentence]:
    """Read a CoNLL-U file (see the module docstring for what is kept).

    Raises :class:`SyntaxFileError` for a missing or unreadable file, text that
    is not UTF-8, malformed lines, a non-integer or out-of-range HEAD, a
    sentence without words, or a file without sentences.
    """
    import conllu
    from conllu.exceptions import ParseException

    sentences: list[Sentence] = []
    lines = _CountingLines(io.StringIO(read_utf8(path)))
    try:
        for tokens in conllu.parse_incr(lines):
            sentences.append(_sentence(tokens))
    except (ParseException, ValueError) as e:
        where = f"sentence {len(sentences) + 1} (line {lines.start})"
        raise SyntaxFileError(f"{path}: {where}: {_one_line(e)}") from None
    if not sentences:
        raise SyntaxFileError(f"{path}: no sentences")
    return sentences


def read_text(path: str) -> list[Sentence]:
    """Read whitespace-tokenised text, one sentence per line (blank lines are
    skipped); the sentences have no heads. Errors as in :func:`read_conllu`."""
    sentences = [Sentence(line.split()) for line in read_utf8(path).split("\n") if line.split()]
    if not sentences:
        raise SyntaxFileError(f"{path}: no sentences")
    return sentences


def _tokens(s: Sentence) -> TokenList:
    """One sentence as a conllu TokenList; ValueError if it cannot be written."""
    from conllu.models import Metadata, Token, TokenList

    n = len(s.words)
    if not n or any(w.split() != [w] for w in s.words):
        raise ValueError("words must be non-empty and contain no whitespace")
    for name, values in (("heads", s.heads), ("relations", s.relations)):
        if values is not None and len(values) != n:
            raise ValueError(f"{len(values)} {name} for {n} words")
    if s.relations is not None and any(r.split() != [r] for r in s.relations):
        raise ValueError("relations must be non-empty and contain no whitespace")
    if s.heads is not None and any(not isinstance(h, int) or not -1 <= h < n or h == i
                                     for i, h in enumerate(s.heads)):
        raise ValueError(f"heads must be in -1..{n - 1} and not the word itself")
    rows = []
    for i, w in enumerate(s.words):
        head = None if s.heads is None else s.heads[i] + 1
        if s.relations is not None:
            rel = s.relations[i]
        else:
            rel = "_" if head is None else "root" if head == 0 else "dep"
        rows.append(Token(id=i + 1, form=w, lemma="_", upos="_", xpos="_", feats="_", head=head,
                          deprel=rel, deps="_", misc="_"))
    return TokenList(rows, Metadata())


def write_conllu(sentences: Iterable[Sentence], path: str) -> None:
    """Write sentences as CoNLL-U (10 columns; LEMMA, UPOS, XPOS, FEATS, DEPS
    and MISC are ``_``; HEAD is 1-based with 0 for the root, ``_`` without
    heads), atomically: a temporary file in the same directory is renamed."""
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with open(tmp, "w", encoding="utf-8", newline="\n") as f:
            for k, s in enumerate(sentences, 1):
                try:
                    tokens = _tokens(s)
                except ValueError as e:
                    raise SyntaxFileError(f"{path}: sentence {k}: {e}") from None
                f.write(f"# sent_id = {k}\n# text = {' '.join(s.words)}\n" + tokens.serialize())
        os.replace(tmp, path)
    except BaseException as e:
        if os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(e, OSError):
            raise SyntaxFileError(f"cannot write {path}: {_one_line(e.strerror or e)}") from None
        raise
