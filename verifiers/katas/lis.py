"""Kata properties for ``length_of_lis(nums) -> int`` (LeetCode 300): the length of the longest *strictly*
increasing subsequence.

Oracle on small inputs: every one of the 2^n subsequences is tried (no DP, no binary search). Elements
are integers, negatives and repeats included; a repeated value never extends a subsequence.

How the answer is computed is judged too: ``prop_n_log_n_comparisons`` hands the function opaque keys
(``verifiers/katas/counted.py``) that can only be compared with each other (``<``, ``==``...) or hashed,
each comparison answered and counted on the judge's side. Write the function with comparisons between
elements only (no arithmetic on them, no comparison with a number such as ``float('-inf')``): the
O(n log n) method stays under 2 n ceil(log2(n+1)) + 2n comparisons and hashes on every input of 16 and 128
elements;
the O(n^2) DP makes n(n-1)/2 and fails. ``prop_scale`` gives 20000 plain integers and 3 s (the
O(n log n) method needs a few hundredths of a second; an O(n^2) method needs minutes).
"""

from __future__ import annotations

import math
import random
from itertools import combinations

from hypothesis import given, settings
from hypothesis import strategies as st

from verifiers.katas.counted import Tally

TIME_LIMITS = {"prop_scale": 3.0}
SIZES = (16, 128)
SCALE_N = 20000


def oracle_lis(nums: list[int]) -> int:
    """The longest strictly increasing subsequence by trying every subsequence, longest first."""
    n = len(nums)
    for k in range(n, 0, -1):
        for idx in combinations(range(n), k):
            if all(nums[a] < nums[b] for a, b in zip(idx, idx[1:])):
                return k
    return 0


def _ints(got, where: str) -> int:
    assert type(got) is int, f"{where}: expected an int, got {type(got).__name__} {got!r}"
    return got


def prop_leetcode_examples(impl) -> None:
    """LeetCode 300's examples, the empty list and one element."""
    cases = [([10, 9, 2, 5, 3, 7, 101, 18], 4), ([0, 1, 0, 3, 2, 3], 4), ([7, 7, 7, 7, 7, 7, 7], 1), ([], 0),
             ([5], 1), ([-1, -2, -3], 1), ([1, 2, 3, 4], 4)]
    for nums, want in cases:
        got = _ints(impl(list(nums)), f"input {nums}")
        assert got == want, f"input {nums}; expected: {want}; got: {got}"


def prop_matches_every_subsequence(impl) -> None:
    """Equal to the brute force over all 2^n subsequences, on lists of up to 10 small integers (repeats,
    negatives)."""

    @settings(deadline=None)
    @given(st.lists(st.integers(-4, 4), max_size=10) | st.lists(st.integers(-10_000, 10_000), max_size=10))
    def check(nums: list[int]) -> None:
        want = oracle_lis(nums)
        got = _ints(impl(list(nums)), f"input {nums}")
        assert got == want, f"input {nums}; expected: {want}; got: {got}"

    check()


def prop_strictly_increasing(impl) -> None:
    """Repeats do not count: [2, 2, 2] has length 1, [1, 2, 2, 3] has 3 (a binary search that finds the first
    tail *greater* than x, ``bisect_right``, computes the longest non-decreasing subsequence: 3 and 4)."""
    for nums, want in [([2, 2, 2], 1), ([1, 2, 2, 3], 3), ([3, 1, 1, 2, 2, 4], 3), ([4, 4, 1, 1, 5, 5], 2),
                       ([0, 0], 1)]:
        got = _ints(impl(list(nums)), f"input {nums}")
        assert got == want, f"input {nums}; expected: {want} (strictly increasing); got: {got}"


