"""Verifiers for qa/coding/merge-k-sorted-lists.yaml (catalog code.merge-k-lists).

Oracle: ``sorted`` of every value (a second algorithm beside the heap). Comparisons are counted on opaque keys
(``verifiers/katas/counted.py``), exactly as the kata counts them in the judge.
"""

from __future__ import annotations

import heapq
import math

import pytest
from hypothesis import given, settings

from impls.coding.lists import ListNode, from_values, to_values
from impls.coding.merge_k_lists import merge_k_divide, merge_k_lists, merge_k_sequential
from verifiers.katas import merge_k_lists as kata
from verifiers.katas.counted import Tally


def _interleaved(k: int, per: int) -> list[list[int]]:
    """List j holds j, j + k, j + 2k, ...: every merge has to interleave its inputs to the end."""
    return [[j + i * k for i in range(per)] for j in range(k)]


def _count(fn, values) -> int:
    tally = Tally()
    out = fn([from_values(tally.keys(vs)) for vs in values])
    assert [x.value for x in to_values(out)] == sorted(v for vs in values for v in vs)
    return tally.total


# --- mkl-01 ---------------------------------------------------------------------------


@pytest.mark.claim("coding.mergek.heap-n-log-k")
def test_heap_is_n_log_k(evidence):
    for prop in kata.ALL:
        prop(merge_k_lists)

    @settings(deadline=None)
    @given(kata.sorted_lists())
    def check(values):
        assert to_values(merge_k_lists([from_values(v) for v in values])) == sorted(x for v in values for x in v)

    check()
    n = 512
    rows = []
    for k in (2, 8, 32, 128, 512):
        c = _count(merge_k_lists, _interleaved(k, n // k))
        # a heap of k entries: about log2(k) tuple comparisons per push and per pop, each one == and one <
        assert c <= 4 * n * math.ceil(math.log2(k)) + 2 * n, (k, c)
        rows.append({"k": k, "N": n, "key_comparisons": c, "per_N_log2_k": round(c / (n * math.log2(k)), 2)})
    ratios = [r["per_N_log2_k"] for r in rows]
    assert max(ratios) < 4 and max(ratios) / min(ratios) < 4  # grows as N log k, not as N k
    evidence["heap_comparisons"] = rows


# --- mkl-02 ---------------------------------------------------------------------------


@pytest.mark.claim("coding.mergek.sequential-kn")
def test_sequential_is_kn_divide_is_n_log_k(evidence):
    for prop in kata.ALL:  # both are right (odd numbers of lists included), the heap aside
        prop(merge_k_divide)
    for prop in kata.ALL[:3]:
        prop(merge_k_sequential)
    rows = []
    for k, per in ((4, 64), (16, 16), (64, 4), (128, 2)):
        n = k * per
        values = _interleaved(k, per)
        seq = _count(merge_k_sequential, values)
        div = _count(merge_k_divide, values)
        # merging the accumulator of i lists with list i+1 walks both to the end: (i + 1) per - 1 comparisons
        exact = sum((i + 1) * per - 1 for i in range(1, k))
        assert seq == exact
        assert div <= n * math.ceil(math.log2(k))
        rows.append({"k": k, "per_list": per, "N": n, "sequential": seq, "kN/2": k * n // 2,
                     "divide_and_conquer": div, "N_log2_k": n * int(math.log2(k))})
    big = rows[-1]
    assert big["sequential"] > 8 * big["divide_and_conquer"]
    with pytest.raises(AssertionError, match="key comparisons"):
        kata.prop_n_log_k_comparisons(merge_k_sequential)
    kata.prop_n_log_k_comparisons(merge_k_divide)
    evidence["comparisons"] = rows


# --- mkl-03 ---------------------------------------------------------------------------


@pytest.mark.claim("coding.mergek.val-node-tuples-safe")
def test_val_node_tuples_fail_on_ties(evidence):
    def with_pairs(lists):
        heap = [(node.val, node) for node in lists if node is not None]
        heapq.heapify(heap)
        dummy = tail = ListNode()
        while heap:
            _, node = heapq.heappop(heap)
            tail.next = node
            tail = node
            if node.next is not None:
                heapq.heappush(heap, (node.next.val, node.next))
        return dummy.next

    assert to_values(with_pairs([from_values([1, 4]), from_values([2, 3])])) == [1, 2, 3, 4]  # distinct: fine
    with pytest.raises(TypeError, match="'<' not supported"):
        with_pairs([from_values([1]), from_values([1])])
    with pytest.raises(TypeError):  # the kata's property for ties fails it (in the judge: "raised TypeError")
        kata.prop_equal_values(with_pairs)
    evidence["counterexample"] = {"lists": [[1], [1]], "error": "TypeError: '<' not supported between instances of "
                                                                "'ListNode' and 'ListNode'"}
