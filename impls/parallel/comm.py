"""Autograd-aware all-to-all, shared by Ulysses sequence parallelism and expert parallelism.

``all_to_all(x, scatter_dim, gather_dim, group)`` splits ``x`` into P equal chunks along
``scatter_dim``, sends chunk j to rank j and concatenates what arrives (in rank order) along
``gather_dim``. Its backward is the all-to-all with the two dimensions swapped. It calls
``torch.distributed.all_to_all_single`` once, so a :class:`~impls.distributed.probes.CollectiveLog`
counts it: the buffer handed out is ``x`` (its own chunk included); (P-1)/P of it leaves the rank.
"""

from __future__ import annotations

import torch
import torch.distributed as dist


def _exchange(x: torch.Tensor, scatter_dim: int, gather_dim: int, group) -> torch.Tensor:
    world = dist.get_world_size(group)
    if x.shape[scatter_dim] % world:
        raise ValueError(f"dimension {scatter_dim} of size {x.shape[scatter_dim]} does not split over {world} ranks")
    send = torch.stack(x.chunk(world, dim=scatter_dim)).contiguous()   # [P, ...chunk]
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send, group=group)
    return torch.cat(recv.unbind(0), dim=gather_dim)


class _AllToAll(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, scatter_dim, gather_dim, group):
        ctx.dims, ctx.group = (scatter_dim, gather_dim), group
        return _exchange(x, scatter_dim, gather_dim, group)

    @staticmethod
    def backward(ctx, grad):
        scatter_dim, gather_dim = ctx.dims
        return _exchange(grad, gather_dim, scatter_dim, ctx.group), None, None, None


def all_to_all(x: torch.Tensor, scatter_dim: int, gather_dim: int, group=None) -> torch.Tensor:
    return _AllToAll.apply(x, scatter_dim, gather_dim, group)
