"""Unit tests of fairseq_local_data/testsets.py: finding a test set's files
(scripts/prepare-wmt14.sh) and what scripts/evaluate-wmt14.sh needs to score
one (raw reference, split description, compound splitting, sacreBLEU's result),
through the API and through ``python -m fairseq_local_data.wmt``."""

import json
import shutil
import subprocess

import pytest

from fairseq_local_data import testsets, wmt
from fairseq_local_data.cleaning import WmtError


# --------------------------------------------------------------------------- finding a test set


def test_test_set_names_in_order_of_preference():
    assert testsets.test_set_names("newstest2014", "en", "de") == [
        ("newstest2014-ende-src.en.sgm", "newstest2014-ende-ref.de.sgm"),
        ("newstest2014-deen-src.en.sgm", "newstest2014-deen-ref.de.sgm"),
        ("newstest2014.en", "newstest2014.de"),
        ("newstest2014-src.en.sgm", "newstest2014-ref.de.sgm"),
    ]


@pytest.mark.parametrize("present, expected", [
    ({"newstest2014-ende-src.en.sgm", "newstest2014-ende-ref.de.sgm", "newstest2014-deen-src.en.sgm",
      "newstest2014-deen-ref.de.sgm", "newstest2014.en", "newstest2014.de"}, "newstest2014-ende-src.en.sgm"),
    ({"newstest2014-deen-src.en.sgm", "newstest2014-deen-ref.de.sgm", "newstest2014-deen-src.de.sgm",
      "newstest2014-deen-ref.en.sgm", "newstest2014.en", "newstest2014.de"}, "newstest2014-deen-src.en.sgm"),
    ({"newstest2014.en", "newstest2014.de", "newstest2014-src.en.sgm", "newstest2014-ref.de.sgm"}, "newstest2014.en"),
    ({"newstest2014-src.en.sgm", "newstest2014-ref.de.sgm", "newstest2014-ende-src.en.sgm"},
     "newstest2014-src.en.sgm"),  # a scheme with only one of its two files is passed over
])
def test_find_test_picks_the_best_complete_scheme(tmp_path, present, expected):
    for i, name in enumerate(sorted(present)):
        d = tmp_path / ("dev" if i % 2 else "test-full") / "deep"  # searched recursively
        d.mkdir(parents=True, exist_ok=True)
        (d / name).write_text(name)
    s, t = testsets.find_test("newstest2014", "en", "de", [tmp_path])
    assert (s.name, t.name) == (expected, dict(testsets.test_set_names("newstest2014", "en", "de"))[expected])
    assert s.read_text() == s.name and t.read_text() == t.name


def test_find_test_prefers_earlier_directories_for_the_same_name(tmp_path):
    first, second = tmp_path / "b-first", tmp_path / "a-second"
    for d, text in ((first / "x", "first"), (second, "second")):
        d.mkdir(parents=True)
        for lang in ("en", "de"):
            (d / f"newstest2013.{lang}").write_text(text)
    (first / "newstest2013.de").write_text("first, shallower")  # ahead of first/x/newstest2013.de
    s, t = testsets.find_test("newstest2013", "en", "de", [first, second])
    assert (s.read_text(), t.read_text()) == ("first", "first, shallower")
    assert (s, t) == (first / "x" / "newstest2013.en", first / "newstest2013.de")


def test_find_test_error_lists_every_scheme_and_directory(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "newstest2017-ende-src.en.sgm").write_text("")  # source from one scheme,
    (b / "newstest2017-deen-ref.de.sgm").write_text("")  # reference from another
    (b / "newstest2017-deen-src.de.sgm").write_text("")  # the other direction
    (b / "newstest2017-deen-ref.en.sgm").write_text("")
    with pytest.raises(WmtError) as e:
        testsets.find_test("newstest2017", "en", "de", [a, b])
    assert str(e.value) == (
        "test set newstest2017 not found for en-de: no "
        "newstest2017-ende-src.en.sgm + newstest2017-ende-ref.de.sgm, "
        "newstest2017-deen-src.en.sgm + newstest2017-deen-ref.de.sgm, "
        "newstest2017.en + newstest2017.de, "
        f"newstest2017-src.en.sgm + newstest2017-ref.de.sgm in {a}, {b}")


# --------------------------------------------------------------------------- scoring


SGM = ('<refset setid="newstest2014" srclang="any" trglang="de">\n<doc sysid="ref" docid="1" origlang="en">\n'
       '<seg id="1">Ein  Satz &amp; mehr</seg>\n<seg id="2">Zwei</seg>\n</doc>\n</refset>\n')


