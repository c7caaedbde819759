"""scripts/prepare-wmt14.sh on small fake WMT'14 archives that have the
official names and internal layouts: split sizes, cleaning, resumability,
one-line errors and the SentencePiece option."""

import hashlib
import io
import json
import random
import re
import shutil
import tarfile
from pathlib import Path

import pytest

from helpers import run

pytestmark = pytest.mark.slow  # end-to-end: every test runs fairseq or a pipeline

LETTERS = {"en": "bcdfghklmnprstvw", "de": "bdfgklmnprstzäöü", "ru": "бвгдзклмнпрстфхж"}
VOWELS = {"en": "aeiou", "de": "aeiou", "ru": "аеиоуя"}
N_EXTRA = {"newstest2013": 60, "newstest2014": 50, "newstest2018": 40}
STEPS = ("extracting", "tokenising", "cleaning the", "learning", "training a", "applying", "binarising")


def words(rng: random.Random, lang: str, n: int) -> list:
    return ["".join(rng.choice(LETTERS[lang]) + rng.choice(VOWELS[lang]) for _ in range(rng.randint(1, 3)))
            for _ in range(n)]


def sentence_pair(rng: random.Random, tgt: str) -> tuple:
    """Two untokenised sentences with the same punctuation, so they have the
    same number of tokens after tokenisation (a dash compound, a comma, a
    final full stop)."""
    n = rng.randint(4, 12)
    a, b = words(rng, "en", n), words(rng, tgt, n)
    for s in (a, b):
        s[0] = s[0].capitalize()
        s[1] = s[1] + "-" + s[2]
        del s[2]
        s[-2] += ","
    return " ".join(a) + ".", " ".join(b) + "."


def corpus(rng: random.Random, tgt: str, n: int) -> tuple:
    pairs = [sentence_pair(rng, tgt) for _ in range(n)]
    return "".join(p[0] + "\n" for p in pairs), "".join(p[1] + "\n" for p in pairs)


# Pairs that cleaning must drop (first three) or keep (last two); lowercase
# words only, so tokenisation leaves their token counts alone.
PLANTED = [
    ("drop-long", 251, 251),  # over 250 tokens
    ("drop-ratio", 2, 4),  # ratio 2 > 1.5
    ("drop-empty", 0, 3),  # fewer than 1 token
    ("keep-long", 250, 250),  # exactly 250 tokens
    ("keep-ratio", 2, 3),  # ratio exactly 1.5
]


def planted(tgt: str) -> tuple:
    rng = random.Random(7)
    src = "".join(" ".join(words(rng, "en", a)) + "\n" for _, a, _ in PLANTED)
    return src, "".join(" ".join(words(rng, tgt, b)) + "\n" for _, _, b in PLANTED)


def sgm(lines: list, setid: str, lang: str) -> str:
    half = len(lines) // 2
    out = [f'<srcset setid="{setid}" srclang="any">', f'<doc sysid="ref" docid="a" origlang="en" lang="{lang}">', "<p>"]
    for i, line in enumerate(lines, 1):
        if i == half + 1:
            out += ["</p>", "</doc>", f'<doc sysid="ref" docid="b" lang="{lang}">', "<p>"]
        out.append(f'<seg id="{i}">{line}</seg>')
    return "\n".join(out + ["</p>", "</doc>", "</srcset>"]) + "\n"


def eval_set(name: str, tgt: str, n: int = 0) -> tuple:
    n = n or N_EXTRA[name]
    return corpus(random.Random(f"{name}{tgt}{n}"), tgt, n)


