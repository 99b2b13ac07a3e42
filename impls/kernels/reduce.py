r"""Sum and max of a large vector in Triton, in two stages: per-program partial results, then one program.

Stage 1: program $p$ reduces the chunk ``x[p·CHUNK : (p+1)·CHUNK]`` ``BLOCK`` elements at a time into a
lane-wise accumulator, then across its lanes (``tl.sum`` / ``tl.max``: warp shuffles, then shared
memory between warps, as the compiled code shows), and writes one partial result. Stage 2: one
program reduces the $\lceil n/\text{CHUNK}\rceil$ partials the same way. Thread blocks cannot wait for
each other inside one launch (no grid-wide barrier outside a cooperative launch), so the
partials cross between the two launches through global memory. The result does not depend on which
program finishes first: each partial has its slot, and stage 2 always combines them in the same
order — unlike :func:`reduce_atomic`, one launch whose programs ``atomic_add`` their partials into one
fp32 cell in whatever order they arrive.

Out-of-range lanes are padded with the operation's identity: 0 for a sum, $-\infty$ for a max (a 0
would win the max of negative numbers). Accumulation is fp32 for fp16, bf16 and fp32 inputs (fp64
for fp64 inputs in the interpreter); the result is a 0-d fp32 (fp64) tensor.

Memory traffic: each input element is read once; stage 1 writes and stage 2 reads one partial per
program, $n/\text{CHUNK}$ of them (:func:`bytes_moved`).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

__all__ = ["reduce", "reduce_kernel", "reduce_two_stage", "reduce_atomic", "reduce_atomic_kernel", "reduce_torch",
           "bytes_moved", "BLOCK", "CHUNK"]

BLOCK = 1024  # elements per step of one program
CHUNK = 8192  # elements per program in stage 1 (8 steps)


@triton.jit
def reduce_kernel(x_ptr, out_ptr, n, chunk, IS_MAX: tl.constexpr, BLOCK: tl.constexpr):
    """out[p] = sum (or max) of x[p*chunk : min((p+1)*chunk, n)], accumulated in fp32 (fp64 for fp64 x)."""
    pid = tl.program_id(0).to(tl.int64)
    lanes = tl.arange(0, BLOCK)
    acc_type = tl.float64 if x_ptr.dtype.element_ty == tl.float64 else tl.float32
    if IS_MAX:
        acc = tl.full((BLOCK,), -float("inf"), acc_type)
    else:
        acc = tl.zeros((BLOCK,), dtype=acc_type)
    for start in range(0, chunk, BLOCK):
        offs = pid * chunk + start + lanes
        ok = (start + lanes < chunk) & (offs < n)
        if IS_MAX:
            x = tl.load(x_ptr + offs, mask=ok, other=-float("inf")).to(acc_type)
            acc = tl.maximum(acc, x)
        else:
            x = tl.load(x_ptr + offs, mask=ok, other=0.0).to(acc_type)
            acc += x
    if IS_MAX:
        tl.store(out_ptr + pid, tl.max(acc, axis=0))
    else:
        tl.store(out_ptr + pid, tl.sum(acc, axis=0))


def reduce(x: torch.Tensor, op: str = "sum") -> torch.Tensor:
    """``op`` ("sum" or "max") of all elements of the 1-D tensor ``x`` (fp16 or fp32), as a 0-d fp32 tensor."""
    if x.dim() != 1:
        raise ValueError(f"expected a vector, got shape {tuple(x.shape)}")
    if op not in ("sum", "max"):
        raise ValueError(f"op must be 'sum' or 'max', got {op!r}")
    n = x.shape[0]
    if n == 0:
        if op == "max":
            raise ValueError("max of an empty vector")
        return torch.zeros((), dtype=torch.float32)
    programs = triton.cdiv(n, CHUNK)
    partials = torch.empty(programs, dtype=torch.float32, device=x.device)
    reduce_kernel[(programs,)](x, partials, n, CHUNK, IS_MAX=op == "max", BLOCK=BLOCK)
    out = torch.empty(1, dtype=torch.float32, device=x.device)
    reduce_kernel[(1,)](partials, out, programs, programs, IS_MAX=op == "max", BLOCK=BLOCK)
    return out[0]


def _check(x: torch.Tensor, op: str) -> None:
    from impls.scale.triton_support import check_device

    if x.dim() != 1:
        raise ValueError(f"expected a vector, got shape {tuple(x.shape)}")
    if op not in ("sum", "max"):
        raise ValueError(f"op must be 'sum' or 'max', got {op!r}")
    if x.dtype not in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
        raise ValueError(f"expected a floating-point vector, got {x.dtype}")
    check_device(x)


def reduce_two_stage(x: torch.Tensor, op: str = "sum", *, block: int = BLOCK, chunk: int = CHUNK,
                     num_warps: int = 4) -> tuple[torch.Tensor, torch.Tensor]:
    """(result, the stage-1 partials): :func:`reduce` with the tiling as parameters, any float dtype
    (fp64 accumulates in fp64). ``chunk`` must be a multiple of ``block`` (a power of two >= 16)."""
    _check(x, op)
    if block < 16 or block & (block - 1):
        raise ValueError(f"block must be a power of two >= 16, got {block}")
    if chunk < block or chunk % block:
        raise ValueError(f"chunk must be a positive multiple of block ({block}), got {chunk}")
    n = x.shape[0]
    acc = torch.float64 if x.dtype == torch.float64 else torch.float32
    if n == 0:
        if op == "max":
            raise ValueError("max of an empty vector")
        return torch.zeros((), dtype=acc, device=x.device), torch.zeros(0, dtype=acc, device=x.device)
    programs = triton.cdiv(n, chunk)
    partials = torch.empty(programs, dtype=acc, device=x.device)
    reduce_kernel[(programs,)](x, partials, n, chunk, IS_MAX=op == "max", BLOCK=block, num_warps=num_warps)
    out = torch.empty(1, dtype=acc, device=x.device)
    reduce_kernel[(1,)](partials, out, programs, programs, IS_MAX=op == "max",
                        BLOCK=min(block, triton.next_power_of_2(programs)) if programs > 16 else 16,
                        num_warps=num_warps)
    return out[0], partials


@triton.jit
def reduce_atomic_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """One launch: each program adds its block's fp32 sum into out[0] with an atomic add."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0).to(tl.float32)
    tl.atomic_add(out_ptr, tl.sum(x, axis=0))


