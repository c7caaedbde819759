"""Mixed precision by autocast (``--amp``): a training step under
``torch.autocast("cpu", ...)`` for a layout mixing every learned kind with
fixed and tied heads, and the dtype mix of CUDA autocast handed to the
attention directly (issue 18, point 4: half q/k from the autocast
projections, an fp32 learned mask M; CPU autocast promotes ``index_copy``,
CUDA autocast does not, so the CPU route alone never sees it)."""

import pytest
import torch

from helpers import make_attention, padding_mask
from helpers.precision import PenaltySpy, nmt_setup, one_thread  # noqa: F401 (a fixture)

pytestmark = pytest.mark.usefixtures("one_thread")

LAYOUT = "[dam-u,dam-s,aaa,global:gate,band-1,prev-1@t,next-1@t,global]*2"
# probabilities in [0, 1]: q/k rounded to the dtype move them by about eps · |score|
ATOL = {torch.float16: 5e-3, torch.bfloat16: 4e-2}


@pytest.mark.parametrize("mode", ["post", "pre"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_training_step_under_cpu_autocast(dtype, mode):
    model, crit, sample = nmt_setup("transformer_local", dict(attn_layout=LAYOUT, encoder_layers=2, mask_mode=mode))
    spy = PenaltySpy(crit)
    model.train()
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    torch.manual_seed(0)
    with torch.autocast("cpu", dtype=dtype):
        loss, sample_size, log = crit(model, sample)
    assert torch.isfinite(loss) and loss.dtype == torch.float32, loss
    terms = spy.tensors()
    assert {"dam", "aaa_rho", "gate"} <= set(terms)
    for name, term in terms.items():
        assert term.dtype == torch.float32 and torch.isfinite(term).all(), (name, term)
        assert term.requires_grad, name
    for name in ("loss", "dam_loss", "aaa_loss", "gate_loss", "rho_sum"):
        assert torch.isfinite(torch.tensor(float(log[name]))), (name, log[name])
    (loss / sample_size).backward()
    learned = [n for n, _ in model.named_parameters() if any(k in n for k in (".learned.", ".gates."))]
    assert learned
    for n, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), n
    for n in learned:
        assert dict(model.named_parameters())[n].grad.abs().sum() > 0, n
    opt.step()
    changed = [n for n, p in model.named_parameters() if not torch.equal(p, before[n])]
    assert set(learned) <= set(changed)


@pytest.mark.parametrize("mode", ["post", "pre"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
def test_half_scores_with_an_fp32_learned_mask(dtype, mode):
    """What CUDA autocast hands the dense path: q, k in half (F.linear is cast),
    M in float32 (the DAM masks), for a layer whose DAM heads sit next to
    AAA, gated, fixed and Q/K-tied heads."""
    tokens = ["dam-u", "band-1", "dam-s", "aaa", "global:gate", "prev-1", "next-1", "global"]
    attn = make_attention(tokens, groups=[0, 1, 2, 3, 4, 5, 5, 6], mode=mode, embed_dim=32, std=0.3).train()
    for d in attn.learned["dam"]:  # masks with both values
        torch.nn.init.normal_(d.alpha, std=2.0)
    lengths = [7, 10, 4]
    T, B, H = max(lengths), len(lengths), attn.num_heads
    torch.manual_seed(1)
    x, pad = torch.randn(T, B, 32), padding_mask(lengths, left_pad=True)
    with torch.no_grad():
        q, k, _ = attn.project(x)
        torch.manual_seed(2)
        m, _ = attn.learned_mask(x, pad)
        fixed = attn.fixed_mask(T, pad, x.device)
        assert m.dtype == torch.float32 and m.shape == (B, 3, T, T)
        assert 0 < float(m[:, :2].mean()) < 1  # DAM heads with kept and dropped pairs
        ref_p, ref_w = attn.attention_parts(q, k, fixed, m, pad)
        ref = attn.attention_probs(q, k, fixed, m, pad)
        qh, kh = q.to(dtype), k.to(dtype)
        p, w = attn.attention_parts(qh, kh, fixed, m, pad)
        probs = attn.attention_probs(qh, kh, fixed, m, pad)
    assert p.shape == ref_p.shape == (B, H, T, T) and torch.isfinite(p).all() and torch.isfinite(probs).all()
    torch.testing.assert_close(p.float(), ref_p, atol=ATOL[dtype], rtol=0)
    if ref_w is not None:  # the mask factor does not depend on the scores: equal
        assert w is not None
        torch.testing.assert_close(w.float().expand_as(ref_w), ref_w, atol=0, rtol=0)
    torch.testing.assert_close(probs.float(), ref, atol=ATOL[dtype], rtol=0)
    # the rows of the softmax still sum to 1 (or 0 for empty ones) in the half result
    rows = probs.float().sum(-1)
    torch.testing.assert_close(rows, ref.sum(-1), atol=ATOL[dtype] * 4, rtol=0)
