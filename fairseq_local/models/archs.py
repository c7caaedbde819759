"""Named architectures, as layouts: the NMT encoder configurations (a)–(l) of
Pande et al. (§5.2–5.4, Fig. 4), and the learned and fixed sparse
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


def _all(mask: str) -> str:
    return f"[{mask}*8]*6"


# Every head of that kind, Transformer-base otherwise.  The DAM archs default
# to the way SparseBERT's authors ran DAM (mask before the softmax, see
# modules/learned.py); the gate arch to Voita et al.'s gate setting; the fixed
# sparse baselines take SparseBERT's §4.2 parameters (Table 3) and default to
# standard sparse attention (--mask-mode pre).
PRE = (("mask_mode", "pre"),)
METHOD_CONFIGS: Tuple[PaperConfig, ...] = (
    PaperConfig("", "DAM_u (SparseBERT)", "transformer_dam_u", _all("dam-u"), PRE),
    PaperConfig("", "DAM_s (SparseBERT)", "transformer_dam_s", _all("dam-s"), PRE),
    PaperConfig("", "Adaptive Axis Attention", "transformer_aaa", _all("aaa")),
    PaperConfig("", "Hard-concrete head gates (Voita et al.)", "transformer_head_gates", _all("global:gate"),
                (("gate_preset", "voita"),)),
    PaperConfig("", "Star (SparseBERT)", "transformer_sparse_star", _all("star"), PRE),
    PaperConfig("", "LogSparse (SparseBERT)", "transformer_sparse_logsparse", _all("logsparse"), PRE),
    PaperConfig("", "Strided l=4 (SparseBERT)", "transformer_sparse_strided", _all("strided-4"), PRE),
    PaperConfig("", "Fixed l=4 c=1 (SparseBERT)", "transformer_sparse_fixed", _all("fixed-4-1"), PRE),
    PaperConfig("", "Longformer w=2 g=2 (SparseBERT)", "transformer_sparse_longformer", _all("longformer-2-2"), PRE),
    PaperConfig("", "BigBird w=1 g=2 r=2 (SparseBERT)", "transformer_sparse_bigbird", _all("bigbird-1-2-2"), PRE),
)

NAMED_ARCHS: Tuple[PaperConfig, ...] = NMT_CONFIGS + METHOD_CONFIGS


def get_config(key: str) -> PaperConfig:
    """A named architecture by paper letter or arch name (``transformer_``
    may be left out)."""
    for cfg in NAMED_ARCHS:
        if key and key in (cfg.letter, cfg.arch, cfg.arch[len("transformer_"):]):
            return cfg
    raise KeyError(f"no configuration '{key}' (letters a-l or a named arch)")
