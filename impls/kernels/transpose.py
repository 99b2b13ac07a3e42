r"""Matrix transpose in Triton: ``y = x.T`` for ``x [M, N]``, tile by tile, both sides coalesced.

One program owns a ``BLOCK_M×BLOCK_N`` tile: it loads it from ``x`` along rows (consecutive threads,
consecutive addresses) and stores it into ``y`` at the transposed place, again along ``y``'s rows. The
two accesses want opposite thread layouts, so the tile changes layout in between: in CUDA C++ one
writes that by hand (a shared-memory tile, padded to ``TILE+1`` columns or swizzled so the column reads
do not hit one bank 32 times, with ``__syncthreads()`` between the write and the read); in Triton the
compiler inserts the layout conversion through shared memory itself. Compiled for sm_80 and sm_90
(``verifiers/kernels``): 128-bit loads *and* stores per thread, and a shared-memory buffer of exactly
the tile's size.

The edge tiles are masked on both sides: the load keeps ``(rm < M) & (rn < N)`` in ``x``'s
coordinates, and the store the same elements in ``y``'s (``y`` is ``N×M``), so the region the mask
admits is transposed along with the data.

Memory traffic: every element read once and written once, ``2·M·N·bytes`` — a copy's worth.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

__all__ = ["transpose", "transpose_kernel", "transpose_tiled", "transpose_torch", "bytes_moved", "BLOCK_M",
           "BLOCK_N"]

BLOCK_M = 32
BLOCK_N = 32


@triton.jit
def transpose_kernel(x_ptr, y_ptr, M, N, stride_xm, stride_ym, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """y[n, m] = x[m, n] for this program's BLOCK_M x BLOCK_N tile of x (y is N x M)."""
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    tile = tl.load(x_ptr + rm[:, None].to(tl.int64) * stride_xm + rn[None, :],
                   mask=(rm < M)[:, None] & (rn < N)[None, :])
    tl.store(y_ptr + rn[:, None].to(tl.int64) * stride_ym + rm[None, :], tl.trans(tile),
             mask=(rn < N)[:, None] & (rm < M)[None, :])


def transpose(x: torch.Tensor) -> torch.Tensor:
    """``x [M, N]`` -> its transpose ``[N, M]``, contiguous, same dtype."""
    if x.dim() != 2:
        raise ValueError(f"expected a matrix [M, N], got shape {tuple(x.shape)}")
    if x.stride(1) != 1:
        x = x.contiguous()
    M, N = x.shape
    y = torch.empty((N, M), dtype=x.dtype, device=x.device)
    if M and N:
        grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
        transpose_kernel[grid](x, y, M, N, x.stride(0), y.stride(0), BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N)
    return y


def transpose_tiled(x: torch.Tensor, *, block_m: int = 32, block_n: int = 32, num_warps: int = 4) -> torch.Tensor:
    """:func:`transpose` with the tile as parameters (powers of two), any dtype the device supports."""
    from impls.scale.triton_support import check_device

    if x.dim() != 2:
        raise ValueError(f"expected a matrix [M, N], got shape {tuple(x.shape)}")
    for name, blk in (("block_m", block_m), ("block_n", block_n)):
        if blk < 1 or blk & (blk - 1):
            raise ValueError(f"{name} must be a power of two, got {blk}")
    check_device(x)
    if x.stride(1) != 1:
        x = x.contiguous()
    M, N = x.shape
    y = torch.empty((N, M), dtype=x.dtype, device=x.device)
    if M and N:
        grid = (triton.cdiv(M, block_m), triton.cdiv(N, block_n))
        transpose_kernel[grid](x, y, M, N, x.stride(0), y.stride(0), BLOCK_M=block_m, BLOCK_N=block_n,
                               num_warps=num_warps)
    return y


def transpose_torch(x: torch.Tensor) -> torch.Tensor:
    """The PyTorch op the kernel stands beside: a contiguous copy of the transpose."""
    return x.t().contiguous()


def bytes_moved(M: int, N: int, bytes_per_element: int) -> int:
    """Every element read once and written once."""
    return 2 * M * N * bytes_per_element
