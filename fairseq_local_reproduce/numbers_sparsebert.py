"""Printed numbers and findings of Shi et al., "SparseBERT: Rethinking the Importance Analysis in
Self-attention" (seed 001, arXiv 2102.12871 v1 text), as plain data.

Values are copied as printed. ``None`` marks a value the paper does not give.
"""
from typing import Any, Dict, List

# Shi et al. §3.3.2: metric per GLUE task (following Devlin et al.).
SPARSEBERT_METRICS: Dict[str, str] = {
    "MNLI-m": "accuracy", "MNLI-mm": "accuracy", "QQP": "F1", "QNLI": "accuracy",
    "SST-2": "accuracy", "CoLA": "Matthews corr.", "STS-B": "Spearman corr.", "MRPC": "F1",
    "RTE": "accuracy", "SWAG": "accuracy", "SQuAD": "EM and F1",
}

# Column order of Tables 1 and 3 (all in %). "average" is the unweighted mean of the nine numbers
# before it (MNLI-m and MNLI-mm counted separately); it matches the printed value within 0.1
# except Table 1 dev no-diag (mean 84.1, printed 83.9).
GLUE_COLUMNS = ("MNLI-m", "MNLI-mm", "QQP", "QNLI", "SST-2", "CoLA", "STS-B", "MRPC", "RTE", "average")

# Shi et al. §3.3, Table 1: BERT-base with full attention, 128 random entries dropped, or the
# diagonal (128 entries at n=128) removed. Pre-trained and fine-tuned each; averaged over 3 runs.
SPARSEBERT_TABLE1: Dict[str, Any] = {
    "columns": GLUE_COLUMNS,
    "dev": {
        "BERT-base (ours)": (85.4, 85.8, 88.2, 91.5, 92.9, 62.1, 88.8, 90.4, 69.0, 83.8),
        "BERT-base (randomly dropped)": (84.6, 85.2, 87.7, 91.1, 92.7, 62.0, 88.9, 89.3, 68.9, 83.4),
        "BERT-base (no diag-attention)": (85.6, 85.9, 88.2, 92.0, 93.8, 63.1, 89.2, 91.2, 67.9, 83.9),
    },
    "test": {  # GLUE evaluation server
        "BERT-base (Devlin et al., 2019)": (84.6, 83.4, 71.2, 90.5, 93.5, 52.1, 85.8, 88.9, 66.4, 79.6),
        "BERT-base (ours)": (84.8, 84.1, 71.3, 90.9, 93.4, 52.3, 85.3, 88.3, 66.9, 79.7),
        "BERT-base (randomly dropped)": (84.5, 83.5, 70.3, 91.1, 93.4, 52.0, 85.8, 87.4, 66.7, 79.4),
        "BERT-base (no diag-attention)": (85.5, 84.9, 71.3, 91.1, 93.4, 53.3, 86.3, 88.9, 67.9, 80.3),
    },
    "dropped_entries": 128,  # per attention matrix, n = 128
}

# Shi et al. §3.3, Table 2: SWAG and SQuAD dev. None where the paper prints "-".
SPARSEBERT_TABLE2: Dict[str, Any] = {
    "columns": ("SWAG acc", "SQuAD1.1 EM", "SQuAD1.1 F1", "SQuAD2.0 EM", "SQuAD2.0 F1"),
    "rows": {
        "BERT-base (Devlin et al., 2019)": (81.6, 80.8, 88.5, None, None),
        "BERT-base (ours)": (82.5, 79.7, 87.1, 72.9, 75.5),
        "BERT-base (randomly dropped)": (81.6, 79.7, 87.0, 71.5, 74.2),
        "BERT-base (no diag-attention)": (83.5, 80.3, 87.9, 73.2, 75.9),
    },
}

