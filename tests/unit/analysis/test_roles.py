"""Head roles of Voita et al. 2019 on hand-made dumps with exact values:
confidence and positional offsets (special rows, columns and all-zero rows
left out), syntactic accuracy against the most-frequent-offset baseline
(subword partners, ties), rare-word pointing, classify's precedence, and
one-line errors."""

import pytest
import torch

from fairseq_local.analysis.relations import RecordError
from fairseq_local.analysis.roles import (ROLE_COLOURS, ROLES, classify, head_roles, rank_of, read_counts,
                                          syntactic_keys)


def one_hot(T, targets):
    """(T, T): row i is one-hot at targets[i] (None: an all-zero row)."""
    a = torch.zeros(T, T)
    for i, j in enumerate(targets):
        if j is not None:
            a[i, j] = 1.0
    return a


def rec(words, tokens, word_ids, heads_attn, **extra):
    return dict(words=words, tokens=tokens, word_ids=word_ids, attn=torch.stack(heads_attn)[None], **extra)


def positional_records():
    """Two sentences (4 and 2 words + </s>); head 0 prev-1, head 1 next-1, head 2 soft."""
    soft = torch.tensor([[0.2, 0.1, 0.1, 0.1, 0.5],   # EOS column is the largest: max 0.2 at offset 0
                         [0.6, 0.2, 0.1, 0.1, 0.0],   # 0.6 at -1
                         [0.1, 0.1, 0.1, 0.7, 0.0],   # 0.7 at +1
                         [0.0, 0.0, 0.0, 0.0, 1.0],   # only EOS: left out
                         [1.0, 0.0, 0.0, 0.0, 0.0]])  # the EOS row: left out
    r1 = rec(list("abcd"), [*"abcd", "</s>"], [0, 1, 2, 3, -1],
             [one_hot(5, [None, 0, 1, 2, 3]),  # prev-1; the EOS row points at 3
              one_hot(5, [1, 2, 3, 4, None]),  # next-1; the last word's next key is </s>
              soft])
    soft2 = torch.tensor([[0.5, 0.5, 0.0], [0.3, 0.4, 0.3], [0.0, 0.0, 0.0]])  # tie -> first key
    r2 = rec(list("xy"), ["x", "y", "</s>"], [0, 1, -1],
             [one_hot(3, [None, 0, 1]), one_hot(3, [1, 2, 0]), soft2])
    return [r1, r2]


def test_prev1_and_next1_heads_are_positional_with_confidence_1():
    roles = head_roles(positional_records(), rare_top=0)
    assert roles["sentences"] == 2
    assert roles["rows"] == [[3 + 1, 3 + 1, 3 + 2]]  # special rows, all-zero and EOS-only rows left out
    assert roles["confidence"][0][:2] == [1.0, 1.0]
    # head 2: 0.2, 0.6, 0.7 and 0.5 (tie at offset 0 and +1: the first), 0.4 (offset 0)
    assert roles["confidence"][0][2] == pytest.approx((0.2 + 0.6 + 0.7 + 0.5 + 0.4) / 5, abs=1e-7)
    assert roles["positional_offset"][0] == [-1, 1, 0]
    assert roles["positional_share"][0] == [1.0, 1.0, pytest.approx(3 / 5)]
    assert roles["roles"] == [["positional", "positional", "other"]]
    assert roles["rare_share"] == [[None] * 3] and roles["rare_sentences"] == 0  # no counts
    assert set(roles["syntactic"]) == set(syntactic_keys())
    assert all(s["instances"] == 0 and s["baseline"] is None and s["accuracy"] == [[None] * 3]
               for s in roles["syntactic"].values())


def test_a_row_without_weight_anywhere_is_left_out_everywhere():
    r = positional_records()[1]
    r["attn"] = torch.zeros_like(r["attn"])
    roles = head_roles([r])
    assert roles["rows"] == [[0, 0, 0]] and roles["confidence"] == [[None] * 3]
    assert roles["positional_offset"] == [[None] * 3] and roles["roles"] == [["other"] * 3]


