"""Build a binary tree from its preorder and inorder traversals (LeetCode 105; values distinct).

The first preorder value is the root; its position ``k`` in the inorder sequence splits it: ``inorder[:k]`` is the
left subtree's inorder and the next ``k`` preorder values are its preorder, the rest belong to the right subtree.

* ``build_tree(preorder, inorder)`` -- a dict from value to inorder index and index ranges instead of slices, with an
  explicit stack of pending subtrees: O(n) time, O(n) memory, no recursion (a chain of 3000 nodes is fine).
* ``build_tree_slicing(preorder, inorder, stats)`` -- the textbook recursion with ``inorder.index`` and list slices:
  O(n^2) on a chain (``stats`` counts the elements scanned by ``index`` and copied by slicing).
* ``build_tree_stack(preorder, inorder)`` -- the one-pass stack method: walk the preorder, attach each value as the
  left child of the stack top until the top equals the next inorder value, then pop while it does and attach as a
  right child. O(n), uses only ``==`` between values.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from impls.coding.trees import TreeNode

__all__ = ["TreeNode", "build_tree", "build_tree_slicing", "build_tree_stack"]


def build_tree(preorder: Sequence[Any], inorder: Sequence[Any]) -> TreeNode | None:
    """O(n): ``where[v]`` = index of v in ``inorder``; each pending subtree is (pre_start, in_lo, in_hi, parent, side)."""
    where = {v: i for i, v in enumerate(inorder)}
    root: TreeNode | None = None
    work: list[tuple[int, int, int, TreeNode | None, str]] = [(0, 0, len(inorder), None, "")]
    while work:
        p, lo, hi, parent, side = work.pop()
        if lo >= hi:
            continue
        node = TreeNode(preorder[p])
        if parent is None:
            root = node
        else:
            setattr(parent, side, node)
        k = where[preorder[p]]
        left_size = k - lo
        work.append((p + 1 + left_size, k + 1, hi, node, "right"))
        work.append((p + 1, lo, k, node, "left"))
    return root


def build_tree_slicing(preorder: Sequence[Any], inorder: Sequence[Any], stats: dict | None = None) -> TreeNode | None:
    """The textbook recursion: ``k = inorder.index(root)`` and slices for both subtrees. O(n^2) on a chain."""
    if stats is not None:
        stats.setdefault("scanned", 0)
        stats.setdefault("copied", 0)
    if not preorder:
        return None
    root = TreeNode(preorder[0])
    k = list(inorder).index(preorder[0])
    if stats is not None:
        stats["scanned"] += k + 1
        stats["copied"] += 2 * (len(preorder) - 1)
    root.left = build_tree_slicing(preorder[1:k + 1], inorder[:k], stats)
    root.right = build_tree_slicing(preorder[k + 1:], inorder[k + 1:], stats)
    return root


def build_tree_stack(preorder: Sequence[Any], inorder: Sequence[Any]) -> TreeNode | None:
    """One pass over the preorder with a stack of nodes whose right subtree is still open."""
    if not preorder:
        return None
    root = TreeNode(preorder[0])
    stack = [root]
    j = 0
    for v in preorder[1:]:
        node = TreeNode(v)
        parent = stack[-1]
        if parent.val != inorder[j]:
            parent.left = node
        else:
            while stack and stack[-1].val == inorder[j]:
                parent = stack.pop()
                j += 1
            parent.right = node
        stack.append(node)
    return root
