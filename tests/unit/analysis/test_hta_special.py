"""The mass on special tokens and (pairs) on the query's own sentence in
``analyze hta``'s hta.json (Pascual et al. §9.1, Fig. 7; H7 and H8 of
``reproduce hta``): exact means on hand-made maps, pooled over the
non-special query rows of several sentences; no same-sentence keys for single
sentences; and the four keys written by ``analyze hta --pairs`` in-process."""

import json
from fractions import Fraction

import pytest
import torch

from fairseq_local.analysis.pairs import read_pairs
from fairseq_local.analysis.positions import PositionStats
from fairseq_local.analysis.relations import RecordError
from fairseq_local_cli.main import main

from test_dump import roberta
from test_pairs_cli import command, stand_in

# <s> a </s> </s> b </s>: queries 1 and 4; special keys 0, 2, 3, 5
WORDS6 = [-1, 0, -1, -1, 1, -1]
SENTS6 = [-1, 0, -1, -1, 1, -1]
# <s> a b </s> </s> c </s>: queries 1, 2 (sentence A) and 5 (sentence B)
WORDS7 = [-1, 0, 1, -1, -1, 2, -1]
SENTS7 = [-1, 0, 0, -1, -1, 1, -1]


def six():
    """(1, 2, 6, 6) attention and input contribution of the 6-token pair: head 0
    chosen rows, head 1 uniform; the special query rows put all on key 1 (ignored)."""
    attn = torch.zeros(1, 2, 6, 6)
    attn[0, 0, :, 1] = 1.0
    attn[0, 0, 1] = torch.tensor([0.5, 0.2, 0.1, 0.1, 0.1, 0.0])  # special 0.7
    attn[0, 0, 4] = torch.tensor([0.1, 0.1, 0.2, 0.2, 0.3, 0.1])  # special 0.6
    attn[0, 1] = 1 / 6
    contrib = torch.zeros(1, 2, 6, 6)
    contrib[0, 0, :, 1] = 1.0
    contrib[0, 0, 1] = torch.tensor([0.1, 0.6, 0.1, 0.0, 0.2, 0.0])  # special 0.2, own (token 1) 0.6
    contrib[0, 0, 4] = torch.tensor([0.0, 0.3, 0.1, 0.1, 0.4, 0.1])  # special 0.3, own (token 4) 0.4
    contrib[0, 1] = 1 / 6
    return attn, contrib


def uniform(length: int) -> torch.Tensor:
    return torch.full((1, 2, length, length), 1 / length)


def test_one_pair_by_hand():
    attn, contrib = six()
    stats = PositionStats(max_len=6)
    stats.add(attn, input_contrib=contrib, word_ids=WORDS6, sentence_ids=SENTS6)
    r = stats.result()
    assert r["attention_special"] == [pytest.approx([0.65, 2 / 3], abs=1e-7)]
    assert r["contribution_special"] == [pytest.approx([0.25, 2 / 3], abs=1e-7)]
    assert r["contribution_same_sentence"] == [pytest.approx([0.5, 1 / 6], abs=1e-7)]
    assert r["same_sentence_share"] == pytest.approx(1 / 6)  # one own token of 6, for both queries


def test_rows_are_pooled_over_pairs_and_a_uniform_row_meets_the_share():
    attn, contrib = six()
    stats = PositionStats(max_len=7)
    stats.add(attn, input_contrib=contrib, word_ids=WORDS6, sentence_ids=SENTS6)
    stats.add(uniform(7), input_contrib=uniform(7), word_ids=WORDS7, sentence_ids=SENTS7)
    r = stats.result()
    # 2 + 3 query rows; the 7-token pair's rows put 4/7 on its 4 special tokens
    rows = 5
    assert r["attention_special"][0][0] == pytest.approx(float((Fraction(13, 10) + 3 * Fraction(4, 7)) / rows))
    assert r["contribution_special"][0][0] == pytest.approx(float((Fraction(1, 2) + 3 * Fraction(4, 7)) / rows))
    # own sentence: 0.6 and 0.4, then 2/7, 2/7 (A has 2 tokens) and 1/7 (B has 1)
    assert r["contribution_same_sentence"][0][0] == pytest.approx(float((1 + Fraction(5, 7)) / rows))
    share = (Fraction(2, 6) + Fraction(5, 7)) / rows  # own-sentence tokens / all tokens, per query row
    assert share == Fraction(22, 105) and r["same_sentence_share"] == pytest.approx(float(share))
    assert r["contribution_same_sentence"][0][1] == pytest.approx(float(share))  # uniform rows: the baseline


