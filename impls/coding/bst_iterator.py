"""In-order iterators over a binary search tree (LeetCode 173): ``next()`` / ``hasNext()``.

Three designs, each with always-on counters in ``self.stats``:

* ``BSTIterator`` -- stack of the left spine. ``next()`` pops the top node ``x``
  and pushes the left spine of ``x.right``. Every node is pushed once and popped
  once, so a full traversal costs n pushes + n pops: amortised O(1) per call,
  but one call can push up to h-1 nodes. Extra memory O(h).
* ``FlattenBSTIterator`` -- in-order walk into a list in the constructor: O(n)
  time and memory up front, then O(1) per call in the worst case.
* ``MorrisBSTIterator`` -- Morris threading: no stack; the in-order predecessor's
  empty right pointer is pointed back at the current node to find the way up,
  and removed on the second visit. O(1) extra memory, amortised O(1) per call;
  the tree is restored only once the traversal has reached the end (``close()``
  finishes it early).

Height h counts nodes on the longest root-to-leaf path.
"""

from __future__ import annotations

from typing import Any

from impls.coding.trees import TreeNode

__all__ = ["TreeNode", "BSTIterator", "FlattenBSTIterator", "MorrisBSTIterator"]


class BSTIterator:
    """Controlled in-order traversal with an explicit stack of left spines.

    Invariant: the stack holds, bottom to top, the ancestors of the next node whose
    left subtree is still being visited, then the next node itself on top; so its
    size is at most h and ``hasNext() == bool(stack)``.
    """

    def __init__(self, root: TreeNode | None):
        self._stack: list[TreeNode] = []
        self.stats = {"pushes": 0, "pops": 0, "max_stack": 0, "last_call_pushes": 0, "max_call_pushes": 0}
        self._push_left_spine(root)

    def _push_left_spine(self, node: TreeNode | None) -> int:
        pushed = 0
        while node is not None:
            self._stack.append(node)
            pushed += 1
            node = node.left
        s = self.stats
        s["pushes"] += pushed
        s["max_stack"] = max(s["max_stack"], len(self._stack))
        return pushed

    def hasNext(self) -> bool:
        return bool(self._stack)

    def next(self) -> Any:
        """Return the next smallest key; cost 1 pop + (length of the left spine of its right child) pushes."""
        if not self._stack:
            raise StopIteration("BSTIterator exhausted")
        node = self._stack.pop()
        self.stats["pops"] += 1
        pushed = self._push_left_spine(node.right)
        self.stats["last_call_pushes"] = pushed
        self.stats["max_call_pushes"] = max(self.stats["max_call_pushes"], pushed)
        return node.val

    def __iter__(self) -> "BSTIterator":
        return self

    def __next__(self) -> Any:
        return self.next()


class FlattenBSTIterator:
    """Flatten the tree in order in the constructor; ``next()`` is an index bump.

    Constructor O(n) time and O(n) memory (plus an O(h) stack during the walk);
    every ``next()``/``hasNext()`` is O(1) in the worst case. The list is a
    snapshot: later changes to the tree are not seen.
    """

    def __init__(self, root: TreeNode | None):
        keys: list[Any] = []
        stack: list[TreeNode] = []
        node = root
        while stack or node is not None:  # iterative in-order walk
            while node is not None:
                stack.append(node)
                node = node.left
            node = stack.pop()
            keys.append(node.val)
            node = node.right
        self._keys = keys
        self._i = 0
        self.stats = {"stored": len(keys)}

    def hasNext(self) -> bool:
        return self._i < len(self._keys)

    def next(self) -> Any:
        if self._i >= len(self._keys):
            raise StopIteration("FlattenBSTIterator exhausted")
        self._i += 1
        return self._keys[self._i - 1]

    def __iter__(self) -> "FlattenBSTIterator":
        return self

    def __next__(self) -> Any:
        return self.next()


class MorrisBSTIterator:
    """In-order iterator with O(1) extra memory (Morris 1979 threading).

    At node ``cur`` with a left subtree, walk to its in-order predecessor ``p``
    (rightmost node of ``cur.left``). If ``p.right is None``, set ``p.right = cur``
    (a thread back up) and descend left; if ``p.right is cur``, the left subtree is
    done: remove the thread, emit ``cur``, go right. A node without a left child is
    emitted directly. Each edge is walked a bounded number of times, so a full
    traversal is O(n). The tree is modified while the traversal is in progress and
    is back to its original shape only after the last key; ``close()`` drains the
    iterator to restore it early.
    """

    def __init__(self, root: TreeNode | None):
        self._cur = root
        self.stats = {"pointer_steps": 0, "threads_made": 0, "threads_removed": 0}

    def hasNext(self) -> bool:
        # A non-empty `cur` always still has itself (at least) to emit.
        return self._cur is not None

    def next(self) -> Any:
        cur = self._cur
        s = self.stats
        while cur is not None:
            left = cur.left
            if left is None:
                self._cur = cur.right  # a real right child or a thread up to the successor
                return cur.val
            pred, nxt = left, left.right  # walk to the rightmost node of the left subtree
            s["pointer_steps"] += 1
            while nxt is not None and nxt is not cur:
                pred, nxt = nxt, nxt.right
                s["pointer_steps"] += 1
            if nxt is None:  # first visit: thread the predecessor back to cur
                pred.right = cur
                s["threads_made"] += 1
                cur = left
            else:  # second visit: left subtree finished, undo the thread
                pred.right = None
                s["threads_removed"] += 1
                self._cur = cur.right
                return cur.val
        raise StopIteration("MorrisBSTIterator exhausted")

    def close(self) -> None:
        """Finish the walk so that every thread is removed (O(n) in the worst case)."""
        while self.hasNext():
            self.next()

    def __iter__(self) -> "MorrisBSTIterator":
        return self

    def __next__(self) -> Any:
        return self.next()
