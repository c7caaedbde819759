"""Sentence pairs (Pascual et al. §5: MNLI pairs) as analysis input, on models
built in-process: the RoBERTa encoding ``<s> A </s> </s> B </s>`` of
fairseq's sentence_prediction task, each sentence's words on their own tokens,
the segment ids a --segment-embeddings model reads from them, the pair file
reader and its one-line errors, and the analyses on pair records."""

import pytest
import torch

from fairseq_local.analysis.bias import bias_scores
from fairseq_local.analysis.contribution import input_contribution
from fairseq_local.analysis.dump import dump_records, load_dump, prepare, save_dump
from fairseq_local.analysis.model import AnalysisError, AnalysisModel
from fairseq_local.analysis.pairs import SentencePair, read_pairs
from fairseq_local.analysis.positions import PositionStats
from fairseq_local.analysis.relations import position_sets
from fairseq_local.analysis.roles import head_roles
from fairseq_local.models.roberta import build_roberta, segment_ids
from fairseq_local.models.transformer import dummy_dictionary

from test_dump import DIMS, VOCAB, nmt, pieces, roberta

PAIRS = [SentencePair(["the", "a"], ["cat", "go"]), SentencePair(["go"], ["a", "dog", "ran"])]


def test_pair_tokens_separator_and_word_map():
    m = roberta()
    tok = m.tokenise(["the", "a"], ["cat", "go"])
    #            0      1       2    3     4       5       6       7    8     9
    assert tok.tokens == ["<s>", "th@@", "e", "a", "</s>", "</s>", "ca@@", "t", "go", "</s>"]
    d = m.dictionary
    assert [tok.ids[k] for k in (0, 4, 5, 9)] == [d.bos(), d.eos(), d.eos(), d.eos()]
    assert tok.separator == [4, 5]
    assert tok.word_ids == [-1, 0, 0, 1, -1, -1, 2, 2, 3, -1]
    assert tok.sentence_ids == [-1, 0, 0, 0, -1, -1, 1, 1, 1, -1]
    # each sentence is tokenised as on its own: the same pieces as two single sentences
    a, b = m.tokenise(["the", "a"]), m.tokenise(["cat", "go"])
    assert tok.ids == a.ids + [d.eos()] + b.ids[1:]  # <s> A </s> + </s> + B </s>
    assert a.sentence_ids is None and a.separator is None


def test_pair_first_word_of_b_is_a_sentence_start():
    """GPT-2's BPE sees each GLUE column on its own: B's first word is a sentence start."""
    seen = []
    m = roberta()
    m.tokeniser = lambda word, first: seen.append((word, first)) or pieces(word, first)
    m.tokenise(["x", "y"], ["z", "w"])
    assert seen == [("x", True), ("y", False), ("z", True), ("w", False)]


def test_segment_ids_of_a_pair_with_segment_embeddings():
    """A --segment-embeddings model reads segment 1 from the second </s> on;
    a BERT (with --positions absolute, as convert-hf writes it) gets BERT's
    pair, <s> A </s> B </s>: one separator, segment 1 right after it."""
    torch.manual_seed(0)
    model = build_roberta("roberta_local_base", dict(DIMS, attn_layout="[global*4]*2", max_positions=24,
                                                     segment_embeddings=True), vocab_size=VOCAB)
    m = AnalysisModel(model, dummy_dictionary(VOCAB), pieces)
    tok = m.tokenise(["the", "a"], ["cat", "go"])
    segments = segment_ids(torch.tensor([tok.ids]), m.dictionary.eos())[0].tolist()
    assert segments == [0, 0, 0, 0, 0, 1, 1, 1, 1, 1]
    items, _ = prepare(m, PAIRS)
    src, lengths = m.collate([it.input for it in items])
    c = input_contribution(m, src, lengths)  # (B, L, H, T, T); the segment embedding is part of e
    assert c.shape == (2, 2, 4, src.shape[1], src.shape[1])
    torch.testing.assert_close(c[0].sum(-1), torch.ones(2, 4, 10))
    bert = build_roberta("roberta_local_base", dict(DIMS, attn_layout="[global*4]*2", max_positions=24,
                                                    segment_embeddings=True, positions="absolute"), vocab_size=VOCAB)
    b = AnalysisModel(bert, dummy_dictionary(VOCAB), pieces)
    tok = b.tokenise(["the", "a"], ["cat", "go"])
    segments = segment_ids(torch.tensor([tok.ids]), b.dictionary.eos())[0].tolist()
    assert tok.separator == [tok.ids.index(b.dictionary.eos())] and tok.ids.count(b.dictionary.eos()) == 2
    assert segments == [0] * (tok.separator[0] + 1) + [1] * (len(tok.ids) - tok.separator[0] - 1)
    sep = tok.separator[0]
    assert tok.sentence_ids == [-1, *[0] * (sep - 1), -1, *[1] * (len(tok.ids) - sep - 2), -1]


