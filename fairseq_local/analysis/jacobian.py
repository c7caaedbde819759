"""Closed-form Jacobian norms of one self-attention block.

For the block input X (T × d) and its output Y = attn(X) after W_o, this
computes, without autograd and without a loop over token pairs:

* β[i, j] = ‖∂Y[i]/∂X[j]‖_F (Pande et al. §3.1, the gradient sensitivity of
  Eq. 5–7), and
* ‖∂o_{h,j}/∂x_i‖_F per head, o_h being head h's output before W_o (times its
  gate), from which the previous-layer Hidden Token Attribution follows
  (Pascual et al. Eq. 1, e = the layer's input: the block input of a
  post-norm layer, the input before the LayerNorm of a pre-norm one).

Derivation (row-vector convention, q_i = Wq_g x_i + bq_g, s_g[i, m] =
scale · q_i · k_m, A_h = z_h · P_h ⊙ W_h with P_h the softmax the head takes and
W_h a factor that does not depend on X, o_h[i] = Σ_k A_h[i, k] v_h[k]):

    w_h[i, m]  = ∂o_h[i]/∂s[i, m] = A_h[i, m] v_h[m] − P_h[i, m] o_h[i]
    ∂o_h[i]/∂x_j = A_h[i, j] Wv_h + w_h[i, j] r_h[i]ᵀ
                   + δ_ij · (scale Σ_m w_h[i, m] k_mᵀ) Wq_g,   r_h[i] = scale Wk_gᵀ q_i

Off-diagonal norms are expanded into Gram products (‖aWv + w rᵀ‖² =
a²‖Wv‖² + 2a w·(Wv r) + |w|²|r|², and the same over heads through
Go = W_oᵀW_o); the diagonal blocks are materialised per query.

A pre-norm layer normalises its input before the block: y_i = LN(x_i) =
g ⊙ x̂_i + b, x̂_i = (x_i − μ_i)/σ_i.  With ``norm`` given, the head norms are
taken with respect to the layer input x (Pascual et al. §4: e^{l−1} is the
input of layer l), by the chain rule through LN's Jacobian
J_i = diag(g) Π_i / σ_i, Π_i = I − 11ᵀ/d − x̂_i x̂_iᵀ/d:

    ‖B J_i‖²_F = tr(B G_i Bᵀ),   G_i = J_i J_iᵀ
               = [diag(g²) − g gᵀ/d − (2 − s_i) u_i u_iᵀ/d] / σ_i²,

u_i = g ⊙ x̂_i, s_i = |x̂_i|²/d (1 but for LN's ε), so that every Gram
product above takes G_i as its metric and stays a sum of rank-one terms.
"""

from typing import Optional, Tuple

import torch
from torch import Tensor, nn

from fairseq_local.attention.module import LocalMultiheadAttention

# Elements of the largest intermediate tensors per chunk of query rows.
_CHUNK_ELEMENTS = 1 << 24