# Shi et al. §4.2, Table 3 (GLUE dev, %) and Fig. 4 (the same comparison plotted against sparsity).
# Sparsity rho = 1 - |M| / n^2 (§3), in %, at n = 128. Masks are learned in pre-training and fixed in
# fine-tuning. Rows in printed order.
SPARSEBERT_TABLE3: Dict[str, Any] = {
    "columns": ("sparsity",) + GLUE_COLUMNS,
    "rows": {
        "Strided": (70.4, 81.9, 81.9, 87.1, 89.0, 91.7, 58.4, 86.6, 86.1, 52.7, 79.5),
        "Fixed": (72.7, 81.4, 81.8, 86.4, 88.1, 91.3, 54.2, 85.9, 88.7, 59.2, 79.7),
        "Longformer": (88.7, 80.5, 81.0, 86.8, 88.4, 91.8, 57.9, 86.9, 81.7, 65.3, 80.1),
        "LogSparse": (89.8, 77.9, 78.2, 85.9, 84.6, 92.0, 58.5, 83.2, 82.0, 58.8, 77.9),
        "BigBird": (93.2, 80.2, 80.1, 86.4, 87.6, 91.6, 54.3, 84.7, 84.1, 66.0, 79.4),
        "Star": (96.1, 79.1, 79.0, 86.2, 86.4, 91.2, 59.6, 84.7, 83.9, 60.3, 78.9),
        "DAM_u (lambda=1e-4)": (78.9, 82.2, 82.6, 87.3, 89.7, 92.4, 57.3, 86.5, 89.2, 70.8, 82.0),
        "DAM_u (lambda=1e-3)": (79.2, 82.2, 82.4, 87.1, 89.5, 92.3, 57.2, 86.2, 89.1, 67.9, 81.6),
        "DAM_u (lambda=1e-2)": (79.8, 81.7, 82.3, 86.8, 89.4, 92.1, 57.2, 86.1, 89.0, 67.1, 81.3),
        "DAM_u (lambda=1e-1)": (85.8, 81.4, 82.2, 86.5, 89.1, 92.1, 56.6, 84.4, 88.3, 66.8, 80.8),
        "DAM_s (lambda=1e-4)": (91.2, 81.7, 81.7, 87.0, 88.3, 92.5, 59.4, 86.7, 88.4, 63.2, 80.9),
        "DAM_s (lambda=1e-3)": (91.6, 81.0, 81.2, 86.9, 88.0, 92.4, 58.6, 86.2, 85.7, 62.8, 80.3),
        "DAM_s (lambda=1e-2)": (91.7, 81.1, 80.9, 86.9, 87.9, 92.3, 57.9, 84.8, 85.4, 61.0, 79.8),
        "DAM_s (lambda=1e-1)": (93.5, 80.9, 81.0, 86.7, 87.7, 92.2, 57.7, 84.8, 85.2, 59.9, 79.6),
    },
    # §4.2 settings of the fixed baselines. Checked at n = 128 by counting mask entries:
    # Star (|i-j|<=1, row/col 0) gives 96.13; LogSparse symmetrised (j = i - 2^k and its transpose,
    # plus i) gives 89.83; Strided |i-j|<4 or (i-j)%4==0 gives 70.39; Fixed with block 4 (same block,
    # or j%4==3) gives 72.66; BigBird (|i-j|<=1, 2 global, 2 random per row) gives about 93.1.
    # Longformer as described (window 2, two random global tokens) gives about 93.1, not 88.7;
    # |i-j|<=5 plus tokens 0,1 global gives 88.62. The printed 88.7 is not recoverable from the text.
    "baselines": {
        "Star": "Guo et al. 2019: ring (neighbours) + relay node (first token)",
        "LogSparse": "Li et al. 2019: self + previous tokens at exponential step sizes",
        "Strided": "Child et al. 2019: attends every l-th location (l not stated)",
        "Fixed": "Child et al. 2019: specific positions (block size not stated)",
        "Longformer": "sliding window size 2; two input locations randomly selected for global attention",
        "BigBird": "no block structure; random attention size 2, window size 1, global size 2",
    },
    # Introduction: "91.3% sparsity ... 80.9% average"; Table 3 prints 91.2 for DAM_s (lambda=1e-4).
    "intro_claim": {"sparsity": 91.3, "average": 80.9},
}

