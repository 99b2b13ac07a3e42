"""Mutants of impls/coding: the bugs people write in the BST-iterator and level-order rounds.

One mutant per line: Mutant(name, file, exact original snippet, replacement[, why=...][, equivalent=...]).
"""

from mianjing.mutation import Mutant as M

BST = "impls/coding/bst_iterator.py"
LO = "impls/coding/level_order.py"

MUTANTS = [
    M("bst.push-only-the-right-child", BST, "pushed = self._push_left_spine(node.right)", "pushed = 0\n        if node.right is not None:\n            self._stack.append(node.right)\n            pushed = 1", why="the right child alone instead of its left spine (tests/broken.py's RightChildIterator)"),
    M("bst.spine-of-left-child", BST, "pushed = self._push_left_spine(node.right)", "pushed = self._push_left_spine(node.left)"),
    M("bst.spine-stops-after-one", BST, "            pushed += 1\n            node = node.left", "            pushed += 1\n            node = None"),
    M("bst.has-next-off-by-one", BST, "        return bool(self._stack)", "        return len(self._stack) > 1"),
    M("bst.pushes-miscounted", BST, 's["pushes"] += pushed', 's["pushes"] += 1'),
    M("bst.max-stack-before-push", BST, 's["max_stack"] = max(s["max_stack"], len(self._stack))', 's["max_stack"] = max(s["max_stack"], len(self._stack) - pushed + 1)'),
    M("bst.last-call-pushes-not-recorded", BST, 'self.stats["last_call_pushes"] = pushed', 'self.stats["last_call_pushes"] = 1'),
    M("bst.no-stop-iteration", BST, '            raise StopIteration("BSTIterator exhausted")', '            return None'),
    M("flatten.reversed", BST, "            node = stack.pop()\n            keys.append(node.val)\n            node = node.right", "            node = stack.pop()\n            keys.insert(0, node.val)\n            node = node.right"),
    M("flatten.index-not-advanced", BST, "        self._i += 1\n        return self._keys[self._i - 1]", "        return self._keys[self._i]"),
    M("flatten.lazy-count", BST, 'self.stats = {"stored": len(keys)}', 'self.stats = {"stored": 0}'),
    M("morris.thread-never-removed", BST, "                pred.right = None\n", "                pass\n"),
    M("morris.skip-thread-follow", BST, "            while nxt is not None and nxt is not cur:", "            while nxt is not None and nxt is not cur and nxt.right is not None:"),
    M("morris.steps-undercounted", BST, "                pred, nxt = nxt, nxt.right\n                s[\"pointer_steps\"] += 1", "                pred, nxt = nxt, nxt.right"),
    M("morris.has-next-always", BST, "        return self._cur is not None", "        return True"),
    M("level-order.one-node-per-level", LO, "for _ in range(len(queue)):", "for _ in range(1):"),
    M("level-order.right-child-first", LO, "for child in (node.left, node.right):", "for child in (node.right, node.left):"),
    M("level-order.max-queue-after-pop", LO, "            max_queue = max(max_queue, len(queue))\n        levels.append(level)", "        max_queue = max(max_queue, len(queue))\n        levels.append(level)"),
    M("level-order.enqueues-miscounted", LO, "                    enqueues += 1", "                    enqueues += 0"),
    M("level-order.dfs-right-first", LO, "        if node.left is not None:\n            visit(node.left, depth + 1)\n        if node.right is not None:\n            visit(node.right, depth + 1)", "        if node.right is not None:\n            visit(node.right, depth + 1)\n        if node.left is not None:\n            visit(node.left, depth + 1)"),
    M("level-order.dfs-depth-off-by-one", LO, "max_depth = max(max_depth, depth + 1)", "max_depth = max(max_depth, depth)"),
    M("level-order.pairs-depth-from-one", LO, "for d, level in enumerate(level_order_with_depth(root))", "for d, level in enumerate(level_order_with_depth(root), 1)"),
]
