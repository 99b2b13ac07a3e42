"""Attention basics: why the 1/√d_k, where the causal mask goes, what multi-head attention costs.

Scaled dot-product attention (Vaswani et al. 2017, §3.2.1, Eq. 1): softmax(QKᵀ/√d_k)V. If the components of
q and k are independent with mean 0 and variance 1, q·k = Σ_i q_i k_i has mean 0 and variance d_k (their
footnote 4), so unscaled logits grow like √d_k and the softmax saturates: its Jacobian
J = diag(p) − ppᵀ tends to 0 as p tends to one-hot, and the gradient reaching Q and K shrinks.
``saturation`` measures this on random q, k.

Masking (``masked_softmax``): a causal mask sets the scores of future keys (j > i) to a fill value before the
softmax. The fill can be −∞ or a large negative number, written in place (``masked_fill``; PyTorch refuses a
value the dtype cannot hold, e.g. −1e9 in fp16) or added to the scores as a mask built by multiplication,
(1 − visible)·fill in the scores' dtype (how additive attention masks are usually made: −1e9 then becomes
−∞ in fp16, and −∞ itself gives 0·(−∞) = NaN at every visible position). Rows with a visible key agree
whatever the fill; the fully masked row (every key hidden, as for a padding query) does not: −∞ gives
0/0 = NaN, a finite fill a uniform distribution over the hidden keys. ``post_softmax_mask`` is the common mistake: softmax over all
keys, then zero the future ones (optionally renormalising).

``multihead_self_attention`` runs H heads of width d/H on one input: the same projection matrices as one head
of width d, H score matrices of T×T×(d/H) instead of one of T×T×d, so the same matmul FLOPs.
"""

from __future__ import annotations

import torch
from torch import Tensor

from impls.inference.attention import naive_attention


def softmax_jacobian_norm(p: Tensor) -> Tensor:
    """‖diag(p) − ppᵀ‖_F over the last dimension: Σp² − 2Σp³ + (Σp²)², square-rooted."""
    s2, s3 = (p * p).sum(-1), (p ** 3).sum(-1)
    return (s2 - 2 * s3 + s2 * s2).clamp_min(0).sqrt()


def saturation(d: int, scaled: bool, n_keys: int = 64, n_queries: int = 256, seed: int = 0,
               dtype: torch.dtype = torch.float64) -> dict[str, float]:
    """Softmax statistics for q, k ~ N(0, I_d) (one query row against ``n_keys`` keys), averaged over
    ``n_queries`` rows: logit std, mean max probability, mean entropy (nats), mean ‖softmax Jacobian‖_F,
    the share of keys with probability below 1e-4 (their gradient, p_j·(g_j − p·g), is at most that: they
    get no learning signal), and the mean norm of ∂(g·softmax)/∂q for a random unit g."""
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(n_queries, 1, d, generator=g, dtype=dtype, requires_grad=True)
    k = torch.randn(n_queries, n_keys, d, generator=g, dtype=dtype)
    up = torch.randn(n_queries, 1, n_keys, generator=g, dtype=dtype)
    up = up / up.norm(dim=-1, keepdim=True)
    logits = q @ k.transpose(-1, -2) * (d ** -0.5 if scaled else 1.0)
    p = torch.softmax(logits, -1)
    (grad_q,) = torch.autograd.grad((p * up).sum(), q)
    p, logits = p.detach(), logits.detach()
    ent = -(p * torch.log(p.clamp_min(torch.finfo(dtype).tiny))).sum(-1)
    return {"logit_std": float(logits.std()), "max_prob": float(p.amax(-1).mean()), "entropy": float(ent.mean()),
            "jacobian_norm": float(softmax_jacobian_norm(p).mean()), "starved_keys": float((p < 1e-4).double().mean()),
            "grad_q_norm": float(grad_q.norm(dim=-1).mean())}


def causal_visible(n: int, s: int | None = None, device=None) -> Tensor:
    """[n, s] boolean, True where query i may see key j: j <= i + s - n (bottom-right aligned)."""
    s = n if s is None else s
    return torch.arange(s, device=device)[None, :] <= torch.arange(n, device=device)[:, None] + (s - n)


def masked_softmax(scores: Tensor, visible: Tensor, fill: float | str = "-inf", additive: bool = False) -> Tensor:
    """softmax over the last dimension with hidden scores replaced by ``fill`` (``masked_fill``) or, with
    ``additive``, plus the mask (1 − visible)·fill built in the scores' dtype; computed in that dtype as a
    framework would. ``fill`` is a number, ``"-inf"`` or ``"min"`` (the dtype's most negative finite value)."""
    if fill == "-inf":
        value = float("-inf")
    elif fill == "min":
        value = torch.finfo(scores.dtype).min
    else:
        value = float(fill)
    if additive:
        bias = (~visible).to(scores.dtype) * value          # 0·(−∞) = NaN, −1e9 → −∞ in fp16: as it happens
        return torch.softmax(scores + bias, dim=-1)
    return torch.softmax(scores.masked_fill(~visible, value), dim=-1)


def post_softmax_mask(scores: Tensor, visible: Tensor, renormalize: bool = False) -> Tensor:
    """The mistake: softmax over every key, then multiply the hidden ones by 0 (and maybe renormalise)."""
    p = torch.softmax(scores, dim=-1) * visible
    return p / p.sum(-1, keepdim=True) if renormalize else p


def multihead_self_attention(x: Tensor, wq: Tensor, wk: Tensor, wv: Tensor, wo: Tensor, heads: int,
                             causal: bool = False) -> tuple[Tensor, Tensor]:
    """x [B, T, d] with projections [d, d] (y = x @ w) split into ``heads`` heads of d/heads:
    returns (output [B, T, d], attention probabilities [B, H, T, T])."""
    b, t, d = x.shape
    if d % heads:
        raise ValueError(f"width {d} is not divisible by {heads} heads")

    def split(w: Tensor) -> Tensor:
        return (x @ w).view(b, t, heads, d // heads).transpose(1, 2)

    o, _, p = naive_attention(split(wq), split(wk), split(wv), causal=causal, return_probs=True)
    return o.transpose(1, 2).reshape(b, t, d) @ wo, p
