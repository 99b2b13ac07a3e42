"""Paged KV-cache memory management (vLLM's PagedAttention, arXiv 2309.06180 §4) against contiguous
max-length reservation, simulated token by token on a reproducible request trace.

* ``BlockAllocator``: a pool of physical blocks of ``block_size`` token slots with reference counts. With
  prefix caching a full block is registered under h_i = hash(h_{i-1}, tokens of block i) (the hash of the
  block *and everything before it*, as vLLM's automatic prefix caching does) and is kept, evictable in LRU
  order, after its last user frees it.
* ``PagedKVCache``: per-sequence block tables. ``fork`` shares every block (refcount + 1); appending to a
  shared, partly filled last block copies it first (copy-on-write); a new block is taken only when the last
  one is full, so at most ``block_size - 1`` slots per sequence are empty.
* ``ContiguousKVCache``: each request reserves one contiguous range (of ``max_len`` slots, or of exactly
  prompt + output) in a linear address space, first fit, as pre-paging servers did.
* ``simulate``: both managers serve the same trace step by step (one decode token per running sequence per
  step, FCFS admission while memory allows; the paged one preempts the newest sequence when it runs out)
  and report how many slots they hold against how many tokens they store.

Pure Python, no tensors: the slots store token ids so tests can read every sequence back.
"""

from __future__ import annotations

import math
import random
from collections import OrderedDict, deque
from dataclasses import dataclass, field


class OutOfBlocks(RuntimeError):
    pass


class BlockAllocator:
    def __init__(self, num_blocks: int, block_size: int, prefix_caching: bool = False):
        if num_blocks < 1 or block_size < 1:
            raise ValueError("num_blocks and block_size must be positive")
        self.num_blocks, self.block_size, self.prefix_caching = num_blocks, block_size, prefix_caching
        self.free: deque[int] = deque(range(num_blocks))
        self.refcount = [0] * num_blocks
        self.slots: list[list[int]] = [[] for _ in range(num_blocks)]
        self.hash_of: dict[int, int] = {}
        self.by_hash: dict[int, int] = {}
        self.evictable: OrderedDict[int, None] = OrderedDict()   # cached blocks nobody uses, LRU first
        self.evictions = 0
        self.n_used = 0      # blocks with refcount > 0
        self.n_filled = 0    # token slots written in those blocks

    def allocate(self) -> int:
        if self.free:
            b = self.free.popleft()
        elif self.evictable:
            b, _ = self.evictable.popitem(last=False)
            del self.by_hash[self.hash_of.pop(b)]
            self.evictions += 1
        else:
            raise OutOfBlocks(f"all {self.num_blocks} blocks are in use")
        self.refcount[b] = 1
        self.slots[b] = []
        self.n_used += 1
        return b

    def write(self, b: int, tokens) -> None:
        """Store the KV of ``tokens`` (here: their ids) in the next free slots of block ``b``."""
        if len(self.slots[b]) + len(tokens) > self.block_size:
            raise ValueError(f"block {b} overflows")
        self.slots[b].extend(tokens)
        self.n_filled += len(tokens)

    def incref(self, b: int) -> None:
        if self.refcount[b] == 0:
            self.evictable.pop(b, None)
            self.n_used += 1
            self.n_filled += len(self.slots[b])
        self.refcount[b] += 1

    def decref(self, b: int) -> None:
        if self.refcount[b] <= 0:
            raise RuntimeError(f"block {b} freed more often than referenced")
        self.refcount[b] -= 1
        if self.refcount[b] == 0:
            self.n_used -= 1
            self.n_filled -= len(self.slots[b])
            if b in self.hash_of:
                self.evictable[b] = None
            else:
                self.slots[b] = []
                self.free.append(b)

    def lookup(self, h: int) -> int | None:
        b = self.by_hash.get(h) if self.prefix_caching else None
        if b is not None:
            self.incref(b)
        return b

    def register(self, b: int, h: int) -> None:
        if self.prefix_caching and h not in self.by_hash:
            self.by_hash[h] = b
            self.hash_of[b] = h

    @property
    def available(self) -> int:
        return len(self.free) + len(self.evictable)

    @property
    def in_use(self) -> list[int]:
        return [b for b in range(self.num_blocks) if self.refcount[b] > 0]


