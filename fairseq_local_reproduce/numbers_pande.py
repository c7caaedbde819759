"""Printed numbers and findings of Pande et al., "On the Importance of Local Information in
Transformer Based Models" (seed 000), as plain data.

Values are copied as printed. Where the extraction garbles a table, the corrected figures of
the seeds README are used (Table 4, the weight counts). ``None`` marks a value the paper does not give.
"""
from typing import Any, Dict, List

# Pande et al. §5.1 and §3: NMT setup shared by Tables 1-3.
PANDE_NMT_SETUP: Dict[str, Any] = {
    "model": "Transformer-base encoder-decoder, 6+6 layers, 8 heads, d_v=512, d_l=64 (§2)",
    "data": "WMT'14 En-Ru and En-De (§3, §5.1)",
    # §5.1 says "evaluate it using Newstest2014"; §3 reports the same baseline BLEU
    # (29.09 En-Ru, 30.01 En-De) "on the Newstest2018 dataset". The paper contradicts itself.
    "test_set": None,
    "test_set_candidates": ("newstest2014 (§5.1)", "newstest2018 (§3)"),
    # Neither tokenized nor detokenized/sacreBLEU is stated for any BLEU in Tables 1-3.
    "bleu_variant": None,
    "batch_tokens": {"en_ru": 25_000, "en_de": 32_000},  # "25K"/"32K", reached by accumulating gradients
    "optimizer": {"name": "adam", "beta1": 0.9, "beta2": 0.997, "eps": 1e-9},
    "lr_schedule": "Vaswani et al. (2017) inverse-sqrt, warmup 16k steps",
    "peak_lr": None,  # not stated
    "training": "from scratch, until convergence, single V100 / 1080Ti GPUs",
    # §4.1: masks are multiplied after the softmax (Eq. 9), rows are NOT renormalised.
    "mask_family": ("prev1", "prev2", "next1", "next2", "band1", "band2", "identity"),
    "mask_defs": {
        # Printed: 1 iff j - i == k, "identity with columns left shifted by k". Taken literally that
        # points at a later token, which contradicts the name; the name implies j == i - k.
        "prev-k": "1 iff j == i - k (name); printed condition is j - i == k",
        "next-k": "identity with columns shifted right by k",
        "band-k": "1 iff i - k <= j <= i + k",
        "identity": "1 iff i == j",
    },
}

# Pande et al. §5.2-5.4, Tables 1-3 (Fig. 4 shows the layouts; the figure is lost).
# en_ru / en_de: BLEU as printed. attn_printed: the "Attn params" column as printed (Tables 2-3 only).
# attn_weights: encoder Wq,Wk,Wv,Wo weights without biases (seeds README); for (b)-(f) no Q/K is tied,
# so the count equals the baseline's (derived, not printed).
PANDE_NMT: Dict[str, Any] = {
    "tables": {
        "table1": ("a", "b", "c", "d", "e", "f"),  # §5.2 "Intermixing global and local attention heads"
        "table2": ("a", "g", "h", "i", "j"),  # §5.3 "Parameter sharing within layer"
        "table3": ("a", "k", "l"),  # §5.4 "Parameter sharing across layers"
    },
    "configs": {
        "a": {"name": "Baseline", "en_ru": 29.09, "en_de": 30.01, "attn_printed": "6.29M",
              "attn_weights": 6_291_456, "layout": "all 48 encoder heads global"},
        "b": {"name": "2LocHeads All6", "en_ru": 29.37, "en_de": 30.78, "attn_printed": None,
              "attn_weights": 6_291_456,
              "layout": "every layer: 2 local heads (band1, band2), 6 global; which head indices not stated"},
        "c": {"name": "4LocHeads All6", "en_ru": 29.34, "en_de": 30.83, "attn_printed": None,
              "attn_weights": 6_291_456,
              "layout": "every layer: 4 local heads (band1, band2, each twice), 4 global"},
        "d": {"name": "8LocHeads First3", "en_ru": 28.96, "en_de": 30.6, "attn_printed": None,
              "attn_weights": 6_291_456,
              "layout": "layers 1-3 all local (7 masks once, identity twice); layers 4-6 global"},
        "e": {"name": "8LocHeads Last3", "en_ru": 28.99, "en_de": 30.51, "attn_printed": None,
              "attn_weights": 6_291_456,
              "layout": "layers 4-6 all local (7 masks once, identity twice); layers 1-3 global"},
        "f": {"name": "8LocHeads All6", "en_ru": 28.95, "en_de": 30.12, "attn_printed": None,
              "attn_weights": 6_291_456, "layout": "all layers all local (7 masks once, identity twice)"},
        "g": {"name": "4LocHeads 4TiedLoc All6", "en_ru": 28.83, "en_de": 30.24, "attn_printed": "4.71M",
              "attn_weights": 4_718_592,
              "layout": "all local; per layer 4 unique Q/K, each head after a unique one shares its "
                        "predecessor's Q/K; each pair uses identity and band2"},
        "h": {"name": "2LocHeads 6TiedLoc All6", "en_ru": 28.57, "en_de": 30.12, "attn_printed": "3.93M",
              "attn_weights": 3_932_160,
              "layout": "all local; heads 0 and 4 unique, 1-3 use alpha_0, 5-7 use alpha_4; masks "
                        "identity, band2, prev1, next1 repeated twice"},
        "i": {"name": "1LocHead 7TiedLoc All6", "en_ru": 28.82, "en_de": 30.31, "attn_printed": "3.53M",
              "attn_weights": 3_538_944,
              "layout": "all local; one Q/K per layer shared by its 8 heads; 7 masks once, identity twice"},
        "j": {"name": "1LocHead 7TiedLoc First3", "en_ru": 29.43, "en_de": 30.51, "attn_printed": "4.91M",
              "attn_weights": 4_915_200,
              "layout": "layers 1-3 as (i) (one Q/K per layer); layers 4-6 global"},
        "k": {"name": "Half Tied", "en_ru": 29.24, "en_de": 30.08, "attn_printed": "4.78M",
              "attn_weights": 4_784_128,
              "layout": "layers 1-3 local, one Q/K shared by all their heads across the 3 layers; "
                        "7 masks, identity twice; layers 4-6 global"},
        "l": {"name": "Fully Tied", "en_ru": 28.99, "en_de": 29.77, "attn_printed": "3.21M",
              "attn_weights": 3_211_264,
              "layout": "all 6 layers local, one Q/K for the whole encoder; 7 masks, identity twice"},
    },
    # Printed "M" values truncate to 2 decimals (4,718,592 -> 4.71M, not 4.72M).
    "attn_printed_rounding": "truncate",
}

