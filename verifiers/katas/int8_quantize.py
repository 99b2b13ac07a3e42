"""Kata properties for ``quantize_int8(x, per_channel=True) -> (q, scale)``.

Conventions: x is a float32 weight [out, in]. Symmetric INT8: one scale per output row (``per_channel``)
or one for the whole tensor, scale = max|x| / 127 over that row or tensor, and q = round(x / scale)
clamped to [-127, 127] (round to nearest; either way of breaking an exact .5 is fine), returned as an
int8 tensor of x's shape; ``scale`` is a float tensor that broadcasts against x ([out, 1] or [] / [1, 1]).
x is reproduced as q · scale within scale/2. A row (or tensor) of zeros must not give a scale of 0: x/0
is NaN, and casting NaN to int8 is undefined; give it any positive finite scale, its codes are 0.

Oracle: the definition in fp64: the scale from the row's maximum, and for each element the distance
|q - x/scale| <= 1/2 (with 1e-4 of slack for computing x/scale in fp32).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from hypothesis import given
from hypothesis import strategies as st

from verifiers.katas.budgets import realistic

F64 = torch.float64


def check_quantized(got, x: torch.Tensor, per_channel: bool, where: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The answer follows the definition; returns (codes, scale expanded to x's shape) in fp64."""
    assert isinstance(got, (tuple, list)) and len(got) == 2, f"{where}: expected (q, scale), got {type(got).__name__}"
    q, scale = got
    assert isinstance(q, torch.Tensor) and q.dtype == torch.int8 and tuple(q.shape) == tuple(x.shape), \
        f"{where}: q must be an int8 tensor of shape {tuple(x.shape)}, got {getattr(q, 'dtype', type(q))} " \
        f"{tuple(getattr(q, 'shape', ()))}"
    assert isinstance(scale, torch.Tensor) and scale.is_floating_point(), \
        f"{where}: scale must be a float tensor, got {type(scale).__name__}"
    try:
        s = scale.to(F64).expand_as(x)
    except RuntimeError:
        raise AssertionError(f"{where}: scale of shape {tuple(scale.shape)} does not broadcast to {tuple(x.shape)}") \
            from None
    xd = x.to(F64)
    groups = xd.abs().amax(-1, keepdim=True) if per_channel else xd.abs().amax().reshape(1, 1)
    want = (groups / 127).expand_as(xd)
    lone = s[:, :1] if per_channel else s.reshape(-1)[:1].reshape(1, 1)
    assert bool((s == lone.expand_as(s)).all()), \
        f"{where}: expected one scale per {'row' if per_channel else 'tensor'}, got {scale.tolist()}"
    assert bool(torch.isfinite(s).all() and (s > 0).all()), \
        f"{where}: every scale must be positive and finite (an all-zero row too), got {scale.reshape(-1)[:8].tolist()}"
    live = want > 0
    bad = live & ((s - want).abs() > 1e-6 * want)
    if bool(bad.any()):
        r = int(torch.nonzero(bad)[0][0])
        raise AssertionError(f"{where}: row {r}: expected scale max|x|/127 = {float(want[r, 0])!r}, got "
                             f"{float(s[r, 0])!r}")
    codes = q.to(F64)
    assert bool((codes.abs() <= 127).all()), f"{where}: codes outside [-127, 127]: {int(codes.min())}..{int(codes.max())}"
    off = (codes - xd / s).abs()
    if bool((off > 0.5 + 1e-4).any()):
        i = tuple(int(v) for v in torch.nonzero(off == off.max())[0])
        raise AssertionError(f"{where}: x{list(i)} = {float(xd[i])!r} with scale {float(s[i])!r} is "
                             f"{float(xd[i] / s[i]):.4f} steps: expected the nearest code "
                             f"{round(float(xd[i] / s[i]))}, got {int(codes[i])}")
    return codes, s


@dataclass(frozen=True)
class Case:
    rows: tuple  # each row: (scale of its values, zero row?)
    cols: int
    per_channel: bool
    seed: int

    def build(self) -> torch.Tensor:
        g = torch.Generator().manual_seed(self.seed)
        x = torch.randn(len(self.rows), self.cols, generator=g, dtype=F64)
        for r, (size, zero) in enumerate(self.rows):
            x[r] = 0.0 if zero else x[r] * size
        return x.float()


@st.composite
def cases(draw):
    n = draw(st.integers(1, 4))
    rows = tuple((draw(st.sampled_from([1e-3, 1.0, 50.0])), draw(st.booleans())) for _ in range(n))
    return Case(rows, draw(st.integers(1, 9)), draw(st.booleans()), draw(st.integers(0, 2**31 - 1)))


