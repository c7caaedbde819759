"""The synthetic language of :mod:`fairseq_local_data.synthetic`: a seeded
bilingual lexicon, a source grammar, the target grammar it translates into,
and the dependency tree of each source sentence.

Lexicon
-------
Both languages have pseudo-words made of random CV/CVC syllables (2-4 per
content word, 1 per function word), drawn from different consonant sets.
Each source lemma is mapped to an independently generated target lemma.
Lemmas are sampled with a Zipf distribution (rank r has weight 1/r**zipf), so
a few words are frequent and most are rare. Inflection is glued onto the
word, so subword units are shared and BPE matters. The letter "s" is absent
from source lemmas, so source inflection can always be read off unambiguously.
The lexicon depends only on the seed and the lexicon sizes, not on split sizes.

Source grammar: SVO, adjectives before the noun, prepositions
-------------------------------------------------------------
    S    -> [NEG|Q] SUBJ [AUX] VERB [OBJ] [ADVP NPA] "."
    SUBJ -> PRON | NP | NP "and" NP
    NP   -> DET ADJ* NOUN[-s] [MOD] | NP0 POSS ADJ* NOUN[-s] [MOD]
    MOD  -> REL [AUX] VERB [NP]        (relative clause, subject gap)
          | PREP NP                    (prepositional phrase)
    NP0 is a plain "DET ADJ* NOUN" noun phrase; NPA (the adjunct's noun
    phrase) is an NP without MOD. By default a subject NP nests at most two
    MOD levels (each NP of "NP and NP" one), an object NP one.
    Prepositions come in two disjoint sets, PREP (inside noun phrases) and
    ADVP (sentence adjuncts), so PP attachment is never ambiguous. Source
    nouns take "-s" in the plural; a present-tense verb takes "-s" with a
    3rd-person singular subject. AUX marks past or future (else present).

Target grammar: SOV (verb-final), pro-drop, adjectives after the noun
---------------------------------------------------------------------
    S    -> [SUBJ] [NPA ADVP] [OBJ OBJM] VERB-tense-agr[-neg|-q] "."
    NP   -> DET-agr NOUN[-ak] ADJ-agr* [MOD]   (adjectives in mirror order)
          | NOUN[-ak] ADJ-agr* NP0 GEN [MOD]   (possessed noun first)
    MOD  -> REL [NP OBJM] VERB-tense-agr       (verb-final, 3rd person)
          | NP POSTP

What the data tests
-------------------
* Local reordering: adjectives precede the noun in the source and follow it,
  mirrored, in the target; in a possessive the order "owner POSS possessed"
  becomes "possessed owner GEN"; prepositions become postpositions.
* Agreement: the gender of a target noun follows from its form (masculine if
  the lemma ends in a consonant, feminine if it ends in a vowel). Target
  determiners and adjectives take -o/-e (m/f singular) or -ai/-ei (m/f plural).
  The target verb takes a person/number suffix (-am -as -a -amu -asu -an for
  1sg..3pl) and a tense suffix (past -ir, future -ol), while the source only
  marks 3rd-person singular present. Coordinated subjects ("NP and NP") need
  the plural. Relative-clause verbs agree with the noun they modify.
* Longer-range information: (1) the verb moves past the object and the
  sentence-final PP (SVO -> SOV), and the PP also moves in front of the object;
  (2) the target drops subject pronouns, so the person of a sentence-initial
  source pronoun is only visible on the final target verb; (3) relative
  clauses and PPs on the subject (whose own nouns, possibly of the other
  number, act as attractors) separate the subject from its agreeing verb;
  (4) a sentence-initial source NEG/Q marker becomes a suffix (-ne/-ku) on
  the final target verb, so the first source token decides the last word.
The target is a deterministic function of the source.

Knobs and the hard preset
-------------------------
:class:`SyntheticConfig` sets how often each optional part is drawn:
    rel_clause, np_pp       MOD is a relative clause / a PP, on an NP that may
                            still nest (0.25, 0.20; sum at most 1)
    subj_depth, obj_depth   MOD levels a subject / object NP may nest (2, 1);
                            each NP of "NP and NP" one level less than subj_depth
    neg, question           a sentence-initial NEG / Q marker (0.12 each)
    pron_subj, coord_subj   a pronoun / coordinated subject (0.2, 0.1)
    adjunct                 a sentence adjunct "ADVP NPA" (0.4)
    plural                  a noun is plural (0.3)
The defaults are the corpus described above, with the same random draws (so
the same files). :data:`HARD` (the generator's ``--hard``) nests deeper
(subject 3, object 2) with more relative clauses (0.4), PPs (0.3) and markers
(0.2 each), and keeps sentences of 10 to 40 words: subjects grow long, so
subject-verb agreement and the NEG/Q marker span more words than a local
attention window, and an all-local encoder and a global one can differ.

Dependency trees
----------------
Each source sentence comes with Universal Dependencies heads and relations,
built alongside its tokens (:class:`Tree`):
    root        the main verb (aux: the past/future AUX on its verb)
    nsubj/obj   subject and object noun (or pronoun) on the verb
    det, amod   determiner and adjectives on their noun
    nmod:poss   the owner's noun on the possessed noun; POSS is case on the owner
    nmod, case  an NP-internal PP's noun on the noun it modifies; the
                preposition is case on its own noun
    obl         a sentence adjunct's noun on the main verb (its ADVP: case)
    acl:relcl   a relative clause's verb on its noun; REL, a relative pronoun
                (PRON, PronType=Rel), is the clause's nsubj, as for English
                "that"; the clause's object is obj of its verb
    conj, cc    the second subject on the first; "and" is cc of the second
    advmod      NEG on the main verb (PART, Polarity=Neg)
    discourse   Q, a sentence question particle (PART), on the main verb
    punct       the final "." on the main verb
"""
from __future__ import annotations

