"""Kata properties for ``num_islands(grid) -> int`` (LeetCode 200): ``grid`` is a list of rows of ``"1"`` (land)
and ``"0"`` (water) strings; count the islands, the groups of land cells connected **horizontally or vertically**
(diagonal neighbours are not connected). The grid may be modified (you get a copy).

Oracle (``oracle_bfs``): a breadth-first search from every unvisited land cell, written here (a second
algorithm beside your search).

``prop_largest_grids`` runs LeetCode's largest grids, 300 x 300: a snake-shaped island whose path is about 45000
cells long, and a checkerboard of 45000 one-cell islands. This kata asks for an iterative search (an
explicit stack or a queue): Python's recursion limit stays at 1000 here, and ``sys.setrecursionlimit`` changes
nothing.
"""

from __future__ import annotations

from collections import deque

from hypothesis import given, settings
from hypothesis import strategies as st

RECURSION_LIMIT = 1000  # the judge keeps Python's limit here: this kata asks for an iterative search
BIG = 300


def oracle_bfs(grid: list[list[str]]) -> int:
    """Breadth-first search from every unvisited land cell, 4 directions."""
    m = len(grid)
    n = len(grid[0]) if m else 0
    seen: set[tuple[int, int]] = set()
    count = 0
    for i in range(m):
        for j in range(n):
            if grid[i][j] == "1" and (i, j) not in seen:
                count += 1
                seen.add((i, j))
                q = deque([(i, j)])
                while q:
                    r, c = q.popleft()
                    for a, b in ((r + 1, c), (r - 1, c), (r, c + 1), (r, c - 1)):
                        if 0 <= a < m and 0 <= b < n and grid[a][b] == "1" and (a, b) not in seen:
                            seen.add((a, b))
                            q.append((a, b))
    return count


def show(grid: list[list[str]]) -> str:
    return "[" + ", ".join('"' + "".join(row) + '"' for row in grid) + "]" if len(grid) <= 12 else f"{len(grid)} rows"


def _check(impl, grid: list[list[str]], want: int | None = None, name: str = "") -> None:
    want = oracle_bfs(grid) if want is None else want
    where = f"grid {name or show(grid)}"
    got = impl([list(row) for row in grid])
    assert type(got) is int, f"{where}: expected an int, got {type(got).__name__} {got!r}"
    assert got == want, f"{where}; expected: {want} islands; got: {got}"


def _rows(*rows: str) -> list[list[str]]:
    return [list(r) for r in rows]


def prop_leetcode_examples(impl) -> None:
    """LeetCode 200's examples (1 and 3 islands), one water cell, one land cell, a single row and column."""
    _check(impl, _rows("11110", "11010", "11000", "00000"), 1)
    _check(impl, _rows("11000", "11000", "00100", "00011"), 3)
    for grid, want in [(_rows("0"), 0), (_rows("1"), 1), (_rows("10101"), 3), (_rows("1", "1", "0", "1"), 2)]:
        _check(impl, grid, want)


def prop_diagonals_do_not_connect(impl) -> None:
    """Cells touching only at a corner are separate islands: a 2 x 2 diagonal is 2 islands, a 3 x 3 checkerboard 5."""
    for grid, want in [(_rows("10", "01"), 2), (_rows("101", "010", "101"), 5), (_rows("1001", "0110", "0110", "1001"), 5),
                       (_rows("100", "010", "001"), 3)]:
        _check(impl, grid, want)


def prop_borders_do_not_wrap(impl) -> None:
    """The grid's edges are edges: land in the first and last column (or row) is not joined through index -1."""
    for grid, want in [(_rows("101"), 2), (_rows("1", "0", "1"), 2), (_rows("1001", "0000", "1001"), 4),
                       (_rows("10", "00", "10"), 2)]:
        _check(impl, grid, want)


def prop_rings_and_lakes(impl) -> None:
    """A ring of land around a lake is one island; an island in the lake is another; a spiral is one."""
    for grid, want in [(_rows("111", "101", "111"), 1), (_rows("11111", "10001", "10101", "10001", "11111"), 2),
                       (_rows("11111", "00001", "11101", "10001", "11111"), 1)]:
        _check(impl, grid, want)


