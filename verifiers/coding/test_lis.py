"""Verifiers for qa/coding/lis.yaml (catalog code.lis).

Oracles: every subsequence tried (``kata.oracle_lis``, small n), the O(n^2) DP (a second algorithm), and
a subsequence check written here. Work is counted on opaque keys (``verifiers/katas/counted.py``): the
same comparisons the kata counts in the judge.
"""

from __future__ import annotations

import math
from itertools import combinations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from impls.coding.lis import length_of_lis, lis_dp, longest_increasing_subsequence, patience_tails
from verifiers.katas import lis as kata
from verifiers.katas.counted import Tally


def _is_subsequence(sub, seq) -> bool:
    it = iter(seq)
    return all(any(x == y for y in it) for x in sub)


def _longest_non_decreasing(nums) -> int:
    n = len(nums)
    for k in range(n, 0, -1):
        for idx in combinations(range(n), k):
            if all(nums[a] <= nums[b] for a, b in zip(idx, idx[1:])):
                return k
    return 0


def _comparisons(fn, values) -> int:
    tally = Tally()
    fn(tally.keys(values))
    return tally.total


# --- lis-01 ---------------------------------------------------------------------------


@pytest.mark.claim("coding.lis.patience-n-log-n")
def test_patience_is_right_and_n_log_n(evidence):
    for prop in kata.ALL:
        prop(length_of_lis)

    @settings(deadline=None)
    @given(st.lists(st.integers(-5, 5), max_size=11))
    def check(nums):
        assert length_of_lis(nums) == kata.oracle_lis(nums) == lis_dp(nums)

    check()
    # comparisons per element stay within ceil(log2(n+1)) whatever the order; the DP's grow with n
    rows = []
    for n in (16, 64, 256, 1024):
        for shape, values in kata._shapes(n, seed=n).items():
            c = _comparisons(length_of_lis, values)
            assert c <= n * math.ceil(math.log2(n + 1)), (n, shape, c)
            rows.append({"n": n, "shape": shape, "comparisons": c,
                         "per_n_log2_n": round(c / (n * math.log2(n)), 3)})
        dp = _comparisons(lis_dp, list(range(n)))
        assert dp == n * (n - 1) // 2  # every pair j < i compared once
        rows.append({"n": n, "shape": "O(n^2) DP", "comparisons": dp, "per_n_log2_n": round(dp / (n * math.log2(n)), 3)})
    big = [r for r in rows if r["n"] == 1024]
    assert max(r["comparisons"] for r in big if r["shape"] != "O(n^2) DP") * 40 < next(
        r["comparisons"] for r in big if r["shape"] == "O(n^2) DP")
    evidence["comparisons"] = rows
    # the kata's counting property rejects the DP
    with pytest.raises(AssertionError, match="comparisons"):
        kata.prop_n_log_n_comparisons(lis_dp)


# --- lis-02 ---------------------------------------------------------------------------


@pytest.mark.claim("coding.lis.bisect-left-for-strict")
def test_bisect_left_strict_bisect_right_non_decreasing(evidence):
    @settings(deadline=None)
    @given(st.lists(st.integers(0, 3), max_size=11))
    def check(nums):
        assert length_of_lis(nums, strict=True) == kata.oracle_lis(nums)
        assert length_of_lis(nums, strict=False) == _longest_non_decreasing(nums)

    check()
    example = [1, 2, 2, 3]
    assert length_of_lis(example) == 3 and length_of_lis(example, strict=False) == 4
    with pytest.raises(AssertionError, match="strictly increasing"):
        kata.prop_strictly_increasing(lambda nums: length_of_lis(nums, strict=False))
    evidence["example"] = {"nums": example, "bisect_left": 3, "bisect_right": 4}


# --- lis-03 ---------------------------------------------------------------------------


@pytest.mark.claim("coding.lis.tails-is-an-lis")
def test_tails_is_not_a_subsequence(evidence):
    nums = [3, 4, 1]
    tails = patience_tails(nums)
    assert tails == [1, 4] and len(tails) == kata.oracle_lis(nums) == 2
    assert not _is_subsequence(tails, nums)  # 1 comes after 4 in nums
    found = longest_increasing_subsequence(nums)
    assert found == [3, 4]

    # the predecessor links do give a longest strictly increasing subsequence, every time
    @settings(deadline=None)
    @given(st.lists(st.integers(-5, 5), max_size=11))
    def check(nums):
        seq = longest_increasing_subsequence(nums)
        assert len(seq) == kata.oracle_lis(nums)
        assert _is_subsequence(seq, nums) and all(a < b for a, b in zip(seq, seq[1:]))

    check()
    # how often is tails a subsequence? on random lists of 8 values in 0..7, count
    import random

    rng = random.Random(0)
    trials, bad = 2000, 0
    for _ in range(trials):
        xs = [rng.randrange(8) for _ in range(8)]
        tails = patience_tails(xs)
        assert len(tails) == kata.oracle_lis(xs)  # its length is right (strictly increasing, repeats included) ...
        if not _is_subsequence(tails, xs):  # ... its contents often are not a subsequence
            bad += 1
    assert bad > 0
    evidence["counterexample"] = {"nums": nums, "tails": tails, "a_longest_subsequence": found}
    evidence["random_lists_where_tails_is_not_a_subsequence"] = f"{bad}/{trials}"
