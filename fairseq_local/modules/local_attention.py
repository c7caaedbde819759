"""One encoder self-attention module for every head variant.

Each head h has a mask (:mod:`fairseq_local.modules.masks`) and uses the Wq/Wk
of a Q/K group g(h) (:class:`QKProjection`); Wv and Wo are per head.  For a
layer with G groups and H heads (seed 000, Eq. 9 and §4.2):

    S_g  = (X Wq_g)(X Wk_g)^T / sqrt(d_h)                 (B, G, T, S)
    post:  A_h = mask_h ⊙ softmax(S_g(h))                  softmax over all real keys
    pre:   A_h = softmax(S_g(h) restricted to mask_h)      renormalised in the window
    Y    = concat_h(A_h X Wv_h) Wo

In ``post`` mode the probabilities of a group are computed once and masked per
head.  A query with no allowed key gets A_h = 0 (a zero head output) in both
modes; nothing is ever NaN.  A :class:`QKProjection` shared by several layers
is one module (one parameter set, one gradient).
"""

import math
from functools import lru_cache
from typing import Dict, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from fairseq.modules.fairseq_dropout import FairseqDropout
from torch import Tensor, nn

from .masks import HeadMask, real_positions, stack_masks

MASK_MODES = ("post", "pre")


class QKProjection(nn.Module):
    """Wq and Wk of one Q/K group: ``embed_dim -> head_dim`` each.

    Initialised like one head's slice of fairseq's MultiheadAttention (Xavier
    uniform of the full d×d matrix with gain 1/sqrt(2))."""

    def __init__(self, embed_dim: int, head_dim: int, bias: bool = True) -> None:
        super().__init__()
        self.q_proj = nn.Linear(embed_dim, head_dim, bias=bias)
        self.k_proj = nn.Linear(embed_dim, head_dim, bias=bias)
        bound = math.sqrt(6.0 / (2 * embed_dim)) / math.sqrt(2)
        for proj in (self.q_proj, self.k_proj):
            nn.init.uniform_(proj.weight, -bound, bound)


@lru_cache(maxsize=16)
def _relative_masks(
    masks: Tuple[HeadMask, ...], tgt_len: int, src_len: int, device: torch.device
) -> Tensor:
    """(H, T, S) bool masks of offset-only kinds, cached per length."""
    return stack_masks(
        masks,
        torch.arange(tgt_len, device=device),
        torch.arange(src_len, device=device),
    )


