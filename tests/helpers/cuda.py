"""Shared by the CUDA tests (tests/cuda): the device, the dtypes and their
tolerances, comparisons at a tensor's scale, and layers built on the GPU.

Every test in tests/cuda is marked ``cuda``; tests/conftest.py skips them,
with one line saying why, where ``torch.cuda.is_available()`` is False.
``bash scripts/check-gpu.sh`` runs them on a GPU."""

import re
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import torch

from helpers import make_attention, padding_mask

CUDA = torch.device("cuda")
DTYPES: Dict[str, torch.dtype] = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
# |a − b| <= TOL · max |b| (the reference's scale) against the fp32 dense
# reference; the same tolerance for every path of one dtype.
TOL = {"fp32": 1e-4, "fp16": 1e-2, "bf16": 5e-2}
IMPLS = ("dense", "window", "flex", "auto")
QK_GROUP = r"(^|\.)qk\.\d+\."  # a parameter of one Q/K group: "…qk.<g>.q_proj.weight"

# One layer each: (head masks, Q/K group of each head).
LAYERS: Dict[str, Tuple[List[str], List[int]]] = {
    # Pande et al.'s (i): eight local heads in one Q/K group
    "tied": (["prev-1", "prev-2", "next-1", "next-2", "band-1", "band-2", "identity", "identity"], [0] * 8),
    # global and window heads in one group, global heads of another, interleaved
    "mixed": (["global", "band-1", "next-3", "global", "prev-2", "global"], [0, 0, 1, 1, 0, 2]),
    # kinds without a window form: FlexAttention under flex/auto, dense under window
    "mixed-sparse": (["star", "band-2", "bigbird-1-2-2", "global"], [0, 0, 1, 2]),
    # learned heads with fixed and gated ones: the dense path under every impl
    "mixed-learned": (["dam-s", "aaa", "band-1", "global:gate"], [0, 1, 2, 3]),
}
HEAD_DIM = 16  # FlexAttention's smallest head dimension
LENGTHS = [130, 77, 1]  # not a multiple of FlexAttention's 128-wide blocks; a one-token sentence


def scaled_error(a: torch.Tensor, b: torch.Tensor, scale: float = 0.0) -> float:
    """max |a − b| / max(max |b|, ``scale``, 1e-3), in float32."""
    a, b = a.detach().float(), b.detach().float()
    return (a - b).abs().max().item() / max(b.abs().max().item(), scale, 1e-3)


def assert_close(a: torch.Tensor, b: torch.Tensor, tol: float, what: str = "", scale: float = 0.0) -> None:
    assert a.shape == b.shape, (what, a.shape, b.shape)
    assert torch.isfinite(a).all(), f"{what}: non-finite values"
    err = scaled_error(a, b, scale)
    assert err <= tol, f"{what}: max |a - b| / max |b| = {err:.3g} > {tol:g}"


def layer(name: str, mode: str, impl: str, seed: int = 0, max_len: int = 256):
    """The layer ``name`` of :data:`LAYERS` on the CPU in fp32, in evaluation
    mode (no dropout, the hard learned masks), with every parameter redrawn
    from N(0, 1/d) (biases too).  Learned parameters are kept away from the
    0 thresholds of evaluation (DAM's 1[α > 0]; AAA's logits at ±12, so its
    expected top-k keeps every row and no column), so that rounding to a half
    dtype cannot flip a mask entry."""
    tokens, groups = LAYERS[name]
    embed_dim = HEAD_DIM * len(tokens)
    attn = make_attention(tokens, groups, mode, embed_dim=embed_dim, seed=seed, std=embed_dim ** -0.5,
                          max_len=max_len, attn_impl=impl)
    with torch.no_grad():
        for pname, p in attn.named_parameters():
            if pname.endswith("alpha"):  # DAM α, gate log α
                p.add_(torch.where(p >= 0, 0.5, -0.5))
        if "aaa" in attn.learned:  # AAA: rows on, columns off, whatever the token
            attn.learned["aaa"].fc.weight.mul_(1e-3)
            attn.learned["aaa"].fc.bias.copy_(torch.tensor([12.0, -12.0]))  # k = n rows, 0 columns
    return attn


