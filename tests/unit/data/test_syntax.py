"""Unit tests of fairseq_local_data/syntax.py: CoNLL-U and text readers, the
CoNLL-U writer and their one-line errors."""

import os

import pytest

from fairseq_local_data import syntax
from fairseq_local_data.syntax import Sentence, SyntaxFileError


def conllu_text(*rows: str) -> str:
    """CoNLL-U lines from rows whose columns are separated by single spaces."""
    return "".join(r.replace(" ", "\t") + "\n" if r and not r.startswith("#") else r + "\n" for r in rows)


def write(tmp_path, text, name="in.conllu"):
    path = tmp_path / name
    (path.write_bytes if isinstance(text, bytes) else path.write_text)(text)
    return str(path)


# French "Il parle du chat ." with the contraction du = de + le, and an empty node 5.1.
FRENCH = conllu_text(
    "# sent_id = fr-1",
    "# text = Il parle du chat.",
    "1 Il il PRON _ _ 2 nsubj _ _",
    "2 parle parler VERB _ _ 0 root _ _",
    "3-4 du _ _ _ _ _ _ _ _",
    "3 de de ADP _ _ 5 case _ _",
    "4 le le DET _ Definite=Def 5 det _ _",
    "5 chat chat NOUN _ _ 2 obl _ _",
    "5.1 parle parler VERB _ _ _ _ 2:conj _",
    "6 . . PUNCT _ _ 2 punct _ SpaceAfter=No",
    "",
    "# a sentence without annotation",
    "1 b _ _ _ _ _ _ _ _",
    "2 a _ _ _ _ _ _ _ _",
    "",
)


def test_read_conllu_expands_multiword_tokens_skips_empty_nodes_and_comments(tmp_path):
    got = syntax.read_conllu(write(tmp_path, FRENCH))
    assert got == [
        Sentence(["Il", "parle", "de", "le", "chat", "."], [1, -1, 4, 4, 1, 1],
                 ["nsubj", "root", "case", "det", "obl", "punct"]),
        Sentence(["b", "a"]),  # every HEAD "_": no tree
    ]


def test_read_conllu_empty_node_before_later_words_and_crlf_bom(tmp_path):
    text = conllu_text(
        "1 x _ _ _ _ 0 root _ _",
        "1.1 e _ _ _ _ _ _ 0:root _",
        "1.2 f _ _ _ _ _ _ 0:root _",
        "2 y _ _ _ _ 3 amod _ _",
        "3 z _ _ _ _ 1 obj _ _",
    )
    path = write(tmp_path, b"\xef\xbb\xbf" + text.replace("\n", "\r\n").encode())
    assert syntax.read_conllu(path) == [Sentence(["x", "y", "z"], [-1, 2, 0], ["root", "amod", "obj"])]


def test_read_text(tmp_path):
    path = write(tmp_path, "a  b\tc\n\n   \nd .\n", "in.txt")
    assert syntax.read_text(path) == [Sentence(["a", "b", "c"]), Sentence(["d", "."])]


GOOD = "1 a _ _ _ _ 0 root _ _"


