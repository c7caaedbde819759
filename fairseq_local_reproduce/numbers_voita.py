"""Voita et al. 2019, "Analyzing Multi-Head Self-Attention: Specialized Heads
Do the Heavy Lifting, the Rest Can Be Pruned" (ACL): the printed numbers the
report compares with, and the findings it decides.  Data only."""

# Abstract and §6: WMT EN-RU, Transformer-base (6 encoder layers of 8 heads).
VOITA_PRUNING = {"pair": "WMT EN-RU", "enc_heads": 48, "enc_kept": 10, "bleu_drop": 0.15}
VOITA_SETUP = {"model": "Transformer-base, 6 layers of 8 heads, d = 512",
               "gates": "hard-concrete per head, L0 relaxation L = L_xent + λ L_C, from the converged model",
               "roles": "positional, syntactic (nsubj, dobj, amod, advmod), rare words (§5)"}
VOITA_FINDINGS = [
    {"id": "V1", "text": "The heads that matter most by LRP relevance are the most confident ones (§4, Fig. 1)."},
    {"id": "V2", "text": "The most important heads play specialised roles: positional, syntactic or rare-word "
                         "(§5, Fig. 1)."},
    {"id": "V3", "text": "Specialised heads are the last to be pruned (§6, Fig. 8)."},
    {"id": "V4", "text": "Most encoder heads can be removed with little loss: on WMT EN-RU, 38 of 48 for "
                         "0.15 BLEU (abstract, §6)."},
    {"id": "V5", "text": "Encoder-decoder attention is the type most sensitive to the number of heads: pruned "
                         "together with the others, it keeps the largest share of its heads (§8)."},
]
