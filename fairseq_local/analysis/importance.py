"""Head importance of the encoder's self-attention heads, two ways.

**LRP head relevance** (Voita et al. 2019, "Analyzing Multi-Head
Self-Attention", the importance of heads by LRP): the relevance of each head
for the top-1 logit the model predicts, by conservative LRP (Ali et al. 2022,
:mod:`.lrp`): R_h = Σ_{t,k} o_h[t,k] ∂s/∂o_h[t,k] for the top-1 logit s of
one prediction, o_h the head's output before W_o.  A prediction is

* translation models: each target position (the final ``</s>`` included),
  teacher-forced on the model's own greedy translation (fairseq's
  ``SequenceGenerator``, beam 1, at most a·|source| + b tokens) or on
  reference translations;
* RoBERTa: the masked-LM head at masked positions (a share ``mask_prob`` of
  the word pieces, at least one, drawn with ``seed`` and the sentence's
  index, replaced by ``<mask>``) or at every word piece unmasked (``all``);
  or the classification head's prediction for the sentence.

A head's score is the mean of |R_h| over all predictions (the tokens of the
set of sentences), normalised within each layer to sum to 1: the relative
contribution of the layer's heads.  ``lrp_signed`` keeps the mean signed R_h
(a head may lower the logit: conservative LRP relevance has a sign).

**Gradient × gate** (Michel et al. 2019, §4.1):
I_h = E_x |∂L(x)/∂ξ_h| for a mask ξ_h = 1 multiplying head h's output:
∂L/∂ξ_h = <o_h, ∂L/∂o_h> (z_h ∂L/∂z_h for a gated head), with L(x) the
model's loss on sentence x: the negative log-likelihood of its target tokens
(the greedy translation or the reference; the masked or all word pieces; the
model's own class for a classification head, there being no labels).  The
scores are normalised within each layer by their l2 norm (Michel et al.
§4.1).  The gradient is the model's own, no rule applied.
"""

import math
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor
from tqdm import tqdm

from ..attention.context import AttentionCapture, attention_context
from .dump import Item
from .lrp import RULE, conservative_rules, gate_gradients, head_relevance
from .model import AnalysisError, AnalysisModel, batches

METHODS = ("lrp", "grad", "both")


@dataclass(frozen=True)
class ImportanceOptions:
    """What :func:`head_importance` explains and how.

    ``method``: ``lrp``, ``grad`` or ``both``.  ``refs``: reference target
    words per sentence index (translation models), else the greedy
    translation with at most ``max_len_a``·|source| + ``max_len_b`` tokens.
    ``positions``: RoBERTa's masked-LM predictions, ``masked`` or ``all``;
    ``mask_prob`` and ``seed`` choose the masked pieces.  ``head``: a
    classification head of the checkpoint, ``lm`` for the masked-LM head,
    None: the only classification head if there is one, else the LM head."""

    method: str = "both"
    refs: Optional[Dict[int, List[str]]] = None
    max_len_a: float = 1.2
    max_len_b: int = 10
    positions: str = "masked"
    mask_prob: float = 0.15
    seed: int = 1
    head: Optional[str] = None
    max_tokens: int = 4096


@dataclass
class Batch:
    """A batch of predictions to explain.  ``src_tokens`` (B, T) (with
    ``<mask>`` where masked); ``prev_output_tokens`` (B, N) for translation
    models; ``targets`` (B, N), the tokens the loss scores, or None (the
    model's own top-1); ``mask`` (B, N) bool, the predictions that count."""

    src_tokens: Tensor
    src_lengths: Tensor
    prev_output_tokens: Optional[Tensor]
    targets: Optional[Tensor]
    mask: Tensor


def prediction_kind(model: AnalysisModel, opts: ImportanceOptions) -> str:
    """``translation``, ``masked``, ``all`` or ``class:NAME``; a one-line
    :class:`AnalysisError` for options that do not fit the model."""
    if opts.method not in METHODS:
        raise AnalysisError(f"unknown --method '{opts.method}' (one of {', '.join(METHODS)})")
    if hasattr(model.model, "decoder"):
        if opts.head is not None:
            raise AnalysisError("--head is for RoBERTa checkpoints, not translation models")
        return "translation"
    if not model.roberta:
        raise AnalysisError("head importance needs a translation model or RoBERTa (with its heads), "
                            "not a bare encoder")
    if opts.refs is not None:
        raise AnalysisError("--ref is for translation models, not RoBERTa")
    heads = list(getattr(model.model, "classification_heads", None) or [])
    head = opts.head
    if head is None:
        if len(heads) > 1:
            raise AnalysisError(f"the checkpoint has classification heads {', '.join(heads)}: choose one "
                                f"with --head NAME (or --head lm)")
        head = heads[0] if heads else "lm"
    if head != "lm":
        if head not in heads:
            raise AnalysisError(f"no classification head '{head}' in the checkpoint "
                                f"(it has: {', '.join(heads) or 'none'}; --head lm for the masked-LM head)")
        return f"class:{head}"
    if opts.positions not in ("masked", "all"):
        raise AnalysisError(f"unknown --positions '{opts.positions}' (masked or all)")
    if opts.positions == "masked":
        if "<mask>" not in model.dictionary.indices:
            raise AnalysisError("the model's dictionary has no <mask> symbol: use --positions all")
        if not 0 < opts.mask_prob <= 1:
            raise AnalysisError("--mask-prob must be in (0, 1]")
    return opts.positions


