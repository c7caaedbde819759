"""Shared pieces of the precision tests: tiny models of the named archs with
their real criterion and a batch, and fairseq's ``--fp16`` update loop
(``fairseq.optim.fp16_optimizer.FP16Optimizer`` with its
``DynamicLossScaler``) driven by hand."""

import argparse
import math
from typing import Dict, Optional

import pytest
import torch

import fairseq_local  # noqa: F401  (registers the archs and criteria)
from fairseq.data import Dictionary
from fairseq.models import ARCH_CONFIG_REGISTRY
from fairseq.optim.dynamic_loss_scaler import DynamicLossScaler
from fairseq.tasks.translation import TranslationTask
from fairseq_local.criteria.label_smoothed import (
    LabelSmoothedCrossEntropyWithSparsity,
    LabelSmoothedCrossEntropyWithSparsityConfig,
)
from fairseq_local.criteria.masked_lm import MaskedLmWithSparsity, MaskedLmWithSparsityConfig
from fairseq_local.models import LocalTransformerModel, build_roberta

# Every penalty on, with weights large enough to matter next to the task loss.
PENALTIES = dict(dam_lambda=1e-3, aaa_alpha=2.0, aaa_target=0.95, gate_lambda=0.1)
# The named archs fix 6 (NMT) or 12 (RoBERTa) layers of 8 or 12 heads; the rest is tiny.
NMT_TINY = dict(encoder_embed_dim=16, encoder_ffn_embed_dim=32, decoder_embed_dim=16, decoder_ffn_embed_dim=32,
                decoder_layers=1, decoder_attention_heads=2, dropout=0.0, attention_dropout=0.0,
                dam_max_len=64)
ROBERTA_TINY = dict(encoder_embed_dim=24, encoder_ffn_embed_dim=48, max_positions=64, dropout=0.0,
                    attention_dropout=0.0, dam_max_len=64)
VOCAB = 40


@pytest.fixture
def one_thread():
    """Tiny models: one thread is faster, and immune to a loaded machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def dictionary(size: int = VOCAB) -> Dictionary:
    d = Dictionary()
    for i in range(size - len(d)):
        d.add_symbol(f"w{i}")
    return d


def nmt_setup(arch: str, overrides: Optional[dict] = None, seed: int = 0, **criterion):
    """A tiny ``arch`` (LocalTransformerModel), the sparsity criterion and a
    left-padded batch of 3 sentences; returns (model, criterion, sample)."""
    d = dictionary()
    args = argparse.Namespace(**{**NMT_TINY, **(overrides or {})})
    ARCH_CONFIG_REGISTRY[arch](args)
    task = TranslationTask(argparse.Namespace(left_pad_source=True), d, d)
    torch.manual_seed(seed)
    model = LocalTransformerModel.build_model(args, task)
    cfg = LabelSmoothedCrossEntropyWithSparsityConfig(label_smoothing=0.1, sentence_avg=False,
                                                      **{**PENALTIES, **criterion})
    crit = LabelSmoothedCrossEntropyWithSparsity(cfg, task)
    g = torch.Generator().manual_seed(seed + 1)
    src = torch.randint(4, VOCAB, (3, 8), generator=g)
    src[:, -1] = 2
    src[0, :3] = 1  # left padding: lengths 5, 8, 7
    src[2, :1] = 1
    tgt = torch.randint(4, VOCAB, (3, 6), generator=g)
    tgt[:, -1] = 2
    tgt[1, -2:] = torch.tensor([2, 1])  # right padding
    prev = torch.cat([torch.full((3, 1), 2), tgt[:, :-1]], 1)
    sample = {"net_input": {"src_tokens": src, "src_lengths": torch.tensor([5, 8, 7]),
                            "prev_output_tokens": prev},
              "target": tgt, "ntokens": int(tgt.ne(1).sum()), "nsentences": 3, "id": torch.arange(3)}
    return model, crit, sample


def roberta_setup(arch: str, overrides: Optional[dict] = None, seed: int = 0, **criterion):
    """A tiny RoBERTa ``arch``, ``masked_lm_with_sparsity`` and a right-padded
    batch of 3 sentences with masked positions; returns (model, criterion, sample)."""
    d = dictionary()
    torch.manual_seed(seed)
    model = build_roberta(arch, {**ROBERTA_TINY, **(overrides or {})}, dictionary=d)
    task = argparse.Namespace(source_dictionary=d, target_dictionary=d)
    cfg = MaskedLmWithSparsityConfig(**{**PENALTIES, **criterion})
    crit = MaskedLmWithSparsity(cfg, task)
    g = torch.Generator().manual_seed(seed + 1)
    lengths = [9, 6, 8]
    tokens = torch.full((3, 9), d.pad(), dtype=torch.long)
    target = torch.full((3, 9), d.pad(), dtype=torch.long)
    for b, n in enumerate(lengths):
        tokens[b, :n] = torch.randint(4, VOCAB, (n,), generator=g)
        tokens[b, 0], tokens[b, n - 1] = d.bos(), d.eos()
        for i in (1, n - 2):  # two masked positions per sentence
            target[b, i] = tokens[b, i]
            tokens[b, i] = d.unk()
    sample = {"net_input": {"src_tokens": tokens}, "target": target,
              "ntokens": int(target.ne(d.pad()).sum()), "nsentences": 3, "id": torch.arange(3)}
    return model, crit, sample


def setup(arch: str, overrides: Optional[dict] = None, seed: int = 0, **criterion):
    """:func:`nmt_setup` or :func:`roberta_setup` by the arch's family."""
    fn = roberta_setup if arch.startswith("roberta_") else nmt_setup
    return fn(arch, overrides, seed, **criterion)


