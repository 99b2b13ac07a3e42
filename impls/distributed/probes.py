"""Measure what PyTorch's data-parallel engines really keep and send, on CPU with gloo.

``launch(fn, world_size, *args)`` runs ``fn(rank, world_size, *args)`` in ``world_size`` spawned
processes that share a gloo process group on a free localhost port, and returns the per-rank
results. The process group is destroyed and the children are terminated even on failure.

``probe_engines(rank, world, ...)`` trains one step of a tiny MLP with each engine and records,
per rank:

* bytes of parameters, gradients and Adam state held locally (``numel * element_size`` over the
  local tensors; ``DTensor.to_local()`` for FSDP2), at three stated points: between forward and
  backward, after backward, after the optimizer step;
* every collective called during the step (elements and bytes passed), intercepted at the
  ``torch.distributed`` functions the engines call (DDP's C++ all-reduce is routed through a
  comm hook so it is seen too).

Engines: ``ddp`` (DistributedDataParallel), ``zero1`` (DDP + ``ZeroRedundancyOptimizer``),
``fsdp2_noreshard`` (``fully_shard(reshard_after_forward=False)``, the ZeRO-2 analogue),
``fsdp2_reshard`` (``reshard_after_forward=True``, ZeRO-3), ``fsdp2_root_only`` (one
``fully_shard`` on the root with ``reshard_after_forward=True``), ``fsdp1_shard_grad_op`` and
``fsdp1_full_shard`` (FSDP1 flat parameters).

``ring_all_reduce(x)`` runs the hand-written ring all-reduce of ``impls.parallel.collectives`` and
returns how many elements this rank sent.

The parallelism probes of ``impls/parallel`` (tensor, pipeline, context and expert parallelism)
run on the same ``launch`` and count with the same :class:`CollectiveLog`, which also sees
all-to-all and point-to-point sends. Faults that the test-suite injects into the parent
(``MIANJING_FAULTS``, see ``tests/faults.py``) are applied again in every spawned rank, so a broken
implementation is the one that runs there too.
"""

from __future__ import annotations

import importlib
import inspect
import math
import os
import queue
import socket
import threading
import traceback
from contextlib import contextmanager
from datetime import timedelta
from typing import Any, Callable

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

# collectives intercepted by name; the outermost call is counted (all_gather_into_tensor calls
# all_gather_single internally, which must not be counted twice)
COLLECTIVES = (
    "all_reduce", "broadcast", "all_gather", "all_gather_into_tensor", "all_gather_single",
    "reduce_scatter", "reduce_scatter_tensor", "reduce_scatter_single",
    "all_to_all_single", "all_to_all", "send", "isend",
)
# the argument whose size is the full (unsharded) buffer: output for gathers, input for scatters
_FULL_ARG = {
    "all_reduce": 0, "broadcast": 0, "all_gather_into_tensor": 0, "all_gather_single": 0,
    "reduce_scatter_tensor": 1, "reduce_scatter_single": 1,
    "all_to_all_single": 1,  # (output, input): the buffer this rank hands out, its own chunk included
    "send": 0, "isend": 0,   # (tensor, dst): what goes on the wire
}


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _apply_injected_faults() -> None:
    """Re-apply the parent's ``MIANJING_FAULTS`` in this spawned rank (fault-injection tests only)."""
    spec = os.environ.get("MIANJING_FAULTS")
    if spec:
        importlib.import_module("tests.faults").apply(spec)


def _worker(rank: int, world: int, port: int, fn: Callable, args: tuple, out: Any) -> None:
    torch.set_num_threads(1)
    try:
        _apply_injected_faults()
        dist.init_process_group(
            "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
            timeout=timedelta(seconds=60),
        )
        out.put((rank, "ok", fn(rank, world, *args)))
    except BaseException:  # noqa: BLE001 - the parent re-raises with the traceback
        out.put((rank, "error", traceback.format_exc()))
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def launch(fn: Callable, world_size: int, *args: Any, timeout: float = 120.0) -> list[Any]:
    """Run ``fn(rank, world_size, *args)`` on ``world_size`` gloo ranks; return results by rank."""
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=_worker, args=(r, world_size, port, fn, args, out), daemon=True)
             for r in range(world_size)]
    results: dict[int, Any] = {}
    try:
        for proc in procs:
            proc.start()
        for _ in range(world_size):
            try:
                rank, status, value = out.get(timeout=timeout)
            except queue.Empty as exc:
                raise TimeoutError(f"{fn.__name__} on {world_size} ranks: no result within {timeout}s") from exc
            if status != "ok":
                raise RuntimeError(f"rank {rank} failed:\n{value}")
            results[rank] = value
        for proc in procs:
            proc.join(timeout=30)
    finally:
        for proc in procs:
            if proc.is_alive():
                proc.terminate()
                proc.join(timeout=10)
        out.close()
    return [results[r] for r in range(world_size)]


