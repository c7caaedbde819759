"""Issue #19: a ``--bpe`` other than the model's own maps most pieces to
``<unk>``; the analysis commands warn in one line with the share, and the
dump helpers recognise dumps (``is_dump``) for ``attention dump --out``."""

import pytest
import torch

from fairseq_local.analysis.dump import is_dump, prepare, save_dump
from fairseq_local.analysis.model import AnalysisModel
from fairseq_local_data.syntax import Sentence
from fairseq_local.models.transformer import build_encoder, dummy_dictionary

VOCAB = 40
DIMS = dict(encoder_embed_dim=16, encoder_ffn_embed_dim=32, encoder_layers=1, encoder_attention_heads=2,
            dropout=0.0, attention_dropout=0.0, attn_layout="[global*2]")


class Wrapper(torch.nn.Module):
    def __init__(self, encoder):
        super().__init__()
        self.encoder = encoder


def model(tokeniser) -> AnalysisModel:
    """A one-layer encoder whose dictionary knows the symbols w0..w29 only."""
    enc = build_encoder("transformer_local", dict(DIMS), vocab_size=VOCAB)
    return AnalysisModel(Wrapper(enc), dummy_dictionary(VOCAB), tokeniser, bpe="--bpe gpt2")


def known_or_not(unknown_every: int):
    """Pieces of each word: a known symbol, and every ``unknown_every``-th word
    a piece the dictionary does not have (as another BPE's pieces)."""
    count = {"n": 0}

    def tokenise(word, first):
        count["n"] += 1
        if count["n"] % unknown_every == 0:
            return [("Ġ" + word, word)]
        return [("w1", word)]
    return tokenise


SENTENCES = [Sentence(["a", "b", "c", "d"]), Sentence(["e", "f", "g", "h"])]


def test_most_pieces_unknown_is_one_warning_line(capsys):
    m = model(lambda word, first: [("Ġ" + word, word)] if word != "h" else [("w3", word)])
    items, skipped = prepare(m, SENTENCES)
    assert len(items) == 2 and skipped == 0  # a warning, not a refusal
    err = capsys.readouterr().err
    assert err == ("warning: 88% of the BPE pieces are not in the model's dictionary: "
                   "is --bpe gpt2 the BPE the model was trained with?\n")
    assert m.unknown_share([it.input for it in items]) == pytest.approx(7 / 8)


@pytest.mark.parametrize("unknown_every", [1000, 2])
def test_no_warning_when_at_most_half_are_unknown(capsys, unknown_every):
    m = model(known_or_not(unknown_every))
    prepare(m, SENTENCES)
    assert capsys.readouterr().err == ""


def test_skipped_sentences_count_too(capsys):
    m = model(lambda word, first: [("Ġ" + word, word)])
    items, skipped = prepare(m, SENTENCES, max_len=2)
    assert items == [] and skipped == 2
    assert capsys.readouterr().err.startswith("warning: 100% of the BPE pieces")


def test_is_dump(tmp_path):
    path = tmp_path / "d.pt"
    save_dump([{"tokens": ["a"], "word_ids": [-1], "words": [], "attn": torch.zeros(1, 1, 1, 1)}], str(path))
    assert is_dump(path)
    assert not any(p.name.startswith(".") for p in tmp_path.iterdir())  # no temporary file left
    other = tmp_path / "o.pt"
    for obj in ([], [{"tokens": []}], {"model": {}}, [1, 2]):
        torch.save(obj, other)
        assert not is_dump(other), obj
    other.write_text("text")
    assert not is_dump(other) and not is_dump(tmp_path / "missing.pt") and not is_dump(tmp_path)
