"""Verifiers for qa/coding/validate-bst.yaml (catalog code.validate-bst).

Oracle: the definition checked node by node against every key of both subtrees (``kata.oracle_definition``).
Work is counted as child-pointer reads on an instrumented copy of the tree (``counting_copy``).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from impls.coding.trees import bst_from_keys, from_level_list
from impls.coding.validate_bst import is_valid_bst, is_valid_bst_bounds, is_valid_bst_sentinels
from verifiers.coding.strategies import bst_keys, counting_copy, random_trees
from verifiers.katas import validate_bst as kata


def children_only(root) -> bool:
    """The claimed check: each node's left child smaller, right child larger."""
    stack = [root] if root is not None else []
    while stack:
        n = stack.pop()
        if (n.left is not None and not n.left.val < n.val) or (n.right is not None and not n.val < n.right.val):
            return False
        stack += [c for c in (n.left, n.right) if c is not None]
    return True


# --- vbst-01 --------------------------------------------------------------------------


@pytest.mark.claim("coding.bst.children-only")
def test_children_only_is_not_enough(evidence):
    root = from_level_list([5, 4, 6, None, None, 3, 7])
    assert children_only(root) is True
    assert kata.oracle_definition(root) is False and is_valid_bst(root) is False
    # it never rejects a valid BST: the error is one-sided
    @settings(deadline=None)
    @given(st.builds(bst_from_keys, bst_keys(max_nodes=30)))
    def check(r):
        assert children_only(r) is True

    check()
    with pytest.raises(AssertionError, match="expected: False"):
        kata.prop_whole_subtrees(children_only)
    evidence["counterexample"] = {"tree": [5, 4, 6, None, None, 3, 7], "children_only": True, "valid": False,
                                  "why": "3 lies in the right subtree of 5"}


# --- vbst-02 --------------------------------------------------------------------------


@pytest.mark.claim("coding.bst.bounds-or-inorder")
def test_bounds_and_inorder_decide_in_linear_time(evidence):
    for impl in (is_valid_bst, is_valid_bst_bounds):
        for prop in kata.ALL:
            prop(impl)

    worst = {"inorder": 0.0, "bounds": 0.0}

    @settings(deadline=None)
    @given(st.one_of(random_trees(40), st.builds(bst_from_keys, bst_keys(max_nodes=40)), kata.swapped_bsts()))
    def check(root):
        want = kata.oracle_definition(root)
        assert is_valid_bst(root) == is_valid_bst_bounds(root) == want
        if want:  # a full pass: each node's two child pointers read once (in-order), at most twice (bounds)
            n = len(kata._keys(root))
            for name, fn, most in (("inorder", is_valid_bst, 2), ("bounds", is_valid_bst_bounds, 4)):
                copy, counter = counting_copy(root)
                fn(copy)
                assert counter["reads"] <= most * n, (name, counter, n)
                assert name != "inorder" or counter["reads"] == 2 * n
                if n:
                    worst[name] = max(worst[name], counter["reads"] / n)

    check()
    evidence["pointer_reads_per_node_on_valid_trees"] = worst


# --- vbst-03 --------------------------------------------------------------------------


@pytest.mark.claim("coding.bst.int-sentinels-safe")
def test_int32_sentinels_reject_extreme_keys(evidence):
    rows = []
    for level in ([2**31 - 1], [-(2**31)], [-(2**31), None, 2**31 - 1]):
        root = from_level_list(level)
        assert kata.oracle_definition(root) is True and is_valid_bst_bounds(root) is True
        rows.append({"tree": level, "valid": True, "int32_sentinels": is_valid_bst_sentinels(root)})
    assert [r["int32_sentinels"] for r in rows] == [False, False, False]
    # a wider sentinel only moves the problem: with 64-bit sentinels LeetCode's keys are safe, other keys are not
    assert is_valid_bst_sentinels(from_level_list([2**31 - 1]), -(2**63), 2**63 - 1) is True
    assert is_valid_bst_sentinels(from_level_list([2**63 - 1]), -(2**63), 2**63 - 1) is False
    with pytest.raises(AssertionError, match="2147483647"):
        kata.prop_int32_extremes(is_valid_bst_sentinels)
    evidence["counterexample"] = rows
