"""Print every named architecture with its encoder attention weight count.

``python -m fairseq_local.configs`` prints, for each of seed 000's NMT
configurations (a)–(l) and then each learned or sparse method arch, its paper
label, arch name, layout and the number of encoder self-attention weights
(the ≥2-D tensors under ``self_attn``: Wq, Wk, Wv, Wo, plus the FC layer of
``aaa`` heads; no biases; shared tensors counted once) at Transformer-base
size (seed 000, Tables 2–3).
"""

import argparse
from typing import List, Optional

from .models.local_transformer import encoder_attention_weight_count
from .modules.layout import format_layout, parse_layout
from .paper_configs import NAMED_ARCHS


def build_encoder(arch: str, overrides: Optional[dict] = None, vocab_size: int = 64):
    """Build the encoder of a registered arch (Transformer-base unless
    overridden) over a dummy dictionary of ``vocab_size`` symbols."""
    from fairseq.data import Dictionary
    from fairseq.models import ARCH_CONFIG_REGISTRY
    from fairseq.models.transformer import TransformerConfig, TransformerModel

    from .models.local_transformer import LocalTransformerModel

    args = argparse.Namespace(**(overrides or {}))
    ARCH_CONFIG_REGISTRY[arch](args)
    cfg = TransformerConfig.from_namespace(args)
    dictionary = Dictionary()
    for i in range(vocab_size - len(dictionary)):
        dictionary.add_symbol(f"w{i}")
    embed = TransformerModel.build_embedding(args, dictionary, cfg.encoder.embed_dim)
    return LocalTransformerModel.build_encoder(cfg, dictionary, embed)


def main(argv: Optional[List[str]] = None) -> None:

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.parse_args(argv)
    rows = [("config", "paper name", "arch", "attn weights", "layout")]
    for cfg in NAMED_ARCHS:
        count = encoder_attention_weight_count(build_encoder(cfg.arch))
        layout = format_layout(parse_layout(cfg.layout))
        rows.append((f"({cfg.letter})" if cfg.letter else "-", cfg.name, cfg.arch, f"{count:,}", layout))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[4])


if __name__ == "__main__":
    main()