def _run(impl, x, per_channel):
    return impl(x.clone(), per_channel)


def prop_matches_the_definition(impl) -> None:
    """Random fp32 matrices of 1..4 rows of 1..9 values at three magnitudes (some rows all zero), per channel
    and per tensor: the scale is max|x|/127 of the row (tensor) and every code is the nearest integer to
    x/scale, within [-127, 127]."""

    @given(cases())
    def check(c):
        x = c.build()
        check_quantized(_run(impl, x, c.per_channel), x, c.per_channel, f"{c}, x={x.tolist()}")

    check()


def prop_rounds_to_nearest(impl) -> None:
    """The row [127, 0.7, -0.7, 2.6, -2.6, 126.4] has scale exactly 1: codes [127, 1, -1, 3, -3, 126].
    Truncating x/scale (``.to(torch.int8)``, NumPy's ``astype``) gives 0, 0, 2, -2: errors of up to a whole
    step, all toward zero."""
    x = torch.tensor([[127.0, 0.7, -0.7, 2.6, -2.6, 126.4]])
    for per_channel in (True, False):
        codes, _ = check_quantized(_run(impl, x, per_channel), x, per_channel,
                                   f"x={x.tolist()} (scale 1), per_channel={per_channel}")
        assert codes[0].tolist() == [127, 1, -1, 3, -3, 126], f"expected [127, 1, -1, 3, -3, 126], got {codes[0]}"


