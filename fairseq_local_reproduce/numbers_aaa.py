"""Printed numbers and findings of Wang et al., "Learning Adaptive Axis Attentions in Fine-tuning:
Beyond Fixed Sparse Attention Patterns" (seed 004), as plain data.

Values are copied as printed (whole percent; Table 2 and Table 6 with decimals). ρ is the sparsity of
Eq. 9 in percent: the mean over dev sentences, layers and heads of 1 − |B|/N_i², N_i the sentence's
own length. ``None`` marks a value the paper does not give.
"""
from typing import Any, Dict, List, Tuple

# Wang et al. §3.1: the eight GLUE tasks, "in decreasing order of fine-tuning data", and their metrics.
AAA_TASKS: Tuple[str, ...] = ("MNLI", "QQP", "QNLI", "SST-2", "CoLA", "STS-B", "MRPC", "RTE")
AAA_METRICS: Dict[str, str] = {"MNLI": "accuracy (Table 1: mismatched)", "QQP": "F1", "QNLI": "accuracy",
                               "SST-2": "accuracy", "CoLA": "Matthews corr.", "STS-B": "Spearman corr.",
                               "MRPC": "F1", "RTE": "accuracy"}

# Table 1 (§3.1): GLUE dev score of sparse patterns pre-trained and fine-tuned, or fine-tuned only
# (from the full-attention model). Columns AAA_TASKS; MNLI is "Acc (mm)".
AAA_TABLE1: Dict[str, Tuple[int, ...]] = {
    "Full Pattern (pre-train & fine-tune)": (82, 87, 90, 91, 48, 87, 90, 60),
    "Local2 + Global2 (pre-train & fine-tune)": (77, 85, 86, 89, 41, 52, 80, 54),
    "Local2 + Global2 (fine-tune)": (75, 78, 82, 89, 44, 29, 76, 51),
    "Local2 + Global1 + Random1 (pre-train & fine-tune)": (77, 83, 83, 89, 44, 45, 78, 55),
    "Local2 + Global1 + Random1 (fine-tune)": (75, 81, 80, 88, 40, 19, 78, 53),
}

# Table 2 (§3.2): Long Range Arena, Text; local pattern size -> performance, without / with global.
AAA_TABLE2: Dict[str, Dict[int, float]] = {
    "without global": {512: 62.80, 128: 57.72, 16: 55.58, 2: 52.88},
    "with global": {512: 61.73, 128: 63.12, 16: 71.34, 2: 77.62},
}

# Fig. 2 (§3.2): no values printed (figure lost); its design and its reading in the text.
AAA_FIG2: Dict[str, Any] = {
    "tasks": ("MNLI", "QNLI", "QQP"),  # "the three tasks with the largest amount of fine-tuning data"
    "sizes": tuple(range(1, 9)),       # "vary the size of global patterns from 1 to 8"
    "base": 2,                         # "a baseline size of two on both local and global patterns"
    "start": "a pre-trained full-attention model, fine-tuned with the sparse pattern",
    "result": {"both": "increasing either pattern's size from the base size improves performance",
               "global_more": ("MNLI", "QNLI"), "local_more": ("QQP",)},
    "values": None,
}

# Table 3 (§4.1): diagonal patterns (each with a global pattern) of growing adaptiveness: per task
# (ρ %, score). "Fixed" is copied from a pre-trained SparseBERT; the adaptive ones are learned in
# fine-tuning with Eq. 10's hinge towards matched sparsity.
AAA_TABLE3: Dict[str, Dict[str, Tuple[int, int]]] = {
    "Fixed": dict(zip(AAA_TASKS, ((86, 70), (85, 79), (88, 72), (83, 89), (75, 34), (85, 28), (88, 79), (88, 50)))),
    "Task-adaptive": dict(zip(AAA_TASKS, ((86, 74), (87, 79), (89, 75), (83, 83), (81, 38), (85, 36), (88, 77),
                                          (89, 56)))),
    "Task & Layer-adaptive": dict(zip(AAA_TASKS, ((86, 76), (85, 81), (89, 77), (83, 86), (78, 35), (86, 38),
                                                  (89, 77), (89, 55)))),
}