# Pande et al. §5.5, Table 4 (GLUE dev), as corrected in the seeds README. Column order as printed.
# The metric per task is not stated. §5.1 says "standard train and test splits"; the caption says dev.
# attn_weights: BERT-base encoder Wq,Wk,Wv,Wo (no biases), from the seeds README; Table 4 prints none.
PANDE_TABLE4: Dict[str, Any] = {
    "columns": ("QQP", "SST-2", "MNLI", "QNLI"),
    # The abstract, §1 and §3 list MRPC as the 4th task, Table 4 prints MNLI: inconsistent.
    "task_list_conflict": ("QQP", "SST-2", "MRPC", "QNLI"),
    "rows": {
        "BERT-base": {"scores": (90.9, 91.8, 83.7, 90.8), "attn_weights": 28_311_552,
                      "layout": "144 global heads, own Q/K each"},
        "All Band2 Untied": {"scores": (90.05, 89.75, 80.6, 88.3), "attn_weights": 28_311_552,
                             "layout": "band2 mask on all 144 heads, no tying"},
        "All Band6 Untied": {"scores": (90.46, 90.65, 81.15, 89.0), "attn_weights": 28_311_552,
                             "layout": "band6 mask on all 144 heads, no tying"},
        "All Band6 AllTied": {"scores": (86.5, 87.8, 67.6, 72.1), "attn_weights": 14_254_080,
                              "layout": "band6 on all heads, one Q/K shared by all 144 heads"},
        "All Band6 132Tied": {"scores": (88.8, 91.3, 74.3, 83.2), "attn_weights": 15_433_728,
                              "layout": "as AllTied but the last layer untied (132 tied heads)"},
        "All Band6 120Tied": {"scores": (90.4, 91.16, 80.7, 88.45), "attn_weights": 16_613_376,
                              "layout": "as AllTied but the last two layers untied (120 tied heads)"},
    },
    # band6 is not in the §4.1 mask family (which stops at band-2); used only in §5.5.
    "pretraining": "English Wikipedia + Gutenberg subset (Lahiri 2014); ~300k steps at length 128, "
                   "then 1k steps at length 512; batch size 2K (§5.1)",
}