def prop_error_at_most_half_a_step(impl) -> None:
    """fp32 weights (normal, with outliers 20x larger in some columns): |x - q·scale| <= scale/2 (1 + 1e-4)
    for every element, per channel and per tensor."""

    @given(st.integers(1, 16), st.integers(1, 64), st.booleans(), st.integers(0, 2**31 - 1))
    def check(rows, cols, per_channel, seed):
        g = torch.Generator().manual_seed(seed)
        x = torch.randn(rows, cols, generator=g)
        x[:, torch.randint(0, cols, (max(1, cols // 16),), generator=g)] *= 20
        where = f"rows={rows}, cols={cols}, per_channel={per_channel}, seed={seed}"
        codes, s = check_quantized(_run(impl, x, per_channel), x, per_channel, where)
        ratio = ((x.to(F64) - codes * s).abs() / (s / 2)).max()
        assert float(ratio) <= 1 + 1e-4, f"{where}: an error of {float(ratio):.4f} half-steps"

    check()


def prop_all_zero_rows(impl) -> None:
    """Rows of zeros (a pruned output channel) per channel, and an all-zero tensor: the scale is positive and
    finite, the codes are 0 and q·scale is exactly 0 (a scale of 0 makes round(0/0) = NaN)."""
    x = torch.tensor([[0.0, 0.0, 0.0], [127.0, -63.0, 1.0], [0.0, 0.0, 0.0]])
    for xx, per_channel in ((x, True), (torch.zeros(2, 4), True), (torch.zeros(2, 4), False)):
        codes, s = check_quantized(_run(impl, xx, per_channel), xx, per_channel,
                                   f"x={xx.tolist()}, per_channel={per_channel}")
        zero = xx.abs().amax(-1) == 0
        assert bool((codes[zero] == 0).all()) and bool(((codes * s)[zero] == 0).all()), \
            f"x={xx.tolist()}: the all-zero rows must have codes 0, got {codes.tolist()}"


def prop_one_scale_per_output_row(impl) -> None:
    """Rows whose ranges are 1e-3, 1 and 1e3 (per channel): each row gets its own scale, so the small row keeps
    its values (a single per-tensor scale of 1e3/127 would round all of it to 0; a scale per column mixes
    rows)."""
    g = torch.Generator().manual_seed(5)
    x = torch.randn(3, 32, generator=g) * torch.tensor([[1e-3], [1.0], [1e3]])
    codes, _ = check_quantized(_run(impl, x, True), x, True, "rows of size 1e-3, 1 and 1e3, per_channel=True")
    assert int((codes[0] != 0).sum()) >= 16, f"the 1e-3 row lost its values: codes {codes[0].tolist()}"


def prop_extremes_map_to_127(impl) -> None:
    """The largest |x| of each row maps to exactly +127 or -127 ([-5, 2, 5] and [-3, 1, 0.5]): a scale of
    max/128 makes +128, which wraps to -128 in int8; one of max/255 wastes half the codes."""
    x = torch.tensor([[-5.0, 2.0, 5.0], [-3.0, 1.0, 0.5]])
    codes, _ = check_quantized(_run(impl, x, True), x, True, f"x={x.tolist()}, per_channel=True")
    assert codes[0].tolist()[0] == -127 and codes[0].tolist()[2] == 127 and codes[1].tolist()[0] == -127, \
        f"x={x.tolist()}: expected codes -127 and 127 at the row extremes, got {codes.tolist()}"


def prop_realistic_weight(impl) -> None:
    """A [2048, 1024] fp32 weight (std 0.02, a few outlier columns at 1.0, one pruned row), per channel and per
    tensor: the definition holds for all 2 million codes."""

    @realistic(1)
    @given(st.integers(0, 2**31 - 1))
    def check(seed):
        g = torch.Generator().manual_seed(seed)
        x = torch.randn(2048, 1024, generator=g) * 0.02
        x[:, torch.randint(0, 1024, (8,), generator=g)] *= 50
        x[7] = 0.0
        for per_channel in (True, False):
            check_quantized(_run(impl, x, per_channel), x, per_channel,
                            f"a [2048, 1024] weight (seed {seed}), per_channel={per_channel}")

    check()


ALL = [prop_matches_the_definition, prop_rounds_to_nearest, prop_error_at_most_half_a_step, prop_all_zero_rows,
       prop_one_scale_per_output_row, prop_extremes_map_to_127, prop_realistic_weight]

ZH = {
    "doc": """`quantize_int8(x, per_channel=True) -> (q, scale)` 的性质。

约定：x 是 float32 的权重 [out, in]。对称 INT8 量化：每个输出行一个 scale（`per_channel`），或整个张量一个 scale，
scale = 该行（或整个张量）的 max|x| / 127，q = round(x / scale) 再截断到 [-127, 127]（四舍五入到最近的整数；
恰好 .5 时怎么取舍都可以），以形状与 x 相同的 int8 张量返回；`scale` 是能与 x 广播的浮点张量（[out, 1]，或 [] / [1, 1]）。
q · scale 复原 x 的误差不超过 scale/2。全零的行（或张量）不能得到 0 的 scale：x/0 是 NaN，而把 NaN 转成 int8 的结果
没有定义；给它任意一个有限的正 scale，它的码都是 0。

对照答案：fp64 下的定义：scale 取自该行的最大值，每个元素满足 |q - x/scale| <= 1/2（为 fp32 下计算 x/scale 留 1e-4 的余量）。""",
    "prop_matches_the_definition": "随机的 fp32 矩阵，1..4 行，每行 1..9 个值，三种量级（有些行全为零），按通道和按张量两种方式：scale 是该行（张量）的 max|x|/127，每个码都是离 x/scale 最近的整数，且在 [-127, 127] 内。",
    "prop_rounds_to_nearest": "行 [127, 0.7, -0.7, 2.6, -2.6, 126.4] 的 scale 恰好为 1：码为 [127, 1, -1, 3, -3, 126]。直接截断 x/scale（`.to(torch.int8)`、NumPy 的 `astype`）会得到 0、0、2、-2：误差最多一整个步长，而且都偏向 0。",
    "prop_error_at_most_half_a_step": "fp32 权重（正态分布，部分列有大 20 倍的离群值）：按通道和按张量两种方式下，每个元素都满足 |x - q·scale| <= scale/2 (1 + 1e-4)。",
    "prop_all_zero_rows": "按通道量化时的全零行（被剪枝的输出通道），以及全零的张量：scale 为有限正数，码为 0，q·scale 恰好为 0（scale 为 0 会让 round(0/0) = NaN）。",
    "prop_one_scale_per_output_row": "取值范围分别为 1e-3、1 和 1e3 的三行（按通道）：每行有自己的 scale，所以小的那一行的值能保留下来（整个张量只用一个 1e3/127 的 scale，会把它全部舍入成 0；按列取 scale 则把不同行混在了一起）。",
    "prop_extremes_map_to_127": "每行 |x| 最大的元素恰好映射到 +127 或 -127（[-5, 2, 5] 和 [-3, 1, 0.5]）：scale 取 max/128 会得到 +128，在 int8 里回绕成 -128；取 max/255 则浪费一半的码。",
    "prop_realistic_weight": "一个 [2048, 1024] 的 fp32 权重（标准差 0.02，少数离群列为 1.0，一行被剪枝），按通道和按张量两种方式：全部 200 万个码都符合定义。",
    "quantize_int8": """对权重 x [out, in] 做对称 INT8 量化：按输出行（`per_channel`）或在整个张量上取 scale = max|x| / 127，
q = clamp(round(x / scale), −127, 127)，存为 int8；x ≈ q · scale，误差不超过 scale/2。为 0 的 scale（全零行）会被抬到
float32 最小的正规数，这样该行的码是 0，而不是 round(0/0) = NaN。返回 (q [out, in] int8, scale [out, 1] 或 [] float32)。""",
}