def reduce_atomic(x: torch.Tensor, *, block: int = BLOCK) -> torch.Tensor:
    """The sum of ``x`` in one launch, the programs' partial sums combined by ``atomic_add`` (fp32). Correct, but
    the order of the additions is the order the programs arrive in, which the hardware does not fix."""
    _check(x, "sum")
    if block < 16 or block & (block - 1):
        raise ValueError(f"block must be a power of two >= 16, got {block}")
    out = torch.zeros(1, dtype=torch.float32, device=x.device)
    if x.shape[0]:
        reduce_atomic_kernel[(triton.cdiv(x.shape[0], block),)](x, out, x.shape[0], BLOCK=block)
    return out[0]


def reduce_torch(x: torch.Tensor, op: str = "sum") -> torch.Tensor:
    """The PyTorch op the kernel stands beside (fp32 accumulation)."""
    return x.float().sum() if op == "sum" else x.float().max()


def bytes_moved(n: int, bytes_per_element: int, chunk: int = CHUNK, partial_bytes: int = 4) -> int:
    """Bytes the two-stage reduction moves: every element read once, each stage-1 partial written once and read
    once by stage 2, the result written once."""
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    programs = -(-n // chunk)
    return n * bytes_per_element + 2 * programs * partial_bytes + partial_bytes
