"""Verifiers for qa/coding/lru-cache.yaml (catalog code.lru-cache).

Oracles: the kata's ``Model`` over ``collections.OrderedDict`` and, independent of it, a simulation from the
definition (``last_use``: every get or put of a key stamps it with the time; evict the smallest stamp).
Work is counted on opaque keys (hash and ``==`` calls, ``verifiers/katas/counted.py``); the plain-dict
variant's cost lies in C, so its skipped slots are counted exactly from CPython's dict header instead of timed.
"""

from __future__ import annotations

import ctypes
import sys

import pytest
from hypothesis import given, settings

from impls.coding.lru_cache import LRUCache, OrderedDictLRU, PlainDictLRU
from verifiers.katas import lru_cache as kata
from verifiers.katas.counted import Tally


class ByDefinition:
    """LRU from the definition: a dict of last-use times; on overflow evict the key used longest ago (O(n) scan)."""

    def __init__(self, capacity: int, put_refreshes: bool = True):
        self.capacity, self.put_refreshes = capacity, put_refreshes
        self.value: dict = {}
        self.last_use: dict = {}
        self.clock = 0

    def get(self, key):
        if key not in self.value:
            return -1
        self.clock += 1
        self.last_use[key] = self.clock
        return self.value[key]

    def put(self, key, value):
        self.clock += 1
        if key in self.value:
            self.value[key] = value
            if self.put_refreshes:
                self.last_use[key] = self.clock
            return
        self.value[key] = value
        self.last_use[key] = self.clock
        if len(self.value) > self.capacity:
            oldest = min(self.last_use, key=self.last_use.__getitem__)
            del self.value[oldest], self.last_use[oldest]


def _run(cls, capacity, calls):
    obj = cls(capacity)
    return [getattr(obj, m)(*a) for m, a in calls]


# --- lru-01 ---------------------------------------------------------------------------


