"""The hard stand-in GLUE tasks (``glue_fake --hard``, :mod:`fairseq_local_data.glue_hard`):
every label re-derived from the gold trees by its rule, the rates of the
distractors, balance, determinism, the official layout read by the
preparation's own readers, and the easy stand-in left as it was."""

import collections
import hashlib
import os
import random

import pytest

from fairseq_local_data import glue, glue_fake, glue_hard
from fairseq_local_data.language import Lexicon, SyntheticConfig

TASKS = ("CoLA", "SST-2", "MNLI", "QNLI", "QQP")
LEX = Lexicon(SyntheticConfig(seed=1))
NEG, Q = LEX.func["neg"][0], LEX.func["q"][0]
POSITIVE = {a: r % 2 == 0 for r, (a, _) in enumerate(LEX.adjs)}  # polarity: rank parity
# sha256 of make_fake_glue(rows=30, eval_rows=10, seed=1) (all tasks, hard=False),
# computed with the stand-in as it was before --hard existed.
EASY_SHA256 = "891af118a2b8cec140c504b1527dfe7ea7a63e78a51e3c019bfeb642069b6e79"
# The official headers and column counts of the hard tasks' files (None: no header).
MNLI = ["index", "promptID", "pairID", "genre", "sentence1_binary_parse", "sentence2_binary_parse",
        "sentence1_parse", "sentence2_parse", "sentence1", "sentence2"]
OFFICIAL = {
    "CoLA": {"train": (None, 4), "dev": (None, 4), "test": (["index", "sentence"], 2)},
    "SST-2": {"train": (["sentence", "label"], 2), "dev": (["sentence", "label"], 2),
              "test": (["index", "sentence"], 2)},
    "QQP": {"train": (["id", "qid1", "qid2", "question1", "question2", "is_duplicate"], 6),
            "dev": (["id", "qid1", "qid2", "question1", "question2", "is_duplicate"], 6),
            "test": (["id", "question1", "question2"], 3)},
    "MNLI": {"train": (MNLI + ["label1", "gold_label"], 12),
             "dev_matched": (MNLI + ["label1", "label2", "label3", "label4", "label5", "gold_label"], 16),
             "dev_mismatched": (MNLI + ["label1", "label2", "label3", "label4", "label5", "gold_label"], 16),
             "test_matched": (MNLI, 10), "test_mismatched": (MNLI, 10)},
    "QNLI": {"train": (["index", "question", "sentence", "label"], 4),
             "dev": (["index", "question", "sentence", "label"], 4), "test": (["index", "question", "sentence"], 3)},
}


# ---------------------------------------------------------------- reference reading of a tree

def deps(t, i, *rels):
    return [k for k, r in enumerate(t.rows) if r[4] == i and (not rels or r[5] in rels)]


def upos(t, tag):
    return [k for k, r in enumerate(t.rows) if r[2] == tag]


def sing(t, i):
    return t.rows[i][3] == "Number=Sing"


def marker(t):
    """NEG, Q or None: the sentence-initial particle."""
    return {"advmod": NEG, "discourse": Q}[t.rows[0][5]] if t.rows[0][2] == "PART" else None


def verb_subject(t, v):
    """(person 3, singular) of the subject verb ``v`` agrees with."""
    if t.rows[v][5] == "acl:relcl":
        return True, sing(t, t.rows[v][4])
    s = deps(t, v, "nsubj")[0]
    feats = t.rows[s][3]
    if t.rows[s][2] == "PRON":
        return "Person=3" in feats, "Number=Sing" in feats
    return True, sing(t, s) and not deps(t, s, "conj")


def agrees(t, v):
    """The language's rule: a present verb ends in "s" iff its subject is 3rd singular."""
    if deps(t, v, "aux"):
        return t.rows[v][0] == t.rows[v][1]
    third, one = verb_subject(t, v)
    return t.rows[v][0] == t.rows[v][1] + ("s" if third and one else "")


