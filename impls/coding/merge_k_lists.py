"""Merge k sorted linked lists into one sorted list (LeetCode 23); N nodes in total.

* ``merge_k_lists(lists)`` -- a min-heap of the current heads: pop the smallest, link it, push its successor.
  Each of the N nodes is pushed and popped once on a heap of at most k entries: O(N log k) time, O(k) extra
  memory, the nodes relinked in place. Heap entries are ``(val, i, node)``: ``i`` (the list the node came from)
  breaks ties between equal values, so tuples never compare two nodes (``ListNode`` has no ``<``).
* ``merge_k_divide(lists)`` -- merge the lists in pairs, round after round: log2(k) rounds of O(N) each.
* ``merge_k_sequential(lists)`` -- fold the lists into an accumulator one by one: the accumulator is re-walked
  every time, O(kN) for k lists of N/k nodes.
* ``merge_two(a, b)`` -- the classic two-list merge behind a dummy head (stable: ``a`` first on ties).
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from impls.coding.lists import ListNode

__all__ = ["ListNode", "merge_k_lists", "merge_k_divide", "merge_k_sequential", "merge_two"]


def merge_k_lists(lists: Sequence[ListNode | None]) -> ListNode | None:
    """Min-heap of ``(head.val, list index, head)``; pop, link, push the popped node's successor: O(N log k)."""
    heap = [(node.val, i, node) for i, node in enumerate(lists) if node is not None]
    heapq.heapify(heap)
    dummy = tail = ListNode()
    while heap:
        _, i, node = heapq.heappop(heap)
        tail.next = node
        tail = node
        if node.next is not None:
            heapq.heappush(heap, (node.next.val, i, node.next))
    tail.next = None
    return dummy.next


def merge_two(a: ListNode | None, b: ListNode | None) -> ListNode | None:
    """Merge two sorted lists by relinking; on equal values the node of ``a`` comes first."""
    dummy = tail = ListNode()
    while a is not None and b is not None:
        if b.val < a.val:
            tail.next, b = b, b.next
        else:
            tail.next, a = a, a.next
        tail = tail.next
    tail.next = a if a is not None else b
    return dummy.next


def merge_k_divide(lists: Sequence[ListNode | None]) -> ListNode | None:
    """Pairwise rounds: [l0+l1, l2+l3, ...] until one list is left; each round touches every node once."""
    work = list(lists)
    if not work:
        return None
    while len(work) > 1:
        work = [merge_two(work[i], work[i + 1]) if i + 1 < len(work) else work[i] for i in range(0, len(work), 2)]
    return work[0]


def merge_k_sequential(lists: Sequence[ListNode | None]) -> ListNode | None:
    """``acc = merge_two(acc, l)`` for each list in turn: O(kN) for k lists of equal length."""
    acc = None
    for head in lists:
        acc = merge_two(acc, head)
    return acc
