"""Hard stand-in GLUE tasks (``glue_fake --hard``) for the tasks of Pande et
al., Table 4 (QQP, SST-2, MNLI, QNLI) and CoLA: labels that need the
sentence's structure and words far apart.  Sentences are samples of the
synthetic language (:meth:`fairseq_local_data.language.Grammar.sentence_tree`),
kept or edited through their gold dependency trees (the NEG/Q marker is drawn
independently of the rest of a sentence, so it is removed and added by hand).
A row's label is drawn first (a split's labels are a shuffled round-robin of
the classes), then sentences that fit it (rejection sampling); a sentence has
at most ``max_len`` words (default 30), marker and "." included.

The rules ("head": a phrase's head noun; "subject": the main verb's nsubj, a
noun phrase, neither pronoun nor coordination; "present": a verb without AUX;
an adjective's polarity: positive iff its lexicon rank is even):

* CoLA (agreement across an intervening phrase): the main verb is present,
  the subject has a relative clause or PP, no other verb is present (it would
  mark the subject's number nearby).  In half the rows the noun nearest
  before the main verb has the other number than the subject head (an
  attractor), in half the same number, so agreeing with the nearest noun is
  chance.  1 = the sentence; 0 = the main verb's "-s" toggled.
* SST-2 (negation scope): the subject head has exactly one adjective; 1 iff
  (its polarity is positive) XOR (the sentence starts with NEG, half the
  rows); no Q.  Other adjectives are distractors: 85% of rows have one of the
  other polarity; 30% have a possessive subject whose owner (before the head)
  has one of the other polarity.
* MNLI (is the hypothesis about the premise's subject?): the premise has a
  transitive main verb, noun subject and object of different lemmas,
  another noun (relative clause, PP, adjunct, possessor) and no other verb
  of the main verb's lemma; its main verb is present (it agrees with the
  subject) in 2/3 of the rows.  Hypothesis "[NEG] DET N1 [AUX] VERB DET N2 ."
  (the premise's verb and tense, N1 the subject's lemma, N2 the object as
  in the premise, the language's agreement).  entailment = N1 in the
  subject's number, no NEG; contradiction = the same number with NEG;
  neutral = the other number (NEG in half).  NEG alone rules out entailment,
  as negation words cue contradiction in MNLI, so the hypothesis alone
  scores 2/3; the rest needs the premise subject's number.
* QNLI (the question first, as in GLUE): "Q DET NOUN VERB ." (present,
  agreeing with NOUN), NOUN the lemma of the main verb's subject (half) or
  object (half) of a sentence as MNLI's premise (any tense), VERB its lemma; entailment
  iff NOUN has that noun's number in the sentence.
* QQP (duplicate questions): "Q" and a sentence as MNLI's premise (any tense); the
  second is the first less some modifiers, or a fresh sentence of the same
  tense given the first's subject lemma, verb lemma and object (half each).
  1 iff the second's subject has the first's number; 0 = the other number.

Sentence-pair labels are decided by a feature of each sentence, compared
(a small model fails to learn rules that need the two sentences' words
matched, such as which noun of the premise the hypothesis names, within
the reduced scales' budget: docs/reproductions/README.md).
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from .glue_tasks import GlueError
from .language import Grammar, Lexicon, SyntheticConfig, Tree

LABELS: Dict[str, Tuple[str, ...]] = {
    "CoLA": ("0", "1"), "SST-2": ("0", "1"), "MNLI": ("entailment", "neutral", "contradiction"),
    "QNLI": ("entailment", "not_entailment"), "QQP": ("0", "1")}
HARD_TASKS = tuple(LABELS)
MODIFIERS = ("amod", "nmod", "acl:relcl", "obl")  # droppable (QQP); possessors are not
TRIES = 200000  # rejection-sampling draws per row before giving up


@dataclass
class Example:
    """One row with the gold trees of its sentences (``s2`` None: single sentence)."""

    s1: Tree
    s2: Optional[Tree]
    label: str
    kind: str  # the construction, e.g. "attractor", "swap", "modifier", "absent-noun"

    def record(self) -> Tuple[str, str, str]:
        """(sentence1, sentence2, label) as glue_fake's rows take them."""
        return " ".join(self.s1.words), " ".join(self.s2.words) if self.s2 else "", self.label


def kids(t: Tree, i: int, *rels: str) -> List[int]:
    """Dependents of word ``i`` (those with a relation in ``rels``, if given)."""
    return [k for k, r in enumerate(t.rows) if r[4] == i and (not rels or r[5] in rels)]


def subtree(t: Tree, i: int) -> List[int]:
    """Word ``i`` and all its dependents, in order."""
    return sorted([i] + [w for k in kids(t, i) for w in subtree(t, k)])