def well_formed(t, max_len=30, skip=()):
    assert len(t.rows) <= max_len
    assert [r[4] for r in t.rows].count(-1) == 1 and t.rows[t.root][2] == "VERB"
    assert t.rows[-1][0] == "." and all(r[0] for r in t.rows)
    for v in upos(t, "VERB"):
        assert v in skip or agrees(t, v), t.words
    for n in upos(t, "NOUN"):
        assert t.rows[n][0] == t.rows[n][1] + ("" if sing(t, n) else "s")


def svo(t):
    v = t.root
    (s,) = deps(t, v, "nsubj")
    o = deps(t, v, "obj")
    return s, v, (o[0] if o else None)


def lem(t, i):
    return t.rows[i][1]


def rows(name, n=400, seed=1, key="test"):
    return glue_hard.examples(name, n, random.Random(f"{key}:{name}"), seed)


# ---------------------------------------------------------------- the rules

def test_cola_labels_follow_agreement_with_the_subject_across_attractors():
    ex, near_other = rows("CoLA"), 0
    for e in ex:
        t = e.s1
        assert e.s2 is None and marker(t) is None
        s, v, _ = svo(t)
        well_formed(t, skip=(v,))
        assert t.rows[s][2] == "NOUN" and not deps(t, v, "aux") and deps(t, s, "acl:relcl", "nmod")
        assert all(deps(t, k, "aux") for k in upos(t, "VERB") if k != v)  # no other present verb
        assert t.rows[v][0] in (lem(t, v), lem(t, v) + "s")
        assert (e.label == "1") == (t.rows[v][0].endswith("s") == sing(t, s)), t.words
        assert (e.label == "1") == agrees(t, v)
        near = max(k for k in upos(t, "NOUN") if k < v)
        near_other += sing(t, near) != sing(t, s)
    assert 0.4 < near_other / len(ex) < 0.6  # agreeing with the nearest noun is chance


def test_sst2_labels_are_the_subjects_adjective_xor_neg_with_distractors():
    ex = rows("SST-2")
    dis = poss = 0
    neg_by_label = collections.Counter()
    for e in ex:
        t = e.s1
        well_formed(t)
        assert marker(t) in (None, NEG) and Q not in t.words
        s, _, _ = svo(t)
        (a,) = deps(t, s, "amod")
        neg = marker(t) == NEG
        assert e.label == str(int(POSITIVE[t.rows[a][0]] != neg)), t.words
        neg_by_label[e.label] += neg
        dis += any(POSITIVE[r[0]] != POSITIVE[t.rows[a][0]] for k, r in enumerate(t.rows) if r[2] == "ADJ" and k != a)
        owner = deps(t, s, "nmod:poss")
        poss += bool(owner) and any(POSITIVE[t.rows[k][0]] != POSITIVE[t.rows[a][0]] for k in deps(t, owner[0], "amod"))
    assert dis / len(ex) >= 0.8 and 0.2 < poss / len(ex) < 0.4
    assert all(0.4 < neg_by_label[y] / (len(ex) / 2) < 0.6 for y in "01")


def transitive_premise(t):
    """MNLI's premise: noun subject and object of different lemmas, another
    noun, no other verb of the main verb's lemma; returns (s, v, o)."""
    well_formed(t)
    s, v, o = svo(t)
    assert t.rows[s][2] == "NOUN" and not deps(t, s, "conj") and o is not None and t.rows[o][2] == "NOUN"
    assert lem(t, s) != lem(t, o) and any(lem(t, k) not in (lem(t, s), lem(t, o)) for k in upos(t, "NOUN"))
    assert all(k == v or lem(t, k) != lem(t, v) for k in upos(t, "VERB"))
    return s, v, o


