"""Count what a Triton kernel really does in the interpreter: every load and store it issues, element by element.

``with Meter(a=a, b=b, c=c) as m: kernel[grid](...)`` wraps the interpreter's memory operations
(``create_masked_load`` / ``create_masked_store`` of ``triton.runtime.interpreter.interpreter_builder``,
which every ``tl.load`` / ``tl.store`` goes through) and its ``exp``, and attributes each address the
mask lets through to the named tensor it falls in. It is an oracle of what the kernel issues, written
without the kernel's own index arithmetic: the cost models in ``impls/kernels`` are checked against it.

- ``m.loads[name]`` / ``m.stores[name]``: elements read / written;
- ``m.load_counts(name)``: how many times each element of the tensor was read (a flat int array);
- ``m.tiles_by_program[name]``: for each program id, the set of element indices it read;
- ``m.events``: ``(kind, program id, tensor, element indices)`` in the order the kernel issued them;
- ``m.exps``: elements ``tl.exp`` was applied to (masked-off lanes included: the hardware computes them too);
- ``m.stray``: accesses that fell in none of the named tensors (must be 0).
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import torch


class Meter:
    def __init__(self, **tensors: torch.Tensor):
        self.spans = []
        for name, t in tensors.items():
            size = t.element_size()
            start = t.data_ptr()
            self.spans.append((name, start, start + t.untyped_storage().nbytes() - t.storage_offset() * size, size,
                               t.numel()))
        self.loads: dict[str, int] = defaultdict(int)
        self.stores: dict[str, int] = defaultdict(int)
        self._hist: dict[str, list] = defaultdict(list)
        self.tiles_by_program: dict[str, dict[tuple, set]] = defaultdict(lambda: defaultdict(set))
        self.exps = 0
        self.events: list[tuple] = []
        self.stray = 0
        self.load_calls = 0

    def _attribute(self, addrs: np.ndarray, kind: str) -> None:
        from triton.runtime.interpreter import interpreter_builder

        addrs = addrs.astype(np.uint64).ravel()
        seen = np.zeros(addrs.shape, dtype=bool)
        for name, lo, hi, size, numel in self.spans:
            inside = (addrs >= lo) & (addrs < hi)
            if not inside.any():
                continue
            seen |= inside
            idx = ((addrs[inside] - np.uint64(lo)) // np.uint64(size)).astype(np.int64)
            self.events.append((kind, tuple(interpreter_builder.grid_idx), name, idx))
            if kind == "load":
                self.loads[name] += int(inside.sum())
                self._hist[name].append(idx)
                pid = tuple(interpreter_builder.grid_idx)
                self.tiles_by_program[name][pid].update(idx.tolist())
            else:
                self.stores[name] += int(inside.sum())
        self.stray += int((~seen).sum())

    def __enter__(self) -> "Meter":
        from triton.runtime.interpreter import interpreter_builder as b

        self._builder = b
        self._saved = {k: b.__dict__.get(k) for k in ("create_masked_load", "create_masked_store", "create_exp")}
        load, store, exp = b.create_masked_load, b.create_masked_store, b.create_exp

        def masked_load(ptrs, mask, other, cache_policy, is_volatile):
            self.load_calls += 1
            self._attribute(ptrs.data[np.broadcast_to(mask.data, ptrs.data.shape)], "load")
            return load(ptrs, mask, other, cache_policy, is_volatile)

        def masked_store(ptrs, value, mask, cache_policy):
            self._attribute(ptrs.data[np.broadcast_to(mask.data, ptrs.data.shape)], "store")
            return store(ptrs, value, mask, cache_policy)

        def exp_(arg):
            self.exps += int(np.size(arg.data))
            return exp(arg)

        b.create_masked_load, b.create_masked_store, b.create_exp = masked_load, masked_store, exp_
        return self

    def __exit__(self, *exc) -> None:
        for k, v in self._saved.items():
            if v is None:
                self._builder.__dict__.pop(k, None)
            else:
                setattr(self._builder, k, v)

    def load_counts(self, name: str) -> np.ndarray:
        numel = next(n for nm, *_, n in self.spans if nm == name)
        parts = self._hist.get(name) or [np.zeros(0, dtype=np.int64)]
        return np.bincount(np.concatenate(parts), minlength=numel)

    def bytes(self, sizes: dict[str, int] | None = None) -> int:
        """Bytes loaded and stored, each tensor at its element size."""
        size = {nm: s for nm, _, _, s, _ in self.spans}
        return sum((self.loads[n] + self.stores[n]) * size[n] for n in size)
