"""Kata properties for ``transpose(x)``: ``x.T`` for ``x [M, N]`` as a new contiguous ``[N, M]`` tensor, by the
Triton kernel ``transpose_kernel``, one ``BLOCK_M x BLOCK_N`` tile per program.

Conventions: ``x`` is a contiguous CPU tensor of any dtype (the judge runs your kernel in Triton's
interpreter); the result has its dtype and is exact. The edge tiles of sizes that are not multiples of the
tile are masked on both sides: the load in ``x``'s coordinates, the store in ``y``'s (the tile is
transposed in between). ``prop_stores_are_vectorized`` compiles ``transpose_kernel`` for sm_90 (fp32, 32 x 32
tiles, 4 warps, sizes divisible by 16) and reads its PTX: the stores must be 128-bit vectors, as the loads
are -- the sign that consecutive threads write consecutive addresses. Keep the stub's kernel signature.
"""

from __future__ import annotations

import torch
from hypothesis import given
from hypothesis import strategies as st

from verifiers.katas.kernels import compiled_ptx, settings_few

EDGES = [1, 2, 15, 16, 17, 31, 32, 33, 63, 64, 65, 97]


def _check(impl, x: torch.Tensor, what: str) -> None:
    y = impl(x.clone())
    where = f"{what}: x {tuple(x.shape)} {str(x.dtype)[6:]}"
    want = x.t()
    assert isinstance(y, torch.Tensor) and tuple(y.shape) == tuple(want.shape) and y.dtype == x.dtype, (
        f"{where}: expected a {x.dtype} tensor of shape {tuple(want.shape)}, got "
        f"{getattr(y, 'dtype', type(y).__name__)} {tuple(getattr(y, 'shape', ()))}")
    if not torch.equal(y, want):
        i, j = (int(v) for v in torch.nonzero(y != want)[0])
        raise AssertionError(f"{where}: y[{i}, {j}] expected x[{j}, {i}] = {want[i, j].item()!r}, got "
                             f"{y[i, j].item()!r}; {int((y != want).sum())} of {y.numel()} elements are wrong")


def prop_exact_transpose(impl) -> None:
    """fp32 matrices of any shape up to 97 x 97: every element lands at its transposed place, exactly."""

    @settings_few(8)
    @given(st.one_of(st.sampled_from(EDGES), st.integers(1, 97)), st.one_of(st.sampled_from(EDGES), st.integers(1, 97)),
           st.integers(0, 255))
    def check(M, N, seed):
        _check(impl, torch.randn(M, N, generator=torch.Generator().manual_seed(seed)), "random")

    check()


def prop_non_square_edges(impl) -> None:
    """Wide and tall matrices whose sides are not tile multiples (1 x 65, 5 x 40, 33 x 64, 65 x 1, 33 x 70, 70 x 33,
    31 x 97, 97 x 31), each value naming its position: the load's bounds and the store's bounds are different
    regions of the tile; one mask for both drops elements (or writes past the end of y)."""
    for M, N in ((1, 65), (5, 40), (33, 64), (65, 1), (33, 70), (70, 33), (31, 97), (97, 31)):
        x = torch.arange(M * N, dtype=torch.float32).reshape(M, N)
        _check(impl, x, "non-square")


def prop_any_dtype(impl) -> None:
    """fp16, int32 and fp64 matrices transpose exactly too (the kernel moves bits, whatever they mean)."""

    @settings_few(1)
    @given(st.integers(0, 255))
    def check(seed):
        for dtype in (torch.float16, torch.int32, torch.float64):
            for mn in ((5, 40), (40, 5), (33, 33)):
                x = (torch.randn(*mn, generator=torch.Generator().manual_seed(seed)) * 1000).to(dtype)
                _check(impl, x, "dtypes")

    check()


TR_SIG = {"x_ptr": "*fp32", "y_ptr": "*fp32", "M": "i32", "N": "i32", "stride_xm": "i32", "stride_ym": "i32"}
TR_ALIGNED = ("x_ptr", "y_ptr", "M", "N", "stride_xm", "stride_ym")


def prop_stores_are_vectorized(impl) -> None:
    """What the kernel compiles to (sm_90, fp32, 32 x 32 tiles, aligned sizes): every global store is a 128-bit
    vector, like the loads. A transpose that scatters single elements (one thread per element, writing with a
    stride of M) compiles to 32-bit stores: uncoalesced writes."""
    from impls.gpu.compiled import parse_memory_ops

    ptx = compiled_ptx(impl, "transpose_kernel", signature=TR_SIG, constexprs={"BLOCK_M": 32, "BLOCK_N": 32},
                       arch=90, aligned=TR_ALIGNED)
    loads, stores = parse_memory_ops(ptx)
    widths = sorted({op.bits for op in stores if op.kind == "st.global"})
    assert widths == [128], (
        f"transpose_kernel compiled for sm_90 (fp32, 32x32 tiles, sizes divisible by 16): expected only 128-bit "
        f"global stores (st.global.v4), found store widths {widths or 'none'} bits; write whole rows of y")


ALL = [prop_exact_transpose, prop_non_square_edges, prop_any_dtype, prop_stores_are_vectorized]

ZH = {
    "doc": """`transpose(x)` 的性质：由 Triton kernel `transpose_kernel` 把 x [M, N] 转置成一个新的连续 [N, M] 张量
（即 `x.T`），每个 program 处理一个 `BLOCK_M x BLOCK_N` 块。

约定：x 是任意 dtype 的连续 CPU 张量（评测在 Triton 的解释器里运行你的 kernel）；结果的 dtype 与 x 相同，且必须精确。
尺寸不是块大小整数倍时，边缘块两侧都要 mask：读按 x 的坐标，写按 y 的坐标（块在中间被转置）。
`prop_stores_are_vectorized` 把 `transpose_kernel` 编译到 sm_90（fp32，32 x 32 的块，4 个 warp，尺寸能被 16 整除）
并读取 PTX：写必须像读一样是 128 位向量，这说明相邻线程写相邻地址。请保持 stub 里 kernel 的签名不变。""",
    "prop_exact_transpose": "fp32 矩阵，任意形状不超过 97 x 97：每个元素都精确落在转置后的位置。",
    "prop_non_square_edges": "宽矩阵和高矩阵，边长不是块大小的整数倍（1 x 65、5 x 40、33 x 64、65 x 1、33 x 70、70 x 33、31 x 97、97 x 31），每个值标明自己的位置：读的边界和写的边界是块里不同的区域；用同一个 mask 会丢元素（或写出 y 的边界）。",
    "prop_any_dtype": "fp16、int32 和 fp64 矩阵也要精确转置（kernel 只搬运比特，不管它们代表什么）。",
    "prop_stores_are_vectorized": "kernel 编译出来的代码（sm_90，fp32，32 x 32 的块，尺寸对齐）：每条全局写都是 128 位向量，和读一样。逐元素分散写的转置（每个线程一个元素、以步长 M 写）编译成 32 位的写：不合并的写。",
    "transpose_kernel": "对本 program 负责的 x 的 BLOCK_M x BLOCK_N 块：y[n, m] = x[m, n]（y 是 N x M）。",
}
