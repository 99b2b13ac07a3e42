"""Mutants of the LeetCode references in impls/coding: the bugs people write in these nine rounds.

One mutant per line: Mutant(name, file, exact original snippet, replacement[, why=...][, equivalent=...]).
"""

from mianjing.mutation import Mutant as M

LIS = "impls/coding/lis.py"
LRU = "impls/coding/lru_cache.py"
RAIN = "impls/coding/trapping_rain_water.py"
IV = "impls/coding/merge_intervals.py"
MK = "impls/coding/merge_k_lists.py"
ISL = "impls/coding/number_of_islands.py"
TOPO = "impls/coding/topological_sort.py"
VBST = "impls/coding/validate_bst.py"
BT = "impls/coding/build_tree.py"
LISTS = "impls/coding/lists.py"

MUTANTS = [
    # LeetCode 300
    M("lc.lis.bisect-right-when-strict", LIS, "search = bisect_left if strict else bisect_right",
      "search = bisect_right", why="the longest non-decreasing subsequence instead of strictly increasing"),
    M("lc.lis.always-append", LIS, "        i = search(tails, x)\n        if i == len(tails):",
      "        i = search(tails, x)\n        if True:", why="tails grows on every element: the length of the input"),
    M("lc.lis.dp-non-strict", LIS, "if nums[j] < x and best[j] + 1 > b:", "if nums[j] <= x and best[j] + 1 > b:"),
    M("lc.lis.dp-empty-is-one", LIS, "    return max(best, default=0)", "    return max(best, default=1)"),
    M("lc.lis.predecessor-off-by-one", LIS, "prev.append(tail_at[k - 1] if k > 0 else -1)",
      "prev.append(tail_at[k] if k < len(tail_at) else -1)", why="links to the element being replaced"),
    M("lc.lis.patience-tails-bisect-right", LIS, "        i = bisect_left(tails, x)\n        if i == len(tails):",
      "        i = bisect_right(tails, x)\n        if i == len(tails):"),
    # LeetCode 146
    M("lc.lru.get-does-not-refresh", LRU,
      "            return -1\n        self._unlink(node)\n        self._push_recent(node)\n        return node.value",
      "            return -1\n        return node.value"),
    M("lc.lru.put-does-not-refresh", LRU,
      "            node.value = value\n            self._unlink(node)\n            self._push_recent(node)\n            return",
      "            node.value = value\n            return", why="the catalog's lru-03: an update is not a use"),
    M("lc.lru.evicts-the-most-recent", LRU, "            lru = self._head.next", "            lru = self._tail.prev"),
    M("lc.lru.capacity-off-by-one", LRU, "        if len(self._map) > self.capacity:\n            lru",
      "        if len(self._map) >= self.capacity:\n            lru"),
    M("lc.lru.evicted-key-stays-in-map", LRU, "            del self._map[lru.key]", "            pass"),
    M("lc.lru.ordered-dict-update-keeps-order", LRU,
      "        if key in self._d:\n            self._d.move_to_end(key)\n        self._d[key] = value",
      "        self._d[key] = value"),
    M("lc.lru.plain-dict-get-no-refresh", LRU,
      "        value = self._d.pop(key)\n        self._d[key] = value\n        return value",
      "        return self._d[key]"),
    # LeetCode 42
    M("lc.rain.advance-the-larger-side", RAIN, "        if lmax <= rmax:", "        if lmax >= rmax:"),
    M("lc.rain.left-max-not-updated", RAIN, "            if height[l] > lmax:\n                lmax = height[l]\n",
      "            pass\n", why="the running maximum misses the bar itself: negative water on a rise"),
    M("lc.rain.short-input-guard", RAIN, "    if n < 3:", "    if n < 4:", why="[2, 0, 2] holds 2"),
    M("lc.rain.max-of-maxima", RAIN, "return [min(left[i], right[i]) - height[i] for i in range(n)]",
      "return [max(left[i], right[i]) - height[i] for i in range(n)]"),
    M("lc.rain.stack-width-off-by-one", RAIN, "total += (i - t - 1) * (min(height[t], h) - height[floor])",
      "total += (i - t) * (min(height[t], h) - height[floor])"),
    # LeetCode 56
    M("lc.intervals.end-is-the-new-end", IV, "            if end > out[-1][1]:\n                out[-1][1] = end",
      "            out[-1][1] = end", why="the catalog's mgi-02: a contained interval shrinks the merged one"),
    M("lc.intervals.touching-not-merged", IV, "start <= out[-1][1] if closed", "start < out[-1][1] if closed"),
    M("lc.intervals.not-sorted", IV, "sorted(intervals, key=lambda iv: iv[0])", "intervals"),
    M("lc.intervals.half-open-touching-merged", IV, "else start < out[-1][1]", "else start <= out[-1][1]"),
    # LeetCode 23
    M("lc.mergek.push-without-the-index", MK, "heapq.heappush(heap, (node.next.val, i, node.next))",
      "heapq.heappush(heap, (node.next.val, node.next))", why="a tie compares an index with a node"),
    M("lc.mergek.merge-two-drops-the-rest", MK, "    tail.next = a if a is not None else b", "    tail.next = a"),
    M("lc.mergek.divide-drops-the-odd-list", MK, "for i in range(0, len(work), 2)]", "for i in range(0, len(work) - 1, 2)]"),
    M("lc.mergek.heap-stops-early", MK, "        if node.next is not None:\n            heapq.heappush",
      "        if node.next is not None and len(heap) > 0:\n            heapq.heappush",
      why="the last list's tail is dropped once the heap is empty"),
    M("lc.mergek.tail-left-linked", MK, "        tail.next = node\n        tail = node\n        if node.next is not None:\n"
      "            heapq.heappush(heap, (node.next.val, i, node.next))\n    tail.next = None",
      "        tail.next = node\n        tail = node\n        if node.next is not None:\n"
      "            heapq.heappush(heap, (node.next.val, i, node.next))",
      equivalent="the last node popped has no successor (else it would have been pushed), so its next is already None"),
    M("lc.lists.to-values-skips-the-head", LISTS, "    out = []\n    while head is not None:",
      "    out = []\n    head = head.next if head is not None else None\n    while head is not None:"),
    # LeetCode 200
    M("lc.islands.diagonals", ISL, "STEPS = ((1, 0), (-1, 0), (0, 1), (0, -1))",
      "STEPS = ((1, 0), (-1, 0), (0, 1), (0, -1), (1, 1), (-1, -1), (1, -1), (-1, 1))"),
    M("lc.islands.no-lower-bound", ISL,
      "if 0 <= a < m and 0 <= b < n and grid[a][b] == \"1\" and not seen[a][b]:\n                        seen[a][b] = True\n"
      "                        stack.append((a, b))",
      "if a < m and b < n and grid[a][b] == \"1\" and not seen[a][b]:\n                        seen[a][b] = True\n"
      "                        stack.append((a, b))", why="Python's index -1 joins the first and last row/column"),
    M("lc.islands.mark-on-pop-without-skip", ISL, "                    if seen[r][c]:\n                        continue\n",
      "                    pass\n", why="mark='pop' expands a cell again each time it is popped"),
    M("lc.islands.union-counts-same-set", ISL, "                    if x != y:", "                    if True:"),
    M("lc.islands.no-path-compression", ISL, "        while parent[x] != root:  # path compression\n            parent[x], x = root, parent[x]\n",
      "", why="path compression left out (union by rank still on)",
      equivalent="on grids, uniting each cell with its right and lower neighbours in row-major order keeps every root "
                 "a step or two away, and union by rank alone bounds a find by log2(mn): same counts, and parent steps "
                 "per find 0.75/0.75 (all land), 0.5/0.5 (snake), 0.63/0.67 (random 300x300) with and without it"),
    # LeetCode 207 / 210
    M("lc.topo.edges-reversed", TOPO, "        succ[b].append(a)\n        indeg[a] += 1", "        succ[a].append(b)\n        indeg[b] += 1"),
    M("lc.topo.partial-order-on-a-cycle", TOPO, "    return order if len(order) == num_courses else []", "    return order"),
    M("lc.topo.visited-means-cycle", TOPO, "                if colour[w] == GREY:", "                if colour[w] != WHITE:",
      why="the catalog's topo-03: a finished node reached again is taken for a cycle"),
    M("lc.topo.post-order-not-reversed", TOPO, "    return post[::-1]", "    return post"),
    M("lc.topo.grey-never-cleared", TOPO, "                colour[v] = BLACK\n", "                pass\n",
      why="a finished node stays grey: a later edge into it looks like a cycle"),
    # LeetCode 98
    M("lc.bst.inorder-allows-repeats", VBST, "        if have_prev and not prev < node.val:", "        if have_prev and prev > node.val:"),
    M("lc.bst.left-loses-the-lower-bound", VBST, "            stack.append((node.left, low, v))",
      "            stack.append((node.left, None, v))", why="only the parent bounds the left child"),
    M("lc.bst.bounds-allow-equal-high", VBST, "(high is not None and not v < high)", "(high is not None and v > high)"),
    M("lc.bst.sentinels-inclusive", VBST, "        if not lo < node.val < hi:", "        if not lo <= node.val <= hi:",
      why="makes the INT_MIN/INT_MAX version pass the extremes, and accept repeats"),
    M("lc.bst.inorder-never-goes-right", VBST, "        prev, have_prev = node.val, True\n        node = node.right",
      "        prev, have_prev = node.val, True\n        node = None"),
    # LeetCode 105
    M("lc.buildtree.right-preorder-offset", BT, "work.append((p + 1 + left_size, k + 1, hi, node, \"right\"))",
      "work.append((p + left_size, k + 1, hi, node, \"right\"))"),
    M("lc.buildtree.sides-swapped", BT, "        work.append((p + 1, lo, k, node, \"left\"))",
      "        work.append((p + 1, lo, k, node, \"right\"))"),
    M("lc.buildtree.slicing-undercounts", BT, "        stats[\"scanned\"] += k + 1", "        stats[\"scanned\"] += k"),
    M("lc.buildtree.stack-attaches-left-always", BT, "        if parent.val != inorder[j]:", "        if True:"),
]
