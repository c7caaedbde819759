"""Unit tests of the documented grammar of fairseq_local_data/language.py,
checked with an independent parser of the source language that builds the
documented target."""

import collections

import pytest

from fairseq_local_data import language
from helpers.synthetic import SMALL, SPLITS, generate, read, syn

# The documented target morphology (module docstring).
VOWELS = "aeiou"
AGR = {("m", False): "o", ("f", False): "e", ("m", True): "ai", ("f", True): "ei"}
PERSON = {(1, False): "am", (2, False): "as", (3, False): "a", (1, True): "amu", (2, True): "asu", (3, True): "an"}
TENSE = {"pres": "", "past": "ir", "fut": "ol"}


def pairs(out):
    return [(s.split(), t.split())
            for split in SPLITS for s, t in zip(read(out, split, "src"), read(out, split, "tgt"))]


def agr(noun_t: str, plural: bool) -> str:
    """-o/-e/-ai/-ei: masculine if the target lemma ends in a consonant."""
    return AGR["f" if noun_t[-1] in VOWELS else "m", plural]


class Reference:
    """Parser of the source grammar of the module docstring that returns every
    translation allowed by its target grammar: SVO -> SOV with pro-drop,
    mirrored post-nominal adjectives, "owner POSS possessed" -> "possessed
    owner GEN", postpositions, -o/-e/-ai/-ei agreement, verb person/number and
    tense suffixes and the NEG/Q marker as a suffix of the final verb. NPs nest
    at most two levels; the sentence adjunct takes a plain NP0 unless
    ``adjunct`` is "np"."""

    def __init__(self, lex, adjunct: str = "np0"):
        self.det, self.adj, self.noun = dict(lex.dets), dict(lex.adjs), dict(lex.nouns)
        self.prep, self.advp, self.verb = dict(lex.preps), dict(lex.advpreps), dict(lex.verbs)
        self.fs = {k: s for k, (s, _) in lex.func.items()}
        self.ft = {k: t for k, (_, t) in lex.func.items()}
        self.pron = {s: key for key, (s, _) in lex.pron.items()}
        self.objm, self.gen, self.adjunct = lex.objm, lex.gen, adjunct

    def _adjs_noun(self, s, i):
        """ADJ* NOUN[-s] -> (next, target noun, target adjectives, agreement, plural) or None."""
        adjs = []
        while i < len(s) and s[i] in self.adj:
            adjs.append(self.adj[s[i]])
            i += 1
        if i >= len(s):
            return None
        if s[i] in self.noun:
            noun, plural = self.noun[s[i]], False
        elif s[i].endswith("s") and s[i][:-1] in self.noun:
            noun, plural = self.noun[s[i][:-1]], True
        else:
            return None
        a = agr(noun, plural)
        return i + 1, noun + ("ak" if plural else ""), [x + a for x in reversed(adjs)], a, plural

    def np0(self, s, i):
        """DET ADJ* NOUN -> [(next, target, plural)]."""
        if i >= len(s) or s[i] not in self.det or not (r := self._adjs_noun(s, i + 1)):
            return []
        j, noun, adjs, a, plural = r
        return [(j, [self.det[s[i]] + a, noun] + adjs, plural)]

    def np(self, s, i, depth):
        heads = self.np0(s, i)
        for j, owner, _ in self.np0(s, i):  # NP0 POSS ADJ* NOUN
            if j < len(s) and s[j] == self.fs["poss"] and (r := self._adjs_noun(s, j + 1)):
                k, noun, adjs, _, plural = r
                heads.append((k, [noun] + adjs + owner + [self.gen], plural))
        out = []
        for j, t, plural in heads:
            out.append((j, t, plural))
            if depth == 0 or j >= len(s):
                continue
            if s[j] == self.fs["rel"]:  # REL [AUX] VERB [NP] -> REL [NP OBJM] VERB (3rd person)
                for k, verb in self.verb_group(s, j + 1, 3, plural):
                    out.append((k, t + [self.ft["rel"], verb], plural))
                    out += [(m, t + [self.ft["rel"]] + o + [self.objm, verb], plural)
                            for m, o, _ in self.np(s, k, depth - 1)]
            elif s[j] in self.prep:  # PREP NP -> NP POSTP
                out += [(k, t + o + [self.prep[s[j]]], plural) for k, o, _ in self.np(s, j + 1, depth - 1)]
        return out

    def verb_group(self, s, i, person, plural):
        """[AUX] VERB -> [(next, VERB-tense-agr)]; a present verb takes -s
        exactly with a 3rd-person singular subject."""
        tense = "pres"
        if i < len(s) and s[i] in (self.fs["past"], self.fs["fut"]):
            tense = "past" if s[i] == self.fs["past"] else "fut"
            i += 1
        if i >= len(s):
            return []
        third_sg = tense == "pres" and person == 3 and not plural
        lemma = s[i][:-1] if third_sg and s[i].endswith("s") else s[i]
        if lemma not in self.verb or (third_sg and lemma == s[i]):
            return []
        return [(i + 1, self.verb[lemma] + TENSE[tense] + PERSON[person, plural])]

    def translations(self, s):
        i, mark = 0, ""
        if s and s[0] in (self.fs["neg"], self.fs["q"]):
            i, mark = 1, "ne" if s[0] == self.fs["neg"] else "ku"
        subjects = [(i + 1, [], *self.pron[s[i]])] if i < len(s) and s[i] in self.pron else []  # pro-drop
        subjects += [(j, t, 3, plural) for j, t, plural in self.np(s, i, 2)]
        for j, a, _ in self.np(s, i, 2):  # NP and NP -> 3rd person plural
            if j < len(s) and s[j] == self.fs["and"]:
                subjects += [(k, a + [self.ft["and"]] + b, 3, True) for k, b, _ in self.np(s, j + 1, 2)]
        out = []
        for j, subj, person, plural in subjects:
            for k, verb in self.verb_group(s, j, person, plural):
                for m, obj in [(k, [])] + [(m, o + [self.objm]) for m, o, _ in self.np(s, k, 2)]:
                    adjuncts = [(m, [])]
                    if m < len(s) and s[m] in self.advp:
                        nps = self.np0(s, m + 1) if self.adjunct == "np0" else self.np(s, m + 1, 0)
                        adjuncts += [(n, o + [self.advp[s[m]]]) for n, o, _ in nps]
                    for n, pp in adjuncts:
                        if n == len(s) - 1 and s[n] == ".":
                            out.append(subj + pp + obj + [verb + mark, "."])
        return out


