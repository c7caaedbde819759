"""Conservative layer-wise relevance propagation through a fairseq model
(Ali et al. 2022, "XAI for Transformers: Better Explanations through
Conservative Propagation", ICML).

Three rules turn the network, at the input at hand, into an affine function
of its input embeddings (the nonlinear factors are frozen at their values):

* the AH-rule: the attention weights A are constants of ``A v``;
* the LN-rule: LayerNorm's normalisation 1/σ is a constant, so
  ``γ ⊙ (z − mean z) / σ + β`` is linear in z;
* the identity rule for an elementwise activation y = φ(u) (Achtibat et al.
  2024, "AttnLRP", for GELU and the like): the relevance of u is the
  relevance of y (u·∂f/∂u = y·∂f/∂y; the backward pass takes
  ∂f/∂u = φ(u)/u · ∂f/∂y).  For ReLU φ(u)/u is ReLU's own derivative: the
  plain gradient, as in Ali et al.; for GELU (RoBERTa) and tanh (its
  classification heads) it replaces the gradient, which is not conservative.

The network is then a sum of linear maps and constants (biases, LayerNorm β,
position embeddings), and gradient × input is LRP-0 on it (Ali et al., the
LRP-0 rule on the linearised attention heads and LayerNorms): for a scalar
output f, e.g. a logit,

    f = Σ_i x_i ∂f/∂x_i + Σ_b b ∂f/∂b        (conservation)

over the input embeddings x and every constant b; and at every sum node the
relevance z·∂f/∂z of the sum is the sum of its terms' relevances.  For a
head h of an attention block with input x (T, B, d) and output
y = Σ_h W_o,h o_h + b_o, added to the residual, the relevance of the head is
R_h = Σ_{t,k} o_h[t, k] ∂f/∂o_h[t, k] (o_h (T, d_h): its output before W_o,
gate applied), and

    y·∂f/∂y = Σ_h R_h + b_o·∂f/∂b_o
    x·∂f/∂x = Σ_h (R_h − b_v,h·∂f/∂b_v,h)    (x through the attention: values only)

:func:`conservative_rules` installs the rules on a model for a block: forward
hooks on every LayerNorm and on the layers around each activation, on fairseq's
``MultiheadAttention`` (the decoder's) a hook on the attention dropout that
detaches the probabilities, with fairseq's general path forced
(``_set_skip_embed_dim_check``; the fused kernel never shows them), and for
the encoder's :class:`~fairseq_local.attention.module.LocalMultiheadAttention`
an attention context with ``detach_weights`` on the dense path.  Every
forward value is the model's own; only the backward pass changes.
"""

import contextlib
from typing import Dict, Iterator, List, Optional, Tuple

import torch
from torch import Tensor, nn

from ..attention.context import AttentionCapture, attention_context
from .model import AnalysisError

RULE = ("conservative LRP (Ali et al. 2022): AH-rule (attention weights constant), LN-rule "
        "(LayerNorm 1/sigma constant), identity rule for activations (Achtibat et al. 2024); "
        "gradient x input = LRP-0")


def _ln_rule(module: nn.LayerNorm, args: Tuple[Tensor, ...], output: Tensor) -> Tensor:
    """The LN-rule: the output's value, the gradient of γ ⊙ (z − mean z)/σ + β
    with σ constant (in float32 at least)."""
    z = args[0]
    dtype = torch.promote_types(z.dtype, torch.float32)
    zf = z.to(dtype)
    centred = zf - zf.mean(-1, keepdim=True)
    sigma = (centred.pow(2).mean(-1, keepdim=True) + module.eps).sqrt().detach()
    lin = centred / sigma
    if module.weight is not None:
        lin = lin * module.weight.to(dtype)
    if module.bias is not None:
        lin = lin + module.bias.to(dtype)
    lin = lin.to(output.dtype)
    return output.detach() + (lin - lin.detach())


def _identity_rule(producer: nn.Module, consumer: nn.Module) -> List[torch.utils.hooks.RemovableHandle]:
    """The identity rule for y = φ(u) between ``producer`` (whose output is
    u) and ``consumer`` (whose first input is y, dropout aside): the consumer
    sees y's value with the gradient of u · (φ(u)/u), a constant factor."""
    seen: Dict[str, Tensor] = {}

    def keep(module: nn.Module, args, output: Tensor) -> None:
        seen["u"] = output

    def swap(module: nn.Module, args):
        u, y = seen.pop("u", None), args[0]
        if u is None or u.shape != y.shape:
            raise AnalysisError(f"no relevance rule for the activation before {type(module).__name__}: "
                                f"its input is not an elementwise function of {type(producer).__name__}'s output")
        ratio = torch.where(u != 0, y / torch.where(u != 0, u, torch.ones_like(u)), torch.zeros_like(u)).detach()
        lin = u * ratio
        return (y.detach() + (lin - lin.detach()),) + tuple(args[1:])

    return [producer.register_forward_hook(keep), consumer.register_forward_pre_hook(swap)]


