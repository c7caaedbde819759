"""The paper-scale parse step (Pande et al. §3): sentences of a GLUE test set
drawn at random, parsed one tree each, written as CoNLL-U the analyses read,
with the parser's name and version beside them; and the per-example
predictions' reader."""

import json

from fairseq_local_reproduce import pande_parse as pp
from fairseq_local_reproduce.pande_predict import correct
from fairseq_local_data import glue_fake
from fairseq_local_data.syntax import read_conllu


def fake_parser(texts):
    """Every word attached to the first; a text with " . " inside is two sentences."""
    out = []
    for t in texts:
        parts = [p for p in t.replace(" . ", " .\n").split("\n") if p.strip()]
        out.append([[f"{i}\t{w}\t{w}\tX\t_\t_\t{0 if i == 1 else 1}\t{'root' if i == 1 else 'dep'}\t_\t_"
                     for i, w in enumerate(p.split(), 1)] for p in parts])
    return out


def test_glue_test_sentences_parsed_and_recorded(tmp_path):
    glue_fake.make_fake_glue(str(tmp_path / "glue"), ["QNLI"], rows=4, eval_rows=10)
    out = tmp_path / "parsed" / "QNLI.conllu"
    rc = pp.main(["--glue-dir", str(tmp_path / "glue"), "--task", "QNLI", "--split", "test", "--sentences", "7",
                  "--seed", "3", "--out", str(out)], parser=(fake_parser, "9.9.9"))
    assert rc == 0
    sentences = read_conllu(str(out))
    pool = pp.glue_sentences(str(tmp_path / "glue"), "QNLI", "test")
    assert len(pool) == 20 and len(sentences) == 7  # both sides of 10 pairs, 7 drawn
    assert all(" ".join(s.words) in pool for s in sentences)
    meta = json.loads((tmp_path / "parsed" / "QNLI.conllu.json").read_text())
    assert meta["parser"] == "stanza" and meta["version"] == "9.9.9" and meta["sentences"] == 7
    assert pp.parser_of(out) == "stanza 9.9.9" and pp.parser_of(tmp_path / "none.conllu") is None


def test_texts_the_parser_splits_are_left_out(tmp_path):
    text = tmp_path / "t.txt"
    text.write_text("a b c .\nd e . f g .\nh i .\n")
    kept, split_up = pp.sample(pp.text_sentences(str(text)), 5, fake_parser, seed=1)
    assert split_up == 1 and sorted(t for t, _ in kept) == ["a b c .", "h i ."]


def test_correct_per_example():
    assert correct({"gold": ["1", "0", "1"], "pred": ["1", "1", "1"]}) == [1.0, 0.0, 1.0]
    assert correct({"gold": ["1"], "pred": []}) is None and correct(None) is None
