"""Kata properties for ``layer_norm(x, weight=None, bias=None, eps=1e-6) -> y``.

Conventions: normalise over the last dimension of x [..., N]: y = (x - mean) / sqrt(var + eps) · weight +
bias, with the biased variance var = mean((x - mean)²) (divide by N, not N - 1) and eps inside the square
root; ``weight`` and ``bias`` are [N] (None: 1 and 0). The result has x's dtype; fp16 and bf16 inputs are
normalised in fp32 (in bf16 the mean of a row near 32 is rounded by up to 0.125 of its spread of 1), and an
fp32 row whose mean is 10^4 times its spread must still come out right (the one-pass E[x²] - E[x]²
cancels there; two passes or Welford's update do not).

Oracle: PyTorch's ``F.layer_norm`` in fp64 on the same values.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st

from verifiers.katas.budgets import realistic
from verifiers.katas.norm_cases import F64, Case, cases
from verifiers.katas.tensors import close


def oracle(x, weight, bias, eps):
    n = x.shape[-1]
    return F.layer_norm(x.to(F64), (n,), None if weight is None else weight.to(F64),
                        None if bias is None else bias.to(F64), eps)


def _run(impl, x, w, b, eps):
    return impl(x.clone(), None if w is None else w.clone(), None if b is None else b.clone(), eps)


def prop_matches_torch_layer_norm(impl) -> None:
    """Any leading dims, rows of 1..33, three eps, offsets and spreads, with and without weight and bias: equals
    F.layer_norm in fp64 to 1e-10."""

    @given(cases())
    def check(c):
        x, w, b = c.build()
        close(_run(impl, x, w, b, c.eps), oracle(x, w, b, c.eps), atol=1e-10, rtol=1e-10, dtype=F64,
              what="the output", where=f"{c}")

    check()


def prop_biased_variance(impl) -> None:
    """The row [-1, 1] has variance 1 (divide by N = 2), so it becomes ±1/sqrt(1 + eps); dividing by N - 1
    gives variance 2 and ±0.707."""
    x = torch.tensor([[-1.0, 1.0]], dtype=F64)
    close(_run(impl, x, None, None, 1e-5), oracle(x, None, None, 1e-5), atol=1e-12, what="the output",
          where="x=[-1, 1], eps=1e-5 (expected ±1/sqrt(1.00001))")


def prop_eps_inside_the_sqrt(impl) -> None:
    """The row [0, 0.002] has variance 1e-6; with eps = 1e-5 it becomes ±0.001/sqrt(1.1e-5) = ±0.3015.
    Adding eps to the standard deviation instead gives ±0.990."""
    x = torch.tensor([[0.0, 0.002]], dtype=F64)
    close(_run(impl, x, None, None, 1e-5), oracle(x, None, None, 1e-5), atol=1e-12, what="the output",
          where="x=[0, 0.002], eps=1e-5 (expected ±0.3015)")


def prop_constant_row_gives_the_bias(impl) -> None:
    """A constant row (every element 7, in fp64 and fp32) has variance 0: the output is exactly the bias,
    not NaN (a one-pass variance can come out slightly negative and take the square root of it)."""
    for dtype in (F64, torch.float32):
        x = torch.full((3, 64), 7.0, dtype=dtype)
        x[1] = 1e4 + 0.5
        b = torch.linspace(-1, 1, 64, dtype=dtype)
        w = torch.full((64,), 2.0, dtype=dtype)
        close(_run(impl, x, w, b, 1e-5), oracle(x, w, b, 1e-5), atol=1e-6, dtype=dtype,
              what="the output of constant rows", where=f"{dtype}, rows of 7.0 and of 10000.5, eps=1e-5")


def prop_large_mean_in_fp32(impl) -> None:
    """fp32 rows of 4096 values with mean 10^4 and spread 1 (a residual stream with a large offset): within
    5e-3 of the fp64 oracle. The one-pass E[x²] - E[x]² loses every digit of the variance in fp32
    (x² ≈ 10^8, where fp32 numbers are 8 apart) and can even go negative."""

    @realistic(2)
    @given(st.integers(0, 2**31 - 1))
    def check(seed):
        c = Case((8,), 4096, 1e-5, 1e4, 1.0, True, seed)
        x, w, b = c.build(torch.float32)
        close(_run(impl, x, w, b, c.eps), oracle(x, w, b, c.eps), atol=5e-3, rtol=5e-3, dtype=torch.float32,
              what="the fp32 output", where=f"{c}")

    check()


def prop_bf16_activations(impl) -> None:
    """bf16 activations [2, 256, 4096] with mean 32 and spread 1, bf16 weight and bias: the output is bf16 and
    within bf16 rounding of the fp64 oracle (2^-7 of the value, plus 2^-7); averaging in bf16 rounds the
    mean by up to 0.125 and misses."""

    @realistic(1)
    @given(st.integers(0, 2**31 - 1))
    def check(seed):
        c = Case((2, 256), 4096, 1e-5, 32.0, 1.0, True, seed)
        x, w, b = c.build(torch.bfloat16)
        close(_run(impl, x, w, b, c.eps), oracle(x, w, b, c.eps), atol=2.0 ** -7, rtol=2.0 ** -7,
              dtype=torch.bfloat16, what="the bf16 output", where=f"{c}")

    check()


ALL = [prop_matches_torch_layer_norm, prop_biased_variance, prop_eps_inside_the_sqrt, prop_constant_row_gives_the_bias,
       prop_large_mean_in_fp32, prop_bf16_activations]

ZH = {
    "doc": """`layer_norm(x, weight=None, bias=None, eps=1e-6) -> y` 的性质。

