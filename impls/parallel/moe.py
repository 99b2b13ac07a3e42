"""Mixture-of-Experts: top-k routing, load balancing, capacity and dropping, expert parallelism.

Routing (Switch, Fedus et al. 2021, arXiv 2101.03961, §2.1-2.2; GShard, Lepikhin et al. 2020,
arXiv 2006.16668, §2.2): router probabilities p = softmax(x W_r) over N experts; each token goes to
its top-k experts with gate weights p (renormalised over the k chosen when ``normalize``).

Load-balancing loss (Switch Eq. 4): ``α·N·Σ_i f_i·P_i`` with f_i the fraction of the T·k
assignments sent to expert i and P_i the mean router probability of expert i. Uniform routing
gives f_i = P_i = 1/N and a loss of exactly α, whatever N and k.

Capacity (Switch §2.2, GShard §2.2): ``C = ceil(capacity_factor · T · k / N)`` slots per expert.
Assignments queue per expert in priority order (every token's first choice before any second
choice, then token order); those beyond C are dropped: that expert contributes nothing and, in
the layer ``x + MoE(x)``, the token passes through on the residual.

Expert parallelism (GShard §3): N/P experts per rank. The tokens of each rank fill a
[N, C, h] dispatch buffer; one all-to-all sends expert block j to rank j, the experts run, and a
second all-to-all returns the outputs (autograd adds the mirror pair in backward). The same
result can be had with an all-gather of the tokens and a reduce-scatter of the outputs
(Megatron-Core's "allgather" dispatcher), which moves more bytes.

DeepSeek-V3 (arXiv 2412.19437, §2.1.2): sigmoid affinities s, top-k chosen on s + b with a per-expert
bias b that is only used for selection and is nudged by γ after each step (down if the expert
was overloaded, up if underloaded); the gates use s alone. A complementary sequence-wise balance
loss with a small α is kept.
"""

from __future__ import annotations

import math

import torch
import torch.distributed as dist
import torch.nn.functional as F

from impls.parallel.comm import all_to_all


# --------------------------------------------------------------------------------- router
def route(logits: torch.Tensor, k: int, normalize: bool = True) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(probs [T, N], chosen experts [T, k], gate weights [T, k]) from router logits [T, N].

    Probabilities in fp32 (fp64 logits stay fp64). ``normalize``: divide the k gates by their sum (Mixtral,
    GShard). With k = 1 that makes every gate exactly 1, so the task loss no longer reaches the router
    (only the balancing loss does): Switch (k = 1) keeps the raw probability, ``normalize=False``.
    """
    probs = torch.softmax(logits.to(torch.float64 if logits.dtype == torch.float64 else torch.float32), dim=-1)
    gates, idx = probs.topk(k, dim=-1)
    if normalize:
        gates = gates / gates.sum(-1, keepdim=True)
    return probs, idx, gates


def load_balancing_loss(probs: torch.Tensor, idx: torch.Tensor, alpha: float = 1e-2) -> torch.Tensor:
    """Switch Transformer's α·N·Σ f_i·P_i; f_i over the T·k assignments, P_i = mean router probability."""
    n = probs.shape[-1]
    f = F.one_hot(idx.reshape(-1), n).to(probs.dtype).mean(0)
    return alpha * n * (f * probs.mean(0)).sum()


def capacity(tokens: int, n_experts: int, k: int, capacity_factor: float) -> int:
    """Slots per expert: ceil(capacity_factor · tokens · k / n_experts)."""
    return math.ceil(capacity_factor * tokens * k / n_experts)


