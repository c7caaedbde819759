"""Pascual, Brunner and Wattenhofer, "Telling BERT's Full Story: from Local
Attention to Global Aggregation" (EACL 2021): the printed numbers the
report compares with, and the findings it decides.  Data only.

Layers are numbered as the paper prints them (from 1; its Appendix C labels
read "L 0" for its Fig. 12, "Layer 1"); the paper prints no table, so the
numbers are those its text states about Figs. 1 and 6."""

# §5: the data and the model.
HTA_SETUP = {
    "model": "BERT-base uncased, not fine-tuned (Google's release): 12 layers x 12 heads, head dimension 64",
    "data": "1,800 examples of the MNLI-matched development set, at most 64 tokens (the head dimension: "
            "attention is identifiable only up to it, Brunner et al. 2020)",
    "lengths": (6, 64),        # §5: sequence lengths range from 6 to 64 tokens
    "median_length": 34,       # §5 (§7 says "the median length of the examples is 36")
    "tokens": 63456,           # §5: tokens in the subset
    "examples": 1800,
    "heads": 144,
    "fig4_languages": "German BERT (deepset) and AraBERT on 1,800 XNLI examples, beside English (§7, Fig. 4)",
}

# Eq. 1: c_ij = ||d e_j / d e_i|| / sum_k ||d e_j / d e_k||, applied per head output o_{h,j} (§4):
# previous-layer contribution C(e^{l-1}_i, o^l_{h,j}) and input contribution C(e^0_i, o^l_{h,j}).
HTA_CONTRIBUTIONS = {"previous": "C(e_i^(l-1), o_(h,j)^l): hidden embeddings at the head's input (§4, §6)",
                     "input": "C(e_i^0, o_(h,j)^l): the model's input tokens (§4, §8-9)"}

# §6, Fig. 1: per head, the mean over attention rows of the correlation of attention with the
# previous-layer contribution.
HTA_FIG1 = {
    "pearson_above_0.7_heads": 142,      # "for all heads except for two, Pearson's ... is larger than 0.7"
    "pearson_above_0.85_share": 0.90,    # "90% of the heads show a correlation ... of over 0.85"
    "spearman_below_0.9_heads": 4,       # "only four heads have a Spearman's correlation smaller than 0.9"
    "spearman_above_0.95_share": 0.75,   # "75% of the heads have a correlation coefficient larger than 0.95"
}

# §9, Fig. 6: the same against the input contribution.
HTA_FIG6 = {
    "pearson_most_heads_below_0.5_after_layer": 4,   # "after only four layers ... most heads ... smaller than 0.5"
    "pearson_median_below_0.25_last_layers": 4,      # "in the last four layers the median ... smaller than 0.25"
    "spearman_median_below_0.7_from_layer": 3,       # "falling under 0.7 already at layer 3"
    "spearman_median_last_layer_below": 0.25,        # "and under 0.25 at the last layer"
}

# §7, Figs. 2 and 4; §8, Figs. 3 and 5; §9.1, Fig. 7.
HTA_FIG2_NO_FUTURE = {"layer": 2, "heads": (2, 5, 7)}  # "the attention of heads 2, 5 and 7 in Layer 2 to future
#                                                         tokens is negligible" (as printed)
HTA_FIG3_UNIFORM_AFTER_LAYER = 4   # contribution "much more uniform than ... attention, especially after layer 4"
HTA_FIG7_BLOCKS_UP_TO_LAYER = 4    # "We do not observe block patterns in the contribution maps for layers deeper
#                                     than layer 4"

HTA_FINDINGS = [
    {"id": "H1", "text": "Attention correlates strongly with the previous-layer contribution, which validates "
                         "HTA: Pearson's r above 0.7 for all but two of the 144 heads and above 0.85 for 90 % of "
                         "them; Spearman's ρ below 0.9 for only four heads and above 0.95 for 75 % (§6, Fig. 1)."},
    {"id": "H2", "text": "In the first layers the heads attend more to past tokens than to future ones; the trend "
                         "quickly reverses with depth, and in later layers attention to future tokens dominates: "
                         "the attention's centre of mass moves from the past to the future (§7, Figs. 2, 4)."},
    {"id": "H3", "text": "The input contribution aggregates context much more uniformly than attention suggests, "
                         "especially after layer 4: its centre of mass stays nearer the attending token than the "
                         "attention's (§8, Figs. 3, 5)."},
    {"id": "H4", "text": "The correlation between attention and input contribution quickly decreases in deeper "
                         "layers: after four layers Pearson's r is below 0.5 for most heads, its median below "
                         "0.25 in the last four layers; Spearman's median falls under 0.7 at layer 3 and under "
                         "0.25 at the last layer (§9, Fig. 6)."},
    {"id": "H5", "text": "The mismatch between attention and attribution increases with depth: attention explains "
                         "the head locally (Fig. 1) but less and less what input it aggregates (Fig. 6) (§9, "
                         "§10)."},
    {"id": "H6", "text": "With respect to the input, tokens around the diagonal tend to contribute the most, given "
                         "the prevalent aggregation of local context (§9.1, Fig. 7)."},
    {"id": "H7", "text": "Heads with the vertical pattern pay most attention to the [SEP] and [CLS] tokens, but the "
                         "input contribution shows that [SEP] stores general context: with respect to the input "
                         "these heads behave like heterogeneous ones (§9.1, Fig. 7)."},
    {"id": "H8", "text": "Block patterns (context from within the sentence separated by [SEP]) remain visible in "
                         "the contribution maps up to layer 4 and not deeper: the first layers aggregate context "
                         "within blocks, later layers globally (§9.1, Fig. 7)."},
    {"id": "H9", "text": "German and Arabic BERT follow the same trend as English: first past, then future hidden "
                         "tokens (§7, Fig. 4)."},
]
