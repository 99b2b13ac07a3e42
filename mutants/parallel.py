"""Mutants of impls/parallel: MoE routing and expert parallelism, tensor/sequence parallelism, pipeline
schedules and their gloo executor, Ulysses and Ring attention, the all-to-all, recomputation.

One mutant per line: Mutant(name, file, exact original snippet, replacement[, why=...][, equivalent=...]).
"""

from mianjing.mutation import Mutant as M

MOE = "impls/parallel/moe.py"
TP = "impls/parallel/tensor.py"
PP = "impls/parallel/pipeline.py"
PPG = "impls/parallel/pipeline_gloo.py"
CP = "impls/parallel/context.py"
COMM = "impls/parallel/comm.py"
AC = "impls/parallel/recompute.py"

MUTANTS = [
    # MoE: the two bugs issue 20 names, then the rest of the layer
    M("moe.no-topk-renormalisation", MOE, "    if normalize:\n        gates = gates / gates.sum(-1, keepdim=True)\n    return probs, idx, gates",
      "    return probs, idx, gates", why="issue 20: the k gates are not renormalised (passed every self-consistency check)"),
    M("moe.combine-without-gates", MOE, "gates[keep].to(out.dtype).unsqueeze(1) * out[idx[keep], slot[keep]]", "out[idx[keep], slot[keep]]",
      why="issue 20: expert outputs summed without their gate weights, so the router gets no gradient"),
    M("moe.gates-detached", MOE, "gates[keep].to(out.dtype).unsqueeze(1)", "gates[keep].detach().to(out.dtype).unsqueeze(1)",
      why="the forward is right but the router never learns from the task loss"),
    M("moe.capacity-floor", MOE, "return math.ceil(capacity_factor * tokens * k / n_experts)", "return int(capacity_factor * tokens * k / n_experts)"),
    M("moe.queue-token-major", MOE,
      "    order = idx.t().reshape(-1)                                  # choice-major, then token order\n"
      "    onehot = F.one_hot(order, n_experts)\n    slot = ((onehot.cumsum(0) - 1) * onehot).sum(-1)\n"
      "    slot = slot.view(idx.shape[1], idx.shape[0]).t()",
      "    order = idx.reshape(-1)\n    onehot = F.one_hot(order, n_experts)\n    slot = ((onehot.cumsum(0) - 1) * onehot).sum(-1)\n"
      "    slot = slot.view(idx.shape)", why="second choices of early tokens queue before first choices of later ones"),
    M("moe.capacity-off-by-one", MOE, "    return slot, slot < cap", "    return slot, slot <= cap"),
    M("moe.balancing-loss-without-n", MOE, "    return alpha * n * (f * probs.mean(0)).sum()", "    return alpha * (f * probs.mean(0)).sum()"),
    M("moe.deepseek-gates-biased", MOE, "    gates = scores.gather(-1, idx)", "    gates = (scores + bias).gather(-1, idx)",
      why="the selection bias leaks into the gate values"),
    M("moe.deepseek-bias-update-sign", MOE, "    return bias - gamma * torch.sign(load.float() - load.float().mean())",
      "    return bias + gamma * torch.sign(load.float() - load.float().mean())"),
    M("moe.sequence-loss-affinities-unnormalised", MOE, "    p = (scores / scores.sum(-1, keepdim=True)).mean(0)", "    p = scores.mean(0)"),
    M("moe.ep-combine-dims-swapped", MOE, "back = all_to_all(out, scatter_dim=1, gather_dim=0, group=group)",
      "back = all_to_all(out, scatter_dim=0, gather_dim=1, group=group)"),
    M("moe.allgather-capacity-over-all-ranks", MOE, "        cap = capacity(t, n, k, capacity_factor)\n        slot, keep = dispatch_plan(idx, n, cap)\n        mine",
      "        cap = capacity(world * t, n, k, capacity_factor)\n        slot, keep = dispatch_plan(idx, n, cap)\n        mine",
      why="the all-gather dispatcher sizes capacity for every rank's tokens, so it drops less than all-to-all"),
    # tensor / sequence parallelism
    M("tp.row-split-along-outputs", TP, "    return weight.chunk(world, dim=1)[rank].clone()", "    return weight.chunk(world, dim=0)[rank].clone()"),
    M("tp.qkv-split-without-groups", TP, "self.qkv_w = param(split_columns(dense.qkv.weight, r, t, groups=3))",
      "self.qkv_w = param(split_columns(dense.qkv.weight, r, t))", why="a fused QKV split flat: a rank gets Q of some heads and K of others"),
    M("tp.f-without-backward-all-reduce", TP, "        grad = grad.contiguous()\n        dist.all_reduce(grad, group=ctx.group)\n        return grad, None",
      "        return grad.contiguous(), None"),
    M("tp.g-all-reduces-in-backward-too", TP, "    @staticmethod\n    def backward(ctx, grad):\n        return grad, None\n\n\ndef _gather_seq",
      "    @staticmethod\n    def backward(ctx, grad):\n        grad = grad.contiguous().clone()\n        dist.all_reduce(grad)\n        return grad, None\n\n\ndef _gather_seq",
      why="f and g confused: the row-parallel output's gradient is summed over the ranks again"),
    M("tp.row-bias-on-every-rank", TP, "        partial = F.linear(x, w)\n", "        partial = F.linear(x, w, b)\n",
      why="the bias is added before the all-reduce, so t+1 copies of it reach the output"),
    M("tp.sp-weight-grad-from-local-shard", TP, "        total = _gather_seq(x_local, ctx.group)                       # the extra all-gather",
      "        total = torch.cat([x_local] * dist.get_world_size(ctx.group))",
      why="skipping the backward all-gather: dW is computed from this rank's shard repeated"),
    M("tp.sp-volume-without-regather", TP, '    return {"tp": 8 * per, "sp_keep": 8 * per, "sp": 10 * per}[mode]',
      '    return {"tp": 8 * per, "sp_keep": 8 * per, "sp": 8 * per}[mode]'),
    # pipeline schedules and the simulator
    M("pp.1f1b-one-warmup-too-many", PP, "        warm = min(p - d - 1, m)", "        warm = min(p - d, m)"),
    M("pp.zb-h1-w-not-deferred", PP,
      '            if op.kind == "B" and op.micro >= d:\n                seq.append(Op("W", op.micro - d))\n'
      '        seq += [Op("W", i) for i in range(max(0, m - d), m)]',
      '            if op.kind == "B":\n                seq.append(Op("W", op.micro))',
      why="W right after its own B: 1F1B with a split backward, no bubble saved"),
    M("pp.in-flight-released-at-b", PP, '        release = "W" if any(s.op.kind == "W" for dev in self.slots for s in dev) else "B"',
      '        release = "B"', why="review F11: counting F to B ignores the inputs W still needs"),
    M("pp.interleaved-backward-chunk-order", PP, 'chunk if kind == "F" else v - 1 - chunk', "chunk"),
    M("pp.backward-ignores-next-stage", PP, '                    deps = [("F", op.micro, s)] + ([("B", op.micro, s + 1)] if s < last else [])',
      '                    deps = [("F", op.micro, s)]'),
    M("ppg.graph-kept-after-backward", PPG,
      "            inp, out = stash.pop((op.micro, op.chunk))\n            if s == stages - 1:\n                out.backward()",
      "            inp, out = stash[(op.micro, op.chunk)]\n            if s == stages - 1:\n                out.backward(retain_graph=True)",
      why="review F12: the last stage keeps every micro-batch's graph alive after its backward (retain_graph and an "
          "unpopped stash); a counter stepped over the op list cannot see it"),
    M("ppg.loss-not-divided-by-m", PPG, "                out = nn.functional.mse_loss(out, y[op.micro]) / m", "                out = nn.functional.mse_loss(out, y[op.micro])"),
    # Ulysses, Ring, the all-to-all
    M("cp.ring-accumulator-not-rescaled", CP, "            out = out * decay + probs.matmul(kv[1])", "            out = out + probs.matmul(kv[1])"),
    M("cp.ring-causal-mask-excludes-diagonal", CP, "keep = (kv_positions[src][None, :] <= q_pos[:, None]) if causal else None",
      "keep = (kv_positions[src][None, :] < q_pos[:, None]) if causal else None"),
    M("cp.zigzag-second-chunk-striped", CP, "torch.arange((2 * world - 1 - rank) * c, (2 * world - rank) * c)",
      "torch.arange((world + rank) * c, (world + rank + 1) * c)", why="a valid partition, but no longer balanced under a causal mask"),
    M("cp.ulysses-output-dims-swapped", CP, "    out = all_to_all(out, scatter_dim=1, gather_dim=2, group=group)       # [b, n, H, d]",
      "    out = all_to_all(out, scatter_dim=2, gather_dim=1, group=group)       # [b, n, H, d]"),
    M("cp.ulysses-volume-forgets-own-chunk", CP, "    return 4 * b * (n / world) * h * (world - 1) / world", "    return 4 * b * (n / world) * h"),
    M("comm.backward-not-mirrored", COMM, "        return _exchange(grad, gather_dim, scatter_dim, ctx.group), None, None, None",
      "        return _exchange(grad, scatter_dim, gather_dim, ctx.group), None, None, None"),
    # recomputation
    M("ac.selective-not-checkpointed", AC, "        ctx = checkpoint(self._core, qkv[0], qkv[1], qkv[2], use_reentrant=True)",
      "        ctx = self._core(qkv[0], qkv[1], qkv[2])"),
    M("ac.model-flops-attention-term", AC, "    return 72 * b * s * h * h + 12 * b * s * s * h", "    return 72 * b * s * h * h + 16 * b * s * s * h"),
]
