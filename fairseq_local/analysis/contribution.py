"""Hidden Token Attribution per head (Pascual et al., Eq. 1 and §4):

    c_{i,j} = ||d o_{h,j} / d e_i||_2 / sum_k ||d o_{h,j} / d e_k||_2

with o_{h,j} head h's output at token j before W_o (gated heads with their
gate) in any layer l, and the norm the Frobenius norm of the (d_h x d)
Jacobian.  Two contributions, as §4 defines them:

* **input contribution** C(e^0_i, o^l_{h,j}): e^0 is the input of the first
  layer.  §3: "E^0 refers to the word embeddings after position and sequence
  embeddings have been added": here exactly the tensor layer 1 receives
  (token + position + segment embeddings, scaled, the embedding LayerNorm
  where the model has one, padding zeroed);
* **previous-layer contribution** C(e^{l-1}_i, o^l_{h,j}): e^{l-1} is the
  input of layer l, the residual stream before any LayerNorm inside the layer
  (a pre-norm layer's ``self_attn_layer_norm`` is part of the derivative).

At layer 1 the two are one quantity (e^0 is layer 1's input), which the tests
assert.

The input contribution's Jacobian has T·d inputs and L·T·d outputs per
sentence, so it is computed in forward mode: one Jacobian-vector product per
input coordinate gives the derivative of every head output of every layer at
once.  The products are batched with ``torch.func.vmap`` (chunks of input
coordinates), and the same coordinate is perturbed in every sentence of a
batch at once (sentences do not interact), so a batch costs T_max·d products
in all.  The previous-layer contribution is closed-form per layer
(:func:`~.jacobian.block_jacobian_norms`, with the LayerNorm of a pre-norm
layer folded in).

:func:`input_contribution_naive` is the reference: one backward pass per
output row o_{h,j} (L·H·T passes a sentence, each batched over the row's d_h
coordinates).
"""

import contextlib
from typing import Iterator, List, Optional

import torch
from torch import Tensor, nn

from ..attention.context import AttentionCapture, attention_context
from .jacobian import block_jacobian_norms, previous_layer_contribution
from .model import AnalysisModel


def _layers(model: AnalysisModel) -> List[nn.Module]:
    return list(model.encoder.layers)


@contextlib.contextmanager
def _first_layer_input(model: AnalysisModel, value: Optional[Tensor]) -> Iterator[List[Tensor]]:
    """While open, layer 1 receives ``value`` (T, B, d) in place of what the
    embeddings made (None: what they made); the list yielded collects what
    layer 1 received on each call."""
    seen: List[Tensor] = []

    def hook(module: nn.Module, args: tuple):
        seen.append(args[0] if value is None else value)
        return None if value is None else (value, *args[1:])

    handle = _layers(model)[0].register_forward_pre_hook(hook)
    try:
        yield seen
    finally:
        handle.remove()


@torch.no_grad()
def layer_inputs(model: AnalysisModel, src_tokens: Tensor, src_lengths: Tensor) -> List[Tensor]:
    """The input of every layer, e^{l-1} for layer l (Pascual et al. §3-4):
    L tensors (T, B, d), the first being E^0 (the embeddings as layer 1
    receives them)."""
    seen: List[Tensor] = []

    def hook(module: nn.Module, args: tuple) -> None:
        seen.append(args[0])

    hooks = [layer.register_forward_pre_hook(hook) for layer in _layers(model)]
    try:
        model.encoder(src_tokens, src_lengths=src_lengths)
    finally:
        for h in hooks:
            h.remove()
    return seen


def _pre_norm(layer: nn.Module) -> Optional[nn.Module]:
    """The LayerNorm a pre-norm layer applies before its self-attention, or None (post-norm)."""
    return layer.self_attn_layer_norm if getattr(layer, "normalize_before", False) else None


