"""The kata properties can fail: a learner's wrong-but-plausible solution is caught, quickly.

These are tests of the judge (the properties a learner's code is held to), not evidence for a claim:
the claims are settled by measuring the reference implementation in ``verifiers/``.
"""

from __future__ import annotations

import time

import pytest

from verifiers.katas import bst_iterator as kata


class SearchFromRoot:
    """Finds each successor by searching from the root: correct order, O(h) per call and no stack,
    so Theta(n^2) pointer reads on a chain."""

    def __init__(self, root):
        self.root = root
        self.nxt = self._succ(None)

    def _succ(self, last):
        node, best = self.root, None
        while node is not None:
            if last is None or node.val > last:
                best, node = node, node.left
            else:
                node = node.right
        return best

    def hasNext(self):
        return self.nxt is not None

    def next(self):
        val = self.nxt.val
        self.nxt = self._succ(val)
        return val


def test_bst_kata_catches_a_quadratic_iterator_fast():
    kata.prop_ascending_order(SearchFromRoot)  # the order is right ...
    started = time.perf_counter()
    with pytest.raises(AssertionError, match="pointer reads"):  # ... the total work is not O(n)
        kata.prop_amortised_pushes(SearchFromRoot)
    assert time.perf_counter() - started < 10  # fails on the long chain, before any shrinking


class PreOrder:
    def __init__(self, root):
        self.stack = [root] if root else []

    def hasNext(self):
        return bool(self.stack)

    def next(self):
        node = self.stack.pop()
        self.stack += [c for c in (node.right, node.left) if c]
        return node.val


def test_bst_kata_catches_wrong_orders():
    """A pre-order iterator, and one that pushes the right child instead of its left spine, are caught."""
    from tests.broken import RightChildIterator

    for bad in (PreOrder, RightChildIterator):
        with pytest.raises(AssertionError, match="expected"):
            kata.prop_ascending_order(bad)
