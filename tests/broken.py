"""Deliberately broken implementations: typical interview bugs, used to show verifiers fail."""

from __future__ import annotations

from collections import deque

from impls.coding.bst_iterator import BSTIterator


class RightChildIterator(BSTIterator):
    """Bug: after popping a node, push its right child alone instead of the right child's left spine."""

    def next(self):
        if not self._stack:
            raise StopIteration
        node = self._stack.pop()
        self.stats["pops"] += 1
        if node.right is not None:
            self._stack.append(node.right)
            self.stats["pushes"] += 1
            self.stats["max_stack"] = max(self.stats["max_stack"], len(self._stack))
        return node.val


def level_order_unbatched(root, stats=None):
    """Bug: a plain BFS that starts a new level whenever a node has children, not per queue batch."""
    levels, queue = [], deque([root] if root is not None else [])
    current: list = []
    while queue:
        node = queue.popleft()
        current.append(node.val)
        kids = [c for c in (node.left, node.right) if c is not None]
        queue.extend(kids)
        if kids:
            levels.append(current)
            current = []
    if current:
        levels.append(current)
    if stats is not None:
        stats.update(enqueues=0, dequeues=0, max_queue=0)
    return levels
