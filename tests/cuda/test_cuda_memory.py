"""The window paths at n = 8192 on CUDA hold no n×n tensor: the peak of one
layer's forward and backward (``torch.cuda.max_memory_allocated`` above what
was allocated before) stays below a quarter of B·H·n²·4 bytes, the size of
one fp32 score tensor of the dense path, in every dtype and both mask modes."""

import pytest
import torch

from helpers import make_attention, padding_mask
from helpers.cuda import CUDA, DTYPES
from fairseq_local_cli.benchmark.timing import cuda_peak_memory

pytestmark = pytest.mark.cuda

N, B = 8192, 1
HEADS = 8
EMBED = 64 * HEADS  # d_h 64
# (head masks, Q/K groups, mask mode)
CASES = {
    "band2-pre": (["band-2"] * HEADS, None, "pre"),
    "band2-post": (["band-2"] * HEADS, None, "post"),
    "tied-post": (["prev-1", "prev-2", "next-1", "next-2", "band-1", "band-2", "identity", "identity"],
                  [0] * HEADS, "post"),
    "mixed-post": (["global"] * (HEADS // 2) + ["band-2"] * (HEADS // 2), None, "post"),
}
LIMIT = B * HEADS * N * N * 4 // 4


@pytest.mark.parametrize("impl", ["window", "auto"])
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("case", list(CASES))
def test_window_paths_hold_no_square_tensor(case, dtype, impl):
    tokens, groups, mode = CASES[case]
    attn = make_attention(tokens, groups, mode, embed_dim=EMBED, std=EMBED ** -0.5, max_len=N, attn_impl=impl)
    attn = attn.to(device=CUDA, dtype=DTYPES[dtype]).train()
    torch.manual_seed(0)
    x = torch.randn(N, B, EMBED).to(device=CUDA, dtype=DTYPES[dtype]).requires_grad_()
    grad = torch.randn(N, B, EMBED).to(device=CUDA, dtype=DTYPES[dtype])
    pad = padding_mask([N - 5], left_pad=True, T=N).to(CUDA)  # five padding positions

    def step():
        y, _ = attn(x, key_padding_mask=pad)
        y.backward(grad)
        assert torch.isfinite(y).all()

    step()  # warm-up: caches, kernel selection
    x.grad = None
    attn.zero_grad(set_to_none=True)
    peak = cuda_peak_memory(step, CUDA)
    assert peak < LIMIT, f"peak {peak / 2 ** 20:,.0f} MiB >= {LIMIT / 2 ** 20:,.0f} MiB: an n x n tensor?"
