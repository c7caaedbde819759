"""The input contribution of Hidden Token Attribution (Pascual et al. Eq. 1):
the batched forward-mode computation equals a backward pass per head output
row, on NMT and RoBERTa encoders, with padding in the batch."""

import pytest
import torch

from fairseq_local.analysis.contribution import input_contribution, input_contribution_naive
from fairseq_local.analysis.dump import prepare

from test_dump import SENTENCES, nmt, roberta


@pytest.mark.parametrize("build", [nmt, roberta, lambda: nmt(mode="pre")], ids=["nmt-post", "roberta-pre", "nmt-pre"])
def test_batched_forward_mode_equals_a_backward_loop(build):
    m = build()
    items, _ = prepare(m, SENTENCES[:2])
    src, lengths = m.collate([it.input for it in items])
    assert lengths[0] < lengths[1]  # the shorter sentence is padded
    got = input_contribution(m, src, lengths, chunk=24)  # d = 16: every other chunk boundary splits a position
    L, H = m.num_layers, m.num_heads
    assert got.shape == (2, L, H, src.shape[1], src.shape[1])
    for b, it in enumerate(items):
        n = len(it.input.ids)
        want = input_contribution_naive(m, torch.tensor(it.input.ids))
        torch.testing.assert_close(got[b, :, :, :n, :n], want, atol=1e-5, rtol=1e-4)
        assert got[b, :, :, n:].abs().sum() == 0 and got[b, :, :, :, n:].abs().sum() == 0
        rows = got[b, :, :, :n, :n].sum(-1)
        assert torch.allclose(rows[rows > 0], torch.ones(()), atol=1e-5)
    # the default chunking gives the same numbers
    torch.testing.assert_close(input_contribution(m, src, lengths), got, atol=1e-6, rtol=1e-5)


def test_layer_zero_input_contribution_is_the_previous_layer_one():
    """In a post-norm encoder without an embedding LayerNorm the first block's
    input is the input embedding: both contributions coincide there."""
    from fairseq_local.analysis.jacobian import block_jacobian_norms, previous_layer_contribution

    m = nmt()
    items, _ = prepare(m, SENTENCES[:1])
    src, lengths = m.collate([it.input for it in items])
    cap = m.forward(src, lengths)
    prev = previous_layer_contribution(block_jacobian_norms(m.attention[0], cap.inputs[0], need_beta=False)[1])
    torch.testing.assert_close(input_contribution(m, src, lengths)[:, 0], prev, atol=1e-5, rtol=1e-4)
