"""The dense path: every head's (B, H, T, S) attention weights, for every kind
of head; the reference that the window and FlexAttention paths are held to.

For a layer with G Q/K groups and H heads (Pande et al., Eq. 9 and §4.2):

    S_g  = (X Wq_g)(X Wk_g)^T / sqrt(d_h)                 (B, G, T, S)
    post:  A_h = mask_h ⊙ softmax(S_g(h))                  softmax over all real keys
    pre:   A_h = softmax(S_g(h) restricted to mask_h)      renormalised in the window

In ``post`` mode the probabilities of a group are computed once and masked per
head.  A query with no allowed key gets A_h = 0 in both modes; nothing is
ever NaN.  Learned heads (the plan's ``learned_heads``) add their mask M:

* before the softmax (``pre_learned``: DAM in ``pre`` mode, SparseBERT's
  code; ``aaa`` always, Adaptive Axis Attention Eq. 5) as C·(1 − M), C =
  ``mask_neg``, keys where M = 0 excluded as a fixed mask's are;
* after it (``post_learned``: DAM in ``post`` mode, SparseBERT Eq. 4) as a factor.

The softmax runs in float32 whatever the scores' dtype, and the result is
cast back (fairseq's ``utils.softmax``).

Under a context with ``detach_weights`` (:mod:`.context`) the weights enter
``A v`` as constants: the AH-rule of conservative LRP (Ali et al. 2022).
"""

from typing import Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor

from .context import cached
from .masks import HeadMask, real_positions, stack_masks
from .masks.base import constant
from .plan import HeadPlan, PathInputs


@cached(maxsize=16)
def _relative_masks(masks: Tuple[HeadMask, ...], tgt_len: int, device: torch.device) -> Tensor:
    """(H, T, T) bool masks of offset-only kinds, cached per length."""
    pos = torch.arange(tgt_len, device=device)
    return stack_masks(masks, pos, pos)


def fixed_mask(plan: HeadPlan, tgt_len: int, padding_mask: Optional[Tensor], device: torch.device) -> Optional[Tensor]:
    """The plan's fixed masks, dense: None if every head is global, else bool
    (H, T, T) for offset-only kinds or (B, H, T, T) for kinds that need real
    positions (``padding_mask`` (B, T), True at padding, or None)."""
    if all(m.is_global for m in plan.fixed_masks):
        return None
    if all(m.relative for m in plan.fixed_masks):
        return _relative_masks(plan.fixed_masks, tgt_len, device)
    pos = real_positions(padding_mask, tgt_len, device)
    return stack_masks(plan.fixed_masks, pos, pos)


def pre_softmax_bias(m: Tensor, c: float) -> Tensor:
    """C·(1 − M) in the forward pass; in the backward, ∂/∂M = 1 instead of −C.

    With C = −1e4 the exact gradient is 1e4 times the task's: it pins fp16's
    loss scale and ties AAA's α to C.  Dropping the constant factor leaves
    the direction of every update; Adam's steps are invariant to it, and the
    DAM L1 term is scaled alike (:func:`~fairseq_local.attention.penalties.sparsity_terms`)
    so that λ keeps SparseBERT's meaning."""
    hard = m.detach()
    return c * (1.0 - hard) + (m - hard)


def per_head(t: Tensor, plan: HeadPlan) -> Tensor:
    """(B, G, T, S) -> (B, H, T, S) by each head's group (a no-op once per head)."""
    if plan.untied or t.shape[1] == plan.num_heads:
        return t
    return t.index_select(1, constant(plan.head_to_group, t.device))


