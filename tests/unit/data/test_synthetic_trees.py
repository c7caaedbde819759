"""Unit tests of the gold source trees of fairseq_local_data/synthetic.py
(--trees): the text is unchanged, every tree is a tree over the source words,
and each documented relation links the words the lexicon says it links, with
the default grammar and with the hard preset (language.HARD)."""

import collections
import hashlib

import pytest

from fairseq_local_data import language, syntax
from helpers.synthetic import SMALL, SPLITS, generate, read, syn

# sha256 of the files written for SMALL (seed 1) before the trees existed.
TEXT_SHA256 = {
    "train.src": "a3dd2257d0f9aac7f1f6717231208219d41cf1414c48933b67991596221d6ffd",
    "train.tgt": "66faecc06f669af587a2c5ba41a512174ea43c2c98a43f35f18caec553e7399a",
    "valid.src": "98808be35b8ed13fec7ab29f7de4d8b6dd52d9e927328e742baaa0600c61c2f2",
    "valid.tgt": "4f85027f3aab0feadf22cd55a7ac3bb7a95570981d4bd888f9e6bda51f950cf6",
    "test.src": "d7f87c6082bf6192f3a1df642b8397a313177ab766561b89ab6be03268acef68",
    "test.tgt": "4e5327f8e11ba7e8ad21404f7dd937b6d103584bf4fe322cb830429bf5c2ff22",
}
RELATIONS = {"root", "nsubj", "obj", "aux", "det", "amod", "nmod:poss", "case", "nmod", "obl", "acl:relcl", "conj",
             "cc", "advmod", "discourse", "punct"}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    out = tmp_path_factory.mktemp("trees") / "out"
    syn.generate_corpus(syn.SyntheticConfig(**SMALL), str(out), trees=True)
    return out


def _trees(corpus):
    """[(source tokens, Sentence)] over all splits."""
    return [(line.split(), s) for split in SPLITS
            for line, s in zip(read(corpus, split, "src"), syntax.read_conllu(str(corpus / f"{split}.src.conllu")))]


@pytest.fixture(scope="module")
def trees(corpus):
    return _trees(corpus)


@pytest.fixture(scope="module", params=["default", "hard"])
def any_trees(request, tmp_path_factory):
    """The trees of SMALL with the default grammar, then with the hard preset
    (the same lexicon: it depends on the seed and sizes only)."""
    if request.param == "default":
        return request.getfixturevalue("trees")
    out = tmp_path_factory.mktemp("hard") / "out"
    syn.generate_corpus(syn.SyntheticConfig(**{**SMALL, **language.HARD}), str(out), trees=True)
    return _trees(out)


def test_text_files_are_unchanged_by_the_trees(tmp_path, corpus):
    plain, _ = generate(tmp_path, "plain")
    assert sorted(p.name for p in plain.iterdir()) == sorted(TEXT_SHA256)
    assert sorted(p.name for p in corpus.iterdir()) == sorted([*TEXT_SHA256, *(f"{s}.src.conllu" for s in SPLITS)])
    for name, digest in TEXT_SHA256.items():
        assert hashlib.sha256((plain / name).read_bytes()).hexdigest() == digest, name
        assert (corpus / name).read_bytes() == (plain / name).read_bytes(), name


def test_one_tree_per_source_line_with_the_same_words(corpus, trees):
    for split in SPLITS:
        assert len(syntax.read_conllu(str(corpus / f"{split}.src.conllu"))) == len(read(corpus, split, "src"))
    assert len(trees) == 380
    for tokens, s in trees:
        assert s.words == tokens


def _lexicon():
    lex = language.Lexicon(syn.SyntheticConfig(**SMALL))
    nouns = {n for n, _ in lex.nouns}
    return lex, nouns | {n + "s" for n in nouns}, {v for v, _ in lex.verbs} | {v + "s" for v, _ in lex.verbs}


