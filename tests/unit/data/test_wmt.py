"""Unit tests of fairseq_local_data/wmt.py on small hand-made inputs: archive
extraction, bitext splitting, manifests and the command line.
(tests/unit/data/test_cleaning.py tests SGML segments, tokenisation, cleaning
and the summary; tests/unit/data/test_testsets.py the test sets;
tests/e2e/test_wmt_prepare.py runs the whole pipeline.)"""

import io
import json
import os
import sys
import tarfile
from pathlib import Path

import pytest

from helpers import run
from fairseq_local_data import wmt
from fairseq_local_data.cleaning import WmtError
from helpers.wmt import CLEAN_STATS, SUMMARY, prepared, two_corpora  # noqa: F401 (fixtures)

WMT = [sys.executable, "-m", "fairseq_local_data.wmt"]


def write_tar(path: Path, members: list, mode: str = "w:gz") -> Path:
    """A tar archive of (name, text) members; text None is a directory, a
    ("->", target) tuple a symbolic link."""
    with tarfile.open(path, mode) as tar:
        for name, text in members:
            info = tarfile.TarInfo(name)
            if text is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            elif isinstance(text, tuple):
                info.type, info.linkname = tarfile.SYMTYPE, text[1]
                tar.addfile(info)
            else:
                data = text.encode("utf-8")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return path


def files(d: Path) -> dict:
    """{relative path: text} of every file under ``d``."""
    return {str(p.relative_to(d)): p.read_text(encoding="utf-8") for p in sorted(d.rglob("*")) if p.is_file()}


# --------------------------------------------------------------------------- extract


EUROPARL = [
    ("training", None),
    ("training/europarl-v7.de-en.en", "Resumption of the session\n"),
    ("training/europarl-v7.de-en.de", "Wiederaufnahme der Sitzungsperiode\n"),
    ("training/europarl-v7.fr-en.en", "distractor\n"),
    ("links/europarl-v7.de-en.cs", ("->", "../training/europarl-v7.de-en.en")),
    ("copy/europarl-v7.de-en.en", "a second member with the same base name\n"),
    ("europarl-v7.de-en.xx", None),  # a directory whose name matches
]


@pytest.mark.parametrize("mode, ext", [("w:gz", "tgz"), ("w", "tar"), ("w:xz", "tar.xz")])
def test_extract_copies_matching_regular_members_flat(tmp_path, mode, ext):
    archive = write_tar(tmp_path / f"training-parallel-europarl-v7.{ext}", EUROPARL, mode)
    out = tmp_path / "out" / "sub"
    written = wmt.extract(archive, out, ["europarl-v7.de-en.*"])
    # archive order, base names only; not the directory, the link, the other pair
    assert written == [out / "europarl-v7.de-en.en", out / "europarl-v7.de-en.de"]
    # the first of two members with the same base name wins; no *.tmp left
    assert files(out) == {"europarl-v7.de-en.en": "Resumption of the session\n",
                          "europarl-v7.de-en.de": "Wiederaufnahme der Sitzungsperiode\n"}


def test_extract_matches_each_pattern_against_base_names(tmp_path):
    archive = write_tar(tmp_path / "a.tgz", EUROPARL)
    written = wmt.extract(archive, tmp_path / "out", ["*.fr-en.en", "europarl-v7.de-en.de", "nothing*"], optional=True)
    assert [p.name for p in written] == ["europarl-v7.de-en.de", "europarl-v7.fr-en.en"]
    assert wmt.extract(archive, tmp_path / "empty", ["*.DE"], optional=True) == []  # case-sensitive
    assert (tmp_path / "empty").is_dir() and not any((tmp_path / "empty").iterdir())


@pytest.mark.parametrize("patterns, missing", [
    (["europarl-v7.de-en.en", "training/europarl-v7.de-en.de"], "training/europarl-v7.de-en.de"),  # paths never match
    (["europarl-v7.de-en.EN"], "europarl-v7.de-en.EN"),
    (["europarl-v7.de-en.cs"], "europarl-v7.de-en.cs"),  # a symbolic link is not copied
    (["europarl-v7.de-en.xx"], "europarl-v7.de-en.xx"),  # nor a directory
    (["*.en", "x*", "y*"], "x*"),  # the first pattern that matched nothing
])
def test_extract_pattern_matching_nothing_is_an_error(tmp_path, patterns, missing):
    archive = write_tar(tmp_path / "a.tgz", EUROPARL)
    with pytest.raises(WmtError) as e:
        wmt.extract(archive, tmp_path / "out", patterns)
    assert str(e.value) == f"archive {archive} has no member named {missing}"