def write_tgz(path: Path, members: dict) -> None:
    with tarfile.open(path, "w:gz") as tar:
        for name, text in members.items():
            data = text.encode("utf-8")
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def make_raw(root: Path, tgt: str, sizes: dict = None, edit=None) -> Path:
    """A raw directory with fake official archives for en-``tgt``. ``edit``
    may change the {archive: {member: text}} layout before it is written."""
    rng = random.Random(tgt)
    sizes = {"europarl": 150, "commoncrawl": 120, "nc": 100, "wiki": 80, **(sizes or {})}
    xx = f"{tgt}-en"
    archives = {}
    cc_en, cc_x = corpus(rng, tgt, sizes["commoncrawl"])
    nc_en, nc_x = corpus(rng, tgt, sizes["nc"])
    archives["training-parallel-commoncrawl.tgz"] = {
        f"commoncrawl.{xx}.en": cc_en, f"commoncrawl.{xx}.{tgt}": cc_x,
        "commoncrawl.fr-en.en": "distractor\n", "commoncrawl.fr-en.fr": "distracteur\n",
    }
    archives["training-parallel-nc-v9.tgz"] = {
        f"training/news-commentary-v9.{xx}.en": nc_en, f"training/news-commentary-v9.{xx}.{tgt}": nc_x,
    }
    p_en, p_x = planted(tgt)
    if tgt == "de":
        ep_en, ep_de = corpus(rng, tgt, sizes["europarl"])
        archives["training-parallel-europarl-v7.tgz"] = {
            "training/europarl-v7.de-en.en": ep_en + p_en, "training/europarl-v7.de-en.de": ep_de + p_x,
        }
    else:
        wiki_en, wiki_ru = corpus(rng, tgt, sizes["wiki"])
        lines = [f"{r} ||| {e}" for r, e in zip(wiki_ru.splitlines() + p_x.splitlines(),
                                                 wiki_en.splitlines() + p_en.splitlines())]
        archives["wiki-titles.tgz"] = {"wiki/ru-en/wiki.ru-en": "\n".join(lines) + "\n",
                                       "wiki/hi-en/wiki-titles.hi-en": "x ||| y\n"}
    v_en, v_x = eval_set("newstest2013", tgt)
    archives["dev.tgz"] = {
        "dev/newstest2013.en": v_en, f"dev/newstest2013.{tgt}": v_x,
        "dev/newstest2012.en": "other\n", f"dev/newstest2012.{tgt}": "other\n",
        f"dev/newstest2013-ref.{tgt}.sgm": sgm(v_x.splitlines(), "newstest2013", tgt),
    }
    t_en, t_x = eval_set("newstest2014", tgt)
    pair = f"{tgt}en"
    archives["test-full.tgz"] = {
        f"test-full/newstest2014-{pair}-src.en.sgm": sgm(t_en.splitlines(), "newstest2014", "en"),
        f"test-full/newstest2014-{pair}-ref.{tgt}.sgm": sgm(t_x.splitlines(), "newstest2014", tgt),
        f"test-full/newstest2014-{pair}-src.{tgt}.sgm": sgm(t_x.splitlines(), "newstest2014", tgt),
        f"test-full/newstest2014-{pair}-ref.en.sgm": sgm(t_en.splitlines(), "newstest2014", "en"),
    }
    e_en, e_x = eval_set("newstest2018", tgt)
    ext = {f"dev/newstest2018-en{tgt}-src.en.sgm": sgm(e_en.splitlines(), "newstest2018", "en"),
           f"dev/newstest2018-en{tgt}-ref.{tgt}.sgm": sgm(e_x.splitlines(), "newstest2018", tgt)}
    # the other direction is a different test set (35 segments), never to be picked
    o_en, o_x = eval_set("newstest2018", tgt, 35)
    ext.update({f"dev/newstest2018-{pair}-src.{tgt}.sgm": sgm(o_x.splitlines(), "newstest2018", tgt),
                f"dev/newstest2018-{pair}-ref.en.sgm": sgm(o_en.splitlines(), "newstest2018", "en")})
    if tgt == "de":  # loose files in the raw directory
        loose = ext
    else:  # WMT'19's dev.tgz, renamed
        archives["wmt19-dev.tgz"], loose = ext, {}
    if edit:
        edit(archives)
    raw = root / "raw"
    raw.mkdir()
    for name, members in archives.items():
        if members is not None:
            write_tgz(raw / name, members)
    for name, text in loose.items():
        (raw / name).parent.mkdir(parents=True, exist_ok=True)
        (raw / name).write_text(text, encoding="utf-8")
    return raw


