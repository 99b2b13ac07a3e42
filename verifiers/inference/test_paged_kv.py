"""Paged KV memory: fragmentation against contiguous reservation, sharing, copy-on-write, prefix caching.

Oracles: a plain Python model of every sequence's token list (what each sequence must read back through its
block table), reference counts recounted from the block tables, the KV calculator for the bytes, and the tiny
decoder's K/V tensors for why a cached block must be keyed on its whole prefix.
"""

from __future__ import annotations

from collections import Counter

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from impls.inference import kv_cache as K
from impls.inference import paged_kv as P
from impls.inference.tiny_decoder import TinyDecoder, tiny_config

TRACE = dict(n=300, seed=0, max_len=2048, mean_prompt=256, mean_output=128)
VLLM_FIG2_USEFUL = (0.204, 0.382)   # Kwon et al. 2023, Figure 2: KV memory holding token states in prior systems


@pytest.mark.claim("pa.contiguous-waste")
def test_waste_of_max_length_reservation_depends_on_the_trace(evidence):
    cap = 64 * 2048
    short = P.synthetic_trace(**TRACE)
    long_ = P.synthetic_trace(n=150, seed=1, max_len=2048, mean_prompt=1400, mean_output=400, sigma=0.2)
    res, pool, conc = {}, {}, {}
    for name, trace in (("short requests", short), ("near-max requests", long_)):
        runs = {
            "contiguous, reserve max_len": P.simulate(trace, capacity_tokens=cap, paged=False, reserve="max"),
            "contiguous, reserve prompt+output (oracle)": P.simulate(trace, capacity_tokens=cap, paged=False,
                                                                    reserve="exact"),
            "paged, 16-token blocks": P.simulate(trace, capacity_tokens=cap, paged=True, block_size=16),
        }
        res[name] = {k: r.utilisation for k, r in runs.items()}
        pool[name] = {k: r.pool_utilisation for k, r in runs.items()}      # stored / the whole pool
        conc[name] = {k: r.mean_running for k, r in runs.items()}
    # "utilisation" is stored / held: it leaves free holes (external fragmentation) out, so it is the
    # lower end of vLLM's breakdown. Against the whole pool, the short trace never fills memory (13-14%
    # for every manager); on the near-limit trace paging stores the most and runs the most sequences.
    assert all(0.13 < v < 0.145 for v in pool["short requests"].values())
    near_pool, near_conc = list(pool["near-max requests"].values()), list(conc["near-max requests"].values())
    assert near_pool == sorted(near_pool) and near_conc == sorted(near_conc)
    for k, q_ in zip(pool["near-max requests"], (50.2, 55.7, 60.1)):
        evidence.quote(f"stored / pool, near-max requests, {k} (%)", quoted=q_, measured=100 * pool["near-max requests"][k],
                       digits=1)
    waste_short = 1 - res["short requests"]["contiguous, reserve max_len"]
    waste_long = 1 - res["near-max requests"]["contiguous, reserve max_len"]
    evidence.quote("waste of max-length reservation, short-request trace (60-80%)", quoted=0.7, measured=waste_short,
                   abs=0.1)                            # the quoted 60-80% shows up on a short-request trace
    assert waste_long < 0.35                              # ... and not on one whose requests fill the reservation
    assert 1 - res["short requests"]["contiguous, reserve prompt+output (oracle)"] > 0.1   # even an oracle wastes
    assert all(1 - r["paged, 16-token blocks"] < 0.04 for r in res.values())
    # the statement's 60-80% is the vLLM paper's 20.4-38.2% useful memory, turned into waste
    evidence.quote("upper end of the paper's waste (%)", quoted=80, measured=100 * (1 - VLLM_FIG2_USEFUL[0]), digits=0)
    assert abs((1 - VLLM_FIG2_USEFUL[1]) - 0.60) < 0.02   # and 61.8% is the "60" at the lower end
    evidence.quote("waste of max-length reservation, short requests (%)", quoted=75.9, measured=100 * waste_short,
                   digits=1)
    evidence.quote("waste of max-length reservation, near-max requests (%)", quoted=23.8, measured=100 * waste_long,
                   digits=1)
    for trace, exact_q, paged_q in (("near-max requests", 11, 0.5), ("short requests", 21, 1.5)):
        evidence.quote(f"waste of exact reservation, {trace} (%)", quoted=exact_q,
                       measured=100 * (1 - res[trace]["contiguous, reserve prompt+output (oracle)"]), digits=0)
        evidence.quote(f"waste of paging with 16-token blocks, {trace} (%)", quoted=paged_q,
                       measured=100 * (1 - res[trace]["paged, 16-token blocks"]), digits=1)
    evidence.update(utilisation={k: {kk: round(vv, 3) for kk, vv in v.items()} for k, v in res.items()},
                    stored_over_pool={k: {kk: round(vv, 4) for kk, vv in v.items()} for k, v in pool.items()},
                    mean_running={k: {kk: round(vv, 1) for kk, vv in v.items()} for k, v in conc.items()},
                    counterexample={"trace": "prompts ~1400, outputs ~400, max_len 2048",
                                    "waste_of_max_len_reservation": round(waste_long, 3)})


