"""The closed-form Jacobian norms of a self-attention block against autograd."""

import pytest
import torch

import fairseq_local  # noqa: F401  (registers kinds, archs and criteria)
from helpers import make_attention, padding_mask
from fairseq_local.analysis.jacobian import block_jacobian_norms, previous_layer_contribution

D = 16


def reference(attn, x, key_padding_mask=None):
    """beta (B, T, T) and head norms (B, H, T, T) from full autograd Jacobians."""
    T, B, d = x.shape
    H, dh = attn.num_heads, attn.head_dim
    seen = {}
    hook = attn.out_proj.register_forward_pre_hook(lambda _, inp: seen.__setitem__("o", inp[0]))
    try:
        jac_y, jac_o = torch.autograd.functional.jacobian(
            lambda t: (attn(t, key_padding_mask=key_padding_mask)[0], seen["o"]), x, vectorize=True)
    finally:
        hook.remove()
    beta = torch.zeros(B, T, T, dtype=x.dtype)
    head = torch.zeros(B, H, T, T, dtype=x.dtype)
    for b in range(B):
        jy = jac_y[:, b, :, :, b, :]  # (T, d, T, d)
        beta[b] = jy.pow(2).sum((1, 3)).sqrt()
        jo = jac_o[:, b, :, :, b, :].reshape(T, H, dh, T, d)
        head[b] = jo.pow(2).sum((2, 4)).sqrt().permute(1, 0, 2)
    return beta, head


def assert_close(got, want, rel=1e-5):
    scale = want.abs().max()
    assert scale > 0
    err = (got - want).abs().max()
    assert err <= rel * scale, f"max error {err:.3g} vs max value {scale:.3g}"


def module(tokens, mode, dtype=torch.float64, groups=None, seed=0):
    return make_attention(tokens, groups=groups, mode=mode, embed_dim=D, seed=seed).to(dtype)


CASES = {
    "global-band": (["global", "band-1", "band-2", "global"], None),
    "tied": (["global", "band-2", "global", "identity"], [0, 0, 1, 1]),
    "tied-one-group": (["band-1", "global", "band-2", "global"], [0, 0, 0, 0]),
    "mixed": (["global", "prev-1", "band-2", "identity"], [0, 1, 1, 2]),
    "gated": (["global:gate", "band-2:gate", "global", "prev-1:gate"], [0, 1, 0, 2]),
    "dam": (["dam-u", "dam-s", "global", "band-1"], None),
    "aaa": (["aaa", "aaa-1", "global", "band-1"], None),
}


@pytest.mark.parametrize("mode", ["post", "pre"])
@pytest.mark.parametrize("case", list(CASES))
def test_matches_autograd(case, mode):
    tokens, groups = CASES[case]
    dtype = torch.float64
    attn = module(tokens, mode, dtype, groups)
    if attn.gates is not None:
        z = attn.gates()
        assert ((z > 0.05) & (z < 0.95)).any()  # a gate that scales, neither open nor closed
    torch.manual_seed(1)
    x = torch.randn(7, 1, D, dtype=dtype)
    beta, head = block_jacobian_norms(attn, x)
    want_beta, want_head = reference(attn, x)
    assert beta.shape == (1, 7, 7) and head.shape == (1, 4, 7, 7)
    assert beta.dtype == dtype and head.dtype == dtype
    assert_close(beta, want_beta)
    assert_close(head, want_head)
    none, head_only = block_jacobian_norms(attn, x, need_beta=False)
    assert none is None and torch.equal(head_only, head)


def test_several_sentences_and_chunks(monkeypatch):
    from fairseq_local.analysis import jacobian

    attn = module(["global", "band-1", "band-2", "global"], "post", groups=[0, 1, 0, 2])
    torch.manual_seed(2)
    x = torch.randn(6, 3, D, dtype=torch.float64)
    beta, head = block_jacobian_norms(attn, x)
    want_beta, want_head = reference(attn, x)
    assert_close(beta, want_beta)
    assert_close(head, want_head)
    monkeypatch.setattr(jacobian, "_CHUNK_ELEMENTS", 1)  # one query row per chunk
    beta_1, head_1 = block_jacobian_norms(attn, x)
    assert torch.allclose(beta_1, beta, rtol=1e-12, atol=0) and torch.allclose(head_1, head, rtol=1e-12, atol=0)


