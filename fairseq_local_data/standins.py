"""Small stand-ins for the BERT pretraining corpora, in their real formats.

* ``enwiki-standin-pages-articles.xml.bz2``: a MediaWiki XML export (schema
  0.10, as in ``enwiki-*-pages-articles*.xml.bz2``) with a ``<siteinfo>``
  namespace table, template pages, articles whose wikitext has templates
  (``{{Infobox ...}}``, ``{{cite ...}}`` inside ``<ref>``), piped and plain
  links, bold/italic, section headings, ``{| ... |}`` tables, categories, and
  redirect pages.
* ``gutenberg-standin.zip``: plain-text books named ``Author___Title.txt``
  as in the Lahiri (2014) Gutenberg corpus, each wrapped in the usual Project
  Gutenberg header (``*** START OF THIS PROJECT GUTENBERG EBOOK ... ***``),
  footer and licence, with hard-wrapped paragraphs and chapter headings.

The prose is the source language of :mod:`fairseq_local_data.language`
(an SVO grammar with number agreement, relative clauses, prepositional
phrases and Zipfian lemmas), so a masked LM has something to learn: the
agreement suffixes and function words are predictable from context. A few
articles and one book are exact duplicates of others, for deduplication.
The articles and the books are written in two lexicons of that language (the
books' is seeded with ``seed + 1000``).

Gold trees (``--trees N``, default 300): ``standin-sentences.conllu`` holds N
held-out sentences of the same generator with their Universal Dependencies
trees (:class:`fairseq_local_data.language.Tree`), for ``fairseq-local
attention dump --conllu`` and the syntactic analyses of a RoBERTa pretrained
on the stand-ins. They are drawn from their own seeded streams, alternately in
the articles' and the books' lexicon (``# sent_id = wiki-1``,
``gutenberg-2``, ...), distinct from each other and from every sentence of the
dump and the books, which do not change (``--trees 0`` writes none and removes
an old file). The words are those of the plain text that WikiExtractor and
the Gutenberg reader give: the first word capitalised, the final "." a word
of its own, marked ``SpaceAfter=No`` on the word before it as in UD, so that
``# text`` is the sentence exactly as it stands in the extracted corpus.

Run ``python -m fairseq_local_data.standins --out DIR``; the same seed gives
byte-identical files.
"""
from __future__ import annotations

import argparse
import bz2
import hashlib
import io
import json
import os
import random
import textwrap
import zipfile
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

from .errors import OneLineError
from .language import Grammar, Lexicon, SyntheticConfig, Tree

WIKI_NAME = "enwiki-standin-pages-articles.xml.bz2"
BOOKS_NAME = "gutenberg-standin.zip"
TREES_NAME = "standin-sentences.conllu"
TREE_SOURCES = ("wiki", "gutenberg")  # the lexicons that held-out sentences alternate between
NAMESPACES = [(-2, "Media"), (-1, "Special"), (0, ""), (1, "Talk"), (2, "User"),
              (3, "User talk"), (4, "Wikipedia"), (6, "File"), (8, "MediaWiki"),
              (10, "Template"), (12, "Help"), (14, "Category"), (828, "Module")]
TEMPLATES = {  # template pages of the dump: (name, wikitext)
    "Infobox language": "{| class=\"infobox\"\n! {{{name}}}\n|-\n| Family || {{{family}}}\n|}",
    "Reflist": "<div class=\"reflist\"><references /></div>",
    "Short description": "<includeonly></includeonly>",
    "Cite web": "''{{{title}}}''. {{{website}}}. Retrieved {{{access-date}}}.",
}


@dataclass
class StandinConfig:
    """Sizes of the stand-ins (the defaults give about 4k sentences)."""

    seed: int = 1
    articles: int = 120          # distinct articles (plus duplicates and redirects)
    duplicates: int = 4          # articles repeated under another title
    redirects: int = 6
    books: int = 8
    chapters: int = 5            # per book
    paragraphs: int = 6          # per chapter
    nouns: int = 1500            # lexicon sizes of the synthetic language
    adjectives: int = 400
    verbs: int = 400
    trees: int = 300             # held-out sentences with gold trees (standin-sentences.conllu)


def _books_config(cfg: StandinConfig) -> StandinConfig:
    """The configuration of the books' prose: its own lexicon and stream (seed + 1000)."""
    return StandinConfig(**{**cfg.__dict__, "seed": cfg.seed + 1000})


def surface(words: list[str]) -> str:
    """A sentence's words (final "." excluded) as the text of the stand-ins:
    the first word capitalised, a "." glued to the last."""
    return " ".join([words[0].capitalize()] + words[1:]) + "."