def plural(t: Tree, i: int) -> bool:
    """A noun or pronoun is plural (a coordination counts as plural)."""
    return "Number=Plur" in t.rows[i][3] or bool(kids(t, i, "conj"))


def present(t: Tree, v: int) -> bool:
    """Verb ``v`` is present tense (no AUX)."""
    return not kids(t, v, "aux")


def svo(t: Tree) -> Tuple[Optional[int], int, Optional[int]]:
    """(subject head, main verb, object head): the subject and object only
    when they are nouns (not pronouns), the subject not a coordination."""
    v = t.root
    s = [k for k in kids(t, v, "nsubj") if t.rows[k][2] == "NOUN" and not kids(t, k, "conj")]
    o = [k for k in kids(t, v, "obj") if t.rows[k][2] == "NOUN"]
    return (s[0] if s else None), v, (o[0] if o else None)


def tagged(t: Tree, upos: str) -> List[int]:
    return [k for k, r in enumerate(t.rows) if r[2] == upos]


def lemma(t: Tree, i: int) -> str:
    return t.rows[i][1]


def noun(t: Tree, i: int) -> Tuple[str, bool]:
    return lemma(t, i), plural(t, i)


def rebuild(t: Tree, keep: Sequence[int], front: Optional[Tuple[str, str, str, str]] = None) -> Tree:
    """A new tree of the words ``keep`` (whole subtrees, in order) and, if
    given, a word (form, upos, rel, feats) first, attached to the root."""
    new = {old: k + bool(front) for k, old in enumerate(keep)}
    out = Tree()
    if front:
        out.add(front[0], front[1], new[t.root], front[2], feats=front[3])
    for old in keep:
        *cols, h, r = t.rows[old]
        out.rows.append(list(cols) + [new[h] if h >= 0 else -1, r])
    return out


def agree(t: Tree) -> Tree:
    """Set every present verb's form by the language's rule: "-s" iff its
    subject is 3rd person singular (in place; returns ``t``)."""
    for v in tagged(t, "VERB"):
        if not present(t, v):
            t.rows[v][0] = lemma(t, v)
            continue
        if t.rows[v][5] == "acl:relcl":
            third, pl = True, "Number=Plur" in t.rows[t.rows[v][4]][3]  # the noun itself, not "NP and NP"
        else:
            s = kids(t, v, "nsubj")[0]
            third, pl = "Person=" not in t.rows[s][3] or "Person=3" in t.rows[s][3], plural(t, s)
        t.rows[v][0] = lemma(t, v) + ("s" if third and not pl else "")
    return t


def set_noun(t: Tree, i: int, value: Tuple[str, bool]) -> None:
    """Put the noun (lemma, plural) at word ``i`` (agreement: :func:`agree`)."""
    t.rows[i][:4] = [value[0] + ("s" if value[1] else ""), value[0], "NOUN",
                     "Number=Plur" if value[1] else "Number=Sing"]


# ---------------------------------------------------------------- sampling

class Source:
    """Bare sentences (no marker) of the language with at most ``max_len - 1``
    words, drawn with ``rng``, and the lexicon's words the rules use."""

    def __init__(self, seed: int, rng: random.Random, max_len: int = 30,
                 lexicon: Optional[Tuple[int, int, int]] = None) -> None:
        sizes = dict(zip(("nouns", "adjectives", "verbs"), lexicon)) if lexicon else {}
        self.lex, self.rng, self.max_len = Lexicon(SyntheticConfig(seed=seed, **sizes)), rng, max_len
        self.gram = Grammar(self.lex, rng)
        self.neg, self.q = self.lex.func["neg"][0], self.lex.func["q"][0]
        self.rank = {a: r for r, (a, _) in enumerate(self.lex.adjs)}

    def positive(self, adj: str) -> bool:
        """An adjective's polarity: positive iff its lexicon rank is even."""
        return self.rank[adj] % 2 == 0

    def draw(self, ok: Callable[[Tree], bool], what: str) -> Tree:
        """A bare sentence for which ``ok`` holds (``what``: for the error)."""
        for _ in range(TRIES):
            t = self.gram.sentence_tree()[0]
            if t.rows[0][2] == "PART":  # NEG/Q: drawn independently, removed
                t = rebuild(t, range(1, len(t.rows)))
            if len(t.rows) < self.max_len and ok(t):
                return t
        raise GlueError(f"--hard: no {what} sentence of at most {self.max_len} words found")

    def recolour(self, t: Tree, i: int, pos: bool) -> None:
        """Redraw adjective ``i`` until its polarity is ``pos`` (the grammar
        draws each adjective independently: this is the conditional draw)."""
        while self.positive(t.rows[i][0]) != pos:
            t.rows[i][0] = t.rows[i][1] = self.lex.adjs[self.lex.sample(self.rng, "adjs")][0]

    def det(self) -> str:
        """A determiner."""
        return self.lex.dets[self.lex.sample(self.rng, "dets")][0]

    def marked(self, t: Tree, key: str) -> Tree:
        """``t`` with the sentence-initial NEG or Q marker."""
        return rebuild(t, range(len(t.rows)), (self.neg, "PART", "advmod", "Polarity=Neg") if key == "neg"
                       else (self.q, "PART", "discourse", "_"))

    def transitive(self, t: Tree) -> bool:
        """Noun subject and object of different lemmas, another noun, and no
        other verb of the main verb's lemma (MNLI, QNLI, QQP)."""
        s, v, o = svo(t)
        return (s is not None and o is not None and lemma(t, s) != lemma(t, o) and bool(others(t))
                and all(lemma(t, k) != lemma(t, v) for k in tagged(t, "VERB") if k != v))


