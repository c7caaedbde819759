"""The Gumbel noise of DAM and AAA and the hard-concrete noise of the head
gates, drawn 1e7 times for half-precision inputs: never non-finite (issue 18,
point 1: in fp16 the clamp bounds round to 0 and 1 and ``torch.rand`` in half
returns exactly 0 about 2^-12 of the time, so about 1 draw of G1 − G2 in 2,000
was ±inf, pinning its indicator whatever the logit, and 1 in 2^24 NaN).

Whatever dtype the noise is drawn in, a draw from U(0, 1) of any float format
keeps |G1 − G2| below about 44 (float64's smallest u); a logit of ±60 must
therefore decide every sample."""

import inspect

import pytest
import torch

from fairseq_local.attention.gates import HeadGates
from fairseq_local.attention.learned import AxisSelector, gumbel_noise_difference, gumbel_sigmoid

N = 10 ** 7
DTYPES = [torch.float16, torch.bfloat16]
IDS = ["fp16", "bf16"]
FAR = 60.0  # beyond any finite G1 − G2


def sign_pattern(n: int, dtype: torch.dtype) -> torch.Tensor:
    """n logits alternating −FAR, +FAR."""
    x = torch.full((n,), FAR, dtype=dtype)
    x[::2] = -FAR
    return x


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_gumbel_noise_difference_in_half_is_finite(dtype):
    # drawn for half logits: in their dtype where the function takes one (today's
    # signature), in whatever it draws otherwise
    dtype_arg = {"dtype": dtype} if "dtype" in inspect.signature(gumbel_noise_difference).parameters else {}
    torch.manual_seed(0)
    g = gumbel_noise_difference((N,), **dtype_arg)
    assert g.shape == (N,)
    bad = int((~torch.isfinite(g)).sum())
    assert bad == 0, f"{bad} of {N} draws of G1 - G2 are not finite"
    assert float(g.float().abs().max()) < FAR
    # still logistic noise: mean 0, variance π²/3
    assert abs(float(g.float().mean())) < 0.01 and abs(float(g.float().var()) - 3.2899) < 0.05


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_gumbel_sigmoid_in_half_never_pins_or_nans(dtype):
    torch.manual_seed(1)
    logits = sign_pattern(N, dtype).requires_grad_(True)
    hard = gumbel_sigmoid(logits, 1.0, hard=True)
    assert not torch.isnan(hard).any()
    flipped = int((hard != (logits > 0).to(hard.dtype)).sum())
    assert flipped == 0, f"{flipped} of {N} samples at a logit of ±{FAR} went the other way (infinite noise)"
    weights = torch.linspace(-1, 1, N, dtype=hard.dtype)
    (hard * weights).sum().backward()
    assert torch.isfinite(logits.grad).all()
    soft = gumbel_sigmoid(torch.zeros(N, dtype=dtype), 0.5)
    assert torch.isfinite(soft).all() and 0.45 < float(soft.float().mean()) < 0.55


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_aaa_indicators_of_half_input_are_decided_by_far_logits(dtype):
    selector = AxisSelector(4).to(dtype).train()
    with torch.no_grad():
        selector.fc.weight.zero_()
        selector.fc.bias.copy_(torch.tensor([-FAR, FAR]))  # rows never, columns always
    torch.manual_seed(2)
    x = torch.randn(N // 2000, 1000, 4, dtype=dtype)  # (T, B, d): 2 x 5e6 indicators
    ind = selector.indicators(x, 1.0)
    assert ind.shape == (2, 1000, N // 2000)
    assert not torch.isnan(ind).any()
    assert int(ind[0].sum()) == 0, f"{int(ind[0].sum())} row indicators on at a logit of -{FAR}"
    assert int((ind[1] == 0).sum()) == 0, f"{int((ind[1] == 0).sum())} column indicators off at a logit of {FAR}"
    (ind.float() * torch.randn(ind.shape)).sum().backward()
    for name, p in selector.named_parameters():
        assert torch.isfinite(p.grad).all(), name


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_hard_concrete_gate_noise_in_half_is_finite(dtype):
    gates = HeadGates(N, init=0.0).to(dtype).train()
    torch.manual_seed(3)
    z = gates()
    assert torch.isfinite(z).all() and float(z.min()) >= 0 and float(z.max()) <= 1
    # log α = 0, β = 2/3: z = 0 iff s <= -γ/(ζ - γ) = 1/12, so P(z = 0) = σ(β·logit(1/12)) ≈ 0.168 = P(z = 1)
    closed, opened = float((z == 0).float().mean()), float((z == 1).float().mean())
    assert abs(closed - 0.168) < 0.01 and abs(opened - 0.168) < 0.01, (closed, opened)
    (z.float() * torch.linspace(-1, 1, N)).sum().backward()
    assert torch.isfinite(gates.log_alpha.grad).all()
    with torch.no_grad():
        gates.log_alpha.copy_(sign_pattern(N, dtype))
    z = gates()
    assert torch.isfinite(z).all()
    assert torch.equal(z.float(), (gates.log_alpha > 0).float()), "a gate at log α = ±60 that is not shut/open"
