"""What a kata can measure about one call besides its result: tensor memory and how an input is read.

:class:`Meter` is a ``TorchDispatchMode``: every aten operation the call runs (the backward pass of
autograd included) passes through it, so it sees

* **memory**: each new tensor storage an operation returns is counted from its creation until it
  is freed (a finaliser on the storage), so ``peak_bytes`` is the most tensor memory the call held
  at once beyond what existed before it (outputs included; views and in-place results are not new);
* **reads** of a watched input ``[N, V]`` tensor: for every operation that reads a view of it without
  returning a view of it, the column range ``[c0, c1)`` read. Index operations (gather, index,
  take...) read a few scattered elements and are left out. :func:`passes` turns the ranges into
  the number of sweeps over the columns,
  :func:`widest` into the widest block read at once.

The kata properties call it through ``verifiers/katas/budgets.py``: in the judge the measurement runs
in the worker, next to the candidate's code (``judge_worker.py`` imports this file inside its
sandbox), elsewhere in the calling process. Standard library and torch only.
"""

from __future__ import annotations

import weakref

import torch
from torch.utils._python_dispatch import TorchDispatchMode  # imports much of torch's tracing machinery: seconds

INDEX_OPS = ("gather", "index", "index_select", "take", "take_along_dim", "embedding", "masked_select",
             "_unsafe_index", "nonzero")
MAX_READS = 100_000  # ranges kept per call


class Meter:
    """``with Meter(watch) as m: f()`` then ``m.usage()`` -> {"peak_bytes": int, "reads": [[c0, c1], ...]}."""

    def __init__(self, watch=None):
        self.torch = torch
        meter = self

        class _Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                out = func(*args, **(kwargs or {}))
                meter._seen(func, args, kwargs or {}, out)
                return out

        self.mode = _Mode()
        self.watch = watch
        self.watch_ptr = watch.untyped_storage().data_ptr() if watch is not None else None
        self.live = 0
        self.peak = 0
        self.counted: set[int] = set()
        self.reads: list[list[int]] = []

    def __enter__(self):
        self.mode.__enter__()
        return self

    def __exit__(self, *exc):
        return self.mode.__exit__(*exc)

    def _leaves(self, x):
        T = self.torch.Tensor
        if isinstance(x, T):
            yield x
        elif isinstance(x, (list, tuple)):
            for v in x:
                yield from self._leaves(v)
        elif isinstance(x, dict):
            for v in x.values():
                yield from self._leaves(v)

    def _seen(self, func, args, kwargs, out) -> None:
        inputs = list(self._leaves((args, kwargs)))
        in_ptrs = {t.untyped_storage().data_ptr() for t in inputs}
        outs = list(self._leaves(out))
        out_ptrs = {t.untyped_storage().data_ptr() for t in outs}
        for t in outs:
            st = t.untyped_storage()
            ptr = st.data_ptr()
            if ptr in in_ptrs or id(st) in self.counted or st.nbytes() == 0:
                continue
            self.counted.add(id(st))
            n = st.nbytes()
            self.live += n
            self.peak = max(self.peak, self.live)
            weakref.finalize(st, self._freed, id(st), n)
        if self.watch_ptr is None or self.watch_ptr in out_ptrs:
            return  # nothing watched, or a view of the watched tensor (no data read)
        name = func.__name__.split(".")[0] if hasattr(func, "__name__") else str(func)
        if name.lstrip("_") in INDEX_OPS or name in INDEX_OPS:
            return
        for t in inputs:
            if t.untyped_storage().data_ptr() == self.watch_ptr and len(self.reads) < MAX_READS:
                self.reads.append(self._columns(t))

    def _freed(self, key: int, n: int) -> None:
        self.live -= n
        self.counted.discard(key)

    def _columns(self, t) -> list[int]:
        """The column range ``[c0, c1)`` of the watched ``[N, V]`` tensor that view ``t`` covers: its offset
        within a row plus the reach of its strides that step inside a row (all of ``[0, V)`` if unsure)."""
        w = self.watch
        if w.dim() != 2 or w.stride(1) != 1:
            return [0, int(w.shape[-1]) if w.dim() else 1]
        V, row = int(w.shape[1]), int(w.stride(0))
        c0 = (t.storage_offset() - w.storage_offset()) % row
        reach = 0
        for size, step in zip(t.shape, t.stride()):
            if size > 1 and step % row:
                if step > row:
                    return [0, V]
                reach += (size - 1) * step
        if c0 + reach + 1 > V:
            return [0, V]
        return [c0, c0 + reach + 1]

    def usage(self) -> dict:
        return {"peak_bytes": int(self.peak), "reads": self.reads}


def warm() -> None:
    """Enter a dispatch mode once: the first time imports torch._dynamo (seconds), which the worker does
    while it is still loading, not inside the candidate's time limit."""
    with Meter():
        torch.zeros(1) + 1


def widest(reads: list[list[int]]) -> int:
    """The most columns any one read covered."""
    return max((c1 - c0 for c0, c1 in reads), default=0)


def passes(reads: list[list[int]], columns: int, buckets: int = 64) -> int:
    """Sweeps over ``columns``: the most times any column is visited, a visit being a run of
    consecutive reads that all cover it (a block read by max, exp and sum in turn is one visit)."""
    if not reads or columns <= 0:
        return 0
    width = max(1, -(-columns // buckets))
    visits = [0] * (-(-columns // width))
    previous: set[int] = set()
    for c0, c1 in reads:
        now = set(range(max(0, c0) // width, (max(c0 + 1, min(c1, columns)) - 1) // width + 1))
        for b in now - previous:
            if b < len(visits):
                visits[b] += 1
        previous = now
    return max(visits)
