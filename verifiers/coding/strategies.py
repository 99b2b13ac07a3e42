"""Hypothesis strategies for binary trees and BSTs, plus the independent oracles.

Random shapes come from filling free child slots one node at a time (every shape
of n nodes is reachable and shrinking removes nodes); the explicit shapes cover
the cases interviewers ask about: left-only, right-only and zigzag chains, and
perfect trees.
"""

from __future__ import annotations

from hypothesis import strategies as st

from impls.coding.trees import TreeNode, balanced_bst, chain, nodes_with_paths, perfect

MAX_NODES = 60


@st.composite
def random_trees(draw, max_nodes: int = MAX_NODES) -> TreeNode | None:
    """Any binary tree shape with up to ``max_nodes`` nodes; values are small ints (repeats allowed)."""
    picks = draw(st.lists(st.integers(0, 10**6), max_size=max_nodes))
    values = draw(st.lists(st.integers(-5, 5), min_size=len(picks), max_size=len(picks)))
    if not picks:
        return None
    root = TreeNode(values[0])
    free = [(root, "left"), (root, "right")]
    for pick, val in zip(picks[1:], values[1:]):
        parent, side = free.pop(pick % len(free))
        child = TreeNode(val)
        setattr(parent, side, child)
        free += [(child, "left"), (child, "right")]
    return root


def chains(max_nodes: int = MAX_NODES):
    return st.builds(chain, st.integers(1, max_nodes), st.sampled_from(["left", "right", "zigzag"]))


def perfect_trees(max_height: int = 6):
    return st.builds(perfect, st.integers(0, max_height))


def binary_trees(max_nodes: int = MAX_NODES):
    """Random shapes, degenerate chains, perfect trees and the empty tree."""
    return st.one_of(st.none(), random_trees(max_nodes), chains(max_nodes), perfect_trees())


@st.composite
def bst_keys(draw, max_nodes: int = MAX_NODES) -> list[int]:
    """Distinct keys in an insertion order: random, ascending (right chain),
    descending (left chain), zigzag (min, max, min+1, max-1, ...)."""
    keys = draw(st.lists(st.integers(-1000, 1000), unique=True, max_size=max_nodes))
    order = draw(st.sampled_from(["random", "ascending", "descending", "zigzag"]))
    if order == "ascending":
        keys = sorted(keys)
    elif order == "descending":
        keys = sorted(keys, reverse=True)
    elif order == "zigzag":
        s = sorted(keys)
        keys = [s[i // 2] if i % 2 == 0 else s[-1 - i // 2] for i in range(len(s))]
    return keys


def balanced_bst_keys(max_nodes: int = MAX_NODES):
    return st.lists(st.integers(-1000, 1000), unique=True, max_size=max_nodes)


__all__ = [
    "random_trees",
    "chains",
    "perfect_trees",
    "binary_trees",
    "bst_keys",
    "balanced_bst_keys",
    "balanced_bst",
    "oracle_levels",
    "oracle_depths",
]


def oracle_levels(root: TreeNode | None) -> list[list]:
    """Level lists without a queue: label each node with its root path (``L``/``R``),
    sort by (depth, path) -- for equal lengths, ``L`` < ``R`` is left-to-right order --
    and cut the sorted list wherever the depth changes."""
    labelled = sorted(nodes_with_paths(root), key=lambda np: (len(np[1]), np[1]))
    levels: list[list] = []
    for node, path in labelled:
        if len(path) == len(levels):
            levels.append([])
        levels[len(path)].append(node.val)
    return levels


def oracle_depths(root: TreeNode | None) -> dict[int, int]:
    """``id(node) -> depth`` by walking parent pointers up to the root."""
    pairs = nodes_with_paths(root)
    parent: dict[int, TreeNode | None] = {id(root): None} if root is not None else {}
    for node, _ in pairs:
        for child in (node.left, node.right):
            if child is not None:
                parent[id(child)] = node
    depth = {}
    for node, _ in pairs:
        d, p = 0, parent[id(node)]
        while p is not None:
            d, p = d + 1, parent[id(p)]
        depth[id(node)] = d
    return depth


class CountingNode:
    """A tree node whose ``left``/``right`` reads are counted in a shared ``counter``.

    Lets a property measure the work an implementation does (pointer reads) without
    looking inside it. Writes are allowed (Morris threading) and counted separately.
    """

    __slots__ = ("val", "_left", "_right", "counter")

    def __init__(self, val, counter: dict):
        self.val = val
        self._left = None
        self._right = None
        self.counter = counter

    @property
    def left(self):
        self.counter["reads"] += 1
        return self._left

    @left.setter
    def left(self, node):
        self.counter["writes"] += 1
        self._left = node

    @property
    def right(self):
        self.counter["reads"] += 1
        return self._right

    @right.setter
    def right(self, node):
        self.counter["writes"] += 1
        self._right = node

    def __repr__(self) -> str:
        return f"CountingNode({self.val!r})"


def counting_copy(root: TreeNode | None) -> tuple["CountingNode | None", dict]:
    """Copy ``root`` into ``CountingNode``s; returns the copy and its counter (reset to 0)."""
    counter = {"reads": 0, "writes": 0}
    if root is None:
        return None, counter
    new_root = CountingNode(root.val, counter)
    stack = [(root, new_root)]
    while stack:
        old, new = stack.pop()
        for side in ("left", "right"):
            child = getattr(old, side)
            if child is not None:
                copy = CountingNode(child.val, counter)
                setattr(new, side, copy)
                stack.append((child, copy))
    counter["reads"] = counter["writes"] = 0
    return new_root, counter


def describe(root) -> list:
    """LeetCode-style level list of a (small) tree, for failure messages."""
    out, queue, i = [], [root], 0
    while i < len(queue):
        node = queue[i]
        i += 1
        if node is None:
            out.append(None)
            continue
        out.append(node.val)
        queue += [node._left, node._right] if isinstance(node, CountingNode) else [node.left, node.right]
    while out and out[-1] is None:
        out.pop()
    return out
