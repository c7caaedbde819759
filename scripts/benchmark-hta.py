#!/usr/bin/env python
"""Speed of the Hidden Token Attribution input contribution (Pascual et al. Eq. 1).

Times, on the same model and sentences in one run, the batched forward-mode
computation of ``fairseq-local analyze hta`` (fairseq_local.analysis.contribution)
against the naive reference: one backward pass per output row o_{h,j} of
every head and layer (batched over the row's d_h coordinates).  The two are
run alternately, ``--repeats`` times, and the median
sentences per second of each and their ratio are printed as a Markdown table.
The two results are also compared (largest absolute difference).

Without --path the model is an untrained encoder of configuration (f) at the
demo's dimensions (6 layers of 8 heads, d = 128), over random sentences.

Usage: python scripts/benchmark-hta.py [--path CKPT [--data DIR] (--conllu|--text) FILE]
           [--sentences 4] [--length 16] [--repeats 3] [--layout LAYOUT] [--dim 128]
"""

import argparse
import random
import statistics
import sys
import time
from typing import Callable, List

import torch

import fairseq_local  # noqa: F401  (registers the architectures)
from fairseq_local.analysis.contribution import input_contribution, input_contribution_naive
from fairseq_local.analysis.dump import Item, prepare, read_sentences
from fairseq_local.analysis.model import AnalysisError, AnalysisModel
from fairseq_local_data.syntax import Sentence
from fairseq_local.models.archs import get_config
from fairseq_local.models.transformer import build_encoder, dummy_dictionary

VOCAB = 200


def built_model(layout: str, dim: int) -> AnalysisModel:
    """An untrained encoder with ``layout``, words as dictionary symbols."""
    torch.manual_seed(0)
    enc = build_encoder("transformer_local", dict(encoder_embed_dim=dim, encoder_ffn_embed_dim=2 * dim,
                                                  attn_layout=layout, dropout=0.0), vocab_size=VOCAB)
    holder = torch.nn.Module()
    holder.encoder = enc
    return AnalysisModel(holder, dummy_dictionary(VOCAB), lambda word, first: [(word, word)])


def random_sentences(n: int, length: int) -> List[Sentence]:
    rng = random.Random(0)
    return [Sentence([f"w{rng.randrange(VOCAB - 10)}" for _ in range(length - 1)]) for _ in range(n)]


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.error = lambda message: p.exit(2, f"error: {message}\n")  # type: ignore[method-assign]
    p.add_argument("--path", help="a checkpoint (default: an untrained configuration (f) at demo size)")
    p.add_argument("--data")
    p.add_argument("--conllu")
    p.add_argument("--text")
    p.add_argument("--sentences", type=int, default=4, help="sentences timed per repeat (default 4)")
    p.add_argument("--length", type=int, default=16, help="tokens a random sentence (default 16)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--layout", default=get_config("f").layout)
    p.add_argument("--dim", type=int, default=128)
    args = p.parse_args(argv)
    if min(args.sentences, args.length, args.repeats, args.dim) < 1:
        p.error("--sentences, --length, --repeats and --dim must be positive")
    try:
        if args.path:
            model = AnalysisModel.load(args.path, args.data)
            items, _ = prepare(model, read_sentences(args.text, args.conllu), model.head_dim)
        else:
            model = built_model(args.layout, args.dim)
            items, _ = prepare(model, random_sentences(args.sentences, args.length))
    except AnalysisError as e:
        p.exit(1, f"error: {e}\n")
    items: List[Item] = items[:args.sentences]
    if not items:
        p.error("no sentence fits the model's head dimension")
    src, lengths = model.collate([it.input for it in items])
    ids = [torch.tensor(it.input.ids) for it in items]
    fast, slow = [], []
    result = {}
    for _ in range(args.repeats):  # interleaved, so that machine noise hits both alike
        fast.append(timed(lambda: result.__setitem__("fast", input_contribution(model, src, lengths))))
        slow.append(timed(lambda: result.__setitem__("slow", [input_contribution_naive(model, i) for i in ids])))
    diff = max(float((result["fast"][b, :, :, :len(i), :len(i)] - s).abs().max())
               for b, (i, s) in enumerate(zip(ids, result["slow"])))
    n = len(items)
    f, s = n / statistics.median(fast), n / statistics.median(slow)
    print(f"{model.num_layers} layers x {model.num_heads} heads, d = {model.num_heads * model.head_dim}, "
          f"{n} sentences of {int(lengths.min())}-{int(lengths.max())} tokens, {torch.get_num_threads()} threads, "
          f"median of {args.repeats} repeats; largest difference {diff:.1e}\n")
    print("| input contribution | sentences/s | ratio |\n|---|---:|---:|")
    print(f"| a backward pass per head output row (naive) | {s:.3f} | 1.00 |")
    print(f"| batched forward mode (analyze hta) | {f:.3f} | {f / s:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