def others(t: Tree) -> List[int]:
    """Nouns other than the subject and object heads, of other lemmas."""
    s, _, o = svo(t)
    heads = {lemma(t, k) for k in (s, o) if k is not None}
    return [k for k in tagged(t, "NOUN") if lemma(t, k) not in heads]


# ---------------------------------------------------------------- the tasks

def cola(src: Source, y: str) -> Example:
    """A CoLA row: agreement across a phrase (module docstring)."""
    flip = src.rng.random() < 0.5

    def ok(t: Tree) -> bool:
        s, v, _ = svo(t)
        if s is None or not kids(t, s, "acl:relcl", "nmod") or any(present(t, k) for k in tagged(t, "VERB")
                                                                    if k != v) or not present(t, v):
            return False
        near = max(k for k in tagged(t, "NOUN") if k < v)
        return (plural(t, near) != plural(t, s)) == flip

    t = src.draw(ok, "CoLA")
    if y == "0":
        v = t.root
        t.rows[v][0] = lemma(t, v) + "s" if t.rows[v][0] == lemma(t, v) else lemma(t, v)
    return Example(t, None, y, "attractor" if flip else "plain")


def sst2(src: Source, y: str) -> Example:
    """An SST-2 row: the subject's adjective and NEG (module docstring)."""
    rng = src.rng
    neg = rng.random() < 0.5
    pos = (y == "1") != neg
    want_dis, want_poss = rng.random() < 0.85, rng.random() < 0.3

    def ok(t: Tree) -> bool:  # the polarities are set below
        s = svo(t)[0]
        if s is None or len(kids(t, s, "amod")) != 1:
            return False
        owner = kids(t, s, "nmod:poss")
        return not want_poss or bool(owner and kids(t, owner[0], "amod"))

    while True:
        t = src.draw(ok, "SST-2")
        s = svo(t)[0]
        adj = kids(t, s, "amod")[0]
        src.recolour(t, adj, pos)
        if want_poss:
            src.recolour(t, kids(t, kids(t, s, "nmod:poss")[0], "amod")[0], not pos)
        if not want_dis or any(r[2] == "ADJ" and src.positive(r[0]) != pos for r in t.rows):
            break
    return Example(src.marked(t, "neg") if neg else t, None, y, "neg" if neg else "plain")


def _clause(src: Source, subj: Tuple[str, bool], adjs: List[str], verb: int, obj: Tuple[str, bool],
            premise: Tree) -> Tree:
    """"DET ADJ* SUBJ [AUX] VERB DET OBJ ." with the premise's verb (lemma, AUX)."""
    t, n, aux = Tree(), 1 + len(adjs), [premise.rows[a][0] for a in kids(premise, verb, "aux")]
    v = n + 1 + len(aux)
    for form, upos, head, rel in ([(src.det(), "DET", n, "det")] + [(a, "ADJ", n, "amod") for a in adjs]
                                  + [("", "NOUN", v, "nsubj")] + [(a, "AUX", v, "aux") for a in aux]
                                  + [(lemma(premise, verb), "VERB", -1, "root"), (src.det(), "DET", v + 2, "det"),
                                     ("", "NOUN", v, "obj"), (".", "PUNCT", v, "punct")]):
        t.add(form, upos, head, rel)
    set_noun(t, n, subj)
    set_noun(t, v + 2, obj)
    return agree(t)


def mnli(src: Source, y: str) -> Example:
    """An MNLI row: the premise subject's number (module docstring)."""
    rng = src.rng
    now = rng.random() < 2 / 3  # a present main verb shows the subject's number by agreement
    p = src.draw(lambda t: src.transitive(t) and present(t, t.root) == now, "MNLI")
    s, v, o = svo(p)
    neg = rng.random() < 0.5 if y == "neutral" else y == "contradiction"
    number = plural(p, s) != (y == "neutral")
    h = _clause(src, (lemma(p, s), number), [], v, noun(p, o), p)
    kind = ("other-number" if y == "neutral" else "same-number") + ("+neg" if neg else "")
    return Example(p, src.marked(h, "neg") if neg else h, y, kind)