class _Prose:
    """Sentences of the synthetic source language as capitalised English-like text.

    ``stream`` names the random stream (the corpus's is ``standins``); each
    sentence drawn is added, as a tuple of its words without the final ".",
    to ``seen`` when it is given (this draws nothing from the stream)."""

    def __init__(self, cfg: StandinConfig, stream: str = "standins", seen: set | None = None) -> None:
        syn = SyntheticConfig(seed=cfg.seed, nouns=cfg.nouns, adjectives=cfg.adjectives, verbs=cfg.verbs)
        self.lex = Lexicon(syn)
        self.rng = random.Random(f"{stream}:{cfg.seed}")
        self.grammar = Grammar(self.lex, self.rng)
        self.seen = seen

    def tree(self, max_len: int = 30) -> Tree:
        """One sentence of 4 to ``max_len`` words ("." included) with its dependency tree."""
        while True:
            tree, _ = self.grammar.sentence_tree()
            if 4 <= len(tree.rows) <= max_len:
                if self.seen is not None:
                    self.seen.add(tuple(tree.words[:-1]))
                return tree

    def tokens(self, max_len: int = 30) -> list[str]:
        """One sentence's words, final "." excluded."""
        return self.tree(max_len).words[:-1]

    def sentence(self) -> str:
        return surface(self.tokens())

    def paragraph(self, lo: int = 3, hi: int = 7) -> str:
        return " ".join(self.sentence() for _ in range(self.rng.randint(lo, hi)))

    def name(self, parts: int = 2) -> str:
        return " ".join(self.lex.nouns[self.lex.sample(self.rng, "nouns")][0].capitalize()
                        for _ in range(parts))


# --------------------------------------------------------------------------- Wikipedia


def _wikify(prose: _Prose, titles: list[str]) -> str:
    """A paragraph whose words carry links and emphasis; the plain text is unchanged."""
    rng, out = prose.rng, []
    for _ in range(rng.randint(3, 6)):
        words = prose.tokens()
        words[0] = words[0].capitalize()
        for i, w in enumerate(words):
            r = rng.random()
            if r < 0.06:
                words[i] = f"[[{w}]]"
            elif r < 0.10:
                words[i] = f"[[{rng.choice(titles)}|{w}]]"
            elif r < 0.12:
                words[i] = f"'''{w}'''"
        sent = " ".join(words) + "."
        if rng.random() < 0.15:
            sent += (f"<ref>{{{{cite web |title={prose.name()} |website={prose.name(1)}"
                     f" |access-date=1 May 2020}}}}</ref>")
        out.append(sent)
    return " ".join(out)


def _article(prose: _Prose, title: str, titles: list[str]) -> str:
    rng = prose.rng
    lead = _wikify(prose, titles)
    first, rest = lead.split(" ", 1)
    parts = [f"{{{{Short description|{prose.name(1)} of the {prose.name(1)}}}}}",
             f"{{{{Infobox language\n| name = {title}\n| family = {prose.name(1)}\n}}}}",
             f"'''{first}''' {rest}"]
    for _ in range(rng.randint(1, 3)):
        parts.append(f"== {prose.name(1)} ==")
        parts += [_wikify(prose, titles) for _ in range(rng.randint(1, 2))]
        if rng.random() < 0.4:
            rows = "\n|-\n".join(f"| {prose.name(1)} || {rng.randint(1, 999)}" for _ in range(3))
            parts.append(f"{{| class=\"wikitable\"\n! {prose.name(1)} !! {prose.name(1)}\n|-\n{rows}\n|}}")
    parts += ["== References ==", "{{Reflist}}", f"[[Category:{prose.name(1)}]]"]
    return "\n\n".join(parts)


def _page(title: str, ns: int, pid: int, text: str, redirect: str | None = None) -> str:
    sha = hashlib.sha1(text.encode()).hexdigest()
    red = f'\n    <redirect title="{escape(redirect, {chr(34): "&quot;"})}" />' if redirect else ""
    return (f"  <page>\n    <title>{escape(title)}</title>\n    <ns>{ns}</ns>\n    <id>{pid}</id>{red}\n"
            f"    <revision>\n      <id>{pid + 100000}</id>\n      <parentid>{pid + 99999}</parentid>\n"
            f"      <timestamp>2020-05-01T00:00:00Z</timestamp>\n"
            f"      <contributor>\n        <username>Editor</username>\n        <id>1</id>\n      </contributor>\n"
            f"      <model>wikitext</model>\n      <format>text/x-wiki</format>\n"
            f"      <text bytes=\"{len(text.encode())}\" xml:space=\"preserve\">{escape(text)}</text>\n"
            f"      <sha1>{sha}</sha1>\n    </revision>\n  </page>\n")