@pytest.mark.claim("pa.block-table")
def test_only_last_block_partly_empty_and_waste_grows_with_block_size(evidence):
    trace = P.synthetic_trace(**TRACE)
    util, entries = {}, {}
    for bs in (1, 4, 8, 16, 32, 64, 128, 256):
        r = P.simulate(trace, capacity_tokens=64 * 2048, paged=True, block_size=bs)
        for held, stored, running in zip(r.slots_held, r.tokens_stored, r.running):
            assert held - stored <= running * (bs - 1)            # at most B - 1 empty slots per live sequence
        util[bs] = r.utilisation
        entries[bs] = sum(r.table_entries) / sum(r.tokens_stored)   # block-table lookups per cached token read
    assert util[1] == 1.0
    # the kernel side of the trade: the attention kernel follows one block-table entry per block, so the
    # lookups (non-contiguous segments) per token it reads fall as 1/B; the latency itself is vLLM §7.2's
    for small, big in zip(sorted(entries), sorted(entries)[1:]):
        assert entries[big] < entries[small]
    assert entries[1] == 1.0 and 1 / 16 < entries[16] < 1.2 / 16
    assert [util[b] for b in sorted(util)] == sorted(util.values(), reverse=True)
    assert util[16] > 0.96
    evidence.quote("memory use with 16-token blocks (approaches 100%)", quoted=1.0, measured=util[16], abs=0.02)
    evidence.update(utilisation_by_block_size={b: round(u, 4) for b, u in util.items()},
                    block_table_lookups_per_cached_token={b: round(e, 4) for b, e in entries.items()})


