r"""PPO losses on right-padded ``[B, T]`` batches (Schulman et al. 2017).

Clipped surrogate (to be *maximised*), per token, with $r_t = \pi_\theta(a_t|s_t)/\pi_{old}(a_t|s_t)$:
$$L^{CLIP}_t = \min\big(r_t \hat A_t,\ \mathrm{clip}(r_t, 1-\epsilon_{low}, 1+\epsilon_{high})\,\hat A_t\big).$$
The loss to *minimise* is $-L^{CLIP}$, reduced by an aggregation mode (``impls/rl/aggregation.py``).
Dual clip (Ye et al. 2020): for $\hat A_t<0$ the objective is also bounded below by $c\hat A_t$, $c>1$.

Choices that differ from the frameworks, on purpose:

- dual clip is off unless ``dual_clip=c`` is passed; verl 0.9.1's ``vanilla`` policy loss always applies it
  (``clip_ratio_c`` = 3);
- the token log-ratio is clamped to $[-20, 20]$ before the exponential (verl does the same; TRL 1.16 does not
  clamp), so one stale token cannot make the ratio overflow; where the clamp binds the token has no gradient.
"""

from __future__ import annotations

import torch

from impls.rl.aggregation import aggregate
from impls.rl.masking import masked_mean, reduce_dtype

__all__ = ["ppo_clip_objective_per_token", "ppo_clip_loss", "value_loss", "entropy_from_logits"]

_MAX_LOG_RATIO = 20.0  # exp(20) ~ 5e8: keeps a stale token from producing inf


def ppo_clip_objective_per_token(
    ratio: torch.Tensor,
    advantages: torch.Tensor,
    clip_low: float = 0.2,
    clip_high: float | None = None,
    dual_clip: float | None = None,
) -> torch.Tensor:
    r"""Per-token PPO *loss* $-\min(rA, \mathrm{clip}(r,1-\epsilon_l,1+\epsilon_h)A)$, and, with dual clip
    $c$, $\min(\cdot, -cA)$ where $A<0$. Same shape as ``ratio``; no reduction, no mask."""
    if ratio.shape != advantages.shape:
        raise ValueError(f"ratio shape {tuple(ratio.shape)} != advantages shape {tuple(advantages.shape)}")
    clip_high = clip_low if clip_high is None else clip_high
    if clip_low < 0 or clip_high < 0 or clip_low >= 1:
        raise ValueError(f"need 0 <= clip_low < 1 and clip_high >= 0, got {clip_low}, {clip_high}")
    adv = advantages.to(ratio.dtype)
    unclipped = -adv * ratio
    clipped = -adv * torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high)
    loss = torch.maximum(unclipped, clipped)  # -min(rA, clip(r)A)
    if dual_clip is not None:
        if dual_clip <= 1.0:
            raise ValueError(f"dual_clip must be > 1, got {dual_clip}")
        loss = torch.where(adv < 0, torch.minimum(loss, -dual_clip * adv), loss)
    return loss


