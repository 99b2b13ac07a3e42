r"""What PyTorch DDP sends per step: gradient buckets, when they are all-reduced, what ``no_sync`` skips.

DDP (Li et al. 2020, PyTorch Distributed, §3.2 and §4.2) keeps a full replica per rank and, during
backward, all-reduces (average) the gradients in *buckets*: when every gradient of a bucket is ready its
all-reduce is launched asynchronously, so communication overlaps the rest of the backward pass.

:func:`bucket_assignment` packs parameters, in the order their gradients become ready, greedily: a
bucket closes as soon as its bytes reach the cap (the first bucket's cap may be smaller). In torch 2.x:

* iteration 1 runs with one bucket holding every parameter (initial bucketing is off unless
  ``find_unused_parameters`` or ``static_graph``); after it the reducer *rebuilds* the buckets in the
  order gradients became ready (the reverse of definition order for a sequential model), first bucket
  capped at 1 MiB under the default ``bucket_cap_mb`` (25 MiB), otherwise at ``bucket_cap_mb``;
* under ``no_sync()`` backward only accumulates into ``.grad``; the first backward outside it
  all-reduces the accumulated sums, so k micro-batches cost one set of bucket all-reduces, not k.

Bytes per step: every gradient once, Σ_b |bucket b|, each bucket a ring all-reduce of 2(N-1)/N of it.
"""

from __future__ import annotations

MIB = 2**20
DEFAULT_BUCKET_CAP = 25 * MIB
DEFAULT_FIRST_BUCKET = 1 * MIB


def bucket_assignment(sizes: list[int], cap: int, first_cap: int | None = None) -> list[list[int]]:
    """Indices of ``sizes`` (bytes, in gradient-ready order) grouped into buckets, ready order kept.

    A parameter joins the open bucket; the bucket closes once it holds >= its cap (``first_cap`` for the
    first bucket, ``cap`` after). The last bucket may be smaller."""
    if cap <= 0 or (first_cap is not None and first_cap <= 0):
        raise ValueError(f"bucket caps must be positive, got cap={cap}, first_cap={first_cap}")
    buckets: list[list[int]] = []
    current: list[int] = []
    filled = 0
    for i, size in enumerate(sizes):
        if size < 0:
            raise ValueError(f"parameter {i} has negative size {size}")
        current.append(i)
        filled += size
        limit = first_cap if (first_cap is not None and not buckets) else cap
        if filled >= limit:
            buckets.append(current)
            current, filled = [], 0
    if current:
        buckets.append(current)
    return buckets


def ddp_buckets(param_bytes: list[int], iteration: int, bucket_cap_mb: float | None = None) -> list[list[int]]:
    """DDP's buckets for parameters of ``param_bytes`` (definition order) at ``iteration`` (1-based), for a
    model whose gradients become ready in reverse definition order. Indices refer to definition order."""
    if iteration < 1:
        raise ValueError(f"iteration is 1-based, got {iteration}")
    n = len(param_bytes)
    if iteration == 1:
        return [list(range(n))]
    cap = DEFAULT_BUCKET_CAP if bucket_cap_mb is None else int(bucket_cap_mb * MIB)
    first = DEFAULT_FIRST_BUCKET if bucket_cap_mb is None else cap
    ready = list(reversed(range(n)))
    return [[ready[i] for i in b] for b in bucket_assignment([param_bytes[i] for i in ready], cap, first)]


def all_reduces_per_micro_step(accumulation: int, buckets: int, no_sync: bool) -> list[int]:
    """Bucket all-reduces launched in each of ``accumulation`` backward passes of one optimizer step."""
    if accumulation < 1 or buckets < 1:
        raise ValueError("accumulation and buckets must be >= 1")
    if not no_sync:
        return [buckets] * accumulation
    return [0] * (accumulation - 1) + [buckets]
