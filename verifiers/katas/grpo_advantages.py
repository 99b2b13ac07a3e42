"""Kata properties for ``grpo_advantages(scores, group_size, scale_by_std=True, eps=1e-6)``.

Each ``prop_*`` takes the implementation under test and raises ``AssertionError`` with the
inputs, the expected and the received values. The oracle is plain-Python statistics in fp64.
"""

from __future__ import annotations

import math
import statistics

import torch
from hypothesis import given
from hypothesis import strategies as st

from verifiers.katas.budgets import fits, realistic

_score = st.floats(min_value=-10, max_value=10, allow_nan=False, width=32)


@st.composite
def grouped_scores(draw, max_groups: int = 4, max_size: int = 6):
    g = draw(st.integers(min_value=2, max_value=max_size))
    n = draw(st.integers(min_value=1, max_value=max_groups))
    return draw(st.lists(_score, min_size=g * n, max_size=g * n)), g


def _oracle(scores: list[float], g: int, scale_by_std: bool, eps: float) -> list[float]:
    out = []
    for k in range(0, len(scores), g):
        grp = scores[k : k + g]
        mu = math.fsum(grp) / g
        sd = statistics.stdev(grp) if scale_by_std else None  # unbiased (G-1)
        out += [(x - mu) / (sd + eps) if scale_by_std else x - mu for x in grp]
    return out


def _close(got: list[float], want: list[float], rtol=1e-4, atol=1e-4) -> bool:
    return all(abs(a - b) <= atol + rtol * abs(b) for a, b in zip(got, want, strict=True))


def prop_matches_group_formula(impl) -> None:
    """A_i = (r_i - mean_g) / (std_g + eps), unbiased std, contiguous groups; Dr. GRPO without std."""

    @given(grouped_scores(), st.booleans())
    def check(data, scale):
        scores, g = data
        got = impl(torch.tensor(scores, dtype=torch.float64), g, scale_by_std=scale, eps=1e-6)
        got = [float(x) for x in got]
        want = _oracle(scores, g, scale, 1e-6)
        assert _close(got, want), f"scores={scores}, group_size={g}, scale_by_std={scale}: expected {want}, got {got}"

    check()


def prop_equal_group_is_exactly_zero(impl) -> None:
    """A group whose scores are all equal gets advantage exactly 0 (no NaN)."""

    @given(_score, st.integers(min_value=2, max_value=8))
    def check(value, g):
        scores = torch.full((g,), value, dtype=torch.float32)
        got = impl(scores, g)
        assert torch.equal(got, torch.zeros_like(got)), f"scores={scores.tolist()}, group_size={g}: expected all 0, got {got.tolist()}"

    check()


def prop_groups_are_independent(impl) -> None:
    """Changing one group's scores leaves the other groups' advantages unchanged."""

    @given(grouped_scores(max_groups=3), _score)
    def check(data, new_value):
        scores, g = data
        if len(scores) == g:
            return
        base = impl(torch.tensor(scores, dtype=torch.float64), g)
        changed = list(scores)
        changed[0] = new_value
        after = impl(torch.tensor(changed, dtype=torch.float64), g)
        assert torch.allclose(base[g:], after[g:]), (
            f"scores={scores}, group_size={g}: changing score 0 to {new_value} moved other groups "
            f"from {base[g:].tolist()} to {after[g:].tolist()}"
        )

    check()