# ------------------------------------------------------------------------ counting
class CollectiveLog:
    """Records (name, full-buffer elements, element bytes) of each collective while active."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int, int]] = []
        self._depth = threading.local()

    @contextmanager
    def active(self):
        originals = {name: getattr(dist, name) for name in COLLECTIVES}

        def wrap(name: str, fn: Callable) -> Callable:
            def counted(*args, **kwargs):
                depth = getattr(self._depth, "n", 0)
                if depth == 0:
                    self.calls.append(_describe(name, fn, args, kwargs))
                self._depth.n = depth + 1
                try:
                    return fn(*args, **kwargs)
                finally:
                    self._depth.n = depth

            return counted

        for name, fn in originals.items():
            setattr(dist, name, wrap(name, fn))
        try:
            yield self
        finally:
            for name, fn in originals.items():
                setattr(dist, name, fn)

    def totals(self, calls: list[tuple[str, int, int]] | None = None) -> dict[str, dict[str, int]]:
        """{collective: {calls, elements, bytes}} over ``calls`` (default: all recorded so far).

        Pass a slice of :attr:`calls` (e.g. ``log.calls[n_fwd:]``) to total one phase.
        """
        agg: dict[str, dict[str, int]] = {}
        for name, numel, esize in (self.calls if calls is None else calls):
            row = agg.setdefault(name, {"calls": 0, "elements": 0, "bytes": 0})
            row["calls"] += 1
            row["elements"] += numel
            row["bytes"] += numel * esize
        return agg


def _describe(name: str, fn: Callable, args: tuple, kwargs: dict) -> tuple[str, int, int]:
    bound = inspect.signature(fn).bind(*args, **kwargs)
    first, second = list(bound.arguments.values())[:2]
    if name == "all_gather":  # (tensor_list, tensor): the gathered list is the full buffer
        return name, sum(x.numel() for x in first), second.element_size()
    if name == "reduce_scatter":  # (output, input_list)
        return name, sum(x.numel() for x in second), first.element_size()
    if name == "all_to_all":  # (output_list, input_list)
        return name, sum(x.numel() for x in second), second[0].element_size()
    tensor = first if _FULL_ARG[name] == 0 else second
    return name, tensor.numel(), tensor.element_size()


def _allreduce_hook(_state, bucket):  # no annotations: DDP checks them and they are strings here
    """DDP comm hook equal to the default one, but through ``dist.all_reduce`` so it is counted."""
    buf = bucket.buffer()
    buf.div_(dist.get_world_size())
    return dist.all_reduce(buf, async_op=True).get_future().then(lambda fut: fut.value()[0])


def local_bytes(t: torch.Tensor | None) -> int:
    """Bytes held on this rank: ``numel * element_size`` of the local shard."""
    if t is None:
        return 0
    from torch.distributed.tensor import DTensor

    if isinstance(t, DTensor):
        t = t.to_local()
    return t.numel() * t.element_size()


def local_numel(t: torch.Tensor) -> int:
    from torch.distributed.tensor import DTensor

    return (t.to_local() if isinstance(t, DTensor) else t).numel()


def optimizer_state_bytes(state: dict) -> tuple[int, int]:
    """(bytes of per-element state such as Adam moments, bytes of scalar state such as ``step``)."""
    moments = scalars = 0
    for per_param in state.values():
        for v in per_param.values():
            if isinstance(v, torch.Tensor):
                if v.dim() == 0:
                    scalars += local_bytes(v)
                else:
                    moments += local_bytes(v)
    return moments, scalars


# ----------------------------------------------------------------------------- model
LAYER_SIZES = (11, 17, 5, 3)  # odd sizes: uneven shards and an uneven ZeroRedundancyOptimizer split


def tiny_mlp(sizes: tuple[int, ...] = LAYER_SIZES, seed: int = 0) -> nn.Sequential:
    torch.manual_seed(seed)
    layers: list[nn.Module] = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(nn.Tanh())
    return nn.Sequential(*layers)


def _batch(rank: int, sizes: tuple[int, ...]) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(100 + rank)
    return torch.randn(4, sizes[0], generator=gen), torch.randn(4, sizes[-1], generator=gen)


def _wrap(engine: str, model: nn.Sequential) -> tuple[nn.Module, torch.optim.Optimizer, Callable[[], dict]]:
    from torch.distributed.optim import ZeroRedundancyOptimizer
    from torch.nn.parallel import DistributedDataParallel as DDP

    if engine in ("ddp", "zero1"):
        wrapped = DDP(model)
        wrapped.register_comm_hook(None, _allreduce_hook)
        if engine == "ddp":
            opt = torch.optim.Adam(wrapped.parameters(), lr=1e-2)
            return wrapped, opt, lambda: opt.state
        zopt = ZeroRedundancyOptimizer(wrapped.parameters(), optimizer_class=torch.optim.Adam, lr=1e-2)
        return wrapped, zopt, lambda: zopt.optim.state
    if engine == "zero1_flat":
        flat = FlatZero1(model)
        return flat, flat, lambda: flat.optim.state
    if engine.startswith("fsdp2"):
        from torch.distributed.fsdp import fully_shard

        reshard = engine != "fsdp2_noreshard"
        if engine != "fsdp2_root_only":
            for layer in model:
                if isinstance(layer, nn.Linear):
                    fully_shard(layer, reshard_after_forward=reshard)
        fully_shard(model, reshard_after_forward=reshard)
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)
        return model, opt, lambda: opt.state
    if engine.startswith("fsdp1"):
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
        from torch.distributed.fsdp import ShardingStrategy

        strategy = ShardingStrategy.SHARD_GRAD_OP if engine == "fsdp1_shard_grad_op" else ShardingStrategy.FULL_SHARD
        from torch.distributed.fsdp.wrap import ModuleWrapPolicy

        wrapped = FSDP(model, sharding_strategy=strategy, device_id=torch.device("cpu"),
                       auto_wrap_policy=ModuleWrapPolicy({nn.Linear}))
        opt = torch.optim.Adam(wrapped.parameters(), lr=1e-2)
        return wrapped, opt, lambda: opt.state
    raise ValueError(f"unknown engine {engine!r}")


class FlatZero1:
    """ZeRO-1 as the paper describes it (§5.1, §7.2.1): reduce-scatter the gradients, update only
    this rank's 1/N slice of a flat fp32 copy with Adam, all-gather the updated parameters.

    Communication per step: reduce-scatter (Ψ) + all-gather (Ψ) = 2Ψ, the same as DP's all-reduce.
    The flat buffer is padded to a multiple of N so every slice has ceil(Ψ/N) elements.
    """

    def __init__(self, model: nn.Module, lr: float = 1e-2):
        self.model = model
        self.params = list(model.parameters())
        self.world, self.rank = dist.get_world_size(), dist.get_rank()
        self.numel = sum(p.numel() for p in self.params)
        self.shard = math.ceil(self.numel / self.world)
        flat = torch.zeros(self.shard * self.world)
        flat[: self.numel] = torch.cat([p.detach().flatten() for p in self.params])
        self.master = flat[self.rank * self.shard:(self.rank + 1) * self.shard].clone().requires_grad_(True)
        self.optim = torch.optim.Adam([self.master], lr=lr)

    def parameters(self):
        return self.model.parameters()

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x)

    @torch.no_grad()
    def step(self) -> None:
        grads = torch.zeros(self.shard * self.world)
        grads[: self.numel] = torch.cat([p.grad.flatten() for p in self.params])
        mine = torch.empty(self.shard)
        dist.reduce_scatter_single(mine, grads)              # sum of this rank's slice
        self.master.grad = mine / self.world                 # mean over ranks, as DDP
        self.optim.step()
        full = torch.empty(self.shard * self.world)
        dist.all_gather_single(full, self.master.detach())  # every rank gets every slice
        offset = 0
        for p in self.params:
            p.copy_(full[offset: offset + p.numel()].view_as(p))
            offset += p.numel()


ENGINES = ("ddp", "zero1", "zero1_flat", "fsdp2_noreshard", "fsdp2_reshard", "fsdp2_root_only",
           "fsdp1_shard_grad_op", "fsdp1_full_shard")


def probe_engine(rank: int, world: int, engine: str, sizes: tuple[int, ...] = LAYER_SIZES) -> dict:
    """One training step of ``tiny_mlp`` under ``engine``; bytes held and collectives called."""
    model = tiny_mlp(sizes)
    psi = sum(p.numel() for p in model.parameters())
    shapes = [tuple(p.shape) for p in model.parameters()]
    wrapped, opt, state = _wrap(engine, model)
    x, y = _batch(rank, sizes)
    log = CollectiveLog()
    rec: dict[str, Any] = {"engine": engine, "rank": rank, "world": world, "psi": psi, "shapes": shapes}
    dist.barrier()
    with log.active():
        loss = nn.functional.mse_loss(wrapped(x), y)
        rec["between_fwd_bwd"] = {"param_bytes": sum(local_bytes(p) for p in wrapped.parameters())}
        loss.backward()
        rec["after_backward"] = {
            "param_bytes": sum(local_bytes(p) for p in wrapped.parameters()),
            "grad_bytes": sum(local_bytes(p.grad) for p in wrapped.parameters()),
        }
        opt.step()
        moments, scalars = optimizer_state_bytes(state())
        rec["after_step"] = {
            "param_bytes": sum(local_bytes(p) for p in wrapped.parameters()),
            "optimizer_moment_bytes": moments,
            "optimizer_scalar_bytes": scalars,
        }
    rec["collectives"] = log.totals()
    if engine == "zero1":
        # which whole parameters this rank owns (by position in model.parameters())
        owned = {id(p) for p in opt.optim.state}
        rec["owned"] = [i for i, p in enumerate(wrapped.parameters()) if id(p) in owned]
        rec["owned_state_shapes"] = [tuple(opt.optim.state[p]["exp_avg"].shape)
                                     for p in wrapped.parameters() if id(p) in owned]
    if engine.startswith("fsdp2"):
        rec["local_numels"] = [local_numel(p) for p in wrapped.parameters()]
    # the updated parameters, to check every engine computed the same step
    full = [(p.full_tensor() if hasattr(p, "full_tensor") else p).detach().clone() for p in wrapped.parameters()]
    if engine.startswith("fsdp1"):
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

        with FSDP.summon_full_params(wrapped):
            full = [p.detach().clone() for p in wrapped.parameters()]
    rec["updated_params"] = [t.flatten().tolist() for t in full]
    dist.barrier()
    return rec


def probe_engines(rank: int, world: int, engines: tuple[str, ...] = ENGINES,
                  sizes: tuple[int, ...] = LAYER_SIZES) -> dict[str, dict]:
    """:func:`probe_engine` for each engine in turn, in one process group."""
    return {e: probe_engine(rank, world, e, sizes) for e in engines}


# ---------------------------------------------------------------------- ring all-reduce
def ring_all_reduce(x: torch.Tensor) -> tuple[torch.Tensor, int]:
    """Sum ``x`` over all ranks with :func:`impls.parallel.collectives.ring_all_reduce` (N-1 reduce-scatter
    steps, then N-1 all-gather steps over point-to-point); returns (the sum, the number of elements this
    rank sent, counted by :class:`CollectiveLog` at ``isend``). With S divisible by N that is 2(N-1)/N·S."""
    from impls.parallel.collectives import ring_all_reduce as ring

    log = CollectiveLog()
    with log.active():
        out = ring(x)
    return out, sum(numel for name, numel, _ in log.calls if name in ("isend", "send"))


def probe_ring(rank: int, world: int, sizes: tuple[int, ...]) -> list[dict]:
    """Run :func:`ring_all_reduce` on buffers of the given sizes; compare with ``dist.all_reduce``."""
    out = []
    for size in sizes:
        gen = torch.Generator().manual_seed(1000 * size + rank)
        x = torch.randn(size, generator=gen, dtype=torch.float64)
        mine, sent = ring_all_reduce(x)
        ref = x.clone()
        dist.all_reduce(ref)
        out.append({"size": size, "sent_elements": sent, "max_abs_err_vs_dist": float((mine - ref).abs().max()),
                    "result": mine.tolist()})
    return out


def probe_all(rank: int, world: int, ring_sizes: tuple[int, ...] = (12, 13, 1001)) -> dict:
    """Everything the verifiers need from one process group: all engines, then the ring."""
    return {"engines": probe_engines(rank, world), "ring": probe_ring(rank, world, ring_sizes)}


def fsdp2_shard_rows(dim0: int, world: int) -> list[int]:
    """Rows of a dim-0 ``torch.chunk`` shard on each rank: ceil(d/N) each until the rows run out."""
    c = math.ceil(dim0 / world)
    return [max(0, min(c, dim0 - r * c)) for r in range(world)]