# Table 4 (§4.3): fixed patterns fine-tuned from the full model, and AAA trained to each one's ρ
# (Eq. 10, per task). Rows in printed order; each "AAA (vs X)" row is printed right after X.
AAA_TABLE4: Dict[str, Dict[str, Tuple[int, int]]] = {
    "Full": dict(zip(AAA_TASKS, ((0, 84), (0, 88), (0, 91), (0, 92), (0, 54), (0, 88), (0, 89), (0, 62)))),
    "Local2 + Global2": dict(zip(AAA_TASKS, ((76, 77), (70, 85), (82, 84), (64, 90), (34, 48), (70, 42), (83, 78),
                                             (84, 53)))),
    "Local3 + Global1": dict(zip(AAA_TASKS, ((76, 77), (70, 83), (82, 80), (63, 89), (34, 48), (70, 31), (83, 79),
                                             (84, 53)))),
    "AAA (vs Local2 + Global2, Local3 + Global1)": dict(zip(AAA_TASKS, ((77, 81), (73, 85), (82, 86), (65, 89),
                                                                       (36, 56), (72, 79), (86, 83), (85, 58)))),
    "Local2 + Global1 + Random1": dict(zip(AAA_TASKS, ((80, 77), (76, 84), (85, 79), (70, 90), (45, 44), (75, 44),
                                                       (86, 82), (87, 56)))),
    "AAA (vs Local2 + Global1 + Random1)": dict(zip(AAA_TASKS, ((81, 80), (82, 85), (85, 86), (84, 89), (76, 50),
                                                               (82, 75), (89, 80), (89, 56)))),
    "Local1 + Global1 + Random2": dict(zip(AAA_TASKS, ((85, 77), (81, 84), (88, 80), (77, 90), (57, 33), (81, 49),
                                                       (89, 79), (89, 49)))),
    "AAA (vs Local1 + Global1 + Random2)": dict(zip(AAA_TASKS, ((86, 80), (86, 85), (88, 86), (84, 89), (76, 50),
                                                               (86, 67), (89, 80), (89, 56)))),
}

# Table 5 (§4.3): sparse patterns pre-trained and fine-tuned against AAA fine-tuned only, (ρ %, score).
AAA_TABLE5: Dict[str, Dict[str, Tuple[int, int]]] = {
    "Local2 + Global2 (pre-train & fine-tune)": dict(zip(AAA_TASKS, ((76, 77), (70, 85), (82, 86), (63, 89),
                                                                     (34, 41), (70, 52), (83, 80), (84, 54)))),
    "AAA (fine-tune) vs Local2 + Global2": dict(zip(AAA_TASKS, ((77, 79), (72, 84), (83, 84), (66, 89), (48, 41),
                                                               (71, 81), (86, 85), (87, 53)))),
    "Local2 + Global1 + Random1 (pre-train & fine-tune)": dict(zip(AAA_TASKS, ((80, 77), (76, 83), (85, 83), (70, 89),
                                                                               (45, 44), (75, 45), (86, 78),
                                                                               (87, 55)))),
    "AAA (fine-tune) vs Local2 + Global1 + Random1": dict(zip(AAA_TASKS, ((81, 80), (78, 84), (86, 84), (71, 88),
                                                                         (56, 40), (76, 80), (89, 84), (90, 53)))),
    "Diagonal + Global1 (pre-train & fine-tune)": dict(zip(AAA_TASKS, ((86, 79), (85, 85), (88, 86), (83, 90),
                                                                       (75, 38), (85, 64), (88, 84), (88, 54)))),
    "AAA (fine-tune) vs Diagonal + Global1": dict(zip(AAA_TASKS, ((87, 78), (86, 83), (88, 84), (84, 87), (77, 36),
                                                                 (85, 75), (91, 86), (90, 50)))),
}

# Table 6 (§4.3): percentage of tokens AAA selects as important rows and as important columns.
AAA_TABLE6: Dict[str, Dict[str, float]] = {"row": {"MNLI": 0.8, "QQP": 0.6, "QNLI": 1.0},
                                           "column": {"MNLI": 1.6, "QQP": 1.3, "QNLI": 1.7}}

# Table 7 (§4.3): AAA with MobileBERT, (ρ %, score) on MNLI, QQP, QNLI.
AAA_TABLE7: Dict[str, Tuple[Tuple[int, int], ...]] = {
    "BERT": ((0, 84), (0, 87), (0, 91)), "BERT + AAA": ((77, 81), (73, 85), (82, 86)),
    "MobileBERT": ((0, 83), (0, 87), (0, 90)), "MobileBERT + AAA": ((78, 78), (74, 83), (83, 86)),
}