# Pande et al. §3.1 (Fig. 1), §3.2 (Figs. 2-3), §5.2-5.4 (Fig. 4). Figures are lost in the extraction;
# axes below are what captions and text say, None where neither says.
PANDE_FIGURES: Dict[str, Any] = {
    "fig1": {
        "section": "§3.1 sensitivity analysis, Eq. 5-7",
        "plotted": "distribution of gamma_local (blue), gamma_syntactic (orange), gamma_unrelated "
                   "(green, 'gamma_neither' in the caption), per encoder layer",
        "quantity": "beta[i, j] = ||d Y[i] / d X[j]|| at each layer's multi-head attention; gamma = "
                    "avg over i of avg over j in L_i / S_i / U_i",
        "data": "100 random sentences from each test set of QQP, SST-2, MRPC, QNLI (BERT-base)",
        "x_axis": None, "y_axis": None,  # likely layer vs gamma; not stated
        "result": "gamma_local > gamma_syntactic > gamma_unrelated on all tasks; gamma_unrelated negligible",
    },
    "fig2": {
        "section": "§3.2 attention bias metric, Eq. 8",
        "plotted": "fraction of heads whose locality bias score (blue) / non-local syntactic bias "
                   "score (orange) exceeds a threshold",
        "x_axis": "threshold, varied from 1 through 5", "y_axis": "fraction of heads",
        "data": "1,000 sentences from each test set; 2 NMT (En-De, En-Ru) + 4 GLUE tasks",
        "result": "syntactic fraction far below locality fraction at every threshold; in 4 of 6 tasks "
                  "more than a quarter of heads have locality bias > 3",
    },
    "fig3": {
        "section": "§3.2",
        "plotted": "layer x head grid per task: heads with locality bias > 3 (blue), non-local "
                   "syntactic bias > 3 (orange)",
        "x_axis": None, "y_axis": None,
        "result": "local heads spread across layers, fewer in later layers; far fewer syntactic heads",
    },
    "fig4": {"section": "§5.2-5.4", "plotted": "diagrams of configurations (a)-(l); no data"},
    "thresholds": {
        "local_window_L_i": (-2, 2),  # §3.1: L_i = [i-2, i+2]
        "syntactic_S_i": "syntactically related tokens of i outside L_i (parser not named)",
        "unrelated_U_i": "neither in L_i nor in S_i",
        "bias_random_head": 1.0,  # §3.2: a randomly initialised head scores about 1
        "bias_thresholds": (1, 2, 3, 4, 5),  # Fig. 2 x-axis (integer steps assumed)
        "bias_cutoff_fig3": 3,
    },
}

# Pande et al. §5.1: BERT pre-training and GLUE fine-tuning recipe as stated.
PANDE_FINETUNE: Dict[str, Any] = {
    "recipe": "recommended setting of Devlin et al. (2018)",
    "batch_size_grid": (32, 128),
    "lr_grid": (1e-4, 2e-4),
    "warmup_steps": 10_000,
    "optimizer": "LAMB",
    "epochs": None,  # not stated
    "max_seq_len": None,  # not stated for fine-tuning
    "splits": "standard train and test splits (§5.1); Table 4 caption says GLUE dev set",
    "ambiguous": (
        "whether the batch/lr grid, 10K warm-up and LAMB belong to fine-tuning or to pre-training",
        "10K warm-up steps exceed a whole fine-tuning run for small tasks at batch 32",
        "lr 1e-4/2e-4 is far above Devlin et al.'s fine-tuning grid (2e-5..5e-5) unless LAMB is meant",
        "number of epochs, seeds, dropout and max length are not given",
        "dev or test split; metric per task (accuracy/F1 for QQP) not given",
        "MRPC (abstract, §1, §3) versus MNLI (Table 4)",
        "whether masks and Q/K tying are applied during pre-training as well (implied by 'train "
        "modified BERT models', not stated)",
    ),
}

