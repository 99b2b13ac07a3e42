"""Validate a binary search tree (LeetCode 98): every key in a node's left subtree is smaller than the node's key,
every key in its right subtree larger (strictly: a repeated key makes the tree invalid).

* ``is_valid_bst(root)`` -- in-order traversal with an explicit stack: the tree is a BST exactly when the in-order
  sequence is strictly increasing, so compare each key with the previous one. O(n) time, O(h) stack; no recursion.
* ``is_valid_bst_bounds(root)`` -- carry the open interval ``(low, high)`` each subtree's keys must lie in, starting
  unbounded (``None``, not a sentinel number): the left child gets ``(low, node.val)``, the right one
  ``(node.val, high)``. O(n), every node visited once.
* ``is_valid_bst_sentinels(root, low, high)`` -- the bounds method with numeric sentinels for "unbounded", as often
  written with ``INT_MIN``/``INT_MAX``: wrong whenever a key equals a sentinel.
"""

from __future__ import annotations

from typing import Any

from impls.coding.trees import TreeNode

__all__ = ["TreeNode", "is_valid_bst", "is_valid_bst_bounds", "is_valid_bst_sentinels"]


def is_valid_bst(root: TreeNode | None) -> bool:
    """True iff the in-order sequence of keys is strictly increasing (iterative in-order walk)."""
    stack: list[TreeNode] = []
    node, prev, have_prev = root, None, False
    while stack or node is not None:
        while node is not None:
            stack.append(node)
            node = node.left
        node = stack.pop()
        if have_prev and not prev < node.val:
            return False
        prev, have_prev = node.val, True
        node = node.right
    return True


def is_valid_bst_bounds(root: TreeNode | None) -> bool:
    """Every key strictly inside the bounds its ancestors impose; ``None`` means unbounded on that side."""
    stack: list[tuple[TreeNode, Any, Any]] = [(root, None, None)] if root is not None else []
    while stack:
        node, low, high = stack.pop()
        v = node.val
        if (low is not None and not low < v) or (high is not None and not v < high):
            return False
        if node.left is not None:
            stack.append((node.left, low, v))
        if node.right is not None:
            stack.append((node.right, v, high))
    return True


def is_valid_bst_sentinels(root: TreeNode | None, low: int = -(2**31), high: int = 2**31 - 1) -> bool:
    """The bounds method with numbers standing for "unbounded" (C's INT_MIN / INT_MAX by default)."""
    stack = [(root, low, high)] if root is not None else []
    while stack:
        node, lo, hi = stack.pop()
        if not lo < node.val < hi:
            return False
        if node.left is not None:
            stack.append((node.left, lo, node.val))
        if node.right is not None:
            stack.append((node.right, node.val, hi))
    return True
