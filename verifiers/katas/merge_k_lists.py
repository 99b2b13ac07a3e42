"""Kata properties for ``merge_k_lists(lists) -> ListNode | None`` (LeetCode 23): ``lists`` holds the heads of k
sorted singly linked lists (``ListNode`` with ``val`` and ``next``; a head may be ``None``); return the head of one
sorted list holding all N nodes. Relinking the given nodes or building new ones are both accepted.

Oracle: ``sorted`` of all the values (a second algorithm beside the heap). Values repeat within and across
lists, and may be negative.

The nodes you receive are the judge's: Python cannot compare two of them (no ``<``), and a method added to your
own ``ListNode`` class does not reach them, so a heap entry ``(val, node)`` fails on equal values; break ties with
the list's index, ``(val, i, node)``. ``prop_n_log_k_comparisons`` gives nodes whose values are opaque keys
(``verifiers/katas/counted.py``): compare values with each other only; every comparison (a tuple comparison
makes two: ``==`` then ``<``) is answered and counted on the judge's side. k = 64 lists of 2: a heap or pairwise
merging stays under 3 N ceil(log2 k) + 2N; merging the lists one after another into an accumulator, or scanning
all k heads for each node, is O(kN) and fails. ``prop_scale``: 5000 lists of 2 within 3 s.
"""

from __future__ import annotations

import math
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from impls.coding.lists import ListNode, from_values
from verifiers.katas.counted import Tally

NODE_FIELDS = ("val", "next")
TIME_LIMITS = {"prop_scale": 3.0}
COUNT_K, COUNT_PER = 64, 2
SCALE_K, SCALE_PER = 5000, 2


def walk(head, limit: int, where: str) -> list:
    """The values of the returned list; an AssertionError if it is longer than ``limit`` (extra nodes or a cycle)."""
    out = []
    node = head
    while node is not None:
        out.append(node.val)
        if len(out) > limit:
            raise AssertionError(f"{where}: the returned list has more than {limit} nodes (a cycle, or nodes "
                                 "counted twice)")
        node = node.next
    return out


def _check(impl, values: list[list[int]], where: str | None = None) -> None:
    want = sorted(v for vs in values for v in vs)
    heads = [from_values(vs) for vs in values]
    where = where or f"lists {values}"
    got = walk(impl(heads), len(want), where)
    assert got == want, f"{where}; expected: {want}; got: {got}"


def prop_leetcode_examples(impl) -> None:
    """LeetCode 23's examples ([[1,4,5],[1,3,4],[2,6]], no lists, one empty list), one list, empty lists among others."""
    for values in ([[1, 4, 5], [1, 3, 4], [2, 6]], [], [[]], [[3, 8]], [[], [2], [], [1]], [[-5, 0], [-10, 7]]):
        _check(impl, values)


def prop_equal_values(impl) -> None:
    """Equal values at the heads of different lists (a heap of ``(val, node)`` compares two nodes there and fails)."""
    for values in ([[1], [1]], [[2, 2], [2]], [[1, 1, 1], [1, 1], [1]], [[0, 5], [0, 5], [0, 5]], [[-1], [-1, -1]]):
        _check(impl, values)


@st.composite
def sorted_lists(draw):
    k = draw(st.integers(0, 6))
    return [sorted(draw(st.lists(st.integers(-5, 5), max_size=6))) for _ in range(k)]


def prop_matches_sorted(impl) -> None:
    """Up to 6 lists of up to 6 values in -5..5 (empty lists, repeats): the values of ``sorted`` of them all."""

    @settings(deadline=None)
    @given(sorted_lists())
    def check(values) -> None:
        _check(impl, values)

    check()


