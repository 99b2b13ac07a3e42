"""Multi-head self-attention written from scratch, and the same layer decoding with a KV cache.

``mha(x, wq, wk, wv, wo, heads, causal, key_padding_mask)`` (Vaswani et al. 2017, §3.2.2): for x [B, T, D]
and H heads of width d = D/H,

    Q = x Wq  [B, T, D] -> view [B, T, H, d] -> transpose(1, 2) -> [B, H, T, d]      (K, V the same)
    S = Q Kᵀ / √d                     the head width d = D/H, not the model width D
    S[.., t, j] = −∞ where key j is hidden: j > t (causal) or key j is padding (key_padding_mask False)
    P = exp(S − max_j S) / Σ_j exp(S − max_j S)      the row max keeps exp from overflowing
    O = P V  [B, H, T, d] -> transpose(1, 2) -> [B, T, H, d] -> reshape [B, T, D];   out = O Wo

Viewing [B, T, D] straight as [B, H, T, d] is the classic slip: head h would then hold T/H consecutive
*tokens'* full feature vectors cut into pieces, so one "token" of a head mixes several real tokens.
A query that sees no key at all (a padded query under a causal mask with left padding) gets 0 from every
head instead of 0/0 = NaN. The softmax runs in fp32 at least; the result has x's dtype.

``cached_attention(x, wq, wk, wv, wo, heads, cache_k, cache_v, base)``: the same layer with RoPE on q and k
(half-split pairs (i, i + d/2), as Hugging Face's Llama; ``impls/arch/rope.py``) for tokens that arrive
after ``S = cache_k.shape[2]`` earlier ones. The new tokens sit at absolute positions S .. S+T−1, so their q
and k are rotated there (not at 0: a key rotated at the wrong position gives every later score the wrong
relative distance). The cache holds the *rotated* keys and the values of every earlier token; the new
keys and values are appended, and query S+i sees keys 0 .. S+i. For one new token (T = 1) that is every
key, so no mask is needed; for a chunk of T > 1 new tokens the causal mask is offset by S (aligned
bottom-right: a top-left ``tril(ones(T, S+T))`` would hide cached keys). Prefill is the call with an empty
cache (S = 0), decoding the calls with T = 1; all of them reproduce the uncached forward of the whole
sequence up to rounding.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from impls.arch.rope import rope


def _split(y: Tensor, heads: int) -> Tensor:
    """[B, T, D] -> [B, H, T, D/H]: view the feature axis as (H, d), then move the head axis forward."""
    b, t, dim = y.shape
    return y.view(b, t, heads, dim // heads).transpose(1, 2)


def _merge(o: Tensor) -> Tensor:
    """[B, H, T, d] -> [B, T, H·d]: the inverse of ``_split``."""
    b, h, t, d = o.shape
    return o.transpose(1, 2).reshape(b, t, h * d)


def _attend(q: Tensor, k: Tensor, v: Tensor, visible: Tensor) -> Tensor:
    """softmax(q kᵀ/√d, hidden keys −∞) v, with the row max subtracted; rows with no visible key give 0.
    q [B, H, T, d], k and v [B, H, S, d], visible boolean broadcastable to [B, H, T, S]."""
    work = torch.promote_types(q.dtype, torch.float32)
    scores = (q.to(work) @ k.to(work).transpose(-1, -2)) / math.sqrt(q.shape[-1])
    scores = scores.masked_fill(~visible, float("-inf"))
    top = scores.amax(dim=-1, keepdim=True)
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))       # a row with no visible key
    e = torch.exp(scores - top)                                                # hidden keys: exp(−∞) = 0
    total = e.sum(dim=-1, keepdim=True)
    p = e / torch.where(total > 0, total, torch.ones_like(total))               # 0 / 1 = 0 for such a row
    return (p @ v.to(work)).to(q.dtype)


def mha(x: Tensor, wq: Tensor, wk: Tensor, wv: Tensor, wo: Tensor, heads: int, causal: bool = False,
        key_padding_mask: Tensor | None = None) -> Tensor:
    """Multi-head self-attention of x [B, T, D] with projections [D, D] (y = x @ w, no bias) and ``heads``
    heads of width D/heads -> [B, T, D].

    ``causal``: query t sees keys j <= t. ``key_padding_mask`` [B, T] bool, True = a real token (False keys
    are hidden from every query). A query with no visible key gets a zero output. Raises ValueError when D
    is not divisible by ``heads``."""
    b, t, dim = x.shape
    if heads < 1 or dim % heads:
        raise ValueError(f"model width {dim} is not divisible by {heads} heads")
    q, k, v = _split(x @ wq, heads), _split(x @ wk, heads), _split(x @ wv, heads)
    visible = torch.ones(t, t, dtype=torch.bool, device=x.device)
    if causal:
        visible = torch.tril(visible)
    visible = visible[None, None]                                               # [1, 1, T, T]
    if key_padding_mask is not None:
        visible = visible & key_padding_mask.to(torch.bool)[:, None, None, :]   # [B, 1, T, T]
    return _merge(_attend(q, k, v, visible)) @ wo


def cached_attention(x: Tensor, wq: Tensor, wk: Tensor, wv: Tensor, wo: Tensor, heads: int, cache_k: Tensor,
                     cache_v: Tensor, base: float = 10000.0) -> tuple[Tensor, Tensor, Tensor]:
    """Causal multi-head attention with RoPE for T new tokens x [B, T, D] after S cached ones.

    ``cache_k``, ``cache_v`` [B, H, S, D/H]: the rotated keys and the values of the S earlier tokens
    (S = 0 for prefill). The new tokens are at absolute positions S .. S+T−1: q and k are rotated there
    with RoPE, pairs (i, i + d/2), θ_i = base^(−2i/d); v is not rotated. Query S+i attends to keys
    0 .. S+i. Returns (out [B, T, D], keys [B, H, S+T, D/H], values [B, H, S+T, D/H]): the caches with
    the new rotated keys and values appended, ready for the next call."""
    b, t, dim = x.shape
    if heads < 1 or dim % heads:
        raise ValueError(f"model width {dim} is not divisible by {heads} heads")
    s = cache_k.shape[2]
    pos = torch.arange(s, s + t, device=x.device)
    q = rope(_split(x @ wq, heads), pos, base, layout="halves")
    k = rope(_split(x @ wk, heads), pos, base, layout="halves")
    v = _split(x @ wv, heads)
    keys = torch.cat([cache_k.to(k.dtype), k], dim=2)
    values = torch.cat([cache_v.to(v.dtype), v], dim=2)
    visible = torch.arange(s + t, device=x.device)[None, :] <= pos[:, None]      # [T, S+T], offset by S
    out = _merge(_attend(q, keys, values, visible[None, None])) @ wo
    return out, keys, values