def on(module: torch.nn.Module, dtype: torch.dtype) -> torch.nn.Module:
    """``module`` moved to CUDA and cast to ``dtype`` (as --fp16/--bf16 cast a model)."""
    return module.to(device=CUDA, dtype=dtype)


def batch(embed_dim: int, lengths: Sequence[int] = LENGTHS, left: bool = True, seed: int = 1):
    """x (T, B, d) in fp32 on CUDA and the padding mask (B, T) on CUDA."""
    gen = torch.Generator().manual_seed(seed)
    T = max(lengths)
    x = torch.randn(T, len(lengths), embed_dim, generator=gen)
    return x.to(CUDA), padding_mask(lengths, left, T).to(CUDA)


def forward_backward(attn: torch.nn.Module, x: torch.Tensor, pad: Optional[torch.Tensor], grad_out: torch.Tensor,
                     dtype: torch.dtype) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
    """Output and the gradients of the input (``"input"``) and of every
    parameter (by name), for ``x`` and ``grad_out`` cast to ``dtype``."""
    x = x.to(dtype).requires_grad_()
    y, _ = attn(x, key_padding_mask=pad)
    names, params = zip(*[(n, p) for n, p in attn.named_parameters() if p.requires_grad])
    grads = torch.autograd.grad(y, [x, *params], grad_out.to(dtype), allow_unused=True)
    out = {"input": grads[0]}
    out.update({n: g for n, g in zip(names, grads[1:]) if g is not None})
    return y, out


def grad_scale(name: str, grads_ref: Dict[str, torch.Tensor]) -> float:
    """The scale the gradient of parameter ``name`` is compared at: its own
    max |g|; a bias's weight's too, as the K projection's bias has an exact zero
    gradient (it shifts a query's scores by a constant), leaving rounding alone.
    An all-zero gradient takes the scale of the same parameter of the layer's
    other Q/K groups (``…qk.<g>.…``): a pre-mode head with one allowed key
    (prev-1) has a softmax of constant 1, so its group's Q and K gradients are
    exactly 0, and FlexAttention's backward leaves rounding there."""
    def own(n: str) -> float:
        scale = grads_ref[n].abs().max().item()
        weight = grads_ref.get(n[: -len("bias")] + "weight") if n.endswith("bias") else None
        return scale if weight is None else max(scale, weight.abs().max().item())

    scale = own(name)
    if scale == 0.0 and re.search(QK_GROUP, name):
        key = re.sub(QK_GROUP, r"\1qk.*.", name)
        scale = max((own(n) for n in grads_ref if n != name and re.sub(QK_GROUP, r"\1qk.*.", n) == key), default=0.0)
    return scale


def compare(got: Tuple[torch.Tensor, Dict[str, torch.Tensor]], ref: Tuple[torch.Tensor, Dict[str, torch.Tensor]],
            tol: float, what: str) -> None:
    """Output and every gradient of ``got`` within ``tol`` of ``ref``'s, at the scale of :func:`grad_scale`."""
    (y, grads), (y_ref, grads_ref) = got, ref
    assert_close(y, y_ref, tol, f"{what}: output")
    assert set(grads) == set(grads_ref), (what, sorted(set(grads) ^ set(grads_ref)))
    for name, ref_grad in grads_ref.items():
        assert_close(grads[name], ref_grad, tol, f"{what}: gradient of {name}", grad_scale(name, grads_ref))


def encoder_batch(lengths: Iterable[int], vocab: int = 64, seed: int = 2):
    """Left-padded random sentences (fairseq's source layout) on CUDA: tokens (B, T) and lengths (B,)."""
    lengths = list(lengths)
    gen = torch.Generator().manual_seed(seed)
    T = max(lengths)
    tokens = torch.full((len(lengths), T), 1, dtype=torch.long)  # 1: <pad>
    for b, n in enumerate(lengths):
        tokens[b, T - n:] = torch.randint(4, vocab, (n,), generator=gen)
        tokens[b, -1] = 2  # </s>
    return tokens.to(CUDA), torch.tensor(lengths, device=CUDA)
