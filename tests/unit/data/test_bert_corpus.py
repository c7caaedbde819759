"""Documents and sentences for BERT pretraining: sentence splitting, Gutenberg
headers, WikiExtractor output, deduplication, holdout and the file layout."""

import bz2
import json
import zipfile

import pytest

from fairseq_local_data.bert_corpus import (
    CorpusError, book_members, build_splits, check_wiki_dump, dedup, doc_key, document_sentences,
    holdout, read_docs, read_gutenberg_zip, read_wikiextractor, split_sentences, strip_gutenberg, write_docs,
)

BOOK = """The Project Gutenberg EBook of Emma, by Jane Austen

This eBook is for the use of anyone anywhere at no cost.

*** START OF THIS PROJECT GUTENBERG EBOOK EMMA ***




Produced by An Anonymous Volunteer




EMMA

CHAPTER I

Emma Woodhouse, handsome, clever, and rich, seemed to unite some of
the best blessings of existence. She had lived nearly twenty-one years.

She was the youngest of the two daughters of a most affectionate,
indulgent father.

End of the Project Gutenberg EBook of Emma, by Jane Austen

*** END OF THIS PROJECT GUTENBERG EBOOK EMMA ***

***** This file should be named 158.txt or 158.zip *****
"""


def test_split_sentences_on_a_known_paragraph():
    para = ("Dr. Smith went to Washington.  He arrived at 5 p.m. on Monday! Did he stay? "
            '"Yes," said Mr. Jones. It cost $3.50 in the\nU.S. today.')
    assert split_sentences(para) == [
        "Dr. Smith went to Washington.", "He arrived at 5 p.m. on Monday!", "Did he stay?",
        '"Yes," said Mr. Jones.', "It cost $3.50 in the U.S. today."]
    assert split_sentences("  \n ") == []


def test_document_sentences_drops_headings():
    text = "History.\nThe town was founded in 1820. It grew fast.\nSee also.\nA short one here."
    assert document_sentences(text) == ["The town was founded in 1820.", "It grew fast.", "A short one here."]


def test_strip_gutenberg_keeps_the_body_only():
    body = strip_gutenberg(BOOK)
    assert body.startswith("EMMA\n\nCHAPTER I\n\nEmma Woodhouse")
    assert body.endswith("indulgent father.")
    assert "Gutenberg" not in body and "Produced by" not in body
    assert strip_gutenberg("No markers here.\n\nAt all.") == "No markers here.\n\nAt all."


def test_read_gutenberg_zip_joins_wrapped_lines(tmp_path):
    z = tmp_path / "books.zip"
    with zipfile.ZipFile(z, "w") as f:
        f.writestr("Gutenberg/txt/Jane Austen___Emma.txt", BOOK)
        f.writestr("Gutenberg/README.md", "not a book")
    assert book_members(z) == ["Gutenberg/txt/Jane Austen___Emma.txt"]
    (text,) = list(read_gutenberg_zip(z))
    assert text.split("\n") == [
        "EMMA", "CHAPTER I",
        "Emma Woodhouse, handsome, clever, and rich, seemed to unite some of the best blessings "
        "of existence. She had lived nearly twenty-one years.",
        "She was the youngest of the two daughters of a most affectionate, indulgent father."]
    assert document_sentences(text) == [
        "Emma Woodhouse, handsome, clever, and rich, seemed to unite some of the best blessings of existence.",
        "She had lived nearly twenty-one years.",
        "She was the youngest of the two daughters of a most affectionate, indulgent father."]


def test_read_wikiextractor_doc_and_json_formats(tmp_path):
    (tmp_path / "AA").mkdir()
    (tmp_path / "AA" / "wiki_00").write_text(
        '<doc id="12" url="https://en.wikipedia.org/wiki?curid=12" title="Anarchism">\nAnarchism\n\n'
        "Anarchism is a political philosophy. It is old.\nHistory.\nIt began long ago in places.\n</doc>\n"
        '<doc id="13" url="https://en.wikipedia.org/wiki?curid=13" title="AT&amp;T">\nAT&T\n\nA firm.\n</doc>\n')
    (tmp_path / "AB").mkdir()
    (tmp_path / "AB" / "wiki_00").write_text(json.dumps(
        {"id": "14", "url": "u", "title": "Zed", "text": "Zed\n\nZed is a letter of the alphabet."}) + "\n")
    assert list(read_wikiextractor(tmp_path)) == [
        "Anarchism is a political philosophy. It is old.\nHistory.\nIt began long ago in places.",
        "A firm.", "Zed is a letter of the alphabet."]
    with pytest.raises(CorpusError, match="no WikiExtractor output"):
        list(read_wikiextractor(tmp_path / "AA" / "none"))


