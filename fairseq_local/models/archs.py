"""Named architectures, as layouts: the NMT encoder configurations (a)–(l) of
Pande et al. (§5.2–5.4, Fig. 4), their BERT configurations (§5.5, Table 4),
and, for both model families, the learned and fixed sparse
methods of SparseBERT (Shi et al. 2021), Voita et al. (2019) and Adaptive
Axis Attention (Wang et al. 2022).

``fairseq-local configs`` prints them with their weight counts.
"""

from dataclasses import dataclass
from typing import List, Tuple


@dataclass(frozen=True)
class PaperConfig:
    letter: str
    name: str
    arch: str
    layout: str
    # The arch's defaults of attention options, e.g. (("mask_mode", "pre"),).
    defaults: Tuple[Tuple[str, object], ...] = ()


def _tied(masks: List[str], group: str) -> str:
    return ",".join(f"{m}{group}" for m in masks)


# "All masks once and identity twice" (Pande et al., §5.2).
ALL_MASKS = ["prev-1", "prev-2", "next-1", "next-2", "band-1", "band-2", "identity", "identity"]
GLOBAL3 = "[global*8]*3"

NMT_CONFIGS: Tuple[PaperConfig, ...] = (
    PaperConfig("a", "Baseline", "transformer_local_baseline", "[global*8]*6"),
    PaperConfig("b", "2LocHeads All6", "transformer_local_2lochead_all6", "[band-1,band-2,global*6]*6"),
    PaperConfig("c", "4LocHeads All6", "transformer_local_4lochead_all6", "[band-1,band-2,band-1,band-2,global*4]*6"),
    PaperConfig("d", "8LocHeads First3", "transformer_local_8lochead_first3", f"[{','.join(ALL_MASKS)}]*3;{GLOBAL3}"),
    PaperConfig("e", "8LocHeads Last3", "transformer_local_8lochead_last3", f"{GLOBAL3};[{','.join(ALL_MASKS)}]*3"),
    PaperConfig("f", "8LocHeads All6", "transformer_local_8lochead_all6", f"[{','.join(ALL_MASKS)}]*6"),
    PaperConfig(
        "g", "4LocHeads 4TiedLoc All6", "transformer_local_4lochead_4tiedloc_all6",
        "[" + ",".join(f"identity@{g},band-2@{g}" for g in "abcd") + "]*6",
    ),
    PaperConfig(
        "h", "2LocHeads 6TiedLoc All6", "transformer_local_2lochead_6tiedloc_all6",
        "[" + ",".join(_tied(["identity", "band-2", "prev-1", "next-1"], f"@{g}") for g in "ab") + "]*6",
    ),
    PaperConfig("i", "1LocHead 7TiedLoc All6", "transformer_local_1lochead_7tiedloc_all6", f"[{_tied(ALL_MASKS, '@a')}]*6"),
    PaperConfig("j", "1LocHead 7TiedLoc First3", "transformer_local_1lochead_7tiedloc_first3", f"[{_tied(ALL_MASKS, '@a')}]*3;{GLOBAL3}"),
    PaperConfig("k", "Half tied", "transformer_local_half_tied", f"[{_tied(ALL_MASKS, '@@t')}]*3;{GLOBAL3}"),
    PaperConfig("l", "Fully tied", "transformer_local_fully_tied", f"[{_tied(ALL_MASKS, '@@t')}]*6"),
)


def _all(mask: str, layers: int = 6, heads: int = 8) -> str:
    return f"[{mask}*{heads}]*{layers}"


# Every head of that kind, Transformer-base otherwise.  The DAM archs default
# to the way SparseBERT's authors ran DAM (mask before the softmax, see
# attention/learned.py); the gate arch to Voita et al.'s gate setting; the fixed
# sparse baselines take SparseBERT's §4.2 parameters (Table 3) and default to
# standard sparse attention (--mask-mode pre).
PRE = (("mask_mode", "pre"),)
# (paper name, arch name after "transformer_"/"roberta_", head mask, defaults)
METHODS = (
    ("DAM_u (SparseBERT)", "dam_u", "dam-u", PRE),
    ("DAM_s (SparseBERT)", "dam_s", "dam-s", PRE),
    ("Adaptive Axis Attention", "aaa", "aaa", ()),
    ("Hard-concrete head gates (Voita et al.)", "head_gates", "global:gate", (("gate_preset", "voita"),)),
    ("Star (SparseBERT)", "sparse_star", "star", PRE),
    ("LogSparse (SparseBERT)", "sparse_logsparse", "logsparse", PRE),
    ("Strided l=4 (SparseBERT)", "sparse_strided", "strided-4", PRE),
    ("Fixed l=4 c=1 (SparseBERT)", "sparse_fixed", "fixed-4-1", PRE),
    ("Longformer w=2 g=2 (SparseBERT)", "sparse_longformer", "longformer-2-2", PRE),
    ("BigBird w=1 g=2 r=2 (SparseBERT)", "sparse_bigbird", "bigbird-1-2-2", PRE),
)
METHOD_CONFIGS: Tuple[PaperConfig, ...] = tuple(
    PaperConfig("", name, f"transformer_{suffix}", _all(mask), defaults) for name, suffix, mask, defaults in METHODS)

# BERT-base with local and Q/K-tied heads: Pande et al. §5.5, Table 4 (12
# layers of 12 heads; "tied" is Q/K tying as in configurations (g)-(l)).
BERT_LAYERS, BERT_HEADS = 12, 12
TABLE4_CONFIGS: Tuple[PaperConfig, ...] = (
    PaperConfig("", "BERT-base", "roberta_local_base", ""),
    PaperConfig("", "All Band2 Untied", "roberta_band2", _all("band-2", 12, 12)),
    PaperConfig("", "All Band6 Untied", "roberta_band6", _all("band-6", 12, 12)),
    PaperConfig("", "All Band6 AllTied", "roberta_band6_all_tied", _all("band-6@@t", 12, 12)),
    PaperConfig("", "All Band6 132Tied", "roberta_band6_132_tied", "[band-6@@t*12]*11;[band-6*12]"),
    PaperConfig("", "All Band6 120Tied", "roberta_band6_120_tied", "[band-6@@t*12]*10;[band-6*12]*2"),
)
ROBERTA_METHOD_CONFIGS: Tuple[PaperConfig, ...] = tuple(
    PaperConfig("", name, f"roberta_{suffix}", _all(mask, BERT_LAYERS, BERT_HEADS), defaults)
    for name, suffix, mask, defaults in METHODS)
# The RoBERTa archs with a fixed layout (roberta_local_base/large take --attn-layout).
ROBERTA_ARCHS: Tuple[PaperConfig, ...] = TABLE4_CONFIGS[1:] + ROBERTA_METHOD_CONFIGS

NAMED_ARCHS: Tuple[PaperConfig, ...] = NMT_CONFIGS + METHOD_CONFIGS


def get_config(key: str) -> PaperConfig:
    """A named architecture by paper letter or arch name (``transformer_``
    may be left out)."""
    for cfg in NAMED_ARCHS + TABLE4_CONFIGS + ROBERTA_METHOD_CONFIGS:
        short = cfg.arch[len("transformer_"):] if cfg.arch.startswith("transformer_") else None
        if key and key in (cfg.letter, cfg.arch, short):
            return cfg
    raise KeyError(f"no configuration '{key}' (letters a-l or a named arch)")
