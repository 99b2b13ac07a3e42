"""Kata properties for ``is_valid_bst(root) -> bool`` (LeetCode 98): ``root`` is a binary tree (``TreeNode`` with
``val``, ``left``, ``right``; ``None`` is the empty tree, which is valid). It is a valid BST when, at every node, every
key of the left subtree is smaller than the node's key and every key of the right subtree is larger -- strictly, so a
repeated key makes it invalid. Keys are 32-bit integers: -2147483648 and 2147483647 are valid keys.

Oracle (``oracle_definition``): the definition itself, node by node against every key of both subtrees (O(n^2), no
traversal order, no bounds). Trees are random shapes, BSTs built by insertion (valid), and BSTs with two keys
swapped (usually invalid, often deep down). The tree must be left as it was.

``prop_deep_trees`` uses LeetCode's largest input, 10000 nodes in a chain: a recursive solution needs a recursion
limit above 10000 (you may raise it); an iterative one does not.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from impls.coding.trees import TreeNode, bst_from_keys, chain, from_level_list, nodes_with_paths, snapshot
from verifiers.coding.strategies import bst_keys, describe, random_trees

INT_MIN, INT_MAX = -(2**31), 2**31 - 1
DEEP = 10_000


def _keys(node) -> list:
    out, stack = [], [node] if node is not None else []
    while stack:
        n = stack.pop()
        out.append(n.val)
        stack += [c for c in (n.left, n.right) if c is not None]
    return out


def oracle_definition(root) -> bool:
    """Every node: all keys of its left subtree < its key < all keys of its right subtree."""
    for node, _ in nodes_with_paths(root):
        if any(not k < node.val for k in _keys(node.left)) or any(not node.val < k for k in _keys(node.right)):
            return False
    return True


def _check(impl, root, want: bool | None = None, name: str | None = None) -> None:
    want = oracle_definition(root) if want is None else want
    before = snapshot(root)
    where = f"tree {name or describe(root)}"
    got = impl(root)
    assert type(got) is bool, f"{where}: expected True or False, got {type(got).__name__} {got!r}"
    assert got == want, f"{where}; expected: {want}; got: {got}"
    assert snapshot(root) == before, f"{where}: the tree's pointers changed"


def prop_leetcode_examples(impl) -> None:
    """LeetCode 98's examples ([2,1,3] valid, [5,1,4,null,null,3,6] not), the empty tree, one node."""
    for level, want in [([2, 1, 3], True), ([5, 1, 4, None, None, 3, 6], False), ([], True), ([1], True),
                        ([2, 1], True), ([2, None, 1], False)]:
        _check(impl, from_level_list(level), want)


def prop_whole_subtrees(impl) -> None:
    """A key deep in a subtree must respect every ancestor, not only its parent: [5,4,6,null,null,3,7] is invalid
    (3 is in 5's right subtree) although every node's children are on the correct side."""
    for level in ([5, 4, 6, None, None, 3, 7], [10, 5, 15, None, None, 6, 20], [3, 1, 5, 0, 4],
                  [8, 4, 12, 2, 9, 10, 14], [32, 26, 47, 19, None, None, 56, None, 27]):
        _check(impl, from_level_list(level), False)


def prop_repeated_keys_are_invalid(impl) -> None:
    """Strictly smaller and larger: [2,2,2], [1,1] and [1,null,1] are invalid."""
    for level in ([2, 2, 2], [1, 1], [1, None, 1], [5, 3, 7, None, 5], [5, 3, 7, None, None, 5]):
        _check(impl, from_level_list(level), False)


def prop_int32_extremes(impl) -> None:
    """Keys equal to INT_MIN and INT_MAX are valid keys (sentinels of -2^31 and 2^31-1 for "no bound" get them
    wrong): [2147483647], [-2147483648], [-2147483648,null,2147483647] are valid; [2147483647,2147483647] is not."""
    for level, want in [([INT_MAX], True), ([INT_MIN], True), ([INT_MIN, None, INT_MAX], True),
                        ([INT_MAX, INT_MAX], False), ([INT_MIN, None, INT_MIN], False), ([0, INT_MIN, INT_MAX], True)]:
        _check(impl, from_level_list(level), want)


