"""LRU cache (LeetCode 146): ``get(key)`` and ``put(key, value)`` in O(1), evicting the least recently used key.

* ``LRUCache`` -- a dict from key to a node of a doubly linked list kept in recency order between two
  sentinels (``head.next`` is the least recently used node, ``tail.prev`` the most recent). ``get`` moves
  the node to the recent end; ``put`` of a known key updates its value *and* moves it there; ``put`` of a
  new key links a node at the recent end and, past the capacity, unlinks ``head.next`` and deletes its key
  from the dict. Every step is O(1): one dict operation and a constant number of pointer writes.
* ``OrderedDictLRU`` -- the same with ``collections.OrderedDict`` (``move_to_end``, ``popitem(last=False)``),
  whose C implementation keeps its own doubly linked list.
* ``PlainDictLRU`` -- the tempting three-liner over an insertion-ordered ``dict``: refresh by ``pop`` and
  re-insert, evict ``next(iter(d))``. Correct, but not O(1): deleted entries stay at the front of the dict's
  entry array until the next resize and ``next(iter(d))`` walks over all of them, so an eviction costs
  O(capacity) on average under churn.

A key is used only through ``hash`` and ``==``; ``get`` of a missing key returns -1 (LeetCode's convention).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

__all__ = ["LRUCache", "OrderedDictLRU", "PlainDictLRU"]


class _Node:
    __slots__ = ("key", "value", "prev", "next")

    def __init__(self, key: Any = None, value: Any = None):
        self.key = key
        self.value = value
        self.prev: _Node | None = None
        self.next: _Node | None = None


class LRUCache:
    """Hash map + doubly linked list; ``get`` and ``put`` are O(1).

    Recency order: ``head <-> least recent <-> ... <-> most recent <-> tail`` (two sentinels, so linking and
    unlinking never test for ``None``). ``len(self)`` is the number of keys held.
    """

    def __init__(self, capacity: int):
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        self.capacity = capacity
        self._map: dict[Any, _Node] = {}
        self._head = _Node()
        self._tail = _Node()
        self._head.next = self._tail
        self._tail.prev = self._head

    def _unlink(self, node: _Node) -> None:
        node.prev.next = node.next
        node.next.prev = node.prev

    def _push_recent(self, node: _Node) -> None:
        last = self._tail.prev
        last.next = node
        node.prev = last
        node.next = self._tail
        self._tail.prev = node

    def get(self, key: Any) -> Any:
        """The value of ``key`` (now the most recently used), or -1 if it is not held."""
        node = self._map.get(key)
        if node is None:
            return -1
        self._unlink(node)
        self._push_recent(node)
        return node.value

    def put(self, key: Any, value: Any) -> None:
        """Set ``key`` to ``value`` and make it the most recently used; past the capacity evict the least recent."""
        node = self._map.get(key)
        if node is not None:
            node.value = value
            self._unlink(node)
            self._push_recent(node)
            return
        node = _Node(key, value)
        self._map[key] = node
        self._push_recent(node)
        if len(self._map) > self.capacity:
            lru = self._head.next
            self._unlink(lru)
            del self._map[lru.key]

    def __len__(self) -> int:
        return len(self._map)


class OrderedDictLRU:
    """``OrderedDict`` keeps the recency order: ``move_to_end`` on every use, ``popitem(last=False)`` to evict."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self._d: OrderedDict = OrderedDict()

    def get(self, key: Any) -> Any:
        if key not in self._d:
            return -1
        self._d.move_to_end(key)
        return self._d[key]

    def put(self, key: Any, value: Any) -> None:
        if key in self._d:
            self._d.move_to_end(key)
        self._d[key] = value
        if len(self._d) > self.capacity:
            self._d.popitem(last=False)


class PlainDictLRU:
    """Insertion-ordered ``dict``: refresh = ``pop`` + re-insert, evict = ``next(iter(d))``. Right answers,
    O(capacity) evictions under churn (the deleted entries ahead of the first live one are walked each time)."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self._d: dict = {}

    def get(self, key: Any) -> Any:
        if key not in self._d:
            return -1
        value = self._d.pop(key)
        self._d[key] = value
        return value

    def put(self, key: Any, value: Any) -> None:
        self._d.pop(key, None)
        self._d[key] = value
        if len(self._d) > self.capacity:
            del self._d[next(iter(self._d))]
