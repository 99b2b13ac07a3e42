r"""Row-wise softmax in Triton: $y_{ij} = e^{x_{ij}-m_i} / \sum_k e^{x_{ik}-m_i}$ with $m_i = \max_k x_{ik}$.

Subtracting the row maximum changes nothing mathematically and keeps every exponent $\le 0$, so no
$e^x$ overflows (fp32 overflows at $x > \ln(\text{FLT\_MAX}) \approx 88.72$). Statistics are fp32
whatever the input (fp16, bf16, fp32); the output has the input's dtype. A logit of $-\infty$ gets
probability 0; a row that is $-\infty$ everywhere has no distribution and gives NaN, as
``torch.softmax`` does.

Three kernels, by how many times they read a row from memory (``bytes_moved``, counted against the
loads the kernels really issue in ``verifiers/kernels``):

- :func:`softmax_kernel`, one row per program held in registers (``BLOCK`` ≥ the row length): one
  read and one write per element, the least any softmax can move. What the kata asks for.
- :func:`softmax_online_kernel`, for rows longer than a block: one sweep keeps a running maximum and
  a running sum per lane, rescaling the sum whenever the maximum grows (online softmax,
  Milakov & Gimelshein 2018),

  $$m' = \max(m, x),\qquad d' = d\,e^{m-m'} + e^{x-m'},$$

  then the lanes are combined once ($M = \max_\ell m_\ell$, $D = \sum_\ell d_\ell e^{m_\ell - M}$:
  the second level), and a second sweep writes $e^{x-M}/D$: two reads and one write per element.
- :func:`softmax_three_pass_kernel`: a sweep for the maximum, one for the sum, one to write: three
  reads and one write, the baseline the online version improves on.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

__all__ = ["softmax", "softmax_rows", "softmax_kernel", "softmax_online_kernel", "softmax_three_pass_kernel",
           "softmax_torch", "bytes_moved", "MAX_FUSED_BLOCK", "VARIANTS"]

MAX_FUSED_BLOCK = 4096  # longest row (rounded up to a power of two) held in registers by one program
VARIANTS = ("fused", "online", "three-pass")


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, stride_x, stride_y, BLOCK: tl.constexpr):
    """y[row] = softmax(x[row]) for the row this program owns; BLOCK >= n_cols (a power of two)."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    ok = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=ok, other=-float("inf")).to(tl.float32)
    m = tl.max(x, axis=0)
    e = tl.exp(x - m)
    y = e / tl.sum(e, axis=0)
    tl.store(y_ptr + row * stride_y + cols, y.to(y_ptr.dtype.element_ty), mask=ok)


@triton.jit
def softmax_online_kernel(x_ptr, y_ptr, n_cols, stride_x, stride_y, BLOCK: tl.constexpr):
    """Rows of any length, BLOCK at a time: a running (max, sum) per lane in one sweep, then the write sweep."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    m = tl.full((BLOCK,), -float("inf"), tl.float32)
    d = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        ok = start + cols < n_cols
        x = tl.load(x_ptr + row * stride_x + start + cols, mask=ok, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        # a lane that has seen only -inf keeps d = 0: shift by 0 there, never compute -inf - (-inf)
        m_safe = tl.where(m_new == -float("inf"), 0.0, m_new)
        d = d * tl.exp(m - m_safe) + tl.exp(x - m_safe)
        m = m_new
    row_max = tl.max(m, axis=0)
    denom = tl.sum(tl.where(d > 0, d * tl.exp(m - row_max), 0.0), axis=0)
    for start in range(0, n_cols, BLOCK):
        ok = start + cols < n_cols
        x = tl.load(x_ptr + row * stride_x + start + cols, mask=ok, other=-float("inf")).to(tl.float32)
        y = tl.exp(x - row_max) / denom
        tl.store(y_ptr + row * stride_y + start + cols, y.to(y_ptr.dtype.element_ty), mask=ok)


@triton.jit
def softmax_three_pass_kernel(x_ptr, y_ptr, n_cols, stride_x, stride_y, BLOCK: tl.constexpr):
    """The baseline: a sweep for the maximum, a sweep for the sum, a sweep for the output."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    m = tl.full((BLOCK,), -float("inf"), tl.float32)
    for start in range(0, n_cols, BLOCK):
        x = tl.load(x_ptr + row * stride_x + start + cols, mask=start + cols < n_cols, other=-float("inf"))
        m = tl.maximum(m, x.to(tl.float32))
    row_max = tl.max(m, axis=0)
    d = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        x = tl.load(x_ptr + row * stride_x + start + cols, mask=start + cols < n_cols, other=-float("inf"))
        d += tl.exp(x.to(tl.float32) - row_max)
    denom = tl.sum(d, axis=0)
    for start in range(0, n_cols, BLOCK):
        ok = start + cols < n_cols
        x = tl.load(x_ptr + row * stride_x + start + cols, mask=ok, other=-float("inf")).to(tl.float32)
        tl.store(y_ptr + row * stride_y + start + cols, (tl.exp(x - row_max) / denom).to(y_ptr.dtype.element_ty),
                 mask=ok)


