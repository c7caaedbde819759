"""Unit tests of the grammar knobs of fairseq_local_data/language.py
(SyntheticConfig) and the hard preset of fairseq_local_data/synthetic.py
(--hard): the defaults give the corpus of before the knobs, byte for byte;
each knob does what its docstring says; the hard preset gives longer, deeper
sentences; bad values are one-line errors. (The trees of the hard preset are
checked with the default ones in tests/unit/data/test_synthetic_trees.py.)"""

import hashlib
import random
import statistics
import subprocess

import pytest

from fairseq_local_data import language, syntax
from fairseq_local_data.errors import OneLineError
from helpers import ENV, ROOT
from helpers.synthetic import SMALL, SPLITS, read, syn

# sha256 of the files that `python -m fairseq_local_data.synthetic --train 300 --valid 50 --test 50 --trees`
# wrote before the grammar had knobs (module defaults otherwise).
BEFORE_KNOBS = {
    "train.src": "08ace352f3ff18de23b8d8bb99d60d7f4c6aef76e7c74fd9a5f1434a1054da8c",
    "train.tgt": "75859e431e0b2c689338b05680b06b136f0f4b095f03cf79c96dbe32b656098b",
    "train.src.conllu": "8a36e13192807326736fa7e1f3e7f2ace56aeef119dd58f8ce0aee09b63c9fb6",
    "valid.src": "940b928e5cbb68ae5449a320a0070ac12b6795e2097b06e314fb189b6928de46",
    "valid.tgt": "e5be68a8708dfd13522416e24b9a0904ca9f42e97538a712188103ade4a2ac0a",
    "valid.src.conllu": "c8d9b0363c617a8b1d4edeb626c4fbfbea5e7808c8aaea7b5ff361e21f528e70",
    "test.src": "6eb344a000a2c6595058e3558f57ab96dfbfad5407a9efd79c97533fe5f62978",
    "test.tgt": "6bab1f67b7e1d1cbcb6a6ac9e433aef7215ddf8cd56ff287324ec4719dfda32d",
    "test.src.conllu": "866bbf0543e0965d29327d6348430625aad788c83eca685f7c1f112e2484e8bf",
}
KNOB_DEFAULTS = dict(rel_clause=0.25, np_pp=0.20, subj_depth=2, obj_depth=1, neg=0.12, question=0.12, pron_subj=0.2,
                     coord_subj=0.1, adjunct=0.4, plural=0.3)
MOD = ("nmod", "acl:relcl")  # the relations of an NP's MOD (PP, relative clause)


def _digests(out):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in out.iterdir()}


# --------------------------------------------------------------------------- defaults


def test_defaults_are_the_documented_ones_and_hard_is_the_documented_preset():
    cfg = syn.SyntheticConfig()
    assert {k: getattr(cfg, k) for k in KNOB_DEFAULTS} == KNOB_DEFAULTS
    assert language.HARD == dict(subj_depth=3, obj_depth=2, rel_clause=0.4, np_pp=0.3, neg=0.2, question=0.2,
                                 min_len=10, max_len=40)


def test_default_knobs_reproduce_the_corpus_of_before_byte_for_byte(tmp_path, capsys):
    cfg = syn.SyntheticConfig(train=300, valid=50, test=50)
    syn.generate_corpus(cfg, str(tmp_path / "api"), trees=True)
    assert _digests(tmp_path / "api") == BEFORE_KNOBS
    # the same with every knob given explicitly, on the command line (float parsing, the preset left out)
    knobs = [x for k, v in KNOB_DEFAULTS.items() for x in (f"--{k.replace('_', '-')}", str(v))]
    syn.main(["--out-dir", str(tmp_path / "cli"), "--train", "300", "--valid", "50", "--test", "50", "--trees", *knobs])
    assert capsys.readouterr().out.startswith("train=300 valid=50 test=50 pairs written")
    assert _digests(tmp_path / "cli") == BEFORE_KNOBS


# --------------------------------------------------------------------------- each knob


def _sample(n=300, **kw):
    """n source trees (language.Tree) of the SMALL lexicon with the knobs kw."""
    cfg = syn.SyntheticConfig(**{**SMALL, **kw})
    gram = language.Grammar(language.Lexicon(cfg), random.Random(0), cfg)
    return [gram.sentence_tree()[0] for _ in range(n)]


