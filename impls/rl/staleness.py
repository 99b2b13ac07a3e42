r"""Asynchronous RL: rollouts k policy versions old — their importance ratios, the bias of an update that
ignores them, what an IS correction or a staleness bound does; why producers faster than the learner make
data staler; what partial rollouts do to the long tail.

**Exact bandit.** A softmax policy π_θ over A actions (one token decision) with reward r. Its gradient is
g(θ) = E_{a~π_θ}[r(a)∇log π_θ(a)] = π ⊙ (r − π·r) (∇ over the logits: ∇log π_a = e_a − π). From data of the
behaviour policy μ = π_{θ_{t−k}}, with the advantage A = r − E_μ[r] (the mean reward of the same rollouts,
as GRPO/RLOO baselines are), in expectation over a ~ μ:

    uncorrected   Σ_a μ(a) A(a) (e_a − π)                      biased unless μ = π
    full IS       Σ_a μ(a) w(a) A(a) (e_a − π),  w = π/μ       = g(θ_t) exactly (a constant baseline adds 0)
    truncated IS  w → min(w, C)                                 (TIS; biased only where π/μ > C)

The weights come from ``impls.rl.importance.is_weights`` and ``impls.rl.rollout_correction.rollout_is_weights``.
The spread of w under μ is its standard deviation √χ²(π‖μ) (``importance.chi2_divergence``).

**Queue.** ``async_queue``: A rollout workers each turn out a trajectory every ``gen_time`` seconds with the
weights current when they started; the learner takes ``batch`` of them (oldest first) per update of
``train_time``. Staleness = the learner's version when it consumes a trajectory minus the version that made
it. When workers produce faster than the learner consumes, the queue — and the staleness — grow without
bound; ``max_staleness`` drops trajectories older than the bound (their generation wasted).

**Partial rollouts** (Kimi k1.5, §2.6.2). ``rollout_round``: ``slots`` sequences decode in lockstep; a
synchronous round waits for the longest; with a per-round ``budget`` unfinished sequences pause, keep their
KV and continue next round under the newer weights, and freed slots take new prompts.
"""

from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass

import torch

from impls.rl.importance import chi2_divergence, is_weights
from impls.rl.rollout_correction import rollout_is_weights

CORRECTIONS = ("none", "is", "tis")


def policy(theta: torch.Tensor) -> torch.Tensor:
    return torch.softmax(theta.double(), -1)


def exact_gradient(theta: torch.Tensor, reward: torch.Tensor) -> torch.Tensor:
    """g(θ) = π ⊙ (r − π·r)."""
    pi = policy(theta)
    return pi * (reward.double() - (pi * reward.double()).sum())


def weights(theta: torch.Tensor, behaviour: torch.Tensor, correction: str, cap: float = 2.0) -> torch.Tensor:
    """Per-action weights on μ-data: 1 (uncorrected), π/μ (IS) or min(π/μ, cap) (TIS)."""
    if correction not in CORRECTIONS:
        raise ValueError(f"correction must be one of {CORRECTIONS}, got {correction!r}")
    logp, logmu = torch.log_softmax(theta.double(), -1), torch.log_softmax(behaviour.double(), -1)
    if correction == "none":
        return torch.ones_like(logp)
    if correction == "is":
        return is_weights(logp, logmu)
    return rollout_is_weights(logp[None], logmu[None], torch.ones_like(logp)[None], upper=cap)[0]


def stale_gradient(theta: torch.Tensor, behaviour: torch.Tensor, reward: torch.Tensor, correction: str = "none",
                   cap: float = 2.0) -> torch.Tensor:
    """E_{a~μ}[w(a) A(a) ∇log π_θ(a)] with μ = softmax(``behaviour``), A = r − E_μ[r]."""
    pi, mu = policy(theta), policy(behaviour)
    w = weights(theta, behaviour, correction, cap)
    adv = reward.double() - (mu * reward.double()).sum()
    coef = mu * w * adv                                                # per action
    return coef - coef.sum() * pi                                      # Σ_a coef_a (e_a − π)


def expected_reward(theta: torch.Tensor, reward: torch.Tensor) -> float:
    return float((policy(theta) * reward.double()).sum())


