"""The figures of the Pande report: Tables 1–3 and Table 4 as bars with error
bars over seeds (±1 standard deviation where a row has two seeds or more,
each seed's value a dot), and Figs. 1–3 with one panel per analysed model.
Every title names the model and the scale; layers and heads are numbered
from 1."""

from pathlib import Path
from typing import Dict, List, Sequence

import numpy as np

from fairseq_local.analysis.figures import BLUE, GREEN, NEUTRAL, ORANGE, PURPLE, save


def _figure(panels: int, width: float, height: float):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width * panels, height), layout="constrained")
    return fig, fig.subplots(1, panels, squeeze=False)[0]


def _wrap(text: str, width: int = 34) -> str:
    import textwrap

    return "\n".join(textwrap.wrap(text, width))


def _bars(ax, x: float, values: Sequence[float], colour: str, width: float, label: str = "") -> None:
    """One bar at the mean, ±1 sd where two values or more, a dot per seed."""
    if not values:
        return
    sd = float(np.std(values, ddof=1)) if len(values) > 1 else None
    ax.bar(x, float(np.mean(values)), width, color=colour, label=label or None,
           yerr=sd, capsize=3 if sd is not None else 0, ecolor="black")
    if len(values) > 1:
        ax.plot([x] * len(values), values, "k.", markersize=3)


def plot_bleu(bleu: Dict[str, Sequence[float]], path: Path, model: str, scale: str) -> Path:
    """Tables 1-3: BLEU per configuration (a)-(l)."""
    fig, (ax,) = _figure(1, 6.5, 3.4)
    for k, (letter, values) in enumerate(bleu.items()):
        _bars(ax, k, list(values), BLUE if letter == "a" else NEUTRAL, 0.7)
    ax.set_xticks(range(len(bleu)), [f"({x})" for x in bleu])
    ax.set_ylabel("BLEU (test set)")
    ax.set_title(f"Tables 1–3: BLEU per configuration\n{model}, {scale} scale (error bars: ±1 sd over seeds)",
                 fontsize=9)
    return save(fig, path)


def plot_glue(scores: Dict[str, Dict[str, Sequence[float]]], tasks: Sequence[str], path: Path, model: str,
              scale: str) -> Path:
    """Table 4: dev accuracy per task, one bar per row."""
    fig, (ax,) = _figure(1, 7.5, 3.4)
    rows = list(scores)
    colours = [BLUE, ORANGE, GREEN, PURPLE, "tab:red", "tab:brown"]
    w = 0.8 / max(1, len(rows))
    for r, row in enumerate(rows):
        for k, t in enumerate(tasks):
            _bars(ax, k + (r - (len(rows) - 1) / 2) * w, list(scores[row].get(t, ())), colours[r % len(colours)], w,
                  row if k == 0 else "")
    ax.set_xticks(range(len(tasks)), list(tasks))
    ax.set_ylabel("dev accuracy (%)")
    ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    ax.set_title(f"Table 4: GLUE dev accuracy per layout\n{model}, {scale} scale (error bars: ±1 sd over seeds)",
                 fontsize=9)
    return save(fig, path)


def plot_sensitivity(results: Dict[str, dict], path: Path, scale: str) -> Path:
    """Fig. 1: per model and layer, box plots of the per-sentence γ_L (blue), γ_S (orange), γ_U (green)."""
    fig, axes = _figure(len(results), 3.6, 3.2)
    for ax, (model, res) in zip(axes, results.items()):
        layers = len(res["local"])
        for k, (name, colour) in enumerate((("local", BLUE), ("syntactic", ORANGE), ("unrelated", GREEN))):
            for layer in range(layers):
                values = [v for v in res[name][layer] if v is not None]
                if values:
                    box = ax.boxplot([values], positions=[4 * layer + k], widths=0.8, patch_artist=True,
                                     showfliers=False, medianprops={"color": "black"})
                    box["boxes"][0].set_facecolor(colour)
        ax.set_xticks([4 * layer + 1 for layer in range(layers)], [str(layer + 1) for layer in range(layers)])
        ax.set_xlabel("layer")
        ax.set_title(_wrap(f"{model}, {res.get('sentences', '?')} sentences"), fontsize=7)
    axes[0].set_ylabel("γ (gradient norm)")
    fig.suptitle(f"Fig. 1: gradient sensitivity to local (blue), syntactic (orange), unrelated (green) tokens, "
                 f"{scale} scale", fontsize=9)
    return save(fig, path)


