"""PNG figures of the analyses, in the style of Pande et al. (Fig. 1-3) and Pascual et
al., "Telling BERT's Full Story" (Fig. 1-6).

Every function takes the JSON-ready result of an analysis
(:func:`~fairseq_local.analysis.bias.bias_scores`,
:class:`~fairseq_local.analysis.sensitivity.SensitivityAccumulator`,
:class:`~fairseq_local.analysis.positions.PositionStats`) and writes PNG files,
returning their paths.  The JSON numbers layers and heads from 0; every figure
numbers them from 1 (tick labels, titles, panel labels: :func:`layer_label`).
Figures are drawn with matplotlib's object API (no pyplot state, no display needed).
"""

import logging
from pathlib import Path
from typing import List, Optional, Sequence, Union

import numpy as np

# keep matplotlib's import-time lines and font search quiet when the caller's root logger is at DEBUG
# (importing fairseq sets it so): before matplotlib's first import
logging.getLogger("matplotlib").setLevel(logging.WARNING)

from matplotlib.colors import ListedColormap  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

__all__ = [
    "plot_bias_thresholds",
    "plot_bias_grid",
    "plot_sensitivity",
    "plot_correlations",
    "plot_histograms",
    "plot_centres",
    "plot_centres_overlay",
    "plot_example_maps",
]

PathLike = Union[str, Path]
BLUE, ORANGE, GREEN, PURPLE, NEUTRAL = "tab:blue", "tab:orange", "tab:green", "tab:purple", "#dddddd"


def _array(nested) -> np.ndarray:
    """Nested lists with None -> float array with NaN."""
    return np.array(nested if nested is not None else [], dtype=float)


def save(fig: Figure, path: PathLike) -> Path:
    """Write ``fig`` to ``path`` atomically (:func:`~fairseq_local.outputs.save_figure`),
    creating its folder if needed; returns the path."""
    from ..outputs import save_figure

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    save_figure(fig, path, dpi=150, bbox_inches="tight")
    return path


def layer_label(index: int) -> str:
    """The label of the layer (or head) at 0-based ``index``: counted from 1."""
    return str(index + 1)


def numbered_ticks(n: int) -> tuple:
    """Tick positions 0..n-1 (image rows or columns, 0-based data) and their
    labels 1..n."""
    return np.arange(n), [layer_label(k) for k in range(n)]


def head_grid(ax, layers: int, heads: int) -> None:
    """Ticks (numbered from 1), white cell borders and axis names of a
    layers × heads image."""
    ax.set_xticks(*numbered_ticks(heads))
    ax.set_yticks(*numbered_ticks(layers))
    ax.set_xticks(np.arange(heads + 1) - 0.5, minor=True)
    ax.set_yticks(np.arange(layers + 1) - 0.5, minor=True)
    ax.grid(which="minor", color="white", linewidth=1.5)
    ax.tick_params(which="minor", length=0)
    ax.set_xlabel("head")
    ax.set_ylabel("layer")


def _prefixed(prefix: PathLike, name: str) -> Path:
    return Path(f"{prefix}_{name}.png")


def plot_bias_thresholds(
    scores: dict, path: PathLike, thresholds: Sequence[float] = (1, 2, 3, 4, 5)
) -> Path:
    """Pande et al. Fig. 2: the fraction of all heads whose locality (blue) and
    syntactic (orange) bias score exceeds t, for each threshold t."""
    local, syntactic = _array(scores["local"]), _array(scores["syntactic"])
    heads = max(local.size, 1)
    x = np.arange(len(thresholds))
    fig = Figure(figsize=(5, 3.2))
    ax = fig.add_subplot()
    ax.bar(x - 0.2, [np.sum(local > t) / heads for t in thresholds], 0.4, color=BLUE, label="locality")
    if np.isnan(syntactic).all():
        ax.bar(x + 0.2, np.zeros(len(thresholds)), 0.4, color=ORANGE, label="syntactic (no syntax)")
    else:
        fractions = [np.sum(syntactic > t) / heads for t in thresholds]
        ax.bar(x + 0.2, fractions, 0.4, color=ORANGE, label="syntactic")
    ax.set_xticks(x, [f"{t:g}" for t in thresholds])
    ax.set_xlabel("threshold t")
    ax.set_ylabel("fraction of heads with score > t")
    ax.set_ylim(0, 1)
    ax.legend()
    ax.set_title(f"Attention bias ({scores.get('sentences', '?')} sentences)")
    return save(fig, path)