def describe(kind: str, opts: ImportanceOptions) -> str:
    """What was explained, in words (the JSON's ``target``)."""
    if kind == "translation":
        return ("reference translations" if opts.refs is not None else
                f"greedy translations (beam 1, max {opts.max_len_a:g}*len+{opts.max_len_b})")
    if kind == "masked":
        return f"masked-LM head at masked word pieces (share {opts.mask_prob:g}, seed {opts.seed})"
    if kind == "all":
        return "masked-LM head at every word piece (unmasked)"
    return f"classification head '{kind.split(':', 1)[1]}' (loss: its own top-1 class)"


def _pad_rows(rows: Sequence[Sequence[int]], pad: int, device: torch.device) -> Tensor:
    out = torch.full((len(rows), max(len(r) for r in rows)), pad, dtype=torch.long)
    for b, r in enumerate(rows):
        out[b, :len(r)] = torch.tensor(list(r), dtype=torch.long)
    return out.to(device)


def target_ids(model: AnalysisModel, words: Sequence[str]) -> List[int]:
    """Reference words -> target dictionary ids (the target-side subword
    tokeniser, ``</s>`` last)."""
    d = model.model.decoder.dictionary
    tokenise = model.target_tokeniser
    if tokenise is None:
        raise AnalysisError("the checkpoint's task has no target language: cannot tokenise --ref")
    return [d.index(s) for w, word in enumerate(words) for s, _ in tokenise(word, w == 0)] + [d.eos()]


class _Greedy:
    """fairseq's SequenceGenerator with beam 1 (the model's own translation).

    fairseq limits a batch to a·(its longest source) + b tokens; each
    sentence here gets its own limit, as if translated alone (a longer
    hypothesis is cut there and ends in ``</s>``, the token the generator
    forces at its limit), so that batching changes nothing."""

    def __init__(self, model: AnalysisModel, opts: ImportanceOptions) -> None:
        from fairseq.sequence_generator import SequenceGenerator

        self.models = [model.model]
        self.eos = model.model.decoder.dictionary.eos()
        self.a, self.b = opts.max_len_a, opts.max_len_b
        self.gen = SequenceGenerator(self.models, model.model.decoder.dictionary, beam_size=1,
                                     max_len_a=opts.max_len_a, max_len_b=opts.max_len_b)

    @torch.no_grad()
    def __call__(self, src_tokens: Tensor, src_lengths: Tensor) -> List[List[int]]:
        hyps = self.gen.generate(self.models, {"net_input": {"src_tokens": src_tokens, "src_lengths": src_lengths}})
        rows = []
        for h, n in zip(hyps, src_lengths.tolist()):
            limit = min(int(self.a * n + self.b), self.gen.max_len - 1)  # SequenceGenerator's, for this sentence
            tokens = h[0]["tokens"].tolist()
            rows.append(tokens if len(tokens) <= limit + 1 else tokens[:limit] + [self.eos])
        return rows