@pytest.mark.claim("coding.lru.hashmap-and-list-constant")
def test_hash_map_and_linked_list_is_constant_per_call(evidence):
    for cls in (LRUCache, OrderedDictLRU):
        for prop in kata.ALL:
            prop(cls)

    @settings(deadline=None)
    @given(kata.call_lists())
    def check(case):
        capacity, calls = case
        assert _run(LRUCache, capacity, calls) == _run(ByDefinition, capacity, calls)

    check()
    rows = []
    for shared, bucket in (("none", lambda v: v), ("pairs", lambda v: v // 2)):
        for capacity in (8, 64, 512, 4096):
            for seed in range(3):  # the per-bucket hashes are random numbers: fixed seeds, so a run is reproducible
                ops = kata._workload(capacity)
                tally = Tally(bucket=bucket, seed=seed)
                cache = LRUCache(capacity)
                worst = 0
                for m, k, v in ops:
                    before = tally.total
                    getattr(cache, m)(*([tally.keys([k])[0]] + ([v] if m == "put" else [])))
                    worst = max(worst, tally.total - before)
                rows.append({"hash_shared_by": shared, "capacity": capacity, "seed": seed, "calls": len(ops),
                             "key_ops_per_call": round(tally.total / len(ops), 3), "most_in_one_call": worst})
    # distinct hashes: at most 3 dict operations per call (lookup, insert, delete of the evicted key), one hash
    # each; a hit compares once with the equal stored key (a different object) -- 3 at most, whatever the capacity
    distinct = [r for r in rows if r["hash_shared_by"] == "none"]
    assert max(r["most_in_one_call"] for r in distinct) == 3, distinct
    # two keys per hash value: a probe may meet the other key of its pair more than once (CPython's probe sequence
    # can revisit a slot before it finds an empty one), so one call has no fixed bound, but the mean stays flat
    paired = [r for r in rows if r["hash_shared_by"] == "pairs"]
    assert all(2 <= r["key_ops_per_call"] <= 3.5 for r in paired), paired
    evidence["key_operations"] = rows

    # the counting property can fail: a recency list of keys is O(capacity) per call
    class ListLRU:
        def __init__(self, capacity):
            self.capacity, self.d, self.order = capacity, {}, []

        def get(self, key):
            if key not in self.d:
                return -1
            self.order.remove(key)
            self.order.append(key)
            return self.d[key]

        def put(self, key, value):
            if key in self.d:
                self.order.remove(key)
            elif len(self.d) == self.capacity:
                del self.d[self.order.pop(0)]
            self.d[key] = value
            self.order.append(key)

    with pytest.raises(AssertionError, match="hashes and key comparisons"):
        kata.prop_constant_work(ListLRU)


# --- lru-02 ---------------------------------------------------------------------------


@pytest.mark.claim("coding.lru.get-refreshes")
def test_get_must_refresh(evidence):
    calls = [("put", [1, 1]), ("put", [2, 2]), ("get", [1]), ("put", [3, 3]), ("get", [1]), ("get", [2])]
    want = _run(ByDefinition, 2, calls)
    assert want[-2:] == [1, -1]  # 2 was the least recently used, not 1
    assert _run(LRUCache, 2, calls) == want

    class NoRefreshOnGet(OrderedDictLRU):
        def get(self, key):
            return self._d.get(key, -1)

    got = _run(NoRefreshOnGet, 2, calls)
    assert got[-2:] == [-1, 2]
    with pytest.raises(AssertionError, match="expected the last get to return"):
        kata.prop_get_refreshes(NoRefreshOnGet)
    evidence["counterexample"] = {"capacity": 2, "calls": "put(1,1) put(2,2) get(1) put(3,3) get(1) get(2)",
                                  "lru": want[-2:], "without_refresh_on_get": got[-2:]}


# --- lru-03 ---------------------------------------------------------------------------


@pytest.mark.claim("coding.lru.put-keeps-order")
def test_put_on_a_held_key_refreshes_it(evidence):
    calls = [("put", [1, 1]), ("put", [2, 2]), ("put", [1, 10]), ("put", [3, 3]), ("get", [1]), ("get", [2])]
    spec = _run(ByDefinition, 2, calls)
    claimed = _run(lambda c: ByDefinition(c, put_refreshes=False), 2, calls)
    assert spec[-2:] == [10, -1]  # LeetCode 146: the put made 1 recent, so 2 is evicted
    assert claimed[-2:] == [-1, 2]  # "put only updates the value": 1 is evicted, the update is lost
    assert _run(LRUCache, 2, calls) == _run(OrderedDictLRU, 2, calls) == spec

    class PutKeepsOrder(OrderedDictLRU):
        def put(self, key, value):
            self._d[key] = value  # assignment to a held key keeps its place in an OrderedDict
            if len(self._d) > self.capacity:
                self._d.popitem(last=False)

    assert _run(PutKeepsOrder, 2, calls) == claimed
    with pytest.raises(AssertionError, match="expected the last get to return"):
        kata.prop_put_refreshes(PutKeepsOrder)
    evidence["counterexample"] = {"capacity": 2, "calls": "put(1,1) put(2,2) put(1,10) put(3,3) get(1) get(2)",
                                  "put_refreshes (LeetCode 146)": spec[-2:], "put_keeps_order": claimed[-2:]}


# --- the three-line dict LRU ------------------------------------------------------------


def _dead_entries(d: dict) -> int:
    """Deleted slots still in ``d``'s entry array: ``dk_nentries − ma_used``, read from CPython's headers.

    CPython 3.11–3.13 (default build): ``PyDictObject`` = {refcnt, type, ma_used, version tag, ma_keys, …} and
    ``PyDictKeysObject`` = {refcnt, 3×uint8 + uint32, dk_usable, dk_nentries, …}: ma_used at byte 16, ma_keys at 32,
    dk_nentries at 24. ``_check_layout`` proves the offsets on dicts whose counts are known before anything trusts them.
    """
    used = ctypes.c_ssize_t.from_address(id(d) + 16).value
    keys = ctypes.c_void_p.from_address(id(d) + 32).value
    return ctypes.c_ssize_t.from_address(keys + 24).value - used


def _check_layout() -> None:
    d = {k: k for k in range(20)}
    assert _dead_entries(d) == 0, "dict header offsets do not match this CPython"
    del d[3], d[7]
    assert _dead_entries(d) == 2, "dict header offsets do not match this CPython"
    d[99] = 0  # an insert appends; it does not reuse a deleted slot
    assert _dead_entries(d) == 2, "dict header offsets do not match this CPython"


def _slots_skipped_per_eviction(capacity: int) -> list[int]:
    """Fill to ``capacity``, then ``2·capacity`` puts of new keys: for each, the deleted slots ``next(iter(d))``
    walked over before reaching the oldest key. Only new keys are put, so every deletion is the first live entry and
    the dead slots form a prefix; after the put they number the skipped ones plus the one just evicted."""
    cache = PlainDictLRU(capacity)
    for k in range(capacity):
        cache.put(k, k)
    skipped = []
    for k in range(capacity, 3 * capacity):
        cache.put(k, k)
        skipped.append(_dead_entries(cache._d) - 1)
    return skipped


@pytest.mark.claim("coding.lru.plain-dict-constant")
def test_plain_dict_eviction_grows_with_capacity(evidence):
    for prop in kata.ALL[:-2]:  # right answers: every correctness property passes
        prop(PlainDictLRU)
    kata.prop_constant_work(PlainDictLRU)  # and O(1) key operations: the counted keys do not see the cost
    if sys.implementation.name != "cpython" or not (3, 11) <= sys.version_info[:2] <= (3, 13):
        pytest.skip(f"dict header offsets known for CPython 3.11-3.13, not {sys.implementation.name} {sys.version}")
    _check_layout()
    small, large = 1_000, 30_000
    skipped = {c: _slots_skipped_per_eviction(c) for c in (small, large)}
    mean = {c: sum(v) / len(v) for c, v in skipped.items()}
    assert min(min(v) for v in skipped.values()) >= 0
    for c in (small, large):  # Θ(capacity) per eviction on average: not a constant
        assert c / 4 <= mean[c] <= 2 * c, (c, mean[c])
        assert max(skipped[c]) >= c, (c, max(skipped[c]))  # just before a compaction the prefix exceeds the capacity
    assert mean[large] / mean[small] > 10, mean

    class IterationCounted(dict):
        iterations = 0

        def __iter__(self):
            IterationCounted.iterations += 1
            return super().__iter__()

        def keys(self):
            IterationCounted.iterations += 1
            return super().keys()

    linked = LRUCache(small)
    linked._map = IterationCounted()
    for k in range(3 * small):  # the same churn: fill, then 2 x capacity evicting puts
        linked.put(k, k)
    assert len(linked) == small and linked.get(3 * small - 1) == 3 * small - 1 and linked.get(0) == -1
    assert IterationCounted.iterations == 0  # the hash map + list evicts the list's head, never walks the dict
    plain = PlainDictLRU(small)
    plain._d = IterationCounted()
    for k in range(small + 1):
        plain.put(k, k)
    assert IterationCounted.iterations == 1  # the control: the plain-dict LRU iterates once per eviction
    evidence.quote("mean skipped / capacity, capacity 1000", 0.70, mean[small] / small, digits=2)
    evidence.quote("mean skipped / capacity, capacity 30000", 0.65, mean[large] / large, digits=2)
    for c in (small, large):
        evidence.quote(f"mean slots skipped per eviction, capacity {c}", {small: 701, large: 19433}[c], mean[c], abs=0.5)
        evidence.quote(f"most slots skipped, capacity {c}", {small: 1634, large: 46309}[c], max(skipped[c]), abs=0)
