"""Tiny kernels the verifiers compile (never run) to see an instruction the hardware offers."""

import triton
import triton.language as tl


@triton.jit
def rsqrt_kernel(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.math.rsqrt(tl.load(x_ptr + offs)))
