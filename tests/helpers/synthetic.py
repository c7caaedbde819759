"""Shared by the tests of the synthetic corpus (tests/unit/data/test_synthetic*.py):
its generator, small settings and corpus generation."""

from fairseq_local_data import synthetic as syn

SPLITS = ("train", "valid", "test")
# Small lexicons and splits keep every test fast.
SMALL = dict(train=300, valid=40, test=40, nouns=150, adjectives=40, verbs=40, preps=8, dets=4)


def generate(tmp_path, name="out", src="src", tgt="tgt", **kw):
    out = tmp_path / name
    counts = syn.generate_corpus(syn.SyntheticConfig(**{**SMALL, **kw}), str(out), src, tgt)
    return out, counts


def read(out, split, lang):
    return (out / f"{split}.{lang}").read_text(encoding="utf-8").splitlines()
