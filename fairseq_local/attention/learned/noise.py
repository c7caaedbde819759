"""Gumbel noise and the estimators of the learned masks: the Gumbel-sigmoid
sample (SparseBERT Eq. 3, §4.1; Adaptive Axis Attention Eq. 11), its
straight-through form, and a gradient scaling."""

from typing import Optional

import torch
from torch import Tensor


def gumbel_noise_difference(shape, device=None) -> Tensor:
    """G1 − G2 with G_k = −log(−log U_k), U_k ~ U(0, 1) (SparseBERT §4.1),
    float32 (finite: |G1 − G2| < 40)."""
    u = torch.rand((2,) + tuple(shape), device=device, dtype=torch.float32).clamp_(1e-10, 1 - 1e-7)
    g = -torch.log(-torch.log(u))
    return g[0] - g[1]


class _StraightThrough(torch.autograd.Function):
    """Forward: ``hard`` exactly; backward: the gradient goes to ``soft``."""

    @staticmethod
    def forward(ctx, soft: Tensor, hard: Tensor) -> Tensor:
        return hard.clone()

    @staticmethod
    def backward(ctx, grad: Tensor):
        return grad, None


class _ScaleGrad(torch.autograd.Function):
    """Forward: x; backward: the gradient times ``factor``."""

    @staticmethod
    def forward(ctx, x: Tensor, factor: float) -> Tensor:
        ctx.factor = factor
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad: Tensor):
        return grad * ctx.factor, None


def scale_grad(x: Tensor, factor: float) -> Tensor:
    """``x`` unchanged, its gradient scaled by ``factor``."""
    return _ScaleGrad.apply(x, factor)


def gumbel_sigmoid(
    logits: Tensor, tau: float, noise: Optional[Tensor] = None, hard: bool = False
) -> Tensor:
    """sigmoid((logits + noise)/τ), ``noise`` = G1 − G2 (drawn if None), in
    float32 whatever the logits' dtype.

    With ``hard``, the straight-through sample: exactly 1[logits + noise > 0]
    in the forward pass, the soft sample's gradient in the backward pass (the
    ``hard=True`` of SparseBERT's released code, τ-independent forward)."""
    if noise is None:
        noise = gumbel_noise_difference(logits.shape, logits.device)
    z = logits.float() + noise
    soft = torch.sigmoid(z / tau)
    return _StraightThrough.apply(soft, (z > 0).to(soft.dtype)) if hard else soft