# §2.2, §3.1, §4.1-4.2: the setting.
AAA_SETUP: Dict[str, Any] = {
    "model": "bert-base-cased (Hugging Face), all defaults",
    "pretrain": {"steps": 1_000_000, "batch_per_device": 32, "devices": 8, "data": "wikipedia/20200501.en"},
    "finetune": {"steps": 30_000, "batch_per_device": 32, "devices": 4, "recipe": "Hugging Face defaults"},
    "local": "Local_k: offsets {0, ..., k} (|i - j| <= k); Local_2 keeps 5N - 6 entries (footnote 5)",
    "global": "Global_g: the first g tokens as rows and columns (r_k = k, c_l = l; Eq. 7)",
    "random": "Random_r: 2rN positions selected at random (size = positions / 2N)",
    "sparsity": "Eq. 9: mean over dev sentences, layers and heads of 1 - |B|/N_i^2",
    "hinge": "Eq. 10: L_task + alpha * max(0, rho_target - rho); alpha constant or rising linearly to half "
             "the epochs, raised until the target is reached",
    "aaa": "Eq. 11-12: per layer an FC layer and Gumbel-sigmoid give row and column indicators; "
           "B_ij = I_r,i + I_c,j - I_r,i I_c,j, paired with Local_2",
}

# Findings. "decides" names the measured quantities and the clauses the report tests (fairseq_local/
# reproduce/aaa_findings.py): each on a 95 % interval, Welch t over >= 3 seeds per arm, else a paired
# bootstrap over dev examples; "at the same sparsity" is dev rho (Eq. 9 on the evaluated sentences).
AAA_FINDINGS: List[Dict[str, str]] = [
    {"id": "W1", "source": "§3.1, Table 1",
     "text": "Sparse attention fine-tuned from the full model scores below full attention.",
     "decides": "per pattern (L2+G2, L2+G1+R1): Full - fine-tune-only > 0 (average over the tasks)"},
    {"id": "W2", "source": "§3.1, Table 1, abstract",
     "text": "Pre-training with the sparse pattern helps a little; fine-tuning only stays competitive "
             "(about 2-3 points lower on average, STS-B aside).",
     "decides": "per pattern: pre-trained - fine-tune-only > 0 (helps), and <= 3 points (§3.1: 'just under 3' on "
                "average: competitive)"},
    {"id": "W3", "source": "§3.2, Table 2",
     "text": "On LRA Text, global patterns help more as the local window shrinks.",
     "decides": "LRA is not run by this plan"},
    {"id": "W4", "source": "§3.2, Fig. 2",
     "text": "Increasing the size of either pattern from the base size 2 improves performance.",
     "decides": "per Fig. 2 task and kind: the largest size - size 2 > 0"},
    {"id": "W5", "source": "§3.2, Fig. 2",
     "text": "MNLI and QNLI gain more from larger global patterns, QQP from larger local ones.",
     "decides": "per task, over the sizes above 2: global - local > 0 on MNLI/QNLI, local - global > 0 on QQP"},
    {"id": "W6", "source": "§4.1, Table 3",
     "text": "A task-adaptive diagonal pattern beats a fixed one at matched sparsity.",
     "decides": "task-adaptive - fixed > 0, the two dev rho within 0.05 (else not comparable)"},
    {"id": "W7", "source": "§4.1, Table 3",
     "text": "Making the diagonal pattern layer-adaptive too brings a small further gain.",
     "decides": "task & layer-adaptive - task-adaptive > 0, the two dev rho within 0.05 (else not comparable)"},
    {"id": "W8", "source": "§4.3, Table 4",
     "text": "AAA reaches the target sparsity it is trained for (sometimes slightly sparser), with a similar "
             "sparsity on the development set as in training.",
     "decides": "over the AAA runs: dev rho - rho_target >= -0.01 (Table 4 prints whole percent), and "
                "|dev rho - training rho| <= 0.03"},
    {"id": "W9", "source": "§4.3, Table 4",
     "text": "AAA outperforms every fixed pattern at the same sparsity.",
     "decides": "per fixed pattern: AAA trained to its rho - the pattern > 0, AAA's dev rho at least the "
                "pattern's - 0.05 (else not comparable)"},
    {"id": "W10", "source": "§4.3, Table 5",
     "text": "AAA fine-tuned only rivals sparse patterns that were pre-trained with the pattern.",
     "decides": "per pre-trained pattern (L2+G2, L2+G1+R1): AAA - pre-trained >= -3 points (W2's margin), the two "
                "dev rho within 0.05 (else not comparable)"},
    {"id": "W11", "source": "§4.3, Table 6",
     "text": "AAA selects more important column tokens than row tokens.",
     "decides": "per task, over the AAA runs (dev set): share of column tokens - share of row tokens > 0"},
    {"id": "W12", "source": "§4.3, Table 7",
     "text": "AAA costs MobileBERT about as much as BERT at the same sparsity.",
     "decides": "MobileBERT is not run by this plan"},
]
