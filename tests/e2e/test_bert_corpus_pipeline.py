"""scripts/prepare-bert-corpus.sh end to end on the stand-ins: WikiExtractor,
sentences, dedup, holdout, SentencePiece or GPT-2 BPE, fairseq-preprocess;
a second run skips every step; bad inputs are one-line errors."""

from pathlib import Path

import pytest

from fairseq_local_data.bert_corpus import read_docs
from fairseq_local_data.standins import BOOKS_NAME, WIKI_NAME, StandinConfig, generate
from helpers import ROOT, run

# The folder scripts/setup_env.sh fills, the script's default --gpt2-dir.
GPT2_DIR = ROOT / "data-bin" / "gpt2-bpe"

pytestmark = pytest.mark.slow  # runs the pipeline script

STEPS = ("extracting", "splitting", "training SentencePiece", "encoding train", "encoding valid",
         "encoding test", "binarising")


@pytest.fixture(scope="module")
def standins(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("bert_standins")
    generate(StandinConfig(articles=40, duplicates=2, redirects=2, books=3, chapters=2, paragraphs=3), out)
    return out


def prepare(standins, out, *extra):
    return run(["bash", "scripts/prepare-bert-corpus.sh", "--wiki", str(standins / WIKI_NAME),
                "--gutenberg", str(standins / BOOKS_NAME), "--out", str(out), "--workers", "2", *extra])


def bin_sizes(out, dictionary):
    from fairseq.data import Dictionary, data_utils

    d = Dictionary.load(str(out / "dict.txt"))
    assert len(d) == dictionary
    return {s: data_utils.load_indexed_dataset(str(out / s), d) for s in ("train", "valid", "test")}


def test_sentencepiece_end_to_end_and_rerun(standins, tmp_path):
    out = tmp_path / "bert-corpus"
    first = prepare(standins, out, "--bpe", "sentencepiece", "--vocab-size", "400",
                    "--valid-docs", "3", "--test-docs", "2").stderr
    for step in STEPS:
        assert step in first, step
    for name in ("dict.txt", "train.bin", "train.idx", "valid.bin", "valid.idx", "test.bin", "test.idx",
                 "bpe/spm.model"):
        assert (out / name).is_file(), name
    summary = dict(line.split(" ", 1) for line in (out / "summary.txt").read_text().splitlines())
    assert summary["sentencepiece_pieces"] == "400"
    assert summary["duplicates_removed"] == "3"  # two article copies and one book copy
    assert (summary["valid_documents"], summary["test_documents"]) == ("3", "2")
    docs = {s: [tuple(d) for d in read_docs(out / "raw" / f"{s}.txt")] for s in ("train", "valid", "test")}
    every = [d for s in docs.values() for d in s]
    assert len(every) == len(set(every)) == 40 + 3
    # Encoded text keeps the raw layout: blank lines between documents, at the same places.
    for s in docs:
        raw = (out / "raw" / f"{s}.txt").read_text().split("\n")
        enc = (out / "bpe" / f"{s}.bpe").read_text().split("\n")
        assert [x == "" for x in raw] == [x == "" for x in enc]
        assert all(e.startswith("\u2581") for e in enc if e)
    datasets = bin_sizes(out, int(summary["dictionary_size"]) + 4)  # + <s> <pad> </s> <unk>
    for s, ds in datasets.items():  # one item a line: sentences and the blank separators
        assert len(ds) == len((out / "raw" / f"{s}.txt").read_text().splitlines())
    again = prepare(standins, out, "--bpe", "sentencepiece", "--vocab-size", "400",
                    "--valid-docs", "3", "--test-docs", "2").stderr
    assert [line for line in again.splitlines() if "skip:" in line].__len__() == 7
    for step in STEPS:
        assert step not in again, step
    # Another holdout seed redoes the split and what follows, not the extraction.
    third = prepare(standins, out, "--bpe", "sentencepiece", "--vocab-size", "400",
                    "--valid-docs", "3", "--test-docs", "2", "--seed", "2").stderr
    assert "already extracted" in third and "splitting" in third and "binarising" in third


@pytest.mark.skipif(not (GPT2_DIR / "encoder.json").is_file(),
                    reason="GPT-2 files not fetched (python -m fairseq_local_data.bpe fetch-gpt2 --dest data-bin/gpt2-bpe)")
def test_gpt2_end_to_end(standins, tmp_path):
    out = tmp_path / "gpt2"
    prepare(standins, out, "--bpe", "gpt2", "--valid-docs", "2", "--test-docs", "2")
    enc = (out / "bpe" / "train.bpe").read_text().splitlines()
    assert "" in enc and all(t.isdigit() for line in enc for t in line.split())
    assert (out / "bpe" / "encoder.json").is_file() and (out / "dict.txt").is_file()
    bin_sizes(out, len((out / "dict.txt").read_text().splitlines()) + 4)


def test_bad_inputs_are_one_line(standins, tmp_path):
    script = ["bash", "scripts/prepare-bert-corpus.sh", "--out", str(tmp_path / "o")]
    cases = {
        ("--wiki", str(tmp_path / "missing.xml.bz2")): f"error: missing Wikipedia dump: {tmp_path}/missing.xml.bz2",
        ("--wiki", str(standins / BOOKS_NAME)): "error: not a bzip2-compressed XML dump",
        ("--gutenberg", str(standins / WIKI_NAME)): "error: not a zip archive of plain-text books",
        (): "error: no corpus given",
        ("--gutenberg", str(standins / BOOKS_NAME), "--bpe", "wordpiece"): "error: --bpe must be gpt2 or sentencepiece",
    }
    for args, message in cases.items():
        r = run([*script, *args], check=False)
        assert r.returncode == 1 and r.stderr.startswith(message) and r.stderr.count("\n") == 1, (args, r.stderr)
    (tmp_path / "empty.xml.bz2").write_bytes(b"")
    r = run([*script, "--wiki", str(tmp_path / "empty.xml.bz2")], check=False)
    assert r.returncode == 1 and r.stderr == f"error: empty Wikipedia dump: {tmp_path}/empty.xml.bz2\n"