# Shi et al. §3.4, Fig. 3 (figure lost; caption and text only).
SPARSEBERT_FIG3: Dict[str, Any] = {
    "plotted": "GLUE dev score of BERT-base against attention mask sparsity, one panel per GLUE task "
               "(MNLI = mean of MNLI-m and MNLI-mm); two curves: pruning by P, random pruning",
    "x_axis": "mask sparsity: per head remove the smallest 10%, 20%, ..., 90% entries of P",
    "y_axis": "task metric (as Table 1)",
    "prune_fractions": (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9),
    "random_baseline": "randomly removes the same number of entries",
    "procedure": "two-stage: learn P (Eq. 3-4, sigmoid, alpha symmetric) in pre-training, threshold "
                 "to a binary M, then fine-tune",
    "numbers_in_text": None,  # the text gives no values
    "result": "pruning by P beats random pruning on all GLUE tasks; CoLA stays stable as sparsity "
              "grows; RTE drops significantly",
}

# Shi et al. §4.3, Fig. 6 (figure lost).
SPARSEBERT_FIG6: Dict[str, Any] = {
    "plotted": "QNLI and MRPC dev score against sparsity: one-stage DAM (unstructured and structured) "
               "versus two-stage masks (threshold P as in §3.4)",
    "two_stage_prune_fractions": (0.80, 0.85, 0.90, 0.95),
    "one_stage_points": "the DAM_u / DAM_s masks at lambda in {1e-1, 1e-2, 1e-3, 1e-4}",
    "numbers_in_text": None,
    "result": "one-stage masks score higher; two-stage can hit any sparsity, one-stage only via lambda",
}

# Shi et al. §3.1.1, §4.1-4.2, Appendix C (Table 4 of the appendix).
SPARSEBERT_SETUP: Dict[str, Any] = {
    "model": "BERT-base: 12 layers, 12 heads, d=768, d_ff=3072, n=128 tokens",
    "P_sharing": "P shared among blocks: 12 P matrices, one per head index (§3.1.1)",
    "P_symmetric": True,  # §3.1: alpha_ij = alpha_ji
    "pretraining": "MLM + NSP on BooksCorpus (800M words) + English Wikipedia (2,500M words); "
                   "WordPiece, 30,000 tokens; 40 epochs; V100 GPUs; one-level optimisation of w and alpha",
    "pretrain_lr": None,  # "standard setting of Devlin et al.", no value
    "lambdas": (1e-1, 1e-2, 1e-3, 1e-4),
    "loss": "L = l(BERT(X, A(X) * M(alpha); w)) + lambda * ||M(alpha)||_1  (Eq. 5)",
    "gumbel_sigmoid": "M = sigmoid(alpha + G1 - G2), G_k = -log(-log U_k), U_k ~ U(0, 1)",
    # tau is named as "a temperature hyperparameter" but is absent from the printed formula and
    # no value is given; where it enters (presumably (alpha + G1 - G2) / tau) is not shown.
    "tau": None,
    "mask_use": "M multiplies the softmax attention A(X) elementwise (Eq. 4-5); fixed in fine-tuning",
    "binary_mask": "'the obtained one-hot Gumbel sigmoid output' is used directly; threshold not stated",
    "dam_s": "first and last rows/columns always active; M_ij = M_{i+k,j+k} (one parameter and one "
             "noise pair per diagonal); n-2 parameters, search space 2^(n-2) (§4.1)",
    "finetune": {
        "GLUE": {"batch": 32, "epochs": 3},
        "SWAG": {"batch": 16, "epochs": 3},
        "SQuAD v1.1": {"batch": 32, "epochs": 3},
        "SQuAD v2.0": {"batch": 48, "epochs": 2},
        "weight_decay": (0.1, 0.01),
        "warmup_proportion": 0.1,
        "lr_decay": "linear",
        "lr_grid": (2e-5, 1e-5, 1.5e-5, 3e-5, 4e-5, 5e-5),
        "selection": "best combination on dev; Table 1 averaged over 3 random repetitions",
    },
}

