"""FlexAttention on the way to a GPU (issue 18, points 6-9): one compilation per
layout, one BlockMask per distinct mask set per forward, no host reads in the
forward, the log-sum-exp for post-mode windows, half-precision inputs.

Compilation is counted on the CPU with dynamo's CompileCounter as the backend
(it runs the traced graph eagerly): the guards, and so the recompilations, are
those a CUDA run sees.  FlexAttention's fused backward is CUDA-only; the
``cpu_backward`` fixture lifts torch's CPU refusal so that its eager (math)
backward stands in for it."""

import pytest
import torch
import torch.nn.attention.flex_attention as torch_flex
from torch._dynamo.testing import CompileCounter

from helpers import make_attention, padding_mask
from fairseq_local.attention import flex
from fairseq_local.attention.context import attention_context, current
from fairseq_local.attention.flex import flex_attention_heads, flex_lse
from fairseq_local.attention.masks import MASK_FILE_FORMAT, FileMask, parse_mask

FILE_LEN = 300
LAYOUTS = [["band-2", "star", "random-2", "local-1+global-1", "file-0.0"],  # every rule, tied below
           ["local-3", "local-3"]]  # relative only: one mask for both heads
GROUPS = [[0, 0, 1, 1, 2], [0, 1]]


@pytest.fixture(scope="module")
def mask_file(tmp_path_factory):
    gen = torch.Generator().manual_seed(0)
    masks = {"0.0": {"matrix": torch.rand(FILE_LEN, FILE_LEN, generator=gen) < 0.1, "ends": True}}
    path = tmp_path_factory.mktemp("flex-compile") / "masks.pt"
    torch.save({"format": MASK_FILE_FORMAT, "masks": masks}, path)
    return str(path)


@pytest.fixture
def counter():
    """FlexAttention on the CPU compiled with a CompileCounter backend."""
    torch._dynamo.reset()
    cnt = CompileCounter()
    previous = flex.set_compile_backend("cpu", cnt)
    yield cnt
    flex.set_compile_backend("cpu", previous)
    flex._compiled.cache_clear()
    torch._dynamo.reset()


@pytest.fixture
def cpu_backward(monkeypatch):
    """A stand-in for CUDA: inputs that require grad are let through on the CPU."""
    monkeypatch.setattr(flex, "_NO_BACKWARD", ())
    monkeypatch.setattr(torch_flex, "_validate_device", lambda query, key, value: None)


def masks_of(tokens, path):
    out = [parse_mask(t) for t in tokens]
    return [FileMask(m.layer, m.head, path) if isinstance(m, FileMask) else m for m in out]


