"""Verifiers for qa/coding/build-tree-from-preorder-inorder.yaml (catalog code.build-tree-pre-in).

Oracle: the tree the traversals were taken from (a round trip), and for the uniqueness claim an enumeration of
every binary tree shape up to 5 nodes with every labelling.
"""

from __future__ import annotations

from itertools import product

import pytest
from hypothesis import given, settings

from impls.coding.build_tree import build_tree, build_tree_slicing, build_tree_stack
from impls.coding.trees import TreeNode, chain
from verifiers.coding.strategies import binary_trees, describe
from verifiers.katas import build_tree as kata
from verifiers.katas.counted import Tally


def shapes(n: int):
    """Every binary tree shape with n nodes (values None), by the Catalan recursion."""
    if n == 0:
        yield None
        return
    for k in range(n):
        for left in shapes(k):
            for right in shapes(n - 1 - k):
                yield (left, right)


def realise(shape, labels):
    """A TreeNode tree of ``shape`` with ``labels`` assigned in preorder."""
    it = iter(labels)

    def go(s):
        if s is None:
            return None
        node = TreeNode(next(it))
        node.left = go(s[0])
        node.right = go(s[1])
        return node

    return go(shape)


# --- bt-01 ----------------------------------------------------------------------------


@pytest.mark.claim("coding.buildtree.root-splits")
def test_first_preorder_value_splits_the_inorder(evidence):
    for prop in kata.ALL:
        prop(build_tree)

    @settings(deadline=None)
    @given(binary_trees(max_nodes=40))
    def check(root):
        root = kata._relabel(root)
        pre, ino = kata.traversals(root)
        for fn in (build_tree, build_tree_slicing, build_tree_stack):
            assert kata.same_tree(fn(pre, ino), root), fn.__name__
        if pre:  # the split itself: the left subtree's size is the root's position in the inorder
            k = ino.index(pre[0])
            left_pre, left_in = kata.traversals(root.left)
            assert left_in == ino[:k] and left_pre == pre[1:k + 1]

    check()
    total = sum(1 for n in range(7) for _ in shapes(n))
    for n in range(7):  # every shape up to 6 nodes, values 0..n-1 in preorder
        for s in shapes(n):
            root = realise(s, range(n))
            assert kata.same_tree(build_tree(*kata.traversals(root)), root)
    evidence["shapes_rebuilt_exhaustively"] = total


# --- bt-02 ----------------------------------------------------------------------------


@pytest.mark.claim("coding.buildtree.hashmap-linear")
def test_hash_map_and_ranges_are_linear(evidence):
    rows = []
    for n in (64, 256, 512):  # the slicing recursion is n deep on a chain: below the default limit
        root = kata._relabel(chain(n, "left"))
        pre, ino = kata.traversals(root)
        tally = Tally()
        keys = dict(zip(pre, tally.keys(pre)))
        built = build_tree([keys[v] for v in pre], [keys[v] for v in ino])
        assert kata.same_tree(kata._unkey(built), root)
        stats: dict = {}
        assert kata.same_tree(build_tree_slicing(pre, ino, stats), root)
        assert tally.total <= 3 * n  # n hashes to fill the dict, n lookups
        assert stats["scanned"] == n * (n + 1) // 2  # a left chain: the root is last in every inorder slice
        rows.append({"n": n, "hash_map_key_operations": tally.total, "index_scanned": stats["scanned"],
                     "slices_copied": stats["copied"]})
    assert rows[-1]["index_scanned"] > 100 * rows[-1]["hash_map_key_operations"]
    with pytest.raises(AssertionError, match="hashes and key comparisons"):
        kata.prop_linear_lookups(build_tree_slicing)
    evidence["left_chain"] = rows


# --- bt-03 ----------------------------------------------------------------------------


@pytest.mark.claim("coding.buildtree.unique-with-repeats")
def test_repeated_values_make_the_tree_ambiguous(evidence):
    seen: dict[tuple, list] = {}
    for n in range(1, 5):
        for s in shapes(n):
            for labels in product((1, 2), repeat=n):
                root = realise(s, labels)
                pre, ino = kata.traversals(root)
                key = (tuple(pre), tuple(ino))
                trees = seen.setdefault(key, [])
                if not any(kata.same_tree(root, t) for t in trees):
                    trees.append(root)
    ambiguous = {k: v for k, v in seen.items() if len(v) > 1}
    assert ((1, 1), (1, 1)) in ambiguous
    two = [describe(t) for t in ambiguous[((1, 1), (1, 1))]]
    assert sorted(map(str, two)) == sorted(map(str, [[1, 1], [1, None, 1]]))
    # with distinct values it is unique: no pair of traversals of distinct labels is shared
    for n in range(1, 6):
        pairs = set()
        count = 0
        for s in shapes(n):
            root = realise(s, range(n))
            pre, ino = kata.traversals(root)
            pairs.add((tuple(pre), tuple(ino)))
            count += 1
        assert len(pairs) == count
    evidence["counterexample"] = {"preorder": [1, 1], "inorder": [1, 1], "trees": two}
    evidence["ambiguous_traversal_pairs_up_to_4_nodes_values_1_2"] = len(ambiguous)