@pytest.mark.parametrize("left_pad", [True, False])
@pytest.mark.parametrize("mode", ["post", "pre"])
def test_padding_gives_the_unpadded_norms(mode, left_pad):
    attn = module(["global", "band-2", "dam-s", "aaa"], mode, groups=[0, 0, 1, 2])
    torch.manual_seed(3)
    lengths, T = [5, 7], 7
    x = torch.randn(T, 2, D, dtype=torch.float64)
    pad = padding_mask(lengths, left_pad)
    beta, head = block_jacobian_norms(attn, x, pad)
    assert torch.isfinite(beta).all() and torch.isfinite(head).all()
    for b, n in enumerate(lengths):
        real = torch.arange(T - n, T) if left_pad else torch.arange(n)
        alone_beta, alone_head = block_jacobian_norms(attn, x[real, b:b + 1])
        assert torch.allclose(beta[b][real][:, real], alone_beta[0], rtol=1e-10, atol=1e-12)
        assert torch.allclose(head[b][:, real][:, :, real], alone_head[0], rtol=1e-10, atol=1e-12)
        outside = torch.ones(T, T, dtype=torch.bool)
        outside[real[:, None], real[None, :]] = False
        assert (beta[b][outside] == 0).all() and (head[b][:, outside] == 0).all()
    assert_close(alone_beta, reference(attn, x[:, 1:])[0])


def test_pre_band_1_is_exactly_zero_outside_the_window():
    attn = module(["band-1"] * 4, "pre", groups=[0, 1, 0, 1])
    torch.manual_seed(4)
    x = torch.randn(9, 2, D, dtype=torch.float64)
    beta, head = block_jacobian_norms(attn, x)
    i, j = torch.meshgrid(torch.arange(9), torch.arange(9), indexing="ij")
    far = (i - j).abs() > 1
    assert (beta[:, far] == 0).all() and (head[:, :, far] == 0).all()
    assert (beta[:, ~far] > 0).all() and (head[:, :, ~far] > 0).all()
    # In post mode the softmax normaliser reaches every key.
    post_beta, _ = block_jacobian_norms(module(["band-1"] * 4, "post", groups=[0, 1, 0, 1]), x)
    assert (post_beta[:, far] > 0).all()


def test_needs_eval_mode_and_a_block_input():
    attn = module(["global"] * 4, "post")
    x = torch.randn(5, 1, D, dtype=torch.float64)
    with pytest.raises(ValueError, match="eval"):
        block_jacobian_norms(attn.train(), x)
    with pytest.raises(ValueError, match=r"x must be \(T, B, 16\)"):
        block_jacobian_norms(attn.eval(), x[..., :8])


def test_previous_layer_contribution_normalises_rows():
    norms = torch.tensor([[[1.0, 3.0, 0.0], [0.0, 0.0, 0.0], [2.0, 2.0, 4.0]]], dtype=torch.float64)
    want = torch.tensor([[[0.25, 0.75, 0.0], [0.0, 0.0, 0.0], [0.25, 0.25, 0.5]]], dtype=torch.float64)
    assert torch.equal(previous_layer_contribution(norms), want)


def _layer_norm(seed=5, affine=True, dtype=torch.float64):
    torch.manual_seed(seed)
    norm = torch.nn.LayerNorm(D, eps=1e-5, elementwise_affine=affine).to(dtype)
    if affine:
        torch.nn.init.normal_(norm.weight, mean=1.0, std=0.5)
        torch.nn.init.normal_(norm.bias, std=0.5)
    return norm.eval()


@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("case", ["global-band", "tied", "gated", "dam"])
def test_a_pre_norm_layer_norm_is_part_of_the_derivative(case, affine):
    """With ``norm`` (a pre-norm layer's LayerNorm before the block), the head
    norms are those of x -> attn(LN(x)), against autograd; without it they
    are those of the block alone, which differ."""
    tokens, groups = CASES[case]
    attn, norm = module(tokens, "post", groups=groups), _layer_norm(affine=affine)
    torch.manual_seed(6)
    x = 3 * torch.randn(7, 2, D, dtype=torch.float64) + 1
    pad = torch.tensor([[False] * 7, [False] * 5 + [True] * 2])
    _, head = block_jacobian_norms(attn, x, pad, need_beta=False, norm=norm)
    for b, n in enumerate((7, 5)):
        xb = x[:n, b:b + 1]
        _, want = reference(_Composed(attn, norm), xb)
        assert_close(head[b, :, :n, :n], want[0])
        assert (head[b, :, n:] == 0).all() and (head[b, :, :, n:] == 0).all()
    _, without = block_jacobian_norms(attn, norm(x), pad, need_beta=False)
    assert not torch.allclose(without, head, rtol=1e-3)
    with pytest.raises(ValueError, match="need_beta=False"):
        block_jacobian_norms(attn, x, norm=norm)


class _Composed(torch.nn.Module):
    """x -> attn(LN(x)), with the attention's ``out_proj`` and head sizes for :func:`reference`."""

    def __init__(self, attn, norm):
        super().__init__()
        self.attn, self.norm = attn, norm
        self.out_proj, self.num_heads, self.head_dim = attn.out_proj, attn.num_heads, attn.head_dim

    def forward(self, x, key_padding_mask=None):
        return self.attn(self.norm(x), key_padding_mask=key_padding_mask)
