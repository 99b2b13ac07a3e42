"""Verifiers for qa/coding/number-of-islands.yaml (catalog code.number-of-islands).

Oracle: the kata's BFS (``kata.oracle_bfs``, written independently of impls/); union-find as a third method.
Work is measured by counting queue entries and cell expansions, and union-find's parent-pointer steps.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from math import comb
from pathlib import Path

import pytest
from hypothesis import given, settings

from impls.coding.number_of_islands import num_islands, num_islands_bfs, num_islands_recursive, num_islands_union_find
from verifiers.katas import number_of_islands as kata

REPO = Path(__file__).resolve().parents[2]


def _land(grid) -> int:
    return sum(row.count("1") for row in grid)


# --- isl-01 ---------------------------------------------------------------------------


@pytest.mark.claim("coding.islands.search-counts")
def test_search_from_each_unvisited_cell(evidence):
    for prop in kata.ALL:
        prop(num_islands)

    @settings(deadline=None)
    @given(kata.grids())
    def check(grid):
        stats: dict = {}
        want = kata.oracle_bfs(grid)
        assert num_islands(grid) == num_islands_bfs(grid, "push", stats) == want
        # O(mn): every land cell enters the queue exactly once and is expanded once
        assert stats["enqueued"] == stats["expanded"] == _land(grid)

    check()
    big = kata.snake(kata.BIG)
    stats = {}
    assert num_islands_bfs(big, "push", stats) == 1 and stats["enqueued"] == _land(big)
    evidence["snake_300"] = {"land_cells": _land(big), "enqueued": stats["enqueued"]}


# --- isl-02 ---------------------------------------------------------------------------


@pytest.mark.claim("coding.islands.mark-on-push")
def test_where_the_visited_mark_goes(evidence):
    @settings(deadline=None)
    @given(kata.grids())
    def check(grid):
        want = kata.oracle_bfs(grid)
        push, pop = {}, {}
        assert num_islands_bfs(grid, "push", push) == num_islands_bfs(grid, "pop", pop) == want
        # marked on pop (and skipped when popped again): correct, each cell queued at most once per neighbour
        assert push["enqueued"] == _land(grid) <= pop["enqueued"] <= 4 * _land(grid)
        assert pop["expanded"] == _land(grid)

    check()
    rows = []
    for k in (4, 6, 8, 10):
        grid = [["1"] * k for _ in range(k)]
        s = {m: {} for m in ("push", "pop", "pop-no-skip")}
        for m, st in s.items():
            assert num_islands_bfs(grid, m, st) == 1
        rows.append({"k": k, "cells": k * k, "push": s["push"]["enqueued"], "pop_with_skip": s["pop"]["enqueued"],
                     "pop_without_skip_expanded": s["pop-no-skip"]["expanded"]})
        # without the skip every shortest path from the corner is walked: C(2k-2, k-1) expansions of the far corner
        assert s["pop-no-skip"]["expanded"] >= comb(2 * k - 2, k - 1)
    assert rows[-1]["pop_without_skip_expanded"] > 1000 * rows[-1]["cells"]
    evidence.quote("expansions, all-land 10 x 10, marked on pop without a skip", quoted=184755,
                   measured=rows[-1]["pop_without_skip_expanded"], abs=0)
    evidence["all_land_k_by_k"] = rows


# --- isl-03 ---------------------------------------------------------------------------

_CHILD = textwrap.dedent(
    """
    import json, sys
    from impls.coding.number_of_islands import num_islands, num_islands_recursive
    from verifiers.katas.number_of_islands import snake
    grid = snake(300)
    try:
        rec = num_islands_recursive(grid)
    except RecursionError:
        rec = "RecursionError"
    print(json.dumps({"limit": sys.getrecursionlimit(), "recursive": rec, "iterative": num_islands(grid)}))
    """
)


@pytest.mark.claim("coding.islands.recursive-dfs-safe")
def test_recursive_dfs_overflows_on_a_300_by_300_snake(evidence):
    proc = subprocess.run([sys.executable, "-c", _CHILD], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["recursive"] == "RecursionError" and out["iterative"] == 1
    assert out["limit"] == 1000
    # below the limit the two agree
    small = kata.snake(20)
    assert num_islands_recursive(small) == num_islands(small) == 1
    path = _land(kata.snake(300))
    evidence["counterexample"] = {"grid": "300 x 300 snake (rows 0, 2, 4... of land joined at alternating ends)",
                                  "cells_on_the_path": path, "default_recursion_limit": out["limit"],
                                  "recursive_dfs": out["recursive"], "iterative_dfs": out["iterative"]}
    # the kata asks for an iterative search: the recursive one fails its largest-grid property
    with pytest.raises(RecursionError):
        old = sys.getrecursionlimit()
        sys.setrecursionlimit(1000)
        try:
            kata.prop_largest_grids(num_islands_recursive)
        finally:
            sys.setrecursionlimit(old)


# --- isl-04 ---------------------------------------------------------------------------


@pytest.mark.claim("coding.islands.union-find")
def test_union_find_counts_islands_near_linearly(evidence):
    for prop in kata.ALL:
        prop(num_islands_union_find)
    import random

    rng = random.Random(4)
    rows = []
    grids = {"all land": [["1"] * 300 for _ in range(300)], "snake": kata.snake(300),
             "random 0.6": [["1" if rng.random() < 0.6 else "0" for _ in range(300)] for _ in range(300)]}
    for name, grid in grids.items():
        stats: dict = {}
        assert num_islands_union_find(grid, stats) == kata.oracle_bfs(grid)
        per_find = stats["parent_steps"] / max(1, stats["finds"])
        assert per_find < 3, (name, stats)  # path compression + union by rank: a few steps per find
        rows.append({"grid": name, "finds": stats["finds"], "parent_steps": stats["parent_steps"],
                     "steps_per_find": round(per_find, 3)})
    evidence["union_find_300x300"] = rows
