"""Kata properties for ``matmul(a, b)``: ``C = A @ B`` for ``A [M, K]``, ``B [K, N]`` by the Triton kernel
``matmul_kernel``, one ``BLOCK_M x BLOCK_N`` tile of ``C`` per program, ``tl.dot`` over ``BLOCK_K`` steps.

Conventions: ``a`` and ``b`` are both fp32 or both fp16, on the CPU (the judge runs your kernel in
Triton's interpreter); ``C`` has their dtype; products are accumulated in fp32. Any ``M, N, K >= 1``:
sizes that are not multiples of the blocks must work (mask the edge tiles, and read the out-of-range
part of a K step as 0). Oracle: ``a.double() @ b.double()``, computed here.

Tolerance per element: ``(K + 2) * 2^-24 * sum_k |a_ik b_kj|`` (an fp32 sum of K products in any order),
plus the output's rounding for fp16 (``2^-11 |c| + 2^-25``). ``prop_uses_tensor_cores`` compiles
``matmul_kernel`` for sm_90 and sm_80 with fp16 inputs (block 64 x 64 x 32, ``GROUP_M`` 8, 4 warps) and reads
the PTX: ``tl.dot`` must become Tensor-Core instructions (``wgmma`` / ``mma.sync``), so keep the stub's
kernel signature.
"""

from __future__ import annotations

import torch
from hypothesis import given
from hypothesis import strategies as st

from verifiers.katas.kernels import U16, U32, compiled_ptx, settings_few, within

EDGES = [1, 2, 15, 16, 17, 31, 32, 33, 47, 63, 64, 65, 97]


def _check(impl, a: torch.Tensor, b: torch.Tensor, what: str) -> None:
    want = a.double() @ b.double()
    mag = a.double().abs() @ b.double().abs()
    K = a.shape[1]
    abs_tol = (K + 2) * U32 * mag
    rel = U16 if a.dtype == torch.float16 else 0.0
    if a.dtype == torch.float16:
        abs_tol = abs_tol + 2.0**-25
    c = impl(a.clone(), b.clone())
    where = f"{what}: a {tuple(a.shape)}, b {tuple(b.shape)} {str(a.dtype)[6:]}"
    assert isinstance(c, torch.Tensor) and c.dtype == a.dtype, (
        f"{where}: expected a {a.dtype} result, got {getattr(c, 'dtype', type(c).__name__)}")
    within(c, want, rel, abs_tol, where, "C")


@st.composite
def shapes(draw):
    return tuple(draw(st.one_of(st.sampled_from(EDGES), st.integers(1, 70))) for _ in range(3))


def _pair(M, N, K, seed, dtype=torch.float32):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(M, K, generator=gen).to(dtype), torch.randn(K, N, generator=gen).to(dtype)


def prop_matches_fp64(impl) -> None:
    """fp32 matrices of any sizes up to 97 (most not multiples of any block): the fp64 product."""

    @settings_few(8)
    @given(shapes(), st.integers(0, 255))
    def check(mnk, seed):
        M, N, K = mnk
        _check(impl, *_pair(M, N, K, seed), "random")

    check()


def prop_every_edge_tile(impl) -> None:
    """Sizes one past a multiple of 16/32/64 in each dimension at once (17 x 33 x 65, 65 x 17 x 33, 33 x 65 x 17,
    1 x 129 x 1, 129 x 1 x 129, 97 x 97 x 97: the last tile holds one row, one column, one K step): every element
    of C is computed and none is dropped (an off-by-one block count drops some)."""

    @settings_few(1)
    @given(st.integers(0, 255))
    def check(seed):
        for M, N, K in ((17, 33, 65), (65, 17, 33), (33, 65, 17), (1, 129, 1), (129, 1, 129), (97, 97, 97)):
            a, b = _pair(M, N, K, seed)
            a[-1], b[:, -1] = a[-1] + 3.0, b[:, -1] - 3.0  # the last row and column stand out
            _check(impl, a, b, "edge tiles")

    check()


def prop_fp16_inputs(impl) -> None:
    """fp16 in, fp16 out, products accumulated in fp32: the fp64 product to fp16 rounding."""

    @settings_few(5)
    @given(shapes(), st.integers(0, 255))
    def check(mnk, seed):
        M, N, K = mnk
        _check(impl, *_pair(M, N, K, seed, torch.float16), "fp16")

    check()


def prop_accumulates_in_fp32(impl) -> None:
    """fp16 inputs whose dot products start at 32768 (one product 256 * 128 at k = 0) and then add 1/16 at each of
    the next 512 steps of K. With an fp32 accumulator every partial sum is exact and C = 32800, an fp16 value; an
    fp16 accumulator holds no step finer than 32 above 32768, so a K block adding less than 16 rounds away and C
    stays 32768 (for any BLOCK_K up to 256)."""
    for M, N in ((16, 16), (3, 40)):
        K = 513
        a = torch.full((M, K), 1 / 16, dtype=torch.float16)
        b = torch.ones(K, N, dtype=torch.float16)
        a[:, 0], b[0, :] = 256.0, 128.0
        c = impl(a, b)
        assert isinstance(c, torch.Tensor) and tuple(c.shape) == (M, N), f"expected C of shape {(M, N)}"
        got = c.double()
        assert bool((got == 32800.0).all()), (
            f"a {tuple(a.shape)}, b {tuple(b.shape)} fp16 (256*128 at k=0, then 1/16 * 1 for k = 1..512): every "
            f"C[i, j] is 32800 with an fp32 accumulator, got {sorted(set(got.flatten().tolist()))[:4]} (an fp16 "
            f"accumulator stays at 32768)")


