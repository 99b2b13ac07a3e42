"""Trapping rain water (LeetCode 42): bars of width 1 and heights ``height[i]``; how much water stays on top?

The water above bar i is ``min(L[i], R[i]) - height[i]``, where ``L[i] = max(height[:i+1])`` and
``R[i] = max(height[i:])`` (bar i itself included in both, so the difference is never negative).

* ``trap(height)`` -- two pointers, O(n) time and O(1) extra memory. Keep the running maxima ``lmax`` of
  ``height[:l+1]`` and ``rmax`` of ``height[r:]``. If ``lmax <= rmax``, bar l's level is settled: its right
  maximum ``R[l] >= rmax >= lmax = L[l]``, so its water is ``lmax - height[l]`` and l moves right; otherwise
  the same holds for bar r from the other side.
* ``trap_prefix_max(height)`` -- the formula with the two prefix-maximum arrays: O(n) time, O(n) memory.
* ``trap_stack(height)`` -- a stack of decreasing bars, filling each basin layer by layer as a taller bar
  closes it: O(n) time, O(n) memory in the worst case (a decreasing run).
* ``water_per_bar(height)`` -- the list ``min(L[i], R[i]) - height[i]``.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["trap", "trap_prefix_max", "trap_stack", "water_per_bar"]


def trap(height: Sequence[int], trace: list | None = None) -> int:
    """Total trapped water by two pointers: O(n) time, O(1) extra memory.

    ``lmax = max(height[:l+1])``, ``rmax = max(height[r:])``; advance the side with the smaller running
    maximum (its water level is settled) and add ``that maximum - height[that bar]``. ``trace`` (optional)
    receives ``(side, index, water)`` for every bar as it is settled.
    """
    n = len(height)
    if n < 3:
        if trace is not None:
            trace.extend(("left", i, 0) for i in range(n))
        return 0
    l, r = 0, n - 1
    lmax, rmax = height[l], height[r]
    total = 0
    while l <= r:
        if lmax <= rmax:
            if height[l] > lmax:
                lmax = height[l]
            water = lmax - height[l]
            total += water
            if trace is not None:
                trace.append(("left", l, water))
            l += 1
        else:
            if height[r] > rmax:
                rmax = height[r]
            water = rmax - height[r]
            total += water
            if trace is not None:
                trace.append(("right", r, water))
            r -= 1
    return total


def water_per_bar(height: Sequence[int]) -> list[int]:
    """``min(L[i], R[i]) - height[i]`` for every bar (prefix and suffix maxima, bar i included in both)."""
    n = len(height)
    left, right = [0] * n, [0] * n
    best = None
    for i in range(n):
        best = height[i] if best is None or height[i] > best else best
        left[i] = best
    best = None
    for i in range(n - 1, -1, -1):
        best = height[i] if best is None or height[i] > best else best
        right[i] = best
    return [min(left[i], right[i]) - height[i] for i in range(n)]


def trap_prefix_max(height: Sequence[int]) -> int:
    """Total water from the two prefix-maximum arrays: O(n) time, O(n) extra memory."""
    return sum(water_per_bar(height))


def trap_stack(height: Sequence[int]) -> int:
    """Monotonic stack of indices of decreasing heights. When a taller bar i arrives, pop the basin floor f; the
    new top t and i bound a layer of width ``i - t - 1`` and depth ``min(h[t], h[i]) - h[f]``."""
    stack: list[int] = []
    total = 0
    for i, h in enumerate(height):
        while stack and height[stack[-1]] < h:
            floor = stack.pop()
            if not stack:
                break
            t = stack[-1]
            total += (i - t - 1) * (min(height[t], h) - height[floor])
        stack.append(i)
    return total
