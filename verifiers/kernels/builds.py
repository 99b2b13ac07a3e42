"""The kernels of impls/kernels compiled for sm_80 (A100) and sm_90 (H100) the way their wrappers launch them:
16-byte-aligned pointers and sizes/strides divisible by 16 (what Triton specialises on at run time for such
shapes), Triton's default 4 warps / 3 stages unless a request says otherwise. One table, so a session compiles
them in one child process (cached by content in build/cache/compiled)."""

from __future__ import annotations

from impls.gpu.compiled import Request
from impls.kernels.matmul import CONFIGS

MM = "impls/kernels/matmul.py"
SM = "impls/kernels/softmax.py"
RD = "impls/kernels/reduce.py"
NM = "impls/kernels/norms.py"
TR = "impls/kernels/transpose.py"
PR = "verifiers/kernels/probes.py"

MM_INTS = ("M", "N", "K", "stride_am", "stride_bk", "stride_cm")
MM_ALIGNED = ("a_ptr", "b_ptr", "c_ptr", "M", "N", "K", "stride_am", "stride_bk", "stride_cm")


def mm(dtype: str, arch: int, bm=64, bn=64, bk=32, group=8, precision="ieee", warps=4, stages=3, out=None) -> Request:
    sig = {"a_ptr": f"*{dtype}", "b_ptr": f"*{dtype}", "c_ptr": f"*{out or dtype}", **{k: "i32" for k in MM_INTS}}
    return Request.make(MM, "matmul_kernel", sig, {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": group,
                                                   "INPUT_PRECISION": precision},
                        arch=arch, num_warps=warps, num_stages=stages, aligned=MM_ALIGNED)


ROW = {"x_ptr": "*fp32", "y_ptr": "*fp32", "n_cols": "i32", "stride_x": "i32", "stride_y": "i32"}
ROW_ALIGNED = ("x_ptr", "y_ptr", "n_cols", "stride_x", "stride_y")


def softmax(kernel: str, block: int, warps: int, arch: int = 80, aligned=ROW_ALIGNED) -> Request:
    return Request.make(SM, kernel, ROW, {"BLOCK": block}, arch=arch, num_warps=warps, aligned=aligned)


NORM = {"x_ptr": "*fp32", "w_ptr": "*fp32", "b_ptr": "*fp32", "y_ptr": "*fp32", "mean_ptr": "*fp32",
        "rstd_ptr": "*fp32", "D": "i32", "stride_x": "i32", "stride_y": "i32", "eps": "fp32"}
NORM_ALIGNED = ("x_ptr", "w_ptr", "b_ptr", "y_ptr", "mean_ptr", "rstd_ptr", "D", "stride_x", "stride_y")


def norm(block: int, warps: int, rms: bool = True, arch: int = 80) -> Request:
    return Request.make(NM, "norm_fwd_kernel", NORM, {"RMS": rms, "HAS_BIAS": not rms, "BLOCK": block}, arch=arch,
                        num_warps=warps, aligned=NORM_ALIGNED)


TRANSPOSE = {"x_ptr": "*fp32", "y_ptr": "*fp32", "M": "i32", "N": "i32", "stride_xm": "i32", "stride_ym": "i32"}

REQUESTS: dict[str, Request] = {
    # the kata's tile and the tutorial's big tile, fp16/bf16/fp32, sm_80 and sm_90
    **{f"mm.{dt}.{a}": mm(dt, a) for dt in ("fp16", "bf16") for a in (80, 90)},
    "mm.fp32.ieee.80": mm("fp32", 80),
    "mm.fp32.tf32.80": mm("fp32", 80, precision="tf32"),
    "mm.fp16.big.90": mm("fp16", 90, 128, 128, 64, warps=8, stages=3),
    # the autotune table, sm_80 (A100) and fp16: registers and shared memory -> occupancy
    **{f"mm.config{i}.80": mm("fp16", 80, bm, bn, bk, g, warps=w, stages=s)
       for i, (bm, bn, bk, g, w, s) in enumerate(CONFIGS)},
    # softmax: a block per row (4 warps), a warp per row (1 warp), a row too long for registers, the online kernel
    "softmax.block.80": softmax("softmax_kernel", 1024, 4),
    "softmax.warp.80": softmax("softmax_kernel", 1024, 1),
    "softmax.unaligned.80": softmax("softmax_kernel", 1024, 4, aligned=("x_ptr", "y_ptr")),
    "softmax.fused16k.80": softmax("softmax_kernel", 16384, 4),
    "softmax.online.80": softmax("softmax_online_kernel", 1024, 4),
    # the reduction's stage-1 kernel
    "reduce.80": Request.make(RD, "reduce_kernel", {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "chunk": "i32"},
                              {"IS_MAX": False, "BLOCK": 1024}, arch=80, aligned=("x_ptr", "out_ptr", "n", "chunk")),
    "reduce.warp.80": Request.make(RD, "reduce_kernel", {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32",
                                                         "chunk": "i32"},
                                   {"IS_MAX": False, "BLOCK": 1024}, arch=80, num_warps=1,
                                   aligned=("x_ptr", "out_ptr", "n", "chunk")),
    # RMSNorm forward: one warp holding rows of 1024 .. 8192, and the warps the wrapper gives
    **{f"norm.warp{b}.80": norm(b, 1) for b in (1024, 2048, 4096, 8192)},
    **{f"norm.wrapper{b}.80": norm(b, min(max(b // 256, 1), 8)) for b in (1024, 2048, 4096, 8192)},
    # the transpose, 32 x 32 fp32 tiles
    **{f"transpose.{a}": Request.make(TR, "transpose_kernel", TRANSPOSE, {"BLOCK_M": 32, "BLOCK_N": 32}, arch=a,
                                      aligned=tuple(TRANSPOSE)) for a in (80, 90)},
    # a reciprocal square root, as the hardware offers it
    "rsqrt.80": Request.make(PR, "rsqrt_kernel", {"x_ptr": "*fp32", "y_ptr": "*fp32"}, {"BLOCK": 128}, arch=80,
                             aligned=("x_ptr", "y_ptr")),
}
