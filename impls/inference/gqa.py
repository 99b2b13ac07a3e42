"""MHA, GQA and MQA as one function of the number of K/V heads.

With H query heads and H_kv key/value heads (H_kv divides H, group size G = H / H_kv), query head h
attends with K/V head ⌊h / G⌋ (consecutive query heads share a K/V head, as in Hugging Face's
``repeat_kv``):

    O_h = softmax(τ · Q_h K_{⌊h/G⌋}ᵀ + mask) V_{⌊h/G⌋},   τ = 1/√d.

H_kv = H is multi-head attention, H_kv = 1 multi-query attention (Shazeer 2019), anything between is
grouped-query attention (Ainslie et al. 2023). The K/V heads are never copied G times: Q is viewed as
[B, H_kv, G, T, d] and broadcast against K/V of shape [B, H_kv, 1, S, d].
"""

from __future__ import annotations

import torch
from torch import Tensor


def grouped_query_attention(q: Tensor, k: Tensor, v: Tensor, *, causal: bool = False,
                            key_padding_mask: Tensor | None = None, scale: float | None = None) -> Tensor:
    """q [B, H, T, d], k [B, H_kv, S, d], v [B, H_kv, S, d_v] -> [B, H, T, d_v].

    ``key_padding_mask`` [B, S] (True = a real key); ``causal`` aligns the mask bottom-right so a query
    at position i of T sees keys j <= i + S - T (prefill: S = T; decoding with a cache: S > T).
    Softmax in fp32 at least (fp64 inputs stay fp64)."""
    b, h, t, d = q.shape
    h_kv, s = k.shape[1], k.shape[2]
    if h % h_kv:
        raise ValueError(f"{h} query heads cannot share {h_kv} K/V heads evenly")
    g = h // h_kv
    tau = d ** -0.5 if scale is None else scale
    acc = torch.promote_types(q.dtype, torch.float32)
    qg = q.reshape(b, h_kv, g, t, d).to(acc)
    scores = (qg @ k.to(acc).unsqueeze(2).transpose(-1, -2)) * tau          # [B, H_kv, G, T, S]
    visible = torch.ones(t, s, dtype=torch.bool, device=q.device)
    if causal:
        visible = torch.arange(s, device=q.device)[None, :] <= torch.arange(t, device=q.device)[:, None] + (s - t)
    visible = visible.expand(b, 1, 1, t, s)
    if key_padding_mask is not None:
        visible = visible & key_padding_mask[:, None, None, None, :].bool()
    scores = scores.masked_fill(~visible, float("-inf"))
    p = torch.softmax(scores, dim=-1).nan_to_num(0.0)                         # rows with no key -> 0
    out = p @ v.to(acc).unsqueeze(2)                                          # [B, H_kv, G, T, d_v]
    return out.reshape(b, h, t, v.shape[-1]).to(q.dtype)