def _chunk_rows(bsz: int, tgt_len: int, dim: int, num_heads: int) -> int:
    per_row = bsz * (3 * tgt_len * dim + 3 * dim * dim + tgt_len * num_heads)
    return max(1, min(tgt_len, _CHUNK_ELEMENTS // max(per_row, 1)))


def _attention_terms(attn: LocalMultiheadAttention, x: Tensor, key_padding_mask: Optional[Tensor]):
    """q, k (B, G, T, d_h), v, o (B, H, T, d_h), P and A = z·P⊙W (B, H, T, T),
    from the layer's own projection, dense path and gates."""
    q, k, v = attn.project(x)
    fixed = attn.fixed_mask(x.shape[0], key_padding_mask, x.device)
    learned, _ = attn.learned_mask(x, key_padding_mask)
    probs, weight = attn.attention_parts(q, k, fixed, learned, key_padding_mask)
    # P is finite everywhere: the softmax takes finite scores, padded and
    # excluded keys filled with a finite minimum (a row with no key left is
    # uniform).  A row without an allowed key has W = 0: its A, o and w are 0.
    a = probs if weight is None else probs * weight
    z = attn.gate_scale(a.dtype, a.device)
    if z is not None:
        a = a * z
    o = torch.matmul(a, v)
    return q, k, v, o, probs, a


def block_jacobian_norms(
    attn: LocalMultiheadAttention,
    x: Tensor,
    key_padding_mask: Optional[Tensor] = None,
    need_beta: bool = True,
    norm: Optional[nn.Module] = None,
) -> Tuple[Optional[Tensor], Tensor]:
    """Frobenius norms of the self-attention block's Jacobians, in closed form.

    Args:
        attn: the block's attention, in ``eval()`` mode.
        x: (T, B, d) input of the block, or with ``norm`` the input of the
            pre-norm layer (the block then takes ``norm(x)``).
        key_padding_mask: (B, T) bool, True at padding, or None.
        need_beta: also compute β (the output Jacobians after W_o); not
            with ``norm``.
        norm: the LayerNorm (over the last dimension, d) that a pre-norm
            layer applies before the block, or None.
    Returns:
        beta (B, T, T) with beta[b, i, j] = ‖∂Y[i]/∂X[j]‖_F, or None without
        ``need_beta``; and head (B, H, T, T) with head[b, h, j, i] =
        ‖∂o_{h,j}/∂x_i‖_F (gate included).  Rows and columns at padding are 0.
    """
    if attn.training:
        raise ValueError("block_jacobian_norms needs the attention module in eval() mode")
    if x.dim() != 3 or x.shape[-1] != attn.embed_dim:
        raise ValueError(f"x must be (T, B, {attn.embed_dim}), not {tuple(x.shape)}")
    if norm is not None and need_beta:
        raise ValueError("block_jacobian_norms takes a LayerNorm for the head norms only (need_beta=False)")
    with torch.no_grad():
        return _norms(attn, x, key_padding_mask, need_beta, norm)


def _layer_norm_terms(norm: nn.Module, x: Tensor) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """LN(x) and the parts of its metric G_i (module docstring): y (T, B, d);
    g (d,); 1/σ_i² and (2 − s_i)/d as (B, T); u_i = g ⊙ x̂_i (B, T, d)."""
    d = x.shape[-1]
    if tuple(getattr(norm, "normalized_shape", (d,))) != (d,):
        raise ValueError(f"the LayerNorm must normalise the last dimension ({d})")
    y = norm(x)
    xb = x.transpose(0, 1)  # (B, T, d)
    var = xb.var(-1, unbiased=False)
    inv_var = 1.0 / (var + norm.eps)  # 1/σ²
    xhat = (xb - xb.mean(-1, keepdim=True)) * inv_var.sqrt().unsqueeze(-1)
    weight = getattr(norm, "weight", None)
    g = weight.to(x.dtype) if weight is not None else x.new_ones(d)
    c = (2 - xhat.pow(2).sum(-1) / d) / d
    return y, g, inv_var, c, g * xhat


def _metric_diag(jac: Tensor, g: Tensor, inv_var: Tensor, c: Tensor, u: Tensor) -> Tensor:
    """tr(M G Mᵀ) for blocks M (..., dh, d) with the metric of their token:
    inv_var, c (...) and u (..., d) of the same leading shape."""
    return inv_var * ((jac * g).pow(2).sum((-1, -2)) - torch.matmul(jac, g).pow(2).sum(-1) / g.shape[-1]
                      - c * torch.matmul(jac, u.unsqueeze(-1)).squeeze(-1).pow(2).sum(-1))


def _norms(attn: LocalMultiheadAttention, x: Tensor, key_padding_mask: Optional[Tensor],
           need_beta: bool, norm: Optional[nn.Module] = None) -> Tuple[Optional[Tensor], Tensor]:
    T, B, d = x.shape
    H, dh, scale = attn.num_heads, attn.head_dim, attn.scaling
    if key_padding_mask is not None and not key_padding_mask.any():
        key_padding_mask = None
    if norm is not None:
        x, gain, inv_var, c_ln, un = _layer_norm_terms(norm, x)  # x: the block's input LN(x) from here on
    q, k, v, o, probs, a = _attention_terms(attn, x, key_padding_mask)
    gidx = torch.tensor(attn.plan.head_to_group, device=x.device)
    wq = torch.stack([g.q_proj.weight for g in attn.qk]).to(x.dtype)  # (G, dh, d)
    wk = torch.stack([g.k_proj.weight for g in attn.qk]).to(x.dtype)
    wv = attn.v_proj.weight.to(x.dtype).view(H, dh, d)
    wo = attn.out_proj.weight.to(x.dtype)  # (d, H·dh)

    r = scale * torch.einsum("bgte,ged->bgtd", q, wk)  # r_g[i] = scale Wk_gᵀ q_i, (B, G, T, d)
    rh, kh, wqh = r[:, gidx], k[:, gidx], wq[gidx]  # per head
    vr_all = torch.einsum("hed,bgtd->bhgte", wv, r)  # Wv_h r_g[i], (B, H, G, T, dh)
    vr_own = vr_all[:, torch.arange(H, device=x.device), gidx]  # (B, H, T, dh)
    wv_sq = wv.pow(2).sum((1, 2)).view(1, H, 1, 1)
    r_sq = rh.pow(2).sum(-1)  # (B, H, T)
    if norm is not None:  # the metric G_i of key token i (module docstring), its Gram products
        wv_gain = wv @ gain  # Wv_h g, (H, dh)
        wv_un = torch.einsum("hed,btd->bhte", wv, un)  # Wv_h u_i, (B, H, T, dh)
        wv_g = ((wv * gain).pow(2).sum((1, 2)) - wv_gain.pow(2).sum(-1) / d)[None, :, None]  # (1, H, 1)
        wv_sq = (inv_var[:, None] * (wv_g - c_ln[:, None] * wv_un.pow(2).sum(-1))).unsqueeze(2)  # tr(Wv G_i Wvᵀ)
        vr_own = torch.einsum("hed,bhtd->bhte", wv, rh * gain.pow(2))  # Wv_h (g² ⊙ r_j), (B, H, T, dh)
        gr = (rh * gain).sum(-1)  # g·r_j, (B, H, T)
        r_sq = (rh * gain).pow(2).sum(-1)  # |g ⊙ r_j|², (B, H, T)
        ur = torch.einsum("bid,bhjd->bhji", un, rh)  # u_i·r_j, (B, H, T, T)

    if need_beta:
        go = wo.t() @ wo  # Go = W_oᵀW_o, (d, d); block [h, h'] = Wo_hᵀ Wo_h'
        go_blocks = go.view(H, dh, H, dh)
        n = torch.einsum("ohe,hed->hod", wo.view(d, H, dh), wv)  # N_h = Wo_h Wv_h, (H, d, d)
        gram_n = n.flatten(1) @ n.flatten(1).t()  # <N_h, N_h'>_F, (H, H)
        del n
        # c[b, i, (h', e), h] = Go[h', h] Wv_h r_{g(h')}[i]: the cross term's matrix.
        cross_mat = torch.einsum("kehf,bhkif->bikeh", go_blocks, vr_all[:, :, gidx]).reshape(B, T, d, H)
        rr = torch.einsum("bgtd,bktd->btgk", r, r)[:, :, gidx][:, :, :, gidx]  # r_g(h)·r_g(h'), (B, T, H, H)
        beta2 = x.new_zeros(B, T, T)
    head2 = x.new_zeros(B, H, T, T)

    step = _chunk_rows(B, T, d, H)
    for s in range(0, T, step):
        e = min(T, s + step)
        c = e - s
        rows = torch.arange(c, device=x.device)
        ac, pc = a[:, :, s:e], probs[:, :, s:e]  # (B, H, c, T)
        w = ac.unsqueeze(-1) * v.unsqueeze(2) - pc.unsqueeze(-1) * o[:, :, s:e].unsqueeze(3)  # (B, H, c, T, dh)
        # Off-diagonal: ‖a Wv + w rᵀ‖² = a²‖Wv‖² + 2a w·(Wv r) + |w|²|r|²
        # (with a LayerNorm, each product in the metric G_i of the key token i).
        wvr = (w * vr_own[:, :, s:e].unsqueeze(3)).sum(-1)  # (B, H, c, T)
        if norm is None:
            head2[:, :, s:e] = ac.pow(2) * wv_sq + 2 * ac * wvr + w.pow(2).sum(-1) * r_sq[:, :, s:e].unsqueeze(-1)
        else:
            iv, ci, urc, grc = inv_var[:, None, None], c_ln[:, None, None], ur[:, :, s:e], gr[:, :, s:e, None]
            wvr = iv * (wvr - torch.einsum("bhjie,he->bhji", w, wv_gain) * grc / d
                        - ci * torch.einsum("bhjie,bhie->bhji", w, wv_un) * urc)  # w·(Wv G_i r_j)
            rgr = iv * (r_sq[:, :, s:e, None] - grc.pow(2) / d - ci * urc.pow(2))  # r_jᵀ G_i r_j
            head2[:, :, s:e] = ac.pow(2) * wv_sq + 2 * ac * wvr + w.pow(2).sum(-1) * rgr
        # Diagonal blocks (i = j), materialised: (B, H, c, dh, d).
        u = scale * torch.einsum("bhime,bhmf->bhief", w, kh)
        w_diag = w[:, :, rows, s + rows]  # (B, H, c, dh)
        a_diag = ac[:, :, rows, s + rows]
        jac = (a_diag[..., None, None] * wv[None, :, None] + w_diag.unsqueeze(-1) * rh[:, :, s:e].unsqueeze(-2)
               + torch.matmul(u, wqh.unsqueeze(1)))
        if norm is None:
            head2[:, :, s + rows, s + rows] = jac.pow(2).sum((-1, -2))
        else:  # ∂o_h[j]/∂x_j = jac J_j
            head2[:, :, s + rows, s + rows] = _metric_diag(jac, gain, inv_var[:, None, s:e], c_ln[:, None, s:e],
                                                           un[:, None, s:e])
        if need_beta:
            wcat = w.permute(0, 2, 3, 1, 4).reshape(B, c, T, d)  # heads concatenated, as Wo's input
            acat = ac.permute(0, 2, 3, 1)  # (B, c, T, H)
            term_n = torch.einsum("bijh,hk,bijk->bij", acat, gram_n, acat)
            cross = 2 * (torch.matmul(wcat, cross_mat[:, s:e]) * acat).sum(-1)
            kmat = (go_blocks * rr[:, s:e, :, None, :, None]).reshape(B, c, d, d)  # symmetric
            term_w = (torch.matmul(wcat, kmat) * wcat).sum(-1)
            beta2[:, s:e] = term_n + cross + term_w
            ydiag = torch.matmul(wo, jac.transpose(1, 2).reshape(B, c, d, d))  # ∂Y[i]/∂x_i, (B, c, d, d)
            beta2[:, s + rows, s + rows] = ydiag.pow(2).sum((-1, -2))

    head = head2.clamp(min=0).sqrt()
    beta = beta2.clamp(min=0).sqrt() if need_beta else None
    if key_padding_mask is not None:
        real = ~key_padding_mask.to(x.device)
        keep = real[:, :, None] & real[:, None, :]  # (B, T, T)
        head = torch.where(keep.unsqueeze(1), head, torch.zeros_like(head))
        if beta is not None:
            beta = torch.where(keep, beta, torch.zeros_like(beta))
    return beta, head


def previous_layer_contribution(head_norms: Tensor) -> Tensor:
    """Hidden Token Attribution of the block input (Pascual et al. Eq. 1):
    c[..., j, i] = norms[..., j, i] / Σ_k norms[..., j, k], 0 where the row
    sum is 0.

    Args:
        head_norms: (..., T, T) Jacobian norms, row = output token.
    Returns:
        (..., T, T), each non-zero row summing to 1.
    """
    total = head_norms.sum(-1, keepdim=True)
    return torch.where(total > 0, head_norms / torch.where(total > 0, total, torch.ones_like(total)),
                       torch.zeros_like(head_norms))
