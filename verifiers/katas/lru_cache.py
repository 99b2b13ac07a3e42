"""Kata properties for ``LRUCache(capacity)`` with ``get(key)`` and ``put(key, value)`` (LeetCode 146).

``get`` returns the value, or -1 if the key is not held; ``get`` and ``put`` both make the key the most
recently used; ``put`` past the capacity evicts the least recently used key. Values can be any integer
(0 included). The oracle is a model over ``collections.OrderedDict`` written here (``Model``).

A sequence of calls is sent as one batch (``replay``): the calls run in order on your object.

How it is computed is judged too. ``prop_constant_work`` uses opaque keys (``verifiers/katas/counted.py``):
they can only be hashed and compared with ``==``, and each hash or comparison is answered and counted on
the judge's side. Use keys only as dict keys (or set members) and with ``==``: a hash map plus a doubly
linked list, or an ``OrderedDict``, makes a handful of them per call whatever the capacity; a list of keys
in recency order (``remove``, ``index``, ``in``) makes O(capacity) and fails, as does scanning the keys for
the oldest timestamp. Two keys share each hash value, so storing ``hash(key)`` in place of the key gives
wrong answers. ``prop_scale`` holds 20000 keys and makes 40000 more calls within 3 s: an O(1) cache needs a
fraction of a second; an eviction that scans the whole cache in Python (the oldest of a dict of timestamps,
a sort) needs minutes. Not seen by either: the three-line LRU over an insertion-ordered ``dict`` (evict
``next(iter(d))``) is right and touches O(1) keys per call, but each eviction walks, in C, over the entries
deleted since the dict's last resize -- O(capacity) on average (see the entry); only a much larger cache
would show it, at a cost the judge's one-second budget does not allow.
"""

from __future__ import annotations

from collections import OrderedDict

from hypothesis import given, settings
from hypothesis import strategies as st

from verifiers.katas.calls import replay
from verifiers.katas.counted import Tally

TIME_LIMITS = {"prop_scale": 3.0}
PER_CALL = 16  # hashes + key comparisons per get/put, on average (a dict + linked list: 2 to 8)
CAPACITIES = (8, 128)
SCALE_CAPACITY = 20_000


class Model:
    """The specification, over an OrderedDict: front = least recently used."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.d: OrderedDict = OrderedDict()

    def get(self, key):
        if key not in self.d:
            return -1
        self.d.move_to_end(key)
        return self.d[key]

    def put(self, key, value):
        if key in self.d:
            self.d.move_to_end(key)
        self.d[key] = value
        if len(self.d) > self.capacity:
            self.d.popitem(last=False)
        return None


def _show(calls) -> str:
    return ", ".join(f"{m}({', '.join(map(repr, a))})" for m, a in calls)


def expect(impl, capacity: int, calls: list, where: str = "") -> None:
    """Run ``calls`` on ``impl(capacity)`` and on the model; every ``get`` must agree."""
    model = Model(capacity)
    want = [getattr(model, m)(*a) for m, a in calls]
    got = replay(impl(capacity), calls)
    for i, ((m, a), w, g) in enumerate(zip(calls, want, got, strict=True)):
        if m == "get" and (type(g) is not int or g != w):
            raise AssertionError(
                f"{where}LRUCache({capacity}); calls: {_show(calls[:i + 1])}; expected the last get to return "
                f"{w}; got {g!r}")


def prop_leetcode_example(impl) -> None:
    """LeetCode 146's example: capacity 2, put 1, put 2, get 1, put 3 (evicts 2), get 2 = -1, put 4 (evicts 1) ..."""
    calls = [("put", [1, 1]), ("put", [2, 2]), ("get", [1]), ("put", [3, 3]), ("get", [2]), ("put", [4, 4]),
             ("get", [1]), ("get", [3]), ("get", [4])]
    expect(impl, 2, calls)


def prop_get_refreshes(impl) -> None:
    """``get`` makes its key the most recently used: capacity 2, put 1, put 2, get 1, put 3 must evict 2, not 1."""
    expect(impl, 2, [("put", [1, 1]), ("put", [2, 2]), ("get", [1]), ("put", [3, 3]), ("get", [1]), ("get", [2]),
                     ("get", [3])])


def prop_put_refreshes(impl) -> None:
    """``put`` on a held key updates its value and makes it the most recently used: capacity 2, put 1, put 2,
    put 1 again, put 3 must evict 2."""
    expect(impl, 2, [("put", [1, 1]), ("put", [2, 2]), ("put", [1, 10]), ("put", [3, 3]), ("get", [2]), ("get", [1]),
                     ("get", [3])])


