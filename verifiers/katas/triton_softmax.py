"""Kata properties for ``softmax(x)``: the softmax of every row of ``x [R, D]``, computed by the Triton kernel
``softmax_kernel`` with one row per program (the whole row in one block of ``BLOCK >= D`` lanes), ``D <= 4096``.

Conventions: ``x`` is fp32 or fp16, on the CPU (the judge runs your kernel in Triton's interpreter, as
``TRITON_INTERPRET=1`` does); the result has ``x``'s shape and dtype, the statistics are fp32. A row may
contain ``-inf`` (probability exactly 0 there), never only ``-inf``. Oracle: ``torch.softmax`` of ``x``
in fp64, computed here.

Tolerance per element against the fp64 value ``p`` of a row with maximum ``m``: the first-order error of
an fp32 evaluation, ``(|x - m| + D + 8) * 2^-24 * p`` (the shift, ``exp``, a sum of D terms in any order,
the division), plus, for fp16 output, its rounding ``2^-11 * p + 2^-25``. Without the max subtraction
``exp`` overflows (fp32 above 88.7, fp16 above 11.1); a lane past the row end must not count.
"""

from __future__ import annotations

import torch
from hypothesis import given
from hypothesis import strategies as st

from verifiers.katas.kernels import U16, U32, settings_few, within

EDGE_D = [1, 2, 3, 5, 7, 16, 17, 31, 33, 63, 65, 100, 127, 129, 255, 257, 300]


