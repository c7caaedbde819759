"""Unit tests of fairseq_local_data/cleaning.py on small hand-made inputs:
line counting, SGML segments, Moses tokenisation, clean-corpus-n filtering and
the summary. (tests/unit/data/test_wmt.py runs them through wmt.py's command line.)"""

import struct

import pytest

from fairseq_local_data import cleaning
from fairseq_local_data.cleaning import WmtError
from helpers.wmt import CLEAN_STATS, SUMMARY, prepared, two_corpora, write_corpus, write_idx  # noqa: F401


def w(n: int, word: str = "w") -> str:
    return " ".join([word] * n)


# --------------------------------------------------------------------------- count_lines


@pytest.mark.parametrize("data, n", [(b"", 0), (b"a", 0), (b"a\n", 1), (b"a\nb", 1), (b"\n\n", 2),
                                     (b"a\r\nb\r\n", 2), (b"a\rb\r", 0), ("ä\u2028b\n".encode(), 1)])
def test_count_lines_counts_newlines_like_wc(tmp_path, data, n):
    (tmp_path / "f").write_bytes(data)
    assert cleaning.count_lines(tmp_path / "f") == n


# --------------------------------------------------------------------------- SGML segments


SGM = (
    '<srcset setid="newstest2014" srclang="any">\n'
    '<doc sysid="ref" docid="1" genre="news" origlang="de">\n'
    "<p>\n"
    '<seg id="1"> Gutach: Increased safety for pedestrians  </seg>\n'
    "<SEG ID=2>Upper-case tags &amp; entities stay &quot;as is&quot;</SEG>\n"
    '<seg id="3"></seg>\n'
    "</p>\n"
    '<hl><seg id="4">A <i>headline</i> tag</seg></hl>\n'
    "no segment on this line\n"
    '<seg id="5">caf\udce9</seg>\n'  # an invalid UTF-8 byte (written with surrogateescape)
    "</doc>\n</srcset>\n"
)


def test_read_sgm_yields_the_text_of_each_segment(tmp_path):
    path = tmp_path / "newstest2014-deen-src.en.sgm"
    path.write_bytes(SGM.encode("utf-8", "surrogateescape"))
    assert list(cleaning.read_sgm(path)) == [
        "Gutach: Increased safety for pedestrians",
        "Upper-case tags &amp; entities stay &quot;as is&quot;",
        "",
        "A <i>headline</i> tag",
        "caf\ufffd",
    ]


# --------------------------------------------------------------------------- tokenisation


@pytest.mark.parametrize("lang, line, expected", [
    ("en", "Hello, world!\n", "Hello , world !"),
    ("en", "a well-known 1-2 win", "a well @-@ known 1 @-@ 2 win"),  # -a: aggressive dash splits
    ("en", "don't, it's", "don 't , it 's"),
    ("en", "A & B < C > D", "A & B < C > D"),  # no escaping
    ("en", "It costs $5.00 (50%).", "It costs $ 5.00 ( 50 % ) ."),
    ("en", "Mr. Smith paid 3,000 to the U.S.A.", "Mr. Smith paid 3,000 to the U.S.A."),  # non-breaking prefixes
    ("en", "„Quoted“ «text»", '" Quoted " " text "'),  # punctuation normalisation
    ("en", 'He said "yes".', 'He said " yes . "'),
    ("en", "zero\u200bwidth\tbell\x07and\u00a0nbsp", "zero width bell and nbsp"),  # non-printing characters
    ("en", "   many    spaces   \n", "many spaces"),
    ("en", "\n", ""),
    ("de", "Er kam am 3. Mai.", "Er kam am 3. Mai ."),
    ("de", "„Hallo“, sagte er.", '" Hallo " , sagte er .'),
])
def test_normalize_tokenize(lang, line, expected):
    cleaning._init(lang)
    assert cleaning.normalize_tokenize(line) == expected


def test_tokenize_file_plain_text(tmp_path):
    inp, out = tmp_path / "in.en", tmp_path / "out.en"
    inp.write_text("Hello, world!\n\n  It's 50%.\n")
    assert cleaning.tokenize_file(inp, out, "en") == 3
    assert out.read_text() == "Hello , world !\n\nIt 's 50 % .\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.en", "out.en"]


def test_tokenize_file_sgm_reads_segments(tmp_path):
    inp = tmp_path / "newstest2014-deen-src.en.sgm"
    inp.write_bytes(SGM.encode("utf-8", "surrogateescape"))
    out = tmp_path / "test.en"
    assert cleaning.tokenize_file(inp, out, "en") == 5
    assert out.read_text().splitlines() == [
        "Gutach : Increased safety for pedestrians",
        "Upper @-@ case tags & amp ; entities stay & quot ; as is & quot ;",  # as tokenizer.perl -no-escape
        "",
        "A < i > headline < / i > tag",
        "caf \ufffd",
    ]


def test_tokenize_file_missing_input(tmp_path):
    with pytest.raises(WmtError) as e:
        cleaning.tokenize_file(tmp_path / "none.en", tmp_path / "out.en", "en")
    assert str(e.value) == f"missing file: {tmp_path / 'none.en'}"
    assert not any(tmp_path.iterdir())


def test_tokenize_file_without_final_newline(tmp_path):
    inp, out = tmp_path / "in.en", tmp_path / "out.en"
    inp.write_text("Hello, world!\nb\nc")
    assert cleaning.tokenize_file(inp, out, "en") == 3
    assert out.read_text() == "Hello , world !\nb\nc\n"


# --------------------------------------------------------------------------- cleaning


