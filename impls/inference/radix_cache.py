"""A token-level prefix cache kept as a radix tree (SGLang's RadixAttention), and routing requests to
replicas by what their caches hold.

``RadixCache`` (Zheng et al. 2024, SGLang, §3): every cached sequence is a path from the root; an edge is
labelled with a run of tokens, so two prompts sharing k tokens share the first k tokens' nodes whatever k
is. ``match(tokens)`` returns the length of the longest cached prefix, at token granularity;
``insert(tokens)`` adds a sequence (splitting an edge where it diverges); when the tokens held exceed
``capacity`` the least recently used leaves are evicted first (a parent becomes a leaf once its children
are gone). vLLM's automatic prefix caching (``paged_kv.PagedKVCache``) finds the same prefixes through
chained block hashes, but only in whole blocks: a k-token common prefix reuses B·⌊k/B⌋ tokens.

``route(...)`` deals a stream of prompts to replicas, each with its own cache, and measures the share of
prompt tokens found cached: round-robin, by a hash of the prompt's first ``key_tokens`` tokens (prefix
affinity), or to the replica whose cache matches longest (cache-aware, ties to the least loaded).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import count


@dataclass(eq=False)
class _Node:
    key: tuple[int, ...] = ()
    parent: "_Node | None" = None
    children: dict[int, "_Node"] = field(default_factory=dict)
    used: int = 0


class RadixCache:
    def __init__(self, capacity: int | None = None):
        if capacity is not None and capacity < 0:
            raise ValueError(f"capacity must be >= 0 tokens, got {capacity}")
        self.capacity = capacity
        self.root = _Node()
        self.size = 0                   # tokens held (the sum of the edge labels)
        self._clock = count(1)

    def _walk(self, tokens) -> tuple[int, list[_Node]]:
        """(matched tokens, the nodes passed through) for ``tokens``; touches them for LRU."""
        node, i, path = self.root, 0, []
        now = next(self._clock)
        while i < len(tokens) and tokens[i] in node.children:
            child = node.children[tokens[i]]
            j = 0
            while j < len(child.key) and i + j < len(tokens) and child.key[j] == tokens[i + j]:
                j += 1
            child.used = now
            path.append(child)
            i += j
            if j < len(child.key):
                break
            node = child
        return i, path

    def match(self, tokens) -> int:
        """Length of the longest prefix of ``tokens`` held in the cache."""
        return self._walk(list(tokens))[0]

    def insert(self, tokens) -> int:
        """Cache ``tokens``; returns how many new tokens were stored (then evicts down to the capacity)."""
        tokens = list(tokens)
        node, i, before = self.root, 0, self.size
        now = next(self._clock)
        while i < len(tokens):
            child = node.children.get(tokens[i])
            if child is None:
                leaf = _Node(tuple(tokens[i:]), node, {}, now)
                node.children[tokens[i]] = leaf
                self.size += len(leaf.key)
                i = len(tokens)
                break
            j = 0
            while j < len(child.key) and i + j < len(tokens) and child.key[j] == tokens[i + j]:
                j += 1
            if j < len(child.key):                       # diverges inside the edge: split it
                head = _Node(child.key[:j], node, {child.key[j]: child}, now)
                child.key, child.parent = child.key[j:], head
                node.children[tokens[i]] = head
                child = head
            child.used = now
            node, i = child, i + j
        new = self.size - before
        self.evict_to(self.capacity)
        return new

    def evict_to(self, capacity: int | None) -> int:
        """Drop least recently used leaves until at most ``capacity`` tokens are held; returns tokens freed."""
        freed = 0
        while capacity is not None and self.size > capacity:
            leaf = min(self._leaves(), key=lambda n: n.used)
            del leaf.parent.children[leaf.key[0]]
            self.size -= len(leaf.key)
            freed += len(leaf.key)
        return freed

    def _leaves(self) -> list[_Node]:
        out, todo = [], list(self.root.children.values())
        while todo:
            n = todo.pop()
            if n.children:
                todo.extend(n.children.values())
            else:
                out.append(n)
        return out

    def sequences(self) -> list[tuple[int, ...]]:
        """Every root-to-leaf token run held (what a brute-force oracle compares against)."""
        out, todo = [], [(n, n.key) for n in self.root.children.values()]
        while todo:
            n, prefix = todo.pop()
            if not n.children:
                out.append(prefix)
            todo.extend((c, prefix + c.key) for c in n.children.values())
        return out


@dataclass
class RouteResult:
    hit_tokens: int
    prompt_tokens: int
    per_replica: list[int]             # requests each replica served

    @property
    def hit_rate(self) -> float:
        return self.hit_tokens / self.prompt_tokens

    @property
    def imbalance(self) -> float:
        """Busiest replica's requests over the mean."""
        return max(self.per_replica) / (sum(self.per_replica) / len(self.per_replica))


POLICIES = ("round_robin", "prefix_hash", "cache_aware")


def route(prompts: list[tuple[int, ...]], replicas: int, capacity: int, policy: str, key_tokens: int = 64
          ) -> RouteResult:
    """Send each prompt (in order) to one replica, look it up in that replica's :class:`RadixCache` of
    ``capacity`` tokens, then insert it there."""
    if policy not in POLICIES:
        raise ValueError(f"policy must be one of {POLICIES}, got {policy!r}")
    if replicas < 1:
        raise ValueError(f"replicas must be >= 1, got {replicas}")
    caches = [RadixCache(capacity) for _ in range(replicas)]
    load = [0] * replicas
    hit = total = 0
    for i, p in enumerate(prompts):
        if policy == "round_robin":
            r = i % replicas
        elif policy == "prefix_hash":
            r = hash(tuple(p[:key_tokens])) % replicas
        else:
            matches = [c.match(p) for c in caches]
            r = max(range(replicas), key=lambda k: (matches[k], -load[k]))
        hit += caches[r].match(p)
        total += len(p)
        caches[r].insert(p)
        load[r] += 1
    return RouteResult(hit, total, load)