def test_extract_reports_missing_and_unreadable_archives(tmp_path):
    with pytest.raises(WmtError) as e:
        wmt.extract(tmp_path / "nope.tgz", tmp_path / "out", ["*"])
    assert str(e.value) == f"missing archive: {tmp_path / 'nope.tgz'}"
    assert not (tmp_path / "out").exists()

    junk = tmp_path / "junk.tgz"
    junk.write_bytes(b"this is not an archive\n" * 40)
    with pytest.raises(WmtError, match=r"^cannot read archive \S+/junk\.tgz: "):
        wmt.extract(junk, tmp_path / "out", ["*"])

    # an interrupted download: the archive ends inside a member
    big = write_tar(tmp_path / "big.tgz", [("c.en", "".join(f"line {i} {i * i}\n" for i in range(20000)))])
    cut = tmp_path / "cut.tgz"
    cut.write_bytes(big.read_bytes()[: big.stat().st_size // 2])
    with pytest.raises(WmtError, match=r"^cannot read archive \S+/cut\.tgz: unexpected end of data$"):
        wmt.extract(cut, tmp_path / "out2", ["c.en"])
    assert not (tmp_path / "out2" / "c.en").exists()


# --------------------------------------------------------------------------- extract_corpus / split_bitext


def test_extract_corpus_from_one_member_per_language(tmp_path):
    archive = write_tar(tmp_path / "nc.tgz", [
        ("training/news-commentary-v9.fr-en.en", "no\n"),
        ("training/news-commentary-v9.de-en.de", "Hallo Welt\n"),
        ("training/news-commentary-v9.de-en.en", "Hello world\n"),
    ])
    got = wmt.extract_corpus(archive, tmp_path / "out", "news-commentary-v9.de-en", ["en", "de"])
    assert got == [tmp_path / "out" / "news-commentary-v9.de-en.en", tmp_path / "out" / "news-commentary-v9.de-en.de"]
    assert files(tmp_path / "out") == {"news-commentary-v9.de-en.de": "Hallo Welt\n",
                                       "news-commentary-v9.de-en.en": "Hello world\n"}


@pytest.mark.parametrize("langs", [["en", "ru"], ["ru", "en"]])
def test_extract_corpus_splits_a_bitext_member_by_its_suffix(tmp_path, capsys, langs):
    archive = write_tar(tmp_path / "wiki-titles.tgz", [
        ("wiki/hi-en/wiki-titles.hi-en", "x ||| y\n"),
        ("wiki/ru-en/wiki.ru-en", "Москва ||| Moscow\n  Мир|||World  \nno separator\n"),
    ])
    got = wmt.extract_corpus(archive, tmp_path / "out", "wiki.ru-en", langs)
    assert sorted(got) == [tmp_path / "out" / "wiki.ru-en.en", tmp_path / "out" / "wiki.ru-en.ru"]
    out = files(tmp_path / "out")
    assert out["wiki.ru-en.ru"] == "Москва\nМир\n\n"  # first column: the language first in the suffix
    assert out["wiki.ru-en.en"] == "Moscow\nWorld\n\n"
    assert capsys.readouterr().err == (f"warning: 1 line(s) of {tmp_path / 'out' / 'wiki.ru-en'} "
                                       "are not 'A ||| B' pairs (kept empty)\n")


@pytest.mark.parametrize("members, stem, langs", [
    ([("wiki/ru-en/wiki.ru-en", "a ||| b\n")], "wiki.ru-en", ["en", "de"]),  # not the stem's languages
    ([("nc/news.de-en", "a ||| b\n")], "news.de-en.x", ["en", "de"]),  # no such stem
    ([("nc/plain", "a ||| b\n")], "plain", ["en", "de"]),  # no ".xx-yy" suffix to split by
])
def test_extract_corpus_without_the_corpus_is_an_error(tmp_path, members, stem, langs):
    archive = write_tar(tmp_path / "a.tgz", members)
    with pytest.raises(WmtError) as e:
        wmt.extract_corpus(archive, tmp_path / "out", stem, langs)
    assert str(e.value) == f"archive {archive} has no member named {stem}.{langs[0]}"


def test_extract_corpus_names_the_missing_member(tmp_path):
    archive = write_tar(tmp_path / "nc.tgz", [("training/nc.de-en.en", "Hello\n")])
    with pytest.raises(WmtError) as e:
        wmt.extract_corpus(archive, tmp_path / "out", "nc.de-en", ["en", "de"])
    assert str(e.value) == f"archive {archive} has no member named nc.de-en.de"


def test_split_bitext_exact_columns_and_bad_lines(tmp_path, capsys):
    src = tmp_path / "in" / "titles.xx-yy"
    src.parent.mkdir()
    src.write_bytes("a1 a2 ||| b1\r\n||| only right\nleft only |||\nx ||| y ||| z\n\nlast|||line".encode())
    got = wmt.split_bitext(src, ["xx", "yy"], tmp_path)
    assert got == [tmp_path / "titles.xx-yy.xx", tmp_path / "titles.xx-yy.yy"]
    assert got[0].read_text() == "a1 a2\n\nleft only\n\n\nlast\n"
    assert got[1].read_text() == "b1\nonly right\n\n\n\nline\n"
    assert capsys.readouterr().err == f"warning: 2 line(s) of {src} are not 'A ||| B' pairs (kept empty)\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in", "titles.xx-yy.xx", "titles.xx-yy.yy"]

    src.write_text("a ||| b\n")
    wmt.split_bitext(src, ["xx", "yy"], tmp_path)
    assert capsys.readouterr().err == ""


# --------------------------------------------------------------------------- manifests


def test_read_manifest(tmp_path):
    m = tmp_path / "yandex" / "manifest.tsv"
    (m.parent / "1mcorpus").mkdir(parents=True)
    for name in ("1mcorpus/corpus.en_ru.1m.en", "1mcorpus/corpus.en_ru.1m.ru", "plain", "plain.ru"):
        (m.parent / name).write_text("x\n")
    other = tmp_path / "elsewhere"
    other.mkdir()
    (other / "b.en").write_text("x\n")
    (other / "b.ru").write_text("x\n")
    m.write_bytes((
        "# English<TAB>Russian\n"
        "\n"
        "1mcorpus/corpus.en_ru.1m.en\t1mcorpus/corpus.en_ru.1m.ru\n"
        "   # an indented comment\n"
        f" {other}/b.en \t ../elsewhere/b.ru\r\n"  # absolute and ../ paths, spaces, CRLF
        "plain\t./plain.ru"  # no extension, no final newline
    ).encode())
    base = m.parent.resolve()
    assert wmt.read_manifest(m) == [
        ("corpus.en_ru.1m", base / "1mcorpus/corpus.en_ru.1m.en", base / "1mcorpus/corpus.en_ru.1m.ru"),
        ("b", other.resolve() / "b.en", other.resolve() / "b.ru"),
        ("plain", base / "plain", base / "plain.ru"),
    ]


@pytest.mark.parametrize("text, message", [
    ("a.en b.ru\n", "{m} line 1: expected SOURCE_FILE<TAB>TARGET_FILE, got 1 field(s)"),
    ("# c\n\na.en\tb.ru\tc.x\n", "{m} line 3: expected SOURCE_FILE<TAB>TARGET_FILE, got 3 field(s)"),
    ("a.en\tb.ru\nmissing.en\tb.ru\n", "missing corpus file {d}/missing.en (listed in {m} line 2)"),
    ("a.en\tmissing.ru\n", "missing corpus file {d}/missing.ru (listed in {m} line 1)"),
    ("a.en\tsub\n", "missing corpus file {d}/sub (listed in {m} line 1)"),  # a directory
    ("# only comments\n\n   \n", "manifest {m} lists no corpus"),
    ("", "manifest {m} lists no corpus"),
])
def test_read_manifest_errors(tmp_path, text, message):
    (tmp_path / "a.en").write_text("x\n")
    (tmp_path / "b.ru").write_text("x\n")
    (tmp_path / "sub").mkdir()
    m = tmp_path / "m.tsv"
    m.write_text(text)
    with pytest.raises(WmtError) as e:
        wmt.read_manifest(m)
    assert str(e.value) == message.format(m=m, d=tmp_path.resolve())


def test_read_manifest_missing_file(tmp_path):
    with pytest.raises(WmtError) as e:
        wmt.read_manifest(tmp_path / "none.tsv")
    assert str(e.value) == f"missing manifest: {tmp_path / 'none.tsv'}"


# --------------------------------------------------------------------------- command line


def test_write_json_leaves_an_unchanged_file_alone(tmp_path):
    p = tmp_path / "s.json"
    wmt._write_json({"b": 1, "a": "ü"}, p)
    assert p.read_text(encoding="utf-8") == '{\n  "b": 1,\n  "a": "ü"\n}\n'
    os.utime(p, ns=(10**9, 10**9))
    wmt._write_json({"b": 1, "a": "ü"}, p)
    assert p.stat().st_mtime_ns == 10**9
    wmt._write_json({"b": 2}, p)
    assert json.loads(p.read_text()) == {"b": 2} and p.stat().st_mtime_ns != 10**9
    assert sorted(x.name for x in tmp_path.iterdir()) == ["s.json"]


def test_main_clean_writes_outputs_and_stats(tmp_path, two_corpora, capsys):
    args = ["clean", "--out-src", str(tmp_path / "o.en"), "--out-tgt", str(tmp_path / "o.de"),
            "--stats", str(tmp_path / "clean.json"), "--ratio", "9", "--min", "1", "--max", "4"]
    for name, s, t in two_corpora:
        args += ["--corpus", name, str(s), str(t)]
    wmt.main(args)
    assert capsys.readouterr().err == "cleaning kept 6 of 7 sentence pairs\n"
    assert json.loads((tmp_path / "clean.json").read_text()) == {
        "corpora": {"A": {"before": 5, "after": 4}, "B": {"before": 2, "after": 2}},
        "before": 7, "after": 6, "ratio": 9.0, "min_tokens": 1, "max_tokens": 4}
    assert (tmp_path / "o.en").read_text() == "a b\na b c\na b\na\np q r s\np\n"
    assert (tmp_path / "o.de").read_text() == "x y z\nx y\nw x y z\nx\nw\nq\n"


def test_main_summary_find_test_and_manifest(tmp_path, prepared, capsys):
    stats = tmp_path / "clean.json"
    stats.write_text(json.dumps(CLEAN_STATS))
    out = tmp_path / "summary.json"
    wmt.main(["summary", "--data", str(prepared), "--src", "en", "--tgt", "de", "--clean-stats", str(stats),
              "--split", "train=europarl+cc", "--split", "valid=newstest2013", "--split", "test=newstest2014",
              "--split", "test1=newstest2018", "--set", 'bpe={"method": "subword-nmt", "merges": 200}',
              "--out", str(out)])
    assert json.loads(out.read_text()) == SUMMARY

    for name in ("newstest2013.en", "newstest2013.de"):
        (tmp_path / name).write_text("x\n")
    (tmp_path / "m.tsv").write_text("newstest2013.en\tnewstest2013.de\n")
    capsys.readouterr()
    wmt.main(["find-test", "newstest2013", "--src", "en", "--tgt", "de", str(tmp_path)])
    assert capsys.readouterr().out == f"{tmp_path / 'newstest2013.en'}\n{tmp_path / 'newstest2013.de'}\n"
    wmt.main(["manifest", str(tmp_path / "m.tsv")])
    d = tmp_path.resolve()
    assert capsys.readouterr().out == f"newstest2013\t{d / 'newstest2013.en'}\t{d / 'newstest2013.de'}\n"


@pytest.mark.parametrize("args, message", [
    (["manifest", "{d}/none.tsv"], "error: missing manifest: {d}/none.tsv"),
    (["extract", "{d}/none.tgz", "{d}/out", "*"], "error: missing archive: {d}/none.tgz"),
    (["find-test", "newstest2099", "--src", "en", "--tgt", "de", "{d}"],
     "error: test set newstest2099 not found for en-de: no newstest2099-ende-src.en.sgm + "),
    (["tok", "--lang", "en", "{d}/none.en", "{d}/out.en"], "error: missing file: {d}/none.en"),
    (["manifest", "{d}/latin1.tsv"], "error: input is not UTF-8 text ("),
])
def test_main_input_errors_are_one_line_with_status_1(tmp_path, capsys, args, message):
    (tmp_path / "latin1.tsv").write_bytes(b"caf\xe9.en\tcaf\xe9.de\n")
    with pytest.raises(SystemExit) as e:
        wmt.main([a.format(d=tmp_path) for a in args])
    assert e.value.code == 1
    err = capsys.readouterr().err
    assert err.startswith(message.format(d=tmp_path)) and err.count("\n") == 1, err


@pytest.mark.slow  # starts a process
def test_command_line_as_the_scripts_run_it(tmp_path):
    """``python -m fairseq_local_data.wmt``, as the pipeline scripts run it."""
    r = run([*WMT, "--help"])
    assert r.stdout.startswith("usage: python -m fairseq_local_data.wmt ")
    assert "Helpers for preparing WMT parallel data" in r.stdout
    for cmd in ("extract", "extract-corpus", "find-test", "manifest", "tok", "clean", "spm-train", "spm-encode",
                "summary", "reference", "describe-split", "split-compounds", "bleu-summary"):
        assert cmd in r.stdout, cmd
    r = run([*WMT, "clean", "--help"])
    assert "--corpus NAME SRC TGT" in r.stdout and "--ratio" in r.stdout
    (tmp_path / "m.tsv").write_text("a.en\n")
    r = run([*WMT, "manifest", str(tmp_path / "m.tsv")], check=False)
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr == f"error: {tmp_path / 'm.tsv'} line 1: expected SOURCE_FILE<TAB>TARGET_FILE, got 1 field(s)\n"
    r = run([*WMT, "clean", "--out-src", "x"], check=False)
    assert r.returncode == 2 and "the following arguments are required: --corpus" in r.stderr
