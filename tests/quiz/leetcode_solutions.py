"""Candidate files for the LeetCode katas: a correct one per kata (``OK``), and the wrong or shortcut answers people
write (``WRONG``), each with the property that rejects it. Judged through the real judge by
tests/quiz/test_leetcode_katas.py; ``OK`` also feeds benchmarks/quiz_startup.py (judge time per kata).
"""

from __future__ import annotations

OK = {
    "length_of_lis": '''
from bisect import bisect_left


def length_of_lis(nums):
    tails = []
    for x in nums:
        i = bisect_left(tails, x)
        if i == len(tails):
            tails.append(x)
        else:
            tails[i] = x
    return len(tails)
''',
    "LRUCache": '''
class Node:
    __slots__ = ("key", "value", "prev", "next")

    def __init__(self, key=None, value=None):
        self.key, self.value, self.prev, self.next = key, value, None, None


class LRUCache:
    def __init__(self, capacity):
        self.capacity = capacity
        self.map = {}
        self.head, self.tail = Node(), Node()
        self.head.next, self.tail.prev = self.tail, self.head

    def _unlink(self, n):
        n.prev.next, n.next.prev = n.next, n.prev

    def _push(self, n):
        last = self.tail.prev
        last.next, n.prev, n.next, self.tail.prev = n, last, self.tail, n

    def get(self, key):
        n = self.map.get(key)
        if n is None:
            return -1
        self._unlink(n)
        self._push(n)
        return n.value

    def put(self, key, value):
        n = self.map.get(key)
        if n is not None:
            n.value = value
            self._unlink(n)
            self._push(n)
            return
        n = Node(key, value)
        self.map[key] = n
        self._push(n)
        if len(self.map) > self.capacity:
            old = self.head.next
            self._unlink(old)
            del self.map[old.key]
''',
    "trap": '''
def trap(height):
    l, r = 0, len(height) - 1
    lmax = rmax = total = 0
    while l < r:
        if height[l] < height[r]:
            lmax = max(lmax, height[l])
            total += lmax - height[l]
            l += 1
        else:
            rmax = max(rmax, height[r])
            total += rmax - height[r]
            r -= 1
    return total
''',
    "merge": '''
def merge(intervals):
    out = []
    for s, e in sorted(intervals, key=lambda iv: iv[0]):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out
''',
    "merge_k_lists": '''
import heapq


class ListNode:
    def __init__(self, val=0, next=None):
        self.val = val
        self.next = next


def merge_k_lists(lists):
    heap = [(node.val, i, node) for i, node in enumerate(lists) if node]
    heapq.heapify(heap)
    dummy = tail = ListNode()
    while heap:
        _, i, node = heapq.heappop(heap)
        tail.next = node
        tail = node
        if node.next:
            heapq.heappush(heap, (node.next.val, i, node.next))
    tail.next = None
    return dummy.next
''',
    "num_islands": '''
from collections import deque


def num_islands(grid):
    m, n = len(grid), len(grid[0]) if grid else 0
    count = 0
    for i in range(m):
        for j in range(n):
            if grid[i][j] != "1":
                continue
            count += 1
            grid[i][j] = "0"
            q = deque([(i, j)])
            while q:
                r, c = q.popleft()
                for a, b in ((r + 1, c), (r - 1, c), (r, c + 1), (r, c - 1)):
                    if 0 <= a < m and 0 <= b < n and grid[a][b] == "1":
                        grid[a][b] = "0"
                        q.append((a, b))
    return count
''',
    "find_order": '''
from collections import deque


def find_order(num_courses, prerequisites):
    succ = [[] for _ in range(num_courses)]
    indeg = [0] * num_courses
    for a, b in prerequisites:
        succ[b].append(a)
        indeg[a] += 1
    q = deque(v for v in range(num_courses) if indeg[v] == 0)
    order = []
    while q:
        v = q.popleft()
        order.append(v)
        for w in succ[v]:
            indeg[w] -= 1
            if indeg[w] == 0:
                q.append(w)
    return order if len(order) == num_courses else []
''',
    "is_valid_bst": '''
def is_valid_bst(root):
    stack, node, prev, seen = [], root, None, False
    while stack or node:
        while node:
            stack.append(node)
            node = node.left
        node = stack.pop()
        if seen and not prev < node.val:
            return False
        prev, seen = node.val, True
        node = node.right
    return True
''',
    "build_tree": '''
class TreeNode:
    def __init__(self, val=0, left=None, right=None):
        self.val, self.left, self.right = val, left, right


def build_tree(preorder, inorder):
    where = {v: i for i, v in enumerate(inorder)}
    root = None
    work = [(0, 0, len(inorder), None, "")]
    while work:
        p, lo, hi, parent, side = work.pop()
        if lo >= hi:
            continue
        node = TreeNode(preorder[p])
        if parent is None:
            root = node
        else:
            setattr(parent, side, node)
        k = where[preorder[p]]
        work.append((p + 1 + k - lo, k + 1, hi, node, "right"))
        work.append((p + 1, lo, k, node, "left"))
    return root
''',
}

