"""Export the learned DAM masks of a checkpoint as fixed masks.

``python -m fairseq_local.export_masks CHECKPOINT --out masks.pt [--png masks.png]
[--prune PCT] [--n N]``

For every ``dam-u``/``dam-s`` head of the checkpoint's encoder, writes the
mask of a sentence of N tokens (default: the mask's maximum length):

* by default the evaluation-mode hard mask 1[α > 0] (seed 001, §4.1);
* with ``--prune PCT``, progressive pruning (seed 001, §3.4): keep the largest
  entries of P = sigmoid(α) and drop the smallest PCT % of the head's N²
  entries (entries tied with the last kept value are kept too, so that a
  ``dam-s`` mask stays Toeplitz).

``dam-s`` masks keep their first and last rows and columns on at every
length.  Entries at positions (``dam-u``) or offsets (``dam-s``) that no
training sentence reached were never trained and keep their initial α
(``--dam-init``): export at the lengths the model was trained on.  The file loads as the fixed mask kind ``file`` of a second training
stage (seed 001, §4.3 "two-stage"): pass ``--mask-file masks.pt`` and the
layout that the command prints (the DAM heads become ``file`` heads; every
other head and Q/K group is unchanged).  ``--png`` draws one heatmap per
exported head (layers as rows, heads as columns).
"""

import argparse
import sys
from typing import Dict, List, Optional, Sequence, Tuple

import torch

from .checkpoint_compat import read_checkpoint
from .modules.layout import HeadSpec, LayerSpec, LayoutError, format_layout, parse_layout
from .modules.learned import DamMask, DamSpec
from .modules.masks import MASK_FILE_FORMAT, FileMask


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, no usage
        self.exit(2, f"error: {message}\n")


def dam_masks(model_cfg: dict, state_dict: Dict[str, torch.Tensor]) -> Dict[Tuple[int, int], DamMask]:
    """The checkpoint's DAM heads, {(layer, head): DamMask} (0-based), with
    their trained α; heads sharing α share one DamMask."""
    layout = parse_layout(model_cfg.get("attn_layout") or "")
    out: Dict[Tuple[int, int], DamMask] = {}
    by_storage: Dict[int, DamMask] = {}
    for l, layer in enumerate(layout):
        dam_heads = [h for h, m in enumerate(layer.masks) if isinstance(m, DamSpec)]
        for k, h in enumerate(dam_heads):
            key = f"encoder.layers.{l}.self_attn.dam.{k}.alpha"
            if key not in state_dict:
                raise ValueError(f"checkpoint has no '{key}' for head {h + 1} of layer {l + 1}")
            alpha = state_dict[key]
            ptr = alpha.untyped_storage().data_ptr()
            if ptr not in by_storage:
                structured = layer.masks[h].structured
                size = alpha.numel()
                max_len = size if structured else int(((8 * size + 1) ** 0.5 - 1) / 2)
                mask = DamMask(structured, max_len)
                mask.alpha.data.copy_(alpha.float())
                by_storage[ptr] = mask.eval()
            out[(l, h)] = by_storage[ptr]
    return out


def export(masks: Dict[Tuple[int, int], DamMask], n: Optional[int], prune: Optional[float]) -> Dict[str, dict]:
    """{"L.H": {"matrix": bool (n, n), "ends": bool, "kind": str, "method": str}}."""
    out: Dict[str, dict] = {}
    done: Dict[int, dict] = {}
    for (l, h), mask in masks.items():
        if id(mask) not in done:
            length = n or mask.max_len
            if length > mask.max_len:
                raise ValueError(f"--n {length} exceeds the DAM masks' maximum length {mask.max_len}")
            if prune is None:
                matrix, method = mask.matrix(length, "hard") > 0.5, "hard"
            else:
                p = mask.matrix(length, "prob")
                keep = max(1, round(p.numel() * (1 - prune / 100)))
                threshold = p.flatten().topk(keep).values[-1]
                matrix, method = p >= threshold, f"prune-{prune:g}"
            done[id(mask)] = {"matrix": matrix, "ends": mask.structured,
                              "kind": "dam-s" if mask.structured else "dam-u", "method": method}
        out[f"{l}.{h}"] = done[id(mask)]
    return out