def wiki_xml(cfg: StandinConfig, seen: set | None = None) -> str:
    """The text of the MediaWiki XML export (its sentences are added to ``seen``, see :class:`_Prose`)."""
    prose = _Prose(cfg, seen=seen)
    titles = sorted({prose.name() for _ in range(cfg.articles * 2)})[: cfg.articles]
    prose.rng.shuffle(titles)
    ns = "\n".join(f'      <namespace key="{k}" case="first-letter"' + (f">{n}</namespace>" if n else " />")
                   for k, n in NAMESPACES)
    out = ['<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/" '
           'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
           'xsi:schemaLocation="http://www.mediawiki.org/xml/export-0.10/ '
           'http://www.mediawiki.org/xml/export-0.10.xsd" version="0.10" xml:lang="en">\n'
           "  <siteinfo>\n    <sitename>Wikipedia</sitename>\n    <dbname>enwiki</dbname>\n"
           "    <base>https://en.wikipedia.org/wiki/Main_Page</base>\n"
           "    <generator>MediaWiki 1.35.0</generator>\n    <case>first-letter</case>\n"
           f"    <namespaces>\n{ns}\n    </namespaces>\n  </siteinfo>\n"]
    pid = 10
    for name, body in TEMPLATES.items():
        out.append(_page(f"Template:{name}", 10, pid, body))
        pid += 1
    texts = []
    for title in titles:
        texts.append((title, _article(prose, title, titles)))
        out.append(_page(title, 0, pid, texts[-1][1]))
        pid += 1
    for k in range(cfg.duplicates):  # the same article text under another title
        out.append(_page(f"{texts[k][0]} (copy)", 0, pid, texts[k][1]))
        pid += 1
    for k in range(cfg.redirects):
        target = titles[(7 * k) % len(titles)]
        out.append(_page(f"{target} {prose.name(1)}", 0, pid, f"#REDIRECT [[{target}]]", redirect=target))
        pid += 1
    out.append("</mediawiki>\n")
    return "".join(out)


# --------------------------------------------------------------------------- Gutenberg


def book_text(prose: _Prose, cfg: StandinConfig, title: str, author: str, number: int) -> str:
    """One plain-text book with Project Gutenberg's header, footer and licence."""
    upper = title.upper()
    head = (f"The Project Gutenberg EBook of {title}, by {author}\n\n"
            "This eBook is for the use of anyone anywhere at no cost and with\n"
            "almost no restrictions whatsoever.  You may copy it, give it away or\n"
            "re-use it under the terms of the Project Gutenberg License included\n"
            "with this eBook or online at www.gutenberg.org\n\n\n"
            f"Title: {title}\n\nAuthor: {author}\n\n"
            f"Release Date: May 1, 2005 [EBook #{number}]\n\nLanguage: English\n\n"
            "Character set encoding: ASCII\n\n"
            f"*** START OF THIS PROJECT GUTENBERG EBOOK {upper} ***\n\n\n\n\n"
            "Produced by Distributed Proofreaders\n\n\n\n\n")
    body = [f"{upper}\n\nBy {author}\n"]
    for c in range(1, cfg.chapters + 1):
        body.append(f"\nCHAPTER {c}.\n")
        body += [textwrap.fill(prose.paragraph(), width=70) + "\n" for _ in range(cfg.paragraphs)]
    foot = (f"\n\n\n\nEnd of the Project Gutenberg EBook of {title}, by {author}\n\n"
            f"*** END OF THIS PROJECT GUTENBERG EBOOK {upper} ***\n\n"
            f"***** This file should be named {number}.txt or {number}.zip *****\n"
            "This and all associated files of various formats will be found in:\n"
            f"        http://www.gutenberg.org/{number}/\n\n"
            "*** START: FULL LICENSE ***\n\nTHE FULL PROJECT GUTENBERG LICENSE\n"
            "PLEASE READ THIS BEFORE YOU DISTRIBUTE OR USE THIS WORK\n")
    return head + "\n".join(body) + foot


def books(cfg: StandinConfig, seen: set | None = None) -> list[tuple[str, str]]:
    """(member name, text) of every book; the last repeats the first under another name.
    Their sentences are added to ``seen`` (see :class:`_Prose`)."""
    prose = _Prose(_books_config(cfg), seen=seen)
    out = []
    for k in range(cfg.books):
        title, author = f"The {prose.name()}", prose.name()
        out.append((f"{author}___{title}.txt", book_text(prose, cfg, title, author, 1000 + k)))
    if out:
        name, text = out[0]
        out.append((name.replace(".txt", " (Second Edition).txt"), text))
    return out


