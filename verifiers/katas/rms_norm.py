"""Kata properties for ``rms_norm(x, weight=None, eps=1e-6) -> y``.

Conventions: normalise over the last dimension of x [..., N]: y = x / sqrt(mean(x²) + eps) · weight, eps
inside the square root, no mean subtracted and no bias; ``weight`` is [N] (None: 1). The result has x's
dtype; fp16 and bf16 inputs are normalised in fp32 (in fp16, x² rounds to 0 below about 1.7e-4 and
overflows to inf above 256). An all-zero row (a padding token) gives 0, not NaN.

Oracle: PyTorch's ``F.rms_norm`` in fp64 on the same values.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st

from verifiers.katas.budgets import realistic
from verifiers.katas.norm_cases import F64, Case, cases
from verifiers.katas.tensors import close


def oracle(x, weight, eps):
    return F.rms_norm(x.to(F64), (x.shape[-1],), None if weight is None else weight.to(F64), eps)


def _run(impl, x, w, eps):
    return impl(x.clone(), None if w is None else w.clone(), eps)


def prop_matches_torch_rms_norm(impl) -> None:
    """Any leading dims, rows of 1..33, three eps, offsets and spreads, with and without weight: equals
    F.rms_norm in fp64 to 1e-10 (subtracting the mean, as LayerNorm does, or dividing by N - 1 misses)."""

    @given(cases())
    def check(c):
        x, w, _ = c.build()
        close(_run(impl, x, w, c.eps), oracle(x, w, c.eps), atol=1e-10, rtol=1e-10, dtype=F64,
              what="the output", where=f"{c}")

    check()


def prop_eps_inside_the_sqrt(impl) -> None:
    """The row [0.001, -0.001] has mean square 1e-6; with eps = 1e-5 it becomes ±0.001/sqrt(1.1e-5) = ±0.3015.
    Adding eps to the RMS instead gives ±0.990."""
    x = torch.tensor([[0.001, -0.001]], dtype=F64)
    close(_run(impl, x, None, 1e-5), oracle(x, None, 1e-5), atol=1e-12, what="the output",
          where="x=[0.001, -0.001], eps=1e-5 (expected ±0.3015)")


def prop_zero_row_gives_zero(impl) -> None:
    """All-zero rows (padding tokens) in fp64, fp32, fp16 and bf16: the output is exactly 0, not 0/0 = NaN
    (and the one ramp row among them is still normalised)."""
    for dtype in (F64, torch.float32, torch.float16, torch.bfloat16):
        x = torch.zeros(2, 3, 16, dtype=dtype)
        x[0, 1] = torch.linspace(-1, 1, 16, dtype=F64).to(dtype)
        w = torch.full((16,), 1.5, dtype=dtype)
        got = _run(impl, x, w, 1e-6)
        where = f"{dtype}, five all-zero rows of 16 and one ramp, eps=1e-6"
        close(got, oracle(x, w, 1e-6), atol=2.0 ** -5, rtol=2.0 ** -5, dtype=dtype, what="the output", where=where)
        zero = x.abs().sum(-1) == 0
        assert bool((got[zero] == 0).all()), f"{where}: the all-zero rows must give exactly 0"


def prop_fp16_small_and_large_rows(impl) -> None:
    """fp16 rows of 4096 values of size about 1e-4 (x² underflows to 0 in fp16) and about 300 (x² overflows to
    inf): normalised in fp32, each within fp16 rounding of the oracle (2^-9 of the value, plus 2^-9)."""
    for scale in (1e-4, 300.0, 1.0):
        c = Case((4,), 4096, 1e-6, 0.0, scale, True, 3)
        x, w, _ = c.build(torch.float16)
        close(_run(impl, x, w, c.eps), oracle(x, w, c.eps), atol=2.0 ** -9, rtol=2.0 ** -9, dtype=torch.float16,
              what="the fp16 output", where=f"fp16 rows of 4096 values of size {scale}, eps=1e-6")


def prop_bf16_activations(impl) -> None:
    """bf16 activations [2, 256, 4096] and a bf16 weight: the output is bf16 and within bf16 rounding of the
    fp64 oracle (2^-7 of the value, plus 2^-7)."""

    @realistic(1)
    @given(st.integers(0, 2**31 - 1))
    def check(seed):
        c = Case((2, 256), 4096, 1e-6, 0.5, 2.0, True, seed)
        x, w, _ = c.build(torch.bfloat16)
        close(_run(impl, x, w, c.eps), oracle(x, w, c.eps), atol=2.0 ** -7, rtol=2.0 ** -7, dtype=torch.bfloat16,
              what="the bf16 output", where=f"{c}")

    check()


ALL = [prop_matches_torch_rms_norm, prop_eps_inside_the_sqrt, prop_zero_row_gives_zero, prop_fp16_small_and_large_rows,
       prop_bf16_activations]

ZH = {
    "doc": """`rms_norm(x, weight=None, eps=1e-6) -> y` 的性质。

约定：在 x [..., N] 的最后一维上归一化：y = x / sqrt(mean(x²) + eps) · weight，eps 加在根号里面，不减均值，
也没有 bias；`weight` 为 [N]（None 时为 1）。结果的 dtype 与 x 相同；fp16 和 bf16 输入要在 fp32 下归一化
（fp16 下，x 小于约 1.7e-4 时 x² 舍入为 0，大于 256 时溢出为 inf）。全零的行（padding token）输出 0，而不是 NaN。

对照答案：在同样的数值上以 fp64 调用 PyTorch 的 `F.rms_norm`。""",
    "prop_matches_torch_rms_norm": "任意前导维度、行长 1..33、三种 eps、不同的偏移和标准差，有无 weight：与 fp64 的 F.rms_norm 相差不超过 1e-10（像 LayerNorm 那样减去均值，或者除以 N - 1，都不通过）。",
    "prop_eps_inside_the_sqrt": "行 [0.001, -0.001] 的均方是 1e-6；eps = 1e-5 时结果为 ±0.001/sqrt(1.1e-5) = ±0.3015。把 eps 加到 RMS 上则得到 ±0.990。",
    "prop_zero_row_gives_zero": "fp64、fp32、fp16 和 bf16 下的全零行（padding token）：输出恰好为 0，而不是 0/0 = NaN（其中唯一一条斜坡行照常归一化）。",
    "prop_fp16_small_and_large_rows": "fp16 的行，每行 4096 个值，大小约 1e-4（fp16 下 x² 下溢为 0）和约 300（x² 上溢为 inf）：在 fp32 下归一化，每个值与对照答案的差在 fp16 舍入误差之内（数值的 2^-9 再加 2^-9）。",
    "prop_bf16_activations": "bf16 激活 [2, 256, 4096] 和 bf16 的 weight：输出为 bf16，与 fp64 对照答案的差在 bf16 舍入误差之内（数值的 2^-7 再加 2^-7）。",
    "rms_norm": "x / sqrt(mean(x², 最后一维) + eps) · weight，至少在 fp32 下计算。",
}
