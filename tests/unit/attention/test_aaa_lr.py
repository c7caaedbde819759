"""``--aaa-lr-scale``: the AAA selector (Wang et al. §4.2, Eq. 11) computes
s·(W'x + b'), so Adam moves its effective weights s times as far per update,
while its values, its initialisation and its checkpoints do not depend on s."""

import pytest
import torch

from fairseq_local.attention.learned import AxisSelector, scale_grad

D = 12


def selector(scale: float, seed: int = 0) -> AxisSelector:
    torch.manual_seed(seed)
    return AxisSelector(D, lr_scale=scale)


def test_values_init_and_checkpoints_do_not_depend_on_the_scale():
    plain, scaled = selector(1.0), selector(40.0)
    x = torch.randn(5, 3, D)
    torch.testing.assert_close(scaled.logits(x), plain.logits(x), rtol=1e-6, atol=1e-6)
    assert float(scaled.fc.weight.abs().max()) == pytest.approx(float(plain.fc.weight.abs().max()) / 40, rel=1e-6)
    saved = scaled.state_dict()  # the effective W and b, as a selector without a scale stores them
    assert list(saved) == ["fc.weight", "fc.bias"]
    for name, value in plain.state_dict().items():
        torch.testing.assert_close(saved[name], value, rtol=1e-6, atol=1e-7)
    for scale in (1.0, 0.5, 300.0):  # a checkpoint loads into any scale with the same logits
        other = selector(scale, seed=9)
        other.load_state_dict(saved)
        torch.testing.assert_close(other.logits(x), plain.logits(x), rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(other.effective()["weight"], plain.fc.weight.detach(), rtol=1e-5, atol=1e-7)
    assert torch.equal(saved["fc.weight"], scaled.state_dict()["fc.weight"])  # loading left the caller's dict
    scaled.train()
    torch.manual_seed(3)
    a = scaled.indicators(x, 1.0)
    torch.manual_seed(3)
    assert torch.equal(a, plain.train().indicators(x, 1.0))  # the same 0/1 samples


def adam_step(sel: AxisSelector, x: torch.Tensor, grad_factor: float = 1.0) -> dict:
    """One Adam step on a pull of every logit down (the hinge's direction,
    Eq. 10); returns the change of the effective W and b."""
    before = sel.effective()
    opt = torch.optim.Adam(sel.parameters(), lr=1e-3, eps=1e-12)
    loss = scale_grad(sel.logits(x), grad_factor).sum()
    loss.backward()
    opt.step()
    return {k: v - before[k] for k, v in sel.effective().items()}


def test_adam_moves_the_effective_weights_s_times_as_far():
    x = torch.randn(6, 2, D)
    base = adam_step(selector(1.0), x)
    fast = adam_step(selector(25.0), x)
    for name in ("weight", "bias"):
        assert base[name].abs().max() == pytest.approx(1e-3, rel=1e-3)  # Adam's first step: lr per entry
        torch.testing.assert_close(fast[name], 25.0 * base[name], rtol=1e-3, atol=1e-7)
    # A gradient scaling is no lever under Adam: it divides the factor out
    torch.testing.assert_close(adam_step(selector(1.0), x, grad_factor=25.0)["weight"], base["weight"],
                               rtol=1e-4, atol=1e-9)


def test_sgd_moves_them_s_squared_times_as_far():
    x = torch.randn(6, 2, D)
    moves = []
    for scale in (1.0, 5.0):
        sel = selector(scale)
        before = sel.effective()["weight"]
        sel.logits(x).sum().backward()
        torch.optim.SGD(sel.parameters(), lr=1e-2).step()
        moves.append(sel.effective()["weight"] - before)
    torch.testing.assert_close(moves[1], 25.0 * moves[0], rtol=1e-4, atol=1e-7)


@pytest.mark.parametrize("scale", [0.0, -1.0])
def test_bad_scale(scale):
    with pytest.raises(ValueError, match="--aaa-lr-scale"):
        AxisSelector(D, lr_scale=scale)
