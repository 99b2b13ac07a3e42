"""Verifiers for qa/coding/level-order-with-depth.yaml (catalog b3.level-order-with-depth).

Oracle for the level lists: label every node with its root path and sort by
(depth, path) -- no queue involved (``oracle_levels``); depths are cross-checked by
walking parent pointers (``oracle_depths``). Complexity claims are measured by
counting queue operations, the queue's peak size and the recursion depth.
"""

from __future__ import annotations

import math
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings

from impls.coding.level_order import level_order_dfs, level_order_pairs, level_order_with_depth
from impls.coding.trees import TreeNode, chain, from_level_list, height, perfect, size
from verifiers.coding.strategies import binary_trees, describe, oracle_levels
from verifiers.katas import level_order as kata

REPO = Path(__file__).resolve().parents[2]


# --- lo-01 ------------------------------------------------------------------------------


@pytest.mark.claim("coding.level-order.bfs-batches-are-levels")
def test_bfs_levels_match_oracle(evidence):
    for prop in kata.ALL:
        prop(level_order_with_depth)
    # The pairs view agrees with the level lists and starts at depth 0.
    root = from_level_list([3, 9, 20, None, None, 15, 7])
    assert level_order_with_depth(root) == [[3], [9, 20], [15, 7]]
    assert level_order_pairs(root) == [(3, 0), (9, 1), (20, 1), (15, 2), (7, 2)]
    evidence["kata_properties_passed"] = [p.__name__ for p in kata.ALL]
    evidence["example"] = {"tree": [3, 9, 20, None, None, 15, 7], "levels": [[3], [9, 20], [15, 7]]}


@pytest.mark.claim("coding.level-order.bfs-batches-are-levels")
def test_kata_catches_a_plain_bfs_without_batches(evidence):
    """The properties can fail: a BFS that does not cut the queue by its length
    (one level per pop) is caught with a shrunk tree."""

    def no_batches(root):
        if root is None:
            return []
        out, queue = [], [root]
        while queue:
            node = queue.pop(0)
            out.append([node.val])
            queue += [c for c in (node.left, node.right) if c is not None]
        return out

    with pytest.raises(AssertionError) as err:
        kata.prop_levels_match_oracle(no_batches)
    evidence["mutant_caught"] = str(err.value)[:300]


# --- lo-02 ------------------------------------------------------------------------------


@pytest.mark.claim("coding.level-order.linear-time-width-space")
def test_linear_time_and_width_space(evidence):
    worst = {"max_peak_over_width": 0.0}

    @settings(deadline=None)
    @given(binary_trees())
    def check(root: TreeNode | None) -> None:
        stats: dict = {}
        levels = level_order_with_depth(root, stats)
        n = size(root)
        w = max((len(lv) for lv in oracle_levels(root)), default=0)
        # time: every node enqueued and dequeued exactly once
        assert stats["enqueues"] == stats["dequeues"] == n, describe_stats(root, stats, n, w)
        assert sum(len(lv) for lv in levels) == n
        # space: the queue holds a suffix of level d and a prefix of level d+1
        if n:
            assert w <= stats["max_queue"] <= 2 * w - 1, describe_stats(root, stats, n, w)
            worst["max_peak_over_width"] = max(worst["max_peak_over_width"], stats["max_queue"] / w)

    check()
    # The peak can exceed w: level 1 = [1, 2]; after popping 1 the queue is [2, 3, 4].
    stats: dict = {}
    level_order_with_depth(from_level_list([0, 1, 2, 3, 4]), stats)
    assert stats["max_queue"] == 3
    evidence.update(worst)
    evidence["peak_above_width_example"] = {"tree": [0, 1, 2, 3, 4], "width": 2, "max_queue": 3}


def describe_stats(root, stats, n, w) -> str:
    return f"tree {describe(root)}: n={n}, w={w}, stats={stats}"


# --- lo-03 ------------------------------------------------------------------------------


def _dfs_levels(root: TreeNode | None, order: str, right_first: bool = False) -> list[list]:
    """A DFS carrying the depth in pre-, in- or post-order; optionally right child first."""
    levels: list[list] = []

    def emit(node, depth):
        while len(levels) <= depth:
            levels.append([])
        levels[depth].append(node.val)

    def visit(node, depth):
        if node is None:
            return
        first, second = (node.right, node.left) if right_first else (node.left, node.right)
        if order == "pre":
            emit(node, depth)
        visit(first, depth + 1)
        if order == "in":
            emit(node, depth)
        visit(second, depth + 1)
        if order == "post":
            emit(node, depth)

    visit(root, 0)
    return levels