def prop_realistic_size(impl) -> None:
    """fp16 192 x 160 times 160 x 300 (a slice of a projection: many tiles in both directions, a ragged K): the
    fp64 product to fp16 rounding."""

    @settings_few(1)
    @given(st.integers(0, 255))
    def check(seed):
        _check(impl, *_pair(192, 300, 160, seed, torch.float16), "realistic")

    check()


MM_SIG = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16",
          **{k: "i32" for k in ("M", "N", "K", "stride_am", "stride_bk", "stride_cm")}}
MM_CONSTEXPRS = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 8, "INPUT_PRECISION": "ieee"}
MM_ALIGNED = ("a_ptr", "b_ptr", "c_ptr", "M", "N", "K", "stride_am", "stride_bk", "stride_cm")


def prop_uses_tensor_cores(impl) -> None:
    """What the kernel compiles to: for fp16 inputs the sm_90 PTX has wgmma (Hopper's warpgroup MMA) and the sm_80
    PTX mma.sync (Ampere's), fp16 operands, fp32 accumulator. A product written as a broadcast multiply and a
    tl.sum over K is right in the interpreter but runs on the CUDA cores (FFMA), 16x slower at peak."""
    from impls.gpu.compiled import parse_tensor_core_ops

    for arch, family in ((90, "wgmma"), (80, "mma.sync")):
        ptx = compiled_ptx(impl, "matmul_kernel", signature=MM_SIG, constexprs=MM_CONSTEXPRS, arch=arch,
                           aligned=MM_ALIGNED)
        ops = parse_tensor_core_ops(ptx)
        got = sorted({f"{m.family} {m.a}x{m.b}->{m.acc}" for m in ops})
        assert any(m.family == family and m.a == "f16" and m.b == "f16" and m.acc == "f32" for m in ops), (
            f"matmul_kernel compiled for sm_{arch} with fp16 inputs (64x64x32 tiles, 4 warps): expected {family} "
            f"f16 x f16 -> f32 Tensor-Core instructions in the PTX, found {got or 'none'}; use tl.dot on the tiles")


ALL = [prop_matches_fp64, prop_every_edge_tile, prop_fp16_inputs, prop_accumulates_in_fp32, prop_realistic_size,
       prop_uses_tensor_cores]

ZH = {
    "doc": """`matmul(a, b)` 的性质：由 Triton kernel `matmul_kernel` 计算 `C = A @ B`，A [M, K]、B [K, N]，
每个 program 算 C 的一个 `BLOCK_M x BLOCK_N` 块，沿 K 以 `BLOCK_K` 为步长用 `tl.dot` 累加。

约定：a 和 b 同为 fp32 或同为 fp16，位于 CPU（评测在 Triton 的解释器里运行你的 kernel）；C 的 dtype 与输入相同；
乘积用 fp32 累加。任意 `M, N, K >= 1`：尺寸不是块大小的整数倍时也必须正确（边缘块要 mask，K 步中越界的部分按 0 读入）。
对照答案：在这里计算的 `a.double() @ b.double()`。

容差（逐元素）：`(K + 2) * 2^-24 * sum_k |a_ik b_kj|`（K 个乘积以任意顺序做 fp32 求和），fp16 输出再加上输出的舍入
（`2^-11 |c| + 2^-25`）。`prop_uses_tensor_cores` 把 `matmul_kernel` 以 fp16 输入编译到 sm_90 和 sm_80
（块 64 x 64 x 32，`GROUP_M` 为 8，4 个 warp）并读取 PTX：`tl.dot` 必须变成 Tensor Core 指令
（`wgmma` / `mma.sync`），所以请保持 stub 里 kernel 的签名不变。""",
    "prop_matches_fp64": "fp32 矩阵，各维不超过 97（大多不是任何块大小的整数倍）：等于 fp64 的乘积。",
    "prop_every_edge_tile": "每一维同时比 16/32/64 的倍数多 1（17 x 33 x 65、65 x 17 x 33、33 x 65 x 17、1 x 129 x 1、129 x 1 x 129、97 x 97 x 97：最后一个块只有一行、一列、一个 K 步）：C 的每个元素都被计算，一个都不少（块数差一会漏掉一些）。",
    "prop_fp16_inputs": "fp16 输入、fp16 输出、乘积用 fp32 累加：等于 fp64 的乘积，误差在 fp16 舍入之内。",
    "prop_accumulates_in_fp32": "fp16 输入，点积从 32768 开始（k = 0 时一个乘积 256 * 128），之后 512 个 K 步每步加 1/16。fp32 累加器的每个部分和都是精确的，C = 32800，是一个 fp16 值；fp16 累加器在 32768 以上的精度只有 32，一个 K 块加不到 16 就被舍掉，C 停在 32768（BLOCK_K 不超过 256 时都如此）。",
    "prop_realistic_size": "fp16 的 192 x 160 乘 160 x 300（一个投影层的一片：两个方向都有很多块，K 参差不齐）：等于 fp64 的乘积，误差在 fp16 舍入之内。",
    "prop_uses_tensor_cores": "kernel 编译出来的代码：fp16 输入时，sm_90 的 PTX 里有 wgmma（Hopper 的 warpgroup MMA），sm_80 的 PTX 里有 mma.sync（Ampere 的），fp16 操作数、fp32 累加器。把乘法写成广播相乘再沿 K 做 tl.sum，在解释器里结果正确，但跑在 CUDA core 上（FFMA），峰值慢 16 倍。",
    "matmul_kernel": """C[M, N] = A[M, K] @ B[K, N]，行连续（A 的第 i 行从 a_ptr + i * stride_am 开始）：每个 program 算 C 的一个
BLOCK_M x BLOCK_N 块，fp32 累加器。""",
}