def test_mnli_labels_follow_the_premise_subjects_number_and_neg():
    ex = rows("MNLI", 600)
    neg_by_label, present = collections.Counter(), 0
    for e in ex:
        p, h = e.s1, e.s2
        ps, pv, po = transitive_premise(p)
        well_formed(h)
        hs, hv, ho = svo(h)
        assert marker(p) is None and marker(h) in (None, NEG)
        assert t_words(h, drop_marker=True) == ["DET", "NOUN"] + ["AUX"] * len(deps(h, hv, "aux")) \
            + ["VERB", "DET", "NOUN", "PUNCT"]
        assert lem(h, hv) == lem(p, pv) and [h.rows[k][0] for k in deps(h, hv, "aux")] == \
            [p.rows[k][0] for k in deps(p, pv, "aux")]
        assert lem(h, hs) == lem(p, ps) and h.rows[ho][0] == p.rows[po][0]  # the object as in the premise
        neg, same = marker(h) == NEG, sing(h, hs) == sing(p, ps)
        assert e.label == ("neutral" if not same else "contradiction" if neg else "entailment"), (p.words, h.words)
        neg_by_label[e.label] += neg
        present += not deps(p, pv, "aux")
    third = len(ex) / 3
    assert neg_by_label["entailment"] == 0 and neg_by_label["contradiction"] == third
    assert 0.35 < neg_by_label["neutral"] / third < 0.65  # NEG alone: 2/3 of the rows
    assert 0.58 < present / len(ex) < 0.75  # a present main verb (agreement) in 2/3 of the rows


def t_words(t, drop_marker=False):
    return [r[2] for r in t.rows[1 if drop_marker and marker(t) else 0:]]


def test_qnli_labels_say_whether_the_noun_has_the_subjects_or_objects_number():
    ex, roles = rows("QNLI", 600), collections.Counter()
    for e in ex:
        q, t = e.s1, e.s2
        well_formed(q)
        s, v, o = transitive_premise(t)
        assert marker(q) == Q and t_words(q) == ["PART", "DET", "NOUN", "VERB", "PUNCT"] and marker(t) is None
        assert lem(q, 3) == lem(t, v) and lem(q, 2) in (lem(t, s), lem(t, o))
        k = s if lem(q, 2) == lem(t, s) else o
        roles["subject" if k == s else "object"] += 1
        assert e.label == ("entailment" if sing(q, 2) == sing(t, k) else "not_entailment"), (q.words, t.words)
    assert 0.4 < roles["subject"] / len(ex) < 0.6


def test_qqp_duplicates_have_a_subject_of_the_same_number():
    ex, fresh = rows("QQP", 600), 0
    for e in ex:
        a, b = e.s1, e.s2
        assert marker(a) == Q and marker(b) == Q
        bare = [glue_hard.rebuild(t, range(1, len(t.rows))) for t in (a, b)]
        s, v, o = transitive_premise(bare[0])
        well_formed(bare[1])
        bs, bv, bo = svo(bare[1])
        assert (lem(bare[1], bs), lem(bare[1], bv)) == (lem(bare[0], s), lem(bare[0], v))
        assert bare[1].rows[bo][0] == bare[0].rows[o][0]
        assert [bare[1].rows[k][0] for k in deps(bare[1], bv, "aux")] == [bare[0].rows[k][0] for k in deps(bare[0], v, "aux")]
        assert (e.label == "1") == (sing(bare[1], bs) == sing(bare[0], s)), (a.words, b.words)
        words = [r[1] for r in bare[1].rows]
        fresh += not set(words) <= {r[1] for r in bare[0].rows}  # a fresh sentence has words the first lacks
    assert 0.35 < fresh / len(ex) < 0.65
    assert sum(e.s1.words[1:] == e.s2.words[1:] for e in ex) < 0.2 * len(ex)  # modifiers differ


def test_tree_edits_keep_the_grammars_forms():
    """agree() recomputes the grammar's own verb forms; rebuild() keeps the tree."""
    src = glue_hard.Source(1, random.Random(5))
    for _ in range(2000):
        t = src.gram.sentence_tree()[0]
        words = list(t.words)
        copy = glue_hard.rebuild(t, range(len(t.rows)))
        assert glue_hard.agree(copy).words == words and copy.conllu("x") == t.conllu("x")
        if t.rows[0][2] == "PART":  # removing and adding the marker back gives the sentence again
            bare = glue_hard.rebuild(t, range(1, len(t.rows)))
            assert src.marked(bare, "neg" if t.rows[0][5] == "advmod" else "q").conllu("x") == t.conllu("x")


