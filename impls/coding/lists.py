"""Singly linked lists for the coding questions: LeetCode's ``ListNode(val, next)`` and conversions.

Everything here is iterative, so lists far longer than ``sys.getrecursionlimit()`` are fine.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


class ListNode:
    """A list node with LeetCode's field names ``val`` and ``next``."""

    __slots__ = ("val", "next")

    def __init__(self, val: Any = 0, next: "ListNode | None" = None):  # noqa: A002 -- LeetCode's name
        self.val = val
        self.next = next

    def __repr__(self) -> str:
        return f"ListNode({self.val!r})"


def from_values(values: Iterable[Any]) -> ListNode | None:
    """The list holding ``values`` in order (None for none)."""
    head = tail = None
    for v in values:
        node = ListNode(v)
        if tail is None:
            head = tail = node
        else:
            tail.next = node
            tail = node
    return head


def to_values(head: ListNode | None, limit: int | None = None) -> list[Any]:
    """The values from ``head`` on; with ``limit``, a ``ValueError`` after that many nodes (a cycle)."""
    out = []
    while head is not None:
        out.append(head.val)
        if limit is not None and len(out) > limit:
            raise ValueError(f"more than {limit} nodes: the list has a cycle or extra nodes")
        head = head.next
    return out