def prop_update_does_not_evict(impl) -> None:
    """Updating a held key at full capacity evicts nothing; capacity 1 holds exactly one key; a value of 0 is a
    value (not "missing")."""
    expect(impl, 2, [("put", [1, 1]), ("put", [2, 2]), ("put", [2, 20]), ("get", [1]), ("get", [2])])
    expect(impl, 1, [("put", [1, 1]), ("get", [1]), ("put", [2, 2]), ("get", [1]), ("get", [2]), ("put", [2, 3]),
                     ("get", [2])])
    expect(impl, 2, [("put", [5, 0]), ("get", [5]), ("put", [6, -7]), ("get", [6]), ("get", [5])])


@st.composite
def call_lists(draw):
    capacity = draw(st.integers(1, 4))
    n = draw(st.integers(0, 30))
    calls = []
    for _ in range(n):
        key = draw(st.integers(0, 6))
        if draw(st.booleans()):
            calls.append(("get", [key]))
        else:
            calls.append(("put", [key, draw(st.integers(-3, 9))]))
    return capacity, calls


def prop_matches_ordered_dict(impl) -> None:
    """Any sequence of up to 30 gets and puts on keys 0..6, capacity 1 to 4: every get as the OrderedDict model."""

    @settings(deadline=None)
    @given(call_lists())
    def check(case) -> None:
        capacity, calls = case
        expect(impl, capacity, calls)

    check()


def _workload(capacity: int) -> list[tuple[str, int, int]]:
    """Fill to capacity, then 64 calls mixing hits, misses, updates and evictions (key values as ints)."""
    ops = [("put", k, k) for k in range(capacity)]
    nxt = capacity
    for i in range(64):
        r = i % 4
        if r == 0:
            ops.append(("get", (i * 7) % capacity + (nxt - capacity), 0))  # a hit (or a recent miss)
        elif r == 1:
            ops.append(("get", nxt + 1000, 0))  # a miss
        elif r == 2:
            ops.append(("put", nxt - 1, i))  # update the newest key
        else:
            ops.append(("put", nxt, i))  # a new key: evicts
            nxt += 1
    return ops