class LocalMultiheadAttention(nn.Module):
    """Encoder self-attention with a mask and a Q/K group per head.

    Args:
        embed_dim: model dimension d (= H · d_h).
        masks: one :class:`HeadMask` per head (H of them).
        head_to_group: for each head, the index of its group in ``qk``.
        qk: the G Q/K groups this layer uses (may be shared with other layers).
        mask_mode: ``"post"`` (seed 000, Eq. 9) or ``"pre"``.
        dropout: attention-probability dropout.
    """

    def __init__(
        self,
        embed_dim: int,
        masks: Sequence[HeadMask],
        head_to_group: Sequence[int],
        qk: Sequence[QKProjection],
        mask_mode: str = "post",
        dropout: float = 0.0,
        bias: bool = True,
    ) -> None:
        super().__init__()
        num_heads = len(masks)
        if embed_dim % num_heads:
            raise ValueError(f"embed_dim {embed_dim} is not divisible by {num_heads} heads")
        if mask_mode not in MASK_MODES:
            raise ValueError(f"mask_mode must be one of {MASK_MODES}, not {mask_mode!r}")
        if len(head_to_group) != num_heads or sorted(set(head_to_group)) != list(range(len(qk))):
            raise ValueError("head_to_group must map every head to one of the qk groups, using all")
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.scaling = self.head_dim ** -0.5
        self.masks: Tuple[HeadMask, ...] = tuple(masks)
        self.mask_mode = mask_mode
        self.head_to_group = tuple(head_to_group)
        self.qk = nn.ModuleList(qk)
        self.v_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.dropout_module = FairseqDropout(dropout, module_name=self.__class__.__name__)
        self.register_buffer(
            "group_index", torch.tensor(self.head_to_group, dtype=torch.long), persistent=False
        )
        # fairseq's MultiheadAttention initialisation (Wv gain 1/sqrt(2), Wo gain 1).
        nn.init.xavier_uniform_(self.v_proj.weight, gain=1 / math.sqrt(2))
        nn.init.xavier_uniform_(self.out_proj.weight)
        if bias:
            nn.init.constant_(self.out_proj.bias, 0.0)

    @property
    def num_groups(self) -> int:
        return len(self.qk)

    @property
    def untied(self) -> bool:
        return self.head_to_group == tuple(range(self.num_heads))

    def head_masks(
        self, tgt_len: int, src_len: int, padding_mask: Optional[Tensor], device: torch.device
    ) -> Optional[Tensor]:
        """Dense masks: None if every head is global, else bool (H, T, S) for
        offset-only kinds or (B, H, T, S) for kinds that need real positions."""
        if all(m.is_global for m in self.masks):
            return None
        if all(m.relative for m in self.masks):
            return _relative_masks(self.masks, tgt_len, src_len, device)
        pos = real_positions(padding_mask, src_len).to(device)
        return stack_masks(self.masks, pos[..., :tgt_len], pos)

    def _in_proj(self, x: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
        """One fused projection: (T, B, d) -> q, k (T, B, G·d_h) and v (T, B, d)."""
        groups = list(self.qk)
        weights = [g.q_proj.weight for g in groups] + [g.k_proj.weight for g in groups]
        weights.append(self.v_proj.weight)
        bias = None
        if self.v_proj.bias is not None:
            bias = torch.cat(
                [g.q_proj.bias for g in groups]
                + [g.k_proj.bias for g in groups]
                + [self.v_proj.bias]
            )
        qk_dim = self.num_groups * self.head_dim
        return F.linear(x, torch.cat(weights), bias).split([qk_dim, qk_dim, self.embed_dim], -1)

    def forward(
        self,
        query: Tensor,
        key: Optional[Tensor] = None,
        value: Optional[Tensor] = None,
        key_padding_mask: Optional[Tensor] = None,
        need_weights: bool = False,
        attn_mask: Optional[Tensor] = None,
        need_head_weights: bool = False,
        **unused,
    ) -> Tuple[Tensor, Optional[Tensor]]:
        """Self-attention over ``query``.

        Args:
            query: (T, B, d); ``key``/``value`` must be None or ``query`` itself.
            key_padding_mask: (B, T) bool, True at padding.
            attn_mask: optional (T, T) additive float mask.
            need_weights: also return weights averaged over heads, (B, T, T).
            need_head_weights: return per-head weights, (H, B, T, T).
        Returns:
            output (T, B, d) and the weights or None.
        """
        if (key is not None and key is not query) or (value is not None and value is not query):
            raise ValueError("LocalMultiheadAttention is encoder self-attention only")
        need_weights = need_weights or need_head_weights
        tgt_len, bsz, _ = query.shape
        H, G, dh = self.num_heads, self.num_groups, self.head_dim
        q, k, v = self._in_proj(query)
        q = q.view(tgt_len, bsz, G, dh).permute(1, 2, 0, 3)  # (B, G, T, dh)
        k = k.view(tgt_len, bsz, G, dh).permute(1, 2, 0, 3)  # (B, G, S, dh)
        v = v.view(tgt_len, bsz, H, dh).permute(1, 2, 0, 3)  # (B, H, S, dh)
        if key_padding_mask is not None and not key_padding_mask.any():
            key_padding_mask = None
        masks = self.head_masks(tgt_len, tgt_len, key_padding_mask, query.device)

        if masks is None and self.untied and not need_weights and attn_mask is None:
            # Plain multi-head attention: the fused kernel, as fairseq's fast path.
            keep = None if key_padding_mask is None else ~key_padding_mask[:, None, None, :]
            drop = self.dropout_module
            p = drop.p if (self.training or drop.apply_during_inference) else 0.0
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=keep, dropout_p=p)
            weights = None
        else:
            probs = self.attention_probs(q, k, masks, key_padding_mask, attn_mask)
            out = torch.matmul(self.dropout_module(probs), v)  # (B, H, T, dh)
            weights = probs.transpose(0, 1) if need_weights else None  # (H, B, T, S)
            if weights is not None and not need_head_weights:
                weights = weights.mean(dim=0)
        out = out.permute(2, 0, 1, 3).reshape(tgt_len, bsz, self.embed_dim)
        return self.out_proj(out), weights

    def attention_probs(
        self,
        q: Tensor,
        k: Tensor,
        masks: Optional[Tensor],
        key_padding_mask: Optional[Tensor] = None,
        attn_mask: Optional[Tensor] = None,
    ) -> Tensor:
        """Masked attention probabilities per head.

        Args:
            q: (B, G, T, dh); k: (B, G, S, dh).
            masks: None (all global), (H, T, S) or (B, H, T, S) bool.
            key_padding_mask: (B, S) bool, True at padding.
        Returns:
            (B, H, T, S): ``post`` = mask ⊙ softmax over real keys (Eq. 9);
            ``pre`` = softmax over allowed keys; rows without allowed keys are 0.
        """
        scores = torch.matmul(q * self.scaling, k.transpose(-1, -2))  # (B, G, T, S)
        if attn_mask is not None:
            scores = scores + attn_mask
        neg = torch.finfo(scores.dtype).min
        if key_padding_mask is not None:
            scores = scores.masked_fill(key_padding_mask[:, None, None, :], neg)
        if self.mask_mode == "post":
            probs = F.softmax(scores, dim=-1, dtype=torch.float32).type_as(scores)
            probs = self._per_head(probs)
            return probs if masks is None else probs * masks
        scores = self._per_head(scores)
        if masks is None:
            return F.softmax(scores, dim=-1, dtype=torch.float32).type_as(scores)
        allowed = masks
        if key_padding_mask is not None:
            allowed = masks & ~key_padding_mask[:, None, None, :]  # (B, H, T, S)
        probs = F.softmax(scores.masked_fill(~allowed, neg), dim=-1, dtype=torch.float32)
        # A row with no allowed key is uniform over `neg` here; the product zeroes it.
        return probs.type_as(scores) * allowed

    def _per_head(self, t: Tensor) -> Tensor:
        """(B, G, T, S) -> (B, H, T, S) by each head's group."""
        return t if self.untied else t.index_select(1, self.group_index)


def build_qk_groups(
    layers: Sequence[Sequence[str]], embed_dim: int, head_dim: int, bias: bool = True
) -> Dict[str, QKProjection]:
    """Create one :class:`QKProjection` per distinct group key, in first-use order."""
    groups: Dict[str, QKProjection] = {}
    for keys in layers:
        for key in keys:
            if key not in groups:
                groups[key] = QKProjection(embed_dim, head_dim, bias)
    return groups
