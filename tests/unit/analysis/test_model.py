"""The model's own tokeniser applied word by word: the tokens of each word,
concatenated, are exactly what the tokeniser makes of the whole sentence
(GPT-2 byte-level BPE, SentencePiece, subword-nmt with its vocabulary), and the
tokeniser of a data folder is found from its bpe/ files."""

import pytest

from fairseq_local.analysis.model import AnalysisError, find_tokeniser, word_tokeniser
from fairseq_local_data.bpe import train_sentencepiece
from helpers import ROOT

DEFAULT_GPT2_DIR = ROOT / "data-bin" / "gpt2-bpe"

LINES = ["the quick brown fox jumps over the lazy dog", "a dog , a fox and some unseenwords here",
         "brownish foxes jumped quickly over lazier dogs"]


def tokens(tokenise, line):
    words = line.split()
    return [t for w, word in enumerate(words) for t in tokenise(word, w == 0)]


@pytest.mark.skipif(not (DEFAULT_GPT2_DIR / "encoder.json").is_file(), reason="no GPT-2 files (setup_env.sh)")
def test_gpt2_word_by_word_equals_the_sentence():
    from fairseq_local_data.bpe import encode_lines

    tokenise = word_tokeniser("gpt2", str(DEFAULT_GPT2_DIR))
    assert tokens(tokenise, "Hello world") == [("15496", "Hello"), ("995", " world")]
    for line in LINES:
        assert " ".join(s for s, _ in tokens(tokenise, line)) == encode_lines([line], "gpt2", DEFAULT_GPT2_DIR)[0]


def test_sentencepiece_word_by_word_equals_the_sentence(tmp_path):
    import sentencepiece as spm

    (tmp_path / "train.txt").write_text("\n".join(LINES * 20) + "\n")
    train_sentencepiece(tmp_path / "train.txt", tmp_path / "spm", vocab_size=60, threads=1)
    sp = spm.SentencePieceProcessor(model_file=str(tmp_path / "spm.model"))
    tokenise = word_tokeniser("sentencepiece", str(tmp_path / "spm.model"))
    for line in LINES:
        assert [s for s, _ in tokens(tokenise, line)] == sp.encode(line, out_type=str)


def test_subword_nmt_with_its_vocabulary_as_bpe_binarize(tmp_path):
    from subword_nmt.apply_bpe import BPE, read_vocabulary
    from subword_nmt.learn_bpe import learn_bpe

    bpe_dir = tmp_path / "bpe"
    bpe_dir.mkdir()
    with open(bpe_dir / "codes", "w") as out:
        learn_bpe(LINES * 5, out, 30)
    (bpe_dir / "vocab.src").write_text("the 10\nfox 3\nq@@ 2\n")
    with open(bpe_dir / "codes") as c, open(bpe_dir / "vocab.src") as v:
        reference = BPE(c, vocab=read_vocabulary(v, 1))
    kind, model = find_tokeniser(str(tmp_path))
    assert kind == "subword_nmt" and model == str(bpe_dir / "codes")
    tokenise = word_tokeniser(kind, model, "src")
    for line in LINES:
        assert " ".join(s for s, _ in tokens(tokenise, line)) == reference.process_line(line)
    assert tokens(word_tokeniser("none", None), "a b") == [("a", "a"), ("b", "b")]


def test_finding_the_tokeniser_of_a_data_folder(tmp_path):
    with pytest.raises(AnalysisError, match="cannot tell the tokeniser"):
        find_tokeniser(str(tmp_path))
    (tmp_path / "bpe").mkdir()
    (tmp_path / "bpe" / "spm.model").write_text("x")
    assert find_tokeniser(str(tmp_path)) == ("sentencepiece", str(tmp_path / "bpe" / "spm.model"))
    (tmp_path / "bpe" / "spm.model").unlink()
    for name in ("encoder.json", "vocab.bpe"):
        (tmp_path / "bpe" / name).write_text("x")
    assert find_tokeniser(str(tmp_path)) == ("gpt2", str(tmp_path / "bpe"))
    with pytest.raises(AnalysisError, match="missing SentencePiece model"):
        word_tokeniser("sentencepiece", str(tmp_path / "none.model"))
    with pytest.raises(AnalysisError, match="unknown --bpe"):
        word_tokeniser("unigram", None)
    with pytest.raises(AnalysisError, match="--bpe wordpiece needs --bpe-model VOCAB.txt"):
        word_tokeniser("wordpiece", None)
    with pytest.raises(AnalysisError, match="--bpe byte_bpe needs --bpe-model DIR with vocab.json and merges.txt"):
        word_tokeniser("byte_bpe", str(tmp_path))
    (tmp_path / "bpe" / "encoder.json").unlink()  # a folder written by convert-hf: its own tokenizer files
    (tmp_path / "vocab.json").write_text("{}")
    (tmp_path / "merges.txt").write_text("#version: 0.2\n")
    assert find_tokeniser(str(tmp_path)) == ("byte_bpe", str(tmp_path))
    (tmp_path / "vocab.txt").write_text("[PAD]\n")
    assert find_tokeniser(str(tmp_path)) == ("wordpiece", str(tmp_path / "vocab.txt"))


def test_a_file_that_is_not_a_checkpoint_is_one_line(tmp_path):
    from fairseq_local.analysis.model import AnalysisModel

    (tmp_path / "x.pt").write_bytes(b"\x80\x02garbage")
    for path in (tmp_path / "x.pt", tmp_path / "missing.pt"):
        with pytest.raises(AnalysisError) as e:
            AnalysisModel.load(str(path))
        assert "\n" not in str(e.value) and str(path) in str(e.value)
