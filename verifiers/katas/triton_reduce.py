"""Kata properties for ``reduce(x, op)``: the sum (``op="sum"``) or maximum (``op="max"``) of a vector ``x [n]``
in two launches of the Triton kernel ``reduce_kernel``: one partial result per program (each program owns a
chunk of ``x``), then one program over the partials.

Conventions: ``x`` is fp32 or fp16, on the CPU (the judge runs your kernel in Triton's interpreter),
``n >= 1``; the result is a 0-d fp32 tensor. Accumulate in fp32 (an fp16 input is converted as it is
loaded). Out-of-range lanes must not change the result: pad a sum with 0 and a max with -inf. Oracle: the
fp64 sum / max of ``x``, computed here.

Tolerance of a sum: ``(n + 2) * 2^-24 * sum |x_i|`` (fp32 additions in any order); a max is exact, and so
is a sum whose partial sums are all representable in fp32 (``prop_counts_every_element_once``,
``prop_fp16_sums_in_fp32``).
"""

from __future__ import annotations

import torch
from hypothesis import given
from hypothesis import strategies as st

from verifiers.katas.kernels import U32, settings_few

EDGE_N = [1, 2, 3, 1023, 1024, 1025, 8191, 8192, 8193, 16385, 20000, 65537]


def _scalar(got, where: str) -> float:
    assert isinstance(got, torch.Tensor) and got.numel() == 1 and got.dtype == torch.float32, (
        f"{where}: expected a one-element fp32 tensor, got {type(got).__name__} "
        f"{tuple(getattr(got, 'shape', ()))} {getattr(got, 'dtype', '')}")
    return float(got.reshape(()).item())


def prop_sum_matches_fp64(impl) -> None:
    """fp32 vectors of any length up to 70000 (ragged: not multiples of any block or chunk): the fp64 sum to an
    fp32 error bound."""

    @settings_few(8)
    @given(st.one_of(st.sampled_from(EDGE_N), st.integers(1, 70000)), st.sampled_from([1.0, 1e3]),
           st.integers(0, 255))
    def check(n, scale, seed):
        x = torch.randn(n, generator=torch.Generator().manual_seed(seed)) * scale
        want = x.double().sum().item()
        tol = (n + 2) * U32 * x.double().abs().sum().item()
        got = _scalar(impl(x.clone(), "sum"), f"sum of {n} fp32")
        assert abs(got - want) <= tol, f"sum of {n} fp32 values (seed {seed}): expected {want!r} (to {tol:.3g}), got {got!r}"

    check()


def prop_counts_every_element_once(impl) -> None:
    """The sum of n ones is exactly n in fp32 (n < 2^24), and the max of a vector whose largest element is its last
    (or first) is that element, for n around the block and chunk boundaries (1, 2, 1023, 1025, 8191, 8193, 16385,
    24575): an element read twice or never (a block count off by one, a chunk overlapping the next) changes the
    answer."""
    for n in (1, 2, 1023, 1025, 8191, 8193, 16385, 3 * 8192 - 1):
        got = _scalar(impl(torch.ones(n), "sum"), f"sum of {n} ones")
        assert got == float(n), f"sum of {n} ones (fp32): expected {float(n)!r}, got {got!r}"
        for last in (True, False):
            x = -1000.0 - torch.arange(n, dtype=torch.float32)
            x[-1 if last else 0] = 7.0
            got = _scalar(impl(x, "max"), f"max of {n}")
            assert got == 7.0, f"max of {n} values, the largest (7.0) at index {n - 1 if last else 0}: got {got!r}"


def prop_max_of_negatives(impl) -> None:
    """Every element negative and lengths that are not multiples of the block (1, 3, 1000, 1023, 1025, 8193,
    30001): a lane padded with 0 would win; the max is the largest element, exactly."""

    @settings_few(2)
    @given(st.integers(0, 255))
    def check(seed):
        for n in (1, 3, 1000, 1023, 1025, 8193, 30001):
            x = -1.0 - torch.rand(n, generator=torch.Generator().manual_seed(seed)) * 100
            want = x.max().item()
            got = _scalar(impl(x.clone(), "max"), f"max of {n} negatives")
            assert got == want, f"max of {n} negative fp32 values (seed {seed}): expected {want!r}, got {got!r}"

    check()


