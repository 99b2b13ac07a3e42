"""Longest strictly increasing subsequence (LeetCode 300).

* ``length_of_lis(nums)`` -- patience sorting. ``tails[i]`` is the smallest value that ends an increasing
  subsequence of length ``i + 1`` among the elements seen so far; ``tails`` is strictly increasing, so each
  element ``x`` finds by binary search the first tail ``>= x`` (``bisect_left``) and replaces it, or extends
  ``tails`` when every tail is smaller. The answer is ``len(tails)``. O(n log n) comparisons, O(n) memory.
  With ``strict=False`` the search is ``bisect_right`` (first tail ``> x``): that computes the longest
  *non-decreasing* subsequence instead.
* ``lis_dp(nums)`` -- the O(n^2) DP: ``best[i] = 1 + max(best[j] for j < i if nums[j] < nums[i])``.
* ``longest_increasing_subsequence(nums)`` -- one longest subsequence itself, from predecessor links kept
  beside ``tails`` (``tails`` at the end is in general *not* a subsequence of ``nums``).

Only ``<`` and ``==`` between elements are used, so any totally ordered values work.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from typing import Any

__all__ = ["length_of_lis", "lis_dp", "longest_increasing_subsequence", "patience_tails"]


def length_of_lis(nums: Sequence[Any], strict: bool = True) -> int:
    """Length of the longest strictly increasing subsequence of ``nums`` (``strict=False``: non-decreasing).

    ``tails[k]`` = smallest tail of an increasing subsequence of length ``k + 1``; for each ``x``:
    ``i = bisect_left(tails, x)``; ``tails[i] = x`` (or append when ``i == len(tails)``).
    """
    search = bisect_left if strict else bisect_right
    tails: list[Any] = []
    for x in nums:
        i = search(tails, x)
        if i == len(tails):
            tails.append(x)
        else:
            tails[i] = x
    return len(tails)


def patience_tails(nums: Sequence[Any]) -> list[Any]:
    """The final ``tails`` array of :func:`length_of_lis` (strict)."""
    tails: list[Any] = []
    for x in nums:
        i = bisect_left(tails, x)
        if i == len(tails):
            tails.append(x)
        else:
            tails[i] = x
    return tails


def lis_dp(nums: Sequence[Any]) -> int:
    """The O(n^2) DP: ``best[i]`` is the length of the longest increasing subsequence ending at ``i``."""
    best: list[int] = []
    for i, x in enumerate(nums):
        b = 1
        for j in range(i):
            if nums[j] < x and best[j] + 1 > b:
                b = best[j] + 1
        best.append(b)
    return max(best, default=0)


def longest_increasing_subsequence(nums: Sequence[Any]) -> list[Any]:
    """One longest strictly increasing subsequence, in O(n log n).

    Beside ``tails`` keep ``tail_at[k]``, the index of the element now ending length ``k + 1``, and for each
    element the index of its predecessor (``tail_at[k - 1]`` when it was placed at ``k``); walk the links back
    from the last tail.
    """
    tails: list[Any] = []
    tail_at: list[int] = []
    prev: list[int] = []
    for i, x in enumerate(nums):
        k = bisect_left(tails, x)
        prev.append(tail_at[k - 1] if k > 0 else -1)
        if k == len(tails):
            tails.append(x)
            tail_at.append(i)
        else:
            tails[k] = x
            tail_at[k] = i
    out: list[Any] = []
    i = tail_at[-1] if tail_at else -1
    while i >= 0:
        out.append(nums[i])
        i = prev[i]
    return out[::-1]