# Shi et al.: findings. "decides" names the measured quantities and the comparison.
SPARSEBERT_FINDINGS: List[Dict[str, str]] = [
    {"id": "S1", "source": "§3.1.2, Fig. 2",
     "text": "Diagonal entries of the learned attention distribution P are the least important.",
     "decides": "mean P[i, i] < mean P of each other position class (neighbour, special, other), P learned "
                "as in §3.1 (sigmoid, P * A, no penalty)"},
    {"id": "S2", "source": "§3.1.2, Fig. 2",
     "text": "Neighbourhood positions are the most important.",
     "decides": "mean P[i, i±1] is the largest position-class mean"},
    {"id": "S3", "source": "§3.1.2, Fig. 2",
     "text": "Special tokens ([CLS] first, [SEP] last) are important; other positions are similar.",
     "decides": "mean P on the first and last tokens' rows and columns > mean P on the other "
                "off-diagonal non-neighbour entries, whose spread is below that lead"},
    {"id": "S4", "source": "§3.2, Theorem 1",
     "text": "Transformers without diagonal attention are still universal approximators (n > 2).",
     "decides": "proof only; nothing measured"},
    {"id": "S5", "source": "§3.3.4, Table 1",
     "text": "Removing the diagonal does not hurt and can help.",
     "decides": "avg(no diag) - avg(base) >= -1.1 (RTE's deficit, still 'comparable') and > 0: "
                "dev 83.9 vs 83.8, test 80.3 vs 79.7"},
    {"id": "S6", "source": "§3.3.4, Table 1",
     "text": "Dropping the same number of random entries lowers performance.",
     "decides": "avg(random) < avg(base), random dropping as many entries per sentence as the "
                "diagonal (n): dev 83.4, test 79.4"},
    {"id": "S7", "source": "§3.3.4, Table 2",
     "text": "The same holds on SWAG and SQuAD.",
     "decides": "no diag >= base >= random on SWAG acc and SQuAD EM/F1"},
    {"id": "S8", "source": "§3.4, Fig. 3",
     "text": "Pruning by P beats random pruning at every sparsity on all GLUE tasks.",
     "decides": "score(prune by P, s) > score(random, s) for s in 10%..90%, every task, both at the "
                "same sparsity realised on the dev sentences"},
    {"id": "S9", "source": "§3.4, Fig. 3",
     "text": "Tasks differ in redundancy: CoLA stays stable as sparsity rises, RTE drops significantly.",
     "decides": "CoLA score(90%) close to score(10%); RTE score falls with sparsity"},
    {"id": "S10", "source": "§4.2, Table 3, Fig. 4",
     "text": "DAM masks beat manually designed masks in almost all cases.",
     "decides": "DAM average > fixed-mask average whenever fixed sparsity <= DAM sparsity; the printed "
                "table has 3 exceptions: DAM_s(1e-2) and DAM_s(1e-1) vs Longformer, DAM_s(1e-1) vs Fixed"},
    {"id": "S11", "source": "§4.2, Table 3",
     "text": "DAM_s (lambda=1e-1) is sparser than BigBird and scores higher on average.",
     "decides": "sparsity 93.5 > 93.2 and average 79.6 > 79.4"},
    {"id": "S12", "source": "§4.2, Table 3",
     "text": "lambda controls sparsity: larger lambda gives a sparser mask.",
     "decides": "sparsity increases with lambda for DAM_u (78.9..85.8) and DAM_s (91.2..93.5)"},
    {"id": "S13", "source": "Table 3 (derived, not stated in the text)",
     "text": "Average score falls as lambda grows, for both DAM_u and DAM_s.",
     "decides": "average decreasing in lambda: DAM_u 82.0 > 81.6 > 81.3 > 80.8, "
                "DAM_s 80.9 > 80.3 > 79.8 > 79.6"},
    {"id": "S14", "source": "§4.2, Fig. 5",
     "text": "Learned masks skip the diagonal and always keep the neighbours.",
     "decides": "M[i, i] = 0 and M[i, i±1] = 1 for 90% or more of the inner entries of DAM masks "
                "at the largest lambda"},
    {"id": "S15", "source": "§4.2",
     "text": "Neighbour-only masks (Strided, Fixed, LogSparse) are worst, neighbour+special masks "
             "(BigBird, Longformer, Star) compete, DAM masks (no diagonal) are best.",
     "decides": "GLUE average by mask category at comparable sparsity (qualitative)"},
    {"id": "S16", "source": "§4.3, Fig. 6",
     "text": "One-stage DAM beats two-stage pruning of P on QNLI and MRPC.",
     "decides": "score(DAM, s) > score(two-stage, s') at comparable sparsity on QNLI and MRPC dev "
                "(not comparable where those tasks are not run)"},
]