def make_batch(model: AnalysisModel, kind: str, chosen: Sequence[Item], opts: ImportanceOptions,
               greedy: Optional[_Greedy] = None) -> Batch:
    """The :class:`Batch` of the sentences ``chosen`` (right padding)."""
    src_tokens, src_lengths = model.collate([it.input for it in chosen])
    device = src_tokens.device
    B = len(chosen)
    if kind == "translation":
        d = model.model.decoder.dictionary
        if opts.refs is not None:
            rows = [target_ids(model, opts.refs[it.index]) for it in chosen]
        else:
            rows = greedy(src_tokens, src_lengths)
        targets = _pad_rows(rows, d.pad(), device)
        prev = _pad_rows([[d.eos()] + r[:-1] for r in rows], d.pad(), device)
        return Batch(src_tokens, src_lengths, prev, targets, targets.ne(d.pad()))
    if kind.startswith("class:"):
        return Batch(src_tokens, src_lengths, None, None, torch.ones(B, 1, dtype=torch.bool, device=device))
    pieces = _pad_rows([[w >= 0 for w in it.input.word_ids] for it in chosen], 0, device).bool()
    if kind == "all":
        return Batch(src_tokens, src_lengths, None, src_tokens, pieces)
    mask = torch.zeros_like(pieces)
    for b, it in enumerate(chosen):  # seeded by the sentence, whatever the batch
        where = [t for t, w in enumerate(it.input.word_ids) if w >= 0]
        if not where:
            continue
        g = torch.Generator().manual_seed(opts.seed * 1_000_003 + it.index)
        k = max(1, int(round(opts.mask_prob * len(where))))
        picked = torch.tensor(where)[torch.randperm(len(where), generator=g)[:k]]
        mask[b, picked.to(device)] = True
    masked = src_tokens.masked_fill(mask, model.dictionary.index("<mask>"))
    return Batch(masked, src_lengths, None, src_tokens, mask)


def logits_of(model: AnalysisModel, kind: str, batch: Batch) -> Tensor:
    """The model's logits for ``batch``: (B, N, V) (N = 1 for a classification head)."""
    if kind == "translation":
        return model.model(batch.src_tokens, batch.src_lengths, batch.prev_output_tokens)[0]
    if kind.startswith("class:"):
        name = kind.split(":", 1)[1]
        return model.model(batch.src_tokens, features_only=True, classification_head_name=name)[0][:, None]
    return model.model(batch.src_tokens)[0]


def _fp32(t: Tensor) -> Tensor:
    """``t`` in float32 at least (float64 stays)."""
    return t.to(torch.promote_types(t.dtype, torch.float32))


def _head_outputs(model: AnalysisModel, cap: AttentionCapture) -> List[Tensor]:
    """The encoder layers' head outputs (B, H, T, d_h) of one forward pass, in layer order."""
    outs = [c.head_outputs for a in model.attention for c in cap.of(a)]
    if len(outs) != model.num_layers:
        raise AnalysisError(f"expected one call of each of the {model.num_layers} encoder attention layers, "
                            f"got {len(outs)}")
    return outs


def batch_relevance(model: AnalysisModel, kind: str, batch: Batch) -> Tuple[Tensor, Tensor]:
    """LRP head relevance of every counted prediction of ``batch``:
    (L, B, N, H) float64, and the top-1 logits explained (B, N)."""
    cap = AttentionCapture(head_outputs=True, graph=True)
    with torch.enable_grad(), conservative_rules(model.model, cap):
        logits = logits_of(model, kind, batch)
    scores = _fp32(logits).max(-1).values  # the top-1 logit of each prediction
    return head_relevance(_head_outputs(model, cap), scores, batch.mask), scores.detach()


def batch_losses(model: AnalysisModel, kind: str, batch: Batch,
                 capture: Optional[AttentionCapture] = None) -> Tensor:
    """L(x) per sentence (B,): the summed negative log-likelihood (float32 at least)
    of the counted targets (the model's own top-1 where ``targets`` is None)."""
    with torch.enable_grad(), attention_context(capture=capture):
        logits = logits_of(model, kind, batch)
    lprobs = F.log_softmax(_fp32(logits), dim=-1)
    targets = batch.targets if batch.targets is not None else lprobs.argmax(-1)
    nll = -lprobs.gather(-1, targets[..., None]).squeeze(-1)
    return (nll * batch.mask).sum(-1)


def batch_gate_gradients(model: AnalysisModel, kind: str, batch: Batch) -> Tensor:
    """∂L(x)/∂ξ_h per sentence of ``batch`` (Michel et al. §4.1): (L, B, H) float64."""
    cap = AttentionCapture(head_outputs=True, graph=True)
    losses = batch_losses(model, kind, batch, cap)
    return gate_gradients(_head_outputs(model, cap), losses)


def normalise_sum(x: Tensor) -> Tensor:
    """Each layer's row (L, H) divided by its sum (rows summing to 0 stay 0)."""
    total = x.sum(-1, keepdim=True)
    return torch.where(total > 0, x / total.clamp_min(torch.finfo(x.dtype).tiny), torch.zeros_like(x))


def normalise_l2(x: Tensor) -> Tensor:
    """Each layer's row (L, H) divided by its l2 norm (Michel et al. §4.1)."""
    norm = x.norm(dim=-1, keepdim=True)
    return torch.where(norm > 0, x / norm.clamp_min(torch.finfo(x.dtype).tiny), torch.zeros_like(x))


