"""``fairseq-local gates``: the hard-concrete head gates of a checkpoint
(Voita et al. 2019, after Louizos et al. 2018's L0 relaxation).

For every gated head (``:gate`` in the layout: encoder self-attention;
``--decoder-gates self,cross``: decoder self-attention and encoder–decoder
attention), prints its attention type, layer and head, its deterministic (evaluation-mode) gate value
clamp(sigmoid(log α)(ζ − γ) + γ, 0, 1), the probability that the gate is
non-zero, and whether the head is closed (gate value 0); then the number of
open heads per layer and in total.
"""

import re
import sys
from typing import List, Optional

from fairseq_local.checkpoint_compat import encoder_layers_prefix, local_layout, read_checkpoint
from fairseq_local.attention import HeadGates
from fairseq_local.attention.config import attention_options
from fairseq_local.attention.layout import LayoutError
from .common import command_parser


DETAILS = """\
For every gated head (Voita et al. 2019: ':gate' in --attn-layout for the
encoder, --decoder-gates self,cross for the decoder), prints its attention
type (enc-self, dec-self, dec-cross), layer and head, its evaluation-mode gate value
clamp(sigmoid(log alpha)(zeta - gamma) + gamma, 0, 1), the probability that
the gate is non-zero (the head's share of the L0 penalty) and whether the head
is closed (gate value 0); then the number of open heads per layer and in
total."""


# The attention types, as the table names them (Voita et al. 2019 §6).
ATTENTION_TYPES = ("enc-self", "dec-self", "dec-cross")
_DECODER_KEY = re.compile(r"^decoder\.layers\.(\d+)\.(self_attn|encoder_attn)\.gates\.log_alpha$")


def _gates_like(model_cfg: dict, num_gates: int) -> HeadGates:
    return HeadGates(num_gates, beta=model_cfg.get("gate_beta") or 2 / 3,
                     gamma=model_cfg.get("gate_gamma") or -0.1, zeta=model_cfg.get("gate_zeta") or 1.1)


def _rows(attention: str, layer: int, heads: List[int], gates: HeadGates) -> List[dict]:
    values, p_open = gates.eval_values().detach(), gates.l0().detach()
    return [{"attention": attention, "layer": layer, "head": h + 1, "gate": float(values[k]),
             "p_open": float(p_open[k]), "closed": bool(values[k] == 0)} for k, h in enumerate(heads)]


def gate_table(model_cfg: dict, state_dict) -> List[dict]:
    """One row per gated head: attention type (:data:`ATTENTION_TYPES`),
    layer and head (1-based), gate, p_open, closed; encoder heads first, then
    the decoder's (``--decoder-gates``) by layer, self before cross."""
    layout = attention_options(model_cfg).layout
    prefix = encoder_layers_prefix(state_dict)
    rows = []
    for l, layer in enumerate(layout):
        if not layer.gated_heads:
            continue
        key = f"{prefix}{l}.self_attn.gates.log_alpha"
        if key not in state_dict:
            raise ValueError(f"checkpoint has no '{key}'")
        gates = _gates_like(model_cfg, len(layer.gated_heads))
        value = state_dict[key]
        if tuple(value.shape) != tuple(gates.log_alpha.shape):
            raise ValueError(f"checkpoint's '{key}' has shape {tuple(value.shape)}, but layer {l + 1} has "
                             f"{len(layer.gated_heads)} gated heads")
        gates.log_alpha.data.copy_(value.float())
        rows += _rows("enc-self", l + 1, list(layer.gated_heads), gates)
    decoder = sorted((int(m.group(1)), m.group(2) == "encoder_attn", key)
                     for key in state_dict for m in [_DECODER_KEY.match(key)] if m)
    for l, cross, key in decoder:
        value = state_dict[key].float().reshape(-1)
        gates = _gates_like(model_cfg, value.numel())
        gates.log_alpha.data.copy_(value)
        rows += _rows("dec-cross" if cross else "dec-self", l + 1, list(range(value.numel())), gates)
    return rows


def summary(rows: List[dict]) -> List[str]:
    """The lines after the table: open heads per layer, one line per
    attention type when there are several, then the total."""
    def line(chosen: List[dict]) -> str:
        layers = sorted({r["layer"] for r in chosen})
        per_layer = ", ".join(f"L{l}: {sum(not r['closed'] for r in chosen if r['layer'] == l)}" for l in layers)
        return f"{sum(not r['closed'] for r in chosen)} of {len(chosen)} ({per_layer})"

    kinds = [k for k in ATTENTION_TYPES if any(r["attention"] == k for r in rows)]
    if len(kinds) == 1:
        return [f"open heads: {line(rows)}"]
    out = [f"open heads, {k}: {line([r for r in rows if r['attention'] == k])}" for k in kinds]
    return out + [f"open heads: {sum(not r['closed'] for r in rows)} of {len(rows)}"]


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
        parser.error(f"'{args.checkpoint}' has no gated heads (':gate' in --attn-layout, or --decoder-gates)")
    print(f"{'attention':<9} {'layer':>5} {'head':>4} {'gate':>6} {'P(open)':>7}  state")
    for r in rows:
        print(f"{r['attention']:<9} {r['layer']:>5} {r['head']:>4} {r['gate']:6.3f} {r['p_open']:7.3f}  "
              f"{'closed' if r['closed'] else 'open'}")
    print("\n".join(summary(rows)))


if __name__ == "__main__":
    from .main import main as cli_main

    sys.exit(cli_main(["gates", *sys.argv[1:]]))