def block_hash(parent: int | None, tokens) -> int:
    """vLLM-style chained block hash: the block's tokens together with the hash of its prefix."""
    return hash((parent, tuple(tokens)))


@dataclass
class PagedStats:
    cow_copies: int = 0
    prefix_hit_tokens: int = 0
    prompt_tokens: int = 0


class PagedKVCache:
    def __init__(self, allocator: BlockAllocator):
        self.alloc = allocator
        self.bs = allocator.block_size
        self.tables: dict[int, list[int]] = {}
        self.lengths: dict[int, int] = {}
        self.last_hash: dict[int, int | None] = {}
        self.stats = PagedStats()

    def blocks_needed(self, n_tokens: int) -> int:
        return math.ceil(n_tokens / self.bs)

    def add_sequence(self, sid: int, prompt: list[int]) -> int:
        """Store a prompt; full blocks already cached under the same chained hash are reused.
        Returns the number of prompt tokens whose KV was found in the cache (no prefill needed)."""
        if sid in self.tables:
            raise ValueError(f"sequence {sid} exists")
        table, parent, hit, taken = [], None, 0, []
        try:
            for start in range(0, len(prompt), self.bs):
                chunk = prompt[start:start + self.bs]
                full = len(chunk) == self.bs
                h = block_hash(parent, chunk) if full else None
                b = self.alloc.lookup(h) if full else None
                if b is not None:
                    hit += self.bs
                else:
                    b = self.alloc.allocate()
                    self.alloc.write(b, chunk)
                    if full:
                        self.alloc.register(b, h)
                taken.append(b)
                table.append(b)
                parent = h
        except OutOfBlocks:
            for b in taken:
                self.alloc.decref(b)
            raise
        self.tables[sid], self.lengths[sid], self.last_hash[sid] = table, len(prompt), parent
        self.stats.prefix_hit_tokens += hit
        self.stats.prompt_tokens += len(prompt)
        return hit

    def append(self, sid: int, token: int) -> None:
        """Write one new token's KV: a new block when the last is full, a private copy when it is shared."""
        table, n = self.tables[sid], self.lengths[sid]
        pos = n % self.bs
        if pos == 0:
            table.append(self.alloc.allocate())
        elif self.alloc.refcount[table[-1]] > 1:
            new = self.alloc.allocate()
            self.alloc.write(new, self.alloc.slots[table[-1]][:pos])
            self.alloc.decref(table[-1])
            table[-1] = new
            self.stats.cow_copies += 1
        b = table[-1]
        self.alloc.write(b, [token])
        self.lengths[sid] = n + 1
        if pos + 1 == self.bs:
            h = block_hash(self.last_hash[sid], self.alloc.slots[b])
            self.alloc.register(b, h)
            self.last_hash[sid] = h

    def needs_block(self, sid: int) -> int:
        """1 if appending a token to ``sid`` takes a block (last block full, or shared and copied)."""
        pos = self.lengths[sid] % self.bs
        return int(pos == 0 or self.alloc.refcount[self.tables[sid][-1]] > 1)

    def fork(self, parent: int, child: int) -> None:
        """The child shares all of the parent's blocks (parallel sampling, beam search)."""
        if child in self.tables:
            raise ValueError(f"sequence {child} exists")
        for b in self.tables[parent]:
            self.alloc.incref(b)
        self.tables[child] = list(self.tables[parent])
        self.lengths[child] = self.lengths[parent]
        self.last_hash[child] = self.last_hash[parent]

    def free(self, sid: int) -> None:
        for b in self.tables.pop(sid):
            self.alloc.decref(b)
        del self.lengths[sid], self.last_hash[sid]

    def tokens(self, sid: int) -> list[int]:
        """Read the sequence back through its block table."""
        out = [t for b in self.tables[sid] for t in self.alloc.slots[b]]
        return out[: self.lengths[sid]]

    def slots_held(self) -> int:
        return self.alloc.n_used * self.bs

    def tokens_stored(self) -> int:
        """Distinct token states physically stored (a shared block counts once)."""
        return self.alloc.n_filled