def _write_bytes(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


# --------------------------------------------------------------------------- gold trees


class TreeError(OneLineError, RuntimeError):
    """Too few distinct held-out sentences for ``--trees`` (a lexicon too small)."""


def tree_sentences(cfg: StandinConfig, seen: set | frozenset = frozenset()) -> list[tuple[str, Tree]]:
    """``cfg.trees`` held-out sentences as (source, tree), source alternating
    "wiki" and "gutenberg" (the articles' and the books' lexicon), each from
    its own stream ``standin-trees``; distinct from each other and from the
    word tuples in ``seen`` (the corpus's sentences). Raises :class:`TreeError`
    when the generator keeps repeating itself."""
    proses = dict(zip(TREE_SOURCES, (_Prose(cfg, "standin-trees"), _Prose(_books_config(cfg), "standin-trees"))))
    taken, out, tries = set(seen), [], 0
    while len(out) < cfg.trees:
        tries += 1
        if tries > 50 * cfg.trees + 10000:
            raise TreeError(f"could not draw {cfg.trees} distinct held-out sentences; lower --trees")
        source = TREE_SOURCES[len(out) % len(TREE_SOURCES)]
        tree = proses[source].tree()
        key = tuple(tree.words[:-1])
        if key not in taken:
            taken.add(key)
            out.append((source, tree))
    return out


def tree_conllu(tree: Tree, sent_id: str) -> str:
    """One sentence as CoNLL-U, its words as in the extracted text (:func:`surface`):
    the first FORM capitalised (LEMMA not), ``SpaceAfter=No`` before the final "."."""
    rows = [list(row) for row in tree.rows]
    if len(rows) < 2 or rows[-1][0] != ".":
        raise ValueError("a stand-in sentence ends with a word and '.'")
    rows[0][0] = rows[0][0].capitalize()
    lines = [f"# sent_id = {sent_id}", f"# text = {surface(tree.words[:-1])}"]
    for i, (form, lemma, upos, feats, head, rel) in enumerate(rows, 1):
        misc = "SpaceAfter=No" if i == len(rows) - 1 else "_"
        lines.append(f"{i}\t{form}\t{lemma}\t{upos}\t_\t{feats}\t{head + 1}\t{rel}\t_\t{misc}")
    return "\n".join(lines) + "\n\n"


def generate(cfg: StandinConfig, out: Path) -> dict:
    """Write the dump and the zip into ``out``, and with ``cfg.trees`` the gold
    trees (:data:`TREES_NAME`; without, an old one is removed); returns their
    paths and sizes."""
    out.mkdir(parents=True, exist_ok=True)
    seen: set | None = set() if cfg.trees > 0 else None
    wiki = out / WIKI_NAME
    _write_bytes(wiki, bz2.compress(wiki_xml(cfg, seen).encode("utf-8"), 9))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, text in books(cfg, seen):
            info = zipfile.ZipInfo(f"Gutenberg/txt/{name}", date_time=(2014, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, text.encode("utf-8"))
    zpath = out / BOOKS_NAME
    _write_bytes(zpath, buf.getvalue())
    tpath = out / TREES_NAME
    if seen is not None:
        blocks = [tree_conllu(t, f"{src}-{k}") for k, (src, t) in enumerate(tree_sentences(cfg, seen), 1)]
        _write_bytes(tpath, "".join(blocks).encode("utf-8"))
    elif tpath.exists():
        tpath.unlink()
    return {"wiki": str(wiki), "gutenberg": str(zpath), "articles": cfg.articles,
            "duplicates": cfg.duplicates, "redirects": cfg.redirects, "books": cfg.books + (cfg.books > 0),
            "trees": str(tpath) if seen is not None else None, "tree_sentences": cfg.trees}


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point: ``python -m fairseq_local_data.standins --out DIR``."""
    p = argparse.ArgumentParser(prog="python -m fairseq_local_data.standins",
                                description="Write a stand-in Wikipedia dump and Gutenberg zip.")
    p.error = lambda message: p.exit(2, f"error: {message}\n")  # type: ignore[method-assign]
    p.add_argument("--out", type=Path, required=True)
    for name, default in StandinConfig.__dataclass_fields__.items():
        p.add_argument("--" + name, type=int, default=default.default)
    a = p.parse_args(argv)
    cfg = StandinConfig(**{k: getattr(a, k) for k in StandinConfig.__dataclass_fields__})
    if cfg.articles < 1 or cfg.books < 1 or cfg.chapters < 1 or cfg.paragraphs < 1:
        p.error("--articles, --books, --chapters and --paragraphs must be positive")
    if not 0 <= cfg.duplicates <= cfg.articles or cfg.redirects < 0:
        p.error("--duplicates must be in 0..articles and --redirects non-negative")
    if cfg.trees < 0:
        p.error("--trees must be non-negative")
    try:
        info = generate(cfg, a.out)
    except OSError as e:
        p.error(f"cannot write to {a.out}: {e.strerror or e}")
    except TreeError as e:
        p.error(str(e))
    print(json.dumps(info))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
