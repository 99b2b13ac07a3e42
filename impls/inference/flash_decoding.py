r"""Flash-Decoding: one new query per sequence attending to a long KV cache, split along the keys.

A FlashAttention-2 forward runs one program per (query block, batch, head): the grid of
``flash_attention_triton`` is ``(⌈N_q / BLOCK_M⌉, B·H)``. A decode step has N_q = 1, so it launches B·H
programs — 32 for a 32-head model at batch 1, on a GPU with 132 SMs (H100 SXM) — and each walks the whole
cache alone. Flash-Decoding (Dao, Haziza, Massa & Sizov 2023) cuts the N cached keys into S splits, runs
B·H·S programs, each returning for its split s

    m_s = max_j τ q·k_j,   ℓ_s = Σ_j e^{τ q·k_j − m_s},   o_s = Σ_j e^{τ q·k_j − m_s} v_j / ℓ_s,
    lse_s = m_s + log ℓ_s,

and merges them with the log-sum-exp rescale (exact, nothing approximated):

    lse = log Σ_s e^{lse_s},     o = Σ_s e^{lse_s − lse} · o_s.

An empty split (all its keys masked or past the sequence's length) has lse_s = −∞ and weight 0.
``num_splits_heuristic`` is FlashAttention-2's choice of S (``flash_api.cpp``): the smallest S whose wave
efficiency B·H·S / (⌈B·H·S / P⌉·P) is within 85% of the best, P = 2 × SMs, S <= min(128, P, key blocks).

Inputs: ``q [B, H, d]``, ``k, v [B, H_kv, N, d]`` (GQA: H a multiple of H_kv), optional per-sequence
``lengths [B]`` for a padded cache. Accumulation in fp32 for 16-bit inputs (fp64 kept), any device.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

# streaming multiprocessors per GPU (NVIDIA H100 / A100 whitepapers: H100 SXM5 132, H100 PCIe 114, A100 108)
SMS = {"H100-SXM": 132, "H100-PCIe": 114, "A100": 108}


def _acc_dtype(*ts: Tensor) -> torch.dtype:
    dt = ts[0].dtype
    for t in ts[1:]:
        dt = torch.promote_types(dt, t.dtype)
    return torch.promote_types(dt, torch.float32)


def _shapes(q: Tensor, k: Tensor, v: Tensor, num_splits: int) -> tuple[int, int, int, int, int]:
    """(B, H, d, H_kv, N), after checking q [B, H, d], k, v [B, H_kv, N, d] with H a multiple of H_kv."""
    if q.dim() != 3 or k.dim() != 4 or k.shape != v.shape[:3] + k.shape[3:] or v.shape[:3] != k.shape[:3]:
        raise ValueError(f"expected q [B,H,d], k, v [B,Hkv,N,d]; got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    b, h, d = q.shape
    _, h_kv, n, _ = k.shape
    if k.shape[0] != b or k.shape[3] != d or h % h_kv:
        raise ValueError(f"q {tuple(q.shape)} does not match k {tuple(k.shape)} (H must be a multiple of H_kv)")
    if num_splits < 1:
        raise ValueError(f"num_splits must be >= 1, got {num_splits}")
    return b, h, d, h_kv, n


def _split_size(n: int, num_splits: int) -> int:
    """Keys per split: ⌈N / S⌉ (at least 1), so S splits cover all N keys and the last may be short or empty."""
    return max(1, math.ceil(n / num_splits))


def split_partials(q: Tensor, k: Tensor, v: Tensor, num_splits: int, *, lengths: Tensor | None = None,
                   scale: float | None = None) -> tuple[Tensor, Tensor]:
    """Per-split results: ``o_parts [B, H, S, d]`` (each normalised within its split) and
    ``lse_parts [B, H, S]`` (−∞ for an empty split)."""
    b, h, d, h_kv, n = _shapes(q, k, v, num_splits)
    acc = _acc_dtype(q, k, v)
    tau = d ** -0.5 if scale is None else scale
    group = h // h_kv
    qf = q.to(acc).view(b, h_kv, group, d)
    kf, vf = k.to(acc), v.to(acc)
    valid = torch.arange(n, device=q.device).expand(b, n)
    valid = valid < (torch.full((b, 1), n, device=q.device) if lengths is None else lengths.to(q.device).view(b, 1))
    chunk = _split_size(n, num_splits)
    o_parts, lse_parts = [], []
    for s in range(num_splits):
        lo, hi = min(n, s * chunk), min(n, (s + 1) * chunk)
        scores = torch.einsum("bgqd,bgnd->bgqn", qf, kf[:, :, lo:hi]) * tau          # [B, Hkv, G, n_s]
        mask = valid[:, lo:hi].view(b, 1, 1, hi - lo)
        scores = scores.masked_fill(~mask, float("-inf"))
        m = scores.amax(-1, keepdim=True) if hi > lo else torch.full((b, h_kv, group, 1), float("-inf"), dtype=acc,
                                                                      device=q.device)
        m_safe = torch.where(torch.isinf(m), torch.zeros_like(m), m)
        e = torch.exp(scores - m_safe)
        l = e.sum(-1, keepdim=True)
        o = torch.einsum("bgqn,bgnd->bgqd", e, vf[:, :, lo:hi]) / l.clamp_min(torch.finfo(acc).tiny)
        lse = torch.where(l > 0, m_safe + torch.log(l), torch.full_like(l, float("-inf")))
        o_parts.append(o.reshape(b, h, d))
        lse_parts.append(lse.reshape(b, h))
    return torch.stack(o_parts, dim=2), torch.stack(lse_parts, dim=2)


def merge_partials(o_parts: Tensor, lse_parts: Tensor) -> tuple[Tensor, Tensor]:
    """lse = log Σ_s e^{lse_s}; o = Σ_s e^{lse_s − lse} o_s, over the split dim (−2 of ``o_parts``, −1 of
    ``lse_parts``). All-empty rows give o = 0 and lse = −∞."""
    lse = torch.logsumexp(lse_parts, dim=-1)
    lse_safe = torch.where(torch.isinf(lse), torch.zeros_like(lse), lse)
    w = torch.exp(lse_parts - lse_safe.unsqueeze(-1))                     # 0 for empty splits
    return (w.unsqueeze(-1) * o_parts).sum(-2), lse


def split_kv_attention(q: Tensor, k: Tensor, v: Tensor, num_splits: int, *, lengths: Tensor | None = None,
                       scale: float | None = None) -> tuple[Tensor, Tensor]:
    """softmax(τ q Kᵀ) V for one query per (sequence, head), computed in ``num_splits`` key splits and merged;
    returns (o [B, H, d] in q's dtype, lse [B, H] in the accumulation dtype)."""
    o_parts, lse_parts = split_partials(q, k, v, num_splits, lengths=lengths, scale=scale)
    o, lse = merge_partials(o_parts, lse_parts)
    return o.to(q.dtype), lse


def unified_max_attention(q: Tensor, k: Tensor, v: Tensor, num_splits: int, phi: float, *,
                          scale: float | None = None) -> tuple[Tensor, Tensor]:
    r"""FlashDecoding++'s asynchronized softmax (Hong et al. 2023, §3): every split subtracts the same $\phi$,
    fixed before any split runs (from statistics of the model's scores), so the partials merge by plain sums
    with no maximum exchanged and no rescale:

        O = Σ_s Σ_{j∈s} e^{x_j − φ} v_j / Σ_s Σ_{j∈s} e^{x_j − φ},   x_j = τ q·k_j.

    Exact while every $x_j - \phi$ stays inside exp's range. Returns ``(o [B, H, d], recompute [B, H])``:
    ``recompute`` marks the rows where it did not (some $e^{x-\phi}$ overflowed, or every one underflowed to
    0), which FlashDecoding++ recomputes with the synchronized maximum; their ``o`` is not usable."""
    b, h, d, h_kv, n = _shapes(q, k, v, num_splits)
    acc = _acc_dtype(q, k, v)
    tau = d ** -0.5 if scale is None else scale
    qf = q.to(acc).view(b, h_kv, h // h_kv, d)
    chunk = _split_size(n, num_splits)
    num = torch.zeros(b, h_kv, h // h_kv, d, dtype=acc, device=q.device)
    den = torch.zeros(b, h_kv, h // h_kv, 1, dtype=acc, device=q.device)
    for s in range(num_splits):                      # each split alone: nothing it needs comes from another split
        lo, hi = min(n, s * chunk), min(n, (s + 1) * chunk)
        e = torch.exp(torch.einsum("bgqd,bgnd->bgqn", qf, k[:, :, lo:hi].to(acc)) * tau - phi)
        num = num + torch.einsum("bgqn,bgnd->bgqd", e, v[:, :, lo:hi].to(acc))
        den = den + e.sum(-1, keepdim=True)
    recompute = ~torch.isfinite(den) | ~torch.isfinite(num).all(-1, keepdim=True) | (den == 0)
    return (num / den).reshape(b, h, d).to(q.dtype), recompute.reshape(b, h)


def decode_programs(batch: int, heads: int, num_splits: int = 1) -> int:
    """Programs (thread blocks) one decode step launches: FlashAttention-2 B·H (one query block), split-KV B·H·S."""
    return batch * heads * num_splits


def wave_efficiency(programs: int, sms: int) -> float:
    """Share of SM slots busy over the waves a launch needs: programs / (⌈programs / SMs⌉ · SMs)."""
    return programs / (math.ceil(programs / sms) * sms)


def num_splits_heuristic(batch_heads_mblocks: int, sm_budget: int, key_blocks: int, max_splits: int = 128) -> int:
    """FlashAttention-2's split count (``flash_api.cpp``; it passes ``sm_budget`` = 2 × SMs): 1 if the
    programs already fill 80% of the budget; else, among the *eligible* S <= min(max_splits, budget,
    key_blocks) (one that changes ⌈key_blocks / S⌉, so no split is empty), the smallest whose wave efficiency
    is at least 85% of the best."""
    if batch_heads_mblocks >= 0.8 * sm_budget:
        return 1
    limit = min(max_splits, sm_budget, key_blocks)

    def eligible(s: int) -> bool:
        return s == 1 or math.ceil(key_blocks / s) != math.ceil(key_blocks / (s - 1))

    eff = {s: wave_efficiency(batch_heads_mblocks * s, sm_budget) for s in range(1, limit + 1) if eligible(s)}
    if not eff:
        return 1
    best = max(eff.values())
    return next(s for s in sorted(eff) if eff[s] >= 0.85 * best)
