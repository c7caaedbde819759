"""SparseBERT's fixed masks at the sparsity realised on the evaluated sentences.

Shi et al. define sparsity per mask, ρ = 1 − |M|/n² (§3), and compare masks
"at the same sparsity" at their n = 128: "dropping a total of 128 elements (as
n=128)" against "the same number (128) of entries randomly" (§3.3.3); "for
each head, we remove the smallest 10%/20%/.../90% entries from P ... a random
baseline that randomly removes the same number of entries" (§3.4).  On
sentences of n < 128 tokens those counts part: a random pattern drawn over
128² drops about n²/128 of a sentence's n² entries where the diagonal drops n,
and P pruned at n = 128 removes what lies beyond the sentences first.  (The
authors pad every sentence to 128, so their own runs had the same gap on short
sentences.)  The masks written here are matched where the runs are scored: ρ of
each dev sentence of n tokens, averaged over the dev sentences (what the
fine-tuning log's ``rho`` reports), equals the target.

With ``w[i, j] = Σ_s [i, j < n_s] / n_s² / S`` over the S dev sentences, a
fixed (N, N) mask M (a sentence of n tokens reads ``M[:n, :n]``) realises
ρ(M) = Σ_{(i, j) removed} w[i, j]; entries beyond every dev sentence weigh 0
and are kept.  Written as mask files (``file`` heads, ``--mask-file``):

* ``random-drop``: entries in a seeded uniformly random order removed until ρ
  is the diagonal's, mean over sentences of 1/n (§3.3's "same number");
* ``prune PCT``: per head the smallest entries of P = sigmoid(α) of a DAM
  checkpoint removed until ρ = PCT % (§3.4); ``--random SEED``: entries in a
  random order removed until ρ equals that P-pruned mask's (the baseline);
* ``longformer W G`` and ``bigbird W G R``: §4.2's rule ("sliding window size
  2; two input locations randomly selected for global attention"; BigBird
  "random attention size 2, window size 1, global size 2") with the random
  positions drawn among those the sentences have: G global positions among the
  first n_min (the shortest dev sentence), and R random keys of row i among the
  first max(n_min, i + 1).  Drawn among 128 positions instead, the globals lie
  beyond most short sentences and the pattern is the window alone.

``python -m fairseq_local_reproduce.sparsebert_masks KIND --data TASK-bin --out F --shape L,H ...``
"""

import argparse
import hashlib
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import torch

N = 128  # the masks' side: SparseBERT's n (§3.1.1) and the reduced models' --max-positions


def index_sizes(prefix: Path) -> List[int]:
    """The sentence sizes of a binarised (mmap) dataset from ``prefix.idx``:
    9-byte magic, version (u64), dtype (u8), count (u64), then ``count``
    int32 sizes (fairseq's ``MMapIndexedDataset.Index``)."""
    import numpy as np

    raw = Path(f"{prefix}.idx").read_bytes()
    if raw[:9] != b"MMIDIDX\x00\x00" or len(raw) < 26:
        raise ValueError(f"'{prefix}.idx' is not a fairseq mmap index")
    count = int.from_bytes(raw[18:26], "little")
    return [int(x) for x in np.frombuffer(raw, dtype="<i4", count=count, offset=26)]


def sentence_lengths(data: Path, split: str = "valid") -> List[int]:
    """Tokens per sentence as ``sentence_prediction`` reads a GLUE task
    (``--init-token 0 --separator-token 2``): <s> + input0 (binarised with its
    </s>), and for a pair </s> + input1."""
    sizes = [x + 1 for x in index_sizes(Path(data) / "input0" / split)]
    if (Path(data) / "input1" / f"{split}.idx").is_file():
        sizes = [a + 1 + b for a, b in zip(sizes, index_sizes(Path(data) / "input1" / split))]
    return sizes