def test_labels_are_balanced_and_generation_is_seeded():
    for name in TASKS:
        ex = rows(name, 60)
        count = collections.Counter(e.label for e in ex)
        assert set(count.values()) == {60 // len(glue_hard.LABELS[name])}, name
        assert [e.record() for e in ex] == [e.record() for e in rows(name, 60)]
        assert [e.record() for e in ex] != [e.record() for e in rows(name, 60, seed=2)]
    assert max(len(e.s1.rows) for e in glue_hard.examples("SST-2", 50, random.Random(0), max_len=16)) <= 16
    with pytest.raises(glue.GlueError, match="no rule for RTE"):
        glue_hard.examples("RTE", 4, random.Random(0))
    with pytest.raises(glue.GlueError, match="at least 12 words"):
        glue_hard.examples("CoLA", 4, random.Random(0), max_len=8)


# ---------------------------------------------------------------- the folder

def tree_hash(out):
    m = hashlib.sha256()
    for root, dirs, files in sorted(os.walk(out)):
        dirs.sort()
        for f in sorted(files):
            p = os.path.join(root, f)
            m.update(os.path.relpath(p, out).encode() + b"\0")
            with open(p, "rb") as fh:
                m.update(fh.read())
    return m.hexdigest()


@pytest.fixture(scope="module")
def hard(tmp_path_factory):
    out = tmp_path_factory.mktemp("hard")
    glue_fake.make_fake_glue(str(out), TASKS, rows=60, eval_rows=24, hard=True)
    return out


def test_hard_folder_has_the_official_layout_and_the_recipe_reads_it(hard, tmp_path):
    glue.check(str(hard), TASKS)
    for name, files in OFFICIAL.items():
        for split, (header, ncols) in files.items():
            with open(hard / name / f"{split}.tsv", encoding="utf-8") as f:
                lines = [r.split("\t") for r in f.read().split("\n")[:-1]]
            if header is not None:
                assert lines.pop(0) == header, (name, split)
            assert len(lines) == (60 if split == "train" else 24) and all(len(r) == ncols for r in lines)
        t = glue.TASKS[name]
        got = glue.extract(str(hard), t)
        for split in ("train",) + t.dev:  # the rows are those of the generator, trees and all
            key = random.Random(f"glue-hard:{name}:{split}:1")
            recs = [e.record() for e in glue_hard.examples(name, len(got[glue.fairseq_split(t, split)]["label"]), key)]
            data = got[glue.fairseq_split(t, split)]
            assert data["input0"] == [r[0] for r in recs] and data["label"] == [r[2] for r in recs], (name, split)
            assert data.get("input1", [""] * len(recs)) == [r[1] for r in recs]
            assert len(set(data["label"])) == len(glue_hard.LABELS[name])
            assert max(collections.Counter(data["label"]).values()) == -(-len(recs) // len(glue_hard.LABELS[name]))
        written = glue.write_extracted(str(hard), name, str(tmp_path / name))
        assert os.path.join(str(tmp_path / name), "train.label") in written
    assert sorted(glue.extract(str(hard), glue.TASKS["MNLI"])) == ["test", "test1", "test2", "train", "valid", "valid1"]


def test_hard_folder_is_deterministic(hard, tmp_path):
    glue_fake.make_fake_glue(str(tmp_path / "same"), TASKS, rows=60, eval_rows=24, hard=True)
    assert tree_hash(tmp_path / "same") == tree_hash(hard)
    for seed in (1, 2):
        glue_fake.make_fake_glue(str(tmp_path / str(seed)), TASKS, rows=12, eval_rows=4, seed=seed, hard=True)
    for name in TASKS:
        assert (tmp_path / "1" / name / "train.tsv").read_bytes() != (tmp_path / "2" / name / "train.tsv").read_bytes()


def test_easy_folder_is_unchanged(tmp_path):
    glue_fake.make_fake_glue(str(tmp_path), rows=30, eval_rows=10, seed=1)
    assert tree_hash(tmp_path) == EASY_SHA256


def test_hard_with_another_task_is_a_one_line_error(tmp_path, capsys):
    with pytest.raises(glue.GlueError, match=r"^--hard has no rule for RTE \(it has CoLA, SST-2, MNLI, QNLI, QQP\)$"):
        glue_fake.make_fake_glue(str(tmp_path / "x"), ["SST-2", "RTE"], rows=4, hard=True)
    assert not (tmp_path / "x").exists()  # nothing written
    assert glue.main(["fake", "--hard", "--tasks", "RTE", "--out", str(tmp_path / "y")]) == 1
    assert capsys.readouterr().err == "error: --hard has no rule for RTE (it has CoLA, SST-2, MNLI, QNLI, QQP)\n"


def test_fake_command_writes_the_hard_tasks(tmp_path, capsys):
    assert glue.main(["fake", "--hard", "--tasks", "SST-2", "QNLI", "--out", str(tmp_path / "cli"),
                      "--rows", "12", "--eval-rows", "6"]) == 0
    assert capsys.readouterr().out == "SST-2 train=12 dev=6 test=6\nQNLI train=12 dev=6 test=6\n"
    glue_fake.make_fake_glue(str(tmp_path / "api"), ["SST-2", "QNLI"], rows=12, eval_rows=6, hard=True)
    assert tree_hash(tmp_path / "cli") == tree_hash(tmp_path / "api")
    glue_fake.make_fake_glue(str(tmp_path / "easy"), ["SST-2", "QNLI"], rows=12, eval_rows=6)
    easy, api = (tmp_path / kind / "SST-2" / "train.tsv" for kind in ("easy", "api"))
    assert easy.read_bytes() != api.read_bytes()


RULE_TESTS = [test_cola_labels_follow_agreement_with_the_subject_across_attractors,
              test_sst2_labels_are_the_subjects_adjective_xor_neg_with_distractors,
              test_mnli_labels_follow_the_premise_subjects_number_and_neg,
              test_qnli_labels_say_whether_the_noun_has_the_subjects_or_objects_number,
              test_qqp_duplicates_have_a_subject_of_the_same_number]


@pytest.mark.parametrize("rule_test", RULE_TESTS, ids=lambda f: f.__name__.split("_")[1])
def test_rules_hold_with_a_small_lexicon_and_short_sentences(rule_test, monkeypatch):
    def small(name, n=400, seed=1, key="test"):
        out = glue_hard.examples(name, n, random.Random(f"{key}:{name}"), seed, 20, (40, 16, 20))
        lex = Lexicon(SyntheticConfig(seed=seed, nouns=40, adjectives=16, verbs=20))
        words = {w for w, _ in lex.nouns + lex.adjs + lex.verbs}
        for e in out:
            for t in (e.s1, e.s2) if e.s2 else (e.s1,):
                assert len(t.rows) <= 20
                assert all(r[1] in words for r in t.rows if r[2] in ("NOUN", "ADJ", "VERB"))
        return out

    lex = Lexicon(SyntheticConfig(seed=1, nouns=40, adjectives=16, verbs=20))
    monkeypatch.setitem(globals(), "rows", small)
    monkeypatch.setitem(globals(), "POSITIVE", {a: r % 2 == 0 for r, (a, _) in enumerate(lex.adjs)})
    rule_test()


def test_lexicon_and_max_len_options(tmp_path, capsys):
    assert glue.main(["fake", "--hard", "--tasks", "SST-2", "--out", str(tmp_path / "a"), "--rows", "8",
                      "--lexicon", "40,16,20", "--max-len", "20"]) == 0
    glue_fake.make_fake_glue(str(tmp_path / "b"), ["SST-2"], rows=8, hard=True, max_len=20, lexicon=(40, 16, 20))
    assert tree_hash(tmp_path / "a") == tree_hash(tmp_path / "b")
    capsys.readouterr()
    for argv, message in ((["--lexicon", "40,16"], "--lexicon needs three sizes"),
                          (["--lexicon", "a,b,c"], "--lexicon needs three numbers N,A,V, not 'a,b,c'"),
                          (["--max-len", "8"], "--hard needs sentences of up to at least 12 words, not 8")):
        assert glue.main(["fake", "--hard", "--tasks", "SST-2", "--out", str(tmp_path / "c"), *argv]) == 1
        err = capsys.readouterr().err
        assert err.startswith(f"error: {message}") and err.count("\n") == 1
    assert glue.main(["fake", "--tasks", "SST-2", "--out", str(tmp_path / "d"), "--lexicon", "40,16,20"]) == 1
    assert capsys.readouterr().err == "error: --lexicon and --max-len go with --hard\n"