def _shapes(n: int, seed: int) -> dict[str, list[int]]:
    rng = random.Random(seed)
    half = n // 2
    return {
        "random with repeats": [rng.randrange(n // 2) for _ in range(n)],
        # tails grows to n/2, then each element lands alternately near its start and near its end:
        # quadratic for a linear scan of tails from either side
        "ascending, then low/high": [2 * i for i in range(half)] + [1 if i % 2 == 0 else 2 * half - 3
                                                                     for i in range(n - half)],
    }


def prop_n_log_n_comparisons(impl) -> None:
    """O(n log n) comparisons: on opaque keys (compared and counted on the judge's side) of n = 16 and 128
    elements in two orders, at most 2 n ceil(log2(n+1)) + 2n comparisons and hashes, and the right length."""
    for n in SIZES:
        bound = 2 * n * math.ceil(math.log2(n + 1)) + 2 * n
        for shape, values in _shapes(n, seed=n).items():
            want = _lis_dp_oracle(values)
            tally = Tally(limit=bound)
            keys = tally.keys(values)
            where = f"{shape} sequence of n={n} keys"
            got = tally.call(lambda: impl(keys), where,
                             what=f"comparisons (the bound is 2 n ceil(log2(n+1)) + 2n = {bound}; an O(n^2) method "
                                  f"makes about n^2/2 = {n * (n - 1) // 2})")
            got = _ints(got, where)
            assert got == want, f"{where} (values {values[:8]}...); expected: {want}; got: {got}"


def _lis_dp_oracle(values: list[int]) -> int:
    """The answer for the counted inputs: the O(n^2) DP on the plain values (n <= 128), a second algorithm
    beside the brute force of the small cases."""
    best: list[int] = []
    for i, x in enumerate(values):
        best.append(1 + max((best[j] for j in range(i) if values[j] < x), default=0))
    return max(best, default=0)


def _blocks(n: int, k: int, seed: int) -> list[int]:
    """k blocks, each a decreasing run of n // k values, every value of a block above every value of the
    block before it: any increasing subsequence takes at most one element per block, and one per block is
    increasing, so the answer is exactly k."""
    rng = random.Random(seed)
    m = n // k
    out = []
    for b in range(k):
        vals = sorted(rng.sample(range(b * 10 * m, (b + 1) * 10 * m), m), reverse=True)
        out += vals
    return out


def prop_scale(impl) -> None:
    """20000 plain integers (k decreasing blocks, each above the last: the answer is k) within 3 s; O(n log n)
    takes a few hundredths of a second, an O(n^2) method (also one that sorts first and then runs the DP on
    ranks) minutes."""
    for k in (200, 1):
        nums = _blocks(SCALE_N, k, seed=k)
        got = _ints(impl(nums), f"{SCALE_N} integers in {k} decreasing blocks")
        assert got == k, f"{SCALE_N} integers in {k} decreasing blocks, each above the last; expected: {k}; got: {got}"


ALL = [prop_leetcode_examples, prop_matches_every_subsequence, prop_strictly_increasing, prop_n_log_n_comparisons,
       prop_scale]

ZH = {
    "doc": """LeetCode 300 的性质：`length_of_lis(nums) -> int`，返回最长**严格**递增子序列的长度。

小输入上的对照答案：逐一尝试全部 2^n 个子序列（不用 DP，也不用二分）。元素是整数，包括负数和重复值；
重复的值不能让子序列变长。

也检查算法本身：`prop_n_log_n_comparisons` 传入不透明的键（`verifiers/katas/counted.py`），它们之间只能比较
（`<`、`==` 等）或求哈希，每次比较都在评测端回答并计数。所以函数里只能在元素之间做比较（不要对元素做算术，
也不要和 `float('-inf')` 这样的数比较）：O(n log n) 解法在 16 和 128 个元素的每种输入上都不超过
2 n ceil(log2(n+1)) + 2n 次比较与哈希；O(n^2) 的 DP 要 n(n-1)/2 次，不通过。`prop_scale` 给 20000 个普通整数、
限时 3 秒（O(n log n) 解法只要几十毫秒，O(n^2) 要几分钟）。""",
    "prop_leetcode_examples": "LeetCode 300 的示例、空列表和单个元素。",
    "prop_matches_every_subsequence": "在最多 10 个小整数（含重复、负数）的列表上，与枚举全部 2^n 个子序列的答案一致。",
    "prop_strictly_increasing": "重复值不算递增：[2, 2, 2] 的答案是 1，[1, 2, 2, 3] 是 3（用 bisect_right 找第一个大于 x 的 tail，算的是最长非递减子序列：3 和 4）。",
    "prop_n_log_n_comparisons": "O(n log n) 次比较：在 n = 16 和 128 个不透明键（比较在评测端进行并计数）、两种顺序上，比较与哈希合计不超过 2 n ceil(log2(n+1)) + 2n 次，且长度正确。",
    "prop_scale": "20000 个普通整数（k 个递减块，每块都高于前一块，答案是 k），限时 3 秒；O(n log n) 只需几十毫秒，O(n^2) 解法（包括先排序、再在名次上跑 DP 的）要几分钟。",
    "length_of_lis": """返回 `nums` 最长严格递增子序列的长度。

`tails[k]` 是长度为 k+1 的递增子序列的最小结尾；对每个 x：`i = bisect_left(tails, x)`，
令 `tails[i] = x`（`i == len(tails)` 时追加）。""",
}

__all__ = [p.__name__ for p in ALL] + ["ALL", "oracle_lis"]