def batches(count: int, seed: int = 0):
    """``count`` batches of 1-3 sentences, of 1-150 positions (one or two
    128-blocks), padded left, right or not at all: (B, T, padding mask or None)."""
    gen = torch.Generator().manual_seed(seed)
    for s in range(count):
        B, T = 1 + s % 3, 1 + (37 * s) % 150
        lengths = [T] + [int(torch.randint(1, T + 1, (), generator=gen)) for _ in range(B - 1)]
        side = ("left", "right", "none")[(s // 3) % 3]
        pad = padding_mask(lengths, left_pad=side == "left")
        yield B, T, (pad if side != "none" and pad.any() else None)


def size_classes(batches) -> int:
    """Graphs a compiled layout needs for these batches: dynamo specialises
    sizes 0 and 1, so B = 1, T = 1 and one 128-block (T <= 128) each compile
    a graph of their own (flex.SHAPE_SETTINGS)."""
    return len({(B == 1, T == 1, T <= 128) for B, T, _ in batches})


def qkv(B, G, H, T, dh=8, dtype=torch.float32, grad=False):
    q, k, v = torch.randn(B, G, T, dh), torch.randn(B, G, T, dh), torch.randn(B, H, T, dh)
    return tuple(t.to(dtype).requires_grad_(grad) for t in (q, k, v))


def dense(attn, q, k, v, pad):
    """The dense path's output for these inputs."""
    return attn.attention_probs(q, k, attn.fixed_mask(q.shape[2], pad, q.device), None, pad) @ v


@pytest.mark.parametrize("mode", ["pre", "post"])
def test_one_compilation_per_layout(mode, counter, mask_file):
    """20 batches of new lengths, batch sizes and padding, then a no-grad
    validation pass: each layout compiles once per size class (5 here; post:
    and the all-real-keys LSE once per Q/K group count and size class, shared
    by the layers), and gives the dense path's result."""
    layers = [make_attention(tokens, groups=groups, mode=mode, embed_dim=8 * len(tokens), mask_file=mask_file)
              for tokens, groups in zip(LAYOUTS, GROUPS)]
    for B, T, pad in batches(20):
        for attn in layers:
            q, k, v = qkv(B, attn.num_groups, attn.num_heads, T)
            out = flex_attention_heads(q, k, v, attn.plan.fixed_masks, attn.head_to_group, pad, mode, attn.scaling)
            assert torch.allclose(out, dense(attn, q, k, v, pad), atol=1e-5), (B, T)
    with torch.no_grad():
        for attn in layers:
            q, k, v = qkv(B, attn.num_groups, attn.num_heads, T)
            flex_attention_heads(q, k, v, attn.plan.fixed_masks, attn.head_to_group, pad, mode, attn.scaling)
    lse_kernels = len({attn.num_groups for attn in layers}) if mode == "post" else 0
    assert counter.frame_count == size_classes(batches(20)) * (len(layers) + lse_kernels)


@pytest.mark.parametrize("mode", ["pre", "post"])
def test_training_and_validation_share_one_compilation(mode, counter, cpu_backward):
    """Training calls (inputs that require grad) and validation under no_grad
    use one compiled entry; gradients equal the dense path's, the LSE's
    gradient included (post)."""
    tokens = ["band-1", "band-2", "star", "global"]
    attn = make_attention(tokens, groups=[0, 0, 1, 2], mode=mode, embed_dim=16, std=0.25)
    masks, groups, H, G, dh = attn.plan.fixed_masks, attn.head_to_group, 4, 3, 4
    for B, T, pad in batches(6, seed=1):
        q, k, v = qkv(B, G, H, T, dh, grad=True)
        w = torch.randn(B, H, T, dh)
        out = flex_attention_heads(q, k, v, masks, groups, pad, mode, attn.scaling)
        grads = torch.autograd.grad((out * w).sum(), (q, k, v))
        ref = dense(attn, q, k, v, pad)
        refs = torch.autograd.grad((ref * w).sum(), (q, k, v))
        assert torch.allclose(out, ref, atol=1e-5)
        for g, r in zip(grads, refs):
            assert torch.allclose(g, r, atol=1e-5), (g - r).abs().max()
    with torch.no_grad():
        val = flex_attention_heads(q, k, v, masks, groups, pad, mode, attn.scaling)
    assert not val.requires_grad and torch.allclose(val, out, atol=1e-6)
    assert counter.frame_count == size_classes(batches(6, seed=1)) * (1 + (mode == "post"))


def test_shared_recompile_limit_without_isolated_recompiles(counter, monkeypatch):
    """Where torch.compile has no ``isolate_recompiles``, the layouts share the
    cache entries of flex_attention's code object: with the limit raised, 10
    layouts (head counts 1-10; dynamo's default limit is 8) compile 10 times,
    none run eagerly unseen; past the limit the call raises."""
    monkeypatch.setattr(flex, "_ISOLATE", False)
    flex._compiled.cache_clear()
    masks = [parse_mask("band-1")]
    q, k = torch.randn(1, 1, 9, 8), torch.randn(1, 1, 9, 8)

    def layouts(heads):
        with torch.no_grad():
            for H in heads:
                attn = make_attention(["band-1"] * H, groups=[0] * H, mode="pre", embed_dim=8 * H)
                v = torch.randn(1, H, 9, 8)
                out = flex_attention_heads(q, k, v, masks * H, (0,) * H, None, "pre", attn.scaling)
                ref = dense(attn, q.expand(1, H, 9, 8), k.expand(1, H, 9, 8), v, None)
                assert torch.allclose(out, ref, atol=1e-5), H

    layouts(range(1, 11))
    assert counter.frame_count == 10
    torch._dynamo.reset()
    flex._compiled.cache_clear()
    monkeypatch.setattr(flex, "RECOMPILE_LIMIT", 2)
    layouts([1, 2])
    with pytest.raises(torch._dynamo.exc.FailOnRecompileLimitHit):
        layouts([3])


def test_one_block_mask_per_mask_set_per_forward(monkeypatch):
    """Two layers with equal masks share one BlockMask within a forward pass's
    memo (post: and one all-real-keys mask); without one, each layer builds its own."""
    calls = []
    build = flex._block_mask
    monkeypatch.setattr(flex, "_block_mask", lambda *a, **kw: calls.append(a[1:]) or build(*a, **kw))
    q, k, v = qkv(2, 2, 2, 9)
    pad = padding_mask([9, 5], left_pad=True)

    def forward(mode, pad=pad):  # two layers, masks parsed per layer
        for _ in range(2):
            flex_attention_heads(q, k, v, [parse_mask("band-1"), parse_mask("star")], (0, 1), pad, mode, 0.5)

    for mode, per_forward in (("pre", 1), ("post", 2)):
        with torch.no_grad():
            calls.clear()
            forward(mode)
            assert len(calls) == 2 * per_forward
            calls.clear()
            with attention_context(memo=True):
                forward(mode)
                assert len(calls) == per_forward
                forward(mode, pad.clone())  # another padding tensor: built again
                assert len(calls) == 2 * per_forward
                flex_lse(q, k, pad, 0.5)  # the all-real-keys mask, shared
                assert len(calls) == 2 * per_forward + (mode == "pre")
            assert current().memo is None


@pytest.mark.parametrize("tokens", [["band-2", "star", "local-1+global-1", "fixed-4-1"], ["file-0.0"],
                                    ["random-2", "bigbird-1-2-2"]])
def test_forward_reads_nothing_back_to_the_host(tokens, mask_file, counter, monkeypatch):
    """No .item(), .tolist() or Python bool/int/float of a tensor in a compiled
    forward (each stalls a GPU stream), nor a recompilation for new lengths
    (seeded kinds: one (128, 128) table, the same on every device)."""
    masks = masks_of(tokens, mask_file)
    H = len(masks)

    def forward(lengths):
        q, k, v = qkv(len(lengths), H, H, max(lengths))
        pad = padding_mask(lengths, left_pad=True)
        with torch.no_grad():
            for mode in ("pre", "post"):
                flex_attention_heads(q, k, v, masks, tuple(range(H)), pad, mode, 0.3)

    for lengths in ([150, 100, 7], [60, 40, 3, 12]):  # compiling, and building the tables, read scalars
        forward(lengths)
    compiled = counter.frame_count
    for name in ("item", "tolist", "__bool__", "__int__", "__float__"):
        monkeypatch.setattr(torch.Tensor, name, lambda *a, name=name, **kw: pytest.fail(f"host read: {name}"))
    forward([90, 140, 3, 12])
    forward([33, 50])
    assert counter.frame_count == compiled


def dense_lse(q, k, pad, scale):
    scores = scale * q.float() @ k.float().transpose(-1, -2)
    if pad is not None:
        scores = scores.masked_fill(pad[:, None, None, :], float("-inf"))
    return torch.logsumexp(scores, -1)


@pytest.mark.parametrize("padding", ["left", "right", "none"])
def test_flex_lse_matches_dense(padding):
    """flex_lse == logsumexp of the masked dense scores, (B, G, T) float32."""
    torch.manual_seed(0)
    q, k, _ = qkv(3, 2, 2, 140)
    pad = None if padding == "none" else padding_mask([140, 77, 1], padding == "left")
    with torch.no_grad():
        lse = flex_lse(q, k, pad, 0.35)
    assert lse.shape == (3, 2, 140) and lse.dtype == torch.float32
    assert torch.allclose(lse, dense_lse(q, k, pad, 0.35), atol=1e-5, rtol=0)
    for dtype in (torch.float16, torch.bfloat16):  # LSE in float32 from half inputs
        qh, kh = q.to(dtype), k.to(dtype)
        with torch.no_grad():
            lse = flex_lse(qh, kh, pad, 0.35)
        assert lse.dtype == torch.float32
        assert torch.allclose(lse, dense_lse(qh, kh, pad, 0.35), atol=1e-4, rtol=0)


def test_flex_lse_gradient(cpu_backward):
    """d lse / d q and d k through FlexAttention's backward (grad_logsumexp)."""
    torch.manual_seed(0)
    q, k, _ = qkv(2, 2, 2, 140, grad=True)
    pad = padding_mask([140, 60], left_pad=False)
    w = torch.randn(2, 2, 140).masked_fill(pad[:, None], 0)  # pad rows' LSE is not used
    got = torch.autograd.grad((flex_lse(q, k, pad, 0.35) * w).sum(), (q, k))
    ref = torch.autograd.grad((dense_lse(q, k, pad, 0.35) * w).sum(), (q, k))
    for g, r in zip(got, ref):
        assert torch.allclose(g, r, atol=1e-5), (g - r).abs().max()


@pytest.mark.parametrize("mode", ["pre", "post"])
@pytest.mark.parametrize("dtype,tol", [(torch.float16, 3e-3), (torch.bfloat16, 3e-2)])
def test_half_precision_inputs(mode, dtype, tol):
    """fp16/bf16 q, k, v: the output in that dtype, within its rounding of fp32."""
    masks = [parse_mask(t) for t in ("band-2", "star", "global")]
    torch.manual_seed(0)
    q, k, v = qkv(2, 3, 3, 140)
    pad = padding_mask([140, 33], left_pad=True)
    with torch.no_grad():
        ref = flex_attention_heads(q, k, v, masks, (0, 1, 2), pad, mode, 0.35)
        out = flex_attention_heads(q.to(dtype), k.to(dtype), v.to(dtype), masks, (0, 1, 2), pad, mode, 0.35)
    assert out.dtype == dtype and torch.isfinite(out).all()
    assert (out.float() - ref).abs().max() < tol