def prop_fp16_sums_in_fp32(impl) -> None:
    """fp16 values 1 + j/1024 (j = 1 or 3, the smallest steps above 1 in fp16), n = 2049 to 8191: every partial sum
    needs at most 23 significant bits, so an fp32 accumulator is exact in any order; fp16 (11 bits) cannot hold
    such a sum past 2048, and the exact total is not an fp16 value."""

    @settings_few(2)
    @given(st.integers(0, 255))
    def check(seed):
        for n in (2049, 3000, 4097, 8191):
            j = torch.where(torch.rand(n, generator=torch.Generator().manual_seed(seed)) < 0.5, 1.0, 3.0)
            x = (1.0 + j / 1024).half()
            want = x.double().sum().item()
            got = _scalar(impl(x.clone(), "sum"), f"sum of {n} fp16")
            assert got == want, (f"sum of {n} fp16 values 1 + j/1024 (seed {seed}): exactly {want!r} with fp32 "
                                 f"accumulation, got {got!r}")

    check()


def prop_realistic_size(impl) -> None:
    """262147 fp32 values (a 256k-vocabulary row of logits, a gradient shard): sum and max."""

    @settings_few(1)
    @given(st.integers(0, 255))
    def check(seed):
        n = 262_147
        x = torch.randn(n, generator=torch.Generator().manual_seed(seed)) * 4
        want = x.double().sum().item()
        tol = (n + 2) * U32 * x.double().abs().sum().item()
        got = _scalar(impl(x.clone(), "sum"), f"sum of {n}")
        assert abs(got - want) <= tol, f"sum of {n} fp32 values: expected {want!r} (to {tol:.3g}), got {got!r}"
        got = _scalar(impl(x, "max"), f"max of {n}")
        assert got == x.max().item(), f"max of {n} fp32 values: expected {x.max().item()!r}, got {got!r}"

    check()


ALL = [prop_sum_matches_fp64, prop_counts_every_element_once, prop_max_of_negatives, prop_fp16_sums_in_fp32,
       prop_realistic_size]

ZH = {
    "doc": """`reduce(x, op)` 的性质：向量 x [n] 的和（`op="sum"`）或最大值（`op="max"`），由 Triton kernel `reduce_kernel`
分两次 launch 计算：先每个 program 负责 x 的一段、各得一个部分结果，再由一个 program 归约这些部分结果。

约定：x 为 fp32 或 fp16，位于 CPU（评测在 Triton 的解释器里运行你的 kernel），`n >= 1`；结果是 0 维 fp32 张量。
用 fp32 累加（fp16 输入在读入时转换）。越界的 lane 不能改变结果：求和时填 0，求最大值时填 -inf。
对照答案：在这里计算的 x 的 fp64 和 / 最大值。

求和的容差：`(n + 2) * 2^-24 * sum |x_i|`（任意顺序的 fp32 加法）；最大值必须精确，所有部分和都能在 fp32 中精确表示的求和
也必须精确（`prop_counts_every_element_once`、`prop_fp16_sums_in_fp32`）。""",
    "prop_sum_matches_fp64": "fp32 向量，长度不超过 70000（参差：不是任何块或段长度的整数倍）：等于 fp64 的和，误差在 fp32 误差界之内。",
    "prop_counts_every_element_once": "n 个 1 的和在 fp32 中恰为 n（n < 2^24）；最大元素在最后（或最前）的向量，其最大值就是这个元素；n 取块和段边界附近的值（1、2、1023、1025、8191、8193、16385、24575）：某个元素被读两次或没被读（块数差一、一段与下一段重叠）都会改变答案。",
    "prop_max_of_negatives": "所有元素为负，长度不是块大小的整数倍（1、3、1000、1023、1025、8193、30001）：填 0 的 lane 会胜出；最大值必须恰好是最大的那个元素。",
    "prop_fp16_sums_in_fp32": "fp16 值 1 + j/1024（j = 1 或 3，fp16 中 1 之上最小的几个步长），n = 2049 到 8191：每个部分和最多需要 23 位有效数字，所以 fp32 累加器以任何顺序都是精确的；fp16（11 位）在超过 2048 后存不下这样的和，而且精确的总和本身不是 fp16 值。",
    "prop_realistic_size": "262147 个 fp32 值（256k 词表的一行 logit，或一个梯度分片）：求和与最大值。",
    "reduce_kernel": "out[p] = x[p*chunk : min((p+1)*chunk, n)] 的和（或最大值），用 fp32 累加（x 为 fp64 时用 fp64）。",
}
