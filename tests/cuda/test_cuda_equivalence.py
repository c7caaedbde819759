"""On CUDA, every ``--attn-impl`` in fp32, fp16 and bf16 against the fp32
dense reference: output, input gradient and every parameter's gradient, in
both mask modes, for tied layers, mixed window/global layers, layers with
sparse kinds (FlexAttention under flex and auto) and layers with learned and
gated heads; and the same under CUDA autocast (``--amp``)."""

import pytest
import torch

from helpers.cuda import (CUDA, DTYPES, IMPLS, LAYERS, TOL, batch, compare, forward_backward, layer, on)
from fairseq_local.attention.flex import flex_available

pytestmark = pytest.mark.cuda


def flex_or_skip(impl: str) -> None:
    if impl == "flex":
        reason = flex_available(CUDA, True)
        if reason is not None:
            pytest.skip(reason)


def dense_reference(name: str, mode: str):
    """The layer's initial weights (a dense module), a padded batch, an upstream
    gradient and the fp32 dense path's output and gradients on them."""
    base = layer(name, mode, "dense")
    x, pad = batch(base.embed_dim)
    ref_module = on(layer(name, mode, "dense"), torch.float32)
    ref_module.load_state_dict(base.state_dict())
    torch.manual_seed(3)
    grad_out = torch.randn(x.shape, device=CUDA)
    return base, x, pad, grad_out, forward_backward(ref_module, x, pad, grad_out, torch.float32)


@pytest.mark.parametrize("name", list(LAYERS))
@pytest.mark.parametrize("mode", ["pre", "post"])
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("impl", IMPLS)
def test_every_impl_and_dtype_matches_the_fp32_dense_reference(impl, dtype, mode, name):
    flex_or_skip(impl)
    base, x, pad, grad_out, ref = dense_reference(name, mode)
    module = on(layer(name, mode, impl), DTYPES[dtype])
    module.load_state_dict(base.state_dict())
    got = forward_backward(module, x, pad, grad_out, DTYPES[dtype])
    assert got[0].dtype == DTYPES[dtype]
    compare(got, ref, TOL[dtype], f"{name} {mode} {impl} {dtype}")


@pytest.mark.parametrize("name", list(LAYERS))
@pytest.mark.parametrize("mode", ["pre", "post"])
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("impl", IMPLS)
def test_autocast_matches_the_fp32_dense_reference(impl, dtype, mode, name):
    """--amp: fp32 parameters, CUDA autocast (half matmuls, fp32 learned masks)."""
    flex_or_skip(impl)
    base, x, pad, grad_out, ref = dense_reference(name, mode)
    module = on(layer(name, mode, impl), torch.float32)
    module.load_state_dict(base.state_dict())
    with torch.autocast("cuda", dtype=DTYPES[dtype]):
        got = forward_backward(module, x, pad, grad_out, torch.float32)
    compare(got, ref, TOL[dtype], f"{name} {mode} {impl} autocast {dtype}")


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("mode", ["pre", "post"])
def test_right_padding_and_no_padding(mode, dtype):
    """The window path with right padding and without padding (the tests above pad on the left)."""
    base = layer("tied", mode, "dense")
    for lengths, left in (([130, 77, 1], False), ([130, 130], False)):
        x, pad = batch(base.embed_dim, lengths, left)
        pad = pad if pad.any() else None
        ref_module = on(layer("tied", mode, "dense"), torch.float32)
        ref_module.load_state_dict(base.state_dict())
        grad_out = torch.randn(x.shape, device=CUDA)
        ref = forward_backward(ref_module, x, pad, grad_out, torch.float32)
        module = on(layer("tied", mode, "window"), DTYPES[dtype])
        module.load_state_dict(base.state_dict())
        compare(forward_backward(module, x, pad, grad_out, DTYPES[dtype]), ref, TOL[dtype],
                f"tied {mode} window {dtype} lengths {lengths}")