def attention_parts(q: Tensor, k: Tensor, plan: HeadPlan, inputs: PathInputs,
                    fixed: Optional[Tensor]) -> Tuple[Tensor, Optional[Tensor]]:
    """The attention weights as P ⊙ W.

    Args:
        q: (B, G, T, d_h); k: (B, G, S, d_h).
        inputs: the scale, padding mask (B, S), ``attn_mask`` (T, S) and the
            learned M (B, len(plan.learned_heads), T, S) in [0, 1], or None.
        fixed: :func:`fixed_mask`: None (all global), bool (H, T, S) or (B, H, T, S).
    Returns:
        P (B, H, T, S): the softmax each head takes, over real keys
        (``post``) or over allowed keys (``pre``); W: None (all ones), or a
        per-entry factor (B, H, T, S) or (H, T, S) that does not depend on
        the scores (the fixed 0/1 mask, a post-softmax learned M).  The
        Jacobians of :mod:`fairseq_local.analysis.jacobian` use the split.
    """
    H = plan.num_heads
    scores = torch.matmul(q * inputs.scale, k.transpose(-1, -2))  # (B, G, T, S)
    if inputs.attn_mask is not None:
        scores = scores + inputs.attn_mask
    # The softmax runs in float32: a float64 minimum would become -inf there (NaN rows).
    neg = max(torch.finfo(scores.dtype).min, torch.finfo(torch.float32).min)
    allowed, weight, pad = fixed, None, inputs.padding_mask
    if inputs.learned is not None:
        scores = per_head(scores, plan)
        B, _, T, S = scores.shape
        learned = inputs.learned.to(scores.dtype)  # float32 M, half scores under CUDA autocast
        if plan.learned_heads == tuple(range(H)):
            m = learned
        else:  # 1 for the other heads
            m = torch.ones(B, H, T, S, dtype=scores.dtype, device=scores.device)
            m = m.index_copy(1, constant(plan.learned_heads, m.device), learned)
        pre = constant(tuple(h in plan.pre_learned for h in range(H)), m.device, torch.bool).view(1, H, 1, 1)
        # Before the softmax: C·(1 − M), and M = 0 excluded (SparseBERT's code; AAA Eq. 5).
        bias = pre_softmax_bias(m, inputs.mask_neg)
        if len(plan.pre_learned) == H:
            scores, keep = scores + bias, m > 0
        else:
            scores = scores + torch.where(pre, bias, torch.zeros_like(m))
            keep = (m > 0) | ~pre
        allowed = keep if allowed is None else allowed & keep
        if plan.post_learned:
            weight = torch.where(pre, torch.ones_like(m), m)  # after the softmax (Eq. 4)
    if pad is not None:
        scores = scores.masked_fill(pad[:, None, None, :], neg)
    if plan.mode == "post" or allowed is None:
        probs = F.softmax(scores, dim=-1, dtype=torch.float32).type_as(scores)
        probs = per_head(probs, plan)
    else:
        scores = per_head(scores, plan)
        if pad is not None:
            allowed = allowed & ~pad[:, None, None, :]  # (B, H, T, S)
        # A row with no allowed key is uniform over `neg` here; the weight zeroes it.
        probs = F.softmax(scores.masked_fill(~allowed, neg), dim=-1, dtype=torch.float32).type_as(scores)
    if allowed is not None:
        allowed = allowed.to(probs.dtype)
        weight = allowed if weight is None else allowed * weight
    return probs, weight


def attention_probs(q: Tensor, k: Tensor, plan: HeadPlan, inputs: PathInputs, fixed: Optional[Tensor]) -> Tensor:
    """Masked attention weights per head, (B, H, T, S) (arguments as
    :func:`attention_parts`): ``post`` = mask ⊙ softmax over real keys
    (Eq. 9); ``pre`` = softmax over allowed keys; rows without an allowed key are 0."""
    probs, weight = attention_parts(q, k, plan, inputs, fixed)
    return probs if weight is None else probs * weight


def dense_path(q: Tensor, k: Tensor, v: Tensor, plan: HeadPlan, inputs: PathInputs) -> Tuple[Tensor, Optional[Tensor]]:
    """Every head through its (B, H, T, S) weights.

    Args:
        q, k: (B, G, T, d_h) / (B, G, S, d_h); v: (B, H, S, d_h).
    Returns:
        out (B, H, T, d_h) = dropout(A) v, and A (B, H, T, S) (before dropout,
        without gates) if ``inputs.need_weights``, else None.
    """
    probs = attention_probs(q, k, plan, inputs, fixed_mask(plan, q.shape[2], inputs.padding_mask, q.device))
    if inputs.detach_weights:  # the AH-rule (Ali et al. 2022): A is a constant of A v
        probs = probs.detach()
    dropped = probs if inputs.dropout is None else inputs.dropout(probs)
    return torch.matmul(dropped, v), (probs if inputs.need_weights else None)
