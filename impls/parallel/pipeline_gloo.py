"""Execute a pipeline schedule for real: a tiny MLP split into stages, point-to-point on gloo.

``execute_schedule(ranks, name, m, v)`` runs on every rank of ``ranks`` the op list that
``impls.parallel.pipeline.build`` gives its device: ``F`` receives the stage input from the
previous virtual stage (``irecv``), runs the chunk and sends the output on (``isend``, waited at
the end, so a send never blocks the schedule); ``B`` receives the output gradient, back-propagates
and sends the input gradient back. The last stage turns its output into the loss
``mse(out, y_mb) / m``, so the summed gradients are those of the unsplit model on the whole batch.

Per device it records the gradients of its layers and what autograd really holds: every tensor a
forward saves is packed into a small holder (``saved_tensors_hooks``) that only the autograd graph
references, so it dies when that graph is freed by its backward. After each op the live holders give
the micro-batch chunks still held (distinct (micro-batch, chunk) tags) and their bytes (distinct
storages); the record keeps the peaks. Nothing here counts ops: a schedule that kept a graph alive too
long, or a backward that retained it, shows up in the measurement.
"""

from __future__ import annotations

import weakref

import torch
import torch.distributed as dist
from torch import nn

from impls.parallel.pipeline import build

WIDTH = 6


class ResidualTanh(nn.Module):
    """x + tanh(W x + c): saves its input and the tanh output, not its own output (like a GPT layer)."""

    def __init__(self, width: int):
        super().__init__()
        self.linear = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.tanh(self.linear(x))


def tiny_stack(n_layers: int, width: int = WIDTH, seed: int = 0) -> list[nn.Module]:
    """``n_layers`` residual blocks, initialised from ``seed`` (fp64)."""
    torch.manual_seed(seed)
    return [ResidualTanh(width).double() for _ in range(n_layers)]


def batch(m: int, rows: int = 2, width: int = WIDTH, seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs and targets, [m, rows, width] each: micro-batch i is ``x[i]``."""
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(m, rows, width, generator=gen, dtype=torch.float64),
            torch.randn(m, rows, width, generator=gen, dtype=torch.float64))


def _tag(kind: int, micro: int, stage: int, stages: int) -> int:
    return (micro * stages + stage) * 2 + kind  # kind 0: activation, 1: gradient


class _Held:
    """One tensor autograd saved, tagged with the (micro-batch, chunk) whose forward saved it."""

    __slots__ = ("t", "tag", "__weakref__")

    def __init__(self, t: torch.Tensor, tag: tuple[int, int]):
        self.t, self.tag = t, tag


class SavedMeter:
    """Saved-tensor hooks whose holders live exactly as long as the autograd graph keeps them."""

    def __init__(self, param_storages: set[int]):
        self.params, self.live = param_storages, weakref.WeakSet()
        self.tag: tuple[int, int] = (-1, -1)
        self.peak_chunks = self.peak_bytes = 0

    def hooks(self, tag: tuple[int, int]):
        self.tag = tag
        return torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack)

    def _pack(self, t: torch.Tensor):
        if t.untyped_storage().data_ptr() in self.params:   # weights are not activations
            return t
        held = _Held(t, self.tag)
        self.live.add(held)
        return held

    @staticmethod
    def _unpack(held):
        return held.t if isinstance(held, _Held) else held

    def sample(self) -> None:
        """Update the peaks from the holders alive now."""
        held = list(self.live)
        storages = {(h.t.data_ptr(), h.t.numel()): h.t.numel() * h.t.element_size() for h in held}
        self.peak_chunks = max(self.peak_chunks, len({h.tag for h in held}))
        self.peak_bytes = max(self.peak_bytes, sum(storages.values()))


def execute_schedule(ranks: list[int], name: str, m: int, v: int = 1, layers: int = 8) -> dict:
    """Run schedule ``name`` (gpipe, 1f1b or interleaved) over the global ``ranks``; this rank's record."""
    p = len(ranks)
    d = ranks.index(dist.get_rank())
    stages = p * v
    if layers % stages:
        raise ValueError(f"{layers} layers do not split into {stages} stages")
    per = layers // stages
    blocks = tiny_stack(layers)
    chunks = {c: nn.Sequential(*blocks[(c * p + d) * per:(c * p + d + 1) * per]) for c in range(v)}
    x, y = batch(m)
    meter = SavedMeter({q.untyped_storage().data_ptr() for c in chunks.values() for q in c.parameters()})
    stash: dict[tuple[int, int], tuple[torch.Tensor, torch.Tensor]] = {}
    sends: list[tuple[object, torch.Tensor]] = []
    for op in build(name, p, m, v)[d]:
        s = op.chunk * p + d
        if op.kind == "F":
            if s == 0:
                inp = x[op.micro]
            else:
                inp = torch.empty_like(x[0])
                dist.irecv(inp, ranks[(s - 1) % p], tag=_tag(0, op.micro, s - 1, stages)).wait()
                inp.requires_grad_(True)
            with meter.hooks((op.micro, op.chunk)):
                out = chunks[op.chunk](inp)
            if s == stages - 1:
                out = nn.functional.mse_loss(out, y[op.micro]) / m
            else:
                msg = out.detach().contiguous()
                sends.append((dist.isend(msg, ranks[(s + 1) % p], tag=_tag(0, op.micro, s, stages)), msg))
            stash[(op.micro, op.chunk)] = (inp, out)
        elif op.kind == "B":
            inp, out = stash.pop((op.micro, op.chunk))
            if s == stages - 1:
                out.backward()
            else:
                grad = torch.empty_like(out)
                dist.irecv(grad, ranks[(s + 1) % p], tag=_tag(1, op.micro, s + 1, stages)).wait()
                out.backward(grad)
            if s > 0:
                msg = inp.grad.contiguous()
                sends.append((dist.isend(msg, ranks[(s - 1) % p], tag=_tag(1, op.micro, s, stages)), msg))
            del inp, out
        else:
            raise ValueError(f"{name}: the gloo executor runs F and B only, got {op.kind}")
        meter.sample()
    for work, _ in sends:
        work.wait()
    return {
        "device": d, "p": p, "m": m, "v": v, "schedule": name, "layers_per_stage": per,
        "stages_of_chunks": [c * p + d for c in range(v)],
        "grads": {c * p + d: [q.grad.flatten().tolist() for q in chunks[c].parameters()] for c in range(v)},
        "peak_in_flight": meter.peak_chunks, "peak_saved_bytes": meter.peak_bytes,
    }