def test_translation_models_refuse_pairs():
    with pytest.raises(AnalysisError, match="sentence pairs need a RoBERTa model"):
        prepare(nmt(), PAIRS)


def test_pair_records_and_dump_round_trip(tmp_path):
    m = roberta()
    items, skipped = prepare(m, PAIRS)
    records = dump_records(m, items, progress=False)
    assert skipped == 0 and len(records) == 2
    rec = records[1]  # <s> go </s> </s> a dog ran </s>
    assert rec["words"] == ["go", "a", "dog", "ran"]
    assert rec["tokens"] == ["<s>", "go", "</s>", "</s>", "a", "do@@", "g", "ra@@", "n", "</s>"]
    assert rec["word_ids"] == [-1, 0, -1, -1, 1, 2, 2, 3, 3, -1]
    assert rec["sentence_ids"] == [-1, 0, -1, -1, 1, 1, 1, 1, 1, -1] and rec["separator"] == [2, 3]
    assert "heads" not in rec and rec["attn"].shape == (2, 4, 10, 10)
    save_dump(records, str(tmp_path / "pairs.pt"))
    back = load_dump(str(tmp_path / "pairs.pt"))
    assert back[1]["separator"] == [2, 3] and back[0]["sentence_ids"] == records[0]["sentence_ids"]
    bad = [dict(records[0], sentence_ids=[0, 1])]
    save_dump(bad, str(tmp_path / "bad.pt"))
    with pytest.raises(AnalysisError, match="'sentence_ids' not of its 10 tokens"):
        load_dump(str(tmp_path / "bad.pt"))


def test_pair_length_counts_both_sentences():
    m = roberta()
    items, skipped = prepare(m, PAIRS, max_len=9)  # the pairs are 10 tokens each
    assert not items and skipped == 2
    long = SentencePair(["abc"] * 6, ["abc"] * 6)  # 24 pieces + 4 specials > 24 positions
    items, skipped = prepare(m, PAIRS + [long])
    assert skipped == 1 and len(items) == 2


def test_dump_readers_work_on_pair_records():
    m = roberta()
    records = dump_records(m, prepare(m, PAIRS)[0], progress=False)
    sets = position_sets(records[0])  # special tokens (separator too) are no queries
    assert sets.queries.tolist() == [False, True, True, True, False, False, True, True, True, False]
    assert sets.syntactic is None
    scores = bias_scores(records)
    assert len(scores["local"]) == 2 and all(v is None for row in scores["syntactic"] for v in row)
    roles = head_roles(records)
    assert len(roles["roles"]) == 2 and len(roles["roles"][0]) == 4
    stats = PositionStats(10)
    for r in records:
        stats.add(r["attn"])
    assert len(stats.result()["attention_centre"]) == 2


def write(path, text):
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_read_pairs_two_columns_and_glue_header(tmp_path):
    plain = write(tmp_path / "p.tsv", "the a\tcat go\n\ngo\ta dog ran\r\n")
    assert read_pairs(plain) == PAIRS
    glue = write(tmp_path / "dev_matched.tsv", "index\tsentence1\tsentence2\tgold_label\n"
                 "0\tthe a\tcat go\tneutral\n1\tgo\ta dog ran\tentailment\n")
    assert read_pairs(glue, "sentence1,sentence2") == PAIRS
    assert read_pairs(glue, "sentence2,sentence1")[0] == SentencePair(["cat", "go"], ["the", "a"])


@pytest.mark.parametrize("text,columns,message", [
    ("", None, "no sentence pairs"),
    ("\n\n", None, "no sentence pairs"),
    ("just one column\n", None, "line 1: 1 tab-separated field(s), expected 2"),
    ("a\tb\nc\td\te\n", None, "line 2: 3 tab-separated field(s), expected 2"),
    ("a\t \n", None, "line 1: sentence B is empty"),
    ("", "sentence1,sentence2", "empty, no header"),
    ("s1\ts2\n", "sentence1,sentence2", "the header has no column 'sentence1'"),
    ("sentence1\tsentence2\nonly one\n", "sentence1,sentence2", "line 2: 1 field(s), no column 2"),
    ("a\tb\n", "sentence1", "give two different column names"),
    ("a\tb\n", "x,x", "give two different column names"),
])
def test_bad_pair_files(tmp_path, text, columns, message):
    path = write(tmp_path / "bad.tsv", text)
    with pytest.raises(AnalysisError) as e:
        read_pairs(path, columns)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_unreadable_pair_files(tmp_path):
    with pytest.raises(AnalysisError, match="cannot read the pair file"):
        read_pairs(str(tmp_path / "missing.tsv"))
    (tmp_path / "latin1.tsv").write_bytes("a\tb\ncaf\xe9\tx\n".encode("latin-1"))
    with pytest.raises(AnalysisError, match="line 2: not UTF-8 text"):
        read_pairs(str(tmp_path / "latin1.tsv"))
