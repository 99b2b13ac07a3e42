"""Counted keys: values a kata hands to the code under test that can only be compared and hashed, every
comparison and hash counted where that code cannot reach the count.

Counting by reading a field (``x.val``) is defeated by caching: read each value once into a list of
plain ints and the rest of the work is invisible. A counted key has no value to read. The code under
test can only ask ``a < b``, ``a == b``, ``hash(a)`` ...; in the judge each of those is a request the
judge's side of the wire answers (``judge_remote.Session.serve_key``), so the count is kept in the
judge's process; in the verifiers the reference compares the same objects here. The comparison model
is exactly what "O(n log n) comparisons" means, so a count of comparisons is a count of the
algorithm's work in that model.

What it cannot see: work that touches no key (an O(n) scan over the candidate's own integers).
A property that must catch that as well gives the candidate plain data at scale under a time limit
(``TIME_LIMITS`` in the property module), a limit far above what a right answer needs.

``Tally(limit=...)`` counts; ``tally.keys(values)`` wraps plain values; ``tally.call(fn, where)`` runs
``fn()`` and fails the property (an ``AssertionError`` naming the count) once the count passes the
limit, whatever the code under test did with the exception it got instead of an answer.
``bucket``: how a value is hashed. Values in one bucket share a hash; the hash itself is a random
number per bucket (it says nothing about the value's order). ``bucket=lambda v: v // 2`` puts two
values in each bucket: a program that stores ``hash(key)`` in place of the key confuses the two and
answers wrongly (the property sees it), while a hash table still does O(1) comparisons per lookup.
"""

from __future__ import annotations

import operator
import random
from collections.abc import Callable, Iterable

from mianjing.quiz.judge_remote import KeyStop


class Tally:
    """The judge-side count of key operations: ``compares`` and ``hashes``."""

    def __init__(self, limit: int | None = None, bucket: Callable | None = None, seed: int | None = None):
        self.limit = limit
        self.bucket = bucket or (lambda v: v)
        self.compares = 0
        self.hashes = 0
        self.over = False
        self._hash_of: dict = {}
        self._rng = random.Random(seed)

    @property
    def total(self) -> int:
        return self.compares + self.hashes

    def tick(self, kind: str) -> None:
        if self.over:
            raise KeyStop(f"the judge stopped answering after {self.limit} key operations")
        if kind == "hash":
            self.hashes += 1
        else:
            self.compares += 1
        if self.limit is not None and self.total > self.limit:
            self.over = True
            raise KeyStop(f"the judge stopped answering after {self.limit} key operations")

    def hash_for(self, value) -> int:
        b = self.bucket(value)
        h = self._hash_of.get(b)
        if h is None:
            h = self._hash_of[b] = self._rng.getrandbits(60)
        return h

    def keys(self, values: Iterable) -> list["Key"]:
        return [Key(v, self) for v in values]

    def reset(self, limit: int | None = None) -> None:
        self.compares = self.hashes = 0
        self.over = False
        self.limit = limit

    def call(self, fn: Callable, where: str, what: str = "key operations"):
        """``fn()``; an AssertionError naming the count if it went past ``limit`` (even if ``fn`` caught the
        exception each operation over the limit raised and carried on)."""
        try:
            out = fn()
        except Exception:
            if self.over:
                raise AssertionError(f"{where}: more than {self.limit} {what}; the judge stopped counting "
                                     f"there") from None
            raise
        if self.over:
            raise AssertionError(f"{where}: more than {self.limit} {what}; the judge stopped counting there")
        return out


class Key:
    """A value that can only be compared with other keys of the same tally, and hashed; each time counted.

    ``__mianjing_key__`` tells the judge to keep it on its side (``{"k": id}`` on the wire)."""

    __mianjing_key__ = True
    __slots__ = ("_v", "_t")

    def __init__(self, value, tally: Tally):
        self._v = value
        self._t = tally

    @property
    def value(self):
        """The plain value, for the property (never sent)."""
        return self._v

    def _cmp(self, other, op):
        if type(other) is not Key or other._t is not self._t:
            return NotImplemented  # a key is compared only with keys of its own tally
        self._t.tick("compare")
        return op(self._v, other._v)

    def __eq__(self, other):
        return self._cmp(other, operator.eq)

    def __ne__(self, other):
        return self._cmp(other, operator.ne)

    def __lt__(self, other):
        return self._cmp(other, operator.lt)

    def __le__(self, other):
        return self._cmp(other, operator.le)

    def __gt__(self, other):
        return self._cmp(other, operator.gt)

    def __ge__(self, other):
        return self._cmp(other, operator.ge)

    def __hash__(self):
        self._t.tick("hash")
        return self._t.hash_for(self._v)

    def __repr__(self) -> str:
        return f"Key({self._v!r})"


__all__ = ["Key", "Tally", "KeyStop"]
