r"""FlashAttention forward as a Triton kernel: tiled attention with the online-softmax recurrence.

$O = \operatorname{softmax}(QK^\top\!\cdot s + M)\,V$ with scale $s$ (default $1/\sqrt d$) and, when
``causal``, $M_{ij} = -\infty$ for $j > i + N_k - N_q$: aligned bottom-right, as ``impls/inference/attention.py``,
FlashAttention ≥ 2.1 and a decode or chunked-prefill step against a cache do (the last query sees every key).
``scaled_dot_product_attention``'s ``is_causal`` aligns top-left; the two agree when $N_q = N_k$. One program owns ``BLOCK_M`` query rows of one (batch, head): it keeps $Q_i$, a
running row maximum $m$, a running denominator $\ell$ and an unnormalised output $\tilde O$ on chip,
and streams the key/value tiles $K_j, V_j$ (``BLOCK_N`` rows each) through it (Dao et al. 2022, Alg. 1;
the loop order of FlashAttention-2):

$$S = Q_iK_j^\top s,\quad m' = \max(m, \operatorname{rowmax} S),\quad P = e^{S - m'},$$
$$\ell \leftarrow e^{m-m'}\ell + \operatorname{rowsum}P,\qquad \tilde O \leftarrow e^{m-m'}\tilde O + P V_j,
  \qquad m \leftarrow m',$$

and writes $O_i = \tilde O/\ell$ and $\operatorname{lse}_i = m + \log\ell$ (what a backward by
recomputation needs); a query row that sees no key ($i < N_q - N_k$ under ``causal``) gets $O_i = 0$ and
$\operatorname{lse}_i = -\infty$, as in ``attention.py``. The $N\times N$ score matrix never exists in HBM. Under ``causal`` a query
tile stops at the diagonal, so tiles wholly above it are never read.

HBM traffic of this kernel (:func:`hbm_bytes`): $Q$, $O$ once, and $K$, $V$ once per query tile,
$\approx 2Nd + 2N^2d/B_M$ elements (about half the second term under ``causal``): the
$\Theta(N^2d^2/M)$ of the paper with $B_M \approx M/d$ rows of queries held on chip.
"""

from __future__ import annotations

import math

import torch

from impls.scale.triton_support import HAVE_TRITON, check_device, tl, triton

__all__ = ["flash_attention_triton", "hbm_bytes", "BLOCK_M", "BLOCK_N", "PRECISIONS"]

BLOCK_M = 64  # query rows per program
BLOCK_N = 64  # key/value rows per step
PRECISIONS = ("ieee", "tf32", "tf32x3")  # tl.dot input_precision for fp32 inputs

if HAVE_TRITON:

    @triton.jit
    def _flash_fwd_kernel(q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, Nq, Nk, D, scale,
                          sqb, sqh, sqn, skb, skh, skn, svb, svh, svn, sob, soh, son, H,
                          CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                          BLOCK_D: tl.constexpr, PRECISION: tl.constexpr):
        pid_m = tl.program_id(0)
        bh = tl.program_id(1)
        b = bh // H
        h = bh % H
        rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        dims = tl.arange(0, BLOCK_D)
        d_ok = dims < D
        q_base = q_ptr + b.to(tl.int64) * sqb + h.to(tl.int64) * sqh
        k_base = k_ptr + b.to(tl.int64) * skb + h.to(tl.int64) * skh
        v_base = v_ptr + b.to(tl.int64) * svb + h.to(tl.int64) * svh
        q = tl.load(q_base + rows[:, None] * sqn + dims[None, :], mask=(rows < Nq)[:, None] & d_ok[None, :], other=0.0)
        m = tl.zeros((BLOCK_M,), dtype=tl.float32) - float("inf")
        l = tl.zeros((BLOCK_M,), dtype=tl.float32)
        acc = tl.zeros((BLOCK_M, BLOCK_D), dtype=tl.float32)
        if CAUSAL:
            hi = tl.minimum(Nk, (pid_m + 1) * BLOCK_M + Nk - Nq)  # keys j <= i + Nk - Nq: stop at the diagonal
        else:
            hi = Nk
        for start in range(0, hi, BLOCK_N):
            cols = start + tl.arange(0, BLOCK_N)
            kv_ok = (cols < Nk)[:, None] & d_ok[None, :]
            k = tl.load(k_base + cols[:, None] * skn + dims[None, :], mask=kv_ok, other=0.0)
            s = tl.dot(q, tl.trans(k), input_precision=PRECISION).to(tl.float32) * scale
            allowed = (cols < Nk)[None, :]
            if CAUSAL:
                allowed = allowed & (cols[None, :] <= rows[:, None] + (Nk - Nq))
            s = tl.where(allowed, s, float("-inf"))
            m_new = tl.maximum(m, tl.max(s, axis=1))
            # rows with nothing allowed yet keep m = -inf: use 0 as the shift so no -inf - -inf appears
            m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
            alpha = tl.exp(m - m_safe)
            p = tl.exp(s - m_safe[:, None])
            l = l * alpha + tl.sum(p, axis=1)
            v = tl.load(v_base + cols[:, None] * svn + dims[None, :], mask=kv_ok, other=0.0)
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=PRECISION).to(tl.float32)
            m = m_new
        out = tl.where(l[:, None] > 0, acc / l[:, None], 0.0)  # a row that saw no key: 0, not 0/0
        o_base = o_ptr + b.to(tl.int64) * sob + h.to(tl.int64) * soh
        tl.store(o_base + rows[:, None] * son + dims[None, :], out.to(o_ptr.dtype.element_ty),
                 mask=(rows < Nq)[:, None] & d_ok[None, :])
        tl.store(lse_ptr + bh.to(tl.int64) * Nq + rows, m + tl.log(l), mask=rows < Nq)