@pytest.mark.parametrize("text, message", [
    ("", "no sentences"),
    ("\n\n  \n", "no sentences"),
    (conllu_text("# only a comment"), "sentence 1 (line 1): a sentence has no words"),
    (conllu_text("1-2 ab _ _ _ _ _ _ _ _"), "sentence 1 (line 1): a sentence has no words"),
    ("1\ta\n", "sentence 1 (line 1): a token line has no HEAD column (CoNLL-U has 10 columns)"),
    ("word\n", "sentence 1 (line 1): Invalid line format, line must contain either tabs or two spaces."),
    (conllu_text(GOOD, "", "# c", "1 a _ _ _ _ x root _ _"),
     "sentence 2 (line 3): Failed parsing field 'head': 'x' is not a valid value for parse_int_value."),
    (conllu_text(GOOD, "", GOOD, "2 b _ _ _ _ 1.1 dep _ _"),
     "sentence 2 (line 3): Failed parsing field 'head': '1.1' is not a valid value for parse_int_value."),
    (conllu_text(GOOD, "2 b _ _ _ _ 3 dep _ _"), "sentence 1 (line 1): word 2 (b) has HEAD 3, outside 0..2"),
    (conllu_text(GOOD, "2 b _ _ _ _ -1 dep _ _"), "sentence 1 (line 1): word 2 (b) has HEAD -1, outside 0..2"),
    (conllu_text(GOOD, "2 b _ _ _ _ 2 dep _ _"), "sentence 1 (line 1): word 2 (b) is its own HEAD"),
    (conllu_text(GOOD, "2 b _ _ _ _ _ _ _ _"), "sentence 1 (line 1): word 2 (b) has no HEAD"),
    (conllu_text(GOOD, "3 b _ _ _ _ 1 dep _ _"),
     "sentence 1 (line 1): word IDs must run 1, 2, 3, ...; found 3 after 1"),
    (conllu_text("one a _ _ _ _ 0 root _ _"),
     "sentence 1 (line 1): Failed parsing field 'id': 'one' is not a valid ID."),
    (conllu_text("_ a _ _ _ _ 0 root _ _"), "sentence 1 (line 1): a token line has no ID"),
    (b"1\ta\t_\t_\t_\t_\t0\troot\t_\t_\n\n1\t\xe9t\xe9\t_\t_\t_\t_\t0\troot\t_\t_\n", "line 3: not UTF-8 text"),
])
def test_read_conllu_errors_are_one_line_and_name_the_file(tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(SyntaxFileError) as e:
        syntax.read_conllu(path)
    assert str(e.value) == f"{path}: {message}"


@pytest.mark.parametrize("reader", ["read_conllu", "read_text"])
def test_unreadable_files(tmp_path, reader):
    read = getattr(syntax, reader)
    for path, why in ((tmp_path / "missing", "No such file or directory"), (tmp_path, "Is a directory")):
        with pytest.raises(SyntaxFileError) as e:
            read(str(path))
        assert str(e.value) == f"cannot read {path}: {why}"


def test_read_text_errors(tmp_path):
    cases = (("", "no sentences"), (" \n\t\n", "no sentences"), (b"ok\nbad \xff\n", "line 2: not UTF-8 text"))
    for text, message in cases:
        path = write(tmp_path, text, "in.txt")
        with pytest.raises(SyntaxFileError) as e:
            syntax.read_text(path)
        assert str(e.value) == f"{path}: {message}"


def test_syntax_file_error_is_a_value_error():
    assert issubclass(SyntaxFileError, ValueError)


# --------------------------------------------------------------------------- writer


SENTENCES = [
    Sentence(["Il", "parle", "de", "le", "chat", "."], [1, -1, 4, 4, 1, 1],
             ["nsubj", "root", "case", "det", "obl", "punct"]),
    Sentence(["no", "tree"]),
    Sentence(["x", "y"], [-1, 0]),  # heads without relations: root and dep
]


def test_write_conllu_exact_text_and_round_trip(tmp_path):
    path = str(tmp_path / "out.conllu")
    syntax.write_conllu(SENTENCES, path)
    assert open(path, encoding="utf-8").read() == conllu_text(
        "# sent_id = 1",
        "# text = Il parle de le chat .",
        "1 Il _ _ _ _ 2 nsubj _ _",
        "2 parle _ _ _ _ 0 root _ _",
        "3 de _ _ _ _ 5 case _ _",
        "4 le _ _ _ _ 5 det _ _",
        "5 chat _ _ _ _ 2 obl _ _",
        "6 . _ _ _ _ 2 punct _ _",
        "",
        "# sent_id = 2",
        "# text = no tree",
        "1 no _ _ _ _ _ _ _ _",
        "2 tree _ _ _ _ _ _ _ _",
        "",
        "# sent_id = 3",
        "# text = x y",
        "1 x _ _ _ _ 0 root _ _",
        "2 y _ _ _ _ 1 dep _ _",
        "",
    )
    assert syntax.read_conllu(path) == SENTENCES[:2] + [Sentence(["x", "y"], [-1, 0], ["root", "dep"])]
    assert os.listdir(tmp_path) == ["out.conllu"]


def test_write_conllu_replaces_a_file_atomically_and_reads_what_read_conllu_read(tmp_path):
    src = write(tmp_path, FRENCH)
    path = tmp_path / "out.conllu"
    path.write_text("old")
    syntax.write_conllu(syntax.read_conllu(src), str(path))
    assert syntax.read_conllu(str(path)) == syntax.read_conllu(src)


@pytest.mark.parametrize("bad, message", [
    (Sentence([]), "words must be non-empty and contain no whitespace"),
    (Sentence(["a b"]), "words must be non-empty and contain no whitespace"),
    (Sentence(["a", ""]), "words must be non-empty and contain no whitespace"),
    (Sentence(["a", "b"], [-1]), "1 heads for 2 words"),
    (Sentence(["a", "b"], [-1, 0], ["root"]), "1 relations for 2 words"),
    (Sentence(["a", "b"], [-1, 0], ["root", "a b"]), "relations must be non-empty and contain no whitespace"),
    (Sentence(["a", "b"], [-1, 2]), "heads must be in -1..1 and not the word itself"),
    (Sentence(["a", "b"], [-1, 1]), "heads must be in -1..1 and not the word itself"),
])
def test_write_conllu_rejects_bad_sentences_and_leaves_no_file(tmp_path, bad, message):
    path = str(tmp_path / "out.conllu")
    with pytest.raises(SyntaxFileError) as e:
        syntax.write_conllu([SENTENCES[1], bad], path)
    assert str(e.value) == f"{path}: sentence 2: {message}"
    assert os.listdir(tmp_path) == []


def test_write_conllu_unwritable_directory(tmp_path):
    path = tmp_path / "missing" / "out.conllu"
    with pytest.raises(SyntaxFileError) as e:
        syntax.write_conllu(SENTENCES, str(path))
    assert str(e.value) == f"cannot write {path}: No such file or directory"
