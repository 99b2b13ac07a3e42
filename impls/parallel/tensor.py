"""Megatron tensor parallelism and sequence parallelism for one GPT layer, on any process group.

Tensor parallelism (Shoeybi et al. 2019, arXiv 1909.08053, §3 and Fig. 3). In the MLP
``Z = GeLU(X A) B`` the first weight A is split by columns (output features) and B by rows (input
features), so rank r computes ``GeLU(X A_r) B_r`` with no communication between the two GEMMs and
one all-reduce sums the partial outputs. Attention is split by heads: Q, K, V column-parallel
(each rank owns a/t heads), the output projection row-parallel. The conjugate operators are

    f: identity forward, all-reduce backward      (before each column-parallel linear)
    g: all-reduce forward, identity backward      (after each row-parallel linear)

so one layer (attention + MLP) needs 2 all-reduces of an [s, b, h] tensor forward and 2 backward.
A column-parallel linear inside the block never all-gathers its output (Megatron's
``gather_output=False``): the split output is exactly what the row-parallel linear wants.

Sequence parallelism (Korthikanti et al. 2022, arXiv 2205.05198, §4.2.2). LayerNorm, dropout and
the residual run on a [s/t, b, h] shard of the sequence; f becomes an all-gather along the sequence
(reduce-scatter backward) and g a reduce-scatter (all-gather backward). A ring all-reduce is a
reduce-scatter followed by an all-gather, so the bytes on the wire are the same. Megatron keeps
only the local shard as the saved input of a column-parallel linear and all-gathers it again in
backward for the weight gradient (``regather=True``): two more all-gathers per layer, overlapped
with the input-gradient GEMM, in exchange for t× less saved activation memory there.

Weights: ``nn.Linear`` stores [out, in], so Megatron's "split A by columns" is ``dim=0`` here.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from impls.distributed.activations import TransformerLayer


# ----------------------------------------------------------------------------- sharding
def split_columns(weight: torch.Tensor, rank: int, world: int, groups: int = 1) -> torch.Tensor:
    """Rank ``rank``'s output features of a column-parallel linear (``nn.Linear`` dim 0).

    ``groups`` > 1 for a fused weight whose outputs are ``groups`` stacked blocks (QKV: 3), each of
    which is split the same way, so a rank gets Q, K and V of the same heads.
    """
    out = weight.shape[0]
    if out % (groups * world):
        raise ValueError(f"{out} output features do not split into {groups} groups x {world} ranks")
    blocks = weight.reshape(groups, world, out // (groups * world), *weight.shape[1:])
    return blocks[:, rank].reshape(out // world, *weight.shape[1:]).clone()


def split_rows(weight: torch.Tensor, rank: int, world: int) -> torch.Tensor:
    """Rank ``rank``'s input features of a row-parallel linear (``nn.Linear`` dim 1)."""
    if weight.shape[1] % world:
        raise ValueError(f"{weight.shape[1]} input features do not split into {world} ranks")
    return weight.chunk(world, dim=1)[rank].clone()


# ------------------------------------------------------------------ the conjugate operators
class _CopyToTP(torch.autograd.Function):
    """f: identity forward, all-reduce of the input gradient backward."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        grad = grad.contiguous()
        dist.all_reduce(grad, group=ctx.group)
        return grad, None


class _ReduceFromTP(torch.autograd.Function):
    """g: all-reduce forward (sums the row-parallel partial outputs), identity backward."""

    @staticmethod
    def forward(ctx, x, group):
        x = x.contiguous().clone()
        dist.all_reduce(x, group=group)
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad, None


def _gather_seq(x: torch.Tensor, group) -> torch.Tensor:
    world = dist.get_world_size(group)
    out = x.new_empty((x.shape[0] * world, *x.shape[1:]))
    dist.all_gather_single(out, x.contiguous(), group=group)
    return out


def _reduce_scatter_seq(x: torch.Tensor, group) -> torch.Tensor:
    world = dist.get_world_size(group)
    if x.shape[0] % world:
        raise ValueError(f"sequence length {x.shape[0]} does not split into {world} ranks")
    out = x.new_empty((x.shape[0] // world, *x.shape[1:]))
    dist.reduce_scatter_single(out, x.contiguous(), group=group)
    return out


class _GatherFromSP(torch.autograd.Function):
    """Sequence-parallel f: all-gather along the sequence forward, reduce-scatter backward."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return _gather_seq(x, group)

    @staticmethod
    def backward(ctx, grad):
        return _reduce_scatter_seq(grad, ctx.group), None