def test_reference_is_the_raw_text_of_the_test_set(tmp_path, capsys):
    (tmp_path / "newstest2014-deen-src.en.sgm").write_text(SGM.replace("Ein  Satz &amp; mehr", "One"))
    (tmp_path / "newstest2014-deen-ref.de.sgm").write_text(SGM)
    out = tmp_path / "ref.txt"
    ref = testsets.write_reference("newstest2014", "en", "de", [tmp_path], out)
    assert ref == tmp_path / "newstest2014-deen-ref.de.sgm"
    assert out.read_text() == "Ein  Satz &amp; mehr\nZwei\n"  # segments as they are, entities kept
    (tmp_path / "plain").mkdir()
    for lang, text in (("en", "a\nb\n"), ("de", "x y\nz")):
        (tmp_path / "plain" / f"newstest2013.{lang}").write_text(text)
    wmt.main(["reference", "newstest2013", "--src", "en", "--tgt", "de", "--out", str(out), str(tmp_path / "plain")])
    assert capsys.readouterr().out == f"{tmp_path / 'plain' / 'newstest2013.de'}\n"
    assert out.read_text() == "x y\nz\n"


def test_reference_of_an_absent_test_set_prints_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "ref.txt"
    assert testsets.write_reference("newstest2014", "en", "de", [tmp_path], out) is None
    wmt.main(["reference", "newstest2014", "--src", "en", "--tgt", "de", "--out", str(out), str(tmp_path)])
    assert capsys.readouterr() == ("", "") and not out.exists()


def test_describe_split_reads_the_summary(tmp_path, capsys):
    summary = tmp_path / "summary.json"
    summary.write_text(json.dumps({"bpe": {"method": "sentencepiece"},
                                   "splits": {"test": {"name": "newstest2014"}, "test1": {"name": "newstest2018"}}}))
    assert testsets.describe_split(summary, "test1") == ("sentencepiece", "newstest2018")
    assert testsets.describe_split(summary, "valid") == ("sentencepiece", "valid")  # not listed: its own name
    wmt.main(["describe-split", "--summary", str(summary), "--split", "test"])
    assert capsys.readouterr().out == "sentencepiece newstest2014\n"
    summary.write_text(json.dumps({"splits": {}}))
    with pytest.raises(SystemExit) as e:
        wmt.main(["describe-split", "--summary", str(summary), "--split", "test"])
    assert e.value.code == 1
    assert capsys.readouterr().err == f"error: {summary} is not the summary of a prepared directory (no bpe.method)\n"
    with pytest.raises(WmtError, match="missing summary"):
        testsets.describe_split(tmp_path / "none.json", "test")


LINES = ["Die Auto @-@ Industrie 3-4 a-b-c x - y", "kein Kompositum", "", "Ost-West @-@ Handel"]


def test_split_compounds_as_get_ende_bleu(tmp_path):
    assert [testsets.split_compounds(s) for s in LINES] == [
        "Die Auto ##AT##-##AT## Industrie 3 ##AT##-##AT## 4 a ##AT##-##AT## b-c x - y", "kein Kompositum", "",
        "Ost ##AT##-##AT## West ##AT##-##AT## Handel"]
    (tmp_path / "in").write_text("".join(s + "\n" for s in LINES))
    wmt.main(["split-compounds", str(tmp_path / "in"), str(tmp_path / "out")])
    assert (tmp_path / "out").read_text().splitlines() == [testsets.split_compounds(s) for s in LINES]


@pytest.mark.slow  # starts a process
@pytest.mark.skipif(shutil.which("perl") is None, reason="no perl")
def test_split_compounds_agrees_with_the_perl_of_get_ende_bleu():
    """tensor2tensor's get_ende_bleu.sh: perl -ple 's{(\\S)-(\\S)}{$1 ##AT##-##AT## $2}g' after
    sed 's/ @-@ /-/g' (Moses' aggressive dash tokens joined back)."""
    text = "".join(s.replace(" @-@ ", "-") + "\n" for s in LINES)
    r = subprocess.run(["perl", "-ple", r"s{(\S)-(\S)}{$1 ##AT##-##AT## $2}g"], input=text, capture_output=True,
                       text=True, check=True)
    assert r.stdout.splitlines() == [testsets.split_compounds(s) for s in LINES]


def test_bleu_summary_of_sacrebleus_json(tmp_path, capsys):
    signature = "nrefs:1|case:mixed|eff:no|tok:none|smooth:exp|version:2.6.0"
    result = {"name": "BLEU", "score": 27.31, "signature": signature,
              "verbose_score": "60.1/33.0/20.5/13.2 (BP = 1.000 ratio = 1.012 hyp_len = 64 ref_len = 63)"}
    (tmp_path / "bleu.json").write_text(json.dumps(result, indent=1))
    wmt.main(["bleu-summary", str(tmp_path / "bleu.json")])
    assert capsys.readouterr().out == f"BLEU 27.31 {signature}\n"
    (tmp_path / "bad.json").write_text("BLEU = 27.31")
    with pytest.raises(WmtError, match="is not a sacreBLEU JSON result"):
        testsets.bleu_summary(tmp_path / "bad.json")
