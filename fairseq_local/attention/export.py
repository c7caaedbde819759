"""Learned masks as fixed masks (SparseBERT §4.3, "two-stage"): the
exportable learned heads of a checkpoint
(:meth:`~fairseq_local.attention.learned.kind.LearnedKind.exportable`), their
hard masks, progressive pruning by P (§3.4) and its random baseline, and the
second stage's layout.  ``fairseq-local export`` (:mod:`fairseq_local_cli.export`)
is the command; the reproductions call these functions directly."""

import hashlib
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import torch

from ..checkpoint_compat import encoder_layers_prefix
from .config import AttentionOptions
from .layout import HeadSpec, LayerSpec, format_layout
from .learned.kind import LEARNED_KINDS, Exportable, LearnedKind, upgrade_learned_keys
from .masks import FileMask


def learned_masks(options: AttentionOptions, state_dict: Dict[str, torch.Tensor]) -> Dict[Tuple[int, int], Exportable]:
    """The checkpoint's exportable learned heads, {(layer, head): mask}
    (0-based), from the layout of its ``options``
    (:func:`~fairseq_local.attention.config.attention_options` of its saved
    model options), each kind's from its own tensors
    (:meth:`~fairseq_local.attention.learned.kind.LearnedKind.exportable`;
    DAM: ``{prefix}{l}.self_attn.learned.dam.{k}.alpha``, the k-th DAM head
    of layer l); heads that share parameters share one mask."""
    state = dict(state_dict)
    upgrade_learned_keys(state)  # a checkpoint saved before learned kinds
    prefix = encoder_layers_prefix(state)
    out: Dict[Tuple[int, int], Exportable] = {}
    for kind in LEARNED_KINDS.values():
        out.update(kind.exportable(options.layout, state, prefix))
    return dict(sorted(out.items()))


def exportable_names() -> str:
    """The layout names of the learned kinds that export, e.g. ``dam-u/dam-s``."""
    return "/".join(name for kind in LEARNED_KINDS.values() if kind.exports() for name in kind._names)


def end_entries(n: int) -> torch.Tensor:
    """bool (n, n): the first and last rows and columns, which a ``dam-s``
    mask always keeps on."""
    pos = torch.arange(n)
    i, j = pos[:, None], pos[None, :]
    return (i == 0) | (j == 0) | (i == n - 1) | (j == n - 1)


def prune_by_p(mask: Exportable, n: int, pct: float) -> torch.Tensor:
    """Progressive pruning (SparseBERT §3.4): bool (n, n), the largest
    entries of P = sigmoid(α) with the smallest ``pct`` % of the n² entries
    dropped; entries tied with the threshold are kept (a ``dam-s`` mask stays
    Toeplitz), and a ``dam-s`` mask keeps its end rows and columns."""
    p = mask.matrix(n, "prob")
    keep = max(1, round(p.numel() * (1 - pct / 100)))
    threshold = p.flatten().topk(keep).values[-1]
    kept = p >= threshold
    if mask.ends:
        kept |= end_entries(n)
    return kept


def head_seed(seed: int, key: str) -> int:
    """A 63-bit generator seed from the user's SEED and a head key ("L.H"):
    the same for the same pair, different across heads and seeds."""
    digest = hashlib.sha256(f"fairseq-local prune-random {seed} {key}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & (2**63 - 1)


def prune_at_random(n: int, removed: int, structured: bool, seed: int, key: str) -> torch.Tensor:
    """SparseBERT's random baseline (§3.4): bool (n, n) with exactly
    ``removed`` entries off, chosen uniformly at random (a ``torch.Generator``
    seeded by ``seed`` and ``key``), never in the end rows and columns of a
    ``structured`` (dam-s) head."""
    candidates = (~end_entries(n) if structured else torch.ones(n, n, dtype=torch.bool)).flatten().nonzero()
    candidates = candidates.flatten()
    if not 0 <= removed <= len(candidates):
        raise ValueError(f"cannot remove {removed} of the {len(candidates)} removable entries of head {key}")
    generator = torch.Generator().manual_seed(head_seed(seed, key))
    drop = candidates[torch.randperm(len(candidates), generator=generator)[:removed]]
    kept = torch.ones(n * n, dtype=torch.bool)
    kept[drop] = False
    return kept.view(n, n)


def method_name(prune: Optional[float], prune_random: Optional[int]) -> str:
    """``hard``, ``prune-PCT`` or ``prune-random-PCT-sSEED``."""
    if prune is None:
        return "hard"
    if prune_random is None:
        return f"prune-{prune:g}"
    return f"prune-random-{prune:g}-s{prune_random}"


def export(masks: Dict[Tuple[int, int], Exportable], n: Optional[int], prune: Optional[float],
           prune_random: Optional[int] = None) -> Dict[str, dict]:
    """{"L.H": {"matrix": bool (n, n), "ends": bool, "kind": str, "method": str}}.

    ``prune``: None for the hard mask 1[α > 0], else the percentage of
    progressive pruning; ``prune_random`` (needs ``prune``): the seed of the
    random baseline that removes as many entries as the P-pruned mask of each
    head.  Heads sharing one DamMask share one exported entry."""
    if prune_random is not None and prune is None:
        raise ValueError("--prune-random needs --prune PCT (it removes as many entries as --prune would)")
    method = method_name(prune, prune_random)
    out: Dict[str, dict] = {}
    done: Dict[int, dict] = {}
    for (l, h), mask in masks.items():
        key = f"{l}.{h}"
        if id(mask) not in done:
            length = n or mask.max_len
            if length > mask.max_len:
                raise ValueError(f"--n {length} exceeds the {mask.kind} masks' maximum length {mask.max_len}")
            if prune is None:
                matrix = mask.matrix(length, "hard") > 0.5
            else:
                matrix = prune_by_p(mask, length, prune)
                if prune_random is not None:
                    removed = int((~matrix).sum())
                    matrix = prune_at_random(length, removed, mask.ends, prune_random, key)
            done[id(mask)] = {"matrix": matrix, "ends": mask.ends, "kind": mask.kind, "method": method}
        out[key] = done[id(mask)]
    return out


def pruned_shares(exported: Dict[str, dict]) -> Dict[str, float]:
    """{kind: mean share of entries removed} over the exported heads of each kind."""
    shares: Dict[str, List[float]] = {}
    for entry in exported.values():
        shares.setdefault(entry["kind"], []).append(1 - float(entry["matrix"].float().mean()))
    return {kind: sum(v) / len(v) for kind, v in sorted(shares.items())}


def stage2_layout(layout: Sequence[LayerSpec], exported: Optional[Iterable[Tuple[int, int]]] = None) -> str:
    """The layout with every exported head (layer, head) replaced by its
    ``file`` mask (None: every head of a kind that exports)."""
    done = None if exported is None else set(exported)

    def replaced(l: int, h: int, spec) -> bool:
        if done is not None:
            return (l, h) in done
        return isinstance(spec, LearnedKind) and type(spec).exports()

    return format_layout(tuple(
        LayerSpec(tuple(HeadSpec(FileMask(l, h), s.group, s.gated) if replaced(l, h, s.mask) else s
                        for h, s in enumerate(layer.heads)))
        for l, layer in enumerate(layout)))