def _activation_pairs(model: nn.Module) -> List[Tuple[nn.Module, nn.Module]]:
    """(producer, consumer) around every elementwise activation of ``model``:
    fairseq's encoder and decoder layers (fc1 → φ → fc2), RoBERTa's LM head
    (dense → φ → layer_norm) and classification heads (dense → φ → out_proj).
    A module with an ``activation_fn`` of another shape is refused."""
    from fairseq.models.roberta.model import RobertaClassificationHead, RobertaLMHead

    pairs = []
    for name, m in model.named_modules():
        if not hasattr(m, "activation_fn"):
            continue
        if isinstance(m, RobertaLMHead):
            pairs.append((m.dense, m.layer_norm))
        elif isinstance(m, RobertaClassificationHead):
            pairs.append((m.dense, m.out_proj))
        elif isinstance(getattr(m, "fc1", None), nn.Module) and isinstance(getattr(m, "fc2", None), nn.Module):
            pairs.append((m.fc1, m.fc2))
        else:
            raise AnalysisError(f"no relevance rule for the activation of '{name}' ({type(m).__name__})")
    return pairs


@contextlib.contextmanager
def conservative_rules(model: nn.Module, capture: Optional[AttentionCapture] = None) -> Iterator[None]:
    """While open, forward passes of ``model`` (eval mode) follow the AH-,
    LN- and identity rules (module docstring) in their backward pass; the
    encoder's attention layers take the dense path and hand ``capture`` back.
    Everything is restored when the block closes."""
    from fairseq.modules import MultiheadAttention

    if model.training:
        raise AnalysisError("relevance propagation needs the model in eval mode (no dropout)")
    handles: List[torch.utils.hooks.RemovableHandle] = []
    skips: List[Tuple[nn.Module, bool]] = []
    try:
        for m in model.modules():
            if isinstance(m, nn.LayerNorm):
                if len(m.normalized_shape) != 1:
                    raise AnalysisError(f"no LN-rule for a LayerNorm over {len(m.normalized_shape)} dimensions")
                handles.append(m.register_forward_hook(_ln_rule))
            elif "LayerNorm" in type(m).__name__:  # e.g. apex's fused one: no LN-rule, no conservation
                raise AnalysisError(f"no LN-rule for {type(m).__name__}: relevance propagation needs "
                                    f"torch.nn.LayerNorm")
            elif isinstance(m, MultiheadAttention):
                # the general path (fairseq's own switch for pruned heads): it forms the probabilities
                skips.append((m, m.skip_embed_dim_check))
                m.skip_embed_dim_check = True
                handles.append(m.dropout_module.register_forward_hook(lambda mod, args, out: out.detach()))
        for producer, consumer in _activation_pairs(model):
            handles.extend(_identity_rule(producer, consumer))
        with attention_context(capture=capture, impl="dense", detach_weights=True):
            yield
    finally:
        for h in handles:
            h.remove()
        for m, skip in skips:
            m.skip_embed_dim_check = skip


def prediction_rounds(mask: Tensor) -> Tuple[Tensor, int]:
    """The rank of each counted prediction in its row, and the number of
    rounds: in round r every row explains its r-th prediction, so one backward
    pass serves a prediction of every sentence of the batch (sentences do not
    interact in eval mode).  ``mask`` (B, N) bool -> rank (B, N) long (-1 where
    not counted), rounds."""
    rank = mask.long().cumsum(-1) - 1
    rank = torch.where(mask, rank, torch.full_like(rank, -1))
    rounds = int(mask.sum(-1).max()) if mask.numel() else 0
    return rank, rounds


def head_relevance(head_outputs: List[Tensor], scores: Tensor, mask: Tensor) -> Tensor:
    """R_h for each counted prediction: Σ over positions and features of
    o_h ⊙ ∂s/∂o_h, with s the prediction's score (its top-1 logit).

    Args:
        head_outputs: per layer (B, H, T, d_h), captured with their graph
            under :func:`conservative_rules`.
        scores: (B, N) the scores to explain, from the same forward pass.
        mask: (B, N) bool, the predictions that count.
    Returns:
        (L, B, N, H) float64 (0 where not counted).
    """
    L, (B, H) = len(head_outputs), head_outputs[0].shape[:2]
    N = scores.shape[1]
    out = torch.zeros(L, B, N, H, dtype=torch.float64, device=scores.device)
    rank, rounds = prediction_rounds(mask)
    for r in range(rounds):
        chosen = rank == r  # (B, N): at most one per row
        grads = torch.autograd.grad(scores[chosen].sum(), head_outputs, retain_graph=r + 1 < rounds,
                                    allow_unused=True)
        rel = torch.stack([(o.double() * g.double()).sum((2, 3)) if g is not None else o.new_zeros(B, H).double()
                           for o, g in zip(head_outputs, grads)])  # (L, B, H)
        b, n = chosen.nonzero(as_tuple=True)
        out[:, b, n] = rel[:, b]
    return out


def gate_gradients(head_outputs: List[Tensor], losses: Tensor) -> Tensor:
    """∂L(x)/∂ξ_h at ξ = 1 for a head mask ξ multiplying each head's output
    (Michel et al. 2019, §4.1): <o_h, ∂L/∂o_h>, per sentence (``losses``
    (B,), one per sentence; the sentences of a batch do not interact).  For a
    gated head o_h = z_h·o'_h, so this is z_h ∂L/∂z_h.  Returns (L, B, H) float64."""
    grads = torch.autograd.grad(losses.sum(), head_outputs, allow_unused=True)
    return torch.stack([(o.double() * g.double()).sum((2, 3)) if g is not None
                        else o.new_zeros(o.shape[:2]).double() for o, g in zip(head_outputs, grads)])
