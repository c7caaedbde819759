"""Unit tests of fairseq_local_data/synthetic.py and the lexicon of
fairseq_local_data/language.py: determinism, the split and lexicon guarantees
of their docstrings and the command line. (The documented grammar is checked
in tests/unit/data/test_synthetic_grammar.py.)"""

import collections
import os
import random
import re
import subprocess
import sys

import pytest

from helpers import ENV, ROOT, run
from fairseq_local_data import language
from helpers.synthetic import SMALL, SPLITS, generate, read, syn


# --------------------------------------------------------------------------- determinism


def test_same_seed_gives_byte_identical_files_and_another_seed_different_ones(tmp_path):
    a, counts = generate(tmp_path, "a", seed=5)
    b, _ = generate(tmp_path, "b", seed=5)
    c, _ = generate(tmp_path, "c", seed=6)
    assert counts == {"train": 300, "valid": 40, "test": 40}
    names = sorted(p.name for p in a.iterdir())
    assert names == sorted(f"{s}.{l}" for s in SPLITS for l in ("src", "tgt"))  # no *.tmp left over
    assert sorted(p.name for p in b.iterdir()) == names
    for n in names:
        assert (a / n).read_bytes() == (b / n).read_bytes(), n
        assert (a / n).read_bytes() != (c / n).read_bytes(), n


@pytest.mark.slow  # starts a process
def test_script_output_does_not_depend_on_the_process_or_hash_seed(tmp_path):
    """Two runs of the script under different PYTHONHASHSEEDs write the same
    files as generate_corpus in this process."""
    here, _ = generate(tmp_path, "here", seed=3)
    args = [f"--{k}={v}" for k, v in SMALL.items()] + ["--seed=3"]
    for hash_seed in ("1", "2"):
        out = tmp_path / f"script{hash_seed}"
        r = subprocess.run([sys.executable, "-m", "fairseq_local_data.synthetic", "--out-dir", str(out), *args],
                           cwd=ROOT, capture_output=True, text=True, env={**ENV, "PYTHONHASHSEED": hash_seed})
        assert r.returncode == 0, r.stderr
        assert r.stdout == f"train=300 valid=40 test=40 pairs written to {out}\n"
        for p in here.iterdir():
            assert (out / p.name).read_bytes() == p.read_bytes(), p.name


def test_valid_and_test_do_not_depend_on_the_train_size(tmp_path):
    small, _ = generate(tmp_path, "small", train=50)
    big, _ = generate(tmp_path, "big", train=400)
    for split in ("valid", "test"):
        for lang in ("src", "tgt"):
            assert read(small, split, lang) == read(big, split, lang)
    assert len(read(small, "train", "src")) == 50 and len(read(big, "train", "src")) == 400


def _lexicon_words(lex):
    return (lex.func, lex.objm, lex.gen, lex.pron, lex.dets, lex.preps, lex.advpreps, lex.nouns, lex.adjs, lex.verbs,
            lex.transitive)


def test_lexicon_depends_only_on_the_seed_and_lexicon_sizes():
    base = syn.SyntheticConfig(**SMALL)
    same = syn.SyntheticConfig(**{**SMALL, "train": 7, "valid": 0, "test": 3, "min_len": 2, "max_len": 9, "zipf": 2.0})
    assert _lexicon_words(language.Lexicon(base)) == _lexicon_words(language.Lexicon(same))
    other_seed = language.Lexicon(syn.SyntheticConfig(**{**SMALL, "seed": 2}))
    assert _lexicon_words(other_seed) != _lexicon_words(language.Lexicon(base))
    more_nouns = language.Lexicon(syn.SyntheticConfig(**{**SMALL, "nouns": 151}))
    assert len(more_nouns.nouns) == 151 and more_nouns.adjs != language.Lexicon(base).adjs


# --------------------------------------------------------------------------- splits