import bisect
import random
from dataclasses import dataclass, fields

from .errors import OneLineError

SRC_PHON = ("pbtdkgmnlrfvz", "aeiou", "nmlrk")  # onsets, vowels, codas (no "s")
TGT_PHON = ("ptkhmnlrjwc", "aeiou", "nrlk")
AGR = {("m", False): "o", ("f", False): "e", ("m", True): "ai", ("f", True): "ei"}
PERSON = {(1, False): "am", (2, False): "as", (3, False): "a",
          (1, True): "amu", (2, True): "asu", (3, True): "an"}
TENSE = {"pres": "", "past": "ir", "fut": "ol"}
FUNCTION = ("neg", "q", "and", "poss", "rel", "past", "fut")  # single words
PROBABILITIES = ("rel_clause", "np_pp", "neg", "question", "pron_subj", "coord_subj", "adjunct", "plural")


class ConfigError(OneLineError, ValueError):
    """A grammar knob of :class:`SyntheticConfig` out of range."""


@dataclass
class SyntheticConfig:
    """Sizes and knobs of the synthetic language (its lexicon) and of a corpus
    of it (split sizes are sentence pairs; :mod:`fairseq_local_data.synthetic`)."""

    seed: int = 1
    train: int = 20000
    valid: int = 500
    test: int = 500
    nouns: int = 3000
    adjectives: int = 800
    verbs: int = 800
    preps: int = 40            # prepositions (half in NPs, half adjuncts)
    dets: int = 6              # determiners
    zipf: float = 1.0          # Zipf exponent for lemma sampling
    min_len: int = 4           # source length bounds, "." included
    max_len: int = 40
    # the grammar's knobs (module docstring, "Knobs and the hard preset")
    rel_clause: float = 0.25   # P(relative clause) on an NP that may nest
    np_pp: float = 0.20        # P(NP-internal PP) on such an NP
    subj_depth: int = 2        # nesting depth of the subject NP
    obj_depth: int = 1         # nesting depth of the object NP
    neg: float = 0.12          # P(sentence-initial NEG marker)
    question: float = 0.12     # P(sentence-initial Q marker)
    pron_subj: float = 0.2     # P(pronoun subject)
    coord_subj: float = 0.1    # P(coordinated subject "NP and NP")
    adjunct: float = 0.4       # P(sentence adjunct "ADVP NPA")
    plural: float = 0.3        # P(plural noun)

    def __post_init__(self) -> None:
        """Raise :class:`ConfigError` for a knob out of range (the message names
        the command-line option)."""
        opt = {f.name: "--" + f.name.replace("_", "-") for f in fields(self)}
        for name in PROBABILITIES:
            if not 0.0 <= getattr(self, name) <= 1.0:  # NaN too
                raise ConfigError(f"{opt[name]} must be a probability in [0, 1], not {getattr(self, name)}")
        for a, b in (("rel_clause", "np_pp"), ("neg", "question"), ("pron_subj", "coord_subj")):
            if getattr(self, a) + getattr(self, b) > 1.0:
                raise ConfigError(f"{opt[a]} + {opt[b]} must be at most 1 (they are shares of one draw)")
        if min(self.subj_depth, self.obj_depth) < 0:
            raise ConfigError("--subj-depth and --obj-depth must be non-negative")