def prop_n_log_k_comparisons(impl) -> None:
    """O(N log k) comparisons: 64 lists of 2 opaque keys (compared and counted on the judge's side), at most
    3 N ceil(log2 k) + 2N key comparisons and the right order."""
    rng = random.Random(23)
    values = [sorted(rng.randrange(200) for _ in range(COUNT_PER)) for _ in range(COUNT_K)]
    n = COUNT_K * COUNT_PER
    bound = 3 * n * math.ceil(math.log2(COUNT_K)) + 2 * n
    tally = Tally(limit=bound)
    heads = [from_values(tally.keys(vs)) for vs in values]
    where = f"{COUNT_K} sorted lists of {COUNT_PER} keys (N = {n})"
    got = tally.call(lambda: impl(heads), where,
                     what=f"key comparisons (the bound is 3 N ceil(log2 k) + 2N = {bound}; merging the lists one after "
                          f"another makes about kN/2 = {COUNT_K * n // 2})")
    keys = walk(got, n, where)
    assert all(type(k).__name__ == "Key" for k in keys), f"{where}: the returned nodes do not hold the given values"
    got_values = [k.value for k in keys]
    want = sorted(v for vs in values for v in vs)
    assert got_values == want, f"{where}; expected the {n} values in order; got {got_values[:12]}..."


def prop_scale(impl) -> None:
    """5000 lists of 2 (N = 10000) within 3 s: a heap takes a tenth of a second; merging one list after another,
    O(kN), a minute."""
    rng = random.Random(2)
    values = [sorted(rng.randrange(10**6) for _ in range(SCALE_PER)) for _ in range(SCALE_K)]
    _check(impl, values, where=f"{SCALE_K} random sorted lists of {SCALE_PER} (seed 2)")


ALL = [prop_leetcode_examples, prop_equal_values, prop_matches_sorted, prop_n_log_k_comparisons, prop_scale]

ZH = {
    "doc": """LeetCode 23 的性质：`merge_k_lists(lists) -> ListNode | None`：`lists` 是 k 个升序单链表的表头（`ListNode`，
字段 `val` 和 `next`；表头可以是 `None`）；返回包含全部 N 个节点的一条升序链表的表头。重新链接原有节点或新建节点都可以。

对照答案：对全部值 `sorted`（与堆不同的第二种算法）。值在同一链表内、不同链表之间都可能重复，也可能为负。

你拿到的节点属于评测端：两个节点之间不能比较（没有 `<`），给你自己的 `ListNode` 类加方法也作用不到它们，
所以堆里放 `(val, node)` 在值相等时会出错；用链表下标打破平局：`(val, i, node)`。`prop_n_log_k_comparisons`
给出的节点的值是不透明的键（`verifiers/katas/counted.py`）：只能在值之间比较；每次比较（元组比较算两次：先 `==` 再 `<`）
都在评测端回答并计数。k = 64 条、每条 2 个节点：堆或两两合并不超过 3 N ceil(log2 k) + 2N 次；
把链表逐条并入累加结果，或者每次扫描全部 k 个表头找最小值，是 O(kN)，不通过。`prop_scale`：5000 条、每条 2 个，限时 3 秒。""",
    "prop_leetcode_examples": "LeetCode 23 的示例（[[1,4,5],[1,3,4],[2,6]]、没有链表、一条空链表）、只有一条链表、混有空链表。",
    "prop_equal_values": "不同链表的表头值相等（堆里放 `(val, node)` 时会在这里比较两个节点而出错）。",
    "prop_matches_sorted": "最多 6 条、每条最多 6 个 -5..5 的值（空链表、重复值）：结果等于全部值 `sorted` 之后的序列。",
    "prop_n_log_k_comparisons": "O(N log k) 次比较：64 条、每条 2 个不透明键（在评测端比较并计数），键比较不超过 3 N ceil(log2 k) + 2N 次，且顺序正确。",
    "prop_scale": "5000 条、每条 2 个（N = 10000），限时 3 秒：堆只要零点一秒；逐条合并，O(kN)，要一分钟。",
    "merge_k_lists": "k 个表头组成的最小堆，元素为 `(head.val, 链表下标, head)`；弹出最小者、接到结果尾部、压入它的后继：O(N log k)。",
}

__all__ = [p.__name__ for p in ALL] + ["ALL", "walk"]