def plot_bias_grid(scores: dict, path: PathLike, threshold: float = 3.0) -> Path:
    """Pande et al. Fig. 3: the layer x head grid, each head marked by whether its
    locality (blue) and/or syntactic (orange; both: purple) score exceeds ``threshold``."""
    local, syntactic = _array(scores["local"]), _array(scores["syntactic"])
    is_local = np.nan_to_num(local, nan=-np.inf) > threshold
    is_syntactic = np.nan_to_num(syntactic, nan=-np.inf) > threshold
    code = is_local.astype(int) + 2 * is_syntactic.astype(int)  # 0 neither, 1, 2, 3 both
    layers, heads = code.shape
    colours = [NEUTRAL, BLUE, ORANGE, PURPLE]
    fig = Figure(figsize=(0.45 * heads + 2.8, 0.4 * layers + 1.2))
    ax = fig.add_subplot()
    ax.imshow(code, cmap=ListedColormap(colours), vmin=-0.5, vmax=3.5, aspect="equal")
    head_grid(ax, layers, heads)
    labels = ["neither", f"locality > {threshold:g}", f"syntactic > {threshold:g}", "both"]
    handles = [
        Patch(color=colour, label=f"{label} ({int(np.sum(code == k))})")
        for k, (colour, label) in enumerate(zip(colours, labels))
    ]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.02, 1), frameon=False)
    return save(fig, path)


def plot_sensitivity(result: dict, path: PathLike) -> Path:
    """Pande et al. Fig. 1: per layer, box plots of the per-sentence gamma_local (blue),
    gamma_syntactic (orange) and gamma_unrelated (green); None values are skipped."""
    sets = [("local", BLUE), ("syntactic", ORANGE), ("unrelated", GREEN)]
    layers = len(result["local"])
    fig = Figure(figsize=(max(4.0, 1.2 * layers + 1), 3.5))
    ax = fig.add_subplot()
    for k, (name, colour) in enumerate(sets):
        for layer in range(layers):
            values = [v for v in result[name][layer] if v is not None]
            if not values:
                continue
            box = ax.boxplot(
                [values], positions=[4 * layer + k], widths=0.8, patch_artist=True,
                showfliers=False, medianprops={"color": "black"},
            )
            for patch in box["boxes"]:
                patch.set_facecolor(colour)
    ax.set_xticks([4 * l + 1 for l in range(layers)], [layer_label(l) for l in range(layers)])
    ax.set_xlim(-1, 4 * max(layers, 1) - 1)
    ax.set_xlabel("layer")
    ax.set_ylabel("γ (mean Jacobian norm)")
    ax.legend(
        handles=[Patch(color=c, label=f"γ {n}") for n, c in sets],
        loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False,
    )
    ax.set_title(f"Gradient sensitivity ({result.get('sentences', '?')} sentences)")
    return save(fig, path)