# The hard preset (--hard): deeper nesting, more clauses and markers, longer sentences.
HARD = dict(subj_depth=3, obj_depth=2, rel_clause=0.4, np_pp=0.3, neg=0.2, question=0.2, min_len=10, max_len=40)


class Lexicon:
    """Bilingual lexicon derived from the seed and lexicon sizes only."""

    def __init__(self, cfg: SyntheticConfig) -> None:
        rng = random.Random(f"lexicon:{cfg.seed}")
        taken: dict[str, set] = {"s": set(), "t": set()}

        def words(n: int, syl: tuple[int, int]) -> list[tuple[str, str]]:
            return [(self._word(rng, SRC_PHON, syl, taken["s"]),
                     self._word(rng, TGT_PHON, syl, taken["t"])) for _ in range(n)]

        self.func = dict(zip(FUNCTION, words(len(FUNCTION), (1, 1))))
        self.objm = self._word(rng, TGT_PHON, (1, 1), taken["t"])  # target-only
        self.gen = self._word(rng, TGT_PHON, (1, 1), taken["t"])
        self.pron = dict(zip(PERSON, words(len(PERSON), (1, 1))))
        self.dets = words(cfg.dets, (1, 1))
        self.preps = words(cfg.preps - cfg.preps // 2, (1, 2))  # inside NPs
        self.advpreps = words(cfg.preps // 2, (1, 2))  # sentence adjuncts only
        self.nouns = words(cfg.nouns, (2, 4))
        self.adjs = words(cfg.adjectives, (2, 4))
        self.verbs = words(cfg.verbs, (2, 4))
        self.transitive = [rng.random() < 0.7 for _ in self.verbs]
        self.cum = {}
        for name in ("dets", "preps", "advpreps", "nouns", "adjs", "verbs"):
            acc, cum = 0.0, []
            for r in range(len(getattr(self, name))):
                acc += 1.0 / (r + 1) ** cfg.zipf
                cum.append(acc)
            self.cum[name] = cum

    @staticmethod
    def _word(rng: random.Random, phon: tuple[str, str, str],
              syl: tuple[int, int], taken: set) -> str:
        onsets, vowels, codas = phon
        while True:
            w = "".join(rng.choice(onsets) + rng.choice(vowels)
                        + (rng.choice(codas) if rng.random() < 0.3 else "")
                        for _ in range(rng.randint(*syl)))
            if w not in taken:
                taken.add(w)
                return w

    def sample(self, rng: random.Random, name: str) -> int:
        cum = self.cum[name]
        return min(bisect.bisect(cum, rng.random() * cum[-1]), len(cum) - 1)


class Tree:
    """Source words of a phrase with their dependency tree, built alongside the
    tokens. Rows are [form, lemma, upos, feats, head, deprel] with 0-based
    heads inside the phrase; the phrase's root has head -1 until attached."""

    def __init__(self) -> None:
        self.rows: list[list] = []

    @property
    def words(self) -> list[str]:
        return [row[0] for row in self.rows]

    @property
    def root(self) -> int:
        return next(i for i, row in enumerate(self.rows) if row[4] == -1)

    def add(self, form: str, upos: str, head: int = -1, rel: str = "root",
            lemma: str = "", feats: str = "_") -> int:
        """Append a word; returns its index."""
        self.rows.append([form, lemma or form, upos, feats, head, rel])
        return len(self.rows) - 1

    def attach(self, sub: Tree, head: int, rel: str) -> int:
        """Append sub's words, its root as (head, rel); returns the root's index."""
        off, root = len(self.rows), sub.root
        for i, (*cols, h, r) in enumerate(sub.rows):
            self.rows.append(cols + ([head, rel] if i == root else [h + off, r]))
        return off + root

    def conllu(self, sent_id: str) -> str:
        """The sentence as CoNLL-U: comments and 10 columns (HEAD 1-based, 0 = root)."""
        lines = [f"# sent_id = {sent_id}", f"# text = {' '.join(self.words)}"]
        lines += [f"{i}\t{form}\t{lemma}\t{upos}\t_\t{feats}\t{head + 1}\t{rel}\t_\t_"
                  for i, (form, lemma, upos, feats, head, rel) in enumerate(self.rows, 1)]
        return "\n".join(lines) + "\n"


class Grammar:
    """Generates one (source tokens, target tokens) pair at a time."""

    def __init__(self, lex: Lexicon, rng: random.Random, cfg: SyntheticConfig | None = None) -> None:
        self.lex, self.rng = lex, rng
        self.cfg = cfg if cfg is not None else SyntheticConfig()  # only its grammar knobs are read

    def verb(self, person: int, plural: bool) -> tuple[Tree, str, int]:
        """Return (source [AUX] VERB tree, target verb form, verb index)."""
        lex, rng = self.lex, self.rng
        v = lex.sample(rng, "verbs")
        vs, vt = lex.verbs[v]
        tense = rng.choices(("pres", "past", "fut"), (5, 3, 2))[0]
        src = Tree()
        if tense == "pres":
            src.add(vs + "s" if (person == 3 and not plural) else vs, "VERB", lemma=vs)
        else:
            src.add(lex.func[tense][0], "AUX", 1, "aux")
            src.add(vs, "VERB")
        return src, vt + TENSE[tense] + PERSON[(person, plural)], v

    def np(self, depth: int, simple: bool = False) -> tuple[Tree, list, bool]:
        """Noun phrase; returns (source tree, tgt, plural). depth bounds nesting."""
        lex, rng, cfg = self.lex, self.rng, self.cfg
        ns, nt = lex.nouns[lex.sample(rng, "nouns")]
        plural = rng.random() < cfg.plural
        agr = AGR[("f" if nt[-1] in TGT_PHON[1] else "m", plural)]
        k = rng.choices((0, 1, 2), (5, 3.5, 1.5))[0]
        adjs = [lex.adjs[lex.sample(rng, "adjs")] for _ in range(k)]
        noun_s, noun_t = ns + ("s" if plural else ""), nt + ("ak" if plural else "")
        adjs_t = [a[1] + agr for a in reversed(adjs)]
        src = Tree()
        if not simple and rng.random() < 0.12:  # possessive
            owner, ot, _ = self.np(0, simple=True)
            noun = len(owner.rows) + 1 + k
            owner_noun = src.attach(owner, noun, "nmod:poss")
            src.add(lex.func["poss"][0], "PART", owner_noun, "case")
            tgt = [noun_t] + adjs_t + ot + [lex.gen]
        else:
            ds, dt = lex.dets[lex.sample(rng, "dets")]
            noun = 1 + k
            src.add(ds, "DET", noun, "det")
            tgt = [dt + agr, noun_t] + adjs_t
        for a in adjs:
            src.add(a[0], "ADJ", noun, "amod")
        src.add(noun_s, "NOUN", lemma=ns, feats="Number=Plur" if plural else "Number=Sing")
        r = rng.random()
        if depth > 0 and not simple and r < cfg.rel_clause:  # relative clause
            vsrc, vt, v = self.verb(3, plural)
            src.add(lex.func["rel"][0], "PRON", len(src.rows) + 1 + vsrc.root, "nsubj", feats="PronType=Rel")
            verb = src.attach(vsrc, noun, "acl:relcl")
            tgt += [lex.func["rel"][1]]
            if lex.transitive[v]:
                os_, ot, _ = self.np(depth - 1)
                src.attach(os_, verb, "obj")
                tgt = tgt + ot + [lex.objm]
            tgt.append(vt)
        elif depth > 0 and not simple and r < cfg.rel_clause + cfg.np_pp:  # prepositional phrase
            ps, pt = lex.preps[lex.sample(rng, "preps")]
            os_, ot, _ = self.np(depth - 1)
            src.add(ps, "ADP", len(src.rows) + 1 + os_.root, "case")
            src.attach(os_, noun, "nmod")
            tgt = tgt + ot + [pt]
        return src, tgt, plural

    def sentence(self) -> tuple[list, list]:
        """One pair: (source tokens, target tokens)."""
        src, tgt = self.sentence_tree()
        return src.words, tgt

    def sentence_tree(self) -> tuple[Tree, list]:
        """One pair: (source words with their dependency tree, target tokens)."""
        lex, rng, cfg = self.lex, self.rng, self.cfg
        r = rng.random()
        subj = Tree()
        if r < cfg.pron_subj:  # pronoun subject, dropped in the target
            person, plural = rng.choice(list(PERSON))
            feats = f"Number={'Plur' if plural else 'Sing'}|Person={person}|PronType=Prs"
            subj.add(lex.pron[(person, plural)][0], "PRON", feats=feats)
            subj_t = []
        # 0.2 + 0.1 rounds to 0.30000000000000004, but no random() (k / 2**53) lies in [0.3, that)
        elif r < cfg.pron_subj + cfg.coord_subj:  # coordinated subject -> plural agreement
            depth = max(cfg.subj_depth - 1, 0)
            a_s, a_t, _ = self.np(depth)
            b_s, b_t, _ = self.np(depth)
            person, plural = 3, True
            first = subj.attach(a_s, -1, "root")
            subj.add(lex.func["and"][0], "CCONJ", len(subj.rows) + 1 + b_s.root, "cc")
            subj.attach(b_s, first, "conj")
            subj_t = a_t + [lex.func["and"][1]] + b_t
        else:
            subj, subj_t, plural = self.np(cfg.subj_depth)
            person = 3
        vsrc, vt, v = self.verb(person, plural)
        obj_s, obj_t = None, []
        if lex.transitive[v]:
            obj_s, obj_t, _ = self.np(cfg.obj_depth)
            obj_t = obj_t + [lex.objm]
        pp_s, pp_t = None, []
        if rng.random() < cfg.adjunct:
            ps, pt = lex.advpreps[lex.sample(rng, "advpreps")]
            n_s, n_t, _ = self.np(0)
            pp_s, pp_t = (ps, n_s), n_t + [pt]
        mark_s, mark_t = "", ""
        r = rng.random()
        if r < cfg.neg + cfg.question:
            key = "neg" if r < cfg.neg else "q"
            mark_s, mark_t = key, ("ne" if key == "neg" else "ku")
        src = Tree()  # no random draws below
        verb = bool(mark_s) + len(subj.rows) + vsrc.root
        if mark_s == "neg":
            src.add(lex.func["neg"][0], "PART", verb, "advmod", feats="Polarity=Neg")
        elif mark_s == "q":
            src.add(lex.func["q"][0], "PART", verb, "discourse")
        src.attach(subj, verb, "nsubj")
        src.attach(vsrc, -1, "root")
        if obj_s is not None:
            src.attach(obj_s, verb, "obj")
        if pp_s is not None:
            src.add(pp_s[0], "ADP", len(src.rows) + 1 + pp_s[1].root, "case")
            src.attach(pp_s[1], verb, "obl")
        src.add(".", "PUNCT", verb, "punct")
        tgt = subj_t + pp_t + obj_t + [vt + mark_t, "."]
        return src, tgt