def _rels(t):
    return [row[5] for row in t.rows]


def _subject_upos(t):
    """UPOS of the main verb's subject (the first of a coordinated one)."""
    return [r[2] for r in t.rows if r[5] == "nsubj" and t.rows[r[4]][5] == "root"]


@pytest.mark.parametrize("knobs, holds", [
    ({"rel_clause": 0.0}, lambda t: "acl:relcl" not in _rels(t)),
    ({"rel_clause": 1.0, "np_pp": 0.0, "pron_subj": 0.0}, lambda t: "acl:relcl" in _rels(t)),
    ({"np_pp": 0.0}, lambda t: "nmod" not in _rels(t)),
    ({"np_pp": 1.0, "rel_clause": 0.0, "pron_subj": 0.0}, lambda t: "nmod" in _rels(t)),
    ({"neg": 0.0, "question": 0.0}, lambda t: not {"advmod", "discourse"} & set(_rels(t))),
    ({"neg": 1.0, "question": 0.0}, lambda t: _rels(t)[0] == "advmod" and "discourse" not in _rels(t)),
    ({"neg": 0.0, "question": 1.0}, lambda t: _rels(t)[0] == "discourse" and "advmod" not in _rels(t)),
    ({"pron_subj": 1.0, "coord_subj": 0.0}, lambda t: _subject_upos(t) == ["PRON"]),
    ({"pron_subj": 0.0, "coord_subj": 1.0}, lambda t: _rels(t).count("conj") == _rels(t).count("cc") == 1),
    ({"pron_subj": 0.0, "coord_subj": 0.0}, lambda t: "conj" not in _rels(t) and _subject_upos(t) == ["NOUN"]),
    ({"adjunct": 0.0}, lambda t: "obl" not in _rels(t)),
    ({"adjunct": 1.0}, lambda t: _rels(t).count("obl") == 1),
    ({"plural": 0.0, "pron_subj": 0.0}, lambda t: all(r[3] == "Number=Sing" for r in t.rows if r[2] == "NOUN")),
    ({"plural": 1.0, "pron_subj": 0.0}, lambda t: all(r[3] == "Number=Plur" for r in t.rows if r[2] == "NOUN")),
])
def test_each_knob_turns_its_construction_off_or_on(knobs, holds):
    trees = _sample(**knobs)
    bad = [" ".join(t.words) for t in trees if not holds(t)]
    assert not bad, bad[:3]


def _nesting(t):
    """{clause role of the main verb's dependent (nsubj, obj, obl): the most MOD
    relations on the path from one of its words up to it}; conjuncts count apart."""
    heads, rels = [row[4] for row in t.rows], _rels(t)
    root, depth = heads.index(-1), {}
    for i in range(len(heads)):
        n, j = 0, i
        while heads[j] != root and j != root:
            n += rels[j] in MOD
            j = heads[j]
        if j != root:
            depth[rels[j]] = max(depth.get(rels[j], 0), n)
    return depth


@pytest.mark.parametrize("subj, obj", [(0, 0), (1, 2), (3, 1)])
def test_depths_bound_the_nesting_of_subject_and_object(subj, obj):
    # every NP that may nest takes a PP, so each NP nests exactly as deep as allowed
    always = dict(rel_clause=0.0, np_pp=1.0, subj_depth=subj, obj_depth=obj, max_len=200)
    for coord in (0.0, 1.0):
        for t in _sample(100, pron_subj=0.0, coord_subj=coord, **always):
            d = _nesting(t)
            assert d["nsubj"] == (max(subj - 1, 0) if coord else subj), t.words
            assert d.get("obj", obj) == obj and d.get("obl", 0) == 0, t.words


# --------------------------------------------------------------------------- the hard preset


def _tree_depth(heads):
    """The most edges from a word up to the root."""
    def up(i):
        return 0 if heads[i] == -1 else 1 + up(heads[i])
    return max(up(i) for i in range(len(heads)))


def _stats(out):
    trees = [s for split in SPLITS for s in syntax.read_conllu(str(out / f"{split}.src.conllu"))]
    return dict(
        n=len(trees),
        length=statistics.mean(len(s.words) for s in trees),
        relcl=statistics.mean("acl:relcl" in s.relations for s in trees),
        depth=max(_tree_depth(s.heads) for s in trees),
        distance=statistics.mean(max(abs(i - h) for i, h in enumerate(s.heads) if h >= 0) for s in trees),
        lengths={len(s.words) for s in trees},
    )


