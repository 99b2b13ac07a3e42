r"""Policy losses as a registry of named functions (verl's ``register_policy_loss`` idea).

Every entry takes ``(logp, logp_old, advantages, mask, **options)`` on ``[B, T]`` tensors and returns
``(loss, stats)``; reduction by ``agg`` (``impls/rl/aggregation.py``), ratios in >= fp32.

- ``ppo-clip``: :func:`impls.rl.ppo.ppo_clip_loss`, $-\min(rA, \mathrm{clip}(r)A)$.
- ``cispo`` (MiniMax-M1, arXiv 2506.13585): $-\mathrm{sg}[\mathrm{clip}(r, 1-\epsilon_l, 1+\epsilon_h)]\,A\,\log\pi_\theta$.
  The IS weight is clipped and detached, so *every* token keeps a gradient $\mathrm{clip}(r)\,A\,\nabla\log\pi$
  (PPO's clip zeroes the gradient of the tokens outside the band, often the rare "fork" tokens).
  ``clip_low=None`` leaves the weight unbounded below (the paper effectively does; TRL caps only from above).
- ``gpg`` (arXiv 2504.02546): $-A\log\pi_\theta$, plain REINFORCE on the batch (no ratio, no clip).
"""

from __future__ import annotations

from typing import Callable

import torch

from impls.rl.aggregation import aggregate
from impls.rl.masking import masked_mean, reduce_dtype
from impls.rl.ppo import ppo_clip_loss

__all__ = ["POLICY_LOSSES", "cispo_loss", "gpg_loss", "register_policy_loss"]

POLICY_LOSSES: dict[str, Callable] = {}


def register_policy_loss(name: str):
    def deco(fn):
        POLICY_LOSSES[name] = fn
        return fn

    return deco


def _check(*ts: torch.Tensor) -> None:
    if len({tuple(t.shape) for t in ts}) != 1 or ts[0].dim() != 2:
        raise ValueError(f"logp, logp_old, advantages and mask must share one [B, T] shape, got {[tuple(t.shape) for t in ts]}")


register_policy_loss("ppo-clip")(ppo_clip_loss)


@register_policy_loss("cispo")
def cispo_loss(
    logp: torch.Tensor,
    logp_old: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip_low: float | None = None,
    clip_high: float = 0.28,
    agg: str = "token-mean",
    norm_constant: float | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    r"""CISPO loss $-\mathrm{agg}_t\,\mathrm{sg}[\hat r_t]\,A_t\log\pi_\theta(a_t)$, $\hat r_t = \mathrm{clip}(r_t, 1-\epsilon_l, 1+\epsilon_h)$.

    $\nabla_{\log\pi}$ of token $t$ is $-w_t\hat r_t A_t$ ($w_t$ the aggregation weight) on every valid token.
    Stats: ``clip_frac`` (tokens whose weight was clipped), ``ratio_mean``.
    """
    _check(logp, logp_old, advantages, mask)
    dt = reduce_dtype(logp.dtype)
    valid = mask != 0
    zero = torch.zeros((), dtype=dt, device=logp.device)
    lp = logp.to(dt)
    log_ratio = torch.where(valid, lp.detach() - logp_old.detach().to(dt), zero).clamp(-20.0, 20.0)
    ratio = torch.exp(log_ratio)
    lo = 0.0 if clip_low is None else 1.0 - clip_low
    w = ratio.clamp(min=lo, max=1.0 + clip_high)
    adv = torch.where(valid, advantages.detach().to(dt), zero)
    per_token = -w * adv * torch.where(valid, lp, zero)
    loss = aggregate(per_token, mask, agg, norm_constant)
    with torch.no_grad():
        stats = {"clip_frac": float(masked_mean((w != ratio).to(dt), mask)), "ratio_mean": float(masked_mean(ratio, mask))}
    return loss, stats


@register_policy_loss("gpg")
def gpg_loss(
    logp: torch.Tensor,
    logp_old: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    agg: str = "token-mean",
    norm_constant: float | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    r"""GPG / REINFORCE loss $-\mathrm{agg}_t A_t\log\pi_\theta(a_t)$ (``logp_old`` unused, kept for the registry's signature)."""
    _check(logp, logp_old, advantages, mask)
    dt = reduce_dtype(logp.dtype)
    valid = mask != 0
    zero = torch.zeros((), dtype=dt, device=logp.device)
    per_token = -torch.where(valid, advantages.detach().to(dt), zero) * torch.where(valid, logp.to(dt), zero)
    return aggregate(per_token, mask, agg, norm_constant), {}