def stage2_layout(layout: Sequence[LayerSpec]) -> str:
    """The layout with every DAM head replaced by its exported ``file`` mask."""
    return format_layout(tuple(
        LayerSpec(tuple(HeadSpec(FileMask(l, h), s.group, s.gated) if isinstance(s.mask, DamSpec) else s
                        for h, s in enumerate(layer.heads)))
        for l, layer in enumerate(layout)))


def draw(masks: Dict[str, dict], path: str, title: str) -> None:
    """One heatmap per exported head: layers as rows, heads as columns."""
    import logging

    logging.getLogger("matplotlib").setLevel(logging.WARNING)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = sorted(masks, key=lambda k: tuple(map(int, k.split("."))))
    layers = sorted({int(k.split(".")[0]) for k in keys})
    heads = sorted({int(k.split(".")[1]) for k in keys})
    fig, axes = plt.subplots(len(layers), len(heads), squeeze=False,
                             figsize=(1.6 * len(heads) + 0.5, 1.6 * len(layers) + 0.6))
    for ax in axes.flat:
        ax.axis("off")
    for key in keys:
        l, h = map(int, key.split("."))
        m = masks[key]["matrix"]
        ax = axes[layers.index(l)][heads.index(h)]
        ax.imshow(m.float().numpy(), cmap="Greys", vmin=0, vmax=1, interpolation="nearest")
        ax.set_title(f"L{l + 1} H{h + 1}  {100 * m.float().mean():.0f}%", fontsize=7)
    fig.suptitle(f"{title}; black = allowed, % = share allowed", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: Optional[List[str]] = None) -> None:
    parser = _Parser(prog="python -m fairseq_local.export_masks", description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint")
    parser.add_argument("--out", required=True, help="mask file to write (.pt)")
    parser.add_argument("--png", help="also draw the masks into this PNG")
    parser.add_argument("--prune", type=float, metavar="PCT",
                        help="progressive pruning: drop the smallest PCT %% of P per head (seed 001, 3.4)")
    parser.add_argument("--n", type=int, help="sentence length of the exported masks (default: maximum)")
    args = parser.parse_args(argv)
    if args.prune is not None and not 0 <= args.prune < 100:
        parser.error(f"--prune must be in [0, 100), not {args.prune:g}")
    if args.n is not None and args.n < 1:
        parser.error(f"--n must be >= 1, not {args.n}")
    try:
        model_cfg, state_dict = read_checkpoint(args.checkpoint)
        masks = dam_masks(model_cfg, state_dict)
        if not masks:
            raise ValueError(f"'{args.checkpoint}' has no dam-u/dam-s heads "
                             f"(layout {model_cfg.get('attn_layout')!r})")
        exported = export(masks, args.n, args.prune)
    except (FileNotFoundError, ValueError, LayoutError) as e:
        parser.error(str(e))
    layout = stage2_layout(parse_layout(model_cfg["attn_layout"]))
    method = next(iter(exported.values()))["method"]
    torch.save({"format": MASK_FILE_FORMAT, "masks": exported, "layout": layout,
                "checkpoint": args.checkpoint, "method": method}, args.out)
    if args.png:
        draw(exported, args.png, f"{args.checkpoint} ({method})")
    density = sum(float(e["matrix"].float().mean()) for e in exported.values()) / len(exported)
    print(f"wrote {len(exported)} masks ({method}, mean density {100 * density:.1f}% at "
          f"n={next(iter(exported.values()))['matrix'].shape[0]}) to {args.out}")
    print(f"stage-2 options: --mask-file {args.out} --attn-layout '{layout}'")


if __name__ == "__main__":
    main(sys.argv[1:])