def test_files_suffixes_counts_and_length_bounds(tmp_path):
    out, counts = generate(tmp_path, src="en", tgt="xx", train=120, valid=0, test=9, min_len=7, max_len=9)
    assert counts == {"train": 120, "valid": 0, "test": 9}
    assert sorted(p.name for p in out.iterdir()) == sorted(f"{s}.{l}" for s in SPLITS for l in ("en", "xx"))
    assert (out / "valid.en").read_bytes() == b"" and (out / "valid.xx").read_bytes() == b""
    lengths = collections.Counter()
    for split in SPLITS:
        src, tgt = read(out, split, "en"), read(out, split, "xx")
        assert len(src) == len(tgt) == counts[split]
        for s, t in zip(src, tgt):
            assert s == " ".join(s.split()) and t == " ".join(t.split())  # single spaces, no padding
            assert s.endswith(" .") and t.endswith(" .")
            lengths[len(s.split())] += 1  # the full stop counts
    assert set(lengths) == {7, 8, 9}


def test_sources_are_distinct_across_all_splits(tmp_path):
    out, _ = generate(tmp_path, train=600, valid=100, test=100, nouns=30, adjectives=8, verbs=8, max_len=8)
    sources = [s for split in SPLITS for s in read(out, split, "src")]
    assert len(sources) == 800 and len(set(sources)) == 800


def test_bad_split_sizes_raise_value_error(tmp_path):
    for kw in ({"train": 0}, {"valid": -1}, {"test": -1}):
        with pytest.raises(ValueError, match="train must be > 0"):
            generate(tmp_path, **kw)
    assert not (tmp_path / "out").exists()


def test_too_few_distinct_sentences_raise_runtime_error(tmp_path):
    # one word per class and exactly 4 tokens: far fewer than 100 distinct sentences
    tiny = dict(nouns=1, adjectives=1, verbs=1, dets=1, preps=2, min_len=4, max_len=4, valid=0, test=0)
    with pytest.raises(RuntimeError, match="^could not generate 100 distinct train pairs$"):
        generate(tmp_path, **{**tiny, "train": 100})
    assert not (tmp_path / "out").exists()


# --------------------------------------------------------------------------- lexicon


def _syllables(phon, lo, hi):
    onsets, vowels, codas = phon
    return re.compile(f"(?:[{onsets}][{vowels}][{codas}]?){{{lo},{hi}}}")


def test_lexicon_word_shapes_and_no_s_in_source_lemmas():
    lex = language.Lexicon(syn.SyntheticConfig(**SMALL))
    assert len(lex.nouns) == 150 and len(lex.adjs) == len(lex.verbs) == 40 and len(lex.dets) == 4
    assert len(lex.preps) == len(lex.advpreps) == 4  # half in NPs, half sentence adjuncts
    single = list(lex.func.values()) + list(lex.pron.values()) + lex.dets
    content = lex.nouns + lex.adjs + lex.verbs
    for words, (lo, hi) in ((single, (1, 1)), (lex.preps + lex.advpreps, (1, 2)), (content, (2, 4))):
        for s, t in words:
            assert _syllables(language.SRC_PHON, lo, hi).fullmatch(s), s
            assert _syllables(language.TGT_PHON, lo, hi).fullmatch(t), t
    for t in (lex.objm, lex.gen):
        assert _syllables(language.TGT_PHON, 1, 1).fullmatch(t)
    everything = single + lex.preps + lex.advpreps + content
    assert not any("s" in s for s, _ in everything)
    # all lemmas distinct within each language, so every word has one reading
    assert len({s for s, _ in everything}) == len(everything)
    assert len({t for _, t in everything} | {lex.objm, lex.gen}) == len(everything) + 2
    assert 0 < sum(lex.transitive) < len(lex.verbs)


@pytest.mark.parametrize("zipf", [1.0, 0.0])
def test_zipf_sampling(zipf):
    lex = language.Lexicon(syn.SyntheticConfig(**{**SMALL, "nouns": 10, "zipf": zipf}))
    rng = random.Random(0)
    counts = collections.Counter(lex.sample(rng, "nouns") for _ in range(40000))
    assert set(counts) == set(range(10))
    weights = [1 / (r + 1) ** zipf for r in range(10)]
    for r in range(10):
        assert counts[r] / 40000 == pytest.approx(weights[r] / sum(weights), abs=0.01), r


# --------------------------------------------------------------------------- command line


