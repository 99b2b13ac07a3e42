"""What tensor, pipeline, sequence and expert parallelism compute and send, measured on gloo.

Each ``probe_*`` runs inside ``impls.distributed.probes.launch`` (4 CPU ranks) and returns plain
data: this rank's outputs and gradients, and the collectives it called, counted by
:class:`~impls.distributed.probes.CollectiveLog` (forward and backward apart). The verifiers
compare them with dense single-process computations of their own.

Sub-groups: the 4 ranks also form two pairs ([0, 1], [2, 3]) so every probe runs at degree 2 and 4.
"""

from __future__ import annotations

import traceback
import warnings
from typing import Callable

import torch
import torch.distributed as dist
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from impls.distributed.activations import TransformerLayer, saved_activation_bytes
from impls.distributed.probes import CollectiveLog


class LargestTensors(TorchDispatchMode):
    """Sees every aten op while active and keeps the largest tensor any of them produced (``largest``, in
    elements) and the largest matmul output (``largest_matmul``, with its shape): what a rank really held,
    measured outside the code under test."""

    MATMULS = ("mm", "bmm", "matmul", "addmm", "baddbmm")

    def __init__(self):
        super().__init__()
        self.largest, self.largest_matmul, self.matmul_shape = 0, 0, []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor):
                self.largest = max(self.largest, t.numel())
                if func.overloadpacket.__name__ in self.MATMULS and t.numel() > self.largest_matmul:
                    self.largest_matmul, self.matmul_shape = t.numel(), list(t.shape)
        return out

# the dense GPT layer every tensor-parallel run is cut from
TP_SHAPE = {"s": 8, "b": 2, "h": 16, "a": 4}


def _groups(world: int) -> dict[int, tuple[object, list[int]]]:
    """{degree: (the group this rank is in, its global ranks)} for the whole world and for pairs."""
    rank = dist.get_rank()
    out = {world: (dist.group.WORLD, list(range(world)))}
    if world % 2 == 0 and world > 2:
        pairs = [list(range(i, i + 2)) for i in range(0, world, 2)]
        made = [dist.new_group(p) for p in pairs]   # every rank creates every group, in order
        i = rank // 2
        out[2] = (made[i], pairs[i])
    return out


def _guard(name: str, fn: Callable[[], dict]) -> dict:
    """Run one probe; on an exception return the traceback instead, so other probes still report."""
    try:
        return fn()
    except Exception:  # noqa: BLE001 - reported to the verifier, which fails the claim
        return {"error": f"{name}: {traceback.format_exc()}"}


def dense_layer(dtype=torch.float64, dropout: float = 0.0) -> TransformerLayer:
    torch.manual_seed(0)
    return TransformerLayer(TP_SHAPE["h"], TP_SHAPE["a"], dropout=dropout).to(dtype)


def tp_inputs(dtype=torch.float64) -> tuple[torch.Tensor, torch.Tensor]:
    """(x, upstream gradient), [s, b, h] each; the loss is (layer(x) · g).sum()."""
    gen = torch.Generator().manual_seed(1)
    s, b, h = TP_SHAPE["s"], TP_SHAPE["b"], TP_SHAPE["h"]
    return (torch.randn(s, b, h, generator=gen, dtype=torch.float64).to(dtype),
            torch.randn(s, b, h, generator=gen, dtype=torch.float64).to(dtype))


# ------------------------------------------------------------------------------ tensor
def _tp_run(group, mode: str) -> dict:
    from impls.parallel.tensor import TPTransformerLayer

    sp, regather = mode != "tp", mode == "sp"
    layer = TPTransformerLayer(dense_layer(), group, sequence_parallel=sp, regather=regather)
    t, r = layer.world, layer.rank
    x, g = tp_inputs()
    if sp:
        x, g = x.chunk(t)[r], g.chunk(t)[r]
    x = x.clone().requires_grad_(True)
    log = CollectiveLog()
    dist.barrier(group=group)
    with log.active():
        mid = layer.attention_block(x)
        n_attn = len(log.calls)
        out = layer.mlp_block(mid)
        n_fwd = len(log.calls)
        (out * g).sum().backward()
        n_bwd = len(log.calls)
        layer.sync_replicated_grads()
    grads = {name: p.grad.tolist() for name, p in layer.named_parameters()}
    return {
        "mode": mode, "t": t, "rank": r, "out": out.detach().tolist(), "x_grad": x.grad.tolist(), "grads": grads,
        "attention_fwd": log.totals(log.calls[:n_attn]), "mlp_fwd": log.totals(log.calls[n_attn:n_fwd]),
        "fwd": log.totals(log.calls[:n_fwd]), "bwd": log.totals(log.calls[n_fwd:n_bwd]),
        "grad_sync": log.totals(log.calls[n_bwd:]),
    }


