"""Verifiers for qa/coding/trapping-rain-water.yaml (catalog code.trapping-rain-water).

Oracle: the water filled cell by cell, level by level (``kata.oracle_levels``, and per bar here): a cell above
bar i at level k holds water when ``height[i] < k`` and bars on both sides reach k. Memory is measured with
tracemalloc around the call (the kata's ``prop_constant_extra_space``).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from impls.coding.trapping_rain_water import trap, trap_prefix_max, trap_stack, water_per_bar
from verifiers.katas import trapping_rain_water as kata

heights = st.lists(st.integers(0, 8), max_size=20)


def per_bar_by_levels(height: list[int]) -> list[int]:
    out = []
    for i, h in enumerate(height):
        w = 0
        for k in range(h + 1, max(height, default=0) + 1):
            if any(x >= k for x in height[:i]) and any(x >= k for x in height[i + 1:]):
                w += 1
        out.append(w)
    return out


# --- trw-01 ---------------------------------------------------------------------------


@pytest.mark.claim("coding.rain.min-of-maxima")
def test_water_is_min_of_maxima_minus_height(evidence):
    @settings(deadline=None)
    @given(heights)
    def check(height):
        assert water_per_bar(height) == per_bar_by_levels(height)
        assert trap_prefix_max(height) == kata.oracle_levels(height)

    check()
    # with bar i left out of the maxima the formula goes negative on a peak and needs a max(0, .)
    height = [1, 2, 1]
    excluded = [min(max(height[:i], default=0), max(height[i + 1:], default=0)) - height[i] for i in range(3)]
    assert excluded == [-1, -1, -1] and water_per_bar(height) == [0, 0, 0]
    evidence["bar_excluded_from_its_maxima"] = {"height": height, "formula_without_clamp": excluded}


# --- trw-02 ---------------------------------------------------------------------------


@pytest.mark.claim("coding.rain.two-pointer-smaller-max")
def test_two_pointers_settle_the_smaller_side(evidence):
    for prop in kata.ALL:
        prop(trap)
    settled_early = {"bars": 0}

    @settings(deadline=None)
    @given(heights)
    def check(height):
        trace: list = []
        assert trap(height, trace) == kata.oracle_levels(height)
        final = water_per_bar(height)
        assert sorted(i for _, i, _ in trace) == list(range(len(height)))  # every bar settled exactly once
        for _, i, water in trace:  # the water added when a bar is settled is already its final water
            assert water == final[i], (height, i, water, final[i])
        settled_early["bars"] += len(trace)

    check()
    # the reason matters: advance the side with the *larger* running maximum instead, and the level committed for
    # the bar it leaves is not yet settled (its other side may hold a higher wall further in)
    def advance_larger(h):
        l, r, lmax, rmax, total = 0, len(h) - 1, 0, 0, 0
        while l <= r:
            lmax, rmax = max(lmax, h[l]), max(rmax, h[r])
            if lmax >= rmax:
                total += lmax - h[l]
                l += 1
            else:
                total += rmax - h[r]
                r -= 1
        return total

    height = [2, 0, 3]
    assert advance_larger(height) != trap(height) == kata.oracle_levels(height) == 2
    evidence["counterexample_advancing_the_larger_side"] = {"height": height, "got": advance_larger(height),
                                                            "water": 2}
    evidence["bars_settled_with_their_final_water"] = settled_early["bars"]


# --- trw-03 ---------------------------------------------------------------------------


@pytest.mark.claim("coding.rain.neighbours-bound")
def test_neighbours_do_not_bound_the_water(evidence):
    height = [3, 0, 0, 3]
    neighbours = [max(0, min(height[i - 1], height[i + 1]) - height[i]) for i in range(1, len(height) - 1)]
    assert neighbours == [0, 0]
    assert water_per_bar(height) == [0, 3, 3, 0] == per_bar_by_levels(height)

    def by_neighbours(h):
        return sum(max(0, min(h[i - 1], h[i + 1]) - h[i]) for i in range(1, len(h) - 1))

    with pytest.raises(AssertionError, match=r"\[3, 0, 0, 3\]"):
        kata.prop_level_set_by_the_highest_bars(by_neighbours)
    evidence["counterexample"] = {"height": height, "neighbour_bound": neighbours, "water_per_bar": [0, 3, 3, 0]}


@pytest.mark.claim("coding.rain.two-pointer-smaller-max")
def test_the_space_property_separates_the_methods(evidence):
    """Prefix maxima and the monotonic stack are O(n) time but O(n) memory: the kata's O(1)-memory property
    fails them (the stack on a decreasing run), while the two pointers pass."""
    kata.prop_constant_extra_space(trap)
    for method in (trap_prefix_max, trap_stack):
        kata.prop_leetcode_examples(method)
        with pytest.raises(AssertionError, match="bytes of Python objects"):
            kata.prop_constant_extra_space(method)
    from verifiers.katas.calls import allocated

    peaks = {}
    for name, fn in (("two_pointers", trap), ("prefix_max", trap_prefix_max), ("stack", trap_stack)):
        peaks[name] = {shape: allocated(fn, h)[1] for shape, h in kata._shapes(kata.SPACE_N).items()}
    assert max(peaks["two_pointers"].values()) <= kata.SPACE_BUDGET
    assert peaks["stack"]["decreasing"] > 20 * kata.SPACE_BUDGET
    evidence["peak_bytes_on_20000_bars"] = peaks
