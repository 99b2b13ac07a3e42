"""Mutants of impls/rl outside the policy losses: chunked log-probs, TRPO, KL controllers, GSPO.

(The loss modules -- ppo, grpo, kl, aggregation, gae, dpo -- get theirs once issue 13's rewrite lands.)
One mutant per line: Mutant(name, file, exact original snippet, replacement[, why=...][, equivalent=...]).
"""

from mianjing.mutation import Mutant as M

LP = "impls/rl/logprobs.py"
TRPO = "impls/rl/trpo.py"
KLC = "impls/rl/kl_control.py"
GSPO = "impls/rl/gspo.py"

MUTANTS = [
    M("logprobs.ignore-index-not-zeroed", LP, "        lp = torch.where(valid, lp, 0.0)", "        lp = lp", why="issue 17 hole 5"),
    M("logprobs.temperature-ignored", LP, "        z = z / temperature\n", "        z = z\n"),
    M("logprobs.temperature-multiplies", LP, "        z = z / temperature\n", "        z = z * temperature\n"),
    M("logprobs.no-fp32-upcast", LP, "    z = z.to(torch.float64 if z.dtype == torch.float64 else torch.float32)\n", ""),
    M("logprobs.entropy-sign", LP, "        ent = -(torch.exp(logp) * logp).sum(-1)", "        ent = (torch.exp(logp) * logp).sum(-1)"),
    M("logprobs.entropy-of-logits", LP, "        ent = -(torch.exp(logp) * logp).sum(-1)", "        ent = -(torch.softmax(z, -1) * z).sum(-1)"),
    M("logprobs.no-recompute", LP, "        if grad and recompute:", "        if False:", why="chunking without checkpointing: autograd keeps every chunk's logits"),
    M("logprobs.gather-wrong-axis", LP, "        lp = logp.gather(-1, labels.unsqueeze(-1)).squeeze(-1)", "        lp = logp.max(-1).values"),
    M("logprobs.bias-dropped", LP, "    z = x if weight is None else F.linear(x, weight, bias)", "    z = x if weight is None else F.linear(x, weight)"),
    M("meter.frees-not-counted", LP, "        self.current -= self.live.pop(key, 0)", "        self.live.pop(key, 0)"),
    M("meter.peak-is-current", LP, "    return out, meter.peak", "    return out, meter.current"),
    M("trpo.no-improvement-check", TRPO, "        if kl <= max_kl_delta and gain > 0:", "        if kl <= max_kl_delta:", why="issue 17 hole 7"),
    M("trpo.no-kl-check", TRPO, "        if kl <= max_kl_delta and gain > 0:", "        if gain > 0:"),
    M("trpo.step-without-factor-2", TRPO, "    full = torch.sqrt(2 * max_kl_delta / xFx.clamp_min(1e-30)) * x", "    full = torch.sqrt(max_kl_delta / xFx.clamp_min(1e-30)) * x"),
    M("trpo.gradient-step-not-natural", TRPO, "    x, used = conjugate_gradient(fvp, g, cg_iters)", "    x, used = g.clone(), 0"),
    M("trpo.cg-steepest-descent", TRPO, "        p = r + (rr_new / rr) * p", "        p = r"),
    M("trpo.cg-products-miscounted", TRPO, "        Ap = Avp(p)\n        used += 1", "        Ap = Avp(p)"),
    M("trpo.kl-direction-reversed", TRPO, "    return w @ _kl_rows(theta_old, theta)", "    return w @ _kl_rows(theta, theta_old)"),
    M("trpo.kl-weights-unnormalised", TRPO, "    w = weights / weights.sum()\n", "    w = weights\n"),
    M("trpo.fvp-damping-sign", TRPO, "    return hv.reshape(-1) + damping * v", "    return hv.reshape(-1) - damping * v"),
    M("trpo.visitation-not-transposed", TRPO, "        return torch.linalg.solve((eye - self.gamma * self._p_pi(pi)).T, self.rho0)", "        return torch.linalg.solve(eye - self.gamma * self._p_pi(pi), self.rho0)"),
    M("trpo.max-kl-is-mean", TRPO, "    return _kl_rows(theta_old, theta).max()", "    return _kl_rows(theta_old, theta).mean()"),
    M("trpo.backtrack-not-shrinking", TRPO, "        frac *= backtrack_coef", "        frac *= 1.0"),
    M("klc.adaptive-factor-inverted", KLC, "            self.value /= self.factor\n        elif", "            self.value *= self.factor\n        elif"),
    M("klc.adaptive-band-on-target", KLC, "        if d < self.target / self.tolerance:", "        if d < self.target:"),
    M("klc.proportional-unclipped", KLC, "        e = min(max(_as_float(observed_kl) / self.target - 1.0, -self.clip), self.clip)", "        e = _as_float(observed_kl) / self.target - 1.0"),
    M("klc.proportional-ignores-n-steps", KLC, "        mult = 1.0 + e * n_steps / self.horizon", "        mult = 1.0 + e / self.horizon"),
    M("klc.proportional-sign", KLC, "        mult = 1.0 + e * n_steps / self.horizon", "        mult = 1.0 - e * n_steps / self.horizon"),
    M("gspo.ratio-not-length-normalised", GSPO, "    return masked_mean(log_ratio, mask.to(dt), dim=-1)", "    return (log_ratio * mask.to(dt)).sum(-1)"),
    M("gspo.token-ratio-not-detached", GSPO, "    s = gspo_sequence_ratio(logp, logp_old, mask).detach()", "    s = gspo_sequence_ratio(logp, logp_old, mask)"),
    M("gspo.clip-frac-ignores-sign", GSPO, "        clipped = ((s < 1 - clip_low) & (adv < 0)) | ((s > 1 + high) & (adv > 0))", "        clipped = (s < 1 - clip_low) | (s > 1 + high)"),
    M("gspo.high-clip-ignored", GSPO, "    high = clip_low if clip_high is None else clip_high", "    high = clip_low"),
    M("gspo.log-ratio-unclamped", GSPO, "    return torch.exp(sequence_log_ratio(logp, logp_old, mask).clamp(-_MAX_LOG_RATIO, _MAX_LOG_RATIO))",
      "    return torch.exp(sequence_log_ratio(logp, logp_old, mask))", why="issue 20: a stale sequence overflows s_i to inf in fp32"),
]