def plot_thresholds(results: Dict[str, dict], path: Path, scale: str, thresholds=(1, 2, 3, 4, 5)) -> Path:
    """Fig. 2: per model, the share of heads with locality (blue) and non-local syntactic (orange) bias > t."""
    fig, axes = _figure(len(results), 3.0, 3.0)
    x = np.arange(len(thresholds))
    for ax, (model, res) in zip(axes, results.items()):
        loc = np.nan_to_num(np.array(res["local"], dtype=float), nan=-1.0).ravel()
        syn = np.nan_to_num(np.array(res["syntactic"], dtype=float), nan=-1.0).ravel()
        ax.bar(x - 0.2, [np.mean(loc > t) for t in thresholds], 0.4, color=BLUE, label="locality")
        ax.bar(x + 0.2, [np.mean(syn > t) for t in thresholds], 0.4, color=ORANGE, label="syntactic")
        ax.set_xticks(x, [f"{t:g}" for t in thresholds])
        ax.set_ylim(0, 1)
        ax.set_xlabel("threshold t")
        ax.set_title(_wrap(f"{model}, {res.get('sentences', '?')} sentences", 28), fontsize=7)
    axes[0].set_ylabel("share of heads with bias > t")
    axes[0].legend(fontsize=7)
    fig.suptitle(f"Fig. 2: attention bias above a threshold, {scale} scale", fontsize=9)
    return save(fig, path)


def plot_heads(results: Dict[str, dict], path: Path, scale: str, cut: float = 3.0) -> Path:
    """Fig. 3: per model, the layer × head grid: locality bias > cut (blue),
    syntactic > cut (orange), both (purple)."""
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    fig, axes = _figure(len(results), 2.6, 3.0)
    colours = [NEUTRAL, BLUE, ORANGE, PURPLE]
    for ax, (model, res) in zip(axes, results.items()):
        loc = np.nan_to_num(np.array(res["local"], dtype=float), nan=-1.0) > cut
        syn = np.nan_to_num(np.array(res["syntactic"], dtype=float), nan=-1.0) > cut
        code = loc.astype(int) + 2 * syn.astype(int)
        layers, heads = code.shape
        ax.imshow(code, cmap=ListedColormap(colours), vmin=-0.5, vmax=3.5, aspect="equal")
        ax.set_xticks(range(heads), [str(h + 1) for h in range(heads)], fontsize=6)
        ax.set_yticks(range(layers), [str(layer + 1) for layer in range(layers)], fontsize=6)
        ax.set_xlabel("head")
        ax.set_title(_wrap(model, 24), fontsize=7)
    axes[0].set_ylabel("layer")
    labels = ["neither", f"locality > {cut:g}", f"syntactic > {cut:g}", "both"]
    fig.legend(handles=[Patch(color=c, label=lab) for c, lab in zip(colours, labels)], loc="outside lower center",
               ncol=4, fontsize=7, frameon=False)
    fig.suptitle(f"Fig. 3: heads with bias above {cut:g}, {scale} scale", fontsize=9)
    return save(fig, path)


def draw_all(folder: Path, scale: str, bleu: Dict[str, Sequence[float]], nmt_model: str,
             glue: Dict[str, Dict[str, Sequence[float]]], tasks: Sequence[str], bert_model: str,
             sens: Dict[str, dict], bias: Dict[str, dict]) -> List[Path]:
    """Every figure there are numbers for; returns their paths."""
    out = []
    if any(bleu.values()):
        out.append(plot_bleu(bleu, folder / "tables1-3_bleu.png", nmt_model, scale))
    if any(v for row in glue.values() for v in row.values()):
        out.append(plot_glue(glue, tasks, folder / "table4_glue.png", bert_model, scale))
    if sens:
        out.append(plot_sensitivity(sens, folder / "fig1_sensitivity.png", scale))
    if bias:
        out.append(plot_thresholds(bias, folder / "fig2_bias_thresholds.png", scale))
        out.append(plot_heads(bias, folder / "fig3_bias_heads.png", scale))
    return out
