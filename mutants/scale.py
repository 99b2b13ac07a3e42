"""Mutants of impls/scale: the fused linear log-prob / entropy (PyTorch backend and the online-softmax loop).

The Triton kernels' mutants are in ``mutants/triton.py`` (named ``triton.*``).
One mutant per line: Mutant(name, file, exact original snippet, replacement[, why=...][, equivalent=...]).
"""

from mianjing.mutation import Mutant as M

FL = "impls/scale/fused_logprobs.py"

MUTANTS = [
    M("fused.dw-gemm-fp32-operands", FL, "    if z_low is not None and _mixed_gemms(h):", "    if False:",
      why="review F7: a bf16 model's dW GEMM as an fp32 SGEMM, off the Tensor Cores"),
    M("fused.logits-rounded-on-gpu", FL, "    if _mixed_gemms(h) and h.dtype == weight.dtype:", "    if False:",
      why="bf16 logits on the GPU (the GEMM's result rounded before the softmax)"),
    # the online softmax loop
    M("fused.online-entropy-not-rescaled", FL, "a = alpha * (a + s * shift) + torch.where", "a = alpha * a + torch.where",
      why="the entropy accumulator forgets the s·(m - m') correction when the maximum grows"),
    M("fused.online-sum-not-rescaled", FL, "        s = alpha * s + e.sum(-1)\n", "        s = s + e.sum(-1)\n"),
    M("fused.online-temperature-ignored", FL, "        x = logits[:, start:start + block_size].to(dt) / temperature",
      "        x = logits[:, start:start + block_size].to(dt)"),
    M("fused.online-target-at-block-start-missed", FL, "        inside = (y >= start) & (y < start + x.shape[1])",
      "        inside = (y > start) & (y < start + x.shape[1])", why="a target on a block's first column is never gathered"),
    M("fused.online-max-not-guarded", FL, '        m_safe = torch.where(m_new == float("-inf"), 0.0, m_new)', "        m_safe = m_new",
      why="a vocabulary block of -inf logits only makes exp(-inf - -inf) = NaN"),
    M("fused.online-p-log-p-unguarded", FL, "torch.where(e > 0, e * d, 0.0).sum(-1)", "(e * d).sum(-1)",
      why="review F18: 0·(-inf) = NaN entropy for a masked logit"),
    # the chunk statistics and the logit gradient (PyTorch backend)
    M("fused.entropy-sign", FL, "    return logp, log_s - a / s, m[:, 0] + log_s", "    return logp, a / s - log_s, m[:, 0] + log_s"),
    M("fused.lse-without-max", FL, "    return logp, log_s - a / s, m[:, 0] + log_s", "    return logp, log_s - a / s, log_s"),
    M("fused.ignored-target-not-zeroed", FL, "    logp = torch.where(y == ignore_index, 0.0, x_y - log_s)\n    return logp, log_s",
      "    logp = x_y - log_s\n    return logp, log_s"),
    M("fused.stats-p-log-p-unguarded", FL, "    a = e.mul_(z.clamp_(min=_NEG_LOG)).sum(-1)", "    a = e.mul_(z).sum(-1)", why="review F18"),
    M("fused.grad-p-zero-unguarded", FL, "    z.clamp_(min=_NEG_LOG)  # p = 0 there (a -inf logit): its gradient is 0, not 0·inf = NaN\n", "",
      why="review F18 in the backward: 0·(-inf) = NaN gradient"),
    M("fused.grad-entropy-term-sign", FL, "    z.add_(ent[:, None]).mul_(g_h[:, None]).add_(g[:, None])  # g + g_H (log pi + H)",
      "    z.sub_(ent[:, None]).mul_(g_h[:, None]).add_(g[:, None])  # g + g_H (log pi + H)"),
    M("fused.grad-outer-temperature-dropped", FL, "    if temperature != 1.0:\n        z.mul_(inv_tau)\n    return z", "    return z",
      why="d x / d z = 1/tau applied once (to the logits) instead of twice"),
    M("fused.ignored-rows-keep-their-gradient", FL, "    g_all = torch.where(y == ignore_index, 0.0, grad_logp.to(dt))", "    g_all = grad_logp.to(dt)"),
    M("fused.dw-overwritten-per-chunk", FL, "    dW.addmm_(z.T, h.to(dW.dtype))", "    dW.copy_(z.T @ h.to(dW.dtype))",
      why="only the last chunk's weight gradient survives"),
    M("fused.input-grads-swapped", FL, "need_h=ctx.needs_input_grad[0], need_w=ctx.needs_input_grad[1],",
      "need_h=ctx.needs_input_grad[1], need_w=ctx.needs_input_grad[0],"),
    M("fused.saved-lse-ignored", FL, "                ent_c, lse_c = entropy[sl].to(dt), lse[sl].to(dt)\n            _dlogits_",
      "                ent_c, lse_c = entropy[sl].to(dt), torch.zeros_like(lse[sl]).to(dt)\n            _dlogits_"),
]