class _ReduceScatterToSP(torch.autograd.Function):
    """Sequence-parallel g: reduce-scatter along the sequence forward, all-gather backward."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return _reduce_scatter_seq(x, group)

    @staticmethod
    def backward(ctx, grad):
        return _gather_seq(grad, ctx.group), None


class _SPColumnLinear(torch.autograd.Function):
    """All-gather the sequence shard, then a column-parallel linear; saves only the local shard.

    Backward all-gathers the shard again for the weight gradient and reduce-scatters the input
    gradient (Megatron's ``linear_with_grad_accumulation_and_async_allreduce`` with
    ``sequence_parallel=True``).
    """

    @staticmethod
    def forward(ctx, x_local, weight, bias, group):
        ctx.group = group
        ctx.has_bias = bias is not None
        ctx.save_for_backward(x_local, weight)
        return F.linear(_gather_seq(x_local, group), weight, bias)

    @staticmethod
    def backward(ctx, grad):
        x_local, weight = ctx.saved_tensors
        total = _gather_seq(x_local, ctx.group)                       # the extra all-gather
        grad_input = _reduce_scatter_seq(grad.matmul(weight), ctx.group)
        g2, t2 = grad.reshape(-1, grad.shape[-1]), total.reshape(-1, total.shape[-1])
        grad_weight = g2.t().matmul(t2)
        grad_bias = g2.sum(0) if ctx.has_bias else None
        return grad_input, grad_weight, grad_bias, None


def copy_to_tp(x: torch.Tensor, group) -> torch.Tensor:
    return _CopyToTP.apply(x, group)


def reduce_from_tp(x: torch.Tensor, group) -> torch.Tensor:
    return _ReduceFromTP.apply(x, group)


def gather_from_sp(x: torch.Tensor, group) -> torch.Tensor:
    return _GatherFromSP.apply(x, group)


def reduce_scatter_to_sp(x: torch.Tensor, group) -> torch.Tensor:
    return _ReduceScatterToSP.apply(x, group)


def _dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    return F.dropout(x, p, training) if p > 0 and training else x


# ---------------------------------------------------------------------------- the layer
class TPTransformerLayer(nn.Module):
    """One GPT layer (the same maths as ``impls.distributed.activations.TransformerLayer``) split
    over the ranks of ``group``.

    Built from a dense layer by slicing its weights, so outputs and gradients can be compared
    with the dense layer's. ``sequence_parallel=False``: input and output are the full
    [s, b, h] on every rank. ``True``: they are this rank's [s/t, b, h] slice of the sequence.
    LayerNorm parameters and the biases added after g are replicated; under sequence parallelism
    their gradients are partial and :meth:`sync_replicated_grads` all-reduces them (Megatron's
    layernorm all-reduce), which is optimizer-time traffic, not per-layer traffic.
    """

    def __init__(self, dense: TransformerLayer, group=None, sequence_parallel: bool = False,
                 regather: bool = True):
        super().__init__()
        self.group = group
        self.world, self.rank = dist.get_world_size(group), dist.get_rank(group)
        if dense.heads % self.world:
            raise ValueError(f"{dense.heads} heads do not split over {self.world} ranks")
        self.sp, self.regather = sequence_parallel, regather
        self.local_heads, self.p = dense.heads // self.world, dense.p
        h = dense.ln1.normalized_shape[0]
        self.head_dim = h // dense.heads
        t, r = self.world, self.rank

        def param(x: torch.Tensor) -> nn.Parameter:
            return nn.Parameter(x.detach().clone())

        self.ln1, self.ln2 = (nn.LayerNorm(h, dtype=dense.ln1.weight.dtype) for _ in range(2))
        self.ln1.load_state_dict(dense.ln1.state_dict())
        self.ln2.load_state_dict(dense.ln2.state_dict())
        self.qkv_w = param(split_columns(dense.qkv.weight, r, t, groups=3))
        self.qkv_b = param(split_columns(dense.qkv.bias, r, t, groups=3))
        self.proj_w = param(split_rows(dense.proj.weight, r, t))
        self.proj_b = param(dense.proj.bias)                   # added once, after g
        self.fc1_w = param(split_columns(dense.fc1.weight, r, t))
        self.fc1_b = param(split_columns(dense.fc1.bias, r, t))
        self.fc2_w = param(split_rows(dense.fc2.weight, r, t))
        self.fc2_b = param(dense.fc2.bias)

    # the two halves of the f ... g sandwich
    def _column(self, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        if not self.sp:
            return F.linear(copy_to_tp(x, self.group), w, b)
        if self.regather:
            return _SPColumnLinear.apply(x, w, b, self.group)
        return F.linear(gather_from_sp(x, self.group), w, b)

    def _row(self, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        partial = F.linear(x, w)
        out = reduce_scatter_to_sp(partial, self.group) if self.sp else reduce_from_tp(partial, self.group)
        return out + b

    def attention_block(self, x: torch.Tensor) -> torch.Tensor:
        """x + Drop(g(Proj_r(Attn(heads_r of QKV_r(f(LN1(x)))))))."""
        a, d = self.local_heads, self.head_dim
        qkv = self._column(self.ln1(x), self.qkv_w, self.qkv_b)          # [s, b, 3·a_r·d]
        s, b = qkv.shape[:2]
        qkv = qkv.view(s, b, 3, a, d).permute(2, 1, 3, 0, 4).contiguous()  # [3, b, a_r, s, d]
        q, k, v = qkv[0], qkv[1], qkv[2]
        probs = torch.softmax(torch.matmul(q, k.transpose(-1, -2)) * d**-0.5, dim=-1)
        probs = _dropout(probs, self.p, self.training)
        ctx = torch.matmul(probs, v).permute(2, 0, 1, 3).reshape(s, b, a * d)
        return x + _dropout(self._row(ctx, self.proj_w, self.proj_b), self.p, self.training)

    def mlp_block(self, x: torch.Tensor) -> torch.Tensor:
        """x + Drop(g(GeLU(f(LN2(x)) A_r) B_r)): nothing is communicated between the two GEMMs."""
        y = F.gelu(self._column(self.ln2(x), self.fc1_w, self.fc1_b))
        return x + _dropout(self._row(y, self.fc2_w, self.fc2_b), self.p, self.training)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.mlp_block(self.attention_block(x))

    def replicated_parameters(self) -> list[nn.Parameter]:
        return [*self.ln1.parameters(), *self.ln2.parameters(), self.proj_b, self.fc2_b]

    def sync_replicated_grads(self) -> None:
        """Sum the partial gradients of replicated parameters (needed only with sequence parallelism)."""
        if self.sp:
            for p in self.replicated_parameters():
                dist.all_reduce(p.grad, group=self.group)


# ---------------------------------------------------------------------------- volumes
RING_FACTOR = {"all_reduce": 2, "all_gather": 1, "reduce_scatter": 1}


def ring_sent(collectives: dict[str, dict[str, int]], world: int) -> float:
    """Elements one rank sends on a ring for counted collectives ({name: {elements, ...}}).

    An all-reduce of S elements sends 2(t-1)/t·S, an all-gather or reduce-scatter (t-1)/t·S
    (S the full buffer); names are matched by prefix (``all_gather_single`` is an all-gather).
    """
    total = 0.0
    for name, row in collectives.items():
        kind = next((k for k in RING_FACTOR if name.startswith(k)), None)
        if kind is None:
            raise ValueError(f"no ring cost for collective {name!r}")
        total += RING_FACTOR[kind] * (world - 1) / world * row["elements"]
    return total


def layer_elements_sent(s: int, b: int, h: int, t: int, mode: str) -> float:
    """Ring elements one rank sends per layer, forward + backward.

    tp: 4 all-reduces of sbh; sp_keep: 4 all-gathers + 4 reduce-scatters of sbh (the same bytes);
    sp (Megatron, re-gathering the saved shard in backward): 2 more all-gathers.
    """
    per = (t - 1) / t * s * b * h
    return {"tp": 8 * per, "sp_keep": 8 * per, "sp": 10 * per}[mode]
