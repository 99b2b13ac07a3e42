"""Kata properties for ``merge(intervals) -> list[list[int]]`` (LeetCode 56): merge every group of overlapping
intervals and return the disjoint intervals that cover exactly the same points, sorted by start.

Intervals are closed, ``[start, end]`` with ``start <= end`` (integers, negatives allowed): ``[1, 4]`` and
``[4, 5]`` share the point 4 and merge into ``[1, 5]``; a point interval ``[3, 3]`` is allowed. The input is in
any order. Return a list of ``[start, end]`` pairs (lists or tuples).

Oracle (``oracle_cuts``): every point and every half-way point between consecutive integers in range is tested
for being covered by some interval; the merged intervals are the maximal runs of covered points. No sorting of
intervals, no sweep. ``prop_scale`` gives 20000 intervals and 2 s (sorting once takes hundredths of a second; merging
pairs until nothing changes is O(n^2) or worse).
"""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

TIME_LIMITS = {"prop_scale": 2.0}
SCALE_N = 20_000


def oracle_cuts(intervals: list[list[int]]) -> list[list[int]]:
    """Maximal runs of covered points on the grid of integers and half-integers (coordinates doubled)."""
    if not intervals:
        return []
    lo = 2 * min(s for s, _ in intervals)
    hi = 2 * max(e for _, e in intervals)
    covered = [any(2 * s <= x <= 2 * e for s, e in intervals) for x in range(lo, hi + 1)]
    out, run = [], None
    for off, c in enumerate(covered + [False]):
        x = lo + off
        if c and run is None:
            run = x
        elif not c and run is not None:
            out.append([run // 2, (x - 1) // 2])  # runs start and end on integers: endpoints are integers
            run = None
    return out


def _pairs(got, where: str) -> list[list[int]]:
    assert isinstance(got, (list, tuple)), f"{where}: expected a list of [start, end], got {type(got).__name__}"
    out = []
    for iv in got:
        assert isinstance(iv, (list, tuple)) and len(iv) == 2 and all(type(v) is int for v in iv), (
            f"{where}: every element must be a [start, end] pair of ints; got {iv!r}")
        out.append([iv[0], iv[1]])
    return out


def _check(impl, intervals: list[list[int]], want: list[list[int]] | None = None) -> None:
    want = oracle_cuts(intervals) if want is None else want
    where = f"input {intervals}"
    got = _pairs(impl([list(iv) for iv in intervals]), where)
    assert got == want, f"{where}; expected: {want}; got: {got}"


def prop_leetcode_examples(impl) -> None:
    """LeetCode 56's examples, no intervals, one interval, a point interval."""
    for intervals, want in [([[1, 3], [2, 6], [8, 10], [15, 18]], [[1, 6], [8, 10], [15, 18]]),
                            ([[1, 4], [4, 5]], [[1, 5]]), ([[4, 7], [1, 4]], [[1, 7]]), ([], []), ([[2, 5]], [[2, 5]]),
                            ([[3, 3]], [[3, 3]])]:
        _check(impl, intervals, want)


def prop_contained_interval_keeps_the_end(impl) -> None:
    """An interval inside the last merged one does not shrink it: [[1, 10], [2, 3]] is [[1, 10]] (the merged end is
    the larger end, not the newcomer's)."""
    for intervals, want in [([[1, 10], [2, 3]], [[1, 10]]), ([[1, 10], [2, 3], [4, 12]], [[1, 12]]),
                            ([[1, 10], [2, 3], [11, 12]], [[1, 10], [11, 12]]), ([[0, 5], [1, 2], [3, 4], [5, 5]], [[0, 5]])]:
        _check(impl, intervals, want)


def prop_touching_intervals_merge(impl) -> None:
    """Closed intervals that only share an endpoint merge: [[1, 4], [4, 5]] is [[1, 5]]; [[1, 2], [3, 4]] do not."""
    for intervals, want in [([[1, 4], [4, 5]], [[1, 5]]), ([[1, 2], [2, 2], [2, 3]], [[1, 3]]),
                            ([[0, 0], [0, 0]], [[0, 0]]), ([[1, 2], [3, 4]], [[1, 2], [3, 4]]), ([[5, 6], [-1, 5]], [[-1, 6]])]:
        _check(impl, intervals, want)


def prop_any_input_order(impl) -> None:
    """The input is not sorted: the same intervals shuffled, reversed, with repeats give the same answer."""
    base = [[1, 3], [2, 6], [8, 10], [15, 18], [17, 20], [9, 9], [-4, -1]]
    rng = random.Random(5)
    for k in range(6):
        order = base[::-1] if k == 0 else rng.sample(base, len(base)) + (base[:2] if k % 2 else [])
        _check(impl, order)


@st.composite
def interval_lists(draw):
    n = draw(st.integers(0, 12))
    out = []
    for _ in range(n):
        a = draw(st.integers(-5, 12))
        out.append([a, a + draw(st.integers(0, 6))])
    return out


def prop_matches_every_cut(impl) -> None:
    """Up to 12 intervals in -5..18 in any order (repeats, points, nesting, touching): the maximal runs of covered
    points, tested point by point."""

    @settings(deadline=None)
    @given(interval_lists())
    def check(intervals) -> None:
        _check(impl, intervals)

    check()


def prop_scale(impl) -> None:
    """20000 intervals in random order within 2 s (O(n log n) takes hundredths of a second; merging pairs until
    nothing changes takes minutes)."""
    rng = random.Random(11)
    intervals, want, x = [], [], 0
    for _ in range(SCALE_N // 4):  # groups of 4 overlapping or touching intervals, a gap of 2 between groups
        group = [[x, x + 3], [x + 1, x + 2], [x + 3, x + 5], [x + 2, x + 6]]
        intervals += group
        want.append([x, x + 6])
        x += 8
    rng.shuffle(intervals)
    got = _pairs(impl(intervals), f"{SCALE_N} intervals")
    if got != want:
        bad = next((i for i, (g, w) in enumerate(zip(got, want)) if g != w), min(len(got), len(want)))
        raise AssertionError(f"{SCALE_N} intervals in {SCALE_N // 4} groups of 4, shuffled; expected {len(want)} merged "
                             f"intervals; got {len(got)}; first difference at #{bad}: expected "
                             f"{want[bad] if bad < len(want) else None}, got {got[bad] if bad < len(got) else None}")


ALL = [prop_leetcode_examples, prop_contained_interval_keeps_the_end, prop_touching_intervals_merge,
       prop_any_input_order, prop_matches_every_cut, prop_scale]

ZH = {
    "doc": """LeetCode 56 的性质：`merge(intervals) -> list[list[int]]`：合并所有相互重叠的区间，返回覆盖完全相同点集、
互不重叠、按起点排序的区间。

区间是闭区间 `[start, end]`，`start <= end`（整数，可为负）：`[1, 4]` 和 `[4, 5]` 共享点 4，合并为 `[1, 5]`；
允许单点区间 `[3, 3]`。输入顺序任意。返回 `[start, end]` 对的列表（list 或 tuple 都可以）。

对照答案（`oracle_cuts`）：在范围内逐个检查每个整数点和相邻整数之间的中点是否被某个区间覆盖；合并结果就是被覆盖点的
极大连续段。不排序，也不做扫描。`prop_scale` 给 20000 个区间、限时 2 秒（排序一次只要几十毫秒；反复两两合并直到
不再变化是 O(n^2) 甚至更慢）。""",
    "prop_leetcode_examples": "LeetCode 56 的示例、没有区间、一个区间、单点区间。",
    "prop_contained_interval_keeps_the_end": "被上一个合并区间包含的区间不会让它变短：[[1, 10], [2, 3]] 的结果是 [[1, 10]]（合并后的终点取两者较大的，而不是新区间的终点）。",
    "prop_touching_intervals_merge": "只共享端点的闭区间也要合并：[[1, 4], [4, 5]] 是 [[1, 5]]；[[1, 2], [3, 4]] 不合并。",
    "prop_any_input_order": "输入未排序：同一组区间打乱、反序、带重复，答案相同。",
    "prop_matches_every_cut": "最多 12 个在 -5..18 内、顺序任意的区间（重复、单点、嵌套、相接）：结果等于逐点检查得到的被覆盖点的极大连续段。",
    "prop_scale": "20000 个随机顺序的区间，限时 2 秒（O(n log n) 只要几十毫秒；反复两两合并直到不变要几分钟）。",
    "merge": """把 `intervals` 的并集表示为按起点排序、互不相交的区间。

当 `start <= out[-1][1]`（半开区间时为 `<`）时延长 `out[-1]`；新的终点取两个终点中较大的（被包含的区间不能让它变短）。""",
}

__all__ = [p.__name__ for p in ALL] + ["ALL", "oracle_cuts"]