def previous_jacobian_norms(model: AnalysisModel, src_tokens: Tensor, src_lengths: Tensor,
                            inputs: Optional[List[Tensor]] = None) -> Tensor:
    """||d o^l_{h,j} / d e^{l-1}_i||_F for a batch (right padding), e^{l-1}
    the input of layer l (its residual stream, before a pre-norm LayerNorm).

    Args:
        src_tokens: (B, T); src_lengths: (B,).
        inputs: :func:`layer_inputs` of the batch, if already computed.
    Returns:
        (B, L, H, T, T): [b, l, h, j, i], zero at padding.
    """
    inputs = layer_inputs(model, src_tokens, src_lengths) if inputs is None else inputs
    pad = src_tokens.eq(model.dictionary.pad())
    layers = _layers(model)
    return torch.stack([block_jacobian_norms(a, x, pad, need_beta=False, norm=_pre_norm(layer))[1]
                        for a, layer, x in zip(model.attention, layers, inputs)], 1)


def previous_contribution(model: AnalysisModel, src_tokens: Tensor, src_lengths: Tensor,
                          inputs: Optional[List[Tensor]] = None) -> Tensor:
    """C(e^{l-1}_i, o^l_{h,j}) per head (Pascual et al. §4): (B, L, H, T, T)
    as [b, l, h, j, i], each real row summing to 1."""
    return previous_layer_contribution(previous_jacobian_norms(model, src_tokens, src_lengths, inputs))


def _head_outputs(model: AnalysisModel, src_tokens: Tensor, src_lengths: Tensor):
    """A function ``E0`` (B, T, d), layer 1's input -> head outputs (L, T, B, d)
    of every layer (the input of each ``out_proj``: heads concatenated, gates
    applied)."""
    def run(first: Tensor) -> Tensor:
        calls = AttentionCapture(head_outputs=True, graph=True)
        # the dense path: the fused SDPA kernel of the others has no forward-mode derivative
        with attention_context(capture=calls, impl="dense"), _first_layer_input(model, first.transpose(0, 1)):
            model.encoder(src_tokens, src_lengths=src_lengths)
        outs: List[Tensor] = []
        for c in calls.calls:  # (B, H, T, d_h) -> (T, B, H·d_h)
            B, H, T, dh = c.head_outputs.shape
            outs.append(c.head_outputs.permute(2, 0, 1, 3).reshape(T, B, H * dh))
        return torch.stack(outs)

    return run


class _Fixed(nn.Module):
    """Stands in for a module whose output is already known."""

    def __init__(self, value: Tensor) -> None:
        super().__init__()
        self.value = value

    def forward(self, *args, **kwargs) -> Tensor:
        return self.value


@contextlib.contextmanager
def _positions_computed(encoder: nn.Module, src_tokens: Tensor) -> Iterator[None]:
    """Compute the positional embeddings once, outside ``torch.func``
    transforms (fairseq's sinusoidal positions read tensor storage, which
    the transforms' tensors lack); layer 1's input is replaced anyway."""
    positions = getattr(encoder, "embed_positions", None)
    if positions is None:
        yield
        return
    with torch.no_grad():
        value = positions(src_tokens)
    encoder.embed_positions = _Fixed(value)
    try:
        yield
    finally:
        encoder.embed_positions = positions


def _normalise(norms: Tensor) -> Tensor:
    total = norms.sum(-1, keepdim=True)
    return torch.where(total > 0, norms / total.clamp_min(torch.finfo(norms.dtype).tiny), torch.zeros_like(norms))