def test_hard_preset_gives_longer_and_deeper_sentences(tmp_path):
    default, hard = tmp_path / "default", tmp_path / "hard"
    syn.generate_corpus(syn.SyntheticConfig(**SMALL), str(default), trees=True)
    syn.generate_corpus(syn.SyntheticConfig(**{**SMALL, **language.HARD}), str(hard), trees=True)
    d, h = _stats(default), _stats(hard)
    assert d["n"] == h["n"] == 380
    assert min(h["lengths"]) >= 10 and max(h["lengths"]) <= 40 and min(d["lengths"]) < 10
    assert h["length"] > 1.4 * d["length"] and d["length"] > 10      # about 20 vs 13 words
    assert h["relcl"] > 1.5 * d["relcl"] and d["relcl"] > 0.2        # about 0.8 vs 0.4
    assert h["depth"] >= d["depth"] + 2                               # deepest tree: 9 vs 6 edges
    assert h["distance"] > 1.4 * d["distance"]                        # longest arc: about 13 vs 8 words


def test_hard_flag_is_the_preset_and_explicit_options_override_it(tmp_path, capsys):
    sizes = [x for k, v in SMALL.items() for x in (f"--{k}", str(v))]
    syn.main(["--out-dir", str(tmp_path / "hard"), "--hard", *sizes])
    syn.generate_corpus(syn.SyntheticConfig(**{**SMALL, **language.HARD}), str(tmp_path / "api"))
    assert _digests(tmp_path / "hard") == _digests(tmp_path / "api")
    override = dict(max_len=24, rel_clause=0.1, subj_depth=1)
    syn.generate_corpus(syn.SyntheticConfig(**{**SMALL, **language.HARD, **override}), str(tmp_path / "api2"))
    for order in ("before", "after"):  # an explicit option wins wherever it stands
        opts = ["--max-len", "24", "--rel-clause", "0.1", "--subj-depth", "1"]
        args = [*opts, "--hard"] if order == "before" else ["--hard", *opts]
        syn.main(["--out-dir", str(tmp_path / order), *sizes, *args])
        assert _digests(tmp_path / order) == _digests(tmp_path / "api2"), order
    assert _digests(tmp_path / "api2") != _digests(tmp_path / "api")
    assert max(len(s.split()) for s in read(tmp_path / "api2", "train", "src")) <= 24
    capsys.readouterr()


# --------------------------------------------------------------------------- bad values




def test_bad_knobs_raise_a_one_line_value_error_from_the_api():
    with pytest.raises(language.ConfigError, match=r"^--coord-subj must be a probability in \[0, 1\], not 2$") as e:
        syn.SyntheticConfig(coord_subj=2)
    assert isinstance(e.value, OneLineError) and isinstance(e.value, ValueError)
    syn.SyntheticConfig(rel_clause=0.6, np_pp=0.4, neg=0.0, question=1.0, subj_depth=0)  # the bounds themselves


# --------------------------------------------------------------------------- prepare-synthetic.sh


@pytest.mark.slow  # runs the script
def test_prepare_script_takes_hard_as_a_flag_and_regenerates_on_a_change(tmp_path):
    out = tmp_path / "data"

    def prepare(*opts):
        r = subprocess.run(["bash", "scripts/prepare-synthetic.sh", "--out", str(out), "--train", "200", "--valid",
                            "20", "--test", "20", "--merges", "100", *opts],
                           cwd=ROOT, env=ENV, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        return "generating the synthetic corpus" in r.stderr

    assert prepare("--hard")
    config = (out / "raw" / ".config").read_text()
    assert config.endswith(" --hard\n") and "--max-len" not in config  # the preset's 10 to 40 words, not the script's 20
    lengths = {len(s.split()) for s in read(out / "raw", "train", "src")}
    assert min(lengths) >= 10 and max(lengths) > 20
    assert not prepare("--hard")  # unchanged options: nothing regenerated
    assert prepare()  # the flag dropped: regenerated with the script's --max-len 20
    assert "--max-len 20" in (out / "raw" / ".config").read_text()
    assert max(len(s.split()) for s in read(out / "raw", "train", "src")) <= 20
    assert prepare("--hard", "--max-len", "30")
    assert max(len(s.split()) for s in read(out / "raw", "train", "src")) <= 30
