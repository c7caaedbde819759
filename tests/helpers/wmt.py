"""Shared by tests/unit/data/test_wmt.py and tests/unit/data/test_cleaning.py
(fairseq_local_data/wmt.py, cleaning.py and testsets.py): small parallel
corpora and a prepared directory (fixtures: the test files that use them
import them)."""

import struct
from pathlib import Path

import pytest


def write_corpus(d: Path, name: str, src: list, tgt: list) -> tuple:
    s, t = d / f"{name}.en", d / f"{name}.de"
    s.write_text("".join(x + "\n" for x in src))
    t.write_text("".join(x + "\n" for x in tgt))
    return name, s, t


@pytest.fixture
def two_corpora(tmp_path):
    a = write_corpus(tmp_path, "A", ["a b", "a  b\t c ", "a b", "", "a"], ["x y z", " x y", "w x y z", "x", "x"])
    b = write_corpus(tmp_path, "B", ["p q r s", "p"], ["w", "q"])
    return [a, b]


def write_idx(path: Path, n: int, magic: bytes = b"MMIDIDX\x00\x00") -> None:
    """The header fairseq's MMapIndexedDataset writes: magic, version (<Q 1),
    dtype code (<B), number of sentences (<Q); then (here, cut short) the sizes."""
    path.write_bytes(magic + struct.pack("<Q", 1) + struct.pack("<B", 4) + struct.pack("<Q", n) + b"\x00" * 16)


CLEAN_STATS = {"corpora": {"europarl": {"before": 5, "after": 3}, "cc": {"before": 2, "after": 2}},
               "before": 7, "after": 5, "ratio": 1.5, "min_tokens": 1, "max_tokens": 250}


@pytest.fixture
def prepared(tmp_path):
    """A prepared en-de directory: tokenised splits, binarised index headers, dictionary."""
    data = tmp_path / "data"
    (data / "tok").mkdir(parents=True)
    for split, n, binarized in (("train", 5, 5), ("valid", 2, 2), ("test", 3, 3), ("test1", 4, 3)):
        for lang in ("en", "de"):
            (data / "tok" / f"{split}.{lang}").write_text("s\n" * n)
            write_idx(data / f"{split}.en-de.{lang}.idx", binarized)
    (data / "dict.en.txt").write_text("".join(f"w{i} {9 - i}\n" for i in range(7)))
    return data


SUMMARY = {
    "pair": "en-de", "source_lang": "en", "target_lang": "de",
    "bpe": {"method": "subword-nmt", "merges": 200},
    "cleaning": {"min_tokens": 1, "max_tokens": 250, "ratio": 1.5, "applied_to": ["train"]},
    "corpora": CLEAN_STATS["corpora"],
    "splits": {
        "train": {"name": "europarl+cc", "sentences_before_cleaning": 7, "sentences_after_cleaning": 5,
                  "sentences_binarized": 5},
        "valid": {"name": "newstest2013", "sentences_before_cleaning": 2, "sentences_after_cleaning": 2,
                  "sentences_binarized": 2},
        "test": {"name": "newstest2014", "sentences_before_cleaning": 3, "sentences_after_cleaning": 3,
                 "sentences_binarized": 3},
        "test1": {"name": "newstest2018", "sentences_before_cleaning": 4, "sentences_after_cleaning": 4,
                  "sentences_binarized": 3},
    },
    "dictionary": {"joined": True, "entries": 7, "vocab_size": 11},
}
