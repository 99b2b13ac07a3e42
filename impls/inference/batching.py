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
longest iteration against the median decode-only one (the "generation stall" Sarathi-Serve describes).
"""

from __future__ import annotations

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
    idle_while_waiting: int = 0     # slot-iterations left empty although a job was waiting

    def add(self, cost, gpu: GPU, busy: int, slots: int, decode_only: bool, waiting: int = 0) -> None:
        self.idle_while_waiting += min(slots - busy, waiting)
        t = cost.time(gpu)
        self.time += t
        self.flops += cost.flops
        self.busy_slot_steps += busy
        self.slot_steps += slots
        self.iter_times.append(t)
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
        """Longest iteration / median decode-only iteration."""
        return max(self.iter_times) / median(self.decode_only_times) if self.decode_only_times else 1.0


def static_batching(jobs: list[Job], cfg: ModelConfig, gpu: GPU, batch: int) -> Schedule:
    res = Schedule()
    for g in range(0, len(jobs), batch):
        group = jobs[g:g + batch]
        p_max, o_max = max(j.prompt for j in group), max(j.output for j in group)
        res.add(mixed_step_cost(cfg, [(p_max, 0)] * len(group)), gpu, len(group), batch, False)
        for k in range(1, o_max):                       # token 0 came out of the prefill
            busy = sum(1 for j in group if j.output > k)
            res.add(mixed_step_cost(cfg, [(1, p_max + k - 1)] * len(group)), gpu, busy, batch, True,
                    waiting=len(jobs) - g - len(group))
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
        while waiting and len(running) < batch:
            j = waiting.popleft()
            seqs.append((j.prompt, 0))
            running.append([0, 0, j.output, j.prompt])
            admitted += 1
        res.add(mixed_step_cost(cfg, seqs), gpu, len(running), batch, admitted == 0, waiting=len(waiting))
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
