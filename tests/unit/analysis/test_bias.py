"""Locality and syntactic bias scores (Pande et al. §3.2, Eq. 8) with exact expected values."""

from fractions import Fraction

import pytest
import torch

from fairseq_local.analysis.bias import bias_scores, bias_table, sentence_bias
from fairseq_local.analysis.relations import RecordError, position_sets


def record(word_ids, attn, heads=None):
    rec = {
        "tokens": [f"t{i}" for i in range(len(word_ids))],
        "word_ids": list(word_ids),
        "words": [f"w{w}" for w in range(max(word_ids) + 1)],
        "attn": attn,
    }
    if heads is not None:
        rec["heads"] = list(heads)
    return rec


def one_hot_head(targets, length):
    """(1, 1, T, T) attention: row i puts weight 1 on targets[i] (None: an all-zero row)."""
    attn = torch.zeros(1, 1, length, length)
    for i, j in enumerate(targets):
        if j is not None:
            attn[0, 0, i, j] = 1.0
    return attn


def score(result, kind):
    return Fraction(result[kind][0][0]).limit_denominator(1000)


# eight one-token words and </s>; w5 is the root
HEADS = [5, 0, 0, 7, 7, -1, 5, 5]
WORDS8 = [0, 1, 2, 3, 4, 5, 6, 7, -1]
# every word attends to its syntactic head, the root and </s> to themselves
TO_HEAD = one_hot_head([5, 0, 0, 7, 7, 5, 5, 5, 8], 9)
# NMT source of five words and </s>; row 0 has no previous token (a closed row)
PREV1 = one_hot_head([None, 0, 1, 2, 3, 4], 6)


def test_a_uniform_head_scores_exactly_one():
    length = 8
    attn = torch.full((2, 3, length, length), 1.0 / length)
    result = bias_scores([record(WORDS8[:7] + [-1], attn, heads=[1, -1, 1, 1, 3, 3, 1])])
    assert result["local"] == [[1.0] * 3] * 2
    assert result["syntactic"] == [[1.0] * 3] * 2
    assert result["sentences"] == 1
    # and to rounding for any length
    odd = bias_scores([record(WORDS8, torch.full((1, 1, 9, 9), 1 / 9), HEADS)])
    assert odd["local"][0][0] == pytest.approx(1, abs=1e-12)
    assert odd["syntactic"][0][0] == pytest.approx(1, abs=1e-12)


def test_prev1_head_with_boundary_rows():
    # L_i sizes 4, 5, 5, 4 for i = 1..4 of T = 6: a(i, L) = T / |L_i|; row 0 is skipped
    result = bias_scores([record([0, 1, 2, 3, 4, -1], PREV1)])
    expected = (Fraction(6, 4) + Fraction(6, 5) + Fraction(6, 5) + Fraction(6, 4)) / 4
    assert expected == Fraction(27, 20)
    assert result["local"][0][0] == pytest.approx(float(expected), abs=1e-12)
    assert result["syntactic"] == [[None]]


def test_head_attending_to_the_syntactic_head():
    result = bias_scores([record(WORDS8, TO_HEAD, HEADS)])
    # S_i non-empty for i = 0, 3, 4, 5, 7 with a = 9, 9, 9, 0, 0
    assert score(result, "syntactic") == Fraction(27, 5)
    # a(i, L) = 9 * [head in L_i] / |L_i| = 0, 9/4, 9/5, 0, 0, 9/5, 9/5, 9/4
    assert score(result, "local") == Fraction(99, 80)
    assert result["syntactic"][0][0] == pytest.approx(27 / 5, abs=1e-12)
    assert result["local"][0][0] == pytest.approx(99 / 80, abs=1e-12)


def test_subword_tokens():
    # <s> a b c d e@@ f </s>; word 4 ("ef", tokens 5 and 6) is the root
    word_ids, heads = [-1, 0, 1, 2, 3, 4, 4, -1], [4, 0, 0, 4, -1]
    # each token attends to the first token of its head word (root word: token 5)
    attn = one_hot_head([0, 5, 1, 1, 5, 5, 5, 7], 8)
    result = bias_scores([record(word_ids, attn, heads)])
    # S_1 = {5, 6}: (1/2) / (1/8) = 4; S_5 = S_6 = {1}: 0
    assert result["syntactic"][0][0] == pytest.approx(float(Fraction(4, 3)), abs=1e-12)
    # a(i, L) = 0, 8/5, 8/5, 8/5, 8/5, 8/4 for i = 1..6
    assert result["local"][0][0] == pytest.approx(float(Fraction(7, 5)), abs=1e-12)


def test_special_tokens_are_keys_in_local_windows_but_no_queries():
    # every word attends to </s> (token 8), which is in L_6 (size 5) and L_7 (size 4);
    # the row of </s> itself (onto token 7, local) is no query and does not count
    attn = one_hot_head([8, 8, 8, 8, 8, 8, 8, 8, 7], 9)
    expected = (Fraction(9, 5) + Fraction(9, 4)) / 8
    assert expected == Fraction(81, 160)
    assert bias_scores([record(WORDS8, attn)])["local"][0][0] == pytest.approx(float(expected), abs=1e-12)


def test_corpus_mean_over_sentences_with_a_defined_score():
    result = bias_scores([record([0, 1, 2, 3, 4, -1], PREV1), record(WORDS8, TO_HEAD, HEADS)])
    assert result["sentences"] == 2
    assert result["local"][0][0] == pytest.approx(float((Fraction(27, 20) + Fraction(99, 80)) / 2), abs=1e-12)
    assert result["syntactic"][0][0] == pytest.approx(27 / 5, abs=1e-12)  # only the parsed sentence


def test_closed_heads_are_skipped():
    uniform = torch.full((1, 2, 9, 9), 1 / 9)
    closed = uniform.clone()
    closed[0, 1] = 0.0
    sets = position_sets(record(WORDS8, closed, HEADS))
    per_sentence = sentence_bias(closed, sets.local, sets.queries)
    assert per_sentence.dtype == torch.float64
    assert per_sentence[0, 0].item() == pytest.approx(1) and torch.isnan(per_sentence[0, 1])
    result = bias_scores([record(WORDS8, closed, HEADS), record(WORDS8, uniform, HEADS)])
    assert result["local"][0][1] == pytest.approx(1)  # the closed sentence does not count
    assert bias_scores([record(WORDS8, closed, HEADS)])["local"][0][1] is None


def test_errors_name_the_record():
    good = record([0, 1, -1], torch.zeros(1, 1, 3, 3))
    with pytest.raises(RecordError, match="record 1: missing key 'attn'"):
        bias_scores([good, {"tokens": [], "word_ids": [], "words": []}])
    with pytest.raises(RecordError, match="record 1: 'attn' has 2 layers x 1 heads, expected 1 x 1"):
        bias_scores([good, record([0, 1, -1], torch.zeros(2, 1, 3, 3))])
    with pytest.raises(RecordError, match="no records"):
        bias_scores([])


def test_table_lists_means_and_heads_above_the_threshold():
    scores = {"local": [[4.0, 1.0], [None, 2.0]], "syntactic": [[None, None], [None, None]], "sentences": 3}
    table = bias_table(scores)
    lines = table.splitlines()
    assert lines[0].startswith("| layer | mean locality | mean syntactic | locality > 3 |")
    assert lines[2] == "| 0 | 2.500 | – | 1/2 (h0) | – |"
    assert lines[3] == "| 1 | 2.000 | – | 0/2 | – |"