def bandit(actions: int = 16, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """(initial logits, rewards): small random logits and rewards in [0, 1]."""
    gen = torch.Generator().manual_seed(seed)
    return 0.1 * torch.randn(actions, generator=gen, dtype=torch.float64), torch.rand(actions, generator=gen,
                                                                                    dtype=torch.float64)


def trajectory(theta0: torch.Tensor, reward: torch.Tensor, steps: int, lr: float) -> list[torch.Tensor]:
    """θ_0..θ_steps of synchronous (on-policy) exact gradient ascent."""
    out = [theta0.double()]
    for _ in range(steps):
        out.append(out[-1] + lr * exact_gradient(out[-1], reward))
    return out


@dataclass
class StaleStats:
    bias: float          # mean ‖ĝ − g‖ / ‖g‖ over the trajectory
    ratio_std: float     # mean standard deviation of π/μ under μ
    ratio_max: float     # largest π/μ seen


def staleness_stats(thetas: list[torch.Tensor], reward: torch.Tensor, k: int, correction: str = "none",
                    cap: float = 2.0) -> StaleStats:
    """Bias and ratio spread when the update at step t uses data of θ_{t−k}, along a fixed trajectory."""
    if k < 0 or k >= len(thetas):
        raise ValueError(f"k must be in [0, {len(thetas) - 1}], got {k}")
    bias, std, top = [], [], 0.0
    for t in range(k, len(thetas)):
        g = exact_gradient(thetas[t], reward)
        est = stale_gradient(thetas[t], thetas[t - k], reward, correction, cap)
        bias.append(float((est - g).norm() / g.norm()))
        std.append(float(chi2_divergence(policy(thetas[t]), policy(thetas[t - k])).clamp_min(0).sqrt()))
        top = max(top, float((policy(thetas[t]) / policy(thetas[t - k])).max()))
    return StaleStats(sum(bias) / len(bias), sum(std) / len(std), top)


def train_async(theta0: torch.Tensor, reward: torch.Tensor, steps: int, lr: float, k: int, correction: str = "none",
                cap: float = 2.0, bound: int | None = None) -> list[float]:
    """Expected reward after each update when every update uses data ``k`` versions old (``bound``: never
    older than ``bound`` versions — the learner waits for fresher data)."""
    lag = k if bound is None else min(k, bound)
    thetas = [theta0.double()]
    curve = []
    for t in range(steps):
        behaviour = thetas[max(0, t - lag)]
        thetas.append(thetas[-1] + lr * stale_gradient(thetas[-1], behaviour, reward, correction, cap))
        curve.append(expected_reward(thetas[-1], reward))
    return curve


# ------------------------------------------------------------------------------------ the queue
@dataclass
class QueueStats:
    staleness: list[int]       # per consumed trajectory, in consumption order
    queue: list[int]           # trajectories waiting after each update
    dropped: int

    @property
    def mean(self) -> float:
        return sum(self.staleness) / len(self.staleness)


def async_queue(workers: int, gen_time: float, train_time: float, batch: int, updates: int,
                max_staleness: int | None = None) -> QueueStats:
    """Event simulation of rollout workers feeding one learner (see the module docstring)."""
    if min(workers, batch, updates) < 1 or gen_time <= 0 or train_time <= 0:
        raise ValueError("workers, batch, updates must be >= 1 and the times positive")
    version, clock, dropped = 0, 0.0, 0
    done: list[tuple[float, int, int]] = []            # (finish time, worker, version used) min-heap
    for w in range(workers):
        heapq.heappush(done, (gen_time, w, 0))
    queue: deque[int] = deque()
    out = QueueStats([], [], 0)
    for _ in range(updates):
        while len(queue) < batch:                      # wait for enough trajectories
            t, w, v = heapq.heappop(done)
            clock = max(clock, t)
            queue.append(v)
            heapq.heappush(done, (t + gen_time, w, version))
            if max_staleness is not None:
                while queue and version - queue[0] > max_staleness:
                    queue.popleft()
                    dropped += 1
        for _ in range(batch):
            out.staleness.append(version - queue.popleft())
        clock += train_time
        published = version + 1                        # the new weights, from ``clock`` on
        while done and done[0][0] <= clock:            # trajectories finished while the learner trained
            t, w, v = heapq.heappop(done)
            queue.append(v)
            heapq.heappush(done, (t + gen_time, w, version if t < clock else published))
        version = published
        if max_staleness is not None:
            while queue and version - queue[0] > max_staleness:
                queue.popleft()
                dropped += 1
        out.queue.append(len(queue))
    out.dropped = dropped
    return out


# ------------------------------------------------------------------------------ partial rollouts
@dataclass
class RolloutStats:
    steps: int                 # decode steps (lockstep) taken
    finished: int              # trajectories completed
    busy_slot_steps: int       # slot-steps spent decoding a live sequence
    slots: int
    versions: list[int]        # per finished trajectory: how many policy versions produced it

    @property
    def utilisation(self) -> float:
        return self.busy_slot_steps / (self.steps * self.slots)

    @property
    def mixed_share(self) -> float:
        return sum(v > 1 for v in self.versions) / len(self.versions)


def rollout_round(lengths: list[int], slots: int, budget: int | None = None) -> RolloutStats:
    """Decode the responses ``lengths`` (in order) with ``slots`` sequences at a time. ``budget=None``:
    synchronous rounds — fill the slots, decode until the longest is done, repeat. With a ``budget``: each
    round decodes at most ``budget`` steps; unfinished sequences continue next round (a new policy version),
    finished slots take the next prompts."""
    if slots < 1 or (budget is not None and budget < 1):
        raise ValueError("slots and budget must be >= 1")
    pending = deque(lengths)
    live: list[list[int]] = []                         # [tokens left, versions seen]
    stats = RolloutStats(0, 0, 0, slots, [])
    while pending or live:
        while len(live) < slots and pending:
            live.append([pending.popleft(), 0])
        for s in live:
            s[1] += 1
        horizon = max(s[0] for s in live) if budget is None else min(budget, max(s[0] for s in live))
        stats.steps += horizon
        stats.busy_slot_steps += sum(min(s[0], horizon) for s in live)
        for s in live:
            s[0] -= min(s[0], horizon)
        for s in live:
            if s[0] == 0:
                stats.finished += 1
                stats.versions.append(s[1])
        live = [s for s in live if s[0] > 0]
    return stats