def test_main_writes_the_corpus_and_reports_the_counts(tmp_path, capsys):
    out = tmp_path / "new" / "dir"
    syn.main(["--out-dir", str(out), "--train", "12", "--valid", "3", "--test", "0", "--seed", "9",
              "--src", "de", "--tgt", "en", "--nouns", "50", "--zipf", "1.5"])
    assert capsys.readouterr().out == f"train=12 valid=3 test=0 pairs written to {out}\n"
    expected = tmp_path / "api"
    syn.generate_corpus(syn.SyntheticConfig(seed=9, train=12, valid=3, test=0, nouns=50, zipf=1.5), str(expected),
                        "de", "en")
    for p in expected.iterdir():
        assert (out / p.name).read_bytes() == p.read_bytes(), p.name
    assert len(os.listdir(out)) == 6


@pytest.mark.parametrize("args, message", [
    (["--train", "0"], "--train must be positive"),
    (["--valid", "-1"], "--valid and --test must be non-negative"),
    (["--test", "-2"], "--valid and --test must be non-negative"),
    (["--nouns", "0"], "lexicon sizes must be positive (--preps at least 2)"),
    (["--dets", "0"], "lexicon sizes must be positive (--preps at least 2)"),
    (["--preps", "1"], "lexicon sizes must be positive (--preps at least 2)"),
    (["--src", "xx", "--tgt", "xx"], "--src and --tgt must be distinct, non-empty suffixes"),
    (["--tgt", ""], "--src and --tgt must be distinct, non-empty suffixes"),
    (["--min-len", "0"], "need 1 <= --min-len <= --max-len"),
    (["--min-len", "9", "--max-len", "8"], "need 1 <= --min-len <= --max-len"),
    (["--train", "many"], "argument --train: invalid int value: 'many'"),
    # the grammar's knobs (language.SyntheticConfig) and the --hard preset
    (["--rel-clause", "1.5"], "--rel-clause must be a probability in [0, 1], not 1.5"),
    (["--plural", "-0.1"], "--plural must be a probability in [0, 1], not -0.1"),
    (["--neg", "nan"], "--neg must be a probability in [0, 1], not nan"),
    (["--adjunct", "often"], "argument --adjunct: invalid float value: 'often'"),
    (["--subj-depth", "1.5"], "argument --subj-depth: invalid int value: '1.5'"),
    (["--rel-clause", "0.7", "--np-pp", "0.4"], "--rel-clause + --np-pp must be at most 1 (they are shares of one draw)"),
    (["--hard", "--neg", "0.9"], "--neg + --question must be at most 1 (they are shares of one draw)"),
    (["--pron-subj", "0.95"], "--pron-subj + --coord-subj must be at most 1 (they are shares of one draw)"),
    (["--obj-depth", "-1"], "--subj-depth and --obj-depth must be non-negative"),
    (["--hard", "--max-len", "8"], "need 1 <= --min-len <= --max-len"),
])
def test_main_rejects_bad_options_with_one_line(tmp_path, capsys, args, message):
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as e:
        syn.main(["--out-dir", str(out), *args])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.endswith(f": error: {message}\n") and err.count("\n") == 1, err
    assert not out.exists()


def test_main_reports_an_unwritable_directory_and_an_impossible_request(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(SystemExit) as e:
        syn.main(["--out-dir", str(blocker / "sub"), "--train", "5", "--valid", "0", "--test", "0"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1
    assert f": error: cannot write corpus to {blocker / 'sub'}: " in err

    tiny = ["--nouns", "1", "--adjectives", "1", "--verbs", "1", "--dets", "1", "--preps", "2",
            "--min-len", "4", "--max-len", "4", "--valid", "0", "--test", "0", "--train", "60"]
    with pytest.raises(SystemExit) as e:
        syn.main(["--out-dir", str(tmp_path / "out"), *tiny])
    assert e.value.code == 2
    assert capsys.readouterr().err.endswith(": error: could not generate 60 distinct train pairs\n")
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_module_help():
    """``python -m fairseq_local_data.synthetic``, as prepare-synthetic.sh runs it."""
    r = run([sys.executable, "-m", "fairseq_local_data.synthetic", "--help"])
    stdout = r.stdout
    assert stdout.startswith("usage: python -m fairseq_local_data.synthetic ")
    assert "Generate a synthetic parallel corpus." in stdout
    for option in ("--out-dir", "--seed", "--train", "--valid", "--test", "--nouns", "--adjectives", "--verbs",
                   "--preps", "--dets", "--zipf", "--min-len", "--max-len", "--src", "--tgt"):
        assert option in stdout, option
