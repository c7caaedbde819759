"""Position sets L_i, S_i, U_i of hand-made records (Pande et al. §3.1/§3.2)."""

import pytest
import torch

from fairseq_local.analysis.relations import RecordError, position_sets


def rows(matrix):
    """A bool (T, T) matrix as a list of sets of column indices."""
    return [set(torch.nonzero(row).flatten().tolist()) for row in matrix]


def record(word_ids, heads=None, n_words=None, attn=True):
    n_words = n_words if n_words is not None else max(word_ids) + 1
    rec = {
        "tokens": [f"t{i}" for i in range(len(word_ids))],
        "word_ids": list(word_ids),
        "words": [f"w{w}" for w in range(n_words)],
    }
    if heads is not None:
        rec["heads"] = list(heads)
    if attn:
        rec["attn"] = torch.zeros(1, 1, len(word_ids), len(word_ids))
    return rec


# eight one-token words and a final </s>; w5 is the root
HEADS = [5, 0, 0, 7, 7, -1, 5, 5]
WORDS8 = [0, 1, 2, 3, 4, 5, 6, 7, -1]


def test_sets_of_a_parsed_sentence():
    sets = position_sets(record(WORDS8, HEADS))
    assert sets.queries.tolist() == [True] * 8 + [False]
    assert rows(sets.local) == [
        {0, 1, 2}, {0, 1, 2, 3}, {0, 1, 2, 3, 4}, {1, 2, 3, 4, 5}, {2, 3, 4, 5, 6},
        {3, 4, 5, 6, 7}, {4, 5, 6, 7, 8}, {5, 6, 7, 8}, set(),
    ]
    assert rows(sets.syntactic) == [{5}, set(), set(), {7}, {7}, {0}, set(), {3, 4}, set()]
    assert rows(sets.unrelated) == [
        {3, 4, 6, 7, 8}, {4, 5, 6, 7, 8}, {5, 6, 7, 8}, {0, 6, 8}, {0, 1, 8},
        {1, 2, 8}, {0, 1, 2, 3}, {0, 1, 2}, set(),
    ]
    # the three sets partition each query row
    total = sets.local.int() + sets.syntactic.int() + sets.unrelated.int()
    assert total[:8].eq(1).all() and total[8].eq(0).all()


# <s> a b c d e@@ f </s>: word 4 ("ef") has two tokens
SUBWORD_IDS = [-1, 0, 1, 2, 3, 4, 4, -1]
SUBWORD_HEADS = [4, 0, 0, 4, -1]


def test_subword_tokens_bring_every_token_of_the_related_word():
    sets = position_sets(record(SUBWORD_IDS, SUBWORD_HEADS))
    assert rows(sets.syntactic) == [set(), {5, 6}, set(), set(), set(), {1}, {1}, set()]
    # both tokens of the root word: dependents w0 (token 1) and w3 (token 4)
    narrow = position_sets(record(SUBWORD_IDS, SUBWORD_HEADS), window=0)
    assert rows(narrow.syntactic)[5] == {1, 4} and rows(narrow.syntactic)[6] == {1, 4}
    # tokens of one word are not related to each other
    assert 6 not in rows(narrow.syntactic)[5] and 6 in rows(narrow.unrelated)[5]


def test_special_tokens_are_no_queries_but_are_in_local_windows():
    sets = position_sets(record(SUBWORD_IDS, SUBWORD_HEADS))
    assert sets.queries.tolist() == [False, True, True, True, True, True, True, False]
    assert rows(sets.local)[1] == {0, 1, 2, 3} and rows(sets.local)[6] == {4, 5, 6, 7}
    for matrix in (sets.local, sets.syntactic, sets.unrelated):
        assert not matrix[0].any() and not matrix[7].any()
    assert 0 in rows(sets.unrelated)[5]  # a special token outside the window is unrelated


def test_without_heads_there_is_no_syntactic_set():
    sets = position_sets(record(WORDS8))
    assert sets.syntactic is None
    assert rows(sets.unrelated)[0] == {3, 4, 5, 6, 7, 8}
    assert torch.equal(sets.unrelated, sets.queries[:, None] & ~sets.local)


def test_length_comes_from_word_ids_without_attention():
    sets = position_sets(record([0, 1, -1], attn=False))
    assert sets.length == 3 and sets.queries.tolist() == [True, True, False]


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda r: r.pop("word_ids"), "missing key 'word_ids'"),
        (lambda r: r.update(word_ids=[0, 1, 2]), "'word_ids' has 3 entries for T = 4"),
        (lambda r: r.update(word_ids=[0, 1, 3, -1]), "word id 3 of token 2 out of range for 3 words"),
        (lambda r: r.update(word_ids=[0, 1, -2, -1]), "word id -2 of token 2"),
        (lambda r: r.update(heads=[1, -1]), "'heads' has 2 entries for 3 words"),
        (lambda r: r.update(heads=[1, -1, 3]), "head 3 of word 2 out of range"),
        (lambda r: r.update(heads=[0, -1, 1]), "word 0 is its own head"),
        (lambda r: r.update(attn=torch.zeros(4, 4)), r"'attn' must be a \(L, H, T, T\) tensor"),
        (lambda r: r.update(tokens=["a"]), "'tokens' has 1 entries"),
        (lambda r: r.update(word_ids="0 1 2"), "'word_ids' must be a list of integers"),
    ],
)
def test_bad_records_raise_one_line_errors(change, message):
    rec = record([0, 1, 2, -1], heads=[1, -1, 1])
    change(rec)
    with pytest.raises(RecordError, match=message) as err:
        position_sets(rec)
    assert "\n" not in str(err.value)