def prepare(pair: str, raw: Path, out: Path, *extra, check: bool = True):
    return run(["bash", "scripts/prepare-wmt14.sh", pair, "--raw-dir", str(raw), "--out", str(out),
                "--merges", "200", "--workers", "2", *extra], check=check)


def lines(path: Path) -> list:
    return path.read_text(encoding="utf-8").splitlines()


def steps_run(stderr: str) -> list:
    """The log lines (not progress bars) of steps that did work."""
    return [line for line in stderr.splitlines() if line.startswith("[") and any(s in line for s in STEPS)]


def snapshot(out: Path) -> dict:
    """(mtime, sha256) of every file under ``out`` except bpe-binarize's summary.txt."""
    return {str(p.relative_to(out)): (p.stat().st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest())
            for p in sorted(out.rglob("*")) if p.is_file() and p.name != "summary.txt"}


@pytest.fixture(scope="module")
def en_de(tmp_path_factory):
    root = tmp_path_factory.mktemp("wmt_en_de")
    raw = make_raw(root, "de")
    out = root / "data-bin"
    r = prepare("en-de", raw, out, "--extra-test", "newstest2018")
    return raw, out, r


def test_help():
    r = run(["bash", "scripts/prepare-wmt14.sh", "--help"])
    assert "--raw-dir" in r.stdout and "europarl-v7" in r.stdout
    assert "set -euo" not in r.stdout


def test_en_de_split_sizes_and_binarised_data(en_de):
    raw, out, _ = en_de
    summary = json.loads((out / "summary.json").read_text())
    train_before = 150 + len(PLANTED) + 120 + 100
    expected = {"train": (train_before, train_before - 3), "valid": (60, 60), "test": (50, 50), "test1": (40, 40)}
    got = {k: (v["sentences_before_cleaning"], v["sentences_after_cleaning"]) for k, v in summary["splits"].items()}
    assert got == expected
    assert summary["splits"]["test1"]["name"] == "newstest2018"
    assert summary["splits"]["valid"]["name"] == "newstest2013"
    assert summary["corpora"] == {
        "europarl-v7.de-en": {"before": 155, "after": 152},
        "commoncrawl.de-en": {"before": 120, "after": 120},
        "news-commentary-v9.de-en": {"before": 100, "after": 100},
    }
    assert summary["bpe"] == {"method": "subword-nmt", "merges": 200, "codes": "bpe/codes"}
    assert summary["cleaning"]["ratio"] == 1.5 and summary["cleaning"]["max_tokens"] == 250
    entries = len(lines(out / "dict.en.txt"))
    assert summary["dictionary"] == {"joined": True, "entries": entries, "vocab_size": entries + 4}
    assert (out / "dict.de.txt").read_text() == (out / "dict.en.txt").read_text()

    from fairseq.data import Dictionary, data_utils

    d = Dictionary.load(str(out / "dict.en.txt"))
    for split, (_, n) in expected.items():
        assert summary["splits"][split]["sentences_binarized"] == n
        for lang in ("en", "de"):
            bpe = lines(out / "bpe" / f"{split}.{lang}")
            assert len(bpe) == len(lines(out / "tok" / f"{split}.{lang}")) == n
            ds = data_utils.load_indexed_dataset(str(out / f"{split}.en-de.{lang}"), d)
            assert len(ds) == n
            assert d.string(ds[n - 1]) == bpe[n - 1]
    # the test sets are the sgm segments in order, in the right direction
    _, t_de = eval_set("newstest2018", "de")
    assert lines(out / "tok" / "test1.de")[0] == tokenised(t_de.splitlines()[0])
    assert lines(out / "tok" / "test.en")[-1] == tokenised(eval_set("newstest2014", "de")[0].splitlines()[-1])


def tokenised(s: str) -> str:
    """The expected Moses tokenisation of a :func:`sentence_pair` sentence."""
    s = re.sub(r"(\w)-(\w)", r"\1 @-@ \2", s)
    return s.replace(",", " ,")[:-1] + " ."


