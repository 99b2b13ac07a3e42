"""Kata properties for ``trap(height) -> int`` (LeetCode 42): bars of width 1 and the given heights (integers
>= 0); return the total amount of rain water that stays on top of them.

Oracle: the water filled level by level (``oracle_levels``): at height level k, a cell above bar i (one with
``height[i] < k``) holds water exactly when some bar to its left and some bar to its right reach level k.
No maxima, no pointers.

The kata asks for the follow-up: O(n) time **and O(1) extra memory** (two pointers). ``prop_constant_extra_space``
measures the Python memory your call allocates (tracemalloc, in the judge's worker, around your code only) on
20000 bars, LeetCode's largest input, increasing, decreasing and random: at most 8 KiB above what existed before
the call (a copy, a prefix-maximum list or a stack of indices over 20000 bars is more than 160 KiB). Do not call
tracemalloc yourself; the measured calls get 3 s. ``prop_scale`` gives 50000 bars and 2 s: O(n) takes a few
hundredths of a second, the O(n^2) "scan left and right from every bar" minutes (in Python; several seconds with
``max`` over slices).
"""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from verifiers.katas.calls import allocated

TIME_LIMITS = {"prop_scale": 2.0, "prop_constant_extra_space": 3.0}
SPACE_BUDGET = 8 * 1024  # bytes of Python objects the call may hold at once, beyond its input
SPACE_N = 20_000
SCALE_N = 50_000


def oracle_levels(height: list[int]) -> int:
    """Water counted cell by cell, level by level: the cell (i, k) for 1 <= k <= max(height) is water when
    ``height[i] < k`` and bars on both sides of i reach k."""
    total = 0
    for k in range(1, max(height, default=0) + 1):
        reach = [i for i, h in enumerate(height) if h >= k]
        if len(reach) < 2:
            continue
        lo, hi = reach[0], reach[-1]
        total += sum(1 for i in range(lo + 1, hi) if height[i] < k)
    return total


def _int(got, where: str) -> int:
    assert type(got) is int, f"{where}: expected an int, got {type(got).__name__} {got!r}"
    return got


def prop_leetcode_examples(impl) -> None:
    """LeetCode 42's examples (6 and 9), no bars, one bar, two bars, a staircase, a single basin."""
    for height, want in [([0, 1, 0, 2, 1, 0, 1, 3, 2, 1, 2, 1], 6), ([4, 2, 0, 3, 2, 5], 9), ([], 0), ([7], 0),
                         ([3, 0], 0), ([0, 1, 2, 3], 0), ([3, 2, 1, 0], 0), ([2, 0, 2], 2)]:
        got = _int(impl(list(height)), f"input {height}")
        assert got == want, f"input {height}; expected: {want}; got: {got}"


def prop_matches_level_fill(impl) -> None:
    """Equal to the level-by-level fill on up to 20 bars of height 0..8 (plateaus, ties, zeros)."""

    @settings(deadline=None)
    @given(st.lists(st.integers(0, 8), max_size=20))
    def check(height: list[int]) -> None:
        want = oracle_levels(height)
        got = _int(impl(list(height)), f"input {height}")
        assert got == want, f"input {height}; expected: {want}; got: {got}"

    check()


def prop_level_set_by_the_highest_bars(impl) -> None:
    """A bar's water is set by the highest bars on each side, not by its neighbours: [3, 0, 0, 3] holds 6 (the
    neighbours of the first 0 are 3 and 0), [5, 1, 1, 1, 5] holds 12, [4, 1, 3, 1, 4] holds 7."""
    for height, want in [([3, 0, 0, 3], 6), ([5, 1, 1, 1, 5], 12), ([4, 1, 3, 1, 4], 7), ([5, 0, 4, 0, 0, 6], 16)]:
        got = _int(impl(list(height)), f"input {height}")
        assert got == want, f"input {height}; expected: {want}; got: {got}"


def prop_equal_maxima(impl) -> None:
    """Ties: equal highest bars on both sides, flat tops and bottoms, the two sides meeting on a plateau."""
    for height, want in [([3, 1, 3, 1, 3], 4), ([2, 2, 2], 0), ([3, 3, 0, 3, 3], 3), ([1, 0, 1, 0, 1, 0, 1], 3),
                         ([4, 0, 4, 4, 0, 4], 8), ([0, 0, 0], 0)]:
        got = _int(impl(list(height)), f"input {height}")
        assert got == want, f"input {height}; expected: {want}; got: {got}"


def _shapes(n: int) -> dict[str, list[int]]:
    rng = random.Random(n)
    return {"increasing": list(range(n)), "decreasing": list(range(n, 0, -1)),
            "random": [rng.randrange(100_000) for _ in range(n)]}