def dispatch_plan(idx: torch.Tensor, n_experts: int, cap: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(slot of each assignment in its expert's queue [T, k], kept [T, k]); first choices queue first."""
    order = idx.t().reshape(-1)                                  # choice-major, then token order
    onehot = F.one_hot(order, n_experts)
    slot = ((onehot.cumsum(0) - 1) * onehot).sum(-1)
    slot = slot.view(idx.shape[1], idx.shape[0]).t()
    return slot, slot < cap


def _expert_mlp(buf: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor) -> torch.Tensor:
    """Each expert's GeLU MLP on its slots: [E, C, h] x [E, h, f] x [E, f, h] -> [E, C, h]."""
    return F.gelu(buf.bmm(w1)).bmm(w2)


def _fill(x: torch.Tensor, idx: torch.Tensor, slot: torch.Tensor, keep: torch.Tensor, n: int, cap: int) -> torch.Tensor:
    tok = torch.arange(x.shape[0]).unsqueeze(1).expand_as(idx)
    buf = x.new_zeros(n, cap, x.shape[1])
    return buf.index_put((idx[keep], slot[keep]), x[tok[keep]])


def _combine(out: torch.Tensor, idx, slot, keep, gates, tokens: int) -> torch.Tensor:
    tok = torch.arange(tokens).unsqueeze(1).expand_as(idx)
    y = out.new_zeros(tokens, out.shape[-1])
    return y.index_add(0, tok[keep], gates[keep].to(out.dtype).unsqueeze(1) * out[idx[keep], slot[keep]])


def moe(x: torch.Tensor, w_router: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, k: int,
        capacity_factor: float, normalize: bool = True) -> tuple[torch.Tensor, dict]:
    """MoE(x) for x [T, h] with all N experts here (w1 [N, h, f], w2 [N, f, h]); the layer is x + MoE(x)."""
    n = w1.shape[0]
    probs, idx, gates = route(x.matmul(w_router.t()), k, normalize)
    cap = capacity(x.shape[0], n, k, capacity_factor)
    slot, keep = dispatch_plan(idx, n, cap)
    out = _expert_mlp(_fill(x, idx, slot, keep, n, cap), w1, w2)
    y = _combine(out, idx, slot, keep, gates, x.shape[0])
    return y, {"capacity": cap, "dropped": int((~keep).sum()), "kept": int(keep.sum()),
               "load": torch.bincount(idx.reshape(-1), minlength=n).tolist(),
               "aux_loss": float(load_balancing_loss(probs.detach(), idx))}


def moe_expert_parallel(x: torch.Tensor, w_router: torch.Tensor, w1_local: torch.Tensor, w2_local: torch.Tensor,
                        k: int, capacity_factor: float, normalize: bool = True, group=None) -> torch.Tensor:
    """MoE on this rank's tokens x [T, h] with this rank's N/P experts; all-to-all dispatch and combine.

    Capacity is per rank (each rank's tokens are one GShard "group"), so the result equals
    :func:`moe` applied to this rank's tokens with all N experts.
    """
    world = dist.get_world_size(group)
    n = w1_local.shape[0] * world
    _, idx, gates = route(x.matmul(w_router.t()), k, normalize)
    cap = capacity(x.shape[0], n, k, capacity_factor)
    slot, keep = dispatch_plan(idx, n, cap)
    buf = _fill(x, idx, slot, keep, n, cap)                                # [N, C, h]
    mine = all_to_all(buf, scatter_dim=0, gather_dim=1, group=group)       # [N/P, P·C, h]
    out = _expert_mlp(mine, w1_local, w2_local)
    back = all_to_all(out, scatter_dim=1, gather_dim=0, group=group)       # [N, C, h]
    return _combine(back, idx, slot, keep, gates, x.shape[0])


@torch.no_grad()
def moe_allgather_dispatch(x: torch.Tensor, w_router: torch.Tensor, w1_local: torch.Tensor, w2_local: torch.Tensor,
                           k: int, capacity_factor: float, normalize: bool = True, group=None) -> torch.Tensor:
    """The same forward with an all-gather of every rank's tokens and a reduce-scatter of the outputs."""
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    e_local = w1_local.shape[0]
    n, t = e_local * world, x.shape[0]
    everyone = x.new_empty(world * t, x.shape[1])
    dist.all_gather_single(everyone, x.contiguous(), group=group)
    partial = x.new_zeros(world * t, x.shape[1])
    for src in range(world):                         # each source rank's tokens are one group
        xs = everyone[src * t:(src + 1) * t]
        _, idx, gates = route(xs.matmul(w_router.t()), k, normalize)
        cap = capacity(t, n, k, capacity_factor)
        slot, keep = dispatch_plan(idx, n, cap)
        mine = (idx // e_local == rank) & keep
        buf = _fill(xs, idx - rank * e_local, slot, mine, e_local, cap)
        partial[src * t:(src + 1) * t] = _combine(_expert_mlp(buf, w1_local, w2_local), idx - rank * e_local,
                                                  slot, mine, gates, t)
    y = x.new_empty(t, x.shape[1])
    dist.reduce_scatter_single(y, partial, group=group)
    return y


# ------------------------------------------------------------------------ DeepSeek-V3 routing
def biased_topk(scores: torch.Tensor, bias: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(experts chosen on scores + bias, gates = the chosen *unbiased* scores renormalised)."""
    idx = (scores + bias).topk(k, dim=-1).indices
    gates = scores.gather(-1, idx)
    return idx, gates / gates.sum(-1, keepdim=True)


def update_bias(bias: torch.Tensor, load: torch.Tensor, gamma: float) -> torch.Tensor:
    """b_i -= γ if expert i got more than the mean load, += γ if less (DeepSeek-V3 §2.1.2)."""
    return bias - gamma * torch.sign(load.float() - load.float().mean())


def sequence_balance_loss(scores: torch.Tensor, idx: torch.Tensor, alpha: float) -> torch.Tensor:
    """DeepSeek-V3's complementary sequence-wise loss α·Σ_i f_i·P_i for one sequence of T tokens.

    f_i = N/(k·T)·#{t : i in top-k of t}; P_i = mean over t of s_{i,t} / Σ_j s_{j,t}.
    """
    t, n = scores.shape
    k = idx.shape[1]
    f = F.one_hot(idx.reshape(-1), n).float().sum(0) * n / (k * t)
    p = (scores / scores.sum(-1, keepdim=True)).mean(0)
    return alpha * (f * p).sum()