@pytest.mark.parametrize("seed", [1, 8])
def test_every_target_is_the_unique_translation_of_its_source(tmp_path, seed):
    """The target is a deterministic function of the source, following the
    documented grammar (the adjunct an NP without MOD), for every pair of every split."""
    out, _ = generate(tmp_path, seed=seed, train=1200, valid=150, test=150)
    lex = language.Lexicon(syn.SyntheticConfig(**{**SMALL, "seed": seed}))
    ref = Reference(lex, adjunct="np")
    for s, t in pairs(out):
        assert ref.translations(s) == [t], " ".join(s)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    out, _ = generate(tmp_path_factory.mktemp("corpus"), train=1500, valid=0, test=0)
    return language.Lexicon(syn.SyntheticConfig(**SMALL)), pairs(out)


def test_neg_and_q_markers_become_a_suffix_of_the_final_verb(corpus):
    lex, data = corpus
    neg, q = lex.func["neg"][0], lex.func["q"][0]
    seen = collections.Counter()
    for s, t in data:
        assert t[-1] == "."
        assert neg not in s[1:] and q not in s[1:]  # only sentence-initial
        kind = {neg: "neg", q: "q"}.get(s[0], "none")
        seen[kind] += 1
        # no person/number suffix ends in -ne or -ku, so the suffix is unambiguous
        assert t[-2].endswith("ne") == (kind == "neg") and t[-2].endswith("ku") == (kind == "q"), (s, t)
        assert lex.func["neg"][1] not in t and lex.func["q"][1] not in t  # never a separate word
    assert seen["neg"] > 100 and seen["q"] > 100 and seen["none"] > 900  # 12 % each


def _person_suffix(verb: str) -> str:
    base = verb[:-2] if verb.endswith(("ne", "ku")) else verb
    return max((suf for suf in PERSON.values() if base.endswith(suf)), key=len)


def test_pronoun_subjects_are_dropped_and_marked_on_the_final_verb(corpus):
    lex, data = corpus
    pron = {s: key for key, (s, _) in lex.pron.items()}
    targets = {t for _, t in lex.pron.values()}
    persons = collections.Counter()
    for s, t in data:
        assert not targets & set(t)  # pro-drop
        first = s[1] if s[0] in (lex.func["neg"][0], lex.func["q"][0]) else s[0]
        if first in pron:
            persons[pron[first]] += 1
            assert _person_suffix(t[-2]) == PERSON[pron[first]], (s, t)
    assert set(persons) == set(PERSON)


def test_coordinated_subjects_take_the_plural(corpus):
    lex, data = corpus
    n = 0
    for s, t in data:
        if lex.func["and"][0] in s:
            n += 1
            assert _person_suffix(t[-2]) == "an", (s, t)  # 3rd person plural
            assert lex.func["and"][1] in t
    assert n > 50


def test_adjectives_follow_the_noun_mirrored_and_agree(corpus):
    """Subjects "DET ADJ1 ADJ2 NOUN[-s]" directly followed by the verb (or its
    AUX): the target starts "DET-agr NOUN[-ak] ADJ2-agr ADJ1-agr", agreeing
    with the gender of the target noun."""
    lex, data = corpus
    det, adj, noun, verb = dict(lex.dets), dict(lex.adjs), dict(lex.nouns), dict(lex.verbs)
    marks = (lex.func["neg"][0], lex.func["q"][0])
    aux = (lex.func["past"][0], lex.func["fut"][0])
    genders = collections.Counter()
    for s, t in data:
        i = 1 if s[0] in marks else 0
        if len(s) < i + 5:
            continue
        d, a1, a2, n, v = s[i:i + 5]
        if not (d in det and a1 in adj and a2 in adj and (v in aux or v.removesuffix("s") in verb)):
            continue
        plural = n not in noun
        n_t = noun[n[:-1] if plural else n]
        a = agr(n_t, plural)
        genders[a] += 1
        assert t[:4] == [det[d] + a, n_t + ("ak" if plural else ""), adj[a2] + a, adj[a1] + a], (s, t)
    assert len(genders) == 4 and sum(genders.values()) >= 20  # m/f, singular/plural