def flash_attention_triton(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    causal: bool = False,
    scale: float | None = None,
    block_m: int = BLOCK_M,
    block_n: int = BLOCK_N,
    precision: str = "ieee",
    return_lse: bool = False,
):
    r"""$\operatorname{softmax}(QK^\top s + M)V$ for ``q [B, H, Nq, d]``, ``k``, ``v`` ``[B, H, Nk, d]``; output like ``q``.

    Accumulates in fp32 whatever the input dtype (fp16/bf16/fp32 on CUDA; fp32/fp64 under the
    interpreter, where the accumulators are still fp32). ``precision`` is the two ``tl.dot``'s
    ``input_precision`` and matters only for fp32 inputs: ``"ieee"`` (default) multiplies in fp32 on CUDA
    cores; ``"tf32"`` (Triton's own default on NVIDIA) rounds the operands to TF32 for the Tensor Cores,
    about 1e-3 from fp64 attention instead of 1e-5; ``"tf32x3"`` splits each operand in two TF32 parts.
    (The interpreter multiplies in fp32 whatever it is told.) ``return_lse`` also returns the fp32
    row log-sum-exp ``[B, H, Nq]``. ``causal`` is aligned bottom-right (query i sees keys j <= i + Nk - Nq); a
    query row with no allowed key (``causal`` with ``Nq > Nk``) gives 0 and lse -inf.
    """
    if q.dim() != 4 or k.shape != v.shape or k.dim() != 4 or q.shape[:2] != k.shape[:2] or q.shape[3] != k.shape[3]:
        raise ValueError(f"expected q [B,H,Nq,d] and k, v [B,H,Nk,d], got {tuple(q.shape)}, {tuple(k.shape)}, "
                         f"{tuple(v.shape)}")
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    for blk in (block_m, block_n):
        if blk < 16 or blk & (blk - 1):
            raise ValueError(f"block sizes must be powers of two >= 16, got {block_m}, {block_n}")
    check_device(q, k, v)
    B, H, Nq, D = q.shape
    Nk = k.shape[2]
    q, k, v = (x if x.stride(-1) == 1 else x.contiguous() for x in (q, k, v))
    o = torch.empty_like(q, memory_format=torch.contiguous_format)
    lse = torch.empty(B, H, Nq, dtype=torch.float32, device=q.device)
    if q.numel() and Nk:
        grid = (triton.cdiv(Nq, block_m), B * H)
        _flash_fwd_kernel[grid](
            q, k, v, o, lse, Nq, Nk, D, float(scale if scale is not None else 1.0 / math.sqrt(D)),
            *q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *o.stride()[:3], H,
            CAUSAL=bool(causal), BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_D=max(16, triton.next_power_of_2(D)),
            PRECISION=precision,
        )
    return (o, lse) if return_lse else o


def hbm_bytes(N: int, d: int, *, causal: bool = False, block_m: int = BLOCK_M, block_n: int = BLOCK_N,
              bytes_per_element: int = 2) -> int:
    r"""Bytes this kernel moves between HBM and the chip for one head, self-attention of length ``N``.

    Reads $Q$ once, writes $O$ once and the fp32 lse; each of the $\lceil N/B_M\rceil$ query tiles reads
    the $K$ and $V$ rows it visits (all $N$, or up to the end of its diagonal tile under ``causal``,
    rounded up to whole ``block_n`` tiles and clipped at $N$).
    """
    elems = 2 * N * d  # Q in, O out
    for i in range(-(-N // block_m)):
        hi = min(N, (i + 1) * block_m) if causal else N
        visited = min(N, -(-hi // block_n) * block_n)
        elems += 2 * visited * d
    return elems * bytes_per_element + 4 * N
