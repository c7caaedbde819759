"""``fairseq-local configs``: the named architectures and their encoder
attention weight counts, or config names resolved to archs.

Without options, prints for each of the NMT configurations (a)–(l) of Pande
et al. 2021 (§5.2–5.4, Fig. 4) and then each method arch (SparseBERT's DAM_u,
DAM_s and fixed sparse baselines, Wang et al.'s Adaptive Axis Attention,
Voita et al. 2019's head gates) its paper label, arch name, layout and the
number of encoder self-attention weights (the ≥2-D tensors under
``self_attn``: Wq, Wk, Wv, Wo, plus the FC layer of ``aaa`` heads; no biases;
shared tensors counted once) at Transformer-base size (Pande et al.,
Tables 2–3); then the same for the RoBERTa archs at BERT-base size (Pande et
al. §5.5, Table 4, and the method archs).

``--resolve KEY ...`` prints ``NAME ARCH`` per key, where a key is a paper
letter or an arch name (``transformer_`` may be left out) and NAME is the
paper letter, or the arch name for the method archs: the run name that the
scripts use (``scripts/train-wmt14.sh``, ``sweep-wmt14.sh``, ``demo.sh``).
``--arch KEY ...`` prints the fairseq arch of each key (a registered arch as
it is; ``--roberta``: it must be a RoBERTa arch), and ``--preset NAME`` the
fairseq flags of a model size of :mod:`fairseq_local.models.presets`: what
``scripts/lib.sh`` checks and reads.
"""

import sys
from typing import List, Optional

from .common import command_parser

DETAILS = """\
Without options, prints one row per named architecture: the configurations
(a)-(l) of Pande et al. (§5.2-5.4, Fig. 4), then the method archs
(SparseBERT's DAM_u, DAM_s and fixed sparse baselines; Wang et al.'s Adaptive
Axis Attention; Voita et al. 2019's head gates), with paper name, arch, the
number of encoder self-attention weights at Transformer-base size (Wq, Wk, Wv,
Wo and AAA's FC layer; no biases; tied tensors once; Pande et al.,
Tables 2-3) and the --attn-layout; then the RoBERTa archs (Pande et al.
Table 4 and the method archs) at BERT-base size.

--resolve prints "NAME ARCH" per key instead: NAME is the paper letter, or the
arch name for method archs (the run name used by scripts/train-wmt14.sh).
--arch prints the fairseq arch of each key, one per line: a registered arch
as it is, else the arch of a paper letter or configuration name; with
--roberta each key must be a RoBERTa arch (this plugin's or fairseq's).
--preset prints the fairseq flags of a model size (tiny: the tests', demo:
scripts/demo.sh's, base: Transformer-base) on one line."""


def build_parser():
    from fairseq_local.models.presets import PRESETS

    parser = command_parser("configs", DETAILS)
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--resolve", nargs="+", metavar="KEY",
                      help="paper letters (a-l) or arch names, with or without 'transformer_': "
                           "print 'NAME ARCH' for each")
    what.add_argument("--arch", nargs="+", metavar="KEY",
                      help="registered archs, paper letters or configuration names: print the arch of each")
    what.add_argument("--preset", choices=list(PRESETS), help="print the fairseq flags of this model size")
    parser.add_argument("--roberta", action="store_true", help="with --arch: each must be a RoBERTa arch")
    return parser


def archs(keys: List[str], roberta: bool = False) -> List[str]:
    """The fairseq arch of each key: a registered arch as it is, else the
    arch of a paper letter or configuration name (:func:`resolve`); with
    ``roberta``, each key must be a registered RoBERTa arch.  Raises KeyError
    (with a one-line message) for the first key that is not."""
    from fairseq.models import ARCH_MODEL_REGISTRY
    from fairseq.models.roberta import RobertaModel

    out = []
    for key in keys:
        if roberta and not issubclass(ARCH_MODEL_REGISTRY.get(key, object), RobertaModel):
            raise KeyError(f"'{key}' is not a RoBERTa arch (roberta_local_base, roberta_band6, ..., or fairseq's "
                           "roberta_base; see fairseq-local configs)")
        out.append(key if key in ARCH_MODEL_REGISTRY else resolve([key])[0].split()[1])
    return out


def resolve(keys: List[str]) -> List[str]:
    """``NAME ARCH`` for each key; raises KeyError (with a one-line message)
    for an unknown one, before anything is returned."""
    from fairseq_local.models.archs import get_config

    lines = []
    for key in keys:
        cfg = get_config(key)
        lines.append(f"{cfg.letter or cfg.arch} {cfg.arch}")
    return lines


def attention_weight_count(layout: str, defaults: tuple, embed_dim: int, layers: int, heads: int,
                           max_positions: int) -> int:
    """Unique ≥2-D parameters of the encoder self-attention modules that
    ``layout`` gives at these dimensions (built alone, without the rest of
    the model)."""
    from fairseq_local.attention.build import AttentionBuilder
    from fairseq_local.attention.config import AttentionConfig, attention_options

    options = attention_options(AttentionConfig(attn_layout=layout or None, **dict(defaults)), layers, heads)
    builder = AttentionBuilder(options, embed_dim, layers, heads, max_positions=max_positions)
    from fairseq_local.models.transformer import attention_weight_count as count

    return count([builder(layer) for layer in range(layers)])  # a list: kept alive, so ids stay unique


def table() -> List[str]:
    """The table's lines: config, paper name, arch, attention weights, layout;
    the NMT archs at Transformer-base size, the RoBERTa archs at BERT-base size."""
    from fairseq_local.models.archs import NAMED_ARCHS, ROBERTA_METHOD_CONFIGS, TABLE4_CONFIGS
    from fairseq_local.attention.config import AttentionConfig, attention_options
    from fairseq_local.attention.layout import format_layout

    rows = [("config", "paper name", "arch", "attn weights", "layout")]
    for cfgs, dims in ((NAMED_ARCHS, (512, 6, 8, 1024)), (TABLE4_CONFIGS + ROBERTA_METHOD_CONFIGS, (768, 12, 12, 512))):
        for cfg in cfgs:
            count = attention_weight_count(cfg.layout, cfg.defaults, *dims)
            layout = format_layout(attention_options(AttentionConfig(attn_layout=cfg.layout or None), dims[1], dims[2]).layout)
            rows.append((f"({cfg.letter})" if cfg.letter else "-", cfg.name, cfg.arch, f"{count:,}", layout))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[4] for r in rows]


def main(argv: Optional[List[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.roberta and not args.arch:
        parser.error("--roberta needs --arch")
    if args.preset:
        from fairseq_local.models.presets import PRESETS

        print(" ".join(PRESETS[args.preset].flags()))
        return 0
    try:
        lines = resolve(args.resolve) if args.resolve else archs(args.arch, args.roberta) if args.arch else table()
    except KeyError as e:
        print(f"error: {e.args[0]}", file=sys.stderr)
        return 1
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    from .main import main as cli_main

    sys.exit(cli_main(["configs", *sys.argv[1:]]))