def softmax(x: torch.Tensor) -> torch.Tensor:
    """Softmax of each row of ``x [R, D]`` (fp16 or fp32, D <= 4096), one row per program; same dtype out."""
    if x.dim() != 2:
        raise ValueError(f"expected a matrix [R, D], got shape {tuple(x.shape)}")
    R, D = x.shape
    y = torch.empty_like(x)
    if R == 0 or D == 0:
        return y
    BLOCK = triton.next_power_of_2(D)
    softmax_kernel[(R,)](x, y, D, x.stride(0), y.stride(0), BLOCK=BLOCK)
    return y


def softmax_rows(x: torch.Tensor, *, variant: str = "auto", block: int | None = None,
                 num_warps: int | None = None) -> torch.Tensor:
    """Softmax over the last dimension of ``x`` (any leading shape; fp16, bf16, fp32 on CUDA, and fp64 in
    the interpreter), with the kernel chosen by ``variant``: ``fused`` (the row in registers; rows up to
    :data:`MAX_FUSED_BLOCK`), ``online``, ``three-pass``, or ``auto`` (fused when the row fits, else online).
    ``block``: elements per step of the online and three-pass sweeps (a power of two, default 1024)."""
    from impls.scale.triton_support import check_device

    if variant not in ("auto", *VARIANTS):
        raise ValueError(f"variant must be one of auto, {', '.join(VARIANTS)}; got {variant!r}")
    if x.dim() == 0:
        raise ValueError("softmax needs at least one dimension")
    if x.dtype not in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
        raise ValueError(f"expected a floating-point tensor, got {x.dtype}")
    if block is not None and (block < 16 or block & (block - 1)):
        raise ValueError(f"block must be a power of two >= 16, got {block}")
    check_device(x)
    D = x.shape[-1]
    x2 = x.reshape(-1, D)
    if x2.stride(-1) != 1:
        x2 = x2.contiguous()
    y = torch.empty(x2.shape, dtype=x.dtype, device=x.device)
    if x2.numel() == 0:
        return y.reshape(x.shape)
    fused_block = triton.next_power_of_2(D)
    if variant == "auto":
        variant = "fused" if fused_block <= MAX_FUSED_BLOCK else "online"
    if variant == "fused":
        if fused_block > MAX_FUSED_BLOCK:
            raise ValueError(f"rows of {D} do not fit one program's registers (at most {MAX_FUSED_BLOCK}); "
                             "use variant='online'")
        warps = num_warps or min(max(fused_block // 256, 1), 8)  # Triton's tutorial: ~8 elements per thread
        softmax_kernel[(x2.shape[0],)](x2, y, D, x2.stride(0), y.stride(0), BLOCK=fused_block, num_warps=warps)
    else:
        blk = block or 1024
        kernel = softmax_online_kernel if variant == "online" else softmax_three_pass_kernel
        kernel[(x2.shape[0],)](x2, y, D, x2.stride(0), y.stride(0), BLOCK=blk, num_warps=num_warps or 4)
    return y.reshape(x.shape)


def softmax_torch(x: torch.Tensor) -> torch.Tensor:
    """The PyTorch op the kernels stand beside (fp32 statistics for half inputs, output in the input's dtype)."""
    return torch.softmax(x.float(), dim=-1).to(x.dtype)


def bytes_moved(rows: int, cols: int, variant: str, bytes_per_element: int = 4) -> int:
    """Bytes each kernel moves between memory and the chip: ``fused`` reads and writes every element once,
    ``online`` reads it twice, ``three-pass`` three times (each writes once). Nothing per row is stored."""
    reads = {"fused": 1, "online": 2, "three-pass": 3}.get(variant)
    if reads is None:
        raise ValueError(f"variant must be one of {', '.join(VARIANTS)}; got {variant!r}")
    return (reads + 1) * rows * cols * bytes_per_element
