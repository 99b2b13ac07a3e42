"""Mutants of impls/arch: RMSNorm / LayerNorm and the Pre-LN / Post-LN stack, RoPE, parameter counts.

One mutant per line: Mutant(name, file, exact original snippet, replacement[, why=...][, equivalent=...]).
"""

from mianjing.mutation import Mutant as M

NORM = "impls/arch/norms.py"
ROPE = "impls/arch/rope.py"
PAR = "impls/arch/params.py"

MUTANTS = [
    # norms
    M("norm.rms-sum-not-mean", NORM, "    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)",
      "    y = xf * torch.rsqrt(xf.pow(2).sum(-1, keepdim=True) + eps)"),
    M("norm.rms-multiplies-by-rms", NORM, "    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)",
      "    y = xf * torch.sqrt(xf.pow(2).mean(-1, keepdim=True) + eps)"),
    M("norm.layer-norm-unbiased-variance", NORM, "    var = (xf - mu).pow(2).mean(-1, keepdim=True)", "    var = xf.var(-1, keepdim=True)"),
    M("norm.layer-norm-not-centred", NORM, "    y = (xf - mu) * torch.rsqrt(var + eps)", "    y = xf * torch.rsqrt(var + eps)"),
    M("norm.post-ln-written-as-pre-ln", NORM, "            x = self.ln1(x + self._attn(x))", "            x = x + self._attn(self.ln1(x))",
      why="the attention sub-layer of the Post-LN block normalises its input instead of the sum"),
    M("norm.pre-ln-without-final-norm", NORM, "        self.final = nn.Identity() if post_ln else nn.LayerNorm(d)", "        self.final = nn.Identity()"),
    M("norm.grad-of-the-first-mlp-weight", NORM, "        out += torch.stack([blk.fc2.weight.grad.norm() for blk in net.blocks])",
      "        out += torch.stack([blk.fc1.weight.grad.norm() for blk in net.blocks])"),
    # rope
    M("rope.frequency-exponent-halved", ROPE, "    return base ** (-torch.arange(0, d, 2, dtype=dtype) / d)", "    return base ** (-torch.arange(0, d // 2, dtype=dtype) / d)",
      why="theta_i = base^(-i/d) instead of base^(-2i/d)"),
    M("rope.reflection-not-rotation", ROPE, "torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)",
      "torch.stack([x1 * cos + x2 * sin, x1 * sin - x2 * cos], dim=-1)"),
    M("rope.halves-pairs-interleaved", ROPE, "        x1, x2 = x[..., : d // 2], x[..., d // 2:]", "        x1, x2 = x[..., 0::2], x[..., 1::2]",
      why="the GPT-NeoX layout rotates the wrong pairs: scores stay relative, but a checkpoint's q/k do not match"),
    M("rope.interpolation-multiplies", ROPE, "    angles = (positions.to(torch.float64) / scale)[:, None]", "    angles = (positions.to(torch.float64) * scale)[:, None]"),
    M("rope.unseen-any-excess", ROPE, '"unseen_pairs": int((excess > theta).sum())', '"unseen_pairs": int((excess > 0).sum())'),
    M("rope.unseen-ignores-interpolation", ROPE, "    reach = torch.clamp(theta * (test_len - 1) / scale, max=2 * math.pi)",
      "    reach = torch.clamp(theta * (test_len - 1), max=2 * math.pi)"),
    # parameter counts
    M("params.mixtral-kv-as-query-heads", PAR, "    attn = h * heads * d + 2 * h * kv * d + heads * d * h", "    attn = 4 * h * heads * d",
      why="grouped-query attention counted as multi-head"),
    M("params.deepseek-router-bias-forgotten", PAR, "    router = e * h + e                                    # gate.weight and gate.e_score_correction_bias",
      "    router = e * h"),
    M("params.deepseek-active-without-shared", PAR, "    moe_active = attn + norms + router + (k + shared_e) * expert", "    moe_active = attn + norms + router + k * expert"),
    M("params.mla-kv-without-rope-part", PAR, "            + h * (kvr + rope) + kvr + kvr * heads * (nope + vd)  # kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj",
      "            + h * kvr + kvr + kvr * heads * (nope + vd)  # kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj"),
    M("params.mixtral-tied-head-counted", PAR, '    router, norms = e * h, 2 * h\n    emb = vocab * h\n    head = 0 if cfg.get("tie_word_embeddings") else vocab * h',
      "    router, norms = e * h, 2 * h\n    emb = vocab * h\n    head = vocab * h"),
    M("params.mtp-eh-proj-square", PAR, "    mtp_extra = 2 * h + 2 * h * h + h                    # enorm, hnorm, eh_proj, shared_head.norm",
      "    mtp_extra = 2 * h + h * h + h                    # enorm, hnorm, eh_proj, shared_head.norm"),
]