@pytest.mark.claim("coding.level-order.dfs-same-lists")
def test_dfs_matches_bfs_when_left_first(evidence):
    for prop in (kata.prop_none_root, kata.prop_levels_match_oracle, kata.prop_depth_of_every_node):
        prop(level_order_dfs)

    @settings(deadline=None)
    @given(binary_trees(max_nodes=40))
    def check(root):
        expected = oracle_levels(root)
        for order in ("pre", "in", "post"):
            assert _dfs_levels(root, order) == expected, order
        assert level_order_dfs(root) == level_order_with_depth(root)

    check()
    # Counterexample to the unconditional statement: visit the right child first.
    root = perfect(2)
    got = _dfs_levels(root, "pre", right_first=True)
    assert got == [[0], [2, 1]] != level_order_with_depth(root) == [[0], [1, 2]]
    # ... and a chain deeper than the recursion limit never produces the lists.
    old_limit = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)  # CPython's default, whatever another test may have set
    try:
        with pytest.raises(AssertionError, match="RecursionError"):
            kata.prop_deep_chain(level_order_dfs)
    finally:
        sys.setrecursionlimit(old_limit)
    evidence["left_first_orders_equal_bfs"] = ["pre", "in", "post"]
    evidence["counterexample"] = {
        "tree": [0, 1, 2],
        "right_first_dfs": got,
        "bfs": [[0], [1, 2]],
        "deep_chain": f"chain of {kata.DEEP} nodes: RecursionError at the default limit",
    }


# --- lo-04 ------------------------------------------------------------------------------


@pytest.mark.claim("coding.level-order.queue-log-n")
def test_queue_is_not_logarithmic(evidence):
    rows = []
    for h in (4, 8, 12, 14):
        root = perfect(h)
        stats: dict = {}
        level_order_with_depth(root, stats)
        n = 2**h - 1
        assert size(root) == n
        # the whole last level sits in the queue once level h-2 has been consumed
        assert stats["max_queue"] == (n + 1) // 2, (h, stats)
        rows.append({"height": h, "n": n, "max_queue": stats["max_queue"], "log2_n": round(math.log2(n), 2)})
    assert rows[-1]["max_queue"] > 100 * rows[-1]["log2_n"]
    evidence["counterexample"] = rows[-1] | {"tree": f"perfect tree of height {rows[-1]['height']}"}
    evidence["perfect_trees"] = rows
    # A chain keeps a single node in the queue: the bound is O(w), anywhere from 1 to (n+1)/2.
    stats = {}
    level_order_with_depth(chain(1000, "zigzag"), stats)
    assert stats["max_queue"] == 1
    evidence["chain_1000_max_queue"] = stats["max_queue"]


# --- lo-05 ------------------------------------------------------------------------------


@pytest.mark.claim("coding.level-order.dfs-depth-equals-height")
def test_dfs_depth_equals_height(evidence):
    @settings(deadline=None)
    @given(binary_trees())
    def check(root):
        stats: dict = {}
        level_order_dfs(root, stats)
        assert stats["max_recursion_depth"] == height(root), (stats, height(root))

    check()
    for shape in ("left", "right", "zigzag"):
        stats = {}
        level_order_dfs(chain(500, shape), stats)
        assert stats["max_recursion_depth"] == 500
    evidence["chain_500_recursion_depth"] = 500


_CHILD = textwrap.dedent(
    """
    import json, sys
    from impls.coding.level_order import level_order_dfs, level_order_with_depth
    from impls.coding.trees import chain

    limit = sys.getrecursionlimit()

    def dfs_ok(n):
        try:
            level_order_dfs(chain(n, "left"))
            return True
        except RecursionError:
            return False

    lo, hi = 1, limit  # largest chain the recursive DFS survives (binary search)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if dfs_ok(mid) else (lo, mid - 1)
    bfs_levels = len(level_order_with_depth(chain(100_000, "left")))
    print(json.dumps({"limit": limit, "dfs_at_limit": dfs_ok(limit), "dfs_max_chain": lo,
                      "bfs_levels_on_100k_chain": bfs_levels}))
    """
)


@pytest.mark.claim("coding.level-order.dfs-depth-equals-height")
def test_chain_beyond_default_recursion_limit(evidence):
    """In a fresh interpreter (default limit), a chain as long as the limit crashes the
    recursive DFS while the BFS handles a 100 000-node chain."""
    import json

    proc = subprocess.run(
        [sys.executable, "-c", _CHILD], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["dfs_at_limit"] is False
    assert out["dfs_max_chain"] < out["limit"]
    assert out["bfs_levels_on_100k_chain"] == 100_000
    evidence.update(out)
