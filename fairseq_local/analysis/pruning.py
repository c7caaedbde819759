"""The pruning curve of Voita et al. (2019, §6, Fig. 7 and Fig. 8): one
row per L0 weight λ with the heads kept per attention type, BLEU and the
roles of the encoder heads that remain; the table and the two figures.

A row is a dict::

    {"lambda": 0.05, "kept": {"enc-self": 21, "dec-self": 7, "dec-cross": 8},
     "heads": {"enc-self": 48, "dec-self": 16, "dec-cross": 16},
     "bleu": 31.2, "roles": {"positional": 9, "syntactic": 4, "rare": 1, "other": 7}}

``lambda`` is None for the model before pruning (every head kept).
"""

from typing import Dict, List, Optional, Sequence

from .roles import ROLES


def run_name(lam: float) -> str:
    """The folder of the run at L0 weight ``lam`` under a pruning curve's (``prune-curve``)."""
    return f"lambda-{lam:g}"


ATTENTION_TYPES = ("enc-self", "dec-self", "dec-cross")
ROLE_ORDER = ROLES  # Voita et al. 2019, Fig. 8's categories (:func:`.roles.classify`)


def kept_heads(gate_rows: Sequence[dict]) -> Dict[str, int]:
    """Open heads per attention type, from ``fairseq-local gates``' rows
    (:func:`fairseq_local_cli.gates.gate_table`)."""
    return {t: sum(1 for r in gate_rows if r["attention"] == t and not r["closed"])
            for t in ATTENTION_TYPES if any(r["attention"] == t for r in gate_rows)}


def role_counts(roles: Sequence[Sequence[str]], open_heads: Optional[Sequence[Sequence[bool]]] = None) -> Dict[str, int]:
    """Heads per role (:data:`ROLE_ORDER`) among the open ones.

    Args:
        roles: one role per layer and head (``classify``).
        open_heads: whether each head is open (all, if None).
    """
    counts = {r: 0 for r in ROLE_ORDER}
    for l, layer in enumerate(roles):
        for h, role in enumerate(layer):
            if open_heads is None or open_heads[l][h]:
                counts[role if role in counts else "other"] += 1
    return counts


def _cell(value, fmt: str = "{}") -> str:
    return "-" if value is None else fmt.format(value)


def curve_table(rows: Sequence[dict]) -> str:
    """The Markdown table: λ, heads kept per attention type and in all, BLEU,
    and the roles of the remaining encoder heads."""
    types = [t for t in ATTENTION_TYPES if any(t in r.get("heads", {}) for r in rows)]
    head = ["λ", *[f"{t} kept" for t in types], "total kept", "BLEU", *ROLE_ORDER]
    lines = ["| " + " | ".join(head) + " |", "|" + "---:|" * len(head)]
    for r in rows:
        kept = [r["kept"].get(t) for t in types]
        of = [r["heads"].get(t) for t in types]
        cells = [_cell(r["lambda"], "{:g}") if r["lambda"] is not None else "none (base)"]
        cells += [f"{k}/{n}" if k is not None else "-" for k, n in zip(kept, of)]
        cells.append(f"{sum(k for k in kept if k is not None)}/{sum(n for n in of if n is not None)}")
        cells.append(_cell(r.get("bleu"), "{:.2f}"))
        roles = r.get("roles") or {}
        cells += [_cell(roles.get(k)) for k in ROLE_ORDER]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _figure(width: float):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, 3.8))
    return fig, fig.add_subplot()


def _finish(fig, ax, xlabel: str, ylabel: str, title: str, path: str) -> str:
    from .figures import save

    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8)
    save(fig, path)
    return path


def plot_curve(rows: Sequence[dict], path: str) -> str:
    """BLEU against the heads kept: in all, and per attention type (Voita et
    al. 2019, Fig. 7).  Returns ``path``."""
    done = sorted((r for r in rows if r.get("bleu") is not None), key=lambda r: sum(r["kept"].values()))
    fig, ax = _figure(5.5)
    ax.plot([sum(r["kept"].values()) for r in done], [r["bleu"] for r in done], "o-", color="k", label="all")
    markers = {"enc-self": "s--", "dec-self": "^--", "dec-cross": "v--"}
    for t in ATTENTION_TYPES:
        pts = [(r["kept"][t], r["bleu"]) for r in done if t in r["kept"]]
        if pts:
            ax.plot(*zip(*pts), markers[t], alpha=0.7, label=t)
    for r in done:
        if r["lambda"] is not None:
            ax.annotate(f"λ={r['lambda']:g}", (sum(r["kept"].values()), r["bleu"]), fontsize=7,
                        textcoords="offset points", xytext=(3, 3))
    return _finish(fig, ax, "heads kept", "BLEU", "BLEU against heads kept (Voita et al. 2019, Fig. 7)", path)


def plot_roles(rows: Sequence[dict], path: str) -> str:
    """The encoder heads that remain, by role, as heads are removed (Voita et
    al. 2019, Fig. 8): one stacked bar per run, fewest heads on the right.
    Returns ``path``."""
    from .roles import ROLE_COLOURS

    done = sorted((r for r in rows if r.get("roles")), key=lambda r: -sum(r["roles"].values()))
    fig, ax = _figure(max(4.0, 0.7 * len(done) + 2))
    xs = list(range(len(done)))
    bottom = [0] * len(done)
    for role in ROLE_ORDER:
        values = [r["roles"].get(role, 0) for r in done]
        ax.bar(xs, values, bottom=bottom, color=ROLE_COLOURS.get(role, "0.7"), label=role, edgecolor="white")
        bottom = [b + v for b, v in zip(bottom, values)]
    ax.set_xticks(xs)
    ax.set_xticklabels([str(sum(r["roles"].values())) for r in done])
    return _finish(fig, ax, "encoder heads kept", "heads",
                   "Encoder heads kept, by role (Voita et al. 2019, Fig. 8)", path)


def curve_lines(rows: Sequence[dict]) -> List[str]:
    """A reading of the curve: BLEU at the fewest heads against the base."""
    base = next((r for r in rows if r["lambda"] is None and r.get("bleu") is not None), None)
    pruned = [r for r in rows if r["lambda"] is not None and r.get("bleu") is not None]
    if not base or not pruned:
        return []
    least = min(pruned, key=lambda r: sum(r["kept"].values()))
    total = sum(base["heads"].values()) if base.get("heads") else None
    return [f"fewest heads: {sum(least['kept'].values())}" + (f" of {total}" if total else "")
            + f" at λ={least['lambda']:g}, BLEU {least['bleu']:.2f} against {base['bleu']:.2f} with every head"]
