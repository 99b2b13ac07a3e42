"""Kata properties for ``level_order_with_depth(root) -> list[list[int]]`` (LeetCode 102).

Each ``prop_*(impl)`` takes the function under test and raises ``AssertionError``
naming the tree (LeetCode level list), the expected and the returned value. The
oracle never uses a queue: it labels every node with its root path and sorts.
"""

from __future__ import annotations

from hypothesis import given, settings

from impls.coding.trees import TreeNode, chain, nodes_with_paths, snapshot
from verifiers.coding.strategies import binary_trees, describe, oracle_depths, oracle_levels

DEEP = 5000  # deeper than the default recursion limit (1000)
RECURSION_LIMIT = 1000  # the judge keeps Python's limit here: sys.setrecursionlimit changes nothing in this kata


def prop_none_root(impl) -> None:
    """The empty tree has no levels: ``impl(None) == []``."""
    got = impl(None)
    assert got == [], f"input: None (empty tree); expected: []; got: {got!r}"


def prop_levels_match_oracle(impl) -> None:
    """``result[d]`` is the values at depth d, left to right, for every tree shape."""

    @settings(deadline=None)
    @given(binary_trees())
    def check(root: TreeNode | None) -> None:
        expected = oracle_levels(root)
        got = impl(root)
        got = [list(level) for level in got]
        assert got == expected, f"input tree: {describe(root)}; expected: {expected}; got: {got}"

    check()


def prop_depth_of_every_node(impl) -> None:
    """With distinct values, the list a value lands in is that node's depth
    (depth computed by walking parent pointers up to the root)."""

    @settings(deadline=None)
    @given(binary_trees())
    def check(root: TreeNode | None) -> None:
        nodes = [n for n, _ in nodes_with_paths(root)]
        for i, node in enumerate(nodes):  # relabel: value = node number, so values identify nodes
            node.val = i
        depth_of = oracle_depths(root)
        expected = {i: depth_of[id(n)] for i, n in enumerate(nodes)}
        got = {}
        for d, level in enumerate(impl(root)):
            for v in level:
                assert v not in got, f"input tree: {describe(root)}; value {v} reported twice"
                got[v] = d
        assert got == expected, f"input tree: {describe(root)}; expected depths: {expected}; got: {got}"

    check()


def prop_does_not_modify_tree(impl) -> None:
    """The traversal leaves every pointer as it was."""

    @settings(deadline=None)
    @given(binary_trees())
    def check(root: TreeNode | None) -> None:
        before = snapshot(root)
        impl(root)
        after = snapshot(root)
        assert before == after, f"input tree: {describe(root)}; the tree's pointers changed during the traversal"

    check()


def prop_deep_chain(impl) -> None:
    """A degenerate chain deeper than the default recursion limit is handled:
    ``DEEP`` levels of one node each (fails a recursive DFS, also one that raises the recursion limit:
    the judge keeps it at ``RECURSION_LIMIT``)."""
    for shape in ("left", "right", "zigzag"):
        root = chain(DEEP, shape)
        try:
            got = impl(root)
        except RecursionError as e:
            raise AssertionError(
                f"input: {shape}-only chain of {DEEP} nodes; expected: {DEEP} one-node levels; "
                f"got: RecursionError ({e})"
            ) from None
        expected = [[i] for i in range(DEEP)]
        assert [list(x) for x in got] == expected, (
            f"input: {shape}-only chain 0..{DEEP - 1}; expected: [[0], [1], ..., [{DEEP - 1}]]; "
            f"got (first 5 levels): {got[:5]}"
        )


ALL = [prop_none_root, prop_levels_match_oracle, prop_depth_of_every_node, prop_does_not_modify_tree, prop_deep_chain]


ZH = {
    "doc": """`level_order_with_depth(root) -> list[list[int]]`（LeetCode 102）的性质。

每个 `prop_*(impl)` 接收被测函数，出错时抛出 `AssertionError`，写明树（LeetCode 的层序列表）、期望值和返回值。
对照答案不使用队列：给每个节点标上从根出发的路径，再排序。""",
    "prop_none_root": "空树没有层：`impl(None) == []`。",
    "prop_levels_match_oracle": "对任何形状的树，`result[d]` 都是深度 d 上从左到右的值。",
    "prop_depth_of_every_node": "值互不相同时，每个值所在列表的下标就是该节点的深度（深度由沿父指针走到根求得）。",
    "prop_does_not_modify_tree": "遍历不改变任何指针。",
    "prop_deep_chain": "比默认递归上限更深的退化链也能处理：`DEEP` 层、每层一个节点（递归 DFS 会失败，调高递归上限也一样：评测把上限保持在 `RECURSION_LIMIT`）。",
    "level_order_with_depth": """按层 BFS：`result[d] = [深度 d 上的值，从左到右]`。

每一轮外层循环开始时，队列里恰好是一层的节点，所以出队 `len(queue)` 次正好取完这一层。
`stats`（可选）记录 `enqueues`、`dequeues` 和 `max_queue`。""",
}

__all__ = [p.__name__ for p in ALL] + ["ALL"]
