"""Static versus continuous (iteration-level) batching, timed by the roofline of each iteration.

A job is (prompt length, output length). Every iteration is one forward pass whose time is
``mixed_step_cost(...).time(gpu)`` = max(FLOPs/peak, bytes/bandwidth).

* Static batching (request-level, e.g. a plain ``generate`` loop): take ``batch`` jobs, prefill them padded
  to the longest prompt, then decode the whole batch until its longest output is done; finished sequences
  keep their slot (and are computed as padding) until then; the next batch starts only afterwards.
* Continuous batching (Orca, OSDI'22): after every iteration finished sequences leave and waiting jobs
  take the free slots at the next iteration, their whole prompt prefilled in that same iteration
  (Orca-style, no chunking), so one long prompt makes that iteration slow for every decode in it.

Reported: throughput (output tokens/s), slot occupancy, achieved FLOP/s as a fraction of peak, and the
generation stall Sarathi-Serve describes: the longest iteration that has decodes in flight against the
median decode-only iteration. (An iteration that only prefills, like the cold start, delays no decode.)
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from statistics import median

from .kv_cache import ModelConfig
from .roofline import GPU, mixed_step_cost


@dataclass(frozen=True)
class Job:
    prompt: int
    output: int


@dataclass
class Schedule:
    time: float = 0.0
    flops: float = 0.0
    tokens_out: int = 0
    busy_slot_steps: int = 0
    slot_steps: int = 0
    iter_times: list[float] = field(default_factory=list)
    decode_only_times: list[float] = field(default_factory=list)
    decodes_in_flight: list[int] = field(default_factory=list)   # per iteration: sequences it decodes
    idle_while_waiting: int = 0     # slot-iterations left empty although a job was waiting

    def add(self, cost, gpu: GPU, busy: int, slots: int, decode_only: bool, waiting: int = 0,
            decodes: int = 0) -> None:
        self.idle_while_waiting += min(slots - busy, waiting)
        t = cost.time(gpu)
        self.time += t
        self.flops += cost.flops
        self.busy_slot_steps += busy
        self.slot_steps += slots
        self.iter_times.append(t)
        self.decodes_in_flight.append(decodes)
        if decode_only:
            self.decode_only_times.append(t)

    @property
    def throughput(self) -> float:
        return self.tokens_out / self.time

    @property
    def slot_occupancy(self) -> float:
        return self.busy_slot_steps / self.slot_steps

    def compute_utilisation(self, gpu: GPU) -> float:
        return self.flops / (self.time * gpu.peak_flops)

    @property
    def stall_ratio(self) -> float:
        """Longest iteration with at least one decode in flight / median decode-only iteration."""
        stalling = [t for t, d in zip(self.iter_times, self.decodes_in_flight) if d > 0]
        if not stalling or not self.decode_only_times:
            return 1.0
        return max(stalling) / median(self.decode_only_times)


def static_batching(jobs: list[Job], cfg: ModelConfig, gpu: GPU, batch: int) -> Schedule:
    res = Schedule()
    for g in range(0, len(jobs), batch):
        group = jobs[g:g + batch]
        p_max, o_max = max(j.prompt for j in group), max(j.output for j in group)
        res.add(mixed_step_cost(cfg, [(p_max, 0)] * len(group)), gpu, len(group), batch, False)
        for k in range(1, o_max):                       # token 0 came out of the prefill
            busy = sum(1 for j in group if j.output > k)
            res.add(mixed_step_cost(cfg, [(1, p_max + k - 1)] * len(group)), gpu, busy, batch, True,
                    waiting=len(jobs) - g - len(group), decodes=len(group))
        res.tokens_out += sum(j.output for j in group)
    return res


def continuous_batching(jobs: list[Job], cfg: ModelConfig, gpu: GPU, batch: int) -> Schedule:
    res = Schedule()
    waiting = deque(jobs)
    running: list[list[int]] = []                       # [context, tokens produced, output length]
    while waiting or running:
        seqs, admitted = [], 0
        for r in running:
            seqs.append((1, r[0]))
        decodes = len(seqs)
        while waiting and len(running) < batch:
            j = waiting.popleft()
            seqs.append((j.prompt, 0))
            running.append([0, 0, j.output, j.prompt])
            admitted += 1
        res.add(mixed_step_cost(cfg, seqs), gpu, len(running), batch, admitted == 0, waiting=len(waiting),
                decodes=decodes)
        nxt = []
        for r in running:
            if r[1] == 0 and r[0] == 0:                 # prefilled this iteration: first token out
                r[0] = r[3]
            else:
                r[0] += 1
            r[1] += 1
            res.tokens_out += 1
            if r[1] < r[2]:
                nxt.append(r)
        running = nxt
    return res


# ------------------------------------------------------------------ latency: chunked prefill, P/D split
@dataclass(frozen=True)
class Arrival:
    """A request arriving at ``at`` seconds with ``job.prompt`` prompt tokens, wanting ``job.output`` tokens."""

    at: float
    job: Job


def poisson_trace(n: int, rate: float, seed: int = 0, *, mean_prompt: float = 512, mean_output: float = 128,
                  sigma: float = 0.8, max_len: int = 4096) -> list[Arrival]:
    """``paged_kv.synthetic_trace`` (log-normal lengths, Poisson arrivals) at ``rate`` requests per second,
    its arrival steps read as milliseconds."""
    from .paged_kv import synthetic_trace

    if rate <= 0:
        raise ValueError(f"rate must be positive, got {rate}")
    trace = synthetic_trace(n=n, seed=seed, max_len=max_len, mean_prompt=mean_prompt, mean_output=mean_output,
                            sigma=sigma, arrivals_per_step=rate / 1000, vocab=2)
    return [Arrival(r.arrival / 1000, Job(len(r.prompt), r.output_len)) for r in trace]


@dataclass
class _Seq:
    rid: int
    ready: float          # when it may join a batch (arrival, or KV landed on a decode replica)
    to_prefill: int       # prompt tokens still to run through the model
    context: int          # tokens already in the KV cache
    left: int             # output tokens still to produce
    last: float = 0.0     # time of its latest output token


@dataclass
class Latency:
    """Per-request first-token time, every inter-token gap and the iterations of a serving run."""

    ttft: dict[int, float] = field(default_factory=dict)                # request -> first token - arrival
    gaps: dict[int, list[float]] = field(default_factory=dict)          # request -> its time between tokens
    done: dict[int, float] = field(default_factory=dict)                # request -> time of its last token
    iterations: list[tuple[float, int, int]] = field(default_factory=list)   # (seconds, decodes, prefill tokens)
    tokens_out: int = 0
    start: float = 0.0

    @property
    def tbt(self) -> list[float]:
        return [g for gs in self.gaps.values() for g in gs]

    @property
    def makespan(self) -> float:
        return max(self.done.values()) - self.start

    @property
    def throughput(self) -> float:
        return self.tokens_out / self.makespan

    @property
    def decode_stall(self) -> float:
        """Longest iteration that carried decodes *and* prefill work over the median decode-only iteration:
        how long a prefill holds up the sequences being generated (cold-start prefills, with no decode in
        flight, are left out)."""
        mixed = [t for t, dec, pre in self.iterations if dec and pre]
        alone = [t for t, dec, pre in self.iterations if dec and not pre]
        return max(mixed) / median(alone) if mixed and alone else 1.0

    def merge(self, other: "Latency") -> None:
        for r, v in other.ttft.items():
            self.ttft[r] = v
        for r, v in other.gaps.items():
            self.gaps.setdefault(r, []).extend(v)
        for r, v in other.done.items():
            self.done[r] = max(v, self.done.get(r, v))
        self.iterations += other.iterations
        self.tokens_out += other.tokens_out


def percentile(xs: list[float], q: float) -> float:
    """The q-th percentile (0 <= q <= 100), nearest rank."""
    if not xs:
        raise ValueError("percentile of nothing")
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, math.ceil(q / 100 * len(s)) - 1))]


def _replica(seqs: list[_Seq], arrivals: dict[int, float], cfg: ModelConfig, gpu: GPU, slots: int,
             token_budget: int | None, chunked: bool, decode: bool = True) -> Latency:
    """One GPU serving ``seqs`` with iteration-level scheduling (at most ``slots`` sequences at once).

    Each iteration runs one decode token for every sequence whose prompt is done, plus prompt work, first
    come first served. ``chunked=False``: whole prompts while their tokens fit in ``token_budget`` (None:
    unbounded; one prompt longer than the budget still runs, alone: nothing is split; vLLM's
    ``max_num_batched_tokens``); the decodes ride along outside the budget (Orca's mixed batches).
    ``chunked=True``: the decodes count against the budget and the next prompt is cut to fill the rest
    exactly (Sarathi-Serve's stall-free batching; started prompts continue first).
    A prompt's last piece emits its first token. ``decode=False``: a prefill-only replica, a sequence
    leaves once its prompt is done."""
    out = Latency(start=min(s.ready for s in seqs) if seqs else 0.0)
    waiting = deque(sorted(seqs, key=lambda s: (s.ready, s.rid)))
    running: list[_Seq] = []
    clock = out.start
    while waiting or running:
        if not running and waiting[0].ready > clock:
            clock = waiting[0].ready
        while len(running) < slots and waiting and waiting[0].ready <= clock and waiting[0].to_prefill == 0:
            running.append(waiting.popleft())           # its KV is already here (a decode replica)
        decoding = [s for s in running if s.to_prefill == 0]
        batch = [(1, s.context) for s in decoding]
        room = None if token_budget is None else token_budget - (len(decoding) if chunked else 0)
        chunks: dict[int, int] = {}

        def take(s: _Seq) -> bool:
            nonlocal room
            if room is None:
                n = s.to_prefill
            elif chunked:
                n = min(s.to_prefill, room)
            else:
                n = s.to_prefill if s.to_prefill <= room or not chunks else 0
            if n <= 0:
                return False
            chunks[s.rid] = n
            batch.append((n, s.context))
            if room is not None:
                room -= n
            return True

        for s in running:
            if s.to_prefill and not take(s):
                break
        else:
            while (len(running) < slots and waiting and waiting[0].ready <= clock and waiting[0].to_prefill
                   and take(waiting[0])):
                running.append(waiting.popleft())
        if not batch:                                    # nothing runnable yet: wait for the next arrival
            clock = max(clock, waiting[0].ready)
            continue
        dt = mixed_step_cost(cfg, batch).time(gpu)
        clock += dt
        out.iterations.append((dt, len(decoding), sum(chunks.values())))
        for s in running:
            if s.to_prefill == 0:
                s.context += 1
                s.left -= 1
                out.gaps.setdefault(s.rid, []).append(clock - s.last)
            elif s.rid in chunks:
                s.to_prefill -= chunks[s.rid]
                s.context += chunks[s.rid]
                if s.to_prefill:
                    continue
                s.left -= 1                              # the prompt's last piece emits the first token
                out.ttft[s.rid] = clock - arrivals[s.rid]
            else:
                continue
            out.tokens_out += 1
            s.last = clock
            if s.left == 0 or not decode:
                out.done[s.rid] = clock
        running = [s for s in running if s.rid not in out.done]
    return out


def serve(trace: list[Arrival], cfg: ModelConfig, gpu: GPU, *, slots: int, token_budget: int | None = None,
          chunked: bool = False, replicas: int = 1) -> Latency:
    """Prefill and decode on the same GPUs: ``replicas`` copies of the model, requests dealt round-robin,
    each replica batching at the iteration level (see :func:`_replica`): whole prompts up to
    ``token_budget`` tokens per iteration, or with ``chunked`` prompts cut to fill it (Sarathi-Serve)."""
    if slots < 1 or replicas < 1:
        raise ValueError("slots and replicas must be >= 1")
    if token_budget is not None and token_budget < 1:
        raise ValueError(f"token_budget must be >= 1, got {token_budget}")
    arrivals = {i: a.at for i, a in enumerate(trace)}
    total = Latency(start=min(arrivals.values()))
    for r in range(replicas):
        mine = [_Seq(i, a.at, a.job.prompt, 0, a.job.output, a.at) for i, a in enumerate(trace) if i % replicas == r]
        if mine:
            total.merge(_replica(mine, arrivals, cfg, gpu, slots, token_budget, chunked))
    return total


def kv_transfer_seconds(cfg: ModelConfig, tokens: int, bandwidth: float, latency: float = 0.0,
                        dtype: str = "bf16") -> float:
    """Time to ship a prompt's KV cache from a prefill GPU to a decode GPU: latency + bytes / bandwidth."""
    from .kv_cache import kv_cache_bytes

    return latency + kv_cache_bytes(cfg, tokens, 1, dtype) / bandwidth


def serve_disaggregated(trace: list[Arrival], cfg: ModelConfig, gpu: GPU, *, prefill_gpus: int, decode_gpus: int,
                        slots: int, bandwidth: float, latency: float = 0.0, prefill_budget: int | None = None,
                        chunked: bool = False) -> Latency:
    """Prefill and decode on separate GPUs (DistServe, Splitwise). Prefill replicas (dealt round-robin) run
    prompts only, up to ``prefill_budget`` tokens per iteration (``chunked`` as in :func:`serve`), and emit
    the first token; each prompt's KV cache then crosses the link
    (:func:`kv_transfer_seconds`) and the request joins a decode replica (round-robin), which batches
    decodes only. The first inter-token gap includes the transfer and the wait for a decode slot."""
    if prefill_gpus < 1 or decode_gpus < 1:
        raise ValueError("need at least one prefill and one decode GPU")
    arrivals = {i: a.at for i, a in enumerate(trace)}
    total = Latency(start=min(arrivals.values()))
    for r in range(prefill_gpus):
        mine = [_Seq(i, a.at, a.job.prompt, 0, a.job.output, a.at) for i, a in enumerate(trace) if i % prefill_gpus == r]
        if mine:
            total.merge(_replica(mine, arrivals, cfg, gpu, slots, prefill_budget, chunked, decode=False))
    landed = []
    for i, a in enumerate(trace):
        first = a.at + total.ttft[i]
        if a.job.output > 1:
            landed.append(_Seq(i, first + kv_transfer_seconds(cfg, a.job.prompt, bandwidth, latency), 0,
                               a.job.prompt, a.job.output - 1, first))
    landed.sort(key=lambda s: (s.ready, s.rid))
    for r in range(decode_gpus):
        mine = landed[r::decode_gpus]
        if mine:
            total.merge(_replica(mine, arrivals, cfg, gpu, slots, None, False))
    return total