def prop_constant_work(impl) -> None:
    """O(1) per call on a growing cache: with opaque keys (hashed and compared on the judge's side), at most
    16 hashes and key comparisons per call on average at capacity 8 and at capacity 128, and the right answers."""
    rates = []
    for capacity in CAPACITIES:
        ops = _workload(capacity)
        tally = Tally(limit=PER_CALL * len(ops), bucket=lambda v: v // 2)  # two keys per hash value
        calls = [(m, [tally.keys([k])[0]] + ([v] if m == "put" else [])) for m, k, v in ops]
        model = Model(capacity)
        want = [getattr(model, m)(*([k] + ([v] if m == "put" else []))) for m, k, v in ops]
        cache = impl(capacity)
        where = f"capacity {capacity}, {len(ops)} calls (fill, then hits, misses, updates, evictions)"
        got = tally.call(lambda: replay(cache, calls), where,
                         what=f"hashes and key comparisons, {PER_CALL} per call on average (so far: "
                              + ("; ".join(rates) or "none") + "); a list of keys in recency order makes "
                              "O(capacity) per call")
        rates.append(f"capacity {capacity}: {tally.total / len(ops):.1f} per call")
        for i, ((m, k, v), w, g) in enumerate(zip(ops, want, got, strict=True)):
            if m == "get" and (type(g) is not int or g != w):
                raise AssertionError(f"{where}: call #{i + 1} get({k}) expected {w}; got {g!r} (keys {k} and "
                                     f"{k ^ 1} share a hash value: keep the key, not its hash)")


def prop_scale(impl) -> None:
    """20000 keys, then 40000 calls (evicting puts and gets) within 3 s: O(1) calls take a fraction of a second;
    an eviction that scans the cache in Python (the oldest of the timestamps, a sort) takes minutes."""
    cap = SCALE_CAPACITY
    calls = [("put", [k, k]) for k in range(cap)]
    for i in range(cap):
        calls.append(("put", [cap + i, i]))  # evicts key i
        calls.append(("get", [cap + i - (i % 3)]))  # a recent key: a hit, value i - i % 3
    got = replay(impl(cap), calls)
    assert len(got) == len(calls), f"capacity {cap}: {len(calls)} calls, {len(got)} results"
    for i in range(cap):
        g = got[cap + 2 * i + 1]
        if g != i - i % 3:
            raise AssertionError(f"capacity {cap}: after {cap} puts of keys 0..{cap - 1} and then puts of keys "
                                 f"{cap}..{cap + i}, get({cap + i - i % 3}) expected {i - i % 3}; got {g!r}")


ALL = [prop_leetcode_example, prop_get_refreshes, prop_put_refreshes, prop_update_does_not_evict,
       prop_matches_ordered_dict, prop_constant_work, prop_scale]

ZH = {
    "doc": """LeetCode 146 的性质：`LRUCache(capacity)`，方法 `get(key)` 和 `put(key, value)`。

`get` 返回值，key 不存在时返回 -1；`get` 和 `put` 都会让该 key 成为最近使用的；`put` 超出容量时淘汰最久未使用的
key。值可以是任意整数（包括 0）。对照答案是这里用 `collections.OrderedDict` 写的模型（`Model`）。

一串调用会作为一批发送（`replay`）：在你的对象上按顺序执行。

也检查实现方式。`prop_constant_work` 使用不透明的键（`verifiers/katas/counted.py`）：它们只能求哈希、只能用 `==`
比较，每次哈希或比较都在评测端回答并计数。只把键当作字典的键（或集合元素）、只用 `==` 比较：哈希表加双向链表，
或者 `OrderedDict`，每次调用只用几次，与容量无关；按最近使用顺序存放键的列表（`remove`、`index`、`in`）
每次要 O(容量) 次，不通过；扫描所有键找最早时间戳也一样。每两个键共用一个哈希值，所以存 `hash(key)`
代替 key 会得到错误答案。`prop_scale` 先放入 20000 个键，再做 40000 次调用，限时 3 秒：O(1) 的实现只要零点几秒；
每次淘汰都用 Python 扫一遍缓存（在时间戳字典里找最早的、排序）的实现要几分钟。两种检查都看不到的：
基于插入有序 `dict` 的三行 LRU（淘汰 `next(iter(d))`）答案正确、每次调用只碰 O(1) 个键，但每次淘汰都要在 C 层
越过自上次扩容以来删除的条目——平均 O(容量)（见条目）；只有大得多的缓存才能显出来，而评测一秒的预算不允许。""",
    "prop_leetcode_example": "LeetCode 146 的示例：容量 2，put 1、put 2、get 1、put 3（淘汰 2）、get 2 = -1、put 4（淘汰 1）……",
    "prop_get_refreshes": "`get` 让 key 成为最近使用的：容量 2，put 1、put 2、get 1 之后 put 3 必须淘汰 2，而不是 1。",
    "prop_put_refreshes": "对已有 key 的 `put` 更新值并让它成为最近使用的：容量 2，put 1、put 2、再 put 1、put 3 必须淘汰 2。",
    "prop_update_does_not_evict": "容量已满时更新已有 key 不淘汰任何 key；容量 1 恰好保存一个 key；值 0 是有效值（不是“不存在”）。",
    "prop_matches_ordered_dict": "在 key 0..6、容量 1 到 4 上的任意最多 30 次 get/put：每次 get 都与 OrderedDict 模型一致。",
    "prop_constant_work": "容量增长时每次调用仍是 O(1)：用不透明的键（在评测端求哈希和比较），容量 8 和 128 时平均每次调用的哈希与比较合计不超过 16 次，且答案正确。",
    "prop_scale": "放入 20000 个键后再做 40000 次调用（会淘汰的 put 和 get），限时 3 秒：O(1) 的调用只要零点几秒；每次淘汰都用 Python 扫一遍缓存（找最早的时间戳、排序）要几分钟。",
    "LRUCache": """哈希表 + 双向链表；`get` 和 `put` 都是 O(1)。

最近使用顺序：`head <-> 最久未使用 <-> ... <-> 最近使用 <-> tail`（两个哨兵节点，链接和断开时无需判断 None）。
`len(self)` 是当前保存的 key 数。""",
    "LRUCache.__init__": "容量 `capacity`（至少为 1）的空缓存。",
    "LRUCache.get": "返回 `key` 的值（它随即成为最近使用的），不存在时返回 -1。",
    "LRUCache.put": "把 `key` 设为 `value` 并让它成为最近使用的；超出容量时淘汰最久未使用的 key。",
}

__all__ = [p.__name__ for p in ALL] + ["ALL", "Model", "expect"]
