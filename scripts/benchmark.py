#!/usr/bin/env python
"""Training throughput of every paper configuration relative to stock fairseq.

In one run, on the same batches and dimensions, times full training steps
(forward, label-smoothed loss, backward, Adam) of fairseq's stock
``transformer`` and of every named ``transformer_local_*`` architecture, and
prints target words/s and the ratio to stock. Architectures are measured
round-robin, in a shuffled order each round, and the median per architecture is
reported, so that machine noise hits all of them alike.

Usage: python scripts/benchmark.py [--size demo|base] [--rounds 5] [--steps 4]
           [--mask-mode post|pre] [--archs ARCH ...]
"""

import argparse
import random
import statistics
import time
from typing import Dict, List

import torch

import fairseq_local  # noqa: F401  (registers the architectures)
from fairseq.criterions.label_smoothed_cross_entropy import LabelSmoothedCrossEntropyCriterion
from fairseq.data import Dictionary
from fairseq.models import ARCH_CONFIG_REGISTRY, ARCH_MODEL_REGISTRY
from fairseq.tasks.translation import TranslationTask
from fairseq_local.models.archs import NMT_CONFIGS

SIZES = {
    # the demo's reduced dimensions (scripts/demo.sh)
    "demo": dict(encoder_embed_dim=128, encoder_ffn_embed_dim=256, decoder_embed_dim=128,
                 decoder_ffn_embed_dim=256, decoder_layers=2),
    # Transformer-base (Pande et al., §5.1)
    "base": {},
}


def make_batches(n: int, vocab: int, max_tokens: int, seed: int = 0) -> List[Dict]:
    """Left-padded source / right-padded target batches of 10-40 tokens."""
    rng = random.Random(seed)
    batches = []
    for _ in range(n):
        lengths = []
        while sum(lengths) + 40 <= max_tokens:
            lengths.append(rng.randint(10, 40))
        B, T = len(lengths), max(lengths)
        src = torch.ones(B, T, dtype=torch.long)
        tgt = torch.ones(B, T, dtype=torch.long)
        prev = torch.ones(B, T, dtype=torch.long)
        for b, n_tok in enumerate(lengths):
            words = [rng.randrange(4, vocab) for _ in range(n_tok - 1)] + [2]
            src[b, T - n_tok:] = torch.tensor(words)
            tgt[b, :n_tok] = torch.tensor(words[::-1][1:] + [2])
            prev[b, :n_tok] = torch.tensor([2] + words[::-1][1:])
        batches.append({
            "net_input": {"src_tokens": src, "src_lengths": torch.tensor(lengths),
                          "prev_output_tokens": prev},
            "target": tgt, "ntokens": sum(lengths), "nsentences": B,
        })
    return batches


def build(arch: str, size: str, mask_mode: str, task: TranslationTask):
    args = argparse.Namespace(**SIZES[size], dropout=0.1, share_all_embeddings=True)
    if arch != "transformer":
        args.mask_mode = mask_mode
    ARCH_CONFIG_REGISTRY[arch](args)
    torch.manual_seed(1)
    model = ARCH_MODEL_REGISTRY[arch].build_model(args, task)
    model.train()
    return model, torch.optim.Adam(model.parameters(), lr=1e-4)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="demo")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=4, help="timed steps per round")
    parser.add_argument("--max-tokens", type=int, default=4096)
    parser.add_argument("--vocab", type=int, default=3000)
    parser.add_argument("--mask-mode", choices=["post", "pre"], default="post")
    parser.add_argument("--archs", nargs="+", default=[c.arch for c in NMT_CONFIGS])
    args = parser.parse_args()
    if args.rounds < 1 or args.steps < 1:
        parser.error("--rounds and --steps must be >= 1")

    d = Dictionary()
    for i in range(args.vocab - len(d)):
        d.add_symbol(f"w{i}")
    task = TranslationTask(argparse.Namespace(left_pad_source=True), d, d)
    crit = LabelSmoothedCrossEntropyCriterion(task, sentence_avg=False, label_smoothing=0.1)
    batches = make_batches(args.steps, args.vocab, args.max_tokens)
    words = sum(b["ntokens"] for b in batches)
    archs = ["transformer"] + [a for a in args.archs if a != "transformer"]
    models = {a: build(a, args.size, args.mask_mode, task) for a in archs}

    def step(arch: str) -> float:
        model, opt = models[arch]
        start = time.perf_counter()
        for batch in batches:
            opt.zero_grad()
            loss, _, _ = crit(model, batch)
            loss.backward()
            opt.step()
        return words / (time.perf_counter() - start)

    for arch in archs:  # warm-up
        step(arch)
    wps: Dict[str, List[float]] = {a: [] for a in archs}
    order = list(archs)
    for r in range(args.rounds):
        random.Random(r).shuffle(order)
        for arch in order:
            wps[arch].append(step(arch))
    stock = statistics.median(wps["transformer"])
    letters = {c.arch: f"({c.letter})" for c in NMT_CONFIGS}
    print(f"size={args.size} mask_mode={args.mask_mode} threads={torch.get_num_threads()} "
          f"rounds={args.rounds} steps={args.steps} words/step~{words // args.steps}")
    print(f"| config | arch | words/s | ratio to stock |\n|---|---|---|---|")
    for arch in archs:
        med = statistics.median(wps[arch])
        print(f"| {letters.get(arch, 'stock' if arch == 'transformer' else '-')} | {arch} | {med:,.0f} | {med / stock:.3f} |")


if __name__ == "__main__":
    main()