_LRU_OD = '''
from collections import OrderedDict


class LRUCache:
    def __init__(self, capacity):
        self.capacity, self.d = capacity, OrderedDict()

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
'''

_TS = '''
class LRUCache:
    def __init__(self, capacity):
        self.capacity, self.d, self.t, self.clock = capacity, {}, {}, 0

    def get(self, key):
        if key not in self.d:
            return -1
        self.clock += 1
        self.t[key] = self.clock
        return self.d[key]

    def put(self, key, value):
        self.clock += 1
        if key not in self.d and len(self.d) == self.capacity:
            old = OLDEST
            del self.d[old], self.t[old]
        self.d[key] = value
        self.t[key] = self.clock
'''

_TRAP_PREFIX = '''
def trap(height):
    n = len(height)
    if n == 0:
        return 0
    left, right = [0] * n, [0] * n
    left[0], right[-1] = height[0], height[-1]
    for i in range(1, n):
        left[i] = max(left[i - 1], height[i])
    for i in range(n - 2, -1, -1):
        right[i] = max(right[i + 1], height[i])
    total = sum(min(left[i], right[i]) - height[i] for i in range(n))
    RESET
    return total
'''

_MERGE_SEQ = '''
class ListNode:
    def __init__(self, val=0, next=None):
        self.val, self.next = val, next


def two(a, b):
    d = t = ListNode()
    while a and b:
        if a.val <= b.val:
            t.next, a = a, a.next
        else:
            t.next, b = b, b.next
        t = t.next
    t.next = a or b
    return d.next


def merge_k_lists(lists):
    acc = None
    for head in lists:
        acc = two(acc, head)
    return acc
'''

_ISL = '''
def num_islands(grid):
    m, n = len(grid), len(grid[0]) if grid else 0
    count = 0
    for i in range(m):
        for j in range(n):
            if grid[i][j] != "1":
                continue
            count += 1
            grid[i][j] = "0"
            stack = [(i, j)]
            while stack:
                r, c = stack.pop()
                for a, b in STEPS:
                    if INBOUNDS and grid[a][b] == "1":
                        grid[a][b] = "0"
                        stack.append((a, b))
    return count
'''
_FOUR = "((r + 1, c), (r - 1, c), (r, c + 1), (r, c - 1))"
_EIGHT = "[(r + dr, c + dc) for dr in (-1, 0, 1) for dc in (-1, 0, 1) if dr or dc]"

_KAHN = OK["find_order"]

_VBST_REC = '''
import sys
LIMIT


def is_valid_bst(root, lo=LOW, hi=HIGH):
    if root is None:
        return True
    if not lo CMP root.val CMP hi:
        return False
    return is_valid_bst(root.left, lo, root.val) and is_valid_bst(root.right, root.val, hi)
'''