def input_jacobian_norms(model: AnalysisModel, src_tokens: Tensor, src_lengths: Tensor,
                         chunk: int = 0, dtype: torch.dtype = torch.float32) -> Tensor:
    """||d o_{h,j} / d e^0_i||_F for a batch (right padding), e^0 layer 1's input.

    Args:
        src_tokens: (B, T); src_lengths: (B,).
        chunk: input coordinates per vmapped batch of products (0: about
            512 MB of head outputs and activations a chunk).
    Returns:
        (B, L, H, T, T): [b, l, h, j, i], zero at padding.
    """
    B, T = src_tokens.shape
    L, H, dh = model.num_layers, model.num_heads, model.head_dim
    d = H * dh
    emb = layer_inputs(model, src_tokens, src_lengths)[0].transpose(0, 1).to(dtype)  # (B, T, d)
    run = _head_outputs(model, src_tokens, src_lengths)
    if chunk <= 0:  # about 512 MB of head outputs and activations a chunk
        chunk = max(1, (512 << 20) // (4 * L * T * B * d * emb.element_size()))
    coords = T * d
    sq = torch.zeros(L, T, B, H, T, dtype=dtype, device=emb.device)  # [l, j, b, h, i]
    jvp = torch.func.vmap(lambda t: torch.func.jvp(run, (emb,), (t,))[1])
    with torch.no_grad(), _positions_computed(model.encoder, src_tokens):
        for start in range(0, coords, chunk):
            stop = min(coords, start + chunk)
            n = stop - start
            tangents = torch.zeros(n, T * d, dtype=dtype, device=emb.device)
            tangents[torch.arange(n), torch.arange(start, stop)] = 1
            tangents = tangents.view(n, 1, T, d).expand(n, B, T, d)
            out = jvp(tangents)  # (n, L, T, B, d): d o / d e0[:, i, c] for the n coordinates (i, c)
            out = out.view(n, L, T, B, H, dh).pow(2).sum(-1)  # (n, L, T, B, H)
            pos = torch.arange(start, stop, device=emb.device) // d
            sq.index_add_(4, pos, out.permute(1, 2, 3, 4, 0))
    norms = sq.clamp_min(0).sqrt().permute(2, 0, 3, 1, 4)  # (B, L, H, T, T)
    keep = torch.arange(T, device=emb.device)[None, :] < src_lengths[:, None]  # (B, T)
    return norms * keep[:, None, None, :, None] * keep[:, None, None, None, :]


def input_contribution(model: AnalysisModel, src_tokens: Tensor, src_lengths: Tensor, chunk: int = 0) -> Tensor:
    """C(e^0_i, o^l_{h,j}) per head (Pascual et al. Eq. 1, e^0 = layer 1's
    input): (B, L, H, T, T) as [b, l, h, j, i], each real row summing to 1."""
    return _normalise(input_jacobian_norms(model, src_tokens, src_lengths, chunk))


def input_contribution_naive(model: AnalysisModel, ids: Tensor) -> Tensor:
    """The reference for one sentence ``ids`` (T,): a backward pass per output
    row o_{h,j} of every layer (its d_h coordinates at once, with
    ``is_grads_batched``), with respect to layer 1's input.  Returns
    (L, H, T, T) as [l, h, j, i]."""
    src_tokens, src_lengths = ids[None], torch.tensor([ids.numel()], device=ids.device)
    emb = layer_inputs(model, src_tokens, src_lengths)[0].transpose(0, 1).detach().requires_grad_(True)
    with torch.enable_grad(), _positions_computed(model.encoder, src_tokens):
        outs = _head_outputs(model, src_tokens, src_lengths)(emb)  # (L, T, 1, d)
        L, T = outs.shape[:2]
        H, dh = model.num_heads, model.head_dim
        norms = torch.zeros(L, H, T, T, dtype=emb.dtype)
        for l in range(L):
            for h in range(H):
                for j in range(T):
                    row = outs[l, j, 0, h * dh:(h + 1) * dh]
                    basis = torch.eye(dh, dtype=row.dtype, device=row.device)
                    (g,) = torch.autograd.grad(row, emb, basis, retain_graph=True, is_grads_batched=True)
                    norms[l, h, j] = g[:, 0].pow(2).sum((0, 2)).sqrt()  # (dh, 1, T, d) -> (T,)
    return _normalise(norms)
