"""Level-order traversal of a binary tree that records each node's level (LeetCode 102).

``result[d]`` lists the values at depth ``d`` (root: depth 0) from left to right,
so the level of every node is the index of the list it lands in.

* ``level_order_with_depth`` -- BFS; the queue is consumed in batches of its
  current length, and each batch is exactly one level. Time O(n); the queue
  holds between w and 2w-1 nodes at its peak, w the largest level width.
* ``level_order_dfs`` -- recursive pre-order DFS carrying ``depth``; node at
  depth d is appended to ``result[d]``. Same output, O(h) call stack, so it
  raises ``RecursionError`` on chains longer than about ``sys.getrecursionlimit()``.

Both accept an optional ``stats`` dict that is filled with operation counts.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from impls.coding.trees import TreeNode

__all__ = ["TreeNode", "level_order_with_depth", "level_order_dfs", "level_order_pairs"]


def level_order_with_depth(root: TreeNode | None, stats: dict | None = None) -> list[list[Any]]:
    """BFS by levels: ``result[d] = [values at depth d, left to right]``.

    At the start of each outer iteration the queue holds exactly the nodes of one
    level, so ``len(queue)`` pops consume that level and nothing else.
    ``stats`` (optional) receives ``enqueues``, ``dequeues`` and ``max_queue``.
    """
    levels: list[list[Any]] = []
    enqueues = dequeues = max_queue = 0
    queue: deque[TreeNode] = deque()
    if root is not None:
        queue.append(root)
        enqueues = max_queue = 1
    while queue:
        level = []
        for _ in range(len(queue)):  # exactly the nodes of the current level
            node = queue.popleft()
            dequeues += 1
            level.append(node.val)
            for child in (node.left, node.right):
                if child is not None:
                    queue.append(child)
                    enqueues += 1
            max_queue = max(max_queue, len(queue))
        levels.append(level)
    if stats is not None:
        stats.update(enqueues=enqueues, dequeues=dequeues, max_queue=max_queue)
    return levels


def level_order_pairs(root: TreeNode | None) -> list[tuple[Any, int]]:
    """The same traversal flattened: ``[(value, depth), ...]`` in level order."""
    return [(v, d) for d, level in enumerate(level_order_with_depth(root)) for v in level]


def level_order_dfs(root: TreeNode | None, stats: dict | None = None) -> list[list[Any]]:
    """Recursive pre-order DFS carrying the depth; same result as the BFS.

    Visiting the left child before the right one is what makes each level come out
    left to right. One Python frame per node on the current path, so the deepest
    recursion equals the height (in nodes). ``stats`` receives ``calls`` and
    ``max_recursion_depth``.
    """
    levels: list[list[Any]] = []
    calls = 0
    max_depth = 0

    def visit(node: TreeNode, depth: int) -> None:
        nonlocal calls, max_depth
        calls += 1
        max_depth = max(max_depth, depth + 1)  # frames of `visit` now on the stack
        if depth == len(levels):  # first node seen at this depth opens its level
            levels.append([])
        levels[depth].append(node.val)
        if node.left is not None:
            visit(node.left, depth + 1)
        if node.right is not None:
            visit(node.right, depth + 1)

    if root is not None:
        visit(root, 0)
    if stats is not None:
        stats.update(calls=calls, max_recursion_depth=max_depth)
    return levels
