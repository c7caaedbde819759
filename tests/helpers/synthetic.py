"""Shared by tests/unit/data/test_synthetic.py and tests/unit/data/test_synthetic_grammar.py:
fairseq_local/data/synthetic.py loaded from its file, small settings and
corpus generation."""

import importlib.util
import sys

from helpers import ROOT


def _load(name: str):
    """Load fairseq_local/data/NAME.py from its file: pure standard library, so
    no import of the plugin package, fairseq or torch."""
    spec = importlib.util.spec_from_file_location(f"_{name}_under_test", ROOT / "fairseq_local" / "data" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


syn = _load("synthetic")
SPLITS = ("train", "valid", "test")
# Small lexicons and splits keep every test fast.
SMALL = dict(train=300, valid=40, test=40, nouns=150, adjectives=40, verbs=40, preps=8, dets=4)


def generate(tmp_path, name="out", src="src", tgt="tgt", **kw):
    out = tmp_path / name
    counts = syn.generate_corpus(syn.SyntheticConfig(**{**SMALL, **kw}), str(out), src, tgt)
    return out, counts


def read(out, split, lang):
    return (out / f"{split}.{lang}").read_text(encoding="utf-8").splitlines()
