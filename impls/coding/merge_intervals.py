"""Merge overlapping intervals (LeetCode 56).

``merge(intervals)`` sorts by start and sweeps once: while the next interval starts at or before the end of the
last merged one, extend that end to ``max(end, next end)``; otherwise start a new merged interval. O(n log n)
for the sort, O(n) for the sweep. Intervals are closed (LeetCode's convention), so ``[1, 4]`` and ``[4, 5]``
share the point 4 and merge; with ``closed=False`` they are half-open (``[start, end)``, as for time slots)
and only a strict overlap merges them.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["merge"]


def merge(intervals: Sequence[Sequence[int]], closed: bool = True) -> list[list[int]]:
    """The union of ``intervals`` as disjoint intervals sorted by start.

    ``out[-1]`` is extended while ``start <= out[-1][1]`` (``<`` when half-open); the new end is the larger of the
    two ends (a contained interval must not shrink it).
    """
    out: list[list[int]] = []
    for start, end in sorted(intervals, key=lambda iv: iv[0]):
        if out and (start <= out[-1][1] if closed else start < out[-1][1]):
            if end > out[-1][1]:
                out[-1][1] = end
        else:
            out.append([start, end])
    return out