@pytest.mark.parametrize("src, tgt, keep", [
    (w(1), w(1), True),  # min_len 1
    ("", w(1), False),
    (w(1), "  \t ", False),
    (w(250), w(250), True),  # max_len 250
    (w(251), w(251), False),
    (w(250), w(251), False),
    (w(2), w(3), True),  # ratio exactly 1.5, both ways
    (w(3), w(2), True),
    (w(2), w(4), False),
    (w(100), w(150), True),
    (w(100), w(151), False),  # 1.51
    (w(151), w(100), False),
    (w(200), w(133), False),  # 1.5038
    (w(200), w(134), True),  # 1.4925
    ("a  b\t\tc", "x y", True),  # tokens are whitespace-separated
    ("a  b\t\tc", "x", False),
])
def test_keep_pair_default_boundaries(src, tgt, keep):
    assert cleaning.keep_pair(src, tgt, ratio=1.5, min_len=1, max_len=250) is keep


def test_keep_pair_custom_limits_and_long_words():
    assert cleaning.keep_pair(w(3), w(3), 9, 3, 4) and not cleaning.keep_pair(w(2), w(2), 9, 3, 4)
    assert cleaning.keep_pair(w(4), w(4), 9, 3, 4) and not cleaning.keep_pair(w(5), w(4), 9, 3, 4)
    assert cleaning.keep_pair(w(3), w(9), 3.0, 1, 250) and not cleaning.keep_pair(w(3), w(10), 3.0, 1, 250)
    assert cleaning.keep_pair("a " + "x" * 1000, "b c", 1.5, 1, 250)
    assert not cleaning.keep_pair("a " + "x" * 1001, "b c", 1.5, 1, 250)
    assert not cleaning.keep_pair("a b", "c " + "y" * 11, 1.5, 1, 250, max_word=10)


def test_clean_filters_concatenates_and_counts(tmp_path, two_corpora):
    out_s, out_t = tmp_path / "train.en", tmp_path / "train.de"
    stats = cleaning.clean(two_corpora, out_s, out_t)
    assert stats == {"corpora": {"A": {"before": 5, "after": 3}, "B": {"before": 2, "after": 1}},
                     "before": 7, "after": 4}
    assert out_s.read_text() == "a b\na b c\na\np\n"  # whitespace collapsed, order kept
    assert out_t.read_text() == "x y z\nx y\nx\nq\n"
    assert not list(tmp_path.glob("*.tmp"))


def test_clean_custom_limits(tmp_path, two_corpora):
    stats = cleaning.clean(two_corpora, tmp_path / "o.en", tmp_path / "o.de", ratio=9, min_len=2, max_len=3)
    assert stats["corpora"] == {"A": {"before": 5, "after": 2}, "B": {"before": 2, "after": 0}}
    assert (tmp_path / "o.en").read_text() == "a b\na b c\n"


def test_clean_nothing_left_is_an_error_and_writes_nothing(tmp_path):
    pairs = [write_corpus(tmp_path, "A", ["a", "a b c d"], ["x y z", "x"]), write_corpus(tmp_path, "B", [""], [""])]
    with pytest.raises(WmtError) as e:
        cleaning.clean(pairs, tmp_path / "o.en", tmp_path / "o.de")
    assert str(e.value) == (f"empty corpus: no sentence pair of {tmp_path / 'A.en'}, {tmp_path / 'B.en'} "
                            "survives cleaning")
    assert not (tmp_path / "o.en").exists() and not (tmp_path / "o.de").exists()


@pytest.mark.parametrize("n_src, n_tgt, longer", [(2, 3, "de"), (2, 4, "de"), (4, 2, "en")])
def test_clean_parallel_files_of_different_lengths(tmp_path, n_src, n_tgt, longer):
    pair = write_corpus(tmp_path, "A", ["a b"] * n_src, ["x y"] * n_tgt)
    with pytest.raises(WmtError) as e:
        cleaning.clean([pair], tmp_path / "o.en", tmp_path / "o.de")
    assert str(e.value) == f"parallel files differ in length: {tmp_path / ('A.' + longer)} has more lines"
    assert not (tmp_path / "o.en").exists()


def test_clean_source_one_line_longer_is_an_error(tmp_path):
    pair = write_corpus(tmp_path, "A", ["a b"] * 3, ["x y"] * 2)
    with pytest.raises(WmtError) as e:
        cleaning.clean([pair], tmp_path / "o.en", tmp_path / "o.de")
    assert str(e.value) == f"parallel files differ in length: {tmp_path / 'A.en'} has more lines"


# --------------------------------------------------------------------------- summary


def test_indexed_size_reads_the_header(tmp_path):
    write_idx(tmp_path / "a.idx", 3)
    write_idx(tmp_path / "b.idx", 5_000_000_000)  # needs all 8 bytes
    assert cleaning.indexed_size(tmp_path / "a.idx") == 3
    assert cleaning.indexed_size(tmp_path / "b.idx") == 5_000_000_000
    write_idx(tmp_path / "bad.idx", 3, magic=b"TNTIDX\x00\x00\x00")
    (tmp_path / "short.idx").write_bytes(b"MMIDIDX\x00\x00" + struct.pack("<Q", 1))
    for name in ("bad.idx", "short.idx"):
        with pytest.raises(WmtError) as e:
            cleaning.indexed_size(tmp_path / name)
        assert str(e.value) == f"not a fairseq mmap index: {tmp_path / name}"


def test_summary(prepared):
    splits = {"train": "europarl+cc", "valid": "newstest2013", "test": "newstest2014", "test1": "newstest2018"}
    got = cleaning.summary(prepared, "en", "de", splits, CLEAN_STATS,
                           {"bpe": {"method": "subword-nmt", "merges": 200}})
    assert got == SUMMARY
    assert list(got) == list(SUMMARY) and list(got["splits"]) == list(splits)