class ContiguousKVCache:
    """First-fit contiguous reservations in a linear space of ``capacity`` token slots."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.ranges: dict[int, tuple[int, int]] = {}   # sid -> (start, reserved)
        self.lengths: dict[int, int] = {}

    def find_hole(self, size: int) -> int | None:
        pos = 0
        for start, size_used in sorted(self.ranges.values()):
            if start - pos >= size:
                return pos
            pos = start + size_used
        return pos if self.capacity - pos >= size else None

    def add_sequence(self, sid: int, n_prompt: int, reserve: int) -> None:
        if reserve < n_prompt:
            raise ValueError("reservation smaller than the prompt")
        start = self.find_hole(reserve)
        if start is None:
            raise OutOfBlocks(f"no contiguous hole of {reserve} slots")
        self.ranges[sid] = (start, reserve)
        self.lengths[sid] = n_prompt

    def append(self, sid: int) -> None:
        if self.lengths[sid] >= self.ranges[sid][1]:
            raise OutOfBlocks(f"sequence {sid} outgrew its reservation")
        self.lengths[sid] += 1

    def free(self, sid: int) -> None:
        del self.ranges[sid], self.lengths[sid]

    def slots_held(self) -> int:
        return sum(r for _, r in self.ranges.values())

    def tokens_stored(self) -> int:
        return sum(self.lengths.values())

    def free_slots(self) -> int:
        return self.capacity - self.slots_held()


@dataclass(frozen=True)
class Request:
    rid: int
    arrival: int          # step at which it arrives
    prompt: tuple[int, ...]
    output_len: int
    samples: int = 1      # parallel samples sharing the prompt


def synthetic_trace(n: int = 200, seed: int = 0, max_len: int = 2048, mean_prompt: float = 256,
                    mean_output: float = 128, sigma: float = 0.8, arrivals_per_step: float = 0.5,
                    shared_prefix_len: int = 0, n_prefixes: int = 1, samples: int = 1,
                    vocab: int = 32000) -> list[Request]:
    """A reproducible trace: log-normal prompt and output lengths (clipped so prompt + output <= max_len),
    Poisson arrivals, optionally a shared system prompt (one of ``n_prefixes``) in front of every prompt."""
    rng = random.Random(seed)
    prefixes = [tuple(rng.randrange(vocab) for _ in range(shared_prefix_len)) for _ in range(n_prefixes)]
    out, t = [], 0.0
    for rid in range(n):
        t += rng.expovariate(arrivals_per_step)
        p = max(1, min(max_len - 1, round(rng.lognormvariate(math.log(mean_prompt), sigma))))
        o = max(1, min(max_len - p, round(rng.lognormvariate(math.log(mean_output), sigma))))
        prefix = prefixes[rng.randrange(n_prefixes)] if shared_prefix_len else ()
        body = tuple(rng.randrange(vocab) for _ in range(max(1, p - len(prefix))))
        out.append(Request(rid, int(t), prefix + body, o, samples))
    return out


@dataclass
class SimResult:
    steps: int
    finished: int
    preemptions: int
    slots_held: list[int] = field(default_factory=list)      # per step
    tokens_stored: list[int] = field(default_factory=list)
    running: list[int] = field(default_factory=list)
    prefix_hit_tokens: int = 0
    cow_copies: int = 0
    capacity: int = 0                                           # token slots in the pool
    table_entries: list[int] = field(default_factory=list)      # paged: block-table entries read per step

    @property
    def utilisation(self) -> float:
        """Stored token states / slots held (reserved or in blocks), summed over the steps (time-weighted).
        Free slots, including holes too small for a waiting request (external fragmentation), are not in the
        denominator: this is the waste inside what the manager holds."""
        held = sum(self.slots_held)
        return sum(self.tokens_stored) / held if held else 1.0

    @property
    def pool_utilisation(self) -> float:
        """Stored token states / the whole pool, time-weighted: vLLM Figure 2's "token states" share."""
        return sum(self.tokens_stored) / (self.capacity * len(self.tokens_stored)) if self.tokens_stored else 0.0

    @property
    def mean_running(self) -> float:
        return sum(self.running) / len(self.running) if self.running else 0.0