def test_dedup_removes_exact_duplicate_documents_only():
    a, b, c = ["One a.", "Two a."], ["One a."], ["One a.", "Two a. "]
    assert list(dedup([a, b, a, [], c, b, a])) == [a, b, c]


def _held_out(docs, seed, n_valid=4, n_test=3):
    where = holdout([doc_key(d, f"holdout:{seed}\n") for d in docs], n_valid, n_test)
    return {s: {docs[i][0] for i, t in where.items() if t == s} for s in ("valid", "test")}


def test_holdout_is_deterministic_disjoint_and_order_free():
    docs = [[f"Sentence {i}."] for i in range(50)]
    chosen = _held_out(docs, 1)
    assert len(chosen["valid"]) == 4 and len(chosen["test"]) == 3
    assert not chosen["valid"] & chosen["test"]
    assert _held_out(docs, 1) == chosen
    assert _held_out(docs[::-1], 1) == chosen  # depends on the text, not the order
    assert _held_out(docs, 2) != chosen  # another seed, another choice
    with pytest.raises(CorpusError, match="cannot hold out 30 valid and 20 test documents: only 50"):
        _held_out(docs, 1, 30, 20)


def test_write_and_read_docs_layout(tmp_path):
    docs = [["A b.", "C d."], ["E f."], ["G h.", "I j."]]
    assert write_docs(docs, tmp_path / "x.txt") == 3
    assert (tmp_path / "x.txt").read_text() == "A b.\nC d.\n\nE f.\n\nG h.\nI j.\n"
    assert list(read_docs(tmp_path / "x.txt")) == docs


def test_input_checks_are_one_line_errors(tmp_path):
    with pytest.raises(CorpusError, match="missing Wikipedia dump"):
        check_wiki_dump(tmp_path / "none.xml.bz2")
    (tmp_path / "empty.xml.bz2").write_bytes(b"")
    with pytest.raises(CorpusError, match="empty Wikipedia dump"):
        check_wiki_dump(tmp_path / "empty.xml.bz2")
    (tmp_path / "plain.xml.bz2").write_text("<mediawiki>")
    with pytest.raises(CorpusError, match="not a bzip2-compressed XML dump"):
        check_wiki_dump(tmp_path / "plain.xml.bz2")
    (tmp_path / "text.bz2").write_bytes(bz2.compress(b"hello"))
    with pytest.raises(CorpusError, match="not a MediaWiki XML export"):
        check_wiki_dump(tmp_path / "text.bz2")
    with pytest.raises(CorpusError, match="not a zip archive"):
        book_members(tmp_path / "text.bz2")
    with zipfile.ZipFile(tmp_path / "csv.zip", "w") as z:
        z.writestr("a.csv", "x")
    with pytest.raises(CorpusError, match="no .txt books in"):
        book_members(tmp_path / "csv.zip")


def test_build_splits_counts_and_disjointness(tmp_path):
    with zipfile.ZipFile(tmp_path / "books.zip", "w") as z:
        for i in range(12):
            z.writestr(f"b{i:02d}.txt", f"Book number {i} starts here. It has two sentences.\n\n"
                                        f"A second paragraph of book {i} follows.")
        z.writestr("copy.txt", "Book number 3 starts here. It has two sentences.\n\n"
                               "A second paragraph of book 3 follows.")
    stats = build_splits(None, tmp_path / "books.zip", tmp_path / "out", 2, 1, seed=1)
    assert stats["documents_read"] == 13 and stats["duplicates_removed"] == 1
    assert (stats["train_documents"], stats["valid_documents"], stats["test_documents"]) == (9, 2, 1)
    assert stats["train_sentences"] == 27 and stats["valid_sentences"] == 6 and stats["test_sentences"] == 3
    splits = {s: [tuple(d) for d in read_docs(tmp_path / "out" / f"{s}.txt")] for s in ("train", "valid", "test")}
    every = [d for s in splits.values() for d in s]
    assert len(every) == len(set(every)) == 12
    again = build_splits(None, tmp_path / "books.zip", tmp_path / "again", 2, 1, seed=1)
    assert again == stats
    for s in splits:
        assert (tmp_path / "out" / f"{s}.txt").read_bytes() == (tmp_path / "again" / f"{s}.txt").read_bytes()
    assert not (tmp_path / "out" / "all.txt").exists()
    assert json.loads((tmp_path / "out" / "stats.json").read_text()) == stats