@st.composite
def grids(draw):
    m = draw(st.integers(1, 8))
    n = draw(st.integers(1, 8))
    density = draw(st.sampled_from([0.2, 0.5, 0.8]))
    cells = draw(st.lists(st.floats(0, 1, allow_nan=False), min_size=m * n, max_size=m * n))
    return [["1" if cells[i * n + j] < density else "0" for j in range(n)] for i in range(m)]


def prop_matches_bfs(impl) -> None:
    """Random grids up to 8 x 8 at land densities 0.2, 0.5, 0.8: the count of the BFS oracle."""

    @settings(deadline=None)
    @given(grids())
    def check(grid) -> None:
        _check(impl, grid)

    check()


def snake(n: int) -> list[list[str]]:
    """One island: land rows joined at alternating ends (rows 0, 2, 4, ... full; a single cell links them)."""
    g = [["0"] * n for _ in range(n)]
    for i in range(0, n, 2):
        g[i] = ["1"] * n
        if i + 1 < n:
            g[i + 1][n - 1 if (i // 2) % 2 == 0 else 0] = "1"
    return g


def prop_largest_grids(impl) -> None:
    """300 x 300 (LeetCode's largest): a snake-shaped island (a path of ~45000 cells: a recursive DFS overflows) and
    a checkerboard (45000 islands)."""
    _check(impl, snake(BIG), 1, name=f"{BIG} x {BIG} snake (one island, a path of {BIG * BIG // 2 + BIG // 2} cells)")
    board = [["1" if (i + j) % 2 == 0 else "0" for j in range(BIG)] for i in range(BIG)]
    _check(impl, board, BIG * BIG // 2, name=f"{BIG} x {BIG} checkerboard")


ALL = [prop_leetcode_examples, prop_diagonals_do_not_connect, prop_borders_do_not_wrap, prop_rings_and_lakes,
       prop_matches_bfs, prop_largest_grids]

ZH = {
    "doc": """LeetCode 200 的性质：`num_islands(grid) -> int`：`grid` 是由 `"1"`（陆地）和 `"0"`（水）字符串组成的行列表；
统计岛屿数，岛屿是**水平或竖直**相连的陆地格子（只在对角相邻的不相连）。可以修改 grid（你拿到的是副本）。

对照答案（`oracle_bfs`）：从每个未访问的陆地格子出发做广度优先搜索，写在这里（与你的搜索不同的第二种算法）。

`prop_largest_grids` 跑 LeetCode 最大的 300 x 300 网格：一条蛇形岛屿（路径约 45000 格），
以及 45000 个单格岛屿的棋盘。本题要求迭代式搜索（显式栈或队列）：这里 Python 的递归上限保持为 1000，
`sys.setrecursionlimit` 不起作用。""",
    "prop_leetcode_examples": "LeetCode 200 的示例（1 个和 3 个岛屿）、一个水格、一个陆地格、单行与单列。",
    "prop_diagonals_do_not_connect": "只在角上相接的格子是不同的岛屿：2 x 2 对角是 2 个岛屿，3 x 3 棋盘是 5 个。",
    "prop_borders_do_not_wrap": "网格的边就是边：第一列和最后一列（或行）的陆地不会通过下标 -1 连起来。",
    "prop_rings_and_lakes": "围着湖的一圈陆地是一个岛屿；湖中的岛是另一个；螺旋形是一个。",
    "prop_matches_bfs": "最大 8 x 8、陆地密度 0.2、0.5、0.8 的随机网格：数目与 BFS 对照答案一致。",
    "prop_largest_grids": "300 x 300（LeetCode 最大）：蛇形岛屿（路径约 45000 格：递归 DFS 会溢出）和棋盘（45000 个）。",
    "num_islands": "从每个未访问的 `\"1\"` 出发做迭代 DFS 来数岛屿（格子在入栈时标记为已访问）。",
}

__all__ = [p.__name__ for p in ALL] + ["ALL", "oracle_bfs", "snake"]