def qnli(src: Source, y: str) -> Example:
    """A QNLI row: the number of the main verb's subject or object (module docstring)."""
    rng = src.rng
    t = src.draw(src.transitive, "QNLI")
    s, v, o = svo(t)
    k, kind = (s, "subject") if rng.random() < 0.5 else (o, "object")
    q = Tree()
    for form, upos, head, rel in ((src.q, "PART", 3, "discourse"), (src.det(), "DET", 2, "det"),
                                  ("", "NOUN", 3, "nsubj"), (lemma(t, v), "VERB", -1, "root"), (".", "PUNCT", 3, "punct")):
        q.add(form, upos, head, rel)
    set_noun(q, 2, (lemma(t, k), plural(t, k) == (y == "entailment")))
    return Example(agree(q), t, y, kind)


def _aux(t: Tree, v: int) -> List[str]:
    return [t.rows[a][0] for a in kids(t, v, "aux")]


def qqp(src: Source, y: str) -> Example:
    """A QQP row: the subject's number (module docstring)."""
    rng = src.rng
    a = src.draw(src.transitive, "QQP")
    s, v, o = svo(a)
    fresh = rng.random() < 0.5
    if not fresh:  # the first question less some of its modifiers
        drop = {w for h in (s, v, o) for m in kids(a, h, *MODIFIERS) if rng.random() < 0.5 for w in subtree(a, m)}
        b = rebuild(a, [k for k in range(len(a.rows)) if k not in drop])
    else:  # a fresh sentence of the same tense, its heads replaced
        b = src.draw(lambda t: svo(t)[0] is not None and svo(t)[2] is not None and _aux(t, t.root) == _aux(a, v),
                     "QQP")
    bs, bv, bo = svo(b)
    set_noun(b, bs, (lemma(a, s), plural(a, s) == (y == "1")))
    set_noun(b, bo, noun(a, o))
    b.rows[bv][1] = lemma(a, v)
    kind = ("same" if y == "1" else "other-number") + ("+fresh" if fresh else "+dropped")
    return Example(src.marked(a, "q"), src.marked(agree(b), "q"), y, kind)


GENERATORS: Dict[str, Callable[[Source, str], Example]] = {
    "CoLA": cola, "SST-2": sst2, "MNLI": mnli, "QNLI": qnli, "QQP": qqp}


def examples(name: str, n: int, rng: random.Random, seed: int = 1, max_len: int = 30,
             lexicon: Optional[Tuple[int, int, int]] = None) -> List[Example]:
    """``n`` rows of hard task ``name`` with their gold trees, labels balanced (a
    shuffled round-robin); ``lexicon``: (nouns, adjectives, verbs), default the language's."""
    if name not in GENERATORS:
        raise GlueError(f"--hard has no rule for {name} (it has {', '.join(HARD_TASKS)})")
    if max_len < 12:
        raise GlueError(f"--hard needs sentences of up to at least 12 words, not {max_len}")
    if lexicon is not None and (len(lexicon) != 3 or min(lexicon) < 4):
        raise GlueError(f"--lexicon needs three sizes (nouns, adjectives, verbs) of at least 4, not {lexicon}")
    classes = LABELS[name]
    labels = [classes[k % len(classes)] for k in range(n)]
    rng.shuffle(labels)
    src = Source(seed, rng, max_len, lexicon)
    return [GENERATORS[name](src, y) for y in labels]


def conllu(rows: Sequence[Example], split: str) -> str:
    """The sentences of ``rows`` with their gold trees, as CoNLL-U: each row's
    sentence1, then (pair tasks) its sentence2, ``# sent_id = SPLIT-ROW-1``
    and ``-2`` (ROW 1-based, the TSV's order); the words exactly as the TSV
    holds them (lower case, the marker and "." words of their own), so a model
    fine-tuned on the TSV reads the same text (Pande et al. §3: sentences of
    each task with their syntax)."""
    blocks = []
    for k, e in enumerate(rows, 1):
        for part, tree in enumerate((e.s1, e.s2), 1):
            if tree is not None:
                blocks.append(tree.conllu(f"{split}-{k}-{part}") + "\n")
    return "".join(blocks)


def records(name: str, n: int, rng: random.Random, seed: int = 1, max_len: int = 30,
            lexicon: Optional[Tuple[int, int, int]] = None) -> List[Tuple[str, str, str]]:
    """(sentence1, sentence2, label) of ``n`` rows of hard task ``name``."""
    return [e.record() for e in examples(name, n, rng, seed, max_len, lexicon)]
