"""Verifiers for qa/coding/topological-sort.yaml (catalog code.topological-sort).

Oracles: Warshall's transitive closure for "is there a cycle" (``kata.oracle_has_cycle``), a direct check of an
order against every edge (``kata.problem_with``), and every directed graph on 3 nodes (self-loops included,
2^9 = 512 of them) as an exhaustive case beside the random ones.
"""

from __future__ import annotations

from itertools import product

import pytest
from hypothesis import given, settings

from impls.coding.topological_sort import find_order, topo_dfs
from verifiers.katas import topological_sort as kata


def all_graphs(n: int):
    pairs = [(a, b) for a in range(n) for b in range(n)]
    for mask in product((0, 1), repeat=len(pairs)):
        yield [[a, b] for (a, b), bit in zip(pairs, mask) if bit]


# --- topo-01 --------------------------------------------------------------------------


@pytest.mark.claim("coding.topo.kahn-iff-acyclic")
def test_kahn_outputs_every_node_iff_acyclic(evidence):
    for prop in kata.ALL:
        prop(find_order)
    cyclic = acyclic = 0
    for pre in all_graphs(3):
        order = find_order(3, pre)
        if kata.oracle_has_cycle(3, pre):
            cyclic += 1
            assert order == []
        else:
            acyclic += 1
            assert kata.problem_with(order, 3, pre) is None

    @settings(deadline=None)
    @given(kata.graphs())
    def check(case):
        n, pre = case
        order = find_order(n, pre)
        assert (len(order) == n) == (not kata.oracle_has_cycle(n, pre))

    check()
    assert acyclic == 25  # the labelled DAGs on 3 nodes
    evidence["three_node_graphs"] = {"acyclic": acyclic, "cyclic": cyclic}


# --- topo-02 --------------------------------------------------------------------------


@pytest.mark.claim("coding.topo.dfs-reverse-postorder")
def test_reverse_postorder_is_a_topological_order(evidence):
    checked = 0
    for pre in all_graphs(3):
        edges = [[b, a] for a, b in pre]  # [a, b] means b before a: the edge b -> a
        got = topo_dfs(3, edges)
        if kata.oracle_has_cycle(3, pre):
            assert got is None
        else:
            assert kata.problem_with(got, 3, pre) is None
            checked += 1

    @settings(deadline=None)
    @given(kata.graphs())
    def check(case):
        n, pre = case
        got = topo_dfs(n, [[b, a] for a, b in pre])
        assert (got is None) == kata.oracle_has_cycle(n, pre)
        if got is not None:
            assert kata.problem_with(got, n, pre) is None

    check()
    # the post-order itself (not reversed) is backwards: on the chain 0 -> 1 -> 2 it is [2, 1, 0]
    post = topo_dfs(3, [[0, 1], [1, 2]])[::-1]
    assert post == [2, 1, 0] and kata.problem_with(post, 3, [[1, 0], [2, 1]]) is not None
    evidence["dags_on_3_nodes_checked"] = checked
    evidence["post_order_unreversed_on_chain"] = post


# --- topo-03 --------------------------------------------------------------------------


def visited_only_has_cycle(n: int, edges) -> bool:
    """The claimed check: a DFS that reports a cycle whenever it reaches any node already visited."""
    succ = [[] for _ in range(n)]
    for u, v in edges:
        succ[u].append(v)
    visited: set[int] = set()

    def dfs(v):
        visited.add(v)
        for w in succ[v]:
            if w in visited or dfs(w):
                return True
        return False

    return any(dfs(s) for s in range(n) if s not in visited)


@pytest.mark.claim("coding.topo.visited-set-suffices")
def test_visited_set_alone_reports_false_cycles(evidence):
    diamond = [[0, 1], [0, 2], [1, 3], [2, 3]]  # edges u -> v
    assert visited_only_has_cycle(4, diamond) is True
    assert topo_dfs(4, diamond) is not None and not kata.oracle_has_cycle(4, [[v, u] for u, v in diamond])
    # it never misses a real cycle, it only adds false ones: over all graphs on 3 nodes
    false_alarms = 0
    for pre in all_graphs(3):
        edges = [[b, a] for a, b in pre]
        truth = kata.oracle_has_cycle(3, pre)
        claim = visited_only_has_cycle(3, edges)
        assert claim or not truth
        false_alarms += claim and not truth
    assert false_alarms > 0

    def find_order_visited_only(n, pre):
        edges = [[b, a] for a, b in pre]
        return [] if visited_only_has_cycle(n, edges) else topo_dfs(n, edges)

    with pytest.raises(AssertionError, match="no cycle, so an order exists"):
        kata.prop_reconverging_paths_are_not_cycles(find_order_visited_only)
    evidence["counterexample"] = {"edges": "0->1, 0->2, 1->3, 2->3 (a diamond)", "visited_set_says": "cycle",
                                  "truth": "acyclic: 0, 1, 2, 3"}
    evidence["false_cycles_among_3_node_dags"] = int(false_alarms)
