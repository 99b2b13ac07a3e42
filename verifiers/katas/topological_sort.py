"""Kata properties for ``find_order(num_courses, prerequisites) -> list[int]`` (LeetCode 210): courses are
``0 .. num_courses - 1``; ``[a, b]`` in ``prerequisites`` means course ``b`` must be taken **before** course ``a``.
Return an order in which every course can be taken (any valid one), or ``[]`` if there is none (a cycle).

An order is checked directly: it holds every course once, and for every ``[a, b]``, ``b`` comes before ``a``. Whether
an order exists is decided by the oracle ``oracle_has_cycle``: reachability by Warshall's transitive closure (a
course that can reach itself lies on a cycle) -- no DFS, no in-degrees. Edges may repeat; a course may require
itself (a cycle of one).

``prop_scale`` gives 5000 courses and 20000 prerequisites (a long chain and a random DAG, and the DAG with one
edge closing a cycle) and 2 s: O(V + E) takes a few hundredths of a second; scanning every course for one whose
prerequisites are done, again and again, is O(V (V + E)) and takes most of a minute. A recursive DFS needs a
recursion limit above 5000 for the chain (you may raise it).
"""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

TIME_LIMITS = {"prop_scale": 2.0}
SCALE_V, SCALE_E = 5000, 20000


def oracle_has_cycle(n: int, prerequisites: list[list[int]]) -> bool:
    """Warshall's transitive closure over the edges b -> a: a cycle exists iff some node reaches itself."""
    reach = [[False] * n for _ in range(n)]
    for a, b in prerequisites:
        reach[b][a] = True
    for k in range(n):
        rk = reach[k]
        for i in range(n):
            if reach[i][k]:
                ri = reach[i]
                for j in range(n):
                    if rk[j]:
                        ri[j] = True
    return any(reach[i][i] for i in range(n))


def problem_with(order, n: int, prerequisites: list[list[int]]) -> str | None:
    """Why ``order`` is not a valid course order (None if it is)."""
    if not isinstance(order, (list, tuple)) or not all(type(v) is int for v in order):
        return f"expected a list of course numbers, got {order!r}"
    if sorted(order) != list(range(n)):
        return f"{order} does not take every course 0..{n - 1} exactly once"
    pos = {v: i for i, v in enumerate(order)}
    for a, b in prerequisites:
        if pos[b] > pos[a]:
            return f"{order} takes course {a} before its prerequisite {b} (from [{a}, {b}])"
    return None


def _check(impl, n: int, prerequisites: list[list[int]], name: str | None = None) -> None:
    where = f"num_courses={n}, prerequisites={name or prerequisites}"
    got = impl(n, [list(p) for p in prerequisites])
    if oracle_has_cycle(n, prerequisites):
        assert isinstance(got, (list, tuple)) and len(got) == 0, (
            f"{where}: the prerequisites contain a cycle; expected []; got {got!r}")
        return
    problem = problem_with(got, n, prerequisites)
    assert problem is None, f"{where}: no cycle, so an order exists; {problem}"


def prop_leetcode_examples(impl) -> None:
    """LeetCode 210's examples, one course, and two courses requiring each other."""
    for n, pre in [(2, [[1, 0]]), (4, [[1, 0], [2, 0], [3, 1], [3, 2]]), (1, []), (2, [[1, 0], [0, 1]]), (3, [])]:
        _check(impl, n, pre)


def prop_edge_direction(impl) -> None:
    """[a, b] means b first: with [[1, 0]] the only order is [0, 1]; with [[0, 1], [0, 2]], course 0 comes last."""
    for n, pre, want in [(2, [[1, 0]], [0, 1]), (3, [[2, 1], [1, 0]], [0, 1, 2]), (3, [[0, 1], [0, 2]], None)]:
        got = impl(n, [list(p) for p in pre])
        if want is not None:
            assert list(got) == want, f"num_courses={n}, prerequisites={pre}; expected: {want}; got: {got!r}"
        else:
            problem = problem_with(got, n, pre)
            assert problem is None, f"num_courses={n}, prerequisites={pre}: {problem}"


def prop_detects_every_cycle(impl) -> None:
    """A cycle anywhere gives []: a course requiring itself, two courses requiring each other, a cycle of 3 that
    course 0 does not reach, a cycle reached only through a long path, a cycle with courses hanging off it."""
    for n, pre in [(1, [[0, 0]]), (3, [[1, 0], [2, 2]]), (2, [[0, 1], [1, 0]]), (4, [[2, 1], [3, 2], [1, 3]]),
                   (6, [[1, 0], [2, 1], [3, 2], [4, 3], [5, 4], [3, 5]]), (5, [[1, 0], [2, 1], [0, 2], [3, 0], [4, 3]])]:
        _check(impl, n, pre)


def prop_reconverging_paths_are_not_cycles(impl) -> None:
    """Two paths to the same course are not a cycle: the diamond 0->1->3, 0->2->3 has orders, as has a course
    reached from several others (a DFS that treats every visited course as a cycle rejects them)."""
    for n, pre in [(4, [[1, 0], [2, 0], [3, 1], [3, 2]]), (4, [[3, 0], [3, 1], [3, 2]]),
                   (5, [[1, 0], [2, 0], [3, 0], [4, 1], [4, 2], [4, 3]]), (3, [[2, 0], [1, 0], [2, 1]])]:
        _check(impl, n, pre)


def prop_repeated_prerequisites(impl) -> None:
    """The same prerequisite listed twice changes nothing ([[1, 0], [1, 0]] is [0, 1]); in-degrees must count what
    the adjacency lists hold."""
    for n, pre in [(2, [[1, 0], [1, 0]]), (3, [[2, 0], [2, 0], [2, 1], [1, 0]]), (2, [[1, 0], [1, 0], [0, 1]])]:
        _check(impl, n, pre)