def weights(lengths: Sequence[int], n: int = N) -> torch.Tensor:
    """(n, n) float64: w[i, j] = Σ_s [i, j < n_s] / n_s² / S (see the module);
    Σ w = 1 over the lengths up to n."""
    if not lengths:
        raise ValueError("no sentence lengths")
    w = torch.zeros(n, n, dtype=torch.float64)
    for m, c in zip(*torch.tensor([min(x, n) for x in lengths]).unique(return_counts=True)):
        w[:m, :m] += float(c) / float(m) ** 2
    return w / len(lengths)


def realised(kept: torch.Tensor, w: torch.Tensor) -> float:
    """ρ of the fixed mask ``kept`` (bool (n, n)) averaged over the sentences of ``w``."""
    return float(w[~kept].sum())


def sentence_rho(kept: torch.Tensor, lengths: Sequence[int]) -> List[float]:
    """ρ = 1 − |M[:n, :n]|/n² of each sentence (fixed bool (N, N) mask)."""
    return [1.0 - float(kept[:n, :n].float().mean()) for n in lengths]


def generator(what: str, seed: int) -> torch.Generator:
    digest = hashlib.sha256(f"fairseq-local sparsebert {what} {seed}".encode()).digest()
    return torch.Generator().manual_seed(int.from_bytes(digest[:8], "little") & (2 ** 63 - 1))


def drop_in_order(order: torch.Tensor, w: torch.Tensor, target: float) -> torch.Tensor:
    """bool (n, n): every entry kept but the first k of ``order`` (flat
    indices), k the count whose removed weight is nearest ``target``."""
    cum = torch.cumsum(w.flatten()[order], 0)
    k = int(torch.argmin((torch.cat([cum.new_zeros(1), cum]) - target).abs()))
    kept = torch.ones(w.numel(), dtype=torch.bool)
    kept[order[:k]] = False
    return kept.view_as(w)


def random_order(w: torch.Tensor, seed: int, what: str) -> torch.Tensor:
    """The entries of positive weight in a seeded uniformly random order."""
    live = (w.flatten() > 0).nonzero().flatten()
    return live[torch.randperm(len(live), generator=generator(what, seed))]


def random_drop(w: torch.Tensor, lengths: Sequence[int], seed: int) -> torch.Tensor:
    """Random dropping at the diagonal's realised ρ, mean 1/n (§3.3.3)."""
    target = sum(1.0 / n for n in lengths) / len(lengths)
    return drop_in_order(random_order(w, seed, "random-drop"), w, target)


def prune_by_p(p: torch.Tensor, w: torch.Tensor, pct: float) -> torch.Tensor:
    """§3.4's progressive pruning of one head's P (n, n) at realised ρ = pct %:
    its smallest entries (stable order) among those the sentences have."""
    live = (w.flatten() > 0).nonzero().flatten()
    order = live[torch.argsort(p.flatten()[live].double(), stable=True)]
    return drop_in_order(order, w, pct / 100)


def band(n: int, window: int) -> torch.Tensor:
    pos = torch.arange(n)
    return (pos[:, None] - pos[None, :]).abs() <= window


def longformer(lengths: Sequence[int], window: int, globals_: int, seed: int, n: int = N) -> torch.Tensor:
    """|i − j| ≤ W, or i or j among G positions drawn among the first n_min (§4.2)."""
    first = min(min(lengths), n)
    g = torch.randperm(first, generator=generator(f"longformer-{window}-{globals_}", seed))[:globals_]
    pos = torch.arange(n)
    return band(n, window) | torch.isin(pos[:, None], g) | torch.isin(pos[None, :], g)


def bigbird(lengths: Sequence[int], window: int, globals_: int, randoms: int, seed: int, n: int = N
            ) -> torch.Tensor:
    """``longformer`` or R keys of row i drawn among the first max(n_min, i + 1) (§4.2)."""
    kept = longformer(lengths, window, globals_, seed, n)
    first, gen = min(min(lengths), n), generator(f"bigbird-{window}-{globals_}-{randoms}", seed)
    for i in range(n):
        reach = max(first, i + 1)
        kept[i, torch.randperm(reach, generator=gen)[:randoms]] = True
    return kept


