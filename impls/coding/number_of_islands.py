"""Number of islands (LeetCode 200): count the 4-connected groups of ``"1"`` cells in a grid of ``"1"``/``"0"``.

* ``num_islands(grid)`` -- scan the cells; from each unvisited land cell run a search with an explicit stack,
  marking a cell visited when it is *pushed*, so every land cell enters the stack once: O(mn) time, O(mn) memory
  for the marks (the grid is not modified). No recursion: a snake-shaped island of 300 x 300 has a path of
  ~45000 cells, far past Python's recursion limit.
* ``num_islands_bfs(grid, mark="push" | "pop" | "pop-no-skip", stats)`` -- breadth-first, for measuring where
  the visited mark goes: on push (each cell queued once), on pop with a skip of cells already visited (up to 4
  entries per cell, still O(mn)), or on pop without the skip (cells expanded again and again).
* ``num_islands_recursive(grid)`` -- the recursive DFS (RecursionError on long islands at the default limit).
* ``num_islands_union_find(grid, stats)`` -- union-find with path compression and union by rank: unite each land
  cell with its land neighbours to the right and below; islands = land cells - successful unions.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

__all__ = ["num_islands", "num_islands_bfs", "num_islands_recursive", "num_islands_union_find"]

STEPS = ((1, 0), (-1, 0), (0, 1), (0, -1))  # 4-connectivity: no diagonals


def num_islands(grid: Sequence[Sequence[str]]) -> int:
    """Islands by an iterative DFS from every unvisited ``"1"`` (a cell is marked when pushed)."""
    m = len(grid)
    n = len(grid[0]) if m else 0
    seen = [[False] * n for _ in range(m)]
    count = 0
    for i in range(m):
        for j in range(n):
            if grid[i][j] != "1" or seen[i][j]:
                continue
            count += 1
            seen[i][j] = True
            stack = [(i, j)]
            while stack:
                r, c = stack.pop()
                for dr, dc in STEPS:
                    a, b = r + dr, c + dc
                    if 0 <= a < m and 0 <= b < n and grid[a][b] == "1" and not seen[a][b]:
                        seen[a][b] = True
                        stack.append((a, b))
    return count


def num_islands_bfs(grid: Sequence[Sequence[str]], mark: str = "push", stats: dict | None = None) -> int:
    """BFS version; ``mark`` says when a cell is marked visited. ``stats``: ``enqueued``, ``expanded``, ``max_queue``."""
    if mark not in ("push", "pop", "pop-no-skip"):
        raise ValueError(f"mark must be 'push', 'pop' or 'pop-no-skip', got {mark!r}")
    m = len(grid)
    n = len(grid[0]) if m else 0
    seen = [[False] * n for _ in range(m)]
    count = enqueued = expanded = max_queue = 0
    for i in range(m):
        for j in range(n):
            if grid[i][j] != "1" or seen[i][j]:
                continue
            count += 1
            queue = deque([(i, j)])
            enqueued += 1
            if mark == "push":
                seen[i][j] = True
            while queue:
                max_queue = max(max_queue, len(queue))
                r, c = queue.popleft()
                if mark == "pop":
                    if seen[r][c]:
                        continue
                    seen[r][c] = True
                elif mark == "pop-no-skip":
                    seen[r][c] = True
                expanded += 1
                for dr, dc in STEPS:
                    a, b = r + dr, c + dc
                    if 0 <= a < m and 0 <= b < n and grid[a][b] == "1" and not seen[a][b]:
                        if mark == "push":
                            seen[a][b] = True
                        queue.append((a, b))
                        enqueued += 1
    if stats is not None:
        stats.update(enqueued=enqueued, expanded=expanded, max_queue=max_queue)
    return count


def num_islands_recursive(grid: Sequence[Sequence[str]]) -> int:
    """The recursive DFS: one Python frame per cell on the current path."""
    m = len(grid)
    n = len(grid[0]) if m else 0
    seen = [[False] * n for _ in range(m)]

    def sink(r: int, c: int) -> None:
        seen[r][c] = True
        for dr, dc in STEPS:
            a, b = r + dr, c + dc
            if 0 <= a < m and 0 <= b < n and grid[a][b] == "1" and not seen[a][b]:
                sink(a, b)

    count = 0
    for i in range(m):
        for j in range(n):
            if grid[i][j] == "1" and not seen[i][j]:
                count += 1
                sink(i, j)
    return count


def num_islands_union_find(grid: Sequence[Sequence[str]], stats: dict | None = None) -> int:
    """Union-find over land cells (path compression, union by rank). ``stats``: ``finds``, ``parent_steps``
    (pointer steps taken by all finds), ``unions`` (successful ones)."""
    m = len(grid)
    n = len(grid[0]) if m else 0
    parent = list(range(m * n))
    rank = [0] * (m * n)
    finds = steps = unions = 0

    def find(x: int) -> int:
        nonlocal finds, steps
        finds += 1
        root = x
        while parent[root] != root:
            root = parent[root]
            steps += 1
        while parent[x] != root:  # path compression
            parent[x], x = root, parent[x]
        return root

    land = 0
    for i in range(m):
        for j in range(n):
            if grid[i][j] != "1":
                continue
            land += 1
            for a, b in ((i + 1, j), (i, j + 1)):
                if a < m and b < n and grid[a][b] == "1":
                    x, y = find(i * n + j), find(a * n + b)
                    if x != y:
                        if rank[x] < rank[y]:
                            x, y = y, x
                        parent[y] = x
                        if rank[x] == rank[y]:
                            rank[x] += 1
                        unions += 1
    if stats is not None:
        stats.update(finds=finds, parent_steps=steps, unions=unions, land=land)
    return land - unions