@st.composite
def graphs(draw):
    n = draw(st.integers(1, 7))
    m = draw(st.integers(0, 12))
    pre = [[draw(st.integers(0, n - 1)), draw(st.integers(0, n - 1))] for _ in range(m)]
    if draw(st.booleans()):  # half the time keep only edges from a lower to a higher number: acyclic
        pre = [[max(a, b), min(a, b)] for a, b in pre if a != b]
    return n, pre


def prop_matches_closure(impl) -> None:
    """Random graphs of up to 7 courses and 12 prerequisites (half of them acyclic by construction): [] exactly when
    the transitive closure has a cycle, otherwise a valid order."""

    @settings(deadline=None)
    @given(graphs())
    def check(case) -> None:
        _check(impl, *case)

    check()


def _dag(rng: random.Random, v: int, e: int) -> tuple[list[list[int]], list[int]]:
    """``e`` random prerequisites consistent with a random order ``perm`` of the ``v`` courses."""
    perm = list(range(v))
    rng.shuffle(perm)
    out = []
    for _ in range(e):
        i, j = sorted(rng.sample(range(v), 2))
        out.append([perm[j], perm[i]])  # perm[i] before perm[j]
    return out, perm


def prop_scale(impl) -> None:
    """5000 courses, 20000 prerequisites within 2 s: a chain of 5000, a random DAG, the same DAG plus one edge that
    closes a cycle. O(V + E) needs hundredths of a second, O(V (V + E)) most of a minute."""
    rng = random.Random(210)
    chain = [[i + 1, i] for i in range(SCALE_V - 1)]
    got = impl(SCALE_V, chain)
    assert list(got) == list(range(SCALE_V)), (
        f"a chain 0 -> 1 -> ... -> {SCALE_V - 1}: expected 0, 1, 2, ...; got {list(got)[:8]}...")
    dag, perm = _dag(rng, SCALE_V, SCALE_E)
    problem = problem_with(impl(SCALE_V, dag), SCALE_V, dag)
    assert problem is None, f"a random DAG of {SCALE_V} courses and {SCALE_E} prerequisites (seed 210): {problem[:300]}"
    # perm[0] -> perm[1] is made an edge, and perm[1] -> perm[0] closes a cycle of two in the middle of it all
    cyclic = dag + [[perm[1], perm[0]], [perm[0], perm[1]]]
    got = impl(SCALE_V, cyclic)
    assert isinstance(got, (list, tuple)) and len(got) == 0, (
        f"the random DAG plus [{perm[1]}, {perm[0]}] and [{perm[0]}, {perm[1]}] (a cycle of two): expected []; got a "
        f"list of {len(got)} courses")


ALL = [prop_leetcode_examples, prop_edge_direction, prop_detects_every_cycle, prop_reconverging_paths_are_not_cycles,
       prop_repeated_prerequisites, prop_matches_closure, prop_scale]

ZH = {
    "doc": """LeetCode 210 的性质：`find_order(num_courses, prerequisites) -> list[int]`：课程编号 `0 .. num_courses - 1`；
`prerequisites` 中的 `[a, b]` 表示必须**先**修 `b` 再修 `a`。返回一种能修完所有课程的顺序（任意合法顺序均可），
若不存在（有环）返回 `[]`。

顺序直接检查：每门课恰好出现一次，且对每个 `[a, b]`，`b` 都排在 `a` 之前。是否存在顺序由对照答案 `oracle_has_cycle`
决定：用 Warshall 传递闭包求可达性（能到达自己的课程在环上）——不用 DFS，也不用入度。先修关系可能重复；
一门课也可能以自己为先修（长度为 1 的环）。

`prop_scale` 给 5000 门课、20000 条先修关系（一条长链、一个随机 DAG、再加一条边成环的同一个 DAG），限时 2 秒：
O(V + E) 只要几十毫秒；一遍遍扫描所有课程找"先修都已完成"的课，是 O(V (V + E))，要将近一分钟。
递归 DFS 在这条链上需要把递归上限调到 5000 以上（可以调）。""",
    "prop_leetcode_examples": "LeetCode 210 的示例、只有一门课、两门课互为先修。",
    "prop_edge_direction": "[a, b] 表示先修 b：[[1, 0]] 的唯一顺序是 [0, 1]；[[0, 1], [0, 2]] 中课程 0 排在最后。",
    "prop_detects_every_cycle": "任何位置的环都返回 []：以自己为先修、两门课互为先修、课程 0 到达不了的三元环、要经过长路径才能到达的环、挂着其他课程的环。",
    "prop_reconverging_paths_are_not_cycles": "两条路径汇到同一门课不是环：菱形 0->1->3、0->2->3 有合法顺序，被多门课指向的课程也一样（把所有访问过的课程都当成环的 DFS 会拒绝它们）。",
    "prop_repeated_prerequisites": "同一先修关系出现两次不改变结果（[[1, 0], [1, 0]] 是 [0, 1]）；入度必须与邻接表里实际存放的边数一致。",
    "prop_matches_closure": "最多 7 门课、12 条先修关系的随机图（一半按构造无环）：当且仅当传递闭包有环时返回 []，否则返回合法顺序。",
    "prop_scale": "5000 门课、20000 条先修关系，限时 2 秒：长度 5000 的链、随机 DAG、同一个 DAG 加一条成环的边。O(V + E) 只要几十毫秒，O(V (V + E)) 要将近一分钟。",
    "find_order": "对每个 `[a, b]` 建边 `b -> a`，用 Kahn 算法：返回拓扑序，有环时返回 `[]`。",
}

__all__ = [p.__name__ for p in ALL] + ["ALL", "oracle_has_cycle", "problem_with"]