def _tp_saved_bytes(group, mode: str, dtype=torch.bfloat16) -> dict:
    """Activation bytes autograd saves on this rank for one layer with dropout, 16-bit."""
    from impls.parallel.tensor import TPTransformerLayer

    dense = dense_layer(dtype, dropout=0.1).train()
    x, _ = tp_inputs(dtype)
    if mode == "dense":
        return saved_activation_bytes(dense, x.requires_grad_(True))
    layer = TPTransformerLayer(dense, group, sequence_parallel=mode != "tp", regather=mode == "sp").train()
    if mode != "tp":
        x = x.chunk(layer.world)[layer.rank].clone()
    return saved_activation_bytes(layer, x.requires_grad_(True))


def probe_tensor(rank: int, world: int) -> dict:
    """Per degree t: TP, SP (Megatron, re-gather in backward) and SP keeping the gathered input."""
    out: dict = {}
    for t, (group, _) in sorted(_groups(world).items()):
        for mode in ("tp", "sp", "sp_keep"):
            out[f"t{t}/{mode}"] = _guard(f"t{t}/{mode}", lambda: _tp_run(group, mode))
            out[f"t{t}/{mode}/saved"] = _guard(f"t{t}/{mode}/saved", lambda: _tp_saved_bytes(group, mode))
        dist.barrier()
    out["dense/saved"] = _guard("dense/saved", lambda: _tp_saved_bytes(None, "dense"))
    return out


# ---------------------------------------------------------------------------- pipeline
PIPELINE_RUNS = (("gpipe", 4, 8, 1), ("1f1b", 4, 8, 1), ("interleaved", 4, 8, 2), ("1f1b", 2, 8, 1),
                 ("gpipe", 2, 8, 1))