SYNTAX = [  # words, tokens, word_ids, heads, relations
    (["the", "dog", "barks"], ["the", "do@@", "g", "barks", "</s>"], [0, 1, 1, 2, -1], [1, 2, -1],
     ["det", "nsubj", "root"]),
    (["dogs", "bark", "loudly"], ["dogs", "bark", "loudly", "</s>"], [0, 1, 2, -1], [1, -1, 1],
     ["nsubj", "root", "advmod"]),
    (["I", "see", "cats"], ["I", "see", "cats", "</s>"], [0, 1, 2, -1], [1, -1, 1], ["nsubj", "root", "dobj"]),
    (["dogs", "quickly", "bark"], ["dogs", "quickly", "bark", "</s>"], [0, 1, 2, -1], [2, 2, -1],
     ["nsubj", "advmod", "root"]),
]
# the nsubj head's targets: the verb's row on the subject's last token, the subject's rows on the verb
NSUBJ_TARGETS = [[0, 3, 3, 2, None], [1, 0, 2, None], [1, 0, 2, None], [2, 1, 0, None]]


def syntax_records():
    out = []
    for (words, tokens, word_ids, heads, rels), targets in zip(SYNTAX, NSUBJ_TARGETS):
        T = len(tokens)
        prev1 = one_hot(T, [None] + list(range(T - 1)))
        out.append(rec(words, tokens, word_ids, [one_hot(T, targets), prev1], heads=heads, relations=rels))
    return out


def test_a_head_on_the_subject_scores_1_against_the_exact_baseline():
    roles = head_roles(syntax_records())
    s = roles["syntactic"]
    # nsubj v->s: offsets from the verb's token to the subject's tokens: {-2, -1}, -1, -1, -2 -> -1 in 3 of 4
    assert s["nsubj:head->dep"] == {"accuracy": [[1.0, 0.75]], "baseline": 0.75, "baseline_offset": -1,
                                    "instances": 4}
    # s->v: +2, +1, +1, +2: a tie, the smaller offset wins; prev-1's rows of "do@@" (wrong) and of the
    # first words (no maximum: misses)
    assert s["nsubj:dep->head"] == {"accuracy": [[1.0, 0.0]], "baseline": 0.5, "baseline_offset": 1,
                                    "instances": 4}
    # advmod: +1 and -1 (v->adv), -1 and +1 (adv->v): ties go to the negative offset
    assert s["advmod:head->dep"] == {"accuracy": [[0.0, 0.5]], "baseline": 0.5, "baseline_offset": -1,
                                     "instances": 2}
    assert s["advmod:dep->head"]["baseline_offset"] == -1 and s["advmod:dep->head"]["accuracy"] == [[0.0, 0.5]]
    # dobj is read as obj
    assert s["obj:head->dep"] == {"accuracy": [[0.0, 0.0]], "baseline": 1.0, "baseline_offset": 1, "instances": 1}
    assert s["obj:dep->head"]["accuracy"] == [[0.0, 1.0]] and s["obj:dep->head"]["baseline_offset"] == -1
    assert s["amod:head->dep"]["instances"] == 0 and s["amod:head->dep"]["baseline"] is None
    assert roles["roles"] == [["syntactic", "positional"]]


def test_a_query_row_without_a_maximum_is_a_miss():
    records = syntax_records()
    records[1]["attn"][0, 0, 0] = 0.0  # the nsubj head's row of "dogs" (s->v in sentence 2)
    s = head_roles(records)["syntactic"]["nsubj:dep->head"]
    assert s["accuracy"] == [[0.75, 0.0]] and s["baseline"] == 0.5 and s["instances"] == 4


def test_records_without_relations_have_no_syntactic_scores():
    records = syntax_records()
    for r in records:
        del r["relations"]
    roles = head_roles(records)
    assert all(v["instances"] == 0 for v in roles["syntactic"].values())


def rare_records():
    """Sentence 1: "b" is the rarest word (</s> is rarer but special);
    sentence 2: "x" and "y" tie as the rarest."""
    r1 = rec(list("abc"), [*"abc", "</s>"], [0, 1, 2, -1],
             [one_hot(4, [1, 1, 1, 1]),      # every row on "b": points at it
              one_hot(4, [0, 0, 1, None]),   # "a" has most rows
              one_hot(4, [0, 1, 2, None]),   # identity: a three-way tie, no single token
              one_hot(4, [1, 1, 3, 3])],     # "c"'s row only on </s>: left out; "b" has 2 of 2
             counts=[100, 3, 50, 1], ranks=[0, 30, 10, 40])
    r2 = rec(list("xyz"), [*"xyz", "</s>"], [0, 1, 2, -1],
             [one_hot(4, [2, 2, 2, 2]), one_hot(4, [0, 1, 0, None]), one_hot(4, [0, 1, 2, None]),
              one_hot(4, [1, 1, 0, None])],
             counts=[5, 5, 9, 1], ranks=[12, 12, 8, 40])
    return [r1, r2]


