r"""Tiled matrix multiply in Triton: $C = AB$ for ``A [M, K]``, ``B [K, N]``, any sizes, fp32 accumulation.

One program owns a ``BLOCK_M×BLOCK_N`` tile of $C$. It walks $K$ in steps of ``BLOCK_K``: loads an
``BLOCK_M×BLOCK_K`` tile of $A$ and a ``BLOCK_K×BLOCK_N`` tile of $B$ (masked at the edges, the
out-of-range elements read as 0 so they add nothing to the dot products) and accumulates their product
with ``tl.dot`` into an fp32 accumulator, then stores the tile of $C$ masked to the matrix. ``tl.dot``
is what reaches the Tensor Cores: for fp16/bf16 inputs it compiles to ``mma.sync`` on sm_80 and
``wgmma`` on sm_90; Triton stages the tiles through shared memory and pipelines ``num_stages`` of them
(``cp.async`` / TMA), and splits the tile across ``num_warps`` warps, each holding a register tile of
the accumulator. Programs are ordered in groups of ``GROUP_M`` tile rows, walked column by column, so
the tiles running at the same time share rows of $A$ and columns of $B$ in L2.

Memory traffic (``impls/kernels/gemm_model.py``, ``shared`` level with ``BLOCK_M×BLOCK_N`` tiles):
$A$ is read $\lceil N/B_N\rceil$ times and $B$ $\lceil M/B_M\rceil$ times, $C$ written once; with
$B_M=B_N=128$ and fp16 that is $2\cdot128^2/(2\cdot256)=64$ FLOP/byte for a large square GEMM, against
the Tensor-Core ridge of an A100 (153) or an H100 (295): big tiles and L2 reuse are what lift a GEMM
off the memory roof.

Precision. fp16 and bf16 inputs give an output of the same dtype from an fp32 accumulator. For fp32
inputs ``input_precision`` decides: ``"ieee"`` (the default here) multiplies in fp32 on the CUDA cores;
``"tf32"`` (Triton's own default) rounds the inputs to TF32 (10 mantissa bits) on the Tensor Cores.
Triton's CPU interpreter ignores ``input_precision`` (always IEEE) and computes ``tl.dot`` of bf16
tiles wrongly (Triton 3.9: the bf16 bits are multiplied as integers), so bf16 runs on CUDA only.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

__all__ = ["matmul", "matmul_tiled", "matmul_kernel", "matmul_torch", "CONFIGS", "BLOCK_M", "BLOCK_N", "BLOCK_K"]

BLOCK_M = 32  # the kata's defaults: small, so Triton's interpreter runs them quickly on CPU
BLOCK_N = 32
BLOCK_K = 32

# A small autotune table for the GPU (Triton's matmul tutorial picks from the same family): big tiles
# for big GEMMs, smaller ones when M or N is small. (BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages)
CONFIGS = (
    (128, 256, 64, 8, 8, 3),
    (128, 128, 64, 8, 4, 4),
    (128, 64, 32, 8, 4, 4),
    (64, 128, 32, 8, 4, 4),
    (64, 64, 32, 8, 4, 4),
    (32, 64, 32, 8, 2, 5),
)


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                  INPUT_PRECISION: tl.constexpr):
    """C[M, N] = A[M, K] @ B[K, N], rows contiguous (row i of A starts at a_ptr + i * stride_am): one
    BLOCK_M x BLOCK_N tile of C per program, fp32 accumulator."""
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    group = GROUP_M * num_pid_n
    first_m = (pid // group) * GROUP_M
    size_m = tl.minimum(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % group) % size_m
    pid_n = (pid % group) // size_m
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k_ok = (k0 + rk) < K
        a = tl.load(a_ptr + rm[:, None] * stride_am + (k0 + rk)[None, :],
                    mask=(rm < M)[:, None] & k_ok[None, :], other=0.0)
        b = tl.load(b_ptr + (k0 + rk)[:, None] * stride_bk + rn[None, :],
                    mask=k_ok[:, None] & (rn < N)[None, :], other=0.0)
        acc = tl.dot(a, b, acc, input_precision=INPUT_PRECISION)
    tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :], acc.to(c_ptr.dtype.element_ty),
             mask=(rm < M)[:, None] & (rn < N)[None, :])


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a [M, K] @ b [K, N]`` -> ``[M, N]`` in the inputs' dtype (fp16 or fp32), accumulated in fp32."""
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"expected a [M, K] and b [K, N], got {tuple(a.shape)} and {tuple(b.shape)}")
    if a.dtype != b.dtype or a.dtype not in (torch.float16, torch.float32):
        raise ValueError(f"expected two fp16 or two fp32 matrices, got {a.dtype} and {b.dtype}")
    a, b = a.contiguous(), b.contiguous()
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    if M == 0 or N == 0:
        return c
    if K == 0:
        return c.zero_()
    grid = (triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N),)
    matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), b.stride(0), c.stride(0),
                        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, GROUP_M=8, INPUT_PRECISION="ieee")
    return c


def matmul_tiled(a: torch.Tensor, b: torch.Tensor, *, block_m: int = 64, block_n: int = 64, block_k: int = 32,
                 group_m: int = 8, num_warps: int = 4, num_stages: int = 3, input_precision: str = "ieee"
                 ) -> torch.Tensor:
    """:func:`matmul` with the tiling as parameters (powers of two >= 16; on the GPU take them from
    :data:`CONFIGS`). bf16 inputs need CUDA (see the module docstring)."""
    from impls.scale.triton_support import check_device, interpreting

    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"expected a [M, K] and b [K, N], got {tuple(a.shape)} and {tuple(b.shape)}")
    if a.dtype != b.dtype or a.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        raise ValueError(f"expected two fp16, bf16 or fp32 matrices, got {a.dtype} and {b.dtype}")
    for name, blk in (("block_m", block_m), ("block_n", block_n), ("block_k", block_k)):
        if blk < 16 or blk & (blk - 1):
            raise ValueError(f"{name} must be a power of two >= 16, got {blk}")
    if group_m < 1:
        raise ValueError(f"group_m must be at least 1, got {group_m}")
    if input_precision not in ("ieee", "tf32"):
        raise ValueError(f"input_precision must be 'ieee' or 'tf32', got {input_precision!r}")
    check_device(a, b)
    if a.dtype == torch.bfloat16 and interpreting():
        raise RuntimeError("bf16 matmul needs CUDA: Triton's interpreter (3.9) computes tl.dot of bf16 tiles wrongly")
    a, b = a.contiguous(), b.contiguous()
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    if M == 0 or N == 0:
        return c
    if K == 0:
        return c.zero_()
    grid = (triton.cdiv(M, block_m) * triton.cdiv(N, block_n),)
    matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), b.stride(0), c.stride(0),
                        BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, GROUP_M=group_m,
                        INPUT_PRECISION=input_precision, num_warps=num_warps, num_stages=num_stages)
    return c


def matmul_torch(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The PyTorch op the kernel stands beside (cuBLAS on CUDA)."""
    return a @ b
