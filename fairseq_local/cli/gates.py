"""``fairseq-local gates``: the hard-concrete head gates of a checkpoint
(Voita et al. 2019, after Louizos et al. 2018's L0 relaxation).

For every gated encoder head (``:gate`` in the layout), prints its layer and
head, its deterministic (evaluation-mode) gate value
clamp(sigmoid(log α)(ζ − γ) + γ, 0, 1), the probability that the gate is
non-zero, and whether the head is closed (gate value 0); then the number of
open heads per layer and in total.
"""

import sys
from typing import List, Optional

from ..checkpoint_compat import encoder_layers_prefix, local_layout, read_checkpoint
from ..attention import HeadGates
from ..attention.layout import LayoutError, parse_layout
from .common import command_parser


DETAILS = """\
For every gated encoder head (':gate' in --attn-layout; Voita et al. 2019),
prints its layer and head, its evaluation-mode gate value
clamp(sigmoid(log alpha)(zeta - gamma) + gamma, 0, 1), the probability that
the gate is non-zero (the head's share of the L0 penalty) and whether the head
is closed (gate value 0); then the number of open heads per layer and in
total."""


def gate_table(model_cfg: dict, state_dict) -> List[dict]:
    """One row per gated head: layer, head (1-based), gate, p_open, closed."""
    layout = parse_layout(model_cfg.get("attn_layout") or "")
    prefix = encoder_layers_prefix(state_dict)
    rows = []
    for l, layer in enumerate(layout):
        if not layer.gated_heads:
            continue
        key = f"{prefix}{l}.self_attn.gates.log_alpha"
        if key not in state_dict:
            raise ValueError(f"checkpoint has no '{key}'")
        gates = HeadGates(len(layer.gated_heads), beta=model_cfg.get("gate_beta") or 2 / 3,
                          gamma=model_cfg.get("gate_gamma") or -0.1, zeta=model_cfg.get("gate_zeta") or 1.1)
        value = state_dict[key]
        if tuple(value.shape) != tuple(gates.log_alpha.shape):
            raise ValueError(f"checkpoint's '{key}' has shape {tuple(value.shape)}, but layer {l + 1} has "
                             f"{len(layer.gated_heads)} gated heads")
        gates.log_alpha.data.copy_(value.float())
        values, p_open = gates.eval_values().detach(), gates.l0().detach()
        for k, h in enumerate(layer.gated_heads):
            rows.append({"layer": l + 1, "head": h + 1, "gate": float(values[k]),
                         "p_open": float(p_open[k]), "closed": bool(values[k] == 0)})
    return rows


def build_parser():
    """The parser of ``fairseq-local gates``."""
    parser = command_parser("gates", DETAILS)
    parser.add_argument("checkpoint", help="a checkpoint with gated heads")
    return parser


def main(argv: Optional[List[str]] = None) -> None:
    """Run ``fairseq-local gates``: print the table (it writes no file); a bad
    checkpoint is one ``error:`` line, exit status 2."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        model_cfg, state_dict = read_checkpoint(args.checkpoint)
        local_layout(args.checkpoint, model_cfg, "gated heads")
        rows = gate_table(model_cfg, state_dict)
    except (FileNotFoundError, ValueError, LayoutError) as e:
        parser.error(str(e))
    if not rows:
        parser.error(f"'{args.checkpoint}' has no gated heads (':gate' in --attn-layout)")
    print(f"{'layer':>5} {'head':>4} {'gate':>6} {'P(open)':>7}  state")
    for r in rows:
        print(f"{r['layer']:>5} {r['head']:>4} {r['gate']:6.3f} {r['p_open']:7.3f}  "
              f"{'closed' if r['closed'] else 'open'}")
    layers = sorted({r["layer"] for r in rows})
    per_layer = ", ".join(f"L{l}: {sum(not r['closed'] for r in rows if r['layer'] == l)}" for l in layers)
    print(f"open heads: {sum(not r['closed'] for r in rows)} of {len(rows)} ({per_layer})")


if __name__ == "__main__":
    from .main import main as cli_main

    sys.exit(cli_main(["gates", *sys.argv[1:]]))
