"""Tiny random Hugging Face BERT/RoBERTa folders (``save_pretrained``, no
download) and a comparison of a converted model with ``transformers``' own
forward, for the ``convert-hf`` tests."""

import json
import os
from typing import Dict, List, Sequence, Tuple

import torch

from fairseq_local.attention.context import AttentionCapture, attention_context

WORDS = ["the", "a", "cat", "dog", "sat", "on", "mat", "ran", "and", "is", "was", "big", "small", "red",
         "blue", "house", "tree", "walk", "##s", "##ed", "##ing", "##er", "##ly", "un", "##able", ".", ","]
# [MASK] and the other specials away from fairseq's positions, so the permutation is tested.
BERT_VOCAB = ["[PAD]", "[unused0]", "[unused1]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS + ["!", "?", "##x"]
CORPUS = ["the cat sat on the mat.", "a big dog ran and the small cat walked.", "the red house is big!",
          "was the blue tree small?", "unable to walk, the dog sat."] * 4
DIMS = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
            hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)
BERT_CLASSES = ("BertModel", "BertForMaskedLM", "BertForPreTraining", "BertForSequenceClassification")
ROBERTA_CLASSES = ("RobertaModel", "RobertaForMaskedLM", "RobertaForSequenceClassification")


def _perturb(model, seed: int):
    """Every parameter moved by N(0, 0.1²), LayerNorms and biases included, so a wrong mapping shows."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=g) * 0.1)
    return model.eval()


def roberta_tokenizer_files(folder: str) -> int:
    """A byte-level BPE trained on :data:`CORPUS` (vocab.json, merges.txt; <mask> at id 4); its size."""
    from tokenizers import ByteLevelBPETokenizer

    tok = ByteLevelBPETokenizer()
    tok.train_from_iterator(CORPUS, vocab_size=300, min_frequency=1, show_progress=False,
                            special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    os.makedirs(folder, exist_ok=True)
    tok.save_model(folder)
    return tok.get_vocab_size()


def save_model(folder: str, cls_name: str, seed: int = 0, words: Sequence[str] = (), **config) -> str:
    """A random ``cls_name`` (a transformers class) with its tokenizer files in
    ``folder``; a BERT's vocabulary is :data:`BERT_VOCAB` plus ``words``."""
    import transformers

    transformers.utils.logging.disable_progress_bar()  # save_pretrained's "Writing model shards" bar
    bert = cls_name.startswith("Bert")
    os.makedirs(folder, exist_ok=True)
    if bert:
        vocab = BERT_VOCAB + sorted(set(words) - set(BERT_VOCAB))
        with open(os.path.join(folder, "vocab.txt"), "w") as f:
            f.write("".join(t + "\n" for t in vocab))
        cfg = transformers.BertConfig(vocab_size=len(vocab), pad_token_id=0, max_position_embeddings=64,
                                      num_labels=3, **{**DIMS, **config})
    else:
        size = roberta_tokenizer_files(folder)
        cfg = transformers.RobertaConfig(vocab_size=size, pad_token_id=1, bos_token_id=0, eos_token_id=2,
                                         type_vocab_size=1, layer_norm_eps=1e-5, max_position_embeddings=66,
                                         num_labels=3, **{**DIMS, **config})
    torch.manual_seed(seed)
    model = _perturb(getattr(transformers, cls_name)(cfg), seed)
    model.save_pretrained(folder)
    return folder


def hf_model(folder: str):
    import transformers

    with open(os.path.join(folder, "config.json")) as f:
        cls = getattr(transformers, json.load(f)["architectures"][0])
    return cls.from_pretrained(folder, attn_implementation="eager", use_kernels=False).eval()