def plot_correlations(result: dict, path_prefix: PathLike) -> List[Path]:
    """Pascual et al. Fig. 1 and 6: layer x head heat maps of the mean Pearson and
    Spearman correlation between attention and contribution rows.  Writes
    ``{path_prefix}_previous.png`` and ``{path_prefix}_input.png`` (for the
    contributions that the result has)."""
    written = []
    titles = {"previous": "previous-layer contribution", "input": "input contribution"}
    for kind, title in titles.items():
        if result.get(f"pearson_{kind}") is None:
            continue
        fig = Figure(figsize=(2 * (0.4 * result["heads"] + 1.5), 0.4 * result["layers"] + 1.5))
        axes = fig.subplots(1, 2)
        for ax, stat in zip(axes, ("pearson", "spearman")):
            values = _array(result[f"{stat}_{kind}"])
            image = ax.imshow(values, cmap="coolwarm", vmin=-1, vmax=1, aspect="equal")
            if values.size <= 200:
                for (l, h), v in np.ndenumerate(values):
                    if not np.isnan(v):
                        ax.text(h, l, f"{v:.2f}", ha="center", va="center", fontsize=5)
            ax.set_title(stat.capitalize())
            ax.set_xlabel("head")
            ax.set_ylabel("layer")
            ax.set_xticks(*numbered_ticks(values.shape[1]))
            ax.set_yticks(*numbered_ticks(values.shape[0]))
        fig.colorbar(image, ax=list(axes), shrink=0.8)
        fig.suptitle(f"Attention vs {title}")
        written.append(save(fig, _prefixed(path_prefix, kind)))
    return written


def plot_histograms(result: dict, path_prefix: PathLike) -> List[Path]:
    """Pascual et al. Fig. 2-3 (Appendix A-B): per layer a row of per-head
    relative-position histograms, each normalised to its maximum.  Writes
    ``{path_prefix}_attention.png`` and ``{path_prefix}_contribution.png``."""
    written = []
    offsets = np.array(result["offsets"])
    for kind, colour in (("attention", BLUE), ("contribution", ORANGE)):
        if result.get(f"{kind}_histogram") is None:
            continue
        hist = _array(result[f"{kind}_histogram"])  # (L, H, 2n-1)
        seen = np.array(result[f"{kind}_offset_counts"]) > 0
        x, hist = offsets[seen], np.nan_to_num(hist[..., seen])
        peak = hist.max(-1, keepdims=True)
        hist = np.divide(hist, peak, out=np.zeros_like(hist), where=peak > 0)
        layers, heads = hist.shape[:2]
        fig = Figure(figsize=(1.2 * heads + 0.6, 0.75 * layers + 0.8))
        # equal limits set by hand: shared axes make drawing several times slower
        axes = fig.subplots(layers, heads, squeeze=False)
        for (l, h), ax in np.ndenumerate(axes):
            ax.fill_between(x, hist[l, h], step="mid", color=colour, linewidth=0)
            ax.axvline(0, color="black", linewidth=0.3)
            ax.set_xlim(x[0] - 0.5, x[-1] + 0.5)
            ax.set_ylim(0, 1.05)
            ax.set_yticks([])
            ax.tick_params(labelsize=5, length=2, labelbottom=l == layers - 1)
            if l == 0:
                ax.set_title(f"head {layer_label(h)}", fontsize=6)
            if h == 0:
                ax.set_ylabel(f"layer {layer_label(l)}", fontsize=6)
        fig.suptitle(f"Relative position of {kind} (key - query), normalised to each head's maximum")
        written.append(save(fig, _prefixed(path_prefix, kind)))
    return written


def plot_centres(result: dict, path: PathLike) -> Path:
    """Pascual et al. Fig. 4-5: the centre of mass of the relative-position histograms
    per layer (mean over heads), attention (blue) against input contribution (orange)."""
    fig = Figure(figsize=(4.5, 3))
    ax = fig.add_subplot()
    layers = np.arange(1, result["layers"] + 1)  # numbered from 1
    for key, colour, label in (
        ("attention_centre", BLUE, "attention"),
        ("contribution_centre", ORANGE, "input contribution"),
    ):
        values: Optional[list] = result.get(key)
        if values is not None:
            ax.plot(layers, _array(values), marker="o", color=colour, label=label)
    ax.axhline(0, color="black", linewidth=0.5)
    ax.set_xticks(layers)
    ax.set_xlabel("layer")
    ax.set_ylabel("centre of mass (offset)")
    ax.legend(frameon=False)
    return save(fig, path)


