"""Binary-tree helpers shared by the coding questions.

Everything here is iterative (no recursion), so it works on degenerate chains
far longer than ``sys.getrecursionlimit()``.

Conventions: depth of the root is 0; the *height* of a tree is the number of
nodes on its longest root-to-leaf path (empty tree: 0, one node: 1, a chain of
n nodes: n). CLRS counts edges instead, which is this number minus one.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any


class TreeNode:
    """A binary-tree node with the LeetCode field names ``val``, ``left``, ``right``."""

    __slots__ = ("val", "left", "right")

    def __init__(self, val: Any = 0, left: "TreeNode | None" = None, right: "TreeNode | None" = None):
        self.val = val
        self.left = left
        self.right = right

    def __repr__(self) -> str:  # short, so hypothesis failure reports stay readable
        return f"TreeNode({self.val!r})"


def from_level_list(values: Sequence[Any]) -> TreeNode | None:
    """Build a tree from LeetCode's level-order list, ``None`` marking a missing child.

    ``[3, 9, 20, None, None, 15, 7]`` is the tree with root 3, children 9 and 20,
    and 20's children 15 and 7.
    """
    if not values or values[0] is None:
        return None
    root = TreeNode(values[0])
    parents = [root]
    head, i = 0, 1
    while i < len(values):
        if head >= len(parents):
            raise ValueError(f"level list has a child at index {i} whose parent is missing")
        parent = parents[head]
        head += 1
        for side in ("left", "right"):
            if i < len(values) and values[i] is not None:
                child = TreeNode(values[i])
                setattr(parent, side, child)
                parents.append(child)
            i += 1
    return root


def bst_insert(root: TreeNode | None, key: Any) -> TreeNode:
    """Insert ``key`` into the BST at ``root`` (iteratively); duplicates go right."""
    node = TreeNode(key)
    if root is None:
        return node
    cur = root
    while True:
        if key < cur.val:
            if cur.left is None:
                cur.left = node
                return root
            cur = cur.left
        else:
            if cur.right is None:
                cur.right = node
                return root
            cur = cur.right


def bst_from_keys(keys: Iterable[Any]) -> TreeNode | None:
    """The BST obtained by inserting ``keys`` one by one, in the given order."""
    root = None
    for k in keys:
        root = bst_insert(root, k)
    return root


def chain(n: int, shape: str = "left", start: int = 0) -> TreeNode | None:
    """A degenerate tree of ``n`` nodes: ``left``/``right``-only or ``zigzag``.

    Values are ``start, start+1, ...`` from the root down (not a BST).
    """
    if shape not in ("left", "right", "zigzag"):
        raise ValueError(f"shape must be 'left', 'right' or 'zigzag', got {shape!r}")
    if n <= 0:
        return None
    root = cur = TreeNode(start)
    for i in range(1, n):
        child = TreeNode(start + i)
        go_left = shape == "left" or (shape == "zigzag" and i % 2 == 1)
        if go_left:
            cur.left = child
        else:
            cur.right = child
        cur = child
    return root


def perfect(height: int, start: int = 0) -> TreeNode | None:
    """A perfect tree of the given height (``2**height - 1`` nodes), values in level order."""
    n = 2**height - 1
    if n <= 0:
        return None
    nodes = [TreeNode(start + i) for i in range(n)]
    for i in range(n):
        if 2 * i + 1 < n:
            nodes[i].left = nodes[2 * i + 1]
            nodes[i].right = nodes[2 * i + 2]
    return nodes[0]


def balanced_bst(keys: Sequence[Any]) -> TreeNode | None:
    """A height-balanced BST over the sorted ``keys`` (median at the root)."""
    keys = sorted(keys)
    if not keys:
        return None
    # Each work item: (lo, hi, parent, side); built with an explicit stack.
    root = None
    work: list[tuple[int, int, TreeNode | None, str]] = [(0, len(keys) - 1, None, "")]
    while work:
        lo, hi, parent, side = work.pop()
        if lo > hi:
            continue
        mid = (lo + hi) // 2
        node = TreeNode(keys[mid])
        if parent is None:
            root = node
        else:
            setattr(parent, side, node)
        work.append((lo, mid - 1, node, "left"))
        work.append((mid + 1, hi, node, "right"))
    return root


def nodes_with_paths(root: TreeNode | None) -> list[tuple[TreeNode, str]]:
    """Every node with its path from the root as a string of ``L``/``R`` (root: ``""``).

    Explicit-stack pre-order walk; ``len(path)`` is the node's depth.
    """
    out: list[tuple[TreeNode, str]] = []
    stack = [(root, "")] if root is not None else []
    while stack:
        node, path = stack.pop()
        out.append((node, path))
        if node.right is not None:
            stack.append((node.right, path + "R"))
        if node.left is not None:
            stack.append((node.left, path + "L"))
    return out


def size(root: TreeNode | None) -> int:
    """Number of nodes."""
    return len(nodes_with_paths(root))


def height(root: TreeNode | None) -> int:
    """Nodes on the longest root-to-leaf path (0 for an empty tree)."""
    return max((len(p) + 1 for _, p in nodes_with_paths(root)), default=0)


def snapshot(root: TreeNode | None) -> list[tuple[int, Any, int | None, int | None]]:
    """The exact pointer structure: ``(id(node), val, id(left), id(right))`` for every node
    reachable from ``root``, in a fixed order. Two equal snapshots mean the same objects
    wired the same way."""
    seen: set[int] = set()
    out = []
    stack = [root] if root is not None else []
    while stack:
        node = stack.pop()
        if id(node) in seen:  # a rewired (threaded) tree may contain cycles
            continue
        seen.add(id(node))
        left, right = node.left, node.right
        out.append((id(node), node.val, None if left is None else id(left), None if right is None else id(right)))
        if right is not None:
            stack.append(right)
        if left is not None:
            stack.append(left)
    return out