def test_single_sentences_have_no_same_sentence_keys():
    attn = uniform(4)
    contrib = torch.zeros(1, 2, 4, 4)
    contrib[..., 1] = 1.0  # every row on "a"
    stats = PositionStats(max_len=4)
    stats.add(attn, input_contrib=contrib, word_ids=[-1, 0, 1, -1])  # <s> a b </s>
    r = stats.result()
    assert r["attention_special"] == [pytest.approx([0.5, 0.5])]
    assert r["contribution_special"] == [[0.0, 0.0]]
    assert "contribution_same_sentence" not in r and "same_sentence_share" not in r


def test_without_ids_or_input_contribution():
    stats = PositionStats(max_len=6)
    stats.add(uniform(6))  # no word_ids: nothing to count
    r = stats.result()
    assert r["attention_special"] is None and r["contribution_special"] is None
    assert "same_sentence_share" not in r
    stats.add(six()[0], word_ids=WORDS6, sentence_ids=SENTS6)  # a pair without input contribution
    r = stats.result()
    assert r["attention_special"] == [pytest.approx([0.65, 2 / 3], abs=1e-7)]
    assert r["contribution_special"] is None
    assert r["contribution_same_sentence"] is None and r["same_sentence_share"] is None


def test_bad_ids():
    stats = PositionStats(max_len=6)
    with pytest.raises(RecordError, match="word_ids has 5 entries, the attention 6 tokens"):
        stats.add(uniform(6), word_ids=WORDS6[:5])
    with pytest.raises(RecordError, match="sentence_ids need word_ids"):
        stats.add(uniform(6), sentence_ids=SENTS6)
    assert stats.sentences == 0 and stats.result()["attention_histogram"] is None


def expected_share(path) -> float:
    """same_sentence_share of a pair file, from the stand-in model's tokenisation."""
    model, total, rows = roberta(), Fraction(0), 0
    for pair in read_pairs(str(path)):
        sids = model.tokenise(pair.first, pair.second).sentence_ids
        for s in sids:
            if s != -1:
                total += Fraction(sids.count(s), len(sids))
                rows += 1
    return float(total / rows)


def test_analyze_hta_pairs_writes_the_four_keys(tmp_path, monkeypatch, capsys):
    stand_in(monkeypatch)  # 2 layers x 4 heads
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("the a\tcat go\ngo\ta dog ran\n", encoding="utf-8")
    out = tmp_path / "hta"
    assert main(command("hta", out, "--pairs", pairs, "--max-len", 24)) == 0
    r = json.loads((out / "hta.json").read_text())
    grids = ("attention_special", "contribution_special", "contribution_same_sentence")
    for key in grids:
        assert len(r[key]) == 2 and all(len(row) == 4 for row in r[key]), key
        assert all(0 <= v <= 1 + 1e-6 for row in r[key] for v in row), key
    for special, same in zip(r["contribution_special"], r["contribution_same_sentence"]):
        assert all(a + b <= 1 + 1e-5 for a, b in zip(special, same))  # a contribution row sums to 1
    assert r["same_sentence_share"] == pytest.approx(expected_share(pairs))
    text = tmp_path / "s.txt"
    text.write_text("the cat\ngo a dog\n")
    assert main(command("hta", tmp_path / "single", "--text", text, "--max-len", 24)) == 0
    r = json.loads((tmp_path / "single" / "hta.json").read_text())
    assert len(r["attention_special"]) == 2 and len(r["contribution_special"][0]) == 4
    assert "contribution_same_sentence" not in r and "same_sentence_share" not in r
