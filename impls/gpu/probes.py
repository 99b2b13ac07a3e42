r"""Small Triton kernels that the GPU entries compile (never run) to see what the compiler makes of them.

- :func:`copy_kernel` ``y[i] = x[i]``: each of the ``32·num_warps`` threads owns ``BLOCK/(32·num_warps)``
  consecutive elements, so the compiler may move them with one vector instruction per 16 bytes
  (``ld.global.v4.b32``) when it knows the pointers are 16-byte aligned, and one scalar per element
  when it does not.
- :func:`gather_kernel` ``y[i] = x[i·stride]``: a stride known only at run time; no vector access is
  possible whatever the alignment.
- :func:`matmul_kernel` ``C = A B`` for any ``M, N, K`` (masked edge tiles), accumulated in ``ACC`` (fp32; int32 for int8); the
  inputs' dtype and ``INPUT_PRECISION`` (``tf32`` / ``ieee`` for fp32 inputs) choose the Tensor-Core instruction (or none).
- :func:`row_sum_kernel` one row's sum: a tree reduction that crosses threads (warp shuffles, then
  shared memory between warps).
"""

from __future__ import annotations

from impls.scale.triton_support import HAVE_TRITON, tl, triton

__all__ = ["copy_kernel", "gather_kernel", "matmul_kernel", "row_sum_kernel"]

if HAVE_TRITON:

    @triton.jit
    def copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        ok = offs < n
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=ok), mask=ok)

    @triton.jit
    def gather_kernel(x_ptr, y_ptr, n, stride, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        ok = offs < n
        tl.store(y_ptr + offs, tl.load(x_ptr + offs * stride, mask=ok), mask=ok)

    @triton.jit
    def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm,
                      BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, INPUT_PRECISION: tl.constexpr,
                      ACC: tl.constexpr):
        rm = tl.program_id(0) * BM + tl.arange(0, BM)
        rn = tl.program_id(1) * BN + tl.arange(0, BN)
        rk = tl.arange(0, BK)
        acc = tl.zeros((BM, BN), dtype=ACC)
        for k0 in range(0, K, BK):
            a = tl.load(a_ptr + rm[:, None] * stride_am + (k0 + rk)[None, :],
                        mask=(rm < M)[:, None] & ((k0 + rk) < K)[None, :], other=0.0)
            b = tl.load(b_ptr + (k0 + rk)[:, None] * stride_bk + rn[None, :],
                        mask=((k0 + rk) < K)[:, None] & (rn < N)[None, :], other=0.0)
            acc = tl.dot(a, b, acc, input_precision=INPUT_PRECISION)
        tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :], acc.to(c_ptr.dtype.element_ty),
                 mask=(rm < M)[:, None] & (rn < N)[None, :])

    @triton.jit
    def row_sum_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + tl.program_id(0) * n + offs, mask=offs < n, other=0.0)
        tl.store(out_ptr + tl.program_id(0), tl.sum(x, axis=0))