def test_cleaning_drops_the_planted_pairs(en_de):
    _, out, r = en_de
    src, tgt = lines(out / "tok" / "train.en"), lines(out / "tok" / "train.de")
    counts = [(len(a.split()), len(b.split())) for a, b in zip(src, tgt)]
    assert (250, 250) in counts and (2, 3) in counts  # the limits themselves are kept
    assert (251, 251) not in counts and (2, 4) not in counts
    assert all(a >= 1 and b >= 1 and max(a, b) <= 1.5 * min(a, b) for a, b in counts)
    # tokenised like tokenizer.perl -a: comma, full stop and dash split off
    assert all(" @-@ " in s and " ," in s and s.endswith(" .") for s in src[:150])
    assert "cleaning kept 372 of 375 sentence pairs" in r.stderr


def test_rerun_skips_and_a_corrupted_step_is_redone(en_de):
    raw, out, _ = en_de
    before = snapshot(out)
    r = prepare("en-de", raw, out, "--extra-test", "newstest2018")
    assert not steps_run(r.stderr), r.stderr
    assert "skip: training data already cleaned" in r.stderr
    assert snapshot(out) == before

    # a truncated intermediate file and a half-written BPE file are redone
    tok = out / "work" / "tok" / "commoncrawl.de-en.de"
    tok.write_text("".join(tok.read_text().splitlines(keepends=True)[:7]))
    bpe = out / "bpe" / "valid.de"
    bpe.write_text("half a line")
    r = prepare("en-de", raw, out, "--extra-test", "newstest2018")
    redone = steps_run(r.stderr)
    assert len(redone) == 2, r.stderr
    assert "tokenising" in redone[0] and redone[0].endswith("commoncrawl.de-en.de")
    assert "applying BPE to valid.de" in redone[1]
    after = snapshot(out)
    assert {k: v[1] for k, v in after.items()} == {k: v[1] for k, v in before.items()}


def test_new_bpe_settings_learn_bpe_again(en_de, tmp_path):
    raw, out, _ = en_de
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    r = prepare("en-de", raw, copy, "--extra-test", "newstest2018")
    assert not steps_run(r.stderr), r.stderr  # a copied directory is still complete
    r = prepare("en-de", raw, copy, "--extra-test", "newstest2018", "--merges", "120")
    assert "learning 120 joint BPE merges" in r.stderr and "binarising" in r.stderr
    assert "tokenising" not in r.stderr and "cleaning the" not in r.stderr
    summary = json.loads((copy / "summary.json").read_text())
    assert summary["bpe"]["merges"] == 120
    assert len(lines(copy / "bpe" / "codes")) == 121  # a version line and 120 merges
    assert summary["dictionary"]["entries"] < json.loads((out / "summary.json").read_text())["dictionary"]["entries"]


def test_en_ru_manifest_wiki_headlines_and_sentencepiece(tmp_path):
    raw = make_raw(tmp_path, "ru")
    yandex = tmp_path / "yandex" / "1mcorpus"
    yandex.mkdir(parents=True)
    y_en, y_ru = corpus(random.Random(5), "ru", 90)
    (yandex / "corpus.en_ru.1m.en").write_text(y_en, encoding="utf-8")
    (yandex / "corpus.en_ru.1m.ru").write_text(y_ru, encoding="utf-8")
    manifest = tmp_path / "yandex" / "manifest.tsv"
    manifest.write_text("# English<TAB>Russian\n1mcorpus/corpus.en_ru.1m.en\t1mcorpus/corpus.en_ru.1m.ru\n")
    out = tmp_path / "out"
    # the online mode, with every archive already downloaded: nothing to fetch
    r = run(["bash", "scripts/prepare-wmt14.sh", "en-ru", "--download-dir", str(raw), "--out", str(out),
             "--merges", "200", "--manifest", str(manifest), "--sentencepiece", "--extra-test", "newstest2018"])
    assert "downloading" not in r.stderr and "wiki-titles.tgz" in r.stderr

    summary = json.loads((out / "summary.json").read_text())
    assert summary["corpora"] == {
        "commoncrawl.ru-en": {"before": 120, "after": 120},
        "news-commentary-v9.ru-en": {"before": 100, "after": 100},
        "wiki.ru-en": {"before": 80 + len(PLANTED), "after": 80 + 2},
        "corpus.en_ru.1m": {"before": 90, "after": 90},
    }
    sizes = {k: v["sentences_binarized"] for k, v in summary["splits"].items()}
    assert sizes == {"train": 392, "valid": 60, "test": 50, "test1": 40}
    assert summary["bpe"]["method"] == "sentencepiece" and summary["bpe"]["pieces"] == 200
    assert (out / "bpe" / "spm.model").is_file() and not (out / "bpe" / "codes").exists()
    for split, n in sizes.items():
        for lang in ("en", "ru"):
            pieces = lines(out / "bpe" / f"{split}.{lang}")
            assert len(pieces) == n and all(p.startswith("▁") for p in pieces)
            assert (out / f"{split}.en-ru.{lang}.bin").stat().st_size > 0
    # the wiki headlines file is split into its Russian and English halves
    assert all(re.search("[а-я]", s) for s in lines(out / "work" / "tok" / "wiki.ru-en.ru"))
    assert not any(re.search("[а-я]", s) for s in lines(out / "work" / "tok" / "wiki.ru-en.en"))