_BT_REC = '''
import sys
LIMIT


class TreeNode:
    def __init__(self, val=0, left=None, right=None):
        self.val, self.left, self.right = val, left, right


def build_tree(preorder, inorder):
    if not preorder:
        return None
    root = TreeNode(preorder[0])
    k = FIND
    root.left = build_tree(preorder[1:k + 1], inorder[:k])
    root.right = build_tree(preorder[k + 1:], inorder[k + 1:])
    return root
'''

# (id, kata, code, a property it passes (None: it passes none we can name), the property that rejects it,
#  what the rejection says)
WRONG = [
    ("lis-quadratic-dp", "length_of_lis", '''
def length_of_lis(nums):
    best = []
    for i, x in enumerate(nums):
        best.append(1 + max((best[j] for j in range(i) if nums[j] < x), default=0))
    return max(best, default=0)
''', "prop_matches_every_subsequence", "prop_n_log_n_comparisons", "comparisons"),
    ("lis-bisect-right", "length_of_lis", OK["length_of_lis"].replace("bisect_left", "bisect_right"),
     "prop_scale", "prop_strictly_increasing", "strictly increasing"),
    ("lis-linear-scan-of-tails", "length_of_lis", '''
def length_of_lis(nums):
    tails = []
    for x in nums:
        i = 0
        while i < len(tails) and tails[i] < x:
            i += 1
        if i == len(tails):
            tails.append(x)
        else:
            tails[i] = x
    return len(tails)
''', "prop_matches_every_subsequence", "prop_n_log_n_comparisons", "comparisons"),
    ("lis-sort-then-dp-on-ranks", "length_of_lis", '''
def length_of_lis(nums):
    order = sorted(range(len(nums)), key=lambda i: nums[i])
    rank, r = [0] * len(nums), 0
    for k, i in enumerate(order):
        if k and nums[order[k - 1]] < nums[i]:
            r += 1
        rank[i] = r
    best = []
    for i in range(len(rank)):
        best.append(1 + max((best[j] for j in range(i) if rank[j] < rank[i]), default=0))
    return max(best, default=0)
''', "prop_n_log_n_comparisons", "prop_scale", "timed out"),
    ("lru-no-refresh-on-get", "LRUCache", _LRU_OD.replace(
        "        if key not in self.d:\n            return -1\n        self.d.move_to_end(key)\n        return self.d[key]",
        "        return self.d.get(key, -1)"), "prop_put_refreshes", "prop_get_refreshes", "expected the last get"),
    ("lru-put-keeps-order", "LRUCache", _LRU_OD.replace("        if key in self.d:\n            self.d.move_to_end(key)\n", ""),
     "prop_get_refreshes", "prop_put_refreshes", "expected the last get"),
    ("lru-evict-before-checking-the-key", "LRUCache", '''
from collections import OrderedDict


class LRUCache:
    def __init__(self, capacity):
        self.capacity, self.d = capacity, OrderedDict()

    def get(self, key):
        if key not in self.d:
            return -1
        self.d.move_to_end(key)
        return self.d[key]

    def put(self, key, value):
        if len(self.d) == self.capacity:
            self.d.popitem(last=False)
        self.d[key] = value
        self.d.move_to_end(key)
''', "prop_get_refreshes", "prop_update_does_not_evict", "expected the last get"),
    ("lru-zero-is-missing", "LRUCache", _LRU_OD.replace(
        "        self.d.move_to_end(key)\n        return self.d[key]", "        self.d.move_to_end(key)\n        return self.d[key] or -1"),
     "prop_get_refreshes", "prop_update_does_not_evict", "return 0"),
    ("lru-list-in-recency-order", "LRUCache", '''
class LRUCache:
    def __init__(self, capacity):
        self.capacity, self.d, self.order = capacity, {}, []

    def get(self, key):
        if key not in self.d:
            return -1
        self.order.remove(key)
        self.order.append(key)
        return self.d[key]

    def put(self, key, value):
        if key in self.d:
            self.order.remove(key)
        elif len(self.d) == self.capacity:
            del self.d[self.order.pop(0)]
        self.d[key] = value
        self.order.append(key)
''', "prop_matches_ordered_dict", "prop_constant_work", "hashes and key comparisons"),
    ("lru-oldest-timestamp-by-lookup", "LRUCache", _TS.replace("OLDEST", "min(self.t, key=self.t.get)"),
     "prop_matches_ordered_dict", "prop_constant_work", "hashes and key comparisons"),
    ("lru-oldest-timestamp-by-scan", "LRUCache", _TS.replace("OLDEST", "min(self.t.items(), key=lambda kv: kv[1])[0]"),
     "prop_constant_work", "prop_scale", "timed out"),
    ("lru-keeps-hash-not-key", "LRUCache", _LRU_OD.replace("class LRUCache:", "class LRUCache:  # keys replaced by hash(key)")
     .replace("    def get(self, key):\n", "    def get(self, key):\n        key = hash(key)\n")
     .replace("    def put(self, key, value):\n", "    def put(self, key, value):\n        key = hash(key)\n"),
     "prop_matches_ordered_dict", "prop_constant_work", "share a hash value"),
    ("trap-neighbours-only", "trap", '''
def trap(height):
    return sum(max(0, min(height[i - 1], height[i + 1]) - height[i]) for i in range(1, len(height) - 1))
''', "prop_equal_maxima", "prop_level_set_by_the_highest_bars", "expected"),
    ("trap-prefix-maxima", "trap", _TRAP_PREFIX.replace("    RESET\n", ""), "prop_matches_level_fill",
     "prop_constant_extra_space", "bytes of Python objects"),
    ("trap-monotonic-stack", "trap", '''
def trap(height):
    stack, total = [], 0
    for i, h in enumerate(height):
        while stack and height[stack[-1]] < h:
            floor = stack.pop()
            if not stack:
                break
            t = stack[-1]
            total += (i - t - 1) * (min(height[t], h) - height[floor])
        stack.append(i)
    return total
''', "prop_matches_level_fill", "prop_constant_extra_space", "bytes of Python objects"),
    ("trap-quadratic-scan", "trap", '''
def trap(height):
    total = 0
    for i in range(len(height)):
        total += min(max(height[:i + 1]), max(height[i:])) - height[i]
    return total
''', "prop_matches_level_fill", "prop_scale", "timed out"),
    ("trap-prefix-maxima-resetting-the-meter", "trap", _TRAP_PREFIX.replace(
        "    RESET\n", "    import tracemalloc\n    try:\n        tracemalloc.reset_peak()\n    except Exception:\n        pass\n"),
     "prop_matches_level_fill", "prop_constant_extra_space", "bytes of Python objects"),
    ("merge-end-becomes-the-new-end", "merge", OK["merge"].replace("max(out[-1][1], e)", "e"),
     "prop_touching_intervals_merge", "prop_contained_interval_keeps_the_end", "expected"),
    ("merge-strict-overlap", "merge", OK["merge"].replace("s <= out[-1][1]", "s < out[-1][1]"),
     "prop_any_input_order", "prop_touching_intervals_merge", "[[1, 4], [4, 5]]"),
    ("merge-without-sorting", "merge", OK["merge"].replace("sorted(intervals, key=lambda iv: iv[0])", "intervals"),
     "prop_contained_interval_keeps_the_end", "prop_any_input_order", "expected"),
    ("merge-pairs-until-stable", "merge", '''
def merge(intervals):
    out = [list(iv) for iv in intervals]
    changed = True
    while changed:
        changed = False
        for i in range(len(out)):
            for j in range(i + 1, len(out)):
                a, b = out[i], out[j]
                if max(a[0], b[0]) <= min(a[1], b[1]):
                    out[i] = [min(a[0], b[0]), max(a[1], b[1])]
                    del out[j]
                    changed = True
                    break
            if changed:
                break
    return sorted(out)
''', "prop_matches_every_cut", "prop_scale", "timed out"),
    ("mergek-val-node-tuples", "merge_k_lists", OK["merge_k_lists"].replace("(node.val, i, node) for i, node in enumerate(lists)",
                                                                           "(node.val, node) for node in lists")
     .replace("_, i, node = heapq.heappop(heap)", "_, node = heapq.heappop(heap)")
     .replace("(node.next.val, i, node.next)", "(node.next.val, node.next)"),
     None, "prop_equal_values", "TypeError"),
    ("mergek-one-list-after-another", "merge_k_lists", _MERGE_SEQ, "prop_matches_sorted", "prop_n_log_k_comparisons",
     "key comparisons"),
    ("mergek-scan-every-head", "merge_k_lists", '''
class ListNode:
    def __init__(self, val=0, next=None):
        self.val, self.next = val, next


def merge_k_lists(lists):
    heads = [h for h in lists if h]
    dummy = tail = ListNode()
    while heads:
        best = 0
        for i in range(1, len(heads)):
            if heads[i].val < heads[best].val:
                best = i
        node = heads[best]
        tail.next = node
        tail = node
        if node.next:
            heads[best] = node.next
        else:
            heads.pop(best)
    tail.next = None
    return dummy.next
''', "prop_matches_sorted", "prop_n_log_k_comparisons", "key comparisons"),
    ("islands-with-diagonals", "num_islands", _ISL.replace("STEPS", _EIGHT).replace("INBOUNDS", "0 <= a < m and 0 <= b < n"),
     "prop_borders_do_not_wrap", "prop_diagonals_do_not_connect", "expected"),
    ("islands-borders-wrap", "num_islands", _ISL.replace("STEPS", _FOUR).replace("INBOUNDS", "a < m and b < n"),
     "prop_rings_and_lakes", "prop_borders_do_not_wrap", "expected"),
    ("islands-recursive-dfs", "num_islands", '''
import sys
sys.setrecursionlimit(100000)


def num_islands(grid):
    m, n = len(grid), len(grid[0]) if grid else 0

    def sink(r, c):
        if 0 <= r < m and 0 <= c < n and grid[r][c] == "1":
            grid[r][c] = "0"
            sink(r + 1, c)
            sink(r - 1, c)
            sink(r, c + 1)
            sink(r, c - 1)

    count = 0
    for i in range(m):
        for j in range(n):
            if grid[i][j] == "1":
                count += 1
                sink(i, j)
    return count
''', "prop_matches_bfs", "prop_largest_grids", "recursion"),
    ("topo-edges-reversed", "find_order", _KAHN.replace("succ[b].append(a)\n        indeg[a] += 1",
                                                         "succ[a].append(b)\n        indeg[b] += 1"),
     "prop_detects_every_cycle", "prop_edge_direction", "expected"),
    ("topo-misses-a-cycle", "find_order", _KAHN.replace("return order if len(order) == num_courses else []", "return order"),
     "prop_reconverging_paths_are_not_cycles", "prop_detects_every_cycle", "contain a cycle"),
    ("topo-visited-set-only", "find_order", '''
import sys
sys.setrecursionlimit(100000)


def find_order(num_courses, prerequisites):
    succ = [[] for _ in range(num_courses)]
    for a, b in prerequisites:
        succ[b].append(a)
    visited, post = set(), []

    def dfs(v):
        visited.add(v)
        for w in succ[v]:
            if w in visited:
                raise ValueError("cycle")
            dfs(w)
        post.append(v)

    try:
        for v in range(num_courses):
            if v not in visited:
                dfs(v)
    except ValueError:
        return []
    return post[::-1]
''', "prop_detects_every_cycle", "prop_reconverging_paths_are_not_cycles", "no cycle, so an order exists"),
    ("topo-set-adjacency", "find_order", _KAHN.replace("succ = [[] for _ in range(num_courses)]", "succ = [set() for _ in range(num_courses)]")
     .replace("succ[b].append(a)", "succ[b].add(a)"),
     "prop_detects_every_cycle", "prop_repeated_prerequisites", "no cycle"),
    ("topo-rescan-for-ready-courses", "find_order", '''
def find_order(num_courses, prerequisites):
    need = [set() for _ in range(num_courses)]
    for a, b in prerequisites:
        need[a].add(b)
    done, out = set(), []
    while len(out) < num_courses:
        for v in range(num_courses):
            if v not in done and need[v] <= done:
                done.add(v)
                out.append(v)
                break
        else:
            return []
    return out
''', "prop_matches_closure", "prop_scale", "timed out"),
    ("topo-recursive-dfs-default-limit", "find_order", '''
def find_order(num_courses, prerequisites):
    succ = [[] for _ in range(num_courses)]
    for a, b in prerequisites:
        succ[b].append(a)
    colour, post = [0] * num_courses, []

    def dfs(v):
        colour[v] = 1
        for w in succ[v]:
            if colour[w] == 1 or (colour[w] == 0 and not dfs(w)):
                return False
        colour[v] = 2
        post.append(v)
        return True

    for v in range(num_courses):
        if colour[v] == 0 and not dfs(v):
            return []
    return post[::-1]
''', "prop_matches_closure", "prop_scale", "recursion"),
    ("bst-children-only", "is_valid_bst", '''
def is_valid_bst(root):
    stack = [root] if root else []
    while stack:
        n = stack.pop()
        if n.left and not n.left.val < n.val:
            return False
        if n.right and not n.val < n.right.val:
            return False
        stack += [c for c in (n.left, n.right) if c]
    return True
''', "prop_int32_extremes", "prop_whole_subtrees", "expected: False"),
    ("bst-allows-repeats", "is_valid_bst", OK["is_valid_bst"].replace("not prev < node.val", "node.val < prev"),
     "prop_whole_subtrees", "prop_repeated_keys_are_invalid", "expected: False"),
    ("bst-int32-sentinels", "is_valid_bst", _VBST_REC.replace("LIMIT", "sys.setrecursionlimit(50000)")
     .replace("LOW", "-2**31").replace("HIGH", "2**31 - 1").replace("CMP", "<"),
     "prop_whole_subtrees", "prop_int32_extremes", "2147483647"),
    ("bst-recursion-at-the-default-limit", "is_valid_bst", _VBST_REC.replace("LIMIT", "")
     .replace("LOW", "float('-inf')").replace("HIGH", "float('inf')").replace("CMP", "<"),
     "prop_matches_definition", "prop_deep_trees", "recursion"),
    ("buildtree-index-and-slices", "build_tree", _BT_REC.replace("LIMIT", "sys.setrecursionlimit(50000)")
     .replace("FIND", "inorder.index(preorder[0])"), "prop_round_trip", "prop_linear_lookups", "hashes and key comparisons"),
    ("buildtree-recursion-at-the-default-limit", "build_tree", OK["build_tree"].replace(
        "def build_tree(preorder, inorder):", "def _unused():\n    pass\n\n\ndef build_tree(preorder, inorder):\n"
        "    where = {v: i for i, v in enumerate(inorder)}\n    it = iter(preorder)\n\n    def go(lo, hi):\n"
        "        if lo >= hi:\n            return None\n        v = next(it)\n        node = TreeNode(v)\n"
        "        k = where[v]\n        node.left = go(lo, k)\n        node.right = go(k + 1, hi)\n        return node\n\n"
        "    return go(0, len(inorder))\n\n\ndef _old(preorder, inorder):"),
     "prop_round_trip", "prop_largest_inputs", "recursion"),
]
