"""For kata properties that judge *how* a result is computed, not only what it is.

``metered(impl, *args, watch=i, **kwargs) -> (result, Usage)`` calls the implementation under the
meters of ``mianjing.quiz.judge_meters``: the peak tensor memory the call allocated, and the column
ranges it read of positional argument ``i`` (an ``[N, V]`` tensor). Under the kata judge ``impl`` is
the judge's proxy and the measurement runs in the worker beside the candidate's code; in the
verifiers it runs here, around the reference. Either way the property asserts on the numbers:
``within_memory`` (a budget in bytes), ``reads_in_blocks`` (no read wider than a block, one sweep).

``fits(got, shape, what, where)`` and ``floats(got, n, what, where)`` are the shape checks every
property should make before comparing values (``zip`` without ``strict`` turns an empty result into a
pass). ``@realistic(n)`` on a property's inner check: ``n`` examples at real sizes and no shrinking
(their inputs come from a seed; a smaller seed is not a smaller case).
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import Phase, settings

from mianjing.quiz.judge_meters import Meter, passes, widest

MiB = 1 << 20


def realistic(n: int = 6):
    """Settings for a property at real sizes: ``n`` examples, no deadline, no shrinking."""
    return settings(max_examples=n, deadline=None, phases=[Phase.explicit, Phase.reuse, Phase.generate])


@dataclass(frozen=True)
class Usage:
    peak_bytes: int
    reads: list  # [[c0, c1], ...] column ranges of the watched argument, in the order read


def metered(impl, *args, watch: int | None = None, **kwargs):
    remote = getattr(impl, "metered", None)
    if callable(remote):
        value, raw = remote(args, kwargs, watch=watch)
        return value, _usage(raw)
    with Meter(args[watch] if watch is not None else None) as m:
        value = impl(*args, **kwargs)
    return value, _usage(m.usage())


def _usage(raw) -> Usage:
    """The measurement, checked: it comes from the worker's process in the judge."""
    peak = raw.get("peak_bytes") if isinstance(raw, dict) else None
    reads = raw.get("reads") if isinstance(raw, dict) else None
    if not (type(peak) is int and peak >= 0 and isinstance(reads, list)
            and all(isinstance(r, list) and len(r) == 2 and all(type(c) is int for c in r) for r in reads)):
        raise AssertionError("the measurement of the call is malformed")
    return Usage(peak, [list(r) for r in reads])


def within_memory(usage: Usage, budget: int, what: str, where: str) -> None:
    assert usage.peak_bytes <= budget, (
        f"{where}: {what} held {usage.peak_bytes / MiB:.1f} MiB of tensors at its peak; the budget is "
        f"{budget / MiB:.1f} MiB")


def reads_in_blocks(usage: Usage, columns: int, block: int, where: str) -> None:
    """Every read of the watched tensor is at most ``block`` columns wide, and the columns are swept once."""
    wide = widest(usage.reads)
    assert wide <= block, (
        f"{where}: a single operation read {wide} columns of the logits at once; the kata reads at most "
        f"block_size = {block} columns at a time (a full-row softmax or a copy of the whole tensor is not online)")
    sweeps = passes(usage.reads, columns)
    assert sweeps <= 1, (
        f"{where}: the vocabulary was swept {sweeps} times (a first pass for the maximum, then another for the "
        "sum, is the two-pass softmax); the online softmax reads each block once")


def fits(got, shape: tuple, what: str, where: str) -> None:
    got_shape = tuple(getattr(got, "shape", ()))
    assert got_shape == tuple(shape), f"{where}: {what} expected shape {tuple(shape)}, got {got_shape}"


def floats(got, n: int, what: str, where: str) -> list[float]:
    """``got`` as a list of ``n`` Python floats (an AssertionError naming the length otherwise)."""
    values = [float(x) for x in (got.reshape(-1).tolist() if hasattr(got, "reshape") else list(got))]
    assert len(values) == n, f"{where}: {what} expected {n} values, got {len(values)}"
    return values