def dam_heads(checkpoint: str) -> Dict[str, object]:
    """{"L.H": DamMask} of a checkpoint (heads sharing α share one DamMask)."""
    from fairseq_local.checkpoint_compat import read_checkpoint
    from fairseq_local.attention.config import attention_options
    from fairseq_local.attention.export import learned_masks

    cfg, state = read_checkpoint(checkpoint)
    return {f"{l}.{h}": m for (l, h), m in learned_masks(attention_options(cfg), state).items()}


def build_masks(args: argparse.Namespace) -> Dict[str, dict]:
    """The mask file's entries: {"L.H": {"matrix": bool (N, N), "ends": False, "kind", "method"}}."""
    lengths = sentence_lengths(Path(args.data), args.split)
    w = weights(lengths)
    kind = args.kind
    if kind == "prune":
        out, done = {}, {}
        for key, mask in dam_heads(args.checkpoint).items():
            if id(mask) not in done:
                kept = prune_by_p(mask.matrix(N, "prob"), w, args.prune)  # type: ignore[attr-defined]
                if args.random is not None:  # as many (by realised weight) at random, per shared head
                    kept = drop_in_order(random_order(w, args.random, f"prune-{key}"), w, realised(kept, w))
                done[id(mask)] = kept
            out[key] = {"matrix": done[id(mask)], "ends": False, "kind": kind,
                        "method": f"prune-{args.prune:g}" + ("" if args.random is None else f"-random-s{args.random}")}
        return out
    if kind == "random-drop":
        kept = random_drop(w, lengths, args.seed)
    elif kind == "longformer":
        kept = longformer(lengths, *args.params, args.seed)
    else:
        kept = bigbird(lengths, *args.params, args.seed)
    layers, heads = args.shape
    return {f"{l}.{h}": {"matrix": kept, "ends": False, "kind": kind, "method": kind}
            for l in range(layers) for h in range(heads)}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m fairseq_local_reproduce.sparsebert_masks",
                                description=__doc__.split("\n")[0])
    p.add_argument("kind", choices=("random-drop", "longformer", "bigbird", "prune"))
    p.add_argument("params", nargs="*", type=int, help="longformer: W G; bigbird: W G R")
    p.add_argument("--data", required=True, help="the task's binarised folder (TASK-bin)")
    p.add_argument("--split", default="valid", help="the sentences ρ is realised on (default %(default)s)")
    p.add_argument("--out", required=True, help="the mask file to write")
    p.add_argument("--shape", type=lambda s: tuple(int(x) for x in s.split(",")), default=(12, 12),
                   help="LAYERS,HEADS of the fixed kinds' layout [file*H]*L (default 12,12)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--checkpoint", help="prune: the DAM checkpoint whose P is pruned")
    p.add_argument("--prune", type=float, help="prune: the realised ρ in percent")
    p.add_argument("--random", type=int, help="prune: the random baseline's seed")
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    from fairseq_local.attention.masks import write_mask_file

    args = build_parser().parse_args(argv)
    need = {"longformer": 2, "bigbird": 3}.get(args.kind, 0)
    if len(args.params) != need:
        build_parser().error(f"{args.kind} takes {need} integer parameters, not {len(args.params)}")
    if args.kind == "prune" and (args.checkpoint is None or args.prune is None):
        build_parser().error("prune needs --checkpoint and --prune")
    masks = build_masks(args)
    lengths = sentence_lengths(Path(args.data), args.split)
    w = weights(lengths)
    rho = sum(realised(e["matrix"], w) for e in masks.values()) / len(masks)
    at_n = sum(1 - float(e["matrix"].float().mean()) for e in masks.values()) / len(masks)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    write_mask_file(args.out, masks, method=args.kind, realised=rho, at_n=at_n, sentences=len(lengths))
    print(f"wrote {args.out}: {len(masks)} heads, rho {100 * rho:.2f} % on the {len(lengths)} {args.split} "
          f"sentences, {100 * at_n:.2f} % of the {N}x{N} mask")
    return 0


if __name__ == "__main__":
    sys.exit(main())
