"""The figures of ``reproduce sparsebert``'s report: Fig. 2 (§3.1's P averaged
over the heads) and Fig. 3 (pruning by P against random pruning, with the
spread over seeds).  Titles name the model and the scale; positions, heads
and layers are numbered from 1."""

import logging
from pathlib import Path
from typing import Dict, Optional, Sequence

from .report import Values


def _figure(width: float, height: float):
    logging.getLogger("matplotlib").setLevel(logging.WARNING)  # before matplotlib's import-time debug lines
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height))


def model_name(scale: str, shape: Sequence[int]) -> str:
    """``BERT-base (12 layers x 12 heads)`` or ``reduced BERT (4 layers x 4 heads)``."""
    return f"{'BERT-base' if scale == 'paper' else 'reduced BERT'} ({shape[0]} layers × {shape[1]} heads)"


def fig2_png(heads: Sequence, n: int, title: str, path: Path) -> Optional[Path]:
    """P = sigmoid(α) of a sentence of ``n`` tokens averaged over ``heads``
    ((N, N) tensors), as the paper's Fig. 2 (left); token 1 is [CLS] / <s>,
    token n [SEP] / </s>."""
    from fairseq_local.analysis.figures import numbered_ticks, save

    if not heads:
        return None
    p = sum(h[:n, :n].float() for h in heads) / len(heads)
    fig = _figure(4.6, 4.0)
    ax = fig.subplots()
    im = ax.imshow(p.numpy(), cmap="viridis", vmin=0.0, vmax=1.0)
    ticks, labels = numbered_ticks(n)
    step = max(1, n // 8)
    ax.set_xticks(ticks[::step], labels[::step])
    ax.set_yticks(ticks[::step], labels[::step])
    ax.set_xlabel("key token")
    ax.set_ylabel("query token")
    ax.set_title(title, fontsize=8)
    fig.colorbar(im, ax=ax, label="P = sigmoid(α)")
    return save(fig, path)


def fig3_png(scores: Dict[str, Dict[str, Values]], rho: dict, prune: Sequence[int], tasks: Sequence[str],
             title: str, path: Path) -> Optional[Path]:
    """Metric against dev sparsity, pruning by P against random pruning, one
    panel per task; error bars: the standard deviation over seeds where a
    point has two seeds or more."""
    from fairseq_local.analysis.figures import save
    from .sparsebert_runs import columns

    fig = _figure(4 * len(tasks), 3.4)
    axes, drawn = fig.subplots(1, len(tasks), squeeze=False)[0], False
    for ax, t in zip(axes, tasks):
        c = columns([t])[0]
        for how, label, style in (("prune", "pruning by P", "o-"), ("random", "random pruning", "s--")):
            pts = sorted((100 * rho[r][t], scores[r][c].mean, scores[r][c].sd or 0.0)
                         for r in (f"{how}-{p}" for p in prune)
                         if rho.get(r, {}).get(t) is not None and scores.get(r, {}).get(c, Values(())).values)
            if pts:
                ax.errorbar([x for x, _, _ in pts], [y for _, y, _ in pts], yerr=[e for _, _, e in pts], fmt=style,
                            capsize=3, label=label)
                drawn = True
        ax.set_xlabel("sparsity % (dev sentences)")
        ax.set_ylabel(f"{t} ({'MCC' if t == 'CoLA' else 'metric'})")
        ax.set_title(f"{title}\n{t}", fontsize=8)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    return save(fig, path) if drawn else None
