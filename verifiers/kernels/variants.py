"""Kernels that differ from impls/kernels in one chosen way, to show what a claim says matters (or does not).

- :func:`matmul_fill`: the tiled matmul with the out-of-range parts of its edge tiles read as chosen values:
  ``edge_fill`` for rows of A past M and columns of B past N, ``k_fill`` for the K tail of the last step.
- :func:`softmax_naive`: a softmax that does not subtract the row maximum.
- :func:`softmax_online_unguarded`: the online kernel without its guard for lanes that have seen only -inf.
- :func:`reduce_max_zero_padded`: the two-stage max with out-of-range lanes padded with 0.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _matmul_fill_kernel(a_ptr, b_ptr, c_ptr, M, N, K, EDGE_FILL: tl.constexpr, K_FILL: tl.constexpr,
                        BLOCK: tl.constexpr):
    rm = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    rn = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    rk = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK, BLOCK), dtype=tl.float32)
    for k0 in range(0, K, BLOCK):
        k_ok = (k0 + rk) < K
        a = tl.load(a_ptr + rm[:, None] * K + (k0 + rk)[None, :], mask=(rm < M)[:, None] & k_ok[None, :], other=0.0)
        a = tl.where((rm < M)[:, None], a, EDGE_FILL)
        a = tl.where(k_ok[None, :] | (rm >= M)[:, None], a, K_FILL)
        b = tl.load(b_ptr + (k0 + rk)[:, None] * N + rn[None, :], mask=k_ok[:, None] & (rn < N)[None, :], other=0.0)
        b = tl.where((rn < N)[None, :], b, EDGE_FILL)
        b = tl.where(k_ok[:, None] | (rn >= N)[None, :], b, K_FILL)
        acc = tl.dot(a, b, acc, input_precision="ieee")
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm < M)[:, None] & (rn < N)[None, :])


def matmul_fill(a: torch.Tensor, b: torch.Tensor, *, edge_fill: float, k_fill: float, block: int = 16) -> torch.Tensor:
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty(M, N)
    _matmul_fill_kernel[(triton.cdiv(M, block), triton.cdiv(N, block))](
        a.contiguous(), b.contiguous(), c, M, N, K, EDGE_FILL=edge_fill, K_FILL=k_fill, BLOCK=block)
    return c


@triton.jit
def _softmax_naive_kernel(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    ok = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=ok, other=-float("inf")).to(tl.float32)
    e = tl.exp(x)
    tl.store(y_ptr + row * n_cols + cols, e / tl.sum(e, axis=0), mask=ok)


def softmax_naive(x: torch.Tensor) -> torch.Tensor:
    y = torch.empty_like(x, dtype=torch.float32)
    _softmax_naive_kernel[(x.shape[0],)](x.contiguous(), y, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
    return y


@triton.jit
def _softmax_online_unguarded_kernel(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    m = tl.full((BLOCK,), -float("inf"), tl.float32)
    d = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        x = tl.load(x_ptr + row * n_cols + start + cols, mask=start + cols < n_cols, other=-float("inf"))
        m_new = tl.maximum(m, x)
        d = d * tl.exp(m - m_new) + tl.exp(x - m_new)
        m = m_new
    row_max = tl.max(m, axis=0)
    denom = tl.sum(d * tl.exp(m - row_max), axis=0)
    for start in range(0, n_cols, BLOCK):
        ok = start + cols < n_cols
        x = tl.load(x_ptr + row * n_cols + start + cols, mask=ok, other=-float("inf"))
        tl.store(y_ptr + row * n_cols + start + cols, tl.exp(x - row_max) / denom, mask=ok)


def softmax_online_unguarded(x: torch.Tensor, block: int = 16) -> torch.Tensor:
    y = torch.empty_like(x)
    _softmax_online_unguarded_kernel[(x.shape[0],)](x.contiguous(), y, x.shape[1], BLOCK=block)
    return y


@triton.jit
def _max_zero_padded_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + tl.program_id(0), tl.max(tl.load(x_ptr + offs, mask=offs < n, other=0.0), axis=0))


def reduce_max_zero_padded(x: torch.Tensor, block: int = 1024) -> torch.Tensor:
    parts = torch.empty(triton.cdiv(x.shape[0], block))
    _max_zero_padded_kernel[(parts.shape[0],)](x, parts, x.shape[0], BLOCK=block)
    out = torch.empty(1)
    _max_zero_padded_kernel[(1,)](parts, out, parts.shape[0], BLOCK=triton.next_power_of_2(parts.shape[0]))
    return out[0]


@triton.jit
def _cast_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n).to(y_ptr.dtype.element_ty), mask=offs < n)


def cast(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``x.to(dtype)`` done by a Triton kernel (``.to`` on the loaded block)."""
    y = torch.empty(x.shape, dtype=dtype)
    _cast_kernel[(1,)](x.contiguous(), y, x.numel(), BLOCK=triton.next_power_of_2(max(x.numel(), 1)))
    return y
