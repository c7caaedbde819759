"""The Markdown table and figures of :func:`~fairseq_local.analysis.roles.head_roles`
(Voita et al. 2019, §5 and Fig. 1c, 4): a row per head, the best head of every
relation against the positional baseline (Table 1), the layer x head grid of
roles shaded by confidence, and the accuracy of the best head per relation.

Figures use matplotlib's object API (no pyplot state, no display needed) and
number layers and heads from 1 (:func:`~.figures.head_grid`); the table keeps
the JSON's numbering from 0, as every ``analyze`` table does.
"""

from pathlib import Path
from typing import List, Optional, Union

import numpy as np
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from .bias import format_cell
from .figures import head_grid, save
from .roles import ROLE_COLOURS, ROLES, best_relation, syntactic_keys

__all__ = ["PAPER_NAMES", "roles_table", "plot_roles", "plot_syntactic"]

PathLike = Union[str, Path]
# Voita et al. Table 1 names the direction by the query's and the partner's role.
PAPER_NAMES = {
    "nsubj:head->dep": "v→s", "nsubj:dep->head": "s→v", "obj:head->dep": "v→o", "obj:dep->head": "o→v",
    "amod:head->dep": "noun→adj", "amod:dep->head": "adj→noun", "advmod:head->dep": "v→adv",
    "advmod:dep->head": "adv→v",
}


def _name(key: str) -> str:
    return f"{key.split(':')[0]} {PAPER_NAMES.get(key, key)}"


def _offset(o: Optional[int]) -> str:
    return "–" if o is None else f"{o:+d}" if o else "0"


def _pct(v: Optional[float]) -> str:
    return "–" if v is None else f"{100 * v:.1f}"


def roles_table(roles: dict) -> str:
    """Markdown: a row per head (role, confidence, positional offset and share,
    the relation with the largest accuracy - baseline, rare share, rows
    counted), then per relation its baseline and best head (Voita Table 1).
    Percentages for shares and accuracies."""
    lines = ["| layer | head | role | confidence | offset | offset share % | best relation | accuracy % "
             "| baseline % | rare share % | rows |",
             "|---:|---:|:---|---:|---:|---:|:---|---:|---:|---:|---:|"]
    for layer, row in enumerate(roles["roles"]):
        for head, role in enumerate(row):
            best = best_relation(roles, layer, head)
            offset = roles["positional_offset"][layer][head]
            rel = ("–", "–", "–") if best is None else (_name(best[0]), _pct(best[1]), _pct(best[2]))
            lines.append(
                f"| {layer} | {head} | {role} | {format_cell(roles['confidence'][layer][head])} "
                f"| {_offset(offset)} | {_pct(roles['positional_share'][layer][head])} "
                f"| {rel[0]} | {rel[1]} | {rel[2]} | {_pct(roles['rare_share'][layer][head])} "
                f"| {roles['rows'][layer][head]} |")
    counts = {r: sum(row.count(r) for row in roles["roles"]) for r in ROLES}
    lines += ["", "Roles: " + ", ".join(f"{r} {counts[r]}" for r in ROLES)
              + f" ({roles['sentences']} sentences; rare share over {roles['rare_sentences']} of them).", "",
              "| relation | instances | baseline offset | baseline % | best head | accuracy % |",
              "|:---|---:|---:|---:|:---|---:|"]
    for key in syntactic_keys():
        s = roles["syntactic"].get(key)
        if s is None:
            continue
        acc = np.array(s["accuracy"], dtype=float)
        best = "–", "–"
        if not np.isnan(acc).all():
            layer, head = np.unravel_index(np.nanargmax(acc), acc.shape)
            best = f"L{layer} H{head}", _pct(float(acc[layer, head]))
        offset = s["baseline_offset"]
        lines.append(f"| {_name(key)} | {s['instances']} | {_offset(offset)} "
                     f"| {_pct(s['baseline'])} | {best[0]} | {best[1]} |")
    return "\n".join(lines) + "\n"


def _label(roles: dict, layer: int, head: int, role: str) -> str:
    """The cell text of the grid: the offset of a positional head, the best
    relation of a syntactic one, "r" for a rare-word head."""
    if role == "positional":
        return _offset(roles["positional_offset"][layer][head])
    if role == "syntactic":
        best = best_relation(roles, layer, head)
        return PAPER_NAMES.get(best[0], best[0]) if best else ""
    return "r" if role == "rare" else ""


def plot_roles(roles: dict, path: PathLike) -> Path:
    """Voita et al. Fig. 1b-c in one grid: layer x head cells coloured by role
    (positional purple, syntactic green, rare orange, other grey), the colour's
    strength the head's confidence (white = 0), and the offset, relation or
    "r" written in the cell."""
    names = roles["roles"]
    layers, heads = len(names), len(names[0]) if names else 0
    image = np.ones((layers, heads, 3))
    for (layer, head), _ in np.ndenumerate(np.zeros((layers, heads))):
        conf = roles["confidence"][layer][head]
        strength = 0.15 + 0.85 * (conf if conf is not None else 0.0)
        image[layer, head] = 1 - strength * (1 - np.array(to_rgb(ROLE_COLOURS[names[layer][head]])))
    fig = Figure(figsize=(0.55 * heads + 3.2, 0.45 * layers + 1.3))
    ax = fig.add_subplot()
    ax.imshow(image, aspect="equal")
    for (layer, head), _ in np.ndenumerate(np.zeros((layers, heads))):
        ax.text(head, layer, _label(roles, layer, head, names[layer][head]), ha="center", va="center", fontsize=6)
    head_grid(ax, layers, heads)
    handles = [Patch(color=ROLE_COLOURS[r], label=f"{r} ({sum(row.count(r) for row in names)})") for r in ROLES]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.02, 1), frameon=False,
              title="role (shade: confidence)", title_fontsize=7)
    ax.set_title(f"Head roles, Voita et al. 2019 ({roles.get('sentences', '?')} sentences)", fontsize=8)
    return save(fig, path)


def plot_syntactic(roles: dict, path: PathLike) -> Path:
    """Voita et al. Fig. 4: per relation and direction, the accuracy of the
    best head (green) against the positional baseline (red)."""
    keys = [k for k in syntactic_keys() if roles["syntactic"].get(k, {}).get("baseline") is not None]
    best: List[float] = []
    for k in keys:
        acc = np.array(roles["syntactic"][k]["accuracy"], dtype=float)
        best.append(0.0 if np.isnan(acc).all() else float(np.nanmax(acc)))
    base = [roles["syntactic"][k]["baseline"] for k in keys]
    x = np.arange(len(keys))
    fig = Figure(figsize=(max(4.0, 0.8 * len(keys) + 1.5), 3.2))
    ax = fig.add_subplot()
    ax.bar(x - 0.2, base, 0.4, color="tab:red", label="baseline (most frequent offset)")
    ax.bar(x + 0.2, best, 0.4, color=ROLE_COLOURS["syntactic"], label="best head")
    ax.set_xticks(x, [_name(k) for k in keys], rotation=30, ha="right", fontsize=7)
    ax.set_ylim(0, 1.2)
    ax.set_yticks(np.linspace(0, 1, 6))
    ax.set_ylabel("accuracy")
    ax.legend(frameon=False, fontsize=7, loc="upper left", ncol=2)
    if not keys:
        ax.text(0.5, 0.5, "no relations in the dump (needs CoNLL-U input)", ha="center", va="center",
                transform=ax.transAxes)
    ax.set_title("Dependency scores, Voita et al. 2019 Fig. 4", fontsize=8)
    return save(fig, path)
