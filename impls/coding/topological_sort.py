"""Topological order of a directed graph, and detecting a cycle (LeetCode 207 / 210, course schedule).

LeetCode's convention: ``prerequisites[i] = [a, b]`` means course ``b`` comes before course ``a`` (an edge b -> a).

* ``find_order(num_courses, prerequisites)`` -- Kahn's algorithm: count in-degrees, queue every node of in-degree
  0, and repeatedly output one and lower the in-degree of its successors, queueing those that reach 0. It outputs
  all n nodes exactly when the graph has no cycle (a cycle's nodes never reach in-degree 0); then the list is a
  topological order, otherwise ``[]``. O(V + E). Parallel edges count twice in the in-degree and are removed twice.
* ``topo_dfs(n, edges)`` -- depth-first, iterative, three colours (white: unseen, grey: on the current path,
  black: finished): an edge into a grey node closes a cycle (``None``); otherwise the reverse of the finishing
  (post-)order is a topological order. An edge into a *black* node is not a cycle (a diamond a->b->d, a->c->d
  reaches d twice).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

__all__ = ["find_order", "topo_dfs"]


def find_order(num_courses: int, prerequisites: Sequence[Sequence[int]]) -> list[int]:
    """Kahn's algorithm on the edges ``b -> a`` for each ``[a, b]``: a topological order, or ``[]`` on a cycle."""
    succ: list[list[int]] = [[] for _ in range(num_courses)]
    indeg = [0] * num_courses
    for a, b in prerequisites:
        succ[b].append(a)
        indeg[a] += 1
    queue = deque(v for v in range(num_courses) if indeg[v] == 0)
    order: list[int] = []
    while queue:
        v = queue.popleft()
        order.append(v)
        for w in succ[v]:
            indeg[w] -= 1
            if indeg[w] == 0:
                queue.append(w)
    return order if len(order) == num_courses else []


def topo_dfs(n: int, edges: Sequence[Sequence[int]]) -> list[int] | None:
    """Reverse DFS post-order over edges ``u -> v`` (``edges`` as ``[u, v]``); ``None`` if a cycle exists.

    Iterative: the stack holds ``(node, index of the next successor to look at)``.
    """
    succ: list[list[int]] = [[] for _ in range(n)]
    for u, v in edges:
        succ[u].append(v)
    WHITE, GREY, BLACK = 0, 1, 2
    colour = [WHITE] * n
    post: list[int] = []
    for s in range(n):
        if colour[s] != WHITE:
            continue
        colour[s] = GREY
        stack = [(s, 0)]
        while stack:
            v, i = stack[-1]
            if i < len(succ[v]):
                stack[-1] = (v, i + 1)
                w = succ[v][i]
                if colour[w] == GREY:
                    return None  # an edge back into the current path: a cycle
                if colour[w] == WHITE:
                    colour[w] = GREY
                    stack.append((w, 0))
            else:
                stack.pop()
                colour[v] = BLACK
                post.append(v)
    return post[::-1]