@st.composite
def swapped_bsts(draw):
    keys = draw(bst_keys(max_nodes=30))
    root = bst_from_keys(keys)
    nodes = [n for n, _ in nodes_with_paths(root)]
    if len(nodes) >= 2:
        i = draw(st.integers(0, len(nodes) - 1))
        j = draw(st.integers(0, len(nodes) - 1))
        nodes[i].val, nodes[j].val = nodes[j].val, nodes[i].val
    return root


def prop_matches_definition(impl) -> None:
    """Random shapes with small repeated keys, BSTs built by insertion (ascending, descending, zigzag, random), and
    BSTs with two keys swapped: the answer of the definition checked node by node."""

    @settings(deadline=None)
    @given(st.one_of(random_trees(30), st.builds(bst_from_keys, bst_keys(max_nodes=30)), swapped_bsts()))
    def check(root) -> None:
        _check(impl, root)

    check()


def prop_deep_trees(impl) -> None:
    """10000 nodes (LeetCode's largest): an increasing right chain (valid), a decreasing left chain (valid), and the
    right chain with its deepest key lowered below the root's (invalid)."""
    right = chain(DEEP, "right")  # values 0, 1, 2, ... down the right spine
    _check(impl, right, True, name=f"right chain 0 -> 1 -> ... -> {DEEP - 1}")
    left = chain(DEEP, "left")  # values 0, 1, 2, ... down the left spine: relabel them decreasing
    node, v = left, DEEP
    while node is not None:
        node.val, node, v = v, node.left, v - 1
    _check(impl, left, True, name=f"left chain {DEEP} -> {DEEP - 1} -> ... -> 1")
    node = right
    while node.right is not None:
        node = node.right
    node.val = -1
    _check(impl, right, False, name=f"right chain 0 -> 1 -> ... -> {DEEP - 2} -> -1")


ALL = [prop_leetcode_examples, prop_whole_subtrees, prop_repeated_keys_are_invalid, prop_int32_extremes,
       prop_matches_definition, prop_deep_trees]

ZH = {
    "doc": """LeetCode 98 的性质：`is_valid_bst(root) -> bool`：`root` 是一棵二叉树（`TreeNode`，字段 `val`、`left`、`right`；
`None` 是空树，算有效）。有效的 BST 要求：在每个节点上，左子树的所有 key 都小于该节点的 key，右子树的所有 key
都大于它——严格小于/大于，所以重复的 key 使树无效。key 是 32 位整数：-2147483648 和 2147483647 都是合法的 key。

对照答案（`oracle_definition`）：直接按定义，把每个节点与两棵子树的全部 key 比较（O(n^2)，不依赖遍历顺序，也不用上下界）。
测试用的树有随机形状、按插入建成的 BST（有效）、以及交换了两个 key 的 BST（通常无效，且常在很深处）。不能修改树。

`prop_deep_trees` 使用 LeetCode 的最大输入：10000 个节点排成一条链：递归解法需要把递归上限调到 10000 以上（可以调）；
迭代解法不需要。""",
    "prop_leetcode_examples": "LeetCode 98 的示例（[2,1,3] 有效，[5,1,4,null,null,3,6] 无效）、空树、单个节点。",
    "prop_whole_subtrees": "子树深处的 key 必须满足所有祖先的约束，而不只是父节点：[5,4,6,null,null,3,7] 无效（3 在 5 的右子树中），尽管每个节点的孩子都在正确的一侧。",
    "prop_repeated_keys_are_invalid": "严格小于和大于：[2,2,2]、[1,1] 和 [1,null,1] 都无效。",
    "prop_int32_extremes": "等于 INT_MIN 和 INT_MAX 的 key 是合法的（用 -2^31 和 2^31-1 作为“无界”的哨兵会判错）：[2147483647]、[-2147483648]、[-2147483648,null,2147483647] 有效；[2147483647,2147483647] 无效。",
    "prop_matches_definition": "随机形状且 key 重复的小树、按插入建成的 BST（升序、降序、交错、随机），以及交换了两个 key 的 BST：结果与逐节点按定义检查的一致。",
    "prop_deep_trees": "10000 个节点（LeetCode 最大）：递增的右链（有效）、递减的左链（有效），以及把最深的 key 改成小于根的右链（无效）。",
    "is_valid_bst": "当且仅当中序序列严格递增时返回 True（迭代的中序遍历）。",
}

__all__ = [p.__name__ for p in ALL] + ["ALL", "oracle_definition"]
