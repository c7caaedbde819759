"""A tiny NMT model under the sparsity criterion, and one batch
(``from helpers.criteria import translation_setup``)."""

import argparse

import torch

import fairseq_local  # noqa: F401  (registers the archs and criteria)
from fairseq.data import Dictionary
from fairseq.models import ARCH_CONFIG_REGISTRY
from fairseq.tasks.translation import TranslationTask
from fairseq_local.criteria import LabelSmoothedCrossEntropyWithSparsity
from fairseq_local.criteria.label_smoothed import LabelSmoothedCrossEntropyWithSparsityConfig
from fairseq_local.models import LocalTransformerModel


def translation_setup(layout: str, **criterion):
    """``(model, criterion, task, sample)``: a 2-layer encoder of 4 heads with
    ``layout`` (width 16, seed 0), the label-smoothed criterion with sparsity
    options ``criterion``, and a left-padded batch of two sentences."""
    d = Dictionary()
    for i in range(40):
        d.add_symbol(f"w{i}")
    args = argparse.Namespace(encoder_embed_dim=16, encoder_ffn_embed_dim=32, decoder_embed_dim=16,
                              decoder_ffn_embed_dim=32, encoder_layers=2, decoder_layers=1,
                              encoder_attention_heads=4, decoder_attention_heads=2, dropout=0.0,
                              attn_layout=layout, dam_max_len=16)
    ARCH_CONFIG_REGISTRY["transformer_local"](args)
    task = TranslationTask(argparse.Namespace(left_pad_source=True), d, d)
    torch.manual_seed(0)
    model = LocalTransformerModel.build_model(args, task)
    cfg = LabelSmoothedCrossEntropyWithSparsityConfig(label_smoothing=0.1, sentence_avg=False, **criterion)
    crit = LabelSmoothedCrossEntropyWithSparsity(cfg, task)
    src = torch.tensor([[1, 1, 5, 6, 7, 2], [5, 6, 7, 8, 9, 2]])
    tgt = torch.tensor([[9, 8, 2, 1], [7, 6, 5, 2]])
    prev = torch.tensor([[2, 9, 8, 1], [2, 7, 6, 5]])
    sample = {"net_input": {"src_tokens": src, "src_lengths": torch.tensor([4, 6]), "prev_output_tokens": prev},
              "target": tgt, "ntokens": 7, "id": torch.arange(2)}
    return model, crit, task, sample
