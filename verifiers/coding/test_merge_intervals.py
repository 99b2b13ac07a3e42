"""Verifiers for qa/coding/merge-intervals.yaml (catalog code.merge-intervals).

Oracles: the covered points on the grid of integers and half-integers (``kata.oracle_cuts``), and,
independently, the connected components of the "overlaps" graph over every pair of intervals. Comparisons
are counted on opaque keys (``verifiers/katas/counted.py``) to show the sort dominates.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings

from impls.coding.merge_intervals import merge
from verifiers.katas import merge_intervals as kata
from verifiers.katas.counted import Tally


def by_pairs(intervals, closed: bool = True) -> list[list[int]]:
    """Union-find over every pair that overlaps (closed: max(starts) <= min(ends); half-open: <)."""
    n = len(intervals)
    parent = list(range(n))

    def find(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i in range(n):
        for j in range(i + 1, n):
            lo = max(intervals[i][0], intervals[j][0])
            hi = min(intervals[i][1], intervals[j][1])
            if lo <= hi if closed else lo < hi:
                parent[find(i)] = find(j)
    groups: dict[int, list[int]] = {}
    for i in range(n):
        groups.setdefault(find(i), []).append(i)
    return sorted([min(intervals[i][0] for i in g), max(intervals[i][1] for i in g)] for g in groups.values())


def until_stable(intervals):
    """Merge any two overlapping intervals, repeat until no pair overlaps: right, and O(n^2) per pass."""
    out = [list(iv) for iv in intervals]
    changed = True
    while changed:
        changed = False
        for i in range(len(out)):
            for j in range(i + 1, len(out)):
                a, b = out[i], out[j]
                if max(a[0], b[0]) <= min(a[1], b[1]):
                    out[i] = [min(a[0], b[0]), max(a[1], b[1])]
                    del out[j]
                    changed = True
                    break
            if changed:
                break
    return sorted(out)


# --- mgi-01 ---------------------------------------------------------------------------


@pytest.mark.claim("coding.intervals.sort-and-sweep")
def test_sort_then_one_sweep(evidence):
    for prop in kata.ALL:
        prop(merge)

    @settings(deadline=None)
    @given(kata.interval_lists())
    def check(intervals):
        assert merge(intervals) == kata.oracle_cuts(intervals) == by_pairs(intervals)

    check()
    import random

    rng = random.Random(3)
    rows = []
    for n in (64, 128, 256):
        tally = Tally()
        raw = []
        for _ in range(n):
            a = rng.randrange(4 * n)
            raw.append([a, a + rng.randrange(6)])
        keyed = [[tally.keys([s])[0], tally.keys([e])[0]] for s, e in raw]
        got = merge(keyed)
        assert [[s.value, e.value] for s, e in got] == kata.oracle_cuts(raw)
        assert tally.total <= n * math.ceil(math.log2(n)) + 2 * n  # the sort, then at most two per interval
        t2 = Tally()
        until_stable([[t2.keys([s])[0], t2.keys([e])[0]] for s, e in raw])
        rows.append({"n": n, "comparisons_sort_and_sweep": tally.total, "comparisons_merge_until_stable": t2.total})
    assert rows[-1]["comparisons_merge_until_stable"] > 10 * rows[-1]["comparisons_sort_and_sweep"]
    evidence["comparisons"] = rows


# --- mgi-02 ---------------------------------------------------------------------------


@pytest.mark.claim("coding.intervals.end-is-new-end")
def test_new_end_replaces_a_longer_end(evidence):
    def end_is_new_end(intervals):
        out = []
        for s, e in sorted(intervals):
            if out and s <= out[-1][1]:
                out[-1][1] = e
            else:
                out.append([s, e])
        return out

    intervals = [[1, 10], [2, 3]]
    assert end_is_new_end(intervals) == [[1, 3]]
    assert merge(intervals) == kata.oracle_cuts(intervals) == [[1, 10]]
    with pytest.raises(AssertionError, match=r"\[\[1, 10\], \[2, 3\]\]"):
        kata.prop_contained_interval_keeps_the_end(end_is_new_end)
    evidence["counterexample"] = {"intervals": intervals, "end_becomes_new_end": [[1, 3]], "union": [[1, 10]]}


# --- mgi-03 ---------------------------------------------------------------------------


@pytest.mark.claim("coding.intervals.touching-merge")
def test_touching_intervals_depend_on_closedness(evidence):
    touching = [[1, 4], [4, 5]]
    # LeetCode 56, closed intervals: the point 4 is in both, so they merge (its example 2)
    assert merge(touching) == kata.oracle_cuts(touching) == by_pairs(touching) == [[1, 5]]

    # half-open slots [start, end): no point lies in both, so they do not overlap (meetings [1, 4) and [4, 5) fit
    # one room); the overlap test must then be strict
    def most_at_once(intervals, closed):
        pts = [2 * x for iv in intervals for x in iv] + [2 * x + 1 for iv in intervals for x in iv]
        return max(sum(1 for s, e in intervals if (2 * s <= p <= 2 * e if closed else 2 * s <= p < 2 * e)) for p in pts)

    assert most_at_once(touching, closed=True) == 2
    assert most_at_once(touching, closed=False) == 1
    assert merge(touching, closed=False) == by_pairs(touching, closed=False) == [[1, 4], [4, 5]]

    @settings(deadline=None)
    @given(kata.interval_lists())
    def check(intervals):
        intervals = [iv for iv in intervals if iv[0] < iv[1]]  # [s, s) is empty: no slot
        assert merge(intervals, closed=False) == by_pairs(intervals, closed=False)

    check()
    with pytest.raises(AssertionError, match=r"\[\[1, 4\], \[4, 5\]\]"):
        kata.prop_touching_intervals_merge(lambda ivs: merge(ivs, closed=False))
    evidence["closed"] = {"intervals": touching, "merged": [[1, 5]], "most_intervals_on_one_point": 2}
    evidence["half_open"] = {"intervals": touching, "overlapping": False, "most_intervals_on_one_point": 1}