def _mismatch(a):
    member = "training/europarl-v7.de-en.de"
    a["training-parallel-europarl-v7.tgz"][member] = "".join(
        a["training-parallel-europarl-v7.tgz"][member].splitlines(keepends=True)[:-1])


def _missing(a):
    a["training-parallel-nc-v9.tgz"] = None


def _empty(a):
    cc = a["training-parallel-commoncrawl.tgz"]
    cc["commoncrawl.de-en.en"] = cc["commoncrawl.de-en.de"] = ""


def _nothing_left(a):  # every pair fails the length ratio
    for name in ("training-parallel-europarl-v7.tgz", "training-parallel-commoncrawl.tgz",
                 "training-parallel-nc-v9.tgz"):
        for member in a[name]:
            if member.endswith(".de"):
                a[name][member] = "".join(s.rstrip("\n") + " x y z u v w r s t\n"
                                          for s in a[name][member].splitlines())


@pytest.mark.parametrize("edit, message, extra", [
    (_mismatch, r"parallel files differ in length: \S*europarl-v7\.de-en\.en has 155 lines, \S*europarl-v7\.de-en\.de has 154", []),
    (_missing, r"missing archive: \S*/training-parallel-nc-v9\.tgz", []),
    (_empty, r"missing or empty corpus file: \S*/commoncrawl\.de-en\.en", []),
    (_nothing_left, r"empty corpus: no sentence pair of \S*europarl-v7\.de-en\.en.* survives cleaning", []),
    (None, r"test set newstest2017 not found for en-de: no newstest2017-ende-src\.en\.sgm", ["--extra-test", "newstest2017"]),
], ids=["mismatch", "missing-archive", "empty-corpus", "empty-after-cleaning", "missing-test-set"])
def test_bad_input_is_a_one_line_error(tmp_path, edit, message, extra):
    sizes = {"europarl": 150, "commoncrawl": 20, "nc": 20}
    raw = make_raw(tmp_path, "de", sizes, edit)
    r = prepare("en-de", raw, tmp_path / "out", *extra, check=False)
    last = r.stderr.strip().splitlines()[-1]
    assert r.returncode != 0
    assert last.startswith("error: ") and re.search(message, last), r.stderr
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "out" / "summary.json").exists()


def test_manifest_errors_name_the_file(tmp_path):
    raw = make_raw(tmp_path, "ru", {"commoncrawl": 20, "nc": 20, "wiki": 20})
    manifest = tmp_path / "m.tsv"
    manifest.write_text("missing.en\tmissing.ru\n")
    r = prepare("en-ru", raw, tmp_path / "out", "--manifest", str(manifest), check=False)
    last = r.stderr.strip().splitlines()[-1]
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert last.startswith("error: missing corpus file ") and "missing.en" in last and "m.tsv line 1" in last