def test_every_tree_is_single_rooted_at_the_main_verb_without_cycles(any_trees):
    _, _, verbs = _lexicon()
    for tokens, s in any_trees:
        roots = [i for i, h in enumerate(s.heads) if h == -1]
        assert len(roots) == 1 and s.relations[roots[0]] == "root" and s.words[roots[0]] in verbs, tokens
        assert s.relations.count("root") == 1
        for i in range(len(s.words)):  # every word reaches the root
            seen, j = set(), i
            while j != -1:
                assert j not in seen, tokens
                seen.add(j)
                j = s.heads[j]


def test_each_relation_links_the_words_the_lexicon_says(any_trees):
    trees = any_trees
    lex, nouns, verbs = _lexicon()
    dets, adjs = {d for d, _ in lex.dets}, {a for a, _ in lex.adjs}
    preps, advpreps = {p for p, _ in lex.preps}, {p for p, _ in lex.advpreps}
    f = {k: s for k, (s, _) in lex.func.items()}
    prons = {s for s, _ in lex.pron.values()}
    counts = collections.Counter()
    for tokens, s in trees:
        w, h, rel = s.words, s.heads, s.relations
        root = h.index(-1)
        for i, r in enumerate(rel):
            counts[r] += 1
            head = w[h[i]] if h[i] >= 0 else None
            if r == "det":
                assert w[i] in dets and head in nouns and h[i] > i
            elif r == "amod":
                assert w[i] in adjs and head in nouns and h[i] > i
            elif r == "case" and w[i] == f["poss"]:  # owner POSS possessed
                assert head in nouns and h[i] == i - 1 and rel[h[i]] == "nmod:poss"
            elif r == "case":  # the preposition on the noun of its own phrase
                assert w[i] in preps | advpreps and head in nouns and h[i] > i
                assert rel[h[i]] == ("obl" if w[i] in advpreps else "nmod")
            elif r in ("nmod", "nmod:poss"):
                assert w[i] in nouns and head in nouns
                assert (h[i] < i) == (r == "nmod")
            elif r == "obl":
                assert w[i] in nouns and h[i] == root
                assert [w[j] in advpreps for j, x in enumerate(h) if x == i and rel[j] == "case" and j < i] == [True]
            elif r == "aux":
                assert w[i] in (f["past"], f["fut"]) and h[i] == i + 1 and head in verbs
            elif r == "acl:relcl":
                assert w[i] in verbs and head in nouns and h[i] < i
                rel_marker = [j for j, x in enumerate(h) if x == i and rel[j] == "nsubj"]
                assert [w[j] for j in rel_marker] == [f["rel"]]
            elif r == "nsubj":
                assert head in verbs and h[i] > i
                assert w[i] in nouns | prons or (w[i] == f["rel"] and rel[h[i]] == "acl:relcl")
            elif r == "obj":
                assert w[i] in nouns and head in verbs and h[i] < i
            elif r == "cc":
                assert w[i] == f["and"] and rel[h[i]] == "conj" and h[i] > i
            elif r == "conj":
                assert w[i] in nouns and rel[h[i]] == "nsubj" and h[h[i]] == root and h[i] < i
            elif r == "advmod":
                assert (i, w[i], h[i]) == (0, f["neg"], root)
            elif r == "discourse":
                assert (i, w[i], h[i]) == (0, f["q"], root)
            elif r == "punct":
                assert (i, w[i], h[i]) == (len(w) - 1, ".", root)
            else:
                assert r == "root" and w[i] in verbs
    assert set(counts) == RELATIONS and counts["root"] == counts["punct"] == len(trees)
    assert counts["cc"] == counts["conj"] > 0 and min(counts.values()) >= 10