@pytest.mark.claim("pa.million-tokens")
def test_paging_does_not_make_a_million_tokens_fit(evidence):
    cfg = K.preset("llama-3-8b")
    need = K.kv_cache_bytes(cfg, 2**20, 1, "bf16")
    weights = K.parameter_count(cfg) * 2
    room = {"H100 80GB": 80e9 - weights, "H200 141GB": 141e9 - weights}
    assert all(need > r for r in room.values())
    block_bytes = 16 * K.bytes_per_token(cfg)
    alloc = P.BlockAllocator(int(room["H100 80GB"] // block_bytes), 16)
    cache = P.PagedKVCache(alloc)
    with pytest.raises(P.OutOfBlocks):
        cache.add_sequence(0, [1] * 2**20)
    assert alloc.available == alloc.num_blocks                 # the failed request gave its blocks back
    evidence.quote("KV for a million tokens of Llama-3-8B (GB)", quoted=137.4, measured=need / 1e9, digits=1)
    evidence.update(kv_gb_for_1m_tokens=round(need / 1e9, 1), weights_gb=round(weights / 1e9, 1),
                    room_gb={k: round(v / 1e9, 1) for k, v in room.items()}, blocks_available=alloc.num_blocks,
                    blocks_needed=2**20 // 16,
                    counterexample={"model": "llama-3-8b bf16", "tokens": 2**20, "kv_gb": round(need / 1e9, 1),
                                    "h100_room_gb": round(room["H100 80GB"] / 1e9, 1)})


@pytest.mark.claim("pa.prefix-caching-memory")
def test_prefix_caching_saves_memory_as_well_as_prefill(evidence):
    system = list(range(1000, 2024))                             # a 1024-token system prompt
    rows = {}
    for caching in (False, True):
        cache = P.PagedKVCache(P.BlockAllocator(4096, 16, prefix_caching=caching))
        hits = sum(cache.add_sequence(i, system + [5000 + 64 * i + j for j in range(64)]) for i in range(32))
        rows[caching] = dict(blocks=len(cache.alloc.in_use), prefill_tokens=32 * 1088 - hits)
    assert rows[False]["blocks"] == 32 * 68 and rows[True]["blocks"] == 64 + 32 * 4
    assert rows[True]["prefill_tokens"] == 1088 + 31 * 64
    # with a fixed pool, sharing the prefix lets more requests run at once
    trace = P.synthetic_trace(n=120, seed=2, max_len=4096, mean_prompt=1100, mean_output=64, sigma=0.3,
                              shared_prefix_len=1024, n_prefixes=1, arrivals_per_step=4)
    conc = {c: P.simulate(trace, capacity_tokens=16 * 1024, paged=True, prefix_caching=c, max_len=4096).mean_running
            for c in (False, True)}
    assert conc[True] > 2 * conc[False]
    evidence.quote("fewer KV blocks with prefix caching (x)", quoted=11, measured=rows[False]["blocks"] / rows[True]["blocks"],
                   digits=0)
    evidence.quote("mean concurrency without prefix caching", quoted=11.2, measured=conc[False], digits=1)
    evidence.quote("mean concurrency with prefix caching", quoted=37.0, measured=conc[True], digits=1)
    evidence.update(blocks={"without prefix caching": rows[False]["blocks"], "with": rows[True]["blocks"]},
                    prefill_tokens={"without": rows[False]["prefill_tokens"], "with": rows[True]["prefill_tokens"]},
                    mean_running_sequences=conc,
                    counterexample={"requests": 32, "shared_prefix_tokens": 1024,
                                    "kv_blocks_without": rows[False]["blocks"], "kv_blocks_with": rows[True]["blocks"]})


ops = st.lists(st.tuples(st.sampled_from(["add", "fork", "append", "append", "append", "free"]),
                         st.integers(0, 7), st.integers(0, 40)), min_size=1, max_size=60)


@pytest.mark.claim("pa.fork-cow")
@given(ops, st.sampled_from([1, 2, 4]), st.booleans())
def test_fork_shares_blocks_and_writes_copy_on_write(program, bs, caching):
    cache = P.PagedKVCache(P.BlockAllocator(256, bs, prefix_caching=caching))
    model: dict[int, list[int]] = {}                              # what every sequence must read back
    expected_cow = 0
    next_id = 0
    for op, pick, val in program:
        live = sorted(model)
        if op == "add" or not live:
            prompt = [val % 3 + t % 2 for t in range(val % 9 + 1)]  # repetitive prompts exercise prefix hits
            cache.add_sequence(next_id, prompt)
            model[next_id] = prompt
            next_id += 1
            continue
        sid = live[pick % len(live)]
        if op == "fork":
            cache.fork(sid, next_id)
            model[next_id] = list(model[sid])
            next_id += 1
        elif op == "append":
            n = len(model[sid])
            last = cache.tables[sid][-1]
            if n % bs and cache.alloc.refcount[last] > 1:
                expected_cow += 1
            cache.append(sid, val)
            model[sid].append(val)
        else:
            cache.free(sid)
            del model[sid]
        for s, toks in model.items():
            assert cache.tokens(s) == toks
        refs = Counter(b for t in cache.tables.values() for b in t)
        assert all(cache.alloc.refcount[b] == refs.get(b, 0) for b in range(cache.alloc.num_blocks))
        used = set(refs)
        free, cached = set(cache.alloc.free), set(cache.alloc.evictable)
        assert not (used & free) and not (used & cached) and len(used | free | cached) == cache.alloc.num_blocks
        assert cache.slots_held() == len(used) * bs
        assert cache.tokens_stored() == sum(len(cache.alloc.slots[b]) for b in used)
    assert cache.stats.cow_copies == expected_cow


def test_fork_then_divergent_appends_copy_one_block():
    cache = P.PagedKVCache(P.BlockAllocator(16, 4))
    cache.add_sequence(0, [1, 2, 3, 4, 5, 6])                  # blocks: [1 2 3 4] [5 6 _ _]
    cache.fork(0, 1)
    assert cache.tables[0] == cache.tables[1] and cache.alloc.refcount[cache.tables[0][0]] == 2
    cache.append(1, 7)                                         # shared partial block: copy, then write
    assert cache.stats.cow_copies == 1 and cache.tables[0][0] == cache.tables[1][0]
    assert cache.tables[0][1] != cache.tables[1][1]
    assert cache.tokens(0) == [1, 2, 3, 4, 5, 6] and cache.tokens(1) == [1, 2, 3, 4, 5, 6, 7]


@pytest.mark.claim("pa.kv-depends-on-prefix")
def test_a_block_kv_depends_on_every_earlier_token(evidence):
    cfg = tiny_config(2, n_layers=2)
    model = TinyDecoder(cfg)
    block = [11, 12, 13, 14]
    caches = []
    for prefix in ([1, 2, 3, 4], [5, 6, 7, 8]):
        cache = model.new_cache(1, 8, "fp32")
        model(torch.tensor([prefix + block]), cache, 0)
        caches.append(cache)
    k0 = [c.layers[0]["k"][..., 4:8, :] for c in caches]
    k1 = [c.layers[1]["k"][..., 4:8, :] for c in caches]
    assert torch.equal(k0[0], k0[1])                  # layer 0: K of a token depends on the token and position
    diff = (k1[0] - k1[1]).abs().max().item()
    assert diff > 1e-3                                # layer 1: it depends on what came before
    cache = P.PagedKVCache(P.BlockAllocator(16, 4, prefix_caching=True))
    assert cache.add_sequence(0, [1, 2, 3, 4] + block) == 0
    assert cache.add_sequence(1, [5, 6, 7, 8] + block) == 0      # same block tokens, other prefix: no hit
    assert cache.add_sequence(2, [1, 2, 3, 4] + block) == 8      # same prefix: both blocks reused
    evidence.update(layer0_k_equal=True, layer1_k_max_abs_diff=diff,
                    hits={"same block, other prefix": 0, "same prefix and block": 8})


def test_parallel_samples_share_the_prompt_and_copy_the_partial_block():
    """One request, prompt of 20 tokens (a full 16-token block and 4 more), 3 samples, 5 output tokens each,
    16-token blocks. After the first step: the full block is shared by all three; the partial block is shared
    too, so the first two samples to append copy it (copy-on-write) and the last writes in place."""
    trace = [P.Request(0, 0, tuple(range(20)), 5, samples=3)]
    r = P.simulate(trace, capacity_tokens=64 * 16, paged=True, block_size=16)
    assert r.finished == 3 and r.cow_copies == 2 and r.preemptions == 0
    assert r.tokens_stored[0] == 16 + 3 * 5 and r.slots_held[0] == 4 * 16       # 1 shared + 3 private blocks
    assert r.tokens_stored[-2] == 16 + 3 * 8                                     # after 4 tokens per sample
    contiguous = P.simulate(trace, capacity_tokens=64 * 16, paged=False, reserve="exact")
    assert contiguous.finished == 3 and contiguous.slots_held[0] == 3 * 25      # one private copy each
    # with several samples per request on a real trace: every sample finishes, nothing leaks
    many = P.synthetic_trace(n=40, seed=3, samples=4, mean_prompt=100, mean_output=30)
    r = P.simulate(many, capacity_tokens=32 * 2048, paged=True, block_size=16)
    assert r.finished == 40 * 4 and r.slots_held[-1] == 0 and r.cow_copies > 0
