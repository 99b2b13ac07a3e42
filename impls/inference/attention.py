"""Attention three ways, each counting the HBM traffic and FLOPs it costs.

Notation of the FlashAttention paper (arXiv 2205.14135): Q ∈ R^{N×d}, K ∈ R^{S×d}, V ∈ R^{S×d_v},
one such problem per (batch, head); M is the on-chip SRAM size in elements.

``naive_attention`` (the paper's Algorithm 0): S = τ·QKᵀ and P = softmax(S) are written to and read back
from HBM, so it moves 4N² + 4Nd elements for N = S, d = d_v (Θ(Nd + N²)) and keeps 2N² extra elements.

``tiled_attention`` (FlashAttention): Q is cut into row blocks of B_r rows and K, V into column blocks of B_c
rows; a block pair is processed on chip with the online-softmax recurrence

    m' = max(m, rowmax(S_ij)),   ℓ' = e^{m−m'}·ℓ + rowsum(e^{S_ij−m'}),   O' = e^{m−m'}·O + e^{S_ij−m'}·V_j,

and O/ℓ at the end (FlashAttention-2 keeps O unnormalised; FlashAttention-1 renormalises every step).
Two loop orders:

* ``loop_order="kv_outer"``: FlashAttention-1, Algorithm 1. K_j, V_j are loaded once; O_i, ℓ_i, m_i are
  read from and written back to HBM for every (j, i): 2Nd + T_c·(3Nd + 4N) + Nd + 2N elements,
  Θ(N²d²/M) with the paper's block sizes B_c = ⌈M/4d⌉, B_r = min(⌈M/4d⌉, d). Extra memory: ℓ, m (2N).
* ``loop_order="q_outer"``: FlashAttention-2, forward. Q_i stays on chip with its accumulators while
  K_j, V_j stream past; O_i and the log-sum-exp L_i are written once: Nd(1 + 2T_r) + Nd + N elements.

``tiled_attention_backward``: FlashAttention's backward by recomputation. It never stores P; it recomputes
S_ij = τ·Q_i K_jᵀ and P_ij = e^{S_ij − L_i} from Q, K and the saved L, then

    dV_j += P_ijᵀ dO_i,  dP_ij = dO_i V_jᵀ,  dS_ij = P_ij ∘ (dP_ij − D_i),  dQ_i += τ·dS_ij K_j,
    dK_j += τ·dS_ijᵀ Q_i,   with D_i = rowsum(dO_i ∘ O_i),

so it does five block matmuls (10·N²d FLOPs for d = d_v) where the standard backward (the paper's
Algorithm 3, ``naive_attention_backward``) does four (8·N²d) from the stored P.

All functions are batched over any leading dimensions (batch, heads), take a boolean ``mask``
broadcastable to [..., N, S] (True = attend) and a ``causal`` flag aligned bottom-right (query i sees keys
j ≤ i + S − N, the decoding convention), and work on any device. Counting is optional (``counter``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass
class IOCount:
    """Elements moved between HBM and SRAM and FLOPs spent, summed over all (batch, head) problems."""

    hbm_read: int = 0
    hbm_written: int = 0
    matmul_flops: int = 0
    extra_hbm: int = 0  # intermediates kept in HBM beyond Q, K, V, O (and dO, dQ, dK, dV)
    block_pairs: int = 0

    def read(self, *ts: Tensor) -> None:
        self.hbm_read += sum(t.numel() for t in ts)

    def write(self, *ts: Tensor) -> None:
        self.hbm_written += sum(t.numel() for t in ts)

    def keep(self, *ts: Tensor) -> None:
        self.extra_hbm += sum(t.numel() for t in ts)

    def mm(self, out: Tensor, inner: int) -> None:
        """A matmul producing ``out`` with contraction length ``inner``: 2·|out|·inner FLOPs."""
        self.matmul_flops += 2 * out.numel() * inner

    @property
    def hbm_total(self) -> int:
        return self.hbm_read + self.hbm_written


def fa1_block_sizes(sram_elements: int, d: int) -> tuple[int, int]:
    """FlashAttention Algorithm 1, line 1: B_c = ⌈M/4d⌉, B_r = min(⌈M/4d⌉, d). Returns (B_r, B_c)."""
    if sram_elements < 4 * d:
        raise ValueError(f"SRAM of {sram_elements} elements cannot hold a 4×d = {4 * d} working set")
    bc = math.ceil(sram_elements / (4 * d))
    return min(bc, d), bc


def _exp_log(exp2: bool):
    return (torch.exp2, torch.log2) if exp2 else (torch.exp, torch.log)


def _visible(n: int, s: int, causal: bool, mask: Tensor | None, rows: slice, cols: slice,
             device) -> Tensor | None:
    """The boolean [.., rows, cols] mask of one block (None when every position is visible)."""
    vis = None
    if causal:
        r = torch.arange(rows.start, rows.stop, device=device)[:, None]
        c = torch.arange(cols.start, cols.stop, device=device)[None, :]
        vis = c <= r + (s - n)
        if bool(vis.all()):
            vis = None
    if mask is not None:
        m = mask[..., rows, cols]
        vis = m if vis is None else (vis & m)
    return vis


def correction(m_old: Tensor, m_new: Tensor, exp) -> Tensor:
    """The online-softmax rescale e^{m_old − m_new} of what was accumulated under the old running max
    (0 where nothing was accumulated yet, m_old = −∞)."""
    return torch.where(torch.isinf(m_old), torch.zeros_like(m_new), exp(m_old - m_new))


def naive_attention(q: Tensor, k: Tensor, v: Tensor, *, causal: bool = False, mask: Tensor | None = None,
                    scale: float | None = None, counter: IOCount | None = None, exp2: bool = False,
                    return_probs: bool = False):
    """O = softmax(τ·QKᵀ)V, materialising S and P (Algorithm 0). Returns (O, L) with L the row log-sum-exp,
    or (O, L, P) with ``return_probs``. Rows with no visible key give O = 0, L = −∞."""
    exp, log = _exp_log(exp2)
    n, s_len = q.shape[-2], k.shape[-2]
    tau = q.shape[-1] ** -0.5 if scale is None else scale
    if mask is not None:
        mask = mask.expand(*q.shape[:-2], n, s_len)
    c = counter or IOCount()
    c.read(q, k)
    s = (q @ k.transpose(-1, -2)) * tau
    c.mm(s, q.shape[-1])
    c.write(s)
    c.keep(s)
    vis = _visible(n, s_len, causal, mask, slice(0, n), slice(0, s_len), q.device)
    c.read(s)
    if vis is not None:
        s = s.masked_fill(~vis, float("-inf"))
    m = s.amax(-1, keepdim=True)
    m_safe = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    e = exp(s - m_safe)
    l = e.sum(-1, keepdim=True)
    p = e / l.clamp_min(torch.finfo(l.dtype).tiny)
    c.write(p)
    c.keep(p)
    c.read(p, v)
    o = p @ v
    c.mm(o, s_len)
    c.write(o)
    lse = torch.where(l > 0, m_safe + log(l), torch.full_like(l, float("-inf"))).squeeze(-1)
    return (o, lse, p) if return_probs else (o, lse)


def naive_attention_backward(q: Tensor, k: Tensor, v: Tensor, p: Tensor, do: Tensor, *,
                             scale: float | None = None, counter: IOCount | None = None):
    """The standard backward from the stored P (Algorithm 3): dV = PᵀdO, dP = dO Vᵀ,
    dS = P∘(dP − rowsum(dP∘P)), dQ = τ·dS K, dK = τ·dSᵀQ; dP and dS go through HBM."""
    tau = q.shape[-1] ** -0.5 if scale is None else scale
    c = counter or IOCount()
    c.read(p, do)
    dv = p.transpose(-1, -2) @ do
    c.mm(dv, p.shape[-2])
    c.write(dv)
    c.read(do, v)
    dp = do @ v.transpose(-1, -2)
    c.mm(dp, do.shape[-1])
    c.write(dp)
    c.keep(dp)
    c.read(p, dp)
    ds = p * (dp - (dp * p).sum(-1, keepdim=True))
    c.write(ds)
    c.keep(ds)
    c.read(ds, k)
    dq = (ds @ k) * tau
    c.mm(dq, ds.shape[-1])
    c.write(dq)
    c.read(ds, q)
    dk = (ds.transpose(-1, -2) @ q) * tau
    c.mm(dk, ds.shape[-2])
    c.write(dk)
    return dq, dk, dv


def _blocks(n: int, b: int):
    return [slice(i, min(i + b, n)) for i in range(0, n, b)]


def _skip(rows: slice, cols: slice, n: int, s_len: int, causal: bool) -> bool:
    """A block every query of which sees none of its keys under the causal mask (never loaded)."""
    return causal and cols.start > rows.stop - 1 + (s_len - n)


def tiled_attention(q: Tensor, k: Tensor, v: Tensor, *, block_q: int, block_k: int, causal: bool = False,
                    mask: Tensor | None = None, scale: float | None = None, loop_order: str = "q_outer",
                    counter: IOCount | None = None, exp2: bool = False):
    """FlashAttention forward: (O, L) equal to ``naive_attention`` in exact arithmetic without ever holding
    an N×S matrix. ``exp2`` uses 2^x (kernels fold log2 e into τ); with integer scores every intermediate
    is then a dyadic rational, which makes the exactness checkable bit for bit."""
    if loop_order not in ("q_outer", "kv_outer"):
        raise ValueError(f"loop_order must be 'q_outer' or 'kv_outer', not {loop_order!r}")
    if block_q < 1 or block_k < 1:
        raise ValueError("block sizes must be positive")
    exp, log = _exp_log(exp2)
    n, s_len, dv = q.shape[-2], k.shape[-2], v.shape[-1]
    tau = q.shape[-1] ** -0.5 if scale is None else scale
    if mask is not None:
        mask = mask.expand(*q.shape[:-2], n, s_len)
    c = counter or IOCount()
    lead = q.shape[:-2]
    acc_dtype = torch.promote_types(q.dtype, torch.float32)
    rows_all, cols_all = _blocks(n, block_q), _blocks(s_len, block_k)
    o = torch.zeros(*lead, n, dv, dtype=acc_dtype, device=q.device)
    lse = torch.full((*lead, n), float("-inf"), dtype=acc_dtype, device=q.device)

    def scores(rows: slice, cols: slice) -> Tensor:
        s = (q[..., rows, :].to(acc_dtype) @ k[..., cols, :].to(acc_dtype).transpose(-1, -2)) * tau
        c.mm(s, q.shape[-1])
        c.block_pairs += 1
        vis = _visible(n, s_len, causal, mask, rows, cols, q.device)
        return s if vis is None else s.masked_fill(~vis, float("-inf"))

    if loop_order == "q_outer":
        for rows in rows_all:
            c.read(q[..., rows, :])
            br = rows.stop - rows.start
            m = torch.full((*lead, br), float("-inf"), dtype=acc_dtype, device=q.device)
            l = torch.zeros_like(m)
            acc = torch.zeros(*lead, br, dv, dtype=acc_dtype, device=q.device)
            for cols in cols_all:
                if _skip(rows, cols, n, s_len, causal):
                    continue
                c.read(k[..., cols, :], v[..., cols, :])
                s = scores(rows, cols)
                m_new = torch.maximum(m, s.amax(-1))
                m_safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
                alpha = correction(m, m_safe, exp)
                p = exp(s - m_safe[..., None])
                l = alpha * l + p.sum(-1)
                pv = p @ v[..., cols, :].to(acc_dtype)
                c.mm(pv, cols.stop - cols.start)
                acc = alpha[..., None] * acc + pv
                m = m_new
            o[..., rows, :] = acc / l.clamp_min(torch.finfo(acc_dtype).tiny)[..., None]
            lse[..., rows] = torch.where(l > 0, m + log(l.clamp_min(torch.finfo(acc_dtype).tiny)),
                                         torch.full_like(l, float("-inf")))
            c.write(o[..., rows, :], lse[..., rows])
        return o.to(q.dtype), lse

    # FlashAttention-1, Algorithm 1: O, ℓ, m live in HBM and are updated for every block pair.
    l_hbm = torch.zeros((*lead, n), dtype=acc_dtype, device=q.device)
    m_hbm = torch.full((*lead, n), float("-inf"), dtype=acc_dtype, device=q.device)
    c.write(o, l_hbm, m_hbm)
    c.keep(l_hbm, m_hbm)
    for cols in cols_all:
        c.read(k[..., cols, :], v[..., cols, :])
        for rows in rows_all:
            if _skip(rows, cols, n, s_len, causal):
                continue
            c.read(o[..., rows, :], l_hbm[..., rows], m_hbm[..., rows], q[..., rows, :])
            s = scores(rows, cols)
            m_i, l_i, o_i = m_hbm[..., rows], l_hbm[..., rows], o[..., rows, :]
            m_t = s.amax(-1)
            m_t_safe = torch.where(torch.isinf(m_t), torch.zeros_like(m_t), m_t)
            p_t = exp(s - m_t_safe[..., None])
            l_t = p_t.sum(-1)
            m_new = torch.maximum(m_i, m_t)
            m_new_safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
            a_old = correction(m_i, m_new_safe, exp)
            a_new = correction(m_t, m_new_safe, exp)
            l_new = a_old * l_i + a_new * l_t
            pv = p_t @ v[..., cols, :].to(acc_dtype)
            c.mm(pv, cols.stop - cols.start)
            denom = l_new.clamp_min(torch.finfo(acc_dtype).tiny)[..., None]
            o[..., rows, :] = ((l_i * a_old)[..., None] * o_i + a_new[..., None] * pv) / denom
            l_hbm[..., rows] = l_new
            m_hbm[..., rows] = m_new
            c.write(o[..., rows, :], l_hbm[..., rows], m_hbm[..., rows])
    lse = torch.where(l_hbm > 0, m_hbm + log(l_hbm.clamp_min(torch.finfo(acc_dtype).tiny)),
                      torch.full_like(l_hbm, float("-inf")))
    return o.to(q.dtype), lse


def tiled_attention_backward(q: Tensor, k: Tensor, v: Tensor, o: Tensor, lse: Tensor, do: Tensor, *,
                             block_q: int, block_k: int, causal: bool = False, mask: Tensor | None = None,
                             scale: float | None = None, counter: IOCount | None = None):
    """dQ, dK, dV by recomputation (FlashAttention Algorithm 4 with the saved log-sum-exp L, as in
    FlashAttention-2): K/V blocks outside, Q blocks inside, nothing of size N×S stored."""
    n, s_len = q.shape[-2], k.shape[-2]
    tau = q.shape[-1] ** -0.5 if scale is None else scale
    if mask is not None:
        mask = mask.expand(*q.shape[:-2], n, s_len)
    c = counter or IOCount()
    acc = torch.promote_types(q.dtype, torch.float32)
    qf, kf, vf, of, dof = (t.to(acc) for t in (q, k, v, o, do))
    c.read(do, o)
    big_d = (dof * of).sum(-1)                      # D_i = rowsum(dO_i ∘ O_i)
    c.write(big_d)
    c.keep(big_d)
    dq = torch.zeros_like(qf)
    dk = torch.zeros_like(kf)
    dv = torch.zeros_like(vf)
    c.write(dq)
    lse_safe = torch.where(torch.isinf(lse), torch.zeros_like(lse), lse)
    for cols in _blocks(s_len, block_k):
        kj, vj = kf[..., cols, :], vf[..., cols, :]
        c.read(kj, vj)
        dkj = torch.zeros_like(kj)
        dvj = torch.zeros_like(vj)
        for rows in _blocks(n, block_q):
            if _skip(rows, cols, n, s_len, causal):
                continue
            qi, doi = qf[..., rows, :], dof[..., rows, :]
            c.read(qi, doi, dq[..., rows, :], lse[..., rows], big_d[..., rows])
            s = (qi @ kj.transpose(-1, -2)) * tau
            c.mm(s, q.shape[-1])
            c.block_pairs += 1
            p = torch.exp(s - lse_safe[..., rows, None])
            vis = _visible(n, s_len, causal, mask, rows, cols, q.device)
            if vis is not None:
                p = p.masked_fill(~vis, 0.0)
            p = torch.where(torch.isinf(lse[..., rows, None]), torch.zeros_like(p), p)
            pt_do = p.transpose(-1, -2) @ doi
            c.mm(pt_do, rows.stop - rows.start)
            dvj = dvj + pt_do
            dp = doi @ vj.transpose(-1, -2)
            c.mm(dp, v.shape[-1])
            ds = p * (dp - big_d[..., rows, None])
            dqi = (ds @ kj) * tau
            c.mm(dqi, cols.stop - cols.start)
            dq[..., rows, :] += dqi
            c.write(dq[..., rows, :])
            dsq = (ds.transpose(-1, -2) @ qi) * tau
            c.mm(dsq, rows.stop - rows.start)
            dkj = dkj + dsq
        dk[..., cols, :] = dkj
        dv[..., cols, :] = dvj
        c.write(dkj, dvj)
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def split_kv_attention(q: Tensor, k: Tensor, v: Tensor, *, num_splits: int, causal: bool = False,
                       mask: Tensor | None = None, scale: float | None = None, block_k: int = 64):
    """Split-KV attention (Flash-Decoding): the S keys are cut into ``num_splits`` contiguous chunks whose
    partial results are independent work items (B·H·num_splits of them, where the query-block parallelism of
    FlashAttention-2 leaves only B·H when a decode step has one query row), then merged exactly:

        (O_s, L_s) = attention of Q over chunk s,   L = log Σ_s e^{L_s},   O = Σ_s e^{L_s − L} O_s.

    A chunk no query sees has L_s = −∞ and weight 0. Returns (O, L) like ``tiled_attention``."""
    if num_splits < 1:
        raise ValueError("num_splits must be positive")
    n, s_len = q.shape[-2], k.shape[-2]
    tau = q.shape[-1] ** -0.5 if scale is None else scale
    vis = None
    if causal:
        vis = torch.arange(s_len, device=q.device)[None, :] <= torch.arange(n, device=q.device)[:, None] + (s_len - n)
    if mask is not None:
        vis = mask if vis is None else vis & mask
    size = -(-s_len // num_splits)
    parts = []
    for start in range(0, s_len, size):
        cols = slice(start, min(start + size, s_len))
        part_mask = None if vis is None else vis[..., cols]
        parts.append(tiled_attention(q, k[..., cols, :], v[..., cols, :], block_q=max(n, 1), block_k=block_k,
                                     mask=part_mask, scale=tau))
    lse_parts = torch.stack([lse for _, lse in parts])                  # [splits, ..., N]
    lse = torch.logsumexp(lse_parts, 0)
    lse_safe = torch.where(torch.isinf(lse), torch.zeros_like(lse), lse)
    weights = torch.exp(lse_parts - lse_safe)                            # e^{L_s − L}, 0 for empty chunks
    o = sum(w[..., None] * o_s.to(w.dtype) for w, (o_s, _) in zip(weights, parts))
    return o.to(q.dtype), lse


def standard_forward_io(n: int, d: int) -> int:
    """HBM elements of Algorithm 0 for one head, N = S, d = d_v: read 3Nd + 2N², write Nd + 2N²."""
    return 4 * n * n + 4 * n * d


def fa1_forward_io(n: int, d: int, block_q: int, block_k: int) -> int:
    """HBM elements of Algorithm 1 for one head (no mask): initialise O, ℓ, m (Nd + 2N); per K/V block read
    K_j, V_j; per block pair read Q_i, O_i, ℓ_i, m_i and write O_i, ℓ_i, m_i: Nd + 2N + 2Nd + T_c(3Nd + 4N)."""
    t_c = math.ceil(n / block_k)
    return n * d + 2 * n + 2 * n * d + t_c * (3 * n * d + 4 * n)


def fa2_forward_io(n: int, d: int, block_q: int, block_k: int) -> int:
    """HBM elements of the Q-outer forward for one head (no mask): read Q once and K, V once per Q block,
    write O and L once: Nd + T_r·2Nd + Nd + N."""
    t_r = math.ceil(n / block_q)
    return 2 * n * d + t_r * 2 * n * d + n
