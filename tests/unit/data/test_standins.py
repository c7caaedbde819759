"""The stand-in Wikipedia dump and Gutenberg zip: real formats, markup that
WikiExtractor removes, Gutenberg headers, duplicates, determinism."""

import bz2
import subprocess
import sys
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

import pytest

from fairseq_local_data.bert_corpus import (
    book_members, check_wiki_dump, document_sentences, read_gutenberg_zip, read_wikiextractor,
)
from fairseq_local_data.standins import BOOKS_NAME, WIKI_NAME, StandinConfig, generate

NS = "{http://www.mediawiki.org/xml/export-0.10/}"
SMALL = StandinConfig(articles=12, duplicates=2, redirects=3, books=3, chapters=2, paragraphs=2)


@pytest.fixture(scope="module")
def standins(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("standins")
    generate(SMALL, out)
    return out


def test_dump_is_a_bz2_mediawiki_export_with_markup(standins):
    path = standins / WIKI_NAME
    assert path.name.endswith("-pages-articles.xml.bz2")
    check_wiki_dump(path)
    root = ET.fromstring(bz2.decompress(path.read_bytes()))
    assert root.tag == NS + "mediawiki" and root.get("version") == "0.10"
    namespaces = {n.get("key"): n.text for n in root.iter(NS + "namespace")}
    assert namespaces["10"] == "Template" and namespaces["14"] == "Category"
    pages = root.findall(NS + "page")
    ns = [p.findtext(NS + "ns") for p in pages]
    assert ns.count("10") == 4 and ns.count("0") == 12 + 2 + 3
    redirects = [p for p in pages if p.find(NS + "redirect") is not None]
    assert len(redirects) == 3
    assert all(p.findtext(f"{NS}revision/{NS}text").startswith("#REDIRECT [[") for p in redirects)
    text = "\n".join(p.findtext(f"{NS}revision/{NS}text") for p in pages if p.findtext(NS + "ns") == "0")
    for markup in ("{{Infobox language", "{{cite web", "<ref>", "[[", "|", "'''", "\n== ", '{| class="wikitable"',
                   "[[Category:"):
        assert markup in text, markup


def test_zip_holds_gutenberg_books_with_headers(standins):
    path = standins / BOOKS_NAME
    names = book_members(path)
    assert len(names) == 4 and all(n.startswith("Gutenberg/txt/") and "___" in n for n in names)
    with zipfile.ZipFile(path) as z:
        text = z.read(names[0]).decode("ascii")
    assert "*** START OF THIS PROJECT GUTENBERG EBOOK " in text
    assert "*** END OF THIS PROJECT GUTENBERG EBOOK " in text
    assert max(len(line) for line in text.split("\n")) <= 80  # hard-wrapped
    books = list(read_gutenberg_zip(path))
    assert all("Gutenberg" not in b and "LICENSE" not in b for b in books)
    assert len({b for b in books}) == 3  # one book is a second copy
    sentences = [s for b in books for s in document_sentences(b)]
    assert len(sentences) > 3 * 2 * 2 * 3
    front = [s for s in sentences if not s.endswith(".")]  # "THE <TITLE>" and "By <author>"
    assert len(front) == 2 * 4 and all(s.startswith(("THE ", "By ")) for s in front)
    assert all(s[0].isupper() for s in sentences)


def test_same_seed_same_bytes(standins, tmp_path):
    generate(SMALL, tmp_path)
    for name in (WIKI_NAME, BOOKS_NAME):
        assert (tmp_path / name).read_bytes() == (standins / name).read_bytes()


@pytest.mark.slow
def test_wikiextractor_output_has_no_markup(standins, tmp_path):
    out = tmp_path / "extracted"
    subprocess.run([sys.executable, "-m", "wikiextractor.WikiExtractor", str(standins / WIKI_NAME),
                    "-o", str(out), "--processes", "1", "-q"], check=True, capture_output=True)
    docs = list(read_wikiextractor(out))
    assert len(docs) == 12 + 2  # articles and their copies; no templates, no redirects
    text = "\n".join(docs)
    for markup in ("[[", "]]", "{{", "}}", "{|", "|}", "'''", "''", "<ref", "&lt;", "==", "#REDIRECT",
                   "Category:", "wikitable", "|"):
        assert markup not in text, markup
    sentences = [s for d in docs for s in document_sentences(d)]
    assert len(sentences) > 12 * 5
    assert all(s[0].isupper() and s.endswith(".") and len(s.split()) >= 3 for s in sentences)
