"""Mutants of the Triton kernels: GAE (impls/rl), the fused log-prob kernels (impls/scale), and the masks and
rescaling of the FlashAttention forward (impls/inference). Each kernel runs in Triton's CPU interpreter here.

One mutant per line: Mutant(name, file, exact original snippet, replacement[, why=...][, equivalent=...]).
"""

from mianjing.mutation import Mutant as M

GAE = "impls/rl/gae_triton.py"
LP = "impls/scale/fused_logprobs_triton.py"
FA = "impls/inference/flash_attention_triton.py"

MUTANTS = [
    # what the compiled kernels are handed (review F5, F6): fp32 products, scalars in the accumulator dtype
    M("triton.fa-fp32-dot-tf32", FA, '    precision: str = "ieee",', '    precision: str = "tf32",',
      why="Triton's NVIDIA default: fp32 inputs multiplied as TF32 on the Tensor Cores, ~7e-4 off"),
    M("triton.logprob-inverse-temperature-fp32", LP, "    return torch.full((1,), 1.0 / temperature, dtype=z.dtype, device=z.device)",
      "    return torch.full((1,), 1.0 / temperature, dtype=torch.float32, device=z.device)",
      why="1/tau rounded to fp32 for fp64 logits, as a Python float argument would be when compiled"),
    M("triton.gae-coefficients-fp32", GAE, "torch.tensor([gamma, gamma * lam], dtype=dt, device=r.device)",
      "torch.tensor([gamma, gamma * lam], dtype=torch.float32, device=r.device)"),
    # fused log-prob kernels
    M("triton.logprob-sum-not-rescaled", LP, "            s = alpha * s + tl.sum(e, axis=0)", "            s = s + tl.sum(e, axis=0)"),
    M("triton.logprob-padded-lanes-counted", LP, "            e = tl.where(valid, tl.exp(d), 0.0)", "            e = tl.exp(d)",
      why="lanes past V (d = 0 there) add e^0 = 1 each to the sum in a ragged last block"),
    M("triton.logprob-ignored-target-not-zeroed", LP, "tl.store(lp_ptr + row, tl.where(y == ignore_index, 0.0, x_y - lse))",
      "tl.store(lp_ptr + row, x_y - lse)"),
    M("triton.logprob-grad-outer-temperature-dropped", LP, "tl.store(z_row + offs, (dz * inv_tau).to(z_ptr.dtype.element_ty), mask=valid)",
      "tl.store(z_row + offs, dz.to(z_ptr.dtype.element_ty), mask=valid)"),
    M("triton.logprob-p-log-p-unguarded", LP, "a += tl.sum(tl.where(e > 0, e * d, 0.0), axis=0)", "a += tl.sum(e * d, axis=0)",
      why="review F18: 0·(-inf) = NaN entropy for a masked logit"),
    M("triton.logprob-max-not-guarded", LP, '            m_safe = tl.where(m_new == -float("inf"), 0.0, m_new)', "            m_safe = m_new",
      why="a block of -inf logits makes the running statistics NaN"),
    M("triton.logprob-grad-p-zero-unguarded", LP, "- tl.where(p > 0, p * (g + g_h * (logp + ent)), 0.0)", "- p * (g + g_h * (logp + ent))"),
    # GAE kernel
    M("triton.gae-tile-carry-dropped", GAE, "            c = B_c + A_c * carry_c[:, None]", "            c = B_c",
      why="each tile of 128 tokens restarts the advantage at 0"),
    M("triton.gae-carry-from-latest-column", GAE, "            last = (j == BLOCK_T - 1)[None, :]", "            last = (j == 0)[None, :]"),
    M("triton.gae-dones-ignored", GAE, "            keep = 1.0 - (tl.load(d_ptr + off, mask=ok, other=0) != 0).to(ACC)  # 1 - d_t",
      "            keep = 1.0 - 0.0 * (tl.load(d_ptr + off, mask=ok, other=0) != 0).to(ACC)  # 1 - d_t"),
    M("triton.gae-masked-token-resets-advantage", GAE, "            a = tl.where(ok, keep * (m * gamma_lam + 1.0 - m), 1.0)",
      "            a = tl.where(ok, keep * m * gamma_lam, 1.0)", why="a tool-output token ends the advantage instead of being skipped"),
    M("triton.gae-next-value-not-carried", GAE, "            alpha = tl.where(ok, keep * (1.0 - m1), 1.0)", "            alpha = tl.where(ok, 0.0 * keep, 1.0)",
      why="V' across masked tokens is 0 instead of the next trained token's value"),
    # FlashAttention: masks and rescaling only
    M("triton.flash-causal-mask-strict", FA, "allowed = allowed & (cols[None, :] <= rows[:, None] + (Nk - Nq))",
      "allowed = allowed & (cols[None, :] < rows[:, None] + (Nk - Nq))", why="the diagonal is masked: row 0 attends to nothing"),
    M("triton.flash-causal-top-left", FA, "allowed = allowed & (cols[None, :] <= rows[:, None] + (Nk - Nq))",
      "allowed = allowed & (cols[None, :] <= rows[:, None])", why="SDPA's is_causal alignment, not the project's"),
    M("triton.flash-empty-row-nan", FA, "        out = tl.where(l[:, None] > 0, acc / l[:, None], 0.0)", "        out = acc / l[:, None]",
      why="a query that sees no key divides 0 by 0"),
    M("triton.flash-accumulator-not-rescaled", FA, "            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=PRECISION)",
      "            acc = acc + tl.dot(p.to(v.dtype), v, input_precision=PRECISION)"),
    M("triton.flash-padded-keys-not-masked", FA, "            allowed = (cols < Nk)[None, :]", "            allowed = cols[None, :] >= 0",
      why="keys past Nk (loaded as 0) get score 0 instead of -inf in the last ragged tile"),
]
