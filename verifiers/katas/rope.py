"""Kata properties for ``rope(x, positions, base=10000.0, layout="interleaved") -> rotated x``.

Conventions: x is [..., T, d] with d even (q or k of one or many heads; v is never rotated); positions is
an int64 tensor [T] of absolute positions (not necessarily 0..T-1: with a KV cache the new tokens start at
the cache length). Pair i (i = 0 .. d/2-1) is rotated by the angle position·theta_i, theta_i =
base^(-2i/d), so pair 0 turns fastest (one radian per position). ``layout="interleaved"`` pairs dimensions
(2i, 2i+1) (RoFormer, GPT-J); ``layout="halves"`` pairs (i, i + d/2) (GPT-NeoX, Hugging Face Llama's
rotate-half). A pair (a, b) becomes (a·cos - b·sin, a·sin + b·cos). The result has x's dtype. Compute the
angles position·theta_i in float32 at least (as Hugging Face does; float64 is fine): the properties allow
for float32 angles, 2^-22 of the angle, not for bf16 or fp16 ones (in bf16 a position of 30000 is
rounded to a multiple of 128).

Oracle: the pairs as complex numbers a + i·b multiplied by e^{i·position·theta_i}, with theta_i from Python
floats, in fp64.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from hypothesis import given
from hypothesis import strategies as st

from verifiers.katas.budgets import realistic
from verifiers.katas.tensors import close

F64 = torch.float64
LAYOUTS = ("interleaved", "halves")


def pairs(x: torch.Tensor, layout: str) -> tuple[torch.Tensor, torch.Tensor]:
    d = x.shape[-1]
    if layout == "interleaved":
        return x[..., 0::2], x[..., 1::2]
    return x[..., : d // 2], x[..., d // 2:]


def unpair(a: torch.Tensor, b: torch.Tensor, layout: str) -> torch.Tensor:
    if layout == "interleaved":
        return torch.stack([a, b], dim=-1).flatten(-2)
    return torch.cat([a, b], dim=-1)


def oracle(x: torch.Tensor, positions: torch.Tensor, base: float, layout: str) -> torch.Tensor:
    d = x.shape[-1]
    theta = torch.tensor([base ** (-2.0 * i / d) for i in range(d // 2)], dtype=F64)
    angle = positions.to(F64)[:, None] * theta[None, :]
    a, b = pairs(x.to(F64), layout)
    z = torch.complex(a, b) * torch.polar(torch.ones_like(angle), angle)
    return unpair(z.real, z.imag, layout)


def check_rotation(got, x: torch.Tensor, positions: torch.Tensor, base: float, layout: str, where: str,
                   rel: float = 2.0 ** -22) -> None:
    """``got`` equals the oracle within what float32 angles allow: per pair, its length times
    rel·(|position·theta_i| + 4) (the angle's rounding, then cos/sin's)."""
    d = x.shape[-1]
    want = oracle(x, positions, base, layout)
    theta = torch.tensor([base ** (-2.0 * i / d) for i in range(d // 2)], dtype=F64)
    a, b = pairs(x.to(F64), layout)
    slack = (a * a + b * b).sqrt() * rel * ((positions.to(F64)[:, None] * theta[None, :]).abs() + 4)
    close(got, want, atol=unpair(slack, slack, layout), dtype=x.dtype, what="the rotated tensor", where=where)


@dataclass(frozen=True)
class Case:
    shape: tuple  # leading dims, then T, d
    start: int  # positions start .. start+T-1, then shuffled by ``seed`` when ``shuffled``
    shuffled: bool
    base: float
    layout: str
    seed: int

    def build(self, dtype=F64):
        gen = torch.Generator().manual_seed(self.seed)
        x = torch.randn(*self.shape, generator=gen, dtype=F64).to(dtype)
        t = self.shape[-2]
        pos = torch.arange(self.start, self.start + t)
        if self.shuffled:
            pos = pos[torch.randperm(t, generator=gen)]
        return x, pos


@st.composite
def cases(draw, layouts=LAYOUTS):
    lead = draw(st.lists(st.integers(1, 3), min_size=0, max_size=2))
    t, d = draw(st.integers(1, 6)), 2 * draw(st.integers(1, 6))
    return Case((*lead, t, d), draw(st.sampled_from([0, 1, 17, 4093, 100000])), draw(st.booleans()),
                draw(st.sampled_from([10000.0, 500000.0, 10.0])), draw(st.sampled_from(layouts)),
                draw(st.integers(0, 2**31 - 1)))


def _run(impl, x, pos, base, layout):
    return impl(x.clone(), pos.clone(), base, layout=layout)


def prop_matches_complex_rotation(impl) -> None:
    """Both layouts, any leading dims, ragged T and d, positions anywhere up to 100000 (also unsorted), three
    bases: equals the complex-number rotation in fp64."""

    @given(cases())
    def check(c):
        x, pos = c.build()
        check_rotation(_run(impl, x, pos, c.base, c.layout), x, pos, c.base, c.layout,
                       where=f"{c}, positions={pos.tolist()}")

    for layout in LAYOUTS:                              # constructed first: both layouts, far and unsorted positions
        for c in (Case((2, 3, 5, 8), 0, False, 10000.0, layout, 1), Case((4, 6), 4093, True, 500000.0, layout, 2)):
            x, pos = c.build()
            check_rotation(_run(impl, x, pos, c.base, c.layout), x, pos, c.base, c.layout,
                           where=f"{c}, positions={pos.tolist()}")
    check()


def prop_pair_i_turns_by_theta_i(impl) -> None:
    """A unit vector in pair i at position 1 turns by exactly theta_i = base^(-2i/d) radians (d = 16, both
    layouts): pair 0 fastest, one radian per position. base^(-i/d), or the pair index running over all d
    dimensions, turns the pairs at other speeds."""
    d, base = 16, 10000.0
    for layout in LAYOUTS:
        for i in range(d // 2):
            a = torch.zeros(d // 2, dtype=F64)
            b = torch.zeros(d // 2, dtype=F64)
            a[i] = 1.0
            x = unpair(a, b, layout)[None, :]
            got = _run(impl, x, torch.tensor([1]), base, layout)
            assert isinstance(got, torch.Tensor) and tuple(got.shape) == (1, d), \
                f"layout={layout}: expected a [1, {d}] tensor, got {getattr(got, 'shape', type(got).__name__)}"
            ga, gb = pairs(got.to(F64), layout)
            turned = math.atan2(float(gb[0, i]), float(ga[0, i]))
            want = base ** (-2.0 * i / d)
            others = float((ga * ga + gb * gb).sum() - (ga[0, i] ** 2 + gb[0, i] ** 2))
            assert abs(turned - want) <= want * 2.0 ** -20 and abs(others) <= 1e-12, (
                f"d={d}, base={base}, layout={layout}: a unit vector in pair {i} at position 1 should turn by "
                f"theta_{i} = {want!r} rad and stay in its pair; got {got[0].tolist()} (turned {turned!r})")


def prop_norm_of_each_pair_is_kept(impl) -> None:
    """A rotation: the length of every pair, hence of the whole vector, is unchanged (to 2^-22 relative:
    cos and sin rounded to float32 are allowed)."""

    @given(cases())
    def check(c):
        x, pos = c.build()
        got = _run(impl, x, pos, c.base, c.layout)
        assert isinstance(got, torch.Tensor) and got.shape == x.shape, f"{c}: expected shape {tuple(x.shape)}"
        a, b = pairs(got.to(F64), c.layout)
        a0, b0 = pairs(x, c.layout)
        close((a * a + b * b).sqrt(), (a0 * a0 + b0 * b0).sqrt(), atol=1e-300, rtol=2.0 ** -22,
              what="the length of each pair", where=f"{c}, positions={pos.tolist()}")

    check()


def prop_positions_are_absolute(impl) -> None:
    """Rotating tokens S..S+T-1 alone (as a decode step with S cached tokens does) gives the same rows as
    rotating the whole sequence 0..S+T-1: the positions passed in are used, not 0..T-1."""

    @given(cases(), st.integers(1, 50))
    def check(c, s):
        x, _ = c.build()
        pos = torch.arange(s, s + x.shape[-2])
        check_rotation(_run(impl, x, pos, c.base, c.layout), x, pos, c.base, c.layout,
                       where=f"{c}: tokens at positions {s}..{s + x.shape[-2] - 1} (a step after {s} cached tokens)")

    check()


def prop_bf16_at_long_positions(impl) -> None:
    """bf16 q of a Llama head (d = 128), T = 1024 tokens at positions 30000 .. 31023, both layouts: within
    bf16 rounding of the fp64 rotation (2^-6 of the pair's length). Angles computed in bf16 (where 30000 is
    rounded to a multiple of 128) or in fp16 are off by whole radians."""

    @realistic(2)
    @given(st.sampled_from(LAYOUTS), st.integers(0, 2**31 - 1))
    def check(layout, seed):
        c = Case((2, 4, 1024, 128), 30000, False, 500000.0, layout, seed)
        x, pos = c.build(torch.bfloat16)
        got = _run(impl, x, pos, c.base, layout)
        want = oracle(x, pos, c.base, layout)
        a, b = pairs(x.to(F64), layout)
        radius = (a * a + b * b).sqrt()
        tol = unpair(radius, radius, layout) * 2.0 ** -6 + 1e-30
        assert isinstance(got, torch.Tensor) and got.shape == x.shape and got.dtype == torch.bfloat16, \
            f"{c}: expected a bf16 tensor of shape {tuple(x.shape)}, got {getattr(got, 'dtype', type(got))}"
        err = (got.to(F64) - want).abs()
        bad = ~(err <= tol)
        if bool(bad.any()):
            i = tuple(int(v) for v in torch.nonzero(bad)[0])
            raise AssertionError(f"{c}, bf16: at index {list(i)} (position {int(pos[i[-2]])}) expected "
                                 f"{want[i].item():.5g}, got {got[i].item():.5g}; {int(bad.sum())} elements off by "
                                 f"more than 2^-6 of their pair's length")

    check()


ALL = [prop_matches_complex_rotation, prop_pair_i_turns_by_theta_i, prop_norm_of_each_pair_is_kept,
       prop_positions_are_absolute, prop_bf16_at_long_positions]

ZH = {
    "doc": """`rope(x, positions, base=10000.0, layout="interleaved") -> 旋转后的 x` 的性质。