def ppo_clip_loss(
    logp: torch.Tensor,
    logp_old: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip_low: float = 0.2,
    clip_high: float | None = None,
    dual_clip: float | None = None,
    agg: str = "token-mean",
    *,
    norm_constant: float | None = None,
    is_weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    r"""PPO clipped policy loss $-\mathrm{agg}_t\, w_t \min(r_t A_t, \mathrm{clip}(r_t)A_t)$, $r_t=\exp(\log\pi-\log\pi_{old})$.

    ``logp_old`` and ``advantages`` are treated as constants (detached). The ratio is computed in
    fp32 (fp64 stays fp64). ``agg``/``norm_constant``: see ``impls/rl/aggregation.py`` (the constant
    $C$ of Dr. GRPO's ``seq-mean-token-sum-norm``). ``is_weights`` (optional ``[B, T]``, detached): the
    rollout/training-mismatch correction $w_t$ (TIS or masked IS, ``impls/rl/rollout_correction.py``),
    verl's ``rollout_is_weights``. Returns ``(loss, stats)``; stats (python floats, masked means):
    ``clip_frac`` (tokens whose clipped branch is active, i.e. gradient removed: $A>0, r>1+\epsilon_h$ or
    $A<0, r<1-\epsilon_l$), ``approx_kl`` (k3 estimate $(r-1)-\log r$ of KL(pi_old || pi) from the old
    samples), ``ratio_mean``/``ratio_min``/``ratio_max``, ``dual_clip_frac``.
    """
    shapes = {tuple(t.shape) for t in (logp, logp_old, advantages, mask)}
    if len(shapes) != 1 or logp.dim() != 2:
        raise ValueError("logp, logp_old, advantages and mask must share one [B, T] shape, got "
                         f"{[tuple(t.shape) for t in (logp, logp_old, advantages, mask)]}")
    clip_high = clip_low if clip_high is None else clip_high
    dt = reduce_dtype(logp.dtype)
    valid = mask != 0
    zero = torch.zeros((), dtype=dt, device=logp.device)
    log_ratio = torch.where(valid, logp.to(dt) - logp_old.detach().to(dt), zero)
    log_ratio = log_ratio.clamp(-_MAX_LOG_RATIO, _MAX_LOG_RATIO)
    ratio = torch.exp(log_ratio)
    adv = torch.where(valid, advantages.detach().to(dt), zero)
    per_token = ppo_clip_objective_per_token(ratio, adv, clip_low, clip_high, dual_clip)
    if is_weights is not None:
        if is_weights.shape != logp.shape:
            raise ValueError(f"is_weights shape {tuple(is_weights.shape)} != logp shape {tuple(logp.shape)}")
        per_token = per_token * torch.where(valid, is_weights.detach().to(dt), zero)
    loss = aggregate(per_token, mask, agg, norm_constant)

    with torch.no_grad():
        unclipped = -adv * ratio
        clipped = -adv * torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high)
        clip_active = (clipped > unclipped).to(dt)
        if dual_clip is not None:
            dual_active = ((adv < 0) & (torch.maximum(unclipped, clipped) > -dual_clip * adv)).to(dt)
        else:
            dual_active = torch.zeros_like(ratio)
        big = torch.full_like(ratio, float("inf"))
        stats = {
            "clip_frac": float(masked_mean(clip_active, mask)),
            "dual_clip_frac": float(masked_mean(dual_active, mask)),
            "approx_kl": float(masked_mean(torch.expm1(log_ratio) - log_ratio, mask)),
            "ratio_mean": float(masked_mean(ratio, mask)),
            "ratio_max": float(torch.where(valid, ratio, -big).max()) if valid.any() else float("nan"),
            "ratio_min": float(torch.where(valid, ratio, big).min()) if valid.any() else float("nan"),
        }
    return loss, stats


def value_loss(
    values: torch.Tensor,
    values_old: torch.Tensor,
    returns: torch.Tensor,
    mask: torch.Tensor,
    clip: float | None = None,
    agg: str = "token-mean",
    norm_constant: float | None = None,
) -> torch.Tensor:
    r"""$\tfrac12 (V-\hat R)^2$, or with ``clip`` the pessimistic
    $\tfrac12\max\big((V-\hat R)^2, (V_{old}+\mathrm{clip}(V-V_{old},-c,c)-\hat R)^2\big)$; aggregated by
    ``agg`` (with ``norm_constant``, see ``impls/rl/aggregation.py``)."""
    shapes = {tuple(t.shape) for t in (values, values_old, returns, mask)}
    if len(shapes) != 1 or values.dim() != 2:
        raise ValueError("values, values_old, returns and mask must share one [B, T] shape")
    dt = reduce_dtype(values.dtype)
    v = values.to(dt)
    target = returns.detach().to(dt)
    loss = (v - target) ** 2
    if clip is not None:
        if clip <= 0:
            raise ValueError(f"value clip must be positive, got {clip}")
        v_old = values_old.detach().to(dt)
        v_clipped = v_old + torch.clamp(v - v_old, -clip, clip)
        loss = torch.maximum(loss, (v_clipped - target) ** 2)
    return aggregate(0.5 * loss, mask, agg, norm_constant)


def entropy_from_logits(logits: torch.Tensor, mask: torch.Tensor, agg: str = "token-mean",
                        norm_constant: float | None = None) -> torch.Tensor:
    r"""Aggregated token entropy $H_t = \log\sum_v e^{z_v} - \sum_v \mathrm{softmax}(z)_v z_v$ of
    ``logits`` ``[B, T, V]`` (computed in >= fp32), reduced by ``agg`` (with ``norm_constant``)."""
    if logits.dim() != 3 or tuple(logits.shape[:2]) != tuple(mask.shape):
        raise ValueError(f"expected logits [B, T, V] and mask [B, T], got {tuple(logits.shape)} and {tuple(mask.shape)}")
    z = logits.to(reduce_dtype(logits.dtype))
    p = torch.softmax(z, dim=-1)
    h = torch.logsumexp(z, dim=-1) - (p * z).sum(dim=-1)
    return aggregate(h, mask, agg, norm_constant)