# Hand-checked trees of the first valid sentences (SMALL, seed 1).
HAND_CHECKED = [
    ("ri zol tavinoka ral rektilvar zol pufezanze tavinoka .",
     [4, 2, 4, 4, -1, 7, 7, 4, 4], "advmod det nsubj aux root det amod obj punct"),
    ("go funtelzu le zoda zol lorove lo ral melbom .",
     [1, 3, 3, -1, 5, 3, 8, 8, 5, 3], "det nsubj aux root det obj nsubj aux acl:relcl punct"),
    ("go nafale lo le zunofoto ku belvime kapimos pam kalladeven tavinoka lo ral lapufir le zukulado lem vafugate "
     "tavinokas vu zol kokpu zidu ku koredinu vodofutons .",
     [1, 15, 4, 4, 1, 7, 7, 10, 7, 10, 4, 13, 13, 10, 15, -1, 18, 18, 15, 21, 21, 18, 25, 25, 25, 15, 15],
     "det nsubj nsubj aux acl:relcl det amod nmod:poss case amod obj nsubj aux acl:relcl aux root det amod obj "
     "case det nmod case det amod obl punct"),
    ("zol kondonu lel go pufezanze belvime zalvu da lem veta pufezanze tavinoka le zukulado lem vafugate zukbuke "
     "tito zol bornanun tavinoka .",
     [1, 13, 6, 6, 6, 6, 1, 11, 11, 11, 11, 1, 13, -1, 16, 16, 13, 20, 20, 20, 13, 13],
     "det nsubj case det amod amod nmod cc det amod amod conj aux root det amod obj case det amod obl punct"),
    ("ko pendamelvom zidu zol zemtim .", [1, -1, 4, 4, 1, 1], "nsubj root case det obl punct"),
]


def test_hand_checked_trees(corpus):
    got = syntax.read_conllu(str(corpus / "valid.src.conllu"))
    lines = read(corpus, "valid", "src")
    for text, heads, rels in HAND_CHECKED:
        s = got[lines.index(text)]
        assert (s.heads, s.relations) == (heads, rels.split()), text


def test_conllu_columns_of_one_sentence(corpus):
    blocks = (corpus / "valid.src.conllu").read_text().split("\n\n")
    assert blocks[7] == "\n".join([
        "# sent_id = valid-8",
        "# text = ri zol mukfilekbik zemtims kovara go vubemirus du zol nepes .",
        "1\tri\tri\tPART\t_\tPolarity=Neg\t5\tadvmod\t_\t_",
        "2\tzol\tzol\tDET\t_\t_\t4\tdet\t_\t_",
        "3\tmukfilekbik\tmukfilekbik\tADJ\t_\t_\t4\tamod\t_\t_",
        "4\tzemtims\tzemtim\tNOUN\t_\tNumber=Plur\t5\tnsubj\t_\t_",
        "5\tkovara\tkovara\tVERB\t_\t_\t0\troot\t_\t_",
        "6\tgo\tgo\tDET\t_\t_\t7\tdet\t_\t_",
        "7\tvubemirus\tvubemiru\tNOUN\t_\tNumber=Plur\t5\tobj\t_\t_",
        "8\tdu\tdu\tADP\t_\t_\t10\tcase\t_\t_",
        "9\tzol\tzol\tDET\t_\t_\t10\tdet\t_\t_",
        "10\tnepes\tnepe\tNOUN\t_\tNumber=Plur\t7\tnmod\t_\t_",
        "11\t.\t.\tPUNCT\t_\t_\t5\tpunct\t_\t_",
    ])
    assert (corpus / "valid.src.conllu").read_text().endswith("\t_\t_\n\n")


def test_command_line_trees_option(tmp_path, capsys, corpus):
    out = tmp_path / "cli"
    syn.main(["--out-dir", str(out), "--trees", "--train", "300", "--valid", "40", "--test", "0", "--nouns", "150",
              "--adjectives", "40", "--verbs", "40", "--preps", "8", "--dets", "4"])
    assert capsys.readouterr().out == f"train=300 valid=40 test=0 pairs written to {out}\n"
    assert (out / "valid.src.conllu").read_bytes() == (corpus / "valid.src.conllu").read_bytes()
    assert (out / "test.src.conllu").read_bytes() == b""
    assert len(list(out.iterdir())) == 9
