"""Kata properties for ``build_tree(preorder, inorder) -> TreeNode | None`` (LeetCode 105): the two traversals of a
binary tree with distinct values; build the tree (``TreeNode`` with ``val``, ``left``, ``right``; ``None`` for the
empty tree) and return its root. The tree is not a BST: values are in no particular order (negatives too).

Oracle: the tree the traversals were taken from, compared node by node (LeetCode's level list in messages).

``prop_linear_lookups`` gives values that are opaque keys (``verifiers/katas/counted.py``): they can be hashed and
compared with ``==``, each answered and counted on the judge's side. A dict from value to inorder index makes O(n)
such operations; searching the inorder list for every root (``inorder.index``) makes O(n^2) on a chain and fails.
``prop_largest_inputs`` builds chains of 3000 nodes (LeetCode's largest): a recursive solution needs a recursion
limit above 3000 (you may raise it).
"""

from __future__ import annotations

from hypothesis import given, settings

from impls.coding.trees import TreeNode, chain, nodes_with_paths
from verifiers.coding.strategies import binary_trees, describe
from verifiers.katas.counted import Tally

BIG = 3000
COUNTED = 256


def traversals(root) -> tuple[list, list]:
    """(preorder, inorder) of ``root``, iteratively."""
    pre, ino = [], []
    stack, node = [], root
    while stack or node is not None:
        while node is not None:
            pre.append(node.val)
            stack.append(node)
            node = node.left
        node = stack.pop()
        ino.append(node.val)
        node = node.right
    return pre, ino


def shape(root) -> list:
    """The tree as LeetCode's level list (values and the positions of missing children)."""
    return describe(root)


def same_tree(a, b) -> bool:
    stack = [(a, b)]
    while stack:
        x, y = stack.pop()
        if x is None or y is None:
            if x is not y and not (x is None and y is None):
                return False
            continue
        if x.val != y.val:
            return False
        stack += [(x.left, y.left), (x.right, y.right)]
    return True


def _check(impl, root, name: str | None = None) -> None:
    pre, ino = traversals(root)
    where = f"preorder {pre}, inorder {ino}" if len(pre) <= 30 else (name or f"{len(pre)} nodes")
    got = impl(list(pre), list(ino))
    if not same_tree(got, root):
        want = shape(root) if len(pre) <= 30 else f"{len(pre)} nodes"
        built = shape(got) if len(pre) <= 30 else "a different tree"
        raise AssertionError(f"{where}; expected the tree {want}; got {built}")


def _relabel(root, start: int = -7):
    """Distinct values in a scrambled order (not a BST): node k of a pre-order walk gets (start + 37k) mod 101 - 50."""
    for k, (node, _) in enumerate(nodes_with_paths(root)):
        node.val = (start + 37 * k) % 101 - 50 if k < 101 else 1000 + k
    return root


def prop_leetcode_examples(impl) -> None:
    """LeetCode 105's examples ([3,9,20,15,7] / [9,3,15,20,7]; [-1] / [-1]) and the empty tree."""
    from impls.coding.trees import from_level_list

    for level in ([3, 9, 20, None, None, 15, 7], [-1], [], [1, 2], [1, None, 2], [1, 2, 3, 4, None, None, 5]):
        _check(impl, from_level_list(level))


def prop_round_trip(impl) -> None:
    """Any shape (random, chains, perfect) with distinct values in no particular order: the traversals rebuild it."""

    @settings(deadline=None)
    @given(binary_trees(max_nodes=40))
    def check(root) -> None:
        _check(impl, _relabel(root))

    check()


def prop_linear_lookups(impl) -> None:
    """O(n) value lookups: 256 nodes in a left chain, a right chain and a zigzag, values opaque keys: at most
    8n + 16 hashes and key comparisons (a dict from value to inorder index; not ``inorder.index``)."""
    for kind in ("left", "right", "zigzag"):
        root = _relabel(chain(COUNTED, kind))
        pre, ino = traversals(root)
        bound = 8 * COUNTED + 16
        tally = Tally(limit=bound)
        keys = {v: k for v, k in zip(pre, tally.keys(pre))}
        where = f"a {kind} chain of {COUNTED} nodes"
        got = tally.call(lambda: impl([keys[v] for v in pre], [keys[v] for v in ino]), where,
                         what=f"hashes and key comparisons (the bound is 8n + 16 = {bound}; searching the inorder "
                              f"list for each root makes about n^2/2 = {COUNTED * COUNTED // 2})")
        plain = _unkey(got)
        assert same_tree(plain, root), f"{where}: the tree built is not the one the traversals came from"


def _unkey(root):
    """A copy of the returned tree with each key replaced by its plain value (checking that the keys were used)."""
    if root is None:
        return None
    out = TreeNode(None)
    stack = [(root, out)]
    while stack:
        src, dst = stack.pop()
        v = src.val
        assert type(v).__name__ == "Key", "the tree built does not hold the given values"
        dst.val = v.value
        for side in ("left", "right"):
            child = getattr(src, side)
            if child is not None:
                copy = TreeNode(None)
                setattr(dst, side, copy)
                stack.append((child, copy))
    return out


def prop_largest_inputs(impl) -> None:
    """3000 nodes (LeetCode's largest) as a left chain, a right chain and a zigzag."""
    for kind in ("left", "right", "zigzag"):
        _check(impl, _relabel(chain(BIG, kind)), name=f"a {kind} chain of {BIG} nodes")


ALL = [prop_leetcode_examples, prop_round_trip, prop_linear_lookups, prop_largest_inputs]

ZH = {
    "doc": """LeetCode 105 的性质：`build_tree(preorder, inorder) -> TreeNode | None`：给出一棵值互不相同的二叉树的前序和中序遍历；
构造这棵树（`TreeNode`，字段 `val`、`left`、`right`；空树为 `None`）并返回根。它不是 BST：值没有特定顺序（也有负数）。

对照答案：取遍历序列的那棵原树，逐节点比较（错误信息里用 LeetCode 的层序列表表示）。

`prop_linear_lookups` 给出的值是不透明的键（`verifiers/katas/counted.py`）：只能求哈希、只能用 `==` 比较，每次都在评测端
回答并计数。用字典把值映射到中序下标是 O(n) 次这样的操作；每个根都在中序列表里查找（`inorder.index`）在链上是 O(n^2)，
不通过。`prop_largest_inputs` 构造 3000 个节点的链（LeetCode 的最大输入）：递归解法需要把递归上限调到 3000 以上（可以调）。""",
    "prop_leetcode_examples": "LeetCode 105 的示例（[3,9,20,15,7] / [9,3,15,20,7]；[-1] / [-1]）以及空树。",
    "prop_round_trip": "任意形状（随机、链、满二叉树），值互不相同且无特定顺序：由遍历序列重建出原树。",
    "prop_linear_lookups": "O(n) 次查找：256 个节点的左链、右链和之字形链，值为不透明的键：哈希与比较合计不超过 8n + 16 次（用值到中序下标的字典，不要用 `inorder.index`）。",
    "prop_largest_inputs": "3000 个节点（LeetCode 最大）的左链、右链和之字形链。",
    "build_tree": "O(n)：`where[v]` 是 v 在 `inorder` 中的下标；每个待建子树记为 (前序起点, 中序下界, 中序上界, 父节点, 方向)。",
}

__all__ = [p.__name__ for p in ALL] + ["ALL", "traversals", "same_tree"]
