"""The figures of ``reproduce voita``'s report, each titled with the model
and the scale it shows: Fig. 1 (each encoder head's LRP importance against
its confidence, coloured by role), Fig. 7 (BLEU against the encoder heads
kept, with its 95 % bootstrap interval over the test sentences: one seed, so
the error bars are over sentences) and Fig. 8 (the encoder heads that remain,
by role).  Layers and heads are numbered from 1."""

from pathlib import Path
from typing import Dict, Optional, Sequence, Tuple

from fairseq_local.analysis.figures import save  # first: it quiets matplotlib's import-time debug lines
from fairseq_local.analysis.roles import ROLE_COLOURS, ROLES

Interval = Tuple[float, float]  # a run's BLEU 95 % interval (lo, hi)


def plot_heads(points: Sequence[dict], path: Path, title: str) -> Path:
    """Fig. 1: LRP importance against confidence, one point per encoder
    head, coloured by role; ``title`` names the model and scale."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(5.5, 4.0))
    ax = fig.add_subplot()
    for role in ROLES:
        xs = [x for x in points if x["role"] == role]
        if xs:
            ax.scatter([x["confidence"] for x in xs], [x["importance"] for x in xs], s=28,
                       color=ROLE_COLOURS[role], edgecolor="0.3", linewidth=0.5, label=f"{role} ({len(xs)})")
    ax.set_xlabel("confidence (mean maximum attention weight)")
    ax.set_ylabel("LRP importance")
    ax.set_title(f"{title}\nencoder heads: importance against confidence (Voita et al. 2019, Fig. 1)", fontsize=8)
    ax.legend(fontsize=8)
    return save(fig, path)


def _label(row: dict) -> str:
    return "every head" if row.get("lambda") is None else f"λ={row['lambda']:g}"


def plot_curve(rows: Sequence[dict], intervals: Dict[str, Interval], path: Path, title: str) -> Path:
    """Fig. 7: BLEU against the encoder heads kept, one point per run (the
    base model and each λ), with the run's 95 % bootstrap interval over the
    test sentences where ``intervals`` has it (keyed by the run's name)."""
    from matplotlib.figure import Figure

    done = sorted((r for r in rows if r.get("bleu") is not None), key=lambda r: r["kept"].get("enc-self", 0))
    fig = Figure(figsize=(5.5, 3.8))
    ax = fig.add_subplot()
    xs = [r["kept"].get("enc-self", 0) for r in done]
    ys = [r["bleu"] for r in done]
    ax.plot(xs, ys, "-", color="0.6", linewidth=1)
    for r, x, y in zip(done, xs, ys):
        lo_hi: Optional[Interval] = intervals.get(run_name(r))
        # the row's BLEU is sacreBLEU's, to 2 decimals: clip the bars at the point
        err = [[max(y - lo_hi[0], 0.0)], [max(lo_hi[1] - y, 0.0)]] if lo_hi else None
        ax.errorbar([x], [y], yerr=err, fmt="o", color="k" if r.get("lambda") is None else "tab:blue",
                    capsize=3, markersize=4)
        ax.annotate(_label(r), (x, y), fontsize=7, textcoords="offset points", xytext=(4, 4))
    ax.set_xlabel("encoder heads kept")
    ax.set_ylabel("BLEU (95 % interval over test sentences)" if intervals else "BLEU")
    ax.set_title(f"{title}\nBLEU against encoder heads kept (Voita et al. 2019, Fig. 7)", fontsize=8)
    return save(fig, path)


def plot_roles(rows: Sequence[dict], path: Path, title: str) -> Path:
    """Fig. 8: the encoder heads that remain, by role, one stacked bar per
    run, fewest heads on the right, each bar named by its λ."""
    from matplotlib.figure import Figure

    done = sorted((r for r in rows if r.get("roles")), key=lambda r: -sum(r["roles"].values()))
    fig = Figure(figsize=(max(4.5, 0.8 * len(done) + 2), 3.8))
    ax = fig.add_subplot()
    bottom = [0] * len(done)
    for role in ROLES:
        values = [r["roles"].get(role, 0) for r in done]
        ax.bar(range(len(done)), values, bottom=bottom, color=ROLE_COLOURS[role], label=role, edgecolor="white")
        bottom = [b + v for b, v in zip(bottom, values)]
    ax.set_xticks(range(len(done)), [f"{_label(r)}\n{sum(r['roles'].values())}" for r in done], fontsize=7)
    ax.set_xlabel("run and encoder heads kept")
    ax.set_ylabel("heads")
    ax.legend(fontsize=7)
    ax.set_title(f"{title}\nencoder heads kept, by role (Voita et al. 2019, Fig. 8)", fontsize=8)
    return save(fig, path)


def run_name(row: dict) -> str:
    """The run's folder under the pruning curve's: ``base`` or ``lambda-<λ>``
    (``prune-curve``'s own names)."""
    from fairseq_local.analysis.pruning import run_name as name

    return row.get("run") or ("base" if row.get("lambda") is None else name(row["lambda"]))
