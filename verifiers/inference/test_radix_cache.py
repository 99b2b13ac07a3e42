"""RadixAttention's token-granular prefix cache against block-hash prefix caching, and routing by prefix.

Oracles: the longest common prefix with every cached sequence, by brute force; vLLM-style automatic prefix
caching as ``paged_kv.PagedKVCache`` implements it (chained block hashes); a seeded trace with shared
system prompts for the routing policies.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from impls.inference.paged_kv import BlockAllocator, PagedKVCache, synthetic_trace
from impls.inference.radix_cache import RadixCache, route


def _lcp(a, b) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


@st.composite
def _family(draw):
    """Sequences over a tiny vocabulary grown from a few stems, so prefixes are shared at any length."""
    stems = draw(st.lists(st.lists(st.integers(0, 2), min_size=0, max_size=12), min_size=1, max_size=3))
    seqs = []
    for _ in range(draw(st.integers(1, 8))):
        stem = draw(st.sampled_from(stems))
        cut = draw(st.integers(0, len(stem)))
        seqs.append(tuple(stem[:cut] + draw(st.lists(st.integers(0, 2), max_size=10))))
    return seqs


@pytest.mark.claim("engine.radix-tree-lru")
@given(seqs=_family(), query=st.lists(st.integers(0, 2), max_size=20))
def test_match_is_the_longest_common_prefix(seqs, query):
    cache = RadixCache()
    stored = 0
    for s in seqs:
        before = max((_lcp(s, t) for t in seqs[:stored]), default=0)
        assert cache.insert(s) == len(s) - before          # only the unshared tail is new
        stored += 1
    for q in [tuple(query)] + seqs:
        assert cache.match(q) == max(_lcp(q, s) for s in seqs)
    distinct = {s for s in seqs if not any(t != s and t[:len(s)] == s for t in seqs)}
    assert set(cache.sequences()) == {s for s in distinct if s}           # one leaf per maximal sequence
    assert cache.size == len({s[:k] for s in seqs for k in range(1, len(s) + 1)})   # each prefix stored once


@pytest.mark.claim("engine.radix-tree-lru")
@given(seqs=_family(), capacity=st.integers(0, 25))
def test_capacity_and_lru(seqs, capacity):
    cache = RadixCache(capacity)
    for s in seqs:
        cache.insert(s)
        assert cache.size <= capacity
        held = cache.sequences()
        assert all(any(t[:len(h)] == h for t in seqs) for h in held)     # nothing that was not inserted
    if seqs and len(seqs[-1]) <= capacity:
        assert cache.match(seqs[-1]) == len(seqs[-1])                      # the newest survives


@pytest.mark.claim("engine.radix-tree-lru")
def test_a_mismatch_inside_an_edge_ends_the_match():
    cache = RadixCache()
    cache.insert((1, 2, 3, 4, 7))
    cache.insert((1, 2, 3, 9))                      # the edge 1 2 3 now has children starting 4 and 9
    assert cache.match((1, 2, 4, 7)) == 2           # diverges inside "1 2 3": a child's first token must not count
    assert cache.match((1, 2, 3, 4, 8)) == 4 and cache.match((1, 2, 3, 9, 9)) == 4


@pytest.mark.claim("engine.radix-tree-lru")
def test_least_recently_used_leaf_goes_first():
    cache = RadixCache(capacity=12)
    cache.insert((1, 1, 1, 1))
    cache.insert((2, 2, 2, 2))
    cache.match((1, 1, 1, 1))                                              # A is used again, B is not
    cache.insert((3, 3, 3, 3, 3))
    assert cache.match((1, 1, 1, 1)) == 4 and cache.match((2, 2, 2, 2)) == 0
    assert cache.size == 9


@pytest.mark.claim("engine.radix-token-granular")
@given(k=st.integers(0, 80), extra=st.integers(1, 40), block=st.sampled_from([4, 16]))
def test_radix_reuses_every_shared_token_block_hashing_whole_blocks(k, extra, block):
    a = tuple(range(k)) + tuple(1000 + i for i in range(30))
    b = tuple(range(k)) + tuple(2000 + i for i in range(extra))
    radix = RadixCache()
    radix.insert(a)
    paged = PagedKVCache(BlockAllocator(64, block, prefix_caching=True))
    paged.add_sequence(0, list(a))
    paged.free(0)
    hit = paged.add_sequence(1, list(b))
    assert radix.match(b) == k
    assert hit == block * (k // block)


@pytest.mark.claim("engine.radix-token-granular")
def test_a_37_token_shared_prefix(evidence):
    a, b = tuple(range(37)) + (900, 901), tuple(range(37)) + (800,) * 20
    radix = RadixCache()
    radix.insert(a)
    paged = PagedKVCache(BlockAllocator(16, 16, prefix_caching=True))
    paged.add_sequence(0, list(a))
    hit = paged.add_sequence(1, list(b))
    evidence.quote("tokens reused by the radix tree", quoted=37, measured=radix.match(b), abs=0)
    evidence.quote("tokens reused by 16-token block hashing", quoted=32, measured=hit, abs=0)


@pytest.mark.claim("serve.prefix-affinity-routing")
def test_routing_by_prefix_raises_hits(evidence):
    trace = synthetic_trace(n=400, seed=0, max_len=4096, mean_prompt=256, mean_output=16,
                            shared_prefix_len=1024, n_prefixes=8)
    prompts = [r.prompt for r in trace]
    res = {p: route(prompts, 4, 5120, p) for p in ("round_robin", "prefix_hash", "cache_aware")}
    evidence.quote("hit rate, round-robin over 4 replicas (%)", quoted=45, measured=100 * res["round_robin"].hit_rate, digits=0)
    evidence.quote("hit rate, routed by a hash of the system prompt (%)", quoted=95,
                   measured=100 * res["prefix_hash"].hit_rate, digits=0)
    evidence.quote("busiest replica over the mean, prefix hash", quoted=1.69, measured=res["prefix_hash"].imbalance, digits=2)
    assert res["cache_aware"].hit_rate > 2 * res["round_robin"].hit_rate
    evidence.quote("busiest replica over the mean, cache-aware", quoted=1.58, measured=res["cache_aware"].imbalance, digits=2)
    assert res["round_robin"].imbalance == 1.0
    # one replica: the policies cannot differ
    one = {p: route(prompts[:100], 1, 5120, p).hit_rate for p in res}
    assert len(set(one.values())) == 1
    evidence.update({p: {"hit_rate": round(r.hit_rate, 3), "requests_per_replica": r.per_replica} for p, r in res.items()})