class ImportanceAccumulator:
    """Sums over sentences and predictions, on the CPU in float64."""

    def __init__(self, layers: int, heads: int) -> None:
        self.lrp_abs = torch.zeros(layers, heads, dtype=torch.float64)
        self.lrp_signed = torch.zeros(layers, heads, dtype=torch.float64)
        self.grad_abs = torch.zeros(layers, heads, dtype=torch.float64)
        self.predictions = 0  # of the sentences seen
        self.sentences = 0
        self.explained = 0  # predictions in the relevance sums
        self.graded = 0  # sentences in the gradient sums

    def add_batch(self, mask: Tensor) -> None:
        """Count the sentences and predictions of a batch (``mask`` (B, N))."""
        self.sentences += mask.shape[0]
        self.predictions += int(mask.sum())

    def add_relevance(self, rel: Tensor, mask: Tensor) -> None:
        """``rel`` (L, B, N, H), ``mask`` (B, N): the counted predictions."""
        keep = mask.to(rel.device, rel.dtype)[None, :, :, None]
        self.lrp_abs += (rel.abs() * keep).sum((1, 2)).cpu()
        self.lrp_signed += (rel * keep).sum((1, 2)).cpu()
        self.explained += int(mask.sum())

    def add_gate_gradients(self, grads: Tensor) -> None:
        """``grads`` (L, B, H): ∂L(x)/∂ξ_h of B sentences."""
        self.grad_abs += grads.abs().sum(1).cpu()
        self.graded += grads.shape[1]

    def result(self) -> dict:
        """``lrp`` (mean |R_h| normalised to sum 1 per layer), ``lrp_signed``
        (mean R_h), ``grad_gate`` (mean |∂L/∂ξ_h| over sentences, l2-normalised
        per layer), as lists per layer (None where not computed), the
        Spearman correlation of the two over all heads, and the counts."""
        lrp = grad = signed = None
        if self.explained:
            lrp = normalise_sum(self.lrp_abs / self.explained).tolist()
            signed = (self.lrp_signed / self.explained).tolist()
        if self.graded:
            grad = normalise_l2(self.grad_abs / self.graded).tolist()
        return {"lrp": lrp, "grad_gate": grad, "lrp_signed": signed, "spearman": spearman(lrp, grad),
                "sentences": self.sentences, "predictions": self.predictions}


def spearman(a: Optional[list], b: Optional[list]) -> Optional[float]:
    """Spearman's rho of two per-layer lists over all heads (None if either
    is missing or constant)."""
    if a is None or b is None:
        return None
    from scipy.stats import spearmanr

    x = [v for row in a for v in row]
    y = [v for row in b for v in row]
    if len(set(x)) < 2 or len(set(y)) < 2:
        return None
    rho = float(spearmanr(x, y)[0])
    return None if math.isnan(rho) else rho


def head_importance(model: AnalysisModel, items: Sequence[Item], opts: ImportanceOptions,
                    progress: bool = True) -> dict:
    """Both estimates over ``items`` (see the module docstring): the
    :meth:`ImportanceAccumulator.result` with ``rule`` and ``target``."""
    kind = prediction_kind(model, opts)
    if opts.max_tokens < 1:
        raise AnalysisError("--max-tokens must be positive")
    if opts.refs is not None:
        missing = [it.index for it in items if it.index not in opts.refs]
        if missing:
            raise AnalysisError(f"no reference for sentence {missing[0] + 1}")
    greedy = _Greedy(model, opts) if kind == "translation" and opts.refs is None else None
    acc = ImportanceAccumulator(model.num_layers, model.num_heads)
    with tqdm(total=len(items), desc="importance", unit="sent", disable=not progress, leave=False) as bar:
        for batch_ids in batches([it.input for it in items], opts.max_tokens):
            chosen = [items[k] for k in batch_ids]
            batch = make_batch(model, kind, chosen, opts, greedy)
            if opts.method in ("lrp", "both"):
                acc.add_relevance(batch_relevance(model, kind, batch)[0], batch.mask)
            if opts.method in ("grad", "both"):
                acc.add_gate_gradients(batch_gate_gradients(model, kind, batch))
            acc.add_batch(batch.mask)
            bar.update(len(chosen))
    result = acc.result()
    result.update(rule=RULE if opts.method != "grad" else None, target=describe(kind, opts),
                  grad_loss="negative log-likelihood of the targets per sentence" if opts.method != "lrp" else None)
    return result
