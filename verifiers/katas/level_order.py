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
    ``DEEP`` levels of one node each (fails a recursive DFS with the default limit)."""
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

__all__ = [p.__name__ for p in ALL] + ["ALL"]