def _prefix_max_water(height: list[int]) -> int:
    """min(max of height[:i+1], max of height[i:]) - height[i], summed (the formula the entry settles)."""
    n = len(height)
    right = [0] * n
    best = 0
    for i in range(n - 1, -1, -1):
        best = max(best, height[i])
        right[i] = best
    total, best = 0, 0
    for i in range(n):
        best = max(best, height[i])
        total += min(best, right[i]) - height[i]
    return total


def prop_constant_extra_space(impl) -> None:
    """O(1) extra memory: on 20000 bars (increasing, decreasing, random up to 100000) the call holds at most
    8 KiB of Python objects at once beyond its input (tracemalloc, measured around your code only)."""
    for shape, height in _shapes(SPACE_N).items():
        want = _prefix_max_water(height)
        got, peak = allocated(impl, height)
        where = f"{SPACE_N} bars, {shape}"
        got = _int(got, where)
        assert got == want, f"{where}; expected: {want}; got: {got}"
        assert peak <= SPACE_BUDGET, (
            f"{where}: the call held {peak} bytes of Python objects at its peak; the budget for O(1) extra memory "
            f"is {SPACE_BUDGET} (a list over {SPACE_N} bars alone takes {8 * SPACE_N} bytes)")


def prop_scale(impl) -> None:
    """50000 bars within 2 s (O(n) needs a few hundredths of a second; scanning left and right from every bar,
    O(n^2), needs minutes)."""
    rng = random.Random(7)
    height = [rng.randrange(100_000) for _ in range(SCALE_N)]
    got = _int(impl(height), f"{SCALE_N} random bars")
    want = _prefix_max_water(height)
    assert got == want, f"{SCALE_N} random bars (seed 7); expected: {want}; got: {got}"


ALL = [prop_leetcode_examples, prop_matches_level_fill, prop_level_set_by_the_highest_bars, prop_equal_maxima,
       prop_scale, prop_constant_extra_space]

ZH = {
    "doc": """LeetCode 42 的性质：`trap(height) -> int`。柱子宽度为 1，高度为给定的非负整数；返回柱子上方能接住的雨水总量。

对照答案：逐层灌水（`oracle_levels`）：在高度 k 这一层，柱子 i 上方的格子（`height[i] < k`）当且仅当左右两侧都有
柱子达到 k 时才盛水。不用最大值，也不用双指针。

本题要求进阶做法：O(n) 时间**且 O(1) 额外空间**（双指针）。`prop_constant_extra_space` 在评测的工作进程里、只围绕
你的代码用 tracemalloc 测量调用分配的 Python 内存：在 20000 根柱子（LeetCode 的最大输入；递增、递减、随机）上，
峰值比调用前多出的不能超过 8 KiB（复制一份输入、前缀最大值列表、或下标栈，在 20000 根柱子上都超过 160 KiB）。
不要自己调用 tracemalloc；被测量的调用限时 3 秒。`prop_scale` 给 50000 根柱子、限时 2 秒：O(n) 只要几十毫秒，
"从每根柱子向左右扫描"的 O(n^2) 要几分钟（用切片上的 `max` 也要好几秒）。""",
    "prop_leetcode_examples": "LeetCode 42 的示例（6 和 9）、没有柱子、一根、两根、阶梯、单个水坑。",
    "prop_matches_level_fill": "在最多 20 根、高度 0..8 的柱子上（平台、相等、零）与逐层灌水的结果一致。",
    "prop_level_set_by_the_highest_bars": "每根柱子的水位由两侧最高的柱子决定，而不是相邻柱子：[3, 0, 0, 3] 接 6（第一个 0 的邻居是 3 和 0），[5, 1, 1, 1, 5] 接 12，[4, 1, 3, 1, 4] 接 7。",
    "prop_equal_maxima": "相等的情况：两侧最高柱子一样高、平顶与平底、两个指针在平台上相遇。",
    "prop_constant_extra_space": "O(1) 额外空间：在 20000 根柱子（递增、递减、最高 100000 的随机）上，调用除输入外同时持有的 Python 对象不超过 8 KiB（tracemalloc，只围绕你的代码测量）。",
    "prop_scale": "50000 根柱子，限时 2 秒（O(n) 只要几十毫秒；从每根柱子向左右扫描的 O(n^2) 要几分钟）。",
    "trap": """用双指针求雨水总量：O(n) 时间，O(1) 额外空间。

`lmax = max(height[:l+1])`，`rmax = max(height[r:])`；移动当前最大值较小的一侧（它的水位已经确定），
加上"该侧最大值 − 该柱高度"。""",
}

__all__ = [p.__name__ for p in ALL] + ["ALL", "oracle_levels"]
