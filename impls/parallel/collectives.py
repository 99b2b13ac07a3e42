r"""All-reduce three ways on ``torch.distributed`` point-to-point, and their α–β costs.

Each algorithm sums ``x`` over the ranks of ``group`` with ``isend``/``irecv`` only (so a
:class:`~impls.distributed.probes.CollectiveLog` counts every byte a rank puts on the wire):

* **ring** (Patarasuk & Yuan 2009; NCCL's ring): cut the buffer into N chunks (``tensor_split``);
  *reduce-scatter*: at step k rank r sends chunk (r-k) mod N to r+1 and adds what r-1 sends, N-1 steps,
  after which rank r owns the full sum of chunk (r+1) mod N; *all-gather*: N-1 more steps pass the
  finished chunks around. Every step moves S/N, so a rank sends 2(N-1)/N·S in 2(N-1) steps.
* **halving-doubling** (Rabenseifner; Thakur, Rabenseifner & Gropp 2005, §4): N a power of two.
  Reduce-scatter by recursive halving: at round j rank r swaps half of its current range with
  r XOR N/2^{j+1} and keeps the summed half it owns; all-gather by recursive doubling undoes it.
  The same 2(N-1)/N·S per rank, in 2·log2 N steps.
* **tree** (binomial reduce to rank 0, then binomial broadcast): 2·log2 N steps, each moving the whole S.

α–β cost of one all-reduce of S bytes over N ranks, link latency α, bandwidth 1/β
(:func:`alpha_beta_time`; the ring's is :func:`impls.distributed.memory.ring_time`):

    ring               2(N-1)·α + 2(N-1)/N·S·β
    halving-doubling   2·log2N·α + 2(N-1)/N·S·β
    tree               2·log2N·(α + S·β)

The tree beats the ring below the crossover S* = α(N-1-log2N) / (β(log2N-(N-1)/N)) (latency-bound),
the ring wins above it (bandwidth-bound); halving-doubling is never slower than either in this model
(it pays in practice on hierarchical networks, where its far partners cross the slow links).
"""

from __future__ import annotations

import math

import sympy as sp
import torch
import torch.distributed as dist

from impls.distributed.memory import ring_time

ALGORITHMS = ("ring", "halving_doubling", "tree")


def _peers(group) -> tuple[int, int, list[int]]:
    """(this rank in ``group``, group size, the group's global ranks in group-rank order)."""
    world = dist.get_world_size(group)
    ranks = [dist.get_global_rank(group, r) if group is not None else r for r in range(world)]
    return dist.get_rank(group), world, ranks


def _swap(send: torch.Tensor, recv: torch.Tensor, dst: int, src: int) -> None:
    """Send ``send`` to global rank ``dst`` while receiving ``recv`` from ``src``; wait for both."""
    reqs = [dist.isend(send.contiguous(), dst), dist.irecv(recv, src)]
    for req in reqs:
        req.wait()


def ring_schedule(n: int) -> list[tuple[str, list[int]]]:
    """The 2(N-1) steps of a ring all-reduce: (``"reduce"`` or ``"copy"``, the chunk each rank r sends
    to r+1 at that step). Rank r receives, and reduces or copies into, the chunk rank r-1 sends."""
    if n < 1:
        raise ValueError(f"a ring needs at least one rank, got {n}")
    rs = [("reduce", [(r - k) % n for r in range(n)]) for k in range(n - 1)]
    ag = [("copy", [(r + 1 - k) % n for r in range(n)]) for k in range(n - 1)]
    return rs + ag


def _ring_steps(chunks: list[torch.Tensor], group, phase: str) -> None:
    rank, n, ranks = _peers(group)
    right, left = ranks[(rank + 1) % n], ranks[(rank - 1) % n]
    for kind, sends in ring_schedule(n):
        if kind != phase:
            continue
        send, recv = sends[rank], sends[(rank - 1) % n]
        incoming = torch.empty_like(chunks[recv])
        _swap(chunks[send], incoming, right, left)
        if kind == "reduce":
            chunks[recv].add_(incoming)
        else:
            chunks[recv].copy_(incoming)


def ring_reduce_scatter(chunks: list[torch.Tensor], group=None) -> int:
    """In place over the N ``chunks`` of this rank's buffer (:func:`ring_schedule`'s reduce steps):
    afterwards chunk (r+1) mod N holds the sum over ranks. Returns the index of that chunk."""
    _ring_steps(chunks, group, "reduce")
    return (dist.get_rank(group) + 1) % dist.get_world_size(group)


def ring_all_gather(chunks: list[torch.Tensor], group=None) -> None:
    """In place: rank r starts owning chunk (r+1) mod N (as :func:`ring_reduce_scatter` leaves it) and
    ends with every rank's owned chunk (:func:`ring_schedule`'s copy steps)."""
    _ring_steps(chunks, group, "copy")


def ring_all_reduce(x: torch.Tensor, group=None) -> torch.Tensor:
    """Sum of ``x`` over ``group``: :func:`ring_reduce_scatter` then :func:`ring_all_gather`."""
    buf = x.detach().clone().flatten()
    n = dist.get_world_size(group)
    if n > 1:
        chunks = list(torch.tensor_split(buf, n))   # views of buf: sizes differ by at most one
        ring_reduce_scatter(chunks, group)
        ring_all_gather(chunks, group)
    return buf.view_as(x)