def test_rare_word_share_on_a_hand_example():
    roles = head_roles(rare_records(), rare_top=0)
    assert roles["rare_sentences"] == 2
    assert roles["rare_share"] == [[0.5, 0.5, 0.0, 1.0]]
    # Voita §5.3's filter: sentence 2's rarest tokens are the 12th most frequent
    roles = head_roles(rare_records(), rare_top=20)
    assert roles["rare_sentences"] == 1 and roles["rare_share"] == [[1.0, 0.0, 0.0, 1.0]]
    assert head_roles(rare_records(), rare_top=31)["rare_share"] == [[None] * 4]
    assert roles["roles"] == [["rare", "other", "positional", "rare"]]  # identity: offset 0 in all 6 rows


def test_a_counts_table_overrides_the_dump():
    table = {"a": 1, "b": 7, "c": 9, "x": 4, "y": 6, "z": 2, "</s>": 0}  # z rarest; nothing else counts 0
    roles = head_roles(rare_records(), counts=table, rare_top=0)
    assert roles["rare_share"] == [[0.5, 0.5, 0.0, 0.0]]
    del table["z"]  # a token not in the table counts 0: the rarest
    assert head_roles(rare_records(), counts=table, rare_top=0)["rare_share"] == [[0.5, 0.5, 0.0, 0.0]]
    # ranks from the table: "a" (1) has 4 symbols above it among 6
    assert rank_of(table.values())(1) == 4 and rank_of([5, 5, 9])(5) == 1 and rank_of([3])(3) == 0


def test_read_counts(tmp_path):
    f = tmp_path / "dict.txt"
    f.write_text("the 10\nmad up 3 #fairseq:overwrite\nx 0\n", encoding="utf-8")
    assert read_counts(str(f)) == {"the": 10, "mad up": 3, "x": 0}
    f.write_text("the 10\nbroken\n")
    with pytest.raises(RecordError, match=r"dict.txt: line 2: expected 'symbol count'"):
        read_counts(str(f))
    with pytest.raises(RecordError, match="cannot read the counts file"):
        read_counts(str(tmp_path / "missing.txt"))


def base_roles(share, acc, rare):
    return {"positional_share": [[share]], "rare_share": [[rare]],
            "syntactic": {"nsubj:head->dep": {"accuracy": [[acc]], "baseline": 0.75}}}


@pytest.mark.parametrize("share, acc, rare, role", [
    (0.9, 1.0, 1.0, "positional"),   # 90 % exactly (Voita §5.1), first in precedence
    (0.89, 0.85, 1.0, "syntactic"),  # 10 points exactly above the baseline (0.85 - 0.75 < 0.1 in floats)
    (0.89, 0.84, 0.5, "rare"),
    (0.89, 0.84, 0.49, "other"),
    (None, None, None, "other"),
])
def test_classify_precedence_and_thresholds(share, acc, rare, role):
    assert classify(base_roles(share, acc, rare)) == [[role]]


def test_roles_and_colours():
    assert ROLES == ("positional", "syntactic", "rare", "other") and set(ROLE_COLOURS) == set(ROLES)


def test_malformed_records_are_one_line_errors():
    records = positional_records()
    records[1]["attn"] = records[1]["attn"].repeat(2, 1, 1, 1)
    with pytest.raises(RecordError, match=r"^record 1: 'attn' has 2 layers x 3 heads, expected 1 x 3"):
        head_roles(records)
    bad = syntax_records()[:1]
    bad[0]["relations"] = ["nsubj"]
    with pytest.raises(RecordError, match=r"^record 0: 'relations' must be a list of 3 strings$"):
        head_roles(bad)
    bad = rare_records()[:1]
    bad[0]["counts"] = [1, 2]
    with pytest.raises(RecordError, match="'counts' must be a list of 4 integers"):
        head_roles(bad)


def test_counts_without_ranks_need_rare_top_0():
    records = rare_records()
    for r in records:
        del r["ranks"]
    with pytest.raises(RecordError, match="needs ranks"):
        head_roles(records)
    assert head_roles(records, rare_top=0)["rare_sentences"] == 2
    with pytest.raises(RecordError, match="^no records$"):
        head_roles([])
