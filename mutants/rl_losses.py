"""Mutants of the RL losses and estimators (rewritten by issue 13): the bugs of issue 17's fault-injection run
and of tests/test_injected_bugs_rl.py, and the other slips people make in these functions.

One mutant per line: Mutant(name, file, exact original snippet, replacement[, why=...][, equivalent=...]).
"""

from mianjing.mutation import Mutant as M

PPO = "impls/rl/ppo.py"
AGG = "impls/rl/aggregation.py"
KL = "impls/rl/kl.py"
GRPO = "impls/rl/grpo.py"
GAE = "impls/rl/gae.py"
SCAN = "impls/rl/gae_scan.py"
DPO = "impls/rl/dpo.py"
MASK = "impls/rl/masking.py"
ROLL = "impls/rl/rollout_correction.py"
PL = "impls/rl/policy_losses.py"
IS = "impls/rl/importance.py"

MUTANTS = [
    # issue 17, holes 1-4 and 8 (fixed by issue 13's verifiers)
    M("ppo.dual-clip-on-positive-advantage", PPO, "loss = torch.where(adv < 0, torch.minimum(loss, -dual_clip * adv), loss)", "loss = torch.minimum(loss, -dual_clip * adv.abs())", why="hole 1: dual clip applied when A > 0"),
    M("kl.k3-without-expm1", KL, "    return torch.expm1(log_rho) - log_rho", "    return (torch.exp(log_rho) - 1) - log_rho", why="hole 2: cancellation in fp32 near log rho ~ 1e-3"),
    M("grpo.no-epsilon", GRPO, "adv = adv / (r.std(dim=1, unbiased=True, keepdim=True) + eps)", "adv = adv / r.std(dim=1, unbiased=True, keepdim=True).clamp_min(1e-12)", why="hole 3"),
    M("agg.seq-mean-counts-empty-rows", AGG, "    return per_seq.sum() / _rows(mask, per_seq.dtype)", "    return per_seq.mean()", why="hole 4: rows with no response token counted"),
    M("ppo.approx-kl-is-k1", PPO, '"approx_kl": float(masked_mean(torch.expm1(log_ratio) - log_ratio, mask)),', '"approx_kl": float(masked_mean(-log_ratio, mask)),', why="hole 8"),
    M("ppo.clip-frac-ignores-sign", PPO, "        clip_active = (clipped > unclipped).to(dt)", "        clip_active = ((ratio < 1 - clip_low) | (ratio > 1 + clip_high)).to(dt)", why="hole 8"),
    # the kinds tests/test_injected_bugs_rl.py swaps in
    M("ppo.objective-not-loss", PPO, "    loss = torch.maximum(unclipped, clipped)  # -min(rA, clip(r)A)", "    loss = -torch.maximum(unclipped, clipped)", why="the sign: maximising the loss"),
    M("ppo.mask-ignored", PPO, "    loss = aggregate(per_token, mask, agg, norm_constant)", "    loss = aggregate(per_token, torch.ones_like(mask), agg, norm_constant)"),
    M("gae.bootstraps-current-state", GAE, "        a_t = r[:, t] + gamma * nv - v[:, t] + gamma * lam * na", "        a_t = r[:, t] + gamma * v[:, t] - v[:, t] + gamma * lam * na"),
    M("gae.mask-not-skipped", GAE, "        next_v = torch.where(ok, v[:, t], nv)  # a masked token passes the carries through", "        next_v = v[:, t]"),
    # more PPO slips
    M("ppo.min-instead-of-max", PPO, "    loss = torch.maximum(unclipped, clipped)  # -min(rA, clip(r)A)", "    loss = torch.minimum(unclipped, clipped)"),
    M("ppo.symmetric-clip-only", PPO, "    clip_high = clip_low if clip_high is None else clip_high\n    if clip_low < 0", "    clip_high = clip_low\n    if clip_low < 0"),
    M("ppo.ratio-not-exp", PPO, "    ratio = torch.exp(log_ratio)\n    adv = torch.where(valid, advantages.detach().to(dt), zero)", "    ratio = 1 + log_ratio\n    adv = torch.where(valid, advantages.detach().to(dt), zero)"),
    M("ppo.old-logp-not-detached", PPO, "log_ratio = torch.where(valid, logp.to(dt) - logp_old.detach().to(dt), zero)", "log_ratio = torch.where(valid, logp.to(dt) - logp_old.to(dt), zero)"),
    M("ppo.is-weights-ignored", PPO, "        per_token = per_token * torch.where(valid, is_weights.detach().to(dt), zero)", "        per_token = per_token"),
    M("ppo.value-clip-min", PPO, "        loss = torch.maximum(loss, (v_clipped - target) ** 2)", "        loss = torch.minimum(loss, (v_clipped - target) ** 2)"),
    M("ppo.value-loss-no-half", PPO, "    return aggregate(0.5 * loss, mask, agg, norm_constant)", "    return aggregate(loss, mask, agg, norm_constant)"),
    M("ppo.entropy-sign", PPO, "    h = torch.logsumexp(z, dim=-1) - (p * z).sum(dim=-1)", "    h = (p * z).sum(dim=-1) - torch.logsumexp(z, dim=-1)"),
    M("ppo.ratio-max-over-padding", PPO, '"ratio_max": float(torch.where(valid, ratio, -big).max()) if valid.any() else float("nan"),', '"ratio_max": float(ratio.max()) if valid.any() else float("nan"),'),
    # aggregation
    M("agg.token-mean-per-row", AGG, "    return masked_mean(loss_mat, mask)\n", "    return masked_mean(loss_mat, mask, dim=-1).mean()\n"),
    M("agg.norm-uses-width", AGG, "    c = float(norm_constant)", "    c = float(loss_mat.shape[-1])"),
    M("agg.token-sum-averages", AGG, "def _token_sum(loss_mat, mask, norm_constant=None):\n    return masked_sum(loss_mat, mask)", "def _token_sum(loss_mat, mask, norm_constant=None):\n    return masked_mean(loss_mat, mask)"),
    # masking
    M("mask.mean-over-all", MASK, "    n = m.sum() if dim is None else m.sum(dim=dim)", "    n = torch.ones_like(m).sum() if dim is None else torch.ones_like(m).sum(dim=dim)"),
    M("mask.nan-leaks", MASK, "    xm = torch.where(m != 0, x.to(dt), torch.zeros((), dtype=dt, device=x.device)) * m", "    xm = x.to(dt) * m"),
    M("mask.var-biased", MASK, "        var = var * n / (n - 1)", "        var = var"),
    M("mask.whiten-keeps-mean", MASK, "    if not shift_mean:\n        out = out + mean", "    if shift_mean:\n        out = out + mean"),
    # KL
    M("kl.k2-no-half", KL, "    return 0.5 * log_ratio**2", "    return log_ratio**2"),
    M("kl.k3-log-rho-sign", KL, "    log_rho = -log_ratio\n", "    log_rho = log_ratio\n"),
    M("kl.clamp-ignored", KL, "    return fn(log_ratio.clamp(-_MAX_LOG_RHO, _MAX_LOG_RHO)).clamp(-clamp, clamp)", "    return fn(log_ratio)"),
    M("kl.straight-through-uses-k3", KL, "    surrogate = _k2(log_ratio) if w is None else w * _k2(log_ratio)", "    surrogate = _k3(log_ratio) if w is None else w * _k3(log_ratio)"),
    M("kl.k3-is-weight-detached", KL, "        return torch.exp(log_w) * _value(log_ratio, \"k3\", clamp)", "        return torch.exp(log_w.detach()) * _value(log_ratio, \"k3\", clamp)"),
    M("kl.is-weight-uncapped", KL, "base, w = kind[:-3], torch.exp(log_w.detach()).clamp(max=IS_WEIGHT_CAP)", "base, w = kind[:-3], torch.exp(log_w.detach())"),
    M("kl.full-direction", KL, "    return (logp.exp() * (logp - logq)).sum(dim=-1)", "    return (logq.exp() * (logq - logp)).sum(dim=-1)"),
    # GRPO family
    M("grpo.biased-std", GRPO, "adv = adv / (r.std(dim=1, unbiased=True, keepdim=True) + eps)", "adv = adv / (r.std(dim=1, unbiased=False, keepdim=True) + eps)"),
    M("grpo.equal-groups-not-zeroed", GRPO, "    adv = torch.where(constant, torch.zeros((), dtype=adv.dtype, device=adv.device), adv)\n", ""),
    M("grpo.batch-mean-not-group", GRPO, "    adv = r - r.mean(dim=1, keepdim=True)\n", "    adv = r - r.mean()\n"),
    M("rloo.includes-self", GRPO, "    baseline = (r.sum(dim=1, keepdim=True) - r) / (group_size - 1)", "    baseline = r.mean(dim=1, keepdim=True)"),
    M("dapo.filter-keeps-uniform", GRPO, "    keep = (r.max(dim=1).values != r.min(dim=1).values)", "    keep = (r.max(dim=1).values >= r.min(dim=1).values)"),
    M("dapo.overlong-not-capped", GRPO, "    return -(excess / cache_len).clamp(min=0.0, max=1.0)", "    return -(excess / cache_len).clamp(min=0.0)"),
    M("reinforce-pp.no-group-baseline", GRPO, "    base = r.mean(dim=1, keepdim=True) if group_size > 1 else torch.zeros_like(r[:, :1])", "    base = torch.zeros_like(r[:, :1])"),
    M("remax.baseline-sign", GRPO, "    return scores.to(dtype) - greedy_scores.to(device=scores.device, dtype=dtype)", "    return scores.to(dtype) + greedy_scores.to(device=scores.device, dtype=dtype)"),
    # GAE, returns and the scan
    M("gae.lambda-on-delta", GAE, "        a_t = r[:, t] + gamma * nv - v[:, t] + gamma * lam * na", "        a_t = r[:, t] + gamma * nv - v[:, t] + lam * na"),
    M("gae.dones-ignored", GAE, "        nv = cont[:, t] * next_v\n        na = cont[:, t] * next_adv", "        nv = next_v\n        na = next_adv"),
    M("gae.returns-are-mc", GAE, "    returns = torch.where(valid, adv + v, zero)", "    returns = torch.where(valid, adv, zero)"),
    M("returns.reset-at-gaps", GAE, "        nxt = torch.where(valid[:, t], g_t, carried)", "        nxt = torch.where(valid[:, t], g_t, torch.zeros_like(carried))"),
    # DPO
    M("dpo.margin-sign", DPO, "    return -F.logsigmoid(margin).mean()", "    return -F.logsigmoid(-margin).mean()"),
    M("dpo.cdpo-smoothing-swapped", DPO, "    return -(1 - eps) * F.logsigmoid(beta * h) - eps * F.logsigmoid(-beta * h)", "    return -eps * F.logsigmoid(beta * h) - (1 - eps) * F.logsigmoid(-beta * h)"),
    M("dpo.ipo-target", DPO, "    return (h - 1 / (2 * beta)) ** 2", "    return (h - 1 / beta) ** 2"),
    M("dpo.hinge-margin", DPO, "    return torch.relu(1 - beta * h)", "    return torch.relu(-beta * h)"),
    # rollout correction, CISPO, importance sampling
    M("rollout.truncate-from-below", ROLL, "            w = rho if upper is None else rho.clamp(max=upper)", "            w = rho if upper is None else rho.clamp(min=upper)"),
    M("rollout.mask-keeps-outliers", ROLL, "            w = torch.where((rho >= lo) & (rho <= upper), rho, zero)", "            w = torch.where((rho >= lo) & (rho <= upper), rho, rho.clamp(max=upper))"),
    M("rollout.sequence-level-mean", ROLL, "            log_rho = masked_sum(log_rho, mask, dim=-1)[:, None].expand_as(log_rho)", "            log_rho = (masked_sum(log_rho, mask, dim=-1) / valid.sum(-1).clamp_min(1))[:, None].expand_as(log_rho)"),
    M("cispo.weight-not-detached", PL, "log_ratio = torch.where(valid, lp.detach() - logp_old.detach().to(dt), zero).clamp(-20.0, 20.0)", "log_ratio = torch.where(valid, lp - logp_old.detach().to(dt), zero).clamp(-20.0, 20.0)"),
    M("cispo.no-upper-clip", PL, "    w = ratio.clamp(min=lo, max=1.0 + clip_high)", "    w = ratio.clamp(min=lo)"),
    M("is.chi2-not-squared", IS, "    term = torch.where(p > 0, p**2 / q, torch.zeros_like(p))", "    term = torch.where(p > 0, p / q, torch.zeros_like(p))"),
]