def halving_doubling_all_reduce(x: torch.Tensor, group=None) -> torch.Tensor:
    """Sum of ``x`` by recursive halving (reduce-scatter) and recursive doubling (all-gather)."""
    rank, n, ranks = _peers(group)
    if n & (n - 1):
        raise ValueError(f"halving-doubling needs a power-of-two group, got {n} ranks")
    buf = x.detach().clone().flatten()
    lo, hi = 0, buf.numel()
    trail: list[tuple[int, int, int]] = []           # (partner, range before the round)
    dist_ = n // 2
    while dist_ >= 1:
        partner = rank ^ dist_
        mid = (lo + hi) // 2
        keep, give = ((lo, mid), (mid, hi)) if rank & dist_ == 0 else ((mid, hi), (lo, mid))
        incoming = torch.empty(keep[1] - keep[0], dtype=buf.dtype)
        _swap(buf[give[0]:give[1]], incoming, ranks[partner], ranks[partner])
        buf[keep[0]:keep[1]].add_(incoming)
        trail.append((partner, lo, hi))
        lo, hi = keep
        dist_ //= 2
    for partner, old_lo, old_hi in reversed(trail):  # doubling: swap owned ranges back
        other = (lo, hi)
        theirs = (old_lo, lo) if lo > old_lo else (hi, old_hi)
        incoming = torch.empty(theirs[1] - theirs[0], dtype=buf.dtype)
        _swap(buf[other[0]:other[1]], incoming, ranks[partner], ranks[partner])
        buf[theirs[0]:theirs[1]].copy_(incoming)
        lo, hi = old_lo, old_hi
    return buf.view_as(x)


def tree_all_reduce(x: torch.Tensor, group=None) -> torch.Tensor:
    """Sum of ``x`` by a binomial-tree reduce to group rank 0, then a binomial-tree broadcast.

    Reduce round j (mask 2^j): ranks with bit j set send their partial sum to rank - 2^j and drop out;
    broadcast replays the rounds backwards. Works for any N; ⌈log2 N⌉ rounds each way."""
    rank, n, ranks = _peers(group)
    buf = x.detach().clone().flatten()
    rounds = max(1, math.ceil(math.log2(n))) if n > 1 else 0
    for j in range(rounds):
        mask = 1 << j
        if rank % (2 * mask) == mask:
            dist.isend(buf, ranks[rank - mask]).wait()
        elif rank % (2 * mask) == 0 and rank + mask < n:
            incoming = torch.empty_like(buf)
            dist.irecv(incoming, ranks[rank + mask]).wait()
            buf.add_(incoming)
    for j in reversed(range(rounds)):
        mask = 1 << j
        if rank % (2 * mask) == 0 and rank + mask < n:
            dist.isend(buf, ranks[rank + mask]).wait()
        elif rank % (2 * mask) == mask:
            dist.irecv(buf, ranks[rank - mask]).wait()
    return buf.view_as(x)


ALL_REDUCE = {"ring": ring_all_reduce, "halving_doubling": halving_doubling_all_reduce, "tree": tree_all_reduce}


# ------------------------------------------------------------------------------- α–β model
S_, N_, ALPHA, BETA = sp.symbols("S N alpha beta", positive=True)


def alpha_beta_expr(algorithm: str) -> sp.Expr:
    """Time of one all-reduce of S bytes over N ranks (symbols ``S, N, alpha, beta``), N a power of 2."""
    lg = sp.log(N_, 2)
    exprs = {
        "ring": 2 * (N_ - 1) * ALPHA + 2 * (N_ - 1) / N_ * S_ * BETA,
        "halving_doubling": 2 * lg * ALPHA + 2 * (N_ - 1) / N_ * S_ * BETA,
        "tree": 2 * lg * (ALPHA + S_ * BETA),
    }
    if algorithm not in exprs:
        raise ValueError(f"algorithm must be one of {ALGORITHMS}, got {algorithm!r}")
    return exprs[algorithm]


def alpha_beta_time(algorithm: str, size_bytes: float, n: int, bandwidth: float, latency: float) -> float:
    """Seconds for one all-reduce: the ring through ``memory.ring_time``; the others from their step
    counts (2⌈log2 N⌉) and bytes per step (S/2^{j+1} for halving-doubling, S for the tree)."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if n == 1:
        return 0.0
    if algorithm == "ring":
        return ring_time("all_reduce", size_bytes, n, bandwidth, latency)
    lg = math.ceil(math.log2(n))
    if algorithm == "halving_doubling":
        if n & (n - 1):
            raise ValueError(f"halving-doubling needs a power-of-two group, got {n}")
        return 2 * lg * latency + 2 * (n - 1) / n * size_bytes / bandwidth
    if algorithm == "tree":
        return 2 * lg * (latency + size_bytes / bandwidth)
    raise ValueError(f"algorithm must be one of {ALGORITHMS}, got {algorithm!r}")


def tree_ring_crossover(n: int, bandwidth: float, latency: float) -> float:
    """Message size (bytes) above which the ring is faster than the tree:
    S* = α(N-1-log2N) / (β(log2N-(N-1)/N)); 0 when the ring always wins (N = 2: they tie)."""
    lg = math.log2(n)
    den = lg - (n - 1) / n
    if den <= 0:
        return 0.0
    return latency * bandwidth * (n - 1 - lg) / den