约定：x 为 [..., T, d]，d 为偶数（一个或多个头的 q 或 k；v 从不旋转）；positions 是 [T] 的 int64 张量，存绝对位置
（不一定是 0..T-1：有 KV cache 时，新 token 从缓存长度开始）。第 i 对（i = 0 .. d/2-1）旋转 position·theta_i 的角度，
theta_i = base^(-2i/d)，所以第 0 对转得最快（每个位置转一弧度）。`layout="interleaved"` 把第 (2i, 2i+1) 维配成一对
（RoFormer、GPT-J）；`layout="halves"` 把 (i, i + d/2) 配成一对（GPT-NeoX、Hugging Face Llama 的 rotate-half）。
一对 (a, b) 变为 (a·cos - b·sin, a·sin + b·cos)。结果的 dtype 与 x 相同。角度 position·theta_i 至少用 float32 计算
（Hugging Face 就是这样；用 float64 也可以）：性质允许 float32 角度带来的误差（角度的 2^-22），但不允许 bf16 或 fp16
的角度（bf16 下，位置 30000 会被舍入到 128 的倍数）。

对照答案：fp64 下把每一对看成复数 a + i·b，乘以 e^{i·position·theta_i}，theta_i 用 Python 浮点数计算。""",
    "prop_matches_complex_rotation": "两种 layout、任意前导维度、不规整的 T 和 d、最大到 100000 的任意位置（也包括乱序的），三种 base：都等于 fp64 的复数旋转。",
    "prop_pair_i_turns_by_theta_i": "位置 1 上第 i 对里的单位向量恰好转 theta_i = base^(-2i/d) 弧度（d = 16，两种 layout）：第 0 对最快，每个位置一弧度。用 base^(-i/d)，或者让配对下标跑遍全部 d 维，各对的转速就不对了。",
    "prop_norm_of_each_pair_is_kept": "这是旋转：每一对的长度不变，因而整个向量的长度也不变（相对误差 2^-22 以内：允许 cos 和 sin 舍入到 float32）。",
    "prop_positions_are_absolute": "单独旋转位置 S..S+T-1 的 token（就像缓存了 S 个 token 时的一步 decode），结果与旋转整条 0..S+T-1 序列中对应的行相同：使用传入的位置，而不是 0..T-1。",
    "prop_bf16_at_long_positions": "Llama 一个头的 bf16 q（d = 128），T = 1024 个 token，位置为 30000 .. 31023，两种 layout：与 fp64 旋转的差在 bf16 舍入误差之内（该对长度的 2^-6）。在 bf16（30000 会被舍入到 128 的倍数）或 fp16 下计算角度，会差出整弧度。",
    "rope": """在 `positions` [n] 上旋转 x [..., n, d]：第 i 对（`layout="interleaved"` 时为 (2i, 2i+1)，`"halves"` 时为
(i, i + d/2)）转 position·θ_i，θ_i = base^(−2i/d)；角度在 fp64 下计算，以 x 的 dtype 施加（位置先除以 `scale`：
即 position interpolation）。""",
}