约定：在 x [..., N] 的最后一维上归一化：y = (x - mean) / sqrt(var + eps) · weight + bias，方差用有偏估计
var = mean((x - mean)²)（除以 N，不是 N - 1），eps 加在根号里面；`weight` 和 `bias` 为 [N]（None 时分别为 1 和 0）。
结果的 dtype 与 x 相同；fp16 和 bf16 输入要在 fp32 下归一化（bf16 下，数值在 32 附近、标准差为 1 的一行，均值的
舍入误差可达 0.125，而标准差才 1）；均值是标准差 10^4 倍的 fp32 行也必须算对（一遍扫描的 E[x²] - E[x]² 在这里
会发生抵消；两遍扫描或 Welford 更新不会）。

对照答案：在同样的数值上以 fp64 调用 PyTorch 的 `F.layer_norm`。""",
    "prop_matches_torch_layer_norm": "任意前导维度、行长 1..33、三种 eps、不同的偏移和标准差，有无 weight 和 bias：与 fp64 的 F.layer_norm 相差不超过 1e-10。",
    "prop_biased_variance": "行 [-1, 1] 的方差是 1（除以 N = 2），所以结果是 ±1/sqrt(1 + eps)；除以 N - 1 会得到方差 2 和 ±0.707。",
    "prop_eps_inside_the_sqrt": "行 [0, 0.002] 的方差是 1e-6；eps = 1e-5 时结果为 ±0.001/sqrt(1.1e-5) = ±0.3015。把 eps 加到标准差上则得到 ±0.990。",
    "prop_constant_row_gives_the_bias": "常数行（每个元素都是 7，fp64 和 fp32）方差为 0：输出恰好等于 bias，而不是 NaN（一遍扫描算出的方差可能略小于 0，再对它开根号）。",
    "prop_large_mean_in_fp32": "fp32 的行，每行 4096 个值，均值 10^4、标准差 1（带大偏移的残差流）：与 fp64 对照答案相差不超过 5e-3。一遍扫描的 E[x²] - E[x]² 在 fp32 下会丢掉方差的全部有效数字（x² ≈ 10^8，那里相邻 fp32 数相差 8），甚至可能变成负数。",
    "prop_bf16_activations": "bf16 激活 [2, 256, 4096]，均值 32、标准差 1，weight 和 bias 也是 bf16：输出为 bf16，与 fp64 对照答案的差在 bf16 舍入误差之内（数值的 2^-7 再加 2^-7）；在 bf16 下求平均，均值的舍入误差可达 0.125，不通过。",
    "layer_norm": """在最后一维上计算 (x - mean) / sqrt(var + eps) · weight + bias（有偏方差，eps 在根号里，两遍扫描），
至少在 fp32 下计算，以 x 的 dtype 返回。""",
}