def batches(bert: bool, hf_ids: Dict[str, int], vocab_size: int, seed: int = 0):
    """(name, input_ids, attention_mask, token_type_ids) in Hugging Face ids:
    single sentences and pairs (BERT: ``[CLS] A [SEP] B [SEP]`` with segments
    0/1; RoBERTa: ``<s> A </s></s> B </s>``), right- and left-padded."""
    g = torch.Generator().manual_seed(seed)
    words = [i for i in range(vocab_size) if i not in hf_ids.values()]
    bos, pad, eos = hf_ids["bos"], hf_ids["pad"], hf_ids["eos"]

    def rnd(n: int) -> List[int]:
        return [words[j] for j in torch.randint(len(words), (n,), generator=g).tolist()]

    singles = [([bos] + rnd(n) + [eos], None) for n in (7, 4, 9, 2)]
    pairs = []
    for a, b in ((3, 4), (1, 2), (5, 1), (2, 6)):
        ids = [bos] + rnd(a) + [eos] + ([] if bert else [eos]) + rnd(b) + [eos]
        pairs.append((ids, [0] * (a + 2) + [1 if bert else 0] * (len(ids) - a - 2)))

    def pack(rows: List[Tuple[List[int], list]], left: bool):
        T = max(len(ids) for ids, _ in rows)
        ids_t = torch.full((len(rows), T), pad)
        mask, types = torch.zeros(len(rows), T, dtype=torch.long), torch.zeros(len(rows), T, dtype=torch.long)
        for i, (ids, seg) in enumerate(rows):
            span = slice(T - len(ids), T) if left else slice(0, len(ids))
            ids_t[i, span], mask[i, span] = torch.tensor(ids), 1
            types[i, span] = torch.tensor(seg or [0] * len(ids))
        return ids_t, mask, types

    for name, rows in (("single", singles), ("pairs", pairs)):
        for left in (False, True):
            yield (f"{name}, {'left' if left else 'right'}-padded", *pack(rows, left))


def compare(model, folder: str, perm: List[int]) -> Dict[str, float]:
    """Largest |difference| between ``model`` (converted, fp32, eval) and the
    folder's transformers model, over :func:`batches`: hidden states of every
    layer and attention probabilities of every head (real tokens as queries,
    every key), MLM logits (real tokens) and classification logits (rows whose
    first token is real: both models pool position 0)."""
    hf = hf_model(folder)
    cfg = hf.config
    bert = cfg.model_type == "bert"
    perm_t = torch.tensor(perm)
    inverse = torch.empty_like(perm_t)
    inverse[perm_t] = torch.arange(len(perm))
    hf_ids = {"bos": perm[0], "pad": perm[1], "eos": perm[2]}
    heads = sorted(model.classification_heads)
    base = getattr(hf, "bert", None) or getattr(hf, "roberta", None) or hf
    worst: Dict[str, float] = {}

    def record(key: str, diff: torch.Tensor) -> None:
        if diff.numel():
            worst[key] = max(worst.get(key, 0.0), float(diff.abs().max()))

    model.eval()
    for _, ids, mask, types in batches(bert, hf_ids, cfg.vocab_size):
        real = mask.bool()
        capture = AttentionCapture(weights=True)
        with torch.no_grad():
            with attention_context(capture=capture, impl="dense"):
                x, extra = model(inverse[ids], features_only=True, return_all_hiddens=True)
                logits = model.encoder.output_layer(x)
                ours_cls = {h: model.classification_heads[h](x) for h in heads}
            out = base(input_ids=ids, attention_mask=mask, token_type_ids=types, output_hidden_states=True,
                       output_attentions=True)
            for a, b in zip(extra["inner_states"], out.hidden_states):
                record("hidden", (a.transpose(0, 1) - b)[real])
            for a, b in zip([c.weights for c in capture.calls], out.attentions):
                record("attention", (a - b).permute(0, 2, 1, 3)[real])
            head = getattr(getattr(hf, "cls", None), "predictions", None) or getattr(hf, "lm_head", None)
            if head is not None:
                record("mlm", (logits - head(out.last_hidden_state)[..., perm_t])[real])
            if heads:
                full = hf(input_ids=ids, attention_mask=mask, token_type_ids=types)
                theirs = {"sentence_classification_head": getattr(full, "logits", None),
                          "next_sentence": getattr(full, "seq_relationship_logits", None)}
                for h in heads:
                    record("classification", (ours_cls[h] - theirs[h])[real[:, 0]])
    return worst