def simulate(trace: list[Request], *, capacity_tokens: int, paged: bool, block_size: int = 16,
             reserve: str = "max", max_len: int = 2048, prefix_caching: bool = False,
             max_steps: int = 100_000) -> SimResult:
    """Serve ``trace`` with ``capacity_tokens`` KV slots. ``reserve`` (contiguous only): "max" reserves
    ``max_len`` per sequence, "exact" prompt + output (an oracle that knows the output length)."""
    if paged:
        mgr = PagedKVCache(BlockAllocator(capacity_tokens // block_size, block_size, prefix_caching))
    else:
        mgr = ContiguousKVCache(capacity_tokens)
    waiting = deque(sorted(trace, key=lambda r: (r.arrival, r.rid)))
    running: list[tuple[int, Request, int]] = []   # (sid, request, tokens generated)
    res = SimResult(steps=0, finished=0, preemptions=0, capacity=capacity_tokens)
    sid_of = 0
    step = 0
    while (waiting or running) and step < max_steps:
        # admit in arrival order while memory allows
        while waiting and waiting[0].arrival <= step:
            r = waiting[0]
            sids = list(range(sid_of, sid_of + r.samples))
            try:
                if paged:
                    mgr.add_sequence(sids[0], list(r.prompt))
                    for s in sids[1:]:
                        mgr.fork(sids[0], s)
                else:
                    size = max_len if reserve == "max" else len(r.prompt) + r.output_len
                    added = []
                    try:
                        for s in sids:
                            mgr.add_sequence(s, len(r.prompt), size)
                            added.append(s)
                    except OutOfBlocks:
                        for s in added:
                            mgr.free(s)
                        raise
            except OutOfBlocks:
                break
            waiting.popleft()
            sid_of += r.samples
            running.extend((s, r, 0) for s in sids)
        # make room for this step's new blocks: preempt the newest sequences (they are recomputed later)
        if paged:
            while running and sum(mgr.needs_block(s) for s, _, _ in running) > mgr.alloc.available:
                sid, r, _ = running.pop()
                mgr.free(sid)
                res.preemptions += 1
                waiting.appendleft(Request(r.rid, step, r.prompt, r.output_len, 1))
        # one decode step for every running sequence
        nxt = []
        for sid, r, done in running:
            if paged:
                mgr.append(sid, (r.rid * 7919 + sid * 31 + done) % 32000)
            else:
                mgr.append(sid)
            if done + 1 >= r.output_len:
                mgr.free(sid)
                res.finished += 1
            else:
                nxt.append((sid, r, done + 1))
        running = nxt
        if paged:
            res.table_entries.append(sum(len(mgr.tables[s]) for s, _, _ in running))
        res.slots_held.append(mgr.slots_held())
        res.tokens_stored.append(mgr.tokens_stored())
        res.running.append(len(running))
        step += 1
    res.steps = step
    if paged:
        res.prefix_hit_tokens = mgr.stats.prefix_hit_tokens
        res.cow_copies = mgr.stats.cow_copies
    return res