def prop_eps_guards_nearly_equal_groups(impl) -> None:
    """A group whose scores differ by about eps (std ~ 1e-6) gets (r - mean) / (std + eps), which is about
    half the size of the unguarded (r - mean) / std: eps is in the denominator, not optional."""

    @given(st.integers(min_value=2, max_value=8), st.floats(min_value=-1.0, max_value=1.0),
           st.floats(min_value=0.5e-6, max_value=2e-6), st.integers(min_value=0, max_value=2**16))
    def check(g, base, spread, seed):
        gen = torch.Generator().manual_seed(seed)
        offsets = torch.rand(g, generator=gen, dtype=torch.float64) * spread
        offsets[0], offsets[1] = 0.0, spread  # at least two distinct values
        scores = [base + float(o) for o in offsets]
        got = [float(x) for x in impl(torch.tensor(scores, dtype=torch.float64), g, eps=1e-6)]
        want = _oracle(scores, g, True, 1e-6)
        assert _close(got, want, rtol=1e-3, atol=1e-3), (
            f"scores={scores}, group_size={g}, eps=1e-6: expected {want}, got {got}")

    check()


def prop_realistic_group_sizes(impl) -> None:
    """Group sizes of real runs (G = 16, 64, 128; DeepSeekMath samples 64), up to 32 groups, fp32 scores:
    0/1 verifier rewards and continuous reward-model scores. Each score's advantage is the formula's,
    the result [n * G]."""

    @realistic(20)
    @given(st.sampled_from([16, 64, 128]), st.integers(1, 32), st.booleans(), st.integers(0, 2**31 - 1))
    def check(g, n, binary, seed):
        gen = torch.Generator().manual_seed(seed)
        if binary:
            scores = (torch.rand(n * g, generator=gen) < torch.rand(1, generator=gen)).float()
        else:
            scores = torch.randn(n * g, generator=gen) * 3
        got = impl(scores, g)
        where = f"group_size={g}, {n} groups, {'0/1' if binary else 'continuous'} fp32 scores (seed {seed})"
        fits(got, (n * g,), "the advantages", where)
        got_l = [float(x) for x in got]
        want = _oracle(scores.double().tolist(), g, True, 1e-6)
        bad = [(i, want[i], got_l[i]) for i in range(n * g)
               if not abs(got_l[i] - want[i]) <= 1e-4 + 1e-4 * abs(want[i])]
        assert not bad, f"{where}: {len(bad)} advantages differ; first (index, expected, got): {bad[:3]}"

    check()


PROPERTIES = [prop_matches_group_formula, prop_equal_group_is_exactly_zero, prop_groups_are_independent,
              prop_eps_guards_nearly_equal_groups, prop_realistic_group_sizes]

ZH = {
    "doc": """`grpo_advantages(scores, group_size, scale_by_std=True, eps=1e-6)` 的性质。

每个 `prop_*` 接收被测实现，出错时抛出 `AssertionError`，写明输入、期望值和实际值。对照答案是 fp64 下用普通 Python
写的统计量。""",
    "prop_matches_group_formula": "A_i = (r_i - mean_g) / (std_g + eps)，无偏标准差，组是连续的；Dr. GRPO 不除以 std。",
    "prop_equal_group_is_exactly_zero": "分数全部相等的组，优势恰好为 0（不能是 NaN）。",
    "prop_groups_are_independent": "改变一个组的分数，其他组的优势不变。",
    "prop_eps_guards_nearly_equal_groups": "分数只相差约 eps 的组（std 约 1e-6）得到 (r - mean) / (std + eps)，大约只有不加保护的 (r - mean) / std 的一半：eps 在分母里，不是可有可无的。",
    "prop_realistic_group_sizes": "真实训练中的组大小（G = 16、64、128；DeepSeekMath 每题采样 64 个），最多 32 组，fp32 分数：0/1 的验证器奖励和连续的奖励模型分数。每个分数的优势都符合公式，结果形状为 [n * G]。",
    "grpo_advantages": r"""GRPO 的结果优势（DeepSeekMath §4.1.2）。

A_i = (r_i - mean_g(r)) / (std_g(r) + eps)，std 为组内无偏（G-1）标准差；`scale_by_std=False` 给出 Dr. GRPO 的
A_i = r_i - mean_g(r)。分数全相等的组得到恰好 0（数学上是 0 / (0 + eps)；这里显式保证，因为相等值的 fp32 均值可能差一个 ulp）。""",
}
