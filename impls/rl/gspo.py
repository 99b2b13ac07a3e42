"""GSPO: Group Sequence Policy Optimization (Zheng et al. 2025, arXiv 2507.18071).

GSPO keeps GRPO's group-relative advantage but moves the importance ratio and the clip
from tokens to sequences:

$$s_i(\\theta) = \\Big(\\frac{\\pi_\\theta(y_i\\mid x)}{\\pi_{old}(y_i\\mid x)}\\Big)^{1/|y_i|}
= \\exp\\Big(\\frac{1}{|y_i|}\\sum_t \\log\\frac{\\pi_\\theta(y_{i,t}\\mid x, y_{i,<t})}{\\pi_{old}(y_{i,t}\\mid x, y_{i,<t})}\\Big)$$

$$J(\\theta) = \\frac{1}{G}\\sum_i \\min\\big(s_i A_i,\\ \\mathrm{clip}(s_i, 1-\\epsilon_{low}, 1+\\epsilon_{high}) A_i\\big)$$

The clip itself is PPO-core's ``ppo_clip_objective_per_token`` and the reduction is
``impls.rl.aggregation``: nothing here re-implements either.

Guard: $\\log s_i$ is clamped to $[-20, 20]$ before the exponential, as the token log-ratios of our PPO and
CISPO losses are. Without it a mean log-ratio above $\\log(\\text{fp32 max})\\approx 88.7$ makes $s_i=\\infty$:
an infinite loss when $A_i<0$ and a NaN gradient either way. verl 0.9.1 clamps the (token-level GSPO)
log-ratio from above at 10; TRL 1.16 does not clamp. Where the clamp binds the sequence gets no gradient.
"""

from __future__ import annotations

import torch

from impls.rl.aggregation import aggregate
from impls.rl.masking import masked_mean, reduce_dtype
from impls.rl.ppo import _MAX_LOG_RATIO, ppo_clip_objective_per_token

__all__ = ["sequence_log_ratio", "gspo_sequence_ratio", "gspo_token_ratio", "gspo_loss"]


def _check(logp: torch.Tensor, logp_old: torch.Tensor, mask: torch.Tensor) -> None:
    if logp.dim() != 2 or logp.shape != logp_old.shape or logp.shape != mask.shape:
        raise ValueError(
            f"logp, logp_old and mask must all be [B, T]; got {tuple(logp.shape)}, "
            f"{tuple(logp_old.shape)}, {tuple(mask.shape)}"
        )


def sequence_log_ratio(logp: torch.Tensor, logp_old: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """$\\log s_i = \\frac{1}{|y_i|}\\sum_t m_{i,t}(\\log\\pi_\\theta - \\log\\pi_{old})$, shape ``[B]``, fp32."""
    _check(logp, logp_old, mask)
    dt = reduce_dtype(torch.promote_types(logp.dtype, logp_old.dtype))
    log_ratio = logp.to(dt) - logp_old.to(dt)
    return masked_mean(log_ratio, mask.to(dt), dim=-1)


def gspo_sequence_ratio(logp: torch.Tensor, logp_old: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """$s_i$: the length-normalised sequence ratio (geometric mean of the token ratios), ``[B]``;
    $\\log s_i$ clamped to $[-20, 20]$ so that it never overflows (see the module docstring)."""
    return torch.exp(sequence_log_ratio(logp, logp_old, mask).clamp(-_MAX_LOG_RATIO, _MAX_LOG_RATIO))


def gspo_token_ratio(logp: torch.Tensor, logp_old: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """GSPO-token: $s_{i,t} = \\mathrm{sg}[s_i]\\cdot\\pi_\\theta(y_{i,t})/\\mathrm{sg}[\\pi_\\theta(y_{i,t})]$, ``[B, T]``.

    Numerically equal to $s_i$ on every token; its gradient is the token's own score function
    scaled by $s_i$, which lets per-token advantages be used.
    """
    s = gspo_sequence_ratio(logp, logp_old, mask).detach()
    lp = logp.to(s.dtype)
    return s[:, None] * torch.exp(lp - lp.detach())


def gspo_loss(
    logp: torch.Tensor,
    logp_old: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip_low: float = 3e-4,
    clip_high: float | None = 4e-4,
) -> tuple[torch.Tensor, dict]:
    """GSPO loss to minimise, $-J(\\theta)$, for ``[B, T]`` log-probs and ``[B]`` (or ``[B, T]``,
    constant over tokens) sequence advantages. Ratios in fp32 (fp64 inputs stay fp64). Defaults are the paper's clip range (3e-4, 4e-4).

    Returns ``(loss, stats)`` with ``clip_frac`` (fraction of *sequences* clipped) and ``ratio_mean``.
    """
    _check(logp, logp_old, mask)
    if advantages.dim() == 2:
        if advantages.shape != mask.shape:
            raise ValueError(f"advantages [B, T] must match mask {tuple(mask.shape)}, got {tuple(advantages.shape)}")
        adv = masked_mean(advantages, mask, dim=-1)
    elif advantages.dim() == 1 and advantages.shape[0] == logp.shape[0]:
        adv = advantages
    else:
        raise ValueError(f"advantages must be [B] or [B, T] with B={logp.shape[0]}, got {tuple(advantages.shape)}")
    s = gspo_sequence_ratio(logp, logp_old, mask)
    adv = adv.detach().to(s.dtype)
    high = clip_low if clip_high is None else clip_high
    per_seq = ppo_clip_objective_per_token(s, adv, clip_low, high, None)  # [B] loss per sequence
    # every token of sequence i carries its sequence's loss; seq-mean-token-mean = mean over sequences
    m = mask.to(s.dtype)
    loss = aggregate(per_seq[:, None].expand_as(m) * m, m, "seq-mean-token-mean")
    with torch.no_grad():
        clipped = ((s < 1 - clip_low) & (adv < 0)) | ((s > 1 + high) & (adv > 0))
        stats = {"clip_frac": clipped.float().mean().item(), "ratio_mean": s.mean().item()}
    return loss, stats