def _oracle(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    xd = x.double()
    p = torch.softmax(xd, dim=-1)
    shift = (xd - xd.max(dim=-1, keepdim=True).values).abs().nan_to_num(posinf=0.0)
    rel = (shift + x.shape[-1] + 8) * U32
    if x.dtype == torch.float16:
        rel = rel + U16
    return p, rel, (2.0**-25 if x.dtype == torch.float16 else 2.0**-149)


def _check(impl, x: torch.Tensor, what: str) -> None:
    p, rel, abs_ = _oracle(x)
    y = impl(x.clone())
    where = f"{what}: x {tuple(x.shape)} {str(x.dtype)[6:]}"
    assert isinstance(y, torch.Tensor) and y.dtype == x.dtype, (
        f"{where}: expected a {x.dtype} tensor, got {getattr(y, 'dtype', type(y).__name__)}")
    within(y, p, rel, abs_, where, "y")


@st.composite
def rows(draw, max_rows: int = 5):
    R = draw(st.integers(1, max_rows))
    D = draw(st.one_of(st.sampled_from(EDGE_D), st.integers(1, 300)))
    seed = draw(st.integers(0, 255))
    scale = draw(st.sampled_from([1.0, 3.0, 10.0]))
    x = torch.randn(R, D, generator=torch.Generator().manual_seed(seed)) * scale
    return x


def prop_matches_fp64(impl) -> None:
    """fp32 rows of any length up to 300 (ragged: not a power of two), values of scale 1 to 10: the fp64 softmax."""

    @settings_few(10)
    @given(rows())
    def check(x):
        _check(impl, x, "random rows")

    check()


def prop_row_end_is_masked(impl) -> None:
    """Rows of negative logits (all below -20) whose lengths are not powers of two (3, 5, 17, ... 1000): the lanes
    past the row end must not count. A lane loaded as 0 would be the row's maximum and take the probability."""

    @settings_few(2)
    @given(st.integers(0, 255))
    def check(seed):
        for D in (3, 5, 17, 33, 100, 129, 300, 1000):
            x = -20.0 - torch.rand(2, D, generator=torch.Generator().manual_seed(seed)) * 30.0
            _check(impl, x, "negative rows")

    check()


def prop_large_logits(impl) -> None:
    """Logits far from 0 -- rows around +89 and +100 (exp overflows fp32 above 88.7), of scale 1e4, around -1e4, a
    row of 3e38: finite probabilities equal to the fp64 softmax. Subtracting the row maximum is what makes this
    work."""

    @settings_few(3)
    @given(st.sampled_from([1, 7, 64, 100, 257]), st.integers(0, 255))
    def check(D, seed):
        gen = torch.Generator().manual_seed(seed)
        for level in (89.0, 100.0, 1e4, -1e4, 3e38):
            x = level + torch.randn(2, D, generator=gen) * (1.0 if abs(level) < 1e38 else 0.0)
            x[1] = torch.randn(D, generator=gen) * min(abs(level), 1e4)
            _check(impl, x, f"logits around {level:g}")

    check()


def prop_masked_and_constant_rows(impl) -> None:
    """Rows with -inf entries (masked logits: probability exactly 0; at least one finite entry per row) and rows
    whose entries are all equal (each gets 1/D up to rounding, whatever the constant: 0, -5, 1e4, -3e38)."""

    @settings_few(3)
    @given(st.sampled_from([2, 3, 31, 64, 100, 300]), st.integers(0, 255))
    def check(D, seed):
        gen = torch.Generator().manual_seed(seed)
        for c in (0.0, -5.0, 1e4, -3e38):
            x = torch.randn(3, D, generator=gen)
            masked = torch.rand(3, D, generator=gen) < 0.5
            masked[:, torch.randint(0, D, (1,), generator=gen)] = False  # one finite entry left in every row
            x[masked] = -float("inf")
            x[2] = c
            p, rel, abs_ = _oracle(x)
            y = impl(x.clone())
            where = f"x {tuple(x.shape)} with -inf entries, and a constant row of {c:g}"
            within(y, p, rel, abs_, where, "y")
            zero = torch.isinf(x)
            assert bool((y[zero] == 0).all()), f"{where}: probability of a -inf logit expected 0, got {y[zero].tolist()}"

    check()


def prop_fp16_rows(impl) -> None:
    """fp16 in, fp16 out, statistics in fp32 (an exp in fp16 overflows above 11.1; values here reach 60000)."""

    @settings_few(3)
    @given(st.sampled_from([1, 5, 33, 128, 300]), st.integers(0, 255))
    def check(D, seed):
        gen = torch.Generator().manual_seed(seed)
        for scale in (1.0, 8.0, 60000.0):
            x = (torch.rand(3, D, generator=gen) * 2 - 1) * scale
            _check(impl, x.half(), "fp16 rows")

    check()


def prop_realistic_rows(impl) -> None:
    """Eight fp32 rows of 4096 logits (a vocabulary slice, an attention row at 4k context), scale 5."""

    @settings_few(1)
    @given(st.integers(0, 255))
    def check(seed):
        x = torch.randn(8, 4096, generator=torch.Generator().manual_seed(seed)) * 5
        _check(impl, x, "realistic rows")

    check()


ALL = [prop_matches_fp64, prop_row_end_is_masked, prop_large_logits, prop_masked_and_constant_rows, prop_fp16_rows,
       prop_realistic_rows]

ZH = {
    "doc": """`softmax(x)` 的性质：对 x [R, D] 的每一行求 softmax，由 Triton kernel `softmax_kernel` 计算，每个 program
处理一行（整行放进一个 `BLOCK >= D` 个 lane 的块），`D <= 4096`。

约定：x 为 fp32 或 fp16，位于 CPU（评测在 Triton 的解释器里运行你的 kernel，等同于 `TRITON_INTERPRET=1`）；
结果的形状和 dtype 与 x 相同，统计量（最大值、求和）用 fp32。一行中可以有 `-inf`（该处概率恰为 0），但不会全是 `-inf`。
对照答案：在这里以 fp64 计算的 `torch.softmax`。

容差（逐元素，相对该行最大值为 m、fp64 概率为 p）：fp32 计算的一阶误差 `(|x - m| + D + 8) * 2^-24 * p`
（平移、exp、任意顺序的 D 项求和、除法），fp16 输出再加上它的舍入 `2^-11 * p + 2^-25`。不减最大值时 exp 会溢出
（fp32 超过 88.7，fp16 超过 11.1）；行尾之后的 lane 不能参与计算。""",
    "prop_matches_fp64": "fp32 的行，长度不超过 300（参差：不是 2 的幂），数值尺度 1 到 10：等于 fp64 的 softmax。",
    "prop_row_end_is_masked": "全是负 logit（都小于 -20）的行，长度不是 2 的幂（3、5、17 …… 1000）：行尾之后的 lane 不能参与计算。按 0 读入的 lane 会成为该行的最大值，把概率都拿走。",
    "prop_large_logits": "远离 0 的 logit：约 +89 和 +100 的行（fp32 的 exp 在 88.7 以上溢出）、尺度 1e4、约 -1e4、一行 3e38：得到有限且等于 fp64 softmax 的概率。靠的是先减去行最大值。",
    "prop_masked_and_constant_rows": "含 -inf 的行（被 mask 的 logit：概率恰为 0；每行至少一个有限值），以及所有元素相等的行（每个都是 1/D，允许舍入误差，不论常数是 0、-5、1e4 还是 -3e38）。",
    "prop_fp16_rows": "fp16 输入、fp16 输出、统计量用 fp32（fp16 的 exp 在 11.1 以上溢出；这里的值达到 60000）。",
    "prop_realistic_rows": "8 行 fp32，每行 4096 个 logit（词表的一段，或 4k 上下文的一行注意力），尺度 5。",
    "softmax_kernel": "y[row] = softmax(x[row])，row 是本 program 负责的那一行；BLOCK >= n_cols（2 的幂）。",
}
