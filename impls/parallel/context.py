"""Sequence (context) parallel attention: DeepSpeed-Ulysses and Ring Attention.

Both start from a sequence split over P ranks: rank r holds n = N/P tokens.

Ulysses (Jacobs et al. 2023, arXiv 2309.14509, §3). Each rank projects its tokens to Q, K, V for
*all* H heads, then one all-to-all per tensor re-shards from "n tokens, H heads" to "N tokens,
H/P heads"; every rank runs ordinary full-sequence attention on its heads; a fourth all-to-all
brings the output back to "n tokens, H heads". So the attention itself is sharded by heads (P
must divide H: P <= H), and each rank hands out 4 buffers of b·n·h elements, (P-1)/P of which
leave it: 4·b·N·h·(P-1)/P² elements per rank per layer forward, which shrinks as P grows at
fixed N (the paper's 4Nh/P per link).

Ring Attention (Liu et al. 2023, arXiv 2310.01889, §3). Q stays sharded by sequence; the K/V
blocks travel around the ring, P-1 hops, and each rank merges the partial softmax of every block
into its output with the running max / running sum (online softmax). Each hop sends the K and V
block, 2·b·n·h elements: 2·b·N·h·(P-1)/P per rank per layer forward, about the same whatever P.
The transfer of the next block is posted before the current block is computed, so it can hide
behind compute when a block is large enough (block length c >= FLOPS / bandwidth, §3; the paper's
Table 2 asks for s = 6c tokens per device, about 6.2K on A100s over NVLink, since a device holds six
blocks). A causal mask halves the average work per hop, so overlap needs about twice the block.

Causal masks: with contiguous shards rank r attends to r·n² + n(n+1)/2 (query, key) pairs, so the
last rank does about 2P-1 times the work of the first; zigzag sharding (rank r holds chunks r
and 2P-1-r of 2P) gives every rank the same count.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from impls.parallel.comm import all_to_all


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
              q_pos: torch.Tensor | None = None, k_pos: torch.Tensor | None = None) -> torch.Tensor:
    """softmax(q kᵀ/√d, key j masked when causal and k_pos[j] > q_pos[i]) v; [b, H, n, d] each."""
    scores = q.matmul(k.transpose(-1, -2)) * q.shape[-1] ** -0.5
    if causal:
        qp = torch.arange(q.shape[-2]) if q_pos is None else q_pos
        kp = torch.arange(k.shape[-2]) if k_pos is None else k_pos
        scores = scores.masked_fill(kp[None, :] > qp[:, None], float("-inf"))
    return torch.softmax(scores, dim=-1).matmul(v)


def shard_positions(n_total: int, world: int, rank: int, layout: str = "contiguous") -> torch.Tensor:
    """Global token positions rank ``rank`` holds: contiguous chunk, or zigzag (chunks r and 2P-1-r)."""
    if layout == "contiguous":
        if n_total % world:
            raise ValueError(f"sequence length {n_total} does not split over {world} ranks")
        n = n_total // world
        return torch.arange(rank * n, (rank + 1) * n)
    if layout == "zigzag":
        if n_total % (2 * world):
            raise ValueError(f"zigzag needs the sequence length ({n_total}) to split into {2 * world} chunks")
        c = n_total // (2 * world)
        return torch.cat([torch.arange(rank * c, (rank + 1) * c),
                          torch.arange((2 * world - 1 - rank) * c, (2 * world - rank) * c)])
    raise ValueError(f"layout must be contiguous or zigzag, not {layout!r}")


# ------------------------------------------------------------------------------- Ulysses
def self_attention(x: torch.Tensor, w_qkv: torch.Tensor, w_out: torch.Tensor, heads: int,
                   causal: bool = False) -> torch.Tensor:
    """The dense layer Ulysses must reproduce: x [b, N, h] -> attention over all N tokens -> [b, N, h]."""
    b, n, h = x.shape
    q, k, v = (x.matmul(w_qkv.t()).view(b, n, 3, heads, h // heads).permute(2, 0, 3, 1, 4))
    out = attention(q, k, v, causal)                                  # [b, H, N, d]
    return out.permute(0, 2, 1, 3).reshape(b, n, h).matmul(w_out.t())


def ulysses_attention(x_local: torch.Tensor, w_qkv: torch.Tensor, w_out: torch.Tensor, heads: int,
                      causal: bool = False, group=None, record: dict | None = None) -> torch.Tensor:
    """Ulysses on this rank's contiguous [b, n, h] slice; returns this rank's slice of the output.

    ``record`` (optional) receives the shape of the Q the attention kernel sees.
    """
    world = dist.get_world_size(group)
    if heads % world:
        raise ValueError(f"Ulysses splits attention by heads: {heads} heads do not divide over {world} ranks")
    b, n, h = x_local.shape
    d = h // heads
    qkv = x_local.matmul(w_qkv.t()).view(b, n, 3, heads, d)
    q, k, v = (all_to_all(qkv[:, :, i], scatter_dim=2, gather_dim=1, group=group) for i in range(3))
    q, k, v = (t.permute(0, 2, 1, 3) for t in (q, k, v))                 # [b, H/P, N, d]
    if record is not None:
        record["q_shape"] = list(q.shape)
    out = attention(q, k, v, causal).permute(0, 2, 1, 3)                  # [b, N, H/P, d]
    out = all_to_all(out, scatter_dim=1, gather_dim=2, group=group)       # [b, n, H, d]
    return out.reshape(b, n, h).matmul(w_out.t())


# ---------------------------------------------------------------------------- ring attention
@torch.no_grad()
def ring_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, q_pos: torch.Tensor,
                   kv_positions: list[torch.Tensor], causal: bool = False, group=None) -> tuple[torch.Tensor, dict]:
    """Forward ring attention on this rank's [b, H, n, d] blocks.

    ``kv_positions[j]``: the global positions of rank j's K/V block (to mask causally). At step
    i the rank holds rank (r-i)'s block; the next block's transfer is posted before computing.
    Returns (this rank's output, {"pairs": unmasked (query, key) pairs per head computed here,
    "blocks": blocks not skipped}). The largest score tile is one block's [b, H, n, n], never N×N.
    """
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    ranks = dist.get_process_group_ranks(group) if group is not None else list(range(world))
    right, left = ranks[(rank + 1) % world], ranks[(rank - 1) % world]
    kv = torch.stack([k, v]).contiguous()
    out = torch.zeros_like(q)
    run_max = torch.full((*q.shape[:-1], 1), float("-inf"), dtype=q.dtype)
    run_sum = torch.zeros((*q.shape[:-1], 1), dtype=q.dtype)
    stats = {"pairs": 0, "blocks": 0}
    scale = q.shape[-1] ** -0.5
    for step in range(world):
        pending = []
        if step < world - 1:
            nxt = torch.empty_like(kv)
            pending = [dist.isend(kv, right), dist.irecv(nxt, left)]
        src = (rank - step) % world
        keep = (kv_positions[src][None, :] <= q_pos[:, None]) if causal else None
        if keep is None or keep.any():
            scores = q.matmul(kv[0].transpose(-1, -2)) * scale
            if keep is not None:
                scores = scores.masked_fill(~keep, float("-inf"))
            new_max = torch.maximum(run_max, scores.amax(-1, keepdim=True))
            probs = torch.exp(scores - new_max)
            decay = torch.exp(run_max - new_max)
            run_sum = run_sum * decay + probs.sum(-1, keepdim=True)
            out = out * decay + probs.matmul(kv[1])
            run_max = new_max
            stats["blocks"] += 1
            stats["pairs"] += int(keep.sum()) if keep is not None else q.shape[-2] * kv.shape[-2]
        for work in pending:
            work.wait()
        if pending:
            kv = nxt
    return out / run_sum, stats


# ---------------------------------------------------------------------------- volumes
def ulysses_elements_sent(b: int, n: int, h: int, world: int) -> float:
    """Elements one rank sends per layer forward: 4 all-to-alls of b·(N/P)·h, (P-1)/P of each leaves."""
    return 4 * b * (n / world) * h * (world - 1) / world


def ring_elements_sent(b: int, n: int, h: int, world: int) -> float:
    """Elements one rank sends per layer forward: P-1 hops of a K and a V block of b·(N/P)·h each."""
    return (world - 1) * 2 * b * (n / world) * h