CENTRE_KINDS = {"attention": ("attention_centre", "-", "o"), "contribution": ("contribution_centre", "--", "s")}


def plot_centres_overlay(results: Sequence[tuple], path: PathLike,
                         kinds: Sequence[str] = ("attention", "contribution")) -> Path:
    """Pascual et al. Fig. 4 (one line per model, e.g. per language) and Fig. 5
    (attention against input contribution): the centre of mass per layer of
    several HTA results.  ``results`` is ``[(label, result)]`` (results of
    :meth:`PositionStats.result`); each model has one colour, attention a solid
    line, input contribution a dashed one; a missing kind is left out."""
    fig = Figure(figsize=(5.5, 3.4))
    ax = fig.add_subplot()
    colours = [f"C{k % 10}" for k in range(len(results))]
    longest = 0
    for (label, result), colour in zip(results, colours):
        for kind in kinds:
            key, style, marker = CENTRE_KINDS[kind]
            values = result.get(key)
            if values is None:
                continue
            y = _array(values)
            longest = max(longest, len(y))
            name = label if len(kinds) == 1 else f"{label}: {'attention' if kind == 'attention' else 'input contr.'}"
            ax.plot(np.arange(1, len(y) + 1), y, linestyle=style, marker=marker, color=colour, label=name)
    ax.axhline(0, color="black", linewidth=0.5)
    ax.set_xticks(np.arange(1, longest + 1))
    ax.set_xlabel("layer")
    ax.set_ylabel("centre of mass (offset)")
    ax.legend(frameon=False, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    return save(fig, path)


def plot_example_maps(tokens: Sequence[str], attn, contrib, heads: Sequence[tuple], path: PathLike,
                      kind: str = "input contribution", separator: Optional[Sequence[int]] = None,
                      title: str = "") -> Path:
    """Pascual et al. Fig. 7 (Appendix C, Fig. 12-23) for one sentence: per chosen
    head, its attention map (top row) above its contribution map (bottom row).

    Args:
        tokens: the T input tokens (axis labels).
        attn, contrib: (L, H, T, T) tensors or arrays, row j = query / output token,
            column i = key / contributing token (each row sums to 1 or less).
        heads: the (layer, head) pairs drawn, one column each, 0-based as the
            arrays (titled from 1: "L1 H1" is ``(0, 0)``).
        separator: token positions marked with thin lines (a sentence pair's
            ``</s> </s>``), or None.
    """
    a, c = np.asarray(attn, dtype=float), np.asarray(contrib, dtype=float)
    n = len(tokens)
    size = max(2.2, 0.14 * n + 0.8)
    fig = Figure(figsize=(size * len(heads) + 0.4, 2 * size + 0.6))
    axes = fig.subplots(2, len(heads), squeeze=False)
    labels = [t.replace("$", r"\$") for t in tokens]
    for col, (layer, head) in enumerate(heads):
        for row, (values, name) in enumerate(((a, "attention"), (c, kind))):
            ax = axes[row, col]
            ax.imshow(values[layer, head], cmap="Blues", vmin=0, aspect="equal", interpolation="nearest")
            for k in separator or ():
                ax.axhline(k, color=ORANGE, linewidth=0.4, alpha=0.6)
                ax.axvline(k, color=ORANGE, linewidth=0.4, alpha=0.6)
            ax.set_xticks(np.arange(n), labels if n <= 64 else [], rotation=90, fontsize=4)
            ax.set_yticks(np.arange(n), labels if n <= 64 else [], fontsize=4)
            ax.tick_params(length=1)
            ax.set_title(f"L{layer_label(layer)} H{layer_label(head)}: {name}", fontsize=6)
    if title:
        fig.suptitle(title, fontsize=8)
    return save(fig, path)
