"""gamma_local / gamma_syntactic / gamma_unrelated (Pande et al. §3.1, Eq. 5-7) on hand-made beta."""

from fractions import Fraction

import pytest
import torch

from fairseq_local.analysis.relations import RecordError, position_sets
from fairseq_local.analysis.sensitivity import SensitivityAccumulator, sensitivity_table, sentence_gamma


def record(word_ids, heads=None):
    rec = {
        "tokens": [f"t{i}" for i in range(len(word_ids))],
        "word_ids": list(word_ids),
        "words": [f"w{w}" for w in range(max(word_ids) + 1)],
    }
    if heads is not None:
        rec["heads"] = list(heads)
    return rec


def beta(length):
    """Layer 0: beta[i, j] = T * i + j; layer 1: all ones."""
    return torch.stack([torch.arange(length * length, dtype=torch.float32).reshape(length, length),
                        torch.ones(length, length)])


# four words and </s>; w3 is the root.  S_0 = {3}, S_3 = {0}; U_0 = U_1 = {4}
PARSED = record([0, 1, 2, 3, -1], heads=[3, 0, 3, -1])


def test_gammas_of_a_parsed_sentence():
    gamma = sentence_gamma(beta(5), position_sets(PARSED))
    # local: means over L_i of beta[i, j] = 5i + j for i = 0..3: 1, 13/2, 12, 35/2
    assert gamma["local"][0] == float((1 + Fraction(13, 2) + 12 + Fraction(35, 2)) / 4)
    assert gamma["local"][0] == float(Fraction(37, 4))
    assert gamma["syntactic"][0] == float(Fraction(3 + 15, 2))  # beta[0, 3], beta[3, 0]
    assert gamma["unrelated"][0] == float(Fraction(4 + 9, 2))  # beta[0, 4], beta[1, 4]
    assert gamma["local"][1] == gamma["syntactic"][1] == gamma["unrelated"][1] == 1.0


def test_without_syntax_unrelated_is_everything_outside_the_window():
    gamma = sentence_gamma(beta(5), position_sets(record([0, 1, 2, 3, -1])))
    assert gamma["syntactic"] == [None, None]
    # U_0 = {3, 4}, U_1 = {4}, U_2 = {}, U_3 = {0}
    assert gamma["unrelated"][0] == pytest.approx(float((Fraction(7, 2) + 9 + 15) / 3))
    assert gamma["unrelated"][0] == pytest.approx(55 / 6)


def test_empty_sets_give_none_and_the_accumulator_keeps_them_in_order():
    acc = SensitivityAccumulator()
    acc.add(beta(5), position_sets(PARSED))
    short = acc.add(beta(3), position_sets(record([0, 1, -1])))  # everything is local
    assert short == {"local": [2.5, 1.0], "syntactic": [None, None], "unrelated": [None, None]}
    result = acc.result()
    assert result == {
        "local": [[37 / 4, 2.5], [1.0, 1.0]],
        "syntactic": [[9.0, None], [1.0, None]],
        "unrelated": [[6.5, None], [1.0, None]],
        "sentences": 2,
    }
    table = sensitivity_table(result).splitlines()
    assert table[0] == "| layer | γ local | γ syntactic | γ unrelated |"
    assert table[2] == "| 0 | 5.8750 | 9.0000 | 6.5000 |"  # (37/4 + 5/2) / 2
    assert table[3] == "| 1 | 1.0000 | 1.0000 | 1.0000 |"


def test_zero_outside_the_window_is_exactly_zero():
    b = beta(5)
    sets = position_sets(record([0, 1, 2, 3, -1]))
    b[:, sets.unrelated] = 0.0
    assert sentence_gamma(b, sets)["unrelated"] == [0.0, 0.0]


def test_shape_errors():
    with pytest.raises(RecordError, match=r"beta has shape \(2, 4, 4\), expected \(L, 5, 5\)"):
        sentence_gamma(beta(4), position_sets(PARSED))
    acc = SensitivityAccumulator()
    acc.add(beta(5), position_sets(PARSED))
    with pytest.raises(RecordError, match="beta has 1 layers, expected 2"):
        acc.add(beta(5)[:1], position_sets(PARSED))