def probe_pipeline(rank: int, world: int) -> dict:
    """Each (schedule, p, m, v) of PIPELINE_RUNS on ranks [0..p) (and [p..2p) when p = 2)."""
    from impls.parallel.pipeline_gloo import execute_schedule

    out: dict = {}
    for name, p, m, v in PIPELINE_RUNS:
        ranks = list(range(p)) if p == world else [r for r in range(world) if r // p == rank // p]
        log = CollectiveLog()
        dist.barrier()

        def run() -> dict:
            with log.active():
                rec = execute_schedule(ranks, name, m, v)
            rec["sends"] = log.totals()
            return rec

        out[f"{name}/p{p}/m{m}/v{v}"] = _guard(name, run)
    dist.barrier()
    return out


# ---------------------------------------------------------------------- context parallel
CP_SHAPE = {"b": 1, "n": 16, "h": 16, "heads": 4}


def cp_weights() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(x [b, N, h], W_qkv [3h, h], W_out [h, h], upstream gradient [b, N, h]), fp64."""
    gen = torch.Generator().manual_seed(3)
    b, n, h = CP_SHAPE["b"], CP_SHAPE["n"], CP_SHAPE["h"]
    x = torch.randn(b, n, h, generator=gen, dtype=torch.float64)
    w_qkv = torch.randn(3 * h, h, generator=gen, dtype=torch.float64) * h**-0.5
    w_out = torch.randn(h, h, generator=gen, dtype=torch.float64) * h**-0.5
    g = torch.randn(b, n, h, generator=gen, dtype=torch.float64)
    return x, w_qkv, w_out, g


def cp_qkv() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """q, k, v [b, H, N, d] for the ring probe, fp64."""
    gen = torch.Generator().manual_seed(4)
    b, n, heads, d = CP_SHAPE["b"], CP_SHAPE["n"], CP_SHAPE["heads"], CP_SHAPE["h"] // CP_SHAPE["heads"]
    return tuple(torch.randn(b, heads, n, d, generator=gen, dtype=torch.float64) for _ in range(3))


def _ulysses(group, causal: bool) -> dict:
    from impls.parallel.context import ulysses_attention

    world, r = dist.get_world_size(group), dist.get_rank(group)
    x, w_qkv, w_out, g = cp_weights()
    x_local = x.chunk(world, dim=1)[r].clone().requires_grad_(True)
    w_qkv, w_out = w_qkv.clone().requires_grad_(True), w_out.clone().requires_grad_(True)
    log, record = CollectiveLog(), {}
    with log.active():
        y = ulysses_attention(x_local, w_qkv, w_out, CP_SHAPE["heads"], causal, group, record)
        n_fwd = len(log.calls)
        (y * g.chunk(world, dim=1)[r]).sum().backward()
    return {"P": world, "rank": r, "out": y.detach().tolist(), "x_grad": x_local.grad.tolist(),
            "w_qkv_grad": w_qkv.grad.tolist(), "w_out_grad": w_out.grad.tolist(), "q_shape": record["q_shape"],
            "fwd": log.totals(log.calls[:n_fwd]), "bwd": log.totals(log.calls[n_fwd:])}


def _ring(group, causal: bool, layout: str) -> dict:
    from impls.parallel.context import ring_attention, shard_positions

    world, r = dist.get_world_size(group), dist.get_rank(group)
    q, k, v = cp_qkv()
    pos = [shard_positions(CP_SHAPE["n"], world, j, layout) for j in range(world)]
    mine = pos[r]
    log, sizes = CollectiveLog(), LargestTensors()
    q_l, k_l, v_l = (t[:, :, mine].contiguous() for t in (q, k, v))
    with log.active(), sizes:
        out, stats = ring_attention(q_l, k_l, v_l, mine, pos, causal, group)
    return {"P": world, "rank": r, "positions": mine.tolist(), "out": out.tolist(), "stats": stats,
            "q_shape": list(q_l.shape), "sends": log.totals(), "largest_tensor": sizes.largest,
            "largest_matmul": sizes.largest_matmul, "largest_matmul_shape": sizes.matmul_shape}


def _ulysses_refuses(group, heads: int) -> dict:
    """Ulysses with fewer heads than ranks: the head re-shard cannot give every rank a head."""
    from impls.parallel.context import ulysses_attention

    x, w_qkv, w_out, _ = cp_weights()
    world, r = dist.get_world_size(group), dist.get_rank(group)
    try:
        ulysses_attention(x.chunk(world, dim=1)[r], w_qkv, w_out, heads, group=group)
    except ValueError as exc:
        return {"P": world, "heads": heads, "refused": str(exc)}
    return {"P": world, "heads": heads, "refused": None}


def probe_context(rank: int, world: int) -> dict:
    out: dict = {"ulysses/heads2": _guard("ulysses heads", lambda: _ulysses_refuses(None, 2))}
    for p, (group, _) in sorted(_groups(world).items()):
        for causal in (False, True):
            out[f"ulysses/P{p}/causal{int(causal)}"] = _guard("ulysses", lambda: _ulysses(group, causal))
            for layout in ("contiguous", "zigzag"):
                if layout == "zigzag" and not causal:
                    continue
                out[f"ring/P{p}/causal{int(causal)}/{layout}"] = _guard("ring", lambda: _ring(group, causal, layout))
        dist.barrier()
    return out


# ---------------------------------------------------------------------- expert parallel
MOE_SHAPE = {"tokens": 12, "h": 8, "f": 16, "experts": 8, "k": 2, "capacity_factor": 1.0}


def moe_weights() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(router [N, h], w1 [N, h, f], w2 [N, f, h]), fp64; the router is skewed so that some tokens drop."""
    gen = torch.Generator().manual_seed(5)
    n, h, f = MOE_SHAPE["experts"], MOE_SHAPE["h"], MOE_SHAPE["f"]
    router = torch.randn(n, h, generator=gen, dtype=torch.float64)
    router[0] += 1.5  # expert 0 popular
    w1 = torch.randn(n, h, f, generator=gen, dtype=torch.float64) * h**-0.5
    w2 = torch.randn(n, f, h, generator=gen, dtype=torch.float64) * f**-0.5
    return router, w1, w2


def moe_tokens(rank: int, dtype=torch.float64) -> tuple[torch.Tensor, torch.Tensor]:
    """Rank ``rank``'s tokens [T, h] and the upstream gradient of its MoE output."""
    gen = torch.Generator().manual_seed(100 + rank)
    t, h = MOE_SHAPE["tokens"], MOE_SHAPE["h"]
    return (torch.randn(t, h, generator=gen, dtype=torch.float64).to(dtype),
            torch.randn(t, h, generator=gen, dtype=torch.float64).to(dtype))


def _experts(group, global_ranks: list[int]) -> dict:
    from impls.parallel.moe import moe_allgather_dispatch, moe_expert_parallel

    world, r = dist.get_world_size(group), dist.get_rank(group)
    router, w1, w2 = moe_weights()
    e = MOE_SHAPE["experts"] // world
    w1_local = w1[r * e:(r + 1) * e].clone().requires_grad_(True)
    w2_local = w2[r * e:(r + 1) * e].clone().requires_grad_(True)
    x, g = moe_tokens(global_ranks[r])
    x = x.clone().requires_grad_(True)
    args = (MOE_SHAPE["k"], MOE_SHAPE["capacity_factor"])
    log = CollectiveLog()
    with log.active():
        y = moe_expert_parallel(x, router, w1_local, w2_local, *args, group=group)
        n_fwd = len(log.calls)
        (y * g).sum().backward()
    ag_log = CollectiveLog()
    with ag_log.active():
        y_ag = moe_allgather_dispatch(x.detach(), router, w1_local.detach(), w2_local.detach(), *args, group=group)
    return {"P": world, "rank": r, "experts": list(range(r * e, (r + 1) * e)), "out": y.detach().tolist(),
            "x_grad": x.grad.tolist(), "w1_grad": w1_local.grad.tolist(), "w2_grad": w2_local.grad.tolist(),
            "fwd": log.totals(log.calls[:n_fwd]), "bwd": log.totals(log.calls[n_fwd:]),
            "allgather_out": y_ag.tolist(), "allgather_fwd": ag_log.totals()}


def probe_experts(rank: int, world: int) -> dict:
    out: dict = {}
    for p, (group, ranks) in sorted(_groups(world).items()):
        out[f"P{p}"] = _guard(f"experts P{p}", lambda: _experts(group, ranks))
        dist.barrier()
    return out


# --------------------------------------------------------------------------- collectives
ALL_REDUCE_SIZES = (12, 13, 1001)   # divisible by 4 and 2, not divisible, large and odd


def collective_input(size: int, global_rank: int) -> torch.Tensor:
    """The buffer rank ``global_rank`` contributes to every all-reduce of ``size`` elements (fp64)."""
    gen = torch.Generator().manual_seed(7919 * size + global_rank)
    return torch.randn(size, generator=gen, dtype=torch.float64)


def _all_reduce_run(group, ranks: list[int], algorithm: str, size: int) -> dict:
    from impls.parallel.collectives import ALL_REDUCE

    x = collective_input(size, dist.get_rank())
    log = CollectiveLog()
    with log.active():
        out = ALL_REDUCE[algorithm](x, group)
    ref = x.clone()
    dist.all_reduce(ref, group=group)
    sends = [numel * esize for name, numel, esize in log.calls if name in ("isend", "send")]
    others = sorted({name for name, _, _ in log.calls} - {"isend", "send"})
    return {"algorithm": algorithm, "size": size, "ranks": ranks, "rank": dist.get_rank(), "out": out.tolist(),
            "max_abs_err_vs_dist": float((out - ref).abs().max()), "send_bytes": sends, "other_collectives": others}


DDP_LAYERS = (16, 32, 32, 8)        # fp64: gradients compare exactly with the single-process oracle
DDP_CAP_BYTES = 2000                 # three buckets for DDP_LAYERS at 8 bytes per element
DDP_EXACT_CAP_BYTES = 2112           # the last layer's weight and bias fill a bucket exactly
DDP_BIG_LAYERS = (512, 512, 512)     # fp32, 1 MiB weights: the default caps (1 MiB first bucket, 25 MiB)
DDP_ACCUMULATION = 4


def ddp_model(layers: tuple[int, ...] = DDP_LAYERS, dtype=torch.float64) -> torch.nn.Sequential:
    torch.manual_seed(0)
    mods: list[torch.nn.Module] = []
    for i in range(len(layers) - 1):
        mods.append(torch.nn.Linear(layers[i], layers[i + 1]).to(dtype))
        if i < len(layers) - 2:
            mods.append(torch.nn.Tanh())
    return torch.nn.Sequential(*mods)


def ddp_batch(global_rank: int, micro: int, layers: tuple[int, ...] = DDP_LAYERS, dtype=torch.float64):
    """(x, y) of micro-batch ``micro`` on rank ``global_rank``: 2 rows each."""
    gen = torch.Generator().manual_seed(1000 * global_rank + micro)
    return (torch.randn(2, layers[0], generator=gen, dtype=torch.float64).to(dtype),
            torch.randn(2, layers[-1], generator=gen, dtype=torch.float64).to(dtype))


class _BucketRecorder:
    """A DDP comm hook equal to the default (average, then all-reduce) that records each bucket and the
    order in which its all-reduce is launched among the parameters' gradient-ready events."""

    def __init__(self, model: torch.nn.Module):
        self.index = {id(p): i for i, p in enumerate(model.parameters())}
        self.events: list[tuple[str, int]] = []
        self.buckets: list[dict] = []
        for i, p in enumerate(model.parameters()):
            p.register_post_accumulate_grad_hook(lambda _p, i=i: self.events.append(("grad", i)))

    def hook(self, _state, bucket):  # DDP wants a function (it reads __name__)
        buf = bucket.buffer()
        self.events.append(("launch", bucket.index()))
        self.buckets.append({"index": bucket.index(), "bytes": buf.numel() * buf.element_size(),
                             "params": [self.index[id(p)] for p in bucket.parameters()]})
        buf.div_(dist.get_world_size())
        return dist.all_reduce(buf, async_op=True).get_future().then(lambda fut: fut.value()[0])

    def reset(self) -> None:
        self.events, self.buckets = [], []


def _ddp_buckets(layers: tuple[int, ...], cap_mb: float | None, dtype) -> dict:
    from torch.nn.parallel import DistributedDataParallel as DDP

    model = ddp_model(layers, dtype)
    sizes = [p.numel() * p.element_size() for p in model.parameters()]
    broadcasts: list[int] = []
    original = dist._broadcast_coalesced

    def counted(group, tensors, *args, **kwargs):
        broadcasts.append(sum(t.numel() * t.element_size() for t in tensors))
        return original(group, tensors, *args, **kwargs)

    dist._broadcast_coalesced = counted   # DDP syncs the replicas with this C++ call, not dist.broadcast
    try:
        ddp = DDP(model, bucket_cap_mb=cap_mb)
        at_init = list(broadcasts)
        rec = _BucketRecorder(model)
        ddp.register_comm_hook(None, rec.hook)
        per_iter = []
        for it in range(3):
            rec.reset()
            x, y = ddp_batch(dist.get_rank(), it, layers, dtype)
            torch.nn.functional.mse_loss(ddp(x), y).backward()
            per_iter.append({"buckets": rec.buckets, "events": rec.events})
        during_steps = broadcasts[len(at_init):]
    finally:
        dist._broadcast_coalesced = original
    return {"param_bytes": sizes, "iterations": per_iter, "broadcast_bytes_at_init": at_init,
            "broadcast_bytes_during_steps": during_steps}


def _ddp_accumulation(no_sync: bool) -> dict:
    """DDP_ACCUMULATION micro-batches per optimizer step, each loss divided by their count; with
    ``no_sync`` all but the last backward run inside ``ddp.no_sync()``."""
    from contextlib import nullcontext

    from torch.nn.parallel import DistributedDataParallel as DDP

    from impls.distributed.probes import _allreduce_hook

    model = ddp_model()
    ddp = DDP(model, bucket_cap_mb=DDP_CAP_BYTES / 2**20)
    ddp.register_comm_hook(None, _allreduce_hook)
    warm_x, warm_y = ddp_batch(dist.get_rank(), 99)
    torch.nn.functional.mse_loss(ddp(warm_x), warm_y).backward()   # iteration 1: buckets are rebuilt after it
    model.zero_grad()
    log, per_micro = CollectiveLog(), []
    with log.active():
        for i in range(DDP_ACCUMULATION):
            n0 = len(log.calls)
            ctx = ddp.no_sync() if no_sync and i < DDP_ACCUMULATION - 1 else nullcontext()
            with ctx:
                x, y = ddp_batch(dist.get_rank(), i)
                (torch.nn.functional.mse_loss(ddp(x), y) / DDP_ACCUMULATION).backward()
            calls = log.calls[n0:]
            per_micro.append({"all_reduces": sum(1 for c in calls if c[0] == "all_reduce"),
                              "bytes": sum(n * e for name, n, e in calls if name == "all_reduce")})
    return {"per_micro": per_micro, "grads": [p.grad.flatten().tolist() for p in model.parameters()]}


def _double_sync() -> dict:
    """One DDP backward (averaged gradients), then the same gradients all-reduced once more, SUM or AVG,
    and one SGD / Adam step from each."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    model = ddp_model()
    ddp = DDP(model)
    x, y = ddp_batch(dist.get_rank(), 0)
    torch.nn.functional.mse_loss(ddp(x), y).backward()
    grads = {"ddp": [p.grad.detach().clone() for p in model.parameters()]}
    for op in ("SUM", "AVG"):
        again = [g.clone() for g in grads["ddp"]]
        for g in again:
            dist.all_reduce(g, op=getattr(dist.ReduceOp, op))
        grads[op] = again
    steps: dict[str, dict[str, list]] = {}
    for opt_name in ("sgd", "adam"):
        steps[opt_name] = {}
        for key, gs in grads.items():
            params = [p.detach().clone().requires_grad_(True) for p in model.parameters()]
            opt = (torch.optim.SGD(params, lr=0.1) if opt_name == "sgd" else torch.optim.Adam(params, lr=0.1))
            for p, g in zip(params, gs):
                p.grad = g.clone()
            opt.step()
            steps[opt_name][key] = [(p.detach() - p0.detach()).flatten().tolist()
                                    for p, p0 in zip(params, model.parameters())]
    return {"grads": {k: [g.flatten().tolist() for g in v] for k, v in grads.items()}, "updates": steps}


def _loss_all_reduced_twice() -> dict:
    """The loss all-reduced (SUM) twice before backward: in place with ``dist.all_reduce`` (outside
    autograd) and with the differentiable functional collective (its backward all-reduces the gradient)."""
    import torch.distributed._functional_collectives as funcol
    from torch.nn.parallel import DistributedDataParallel as DDP

    out = {}
    for mode in ("once", "inplace_twice", "autograd_twice"):
        model = ddp_model()
        ddp = DDP(model)
        x, y = ddp_batch(dist.get_rank(), 0)
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        local = loss.detach().item()
        if mode == "inplace_twice":
            dist.all_reduce(loss)
            dist.all_reduce(loss)
        elif mode == "autograd_twice":
            world = dist.group.WORLD
            loss = funcol.all_reduce(funcol.all_reduce(loss, "sum", world), "sum", world)
        logged = loss.detach().item()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            loss.backward()
        out[mode] = {"local_loss": local, "logged_loss": logged,
                     "grads": [p.grad.flatten().tolist() for p in model.parameters()],
                     "warnings": [str(w.message).split(":")[0] + ": " + str(w.message).split(":")[1][:60]
                                  for w in caught if "autograd kernel" in str(w.message)]}
    return out


def probe_collectives(rank: int, world: int) -> dict:
    """Ring, halving-doubling and tree all-reduce at degree 4 and in pairs; DDP's buckets, ``no_sync``,
    gradients synced twice and a loss all-reduced twice, all on the world group."""
    out: dict = {}
    for p, (group, ranks) in sorted(_groups(world).items()):
        for algorithm in ("ring", "halving_doubling", "tree"):
            for size in ALL_REDUCE_SIZES:
                key = f"{algorithm}/P{p}/S{size}"
                out[key] = _guard(key, lambda: _all_reduce_run(group, ranks, algorithm, size))
        dist.barrier()
    out["ddp/buckets"] = _guard("ddp buckets", lambda: _ddp_buckets(DDP_LAYERS, DDP_CAP_BYTES / 2**20, torch.float64))
    out["ddp/buckets_exact"] = _guard("ddp exact-cap buckets",
                                      lambda: _ddp_buckets(DDP_LAYERS, DDP_EXACT_CAP_BYTES / 2**20, torch.float64))
    out["ddp/buckets_default"] = _guard("ddp default buckets",
                                        lambda: _ddp_buckets(DDP_BIG_LAYERS, None, torch.float32))
    for no_sync in (False, True):
        out[f"ddp/accumulate/no_sync{int(no_sync)}"] = _guard("ddp accumulate", lambda: _ddp_accumulation(no_sync))
    out["ddp/double_sync"] = _guard("double sync", _double_sync)
    out["ddp/loss_twice"] = _guard("loss twice", _loss_all_reduced_twice)
    dist.barrier()
    return out


# ----------------------------------------------------------------------------- all of it
PROBES = {"tensor": probe_tensor, "pipeline": probe_pipeline, "context": probe_context, "experts": probe_experts,
          "collectives": probe_collectives}


def probe_all(rank: int, world: int, topics: tuple[str, ...] = tuple(PROBES)) -> dict[str, dict]:
    """The probes of ``topics`` (default: all) in one process group: one spawn of the ranks."""
    out = {}
    for name in topics:
        out[name] = _guard(name, lambda: PROBES[name](rank, world))
        dist.barrier()
    return out