# Pande et al.: findings. "decides" names the measured quantities and the comparison.
PANDE_FINDINGS: List[Dict[str, str]] = [
    {"id": "P1", "source": "§3.1, Fig. 1",
     "text": "At every layer, outputs are more sensitive to local tokens than to syntactic ones, and "
             "more to syntactic than to unrelated ones.",
     "decides": "per model: min over layers of mean(gamma_local - gamma_syntactic) > 0 and of "
                "mean(gamma_syntactic - gamma_unrelated) > 0 (Eq. 5-7; bootstrap over sentences)"},
    {"id": "P2", "source": "§3.1, Fig. 1",
     "text": "Sensitivity to unrelated tokens is negligible.",
     "decides": "max over layers of gamma_unrelated / gamma_local <= 0.25 (stated margin; the paper "
                "prints no number)"},
    {"id": "P3", "source": "§3.2, Fig. 2",
     "text": "A larger fraction of heads has a locality bias than a non-local syntactic bias, at "
             "every threshold.",
     "decides": "per task, min over t in 1..5 (where a head exceeds t) of frac(locality_bias > t) - "
                "frac(syntactic_bias > t) > 0 (bootstrap over heads)"},
    {"id": "P4", "source": "§3.2, Fig. 2",
     "text": "In 4 of the 6 tasks more than a quarter of heads have locality bias above 3.",
     "decides": "#tasks with frac(locality_bias > 3) > 0.25 >= 4 (of En-De, En-Ru, QQP, SST-2, MRPC, QNLI)"},
    {"id": "P5", "source": "§3.2, Fig. 3",
     "text": "Heads with locality bias > 3 are spread across layers, with fewer in later layers.",
     "decides": "share of layers with a head of locality_bias > 3 >= 0.5; share of such heads in the "
                "first half of the layers > in the last half (bootstrap over heads within layers)"},
    {"id": "P6", "source": "§3.2, Fig. 3",
     "text": "Far fewer heads have non-local syntactic bias > 3 than locality bias > 3.",
     "decides": "frac(locality_bias > 3) - frac(syntactic_bias > 3) > 0 per task (bootstrap over heads)"},
    {"id": "P7", "source": "§5.2, Table 1",
     "text": "Mixing local heads into the encoder (b)-(f) costs at most 0.14 BLEU.",
     "decides": "|BLEU(x) - BLEU(a)| <= 0.14 for x in b..f (equivalence, the paper's largest drop, §5.2)"},
    {"id": "P8", "source": "§5.2, Table 1; §1",
     "text": "An all-local encoder (f) matches the baseline: -0.14 En-Ru, +0.11 En-De.",
     "decides": "|BLEU(f) - BLEU(a)| <= 0.14 (equivalence)"},
    {"id": "P9", "source": "§5.2, Table 1",
     "text": "On En-De every local configuration (b)-(f) scores above the baseline.",
     "decides": "BLEU(x) - BLEU(a) > 0 for x in b..f (interval above zero)"},
    {"id": "P10", "source": "§5.3, Table 2",
     "text": "Sharing Q/K within a layer (g)-(j) costs at most 0.52 BLEU on En-Ru, and every such "
             "configuration beats the baseline on En-De.",
     "decides": "|BLEU(x) - BLEU(a)| <= 0.52 (§5.3) and BLEU(x) - BLEU(a) > 0, x in g..j"},
    {"id": "P11", "source": "§5.3, Table 2; §1",
     "text": "Config (i), one Q/K per layer, is a good trade-off: 3.53M of 6.29M weights at "
             "-0.27 En-Ru / +0.30 En-De.",
     "decides": "attn_weights(i)/attn_weights(a) = 0.5625 +- 0.005; |BLEU(i) - BLEU(a)| <= 0.52 (§5.3)"},
    {"id": "P12", "source": "§5.4, Table 3",
     "text": "One Q/K for the whole encoder (l) drops only 0.10 En-Ru and 0.24 En-De with about "
             "half the attention weights.",
     "decides": "|BLEU(l) - BLEU(a)| <= 0.24 (§5.4); attn_weights(l)/attn_weights(a) = 0.5104 +- 0.005"},
    {"id": "P13", "source": "§1",
     "text": "Across all NMT configurations the largest drops are 0.24 (En-De) and 0.52 (En-Ru).",
     "decides": "|BLEU(x) - BLEU(a)| <= 0.52 for x in b..l (equivalence; en_de 0.24 (l), en_ru 0.52 (h))"},
    {"id": "P14", "source": "§5.5, Table 4; §1",
     "text": "Constraining all BERT heads to band2 or band6 without tying costs only a few points.",
     "decides": "|Band{2,6} Untied - BERT-base| <= 3.1 points per task (equivalence; largest: MNLI band2)"},
    {"id": "P15", "source": "Table 4 (derived, not stated in the text)",
     "text": "band6 scores at least as well as band2 on every task.",
     "decides": "score(Band6 Untied) - score(Band2 Untied) >= 0 on every task (bound on the interval)"},
    {"id": "P16", "source": "§5.5, Table 4",
     "text": "Tying Q/K across all BERT layers hurts badly, unlike in the NMT encoder.",
     "decides": "Band6 Untied - AllTied > 0 on every task (interval above zero; the paper: 13.55 on MNLI, "
                "16.9 on QNLI)"},
    {"id": "P17", "source": "§5.5, Table 4",
     "text": "Untying the last one or two layers recovers most of the loss; 120Tied is close to untied.",
     "decides": "132Tied - AllTied > 0 on every task; |120Tied - Band6 Untied| <= 0.55 per task (equivalence)"},
]