class PenaltySpy:
    """Wraps ``crit.penalties`` to keep the last forward pass's sparsity terms
    and summed penalty."""

    def __init__(self, crit) -> None:
        self.terms = self.total = None
        inner = crit.penalties

        def penalties(terms, sample_size):
            total, log = inner(terms, sample_size)
            self.terms, self.total = terms, total
            return total, log

        crit.penalties = penalties

    def tensors(self) -> Dict[str, torch.Tensor]:
        """The penalty terms of the last forward pass (only those the model has)."""
        t = self.terms
        found = {**t.penalties, "aaa_rho": t.hinge_rho("aaa"), "gate": t.gate}
        found = {name: v for name, v in found.items() if v is not None}
        if isinstance(self.total, torch.Tensor):
            found["total"] = self.total
        return found


def fp16_optimizer_training(model, crit, sample, dtype: torch.dtype, steps: int = 50, lr: float = 1e-3):
    """Train ``model`` cast to ``dtype`` for ``steps`` updates the way
    fairseq's ``FP16Optimizer`` does: a flat fp32 master copy of the
    parameters, the loss scaled by a ``DynamicLossScaler(init_scale=128)``, the
    half gradients copied to the master, unscaled and divided by the sample
    size (``Trainer.train_step``), ``check_overflow(grad_norm)`` skipping the
    update on ``OverflowError``, Adam on the master, the master copied back.
    Then one validation forward pass (eval mode, no grad).

    Every loss, penalty and (non-skipped) gradient is checked as it comes:
    finite, the loss and the penalties float32.  Returns (skipped updates,
    the task losses, the final loss scale)."""
    model = model.to(dtype)
    params = [p for p in model.parameters() if p.requires_grad]
    sizes = [p.numel() for p in params]
    master = torch.cat([p.detach().float().reshape(-1) for p in params]).requires_grad_(True)
    opt = torch.optim.Adam([master], lr=lr)
    scaler = DynamicLossScaler(init_scale=128.0, scale_window=2 ** 14)
    spy = PenaltySpy(crit)
    skipped, losses = 0, []

    def check(step, loss, log):
        assert torch.isfinite(loss).all(), f"{step}: loss {loss}"
        assert loss.dtype == torch.float32, f"{step}: the loss is {loss.dtype}"
        for name, term in spy.tensors().items():
            assert term.dtype == torch.float32, f"{step}: penalty {name} is {term.dtype}"
            assert torch.isfinite(term).all(), f"{step}: penalty {name} = {term}"
        for name in ("loss", "dam_loss", "aaa_loss", "gate_loss"):
            if name in log:
                assert math.isfinite(float(log[name])), f"{step}: logged {name} = {log[name]}"

    for step in range(steps):
        model.train()
        model.set_num_updates(step)
        torch.manual_seed(1000 + step)
        loss, sample_size, log = crit(model, sample)
        check(f"step {step}", loss, log)
        losses.append(float(log["loss"]))
        model.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        # FP16Optimizer: half grads -> the fp32 master's, times 1/(loss scale · sample size)
        grad = torch.cat([torch.zeros(p.numel()) if p.grad is None else p.grad.float().reshape(-1) for p in params])
        grad.mul_(1.0 / (scaler.loss_scale * float(sample_size)))
        master.grad = grad
        grad_norm = float(torch.linalg.vector_norm(grad))
        try:
            scaler.check_overflow(grad_norm)
        except OverflowError:
            skipped += 1
            continue
        # a finite norm: every gradient is finite
        opt.step()
        scaler.update()
        with torch.no_grad():
            torch._foreach_copy_(params, [m.view_as(p) for m, p in zip(master.detach().split(sizes), params)])
    model.eval()
    with torch.no_grad():
        loss, _, log = crit(model, sample)
    check("validation", loss, log)
    return skipped, losses, scaler.loss_scale
