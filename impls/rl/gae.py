r"""Generalised Advantage Estimation (Schulman et al. 2016) on right-padded ``[B, T]`` batches.

$$\delta_t = r_t + \gamma V_{t+1} - V_t,\qquad \hat A_t = \sum_{l\ge 0} (\gamma\lambda)^l \delta_{t+l}
  = \delta_t + \gamma\lambda \hat A_{t+1},$$
with $V_{t+1}=0$ and $\hat A_{t+1}=0$ after the last response token (the episode ends there),
and returns $\hat R_t = \hat A_t + V_t$ (the $\lambda$-return, the value target).
"""

from __future__ import annotations

import torch

from impls.rl.masking import reduce_dtype

__all__ = ["gae", "discounted_returns"]


def _check(rewards: torch.Tensor, mask: torch.Tensor, values: torch.Tensor | None = None) -> None:
    if rewards.dim() != 2:
        raise ValueError(f"expected [B, T] tensors, got rewards of shape {tuple(rewards.shape)}")
    if mask.shape != rewards.shape:
        raise ValueError(f"mask shape {tuple(mask.shape)} != rewards shape {tuple(rewards.shape)}")
    if values is not None and values.shape != rewards.shape:
        raise ValueError(f"values shape {tuple(values.shape)} != rewards shape {tuple(rewards.shape)}")


def gae(
    rewards: torch.Tensor, values: torch.Tensor, mask: torch.Tensor, gamma: float, lam: float
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Raw (unwhitened) GAE advantages and returns, both ``[B, T]`` in >= fp32.

    $\delta_t = r_t + \gamma m_{t+1} V_{t+1} - V_t$, $\hat A_t = \delta_t + \gamma\lambda m_{t+1}\hat A_{t+1}$,
    $\hat R_t = \hat A_t + V_t$; padded positions give 0. Loops backwards over T (a linear
    recurrence; see ``impls/rl/gae_scan.py`` for the scanned form).
    """
    _check(rewards, mask, values)
    if not (0.0 <= gamma <= 1.0 and 0.0 <= lam <= 1.0):
        raise ValueError(f"gamma and lam must lie in [0, 1], got gamma={gamma}, lam={lam}")
    dt = reduce_dtype(torch.promote_types(rewards.dtype, values.dtype))
    m = (mask != 0).to(device=rewards.device, dtype=dt)
    r = torch.where(m > 0, rewards.to(dt), 0.0)
    v = torch.where(m > 0, values.to(dt), 0.0)
    B, T = r.shape
    adv = torch.zeros_like(r)
    next_adv = torch.zeros(B, dtype=dt, device=r.device)
    next_v = torch.zeros(B, dtype=dt, device=r.device)
    for t in range(T - 1, -1, -1):
        delta = r[:, t] + gamma * next_v - v[:, t]
        a_t = (delta + gamma * lam * next_adv) * m[:, t]
        adv[:, t] = a_t
        # Where position t is padding, what follows it is not a successor: reset.
        next_adv = a_t
        next_v = v[:, t]
    returns = (adv + v) * m
    return adv, returns


def discounted_returns(rewards: torch.Tensor, mask: torch.Tensor, gamma: float) -> torch.Tensor:
    r"""Monte-Carlo reward-to-go $G_t = \sum_{k\ge t} \gamma^{k-t} r_k$ over response tokens; 0 on padding."""
    _check(rewards, mask)
    dt = reduce_dtype(rewards.dtype)
    m = (mask != 0).to(device=rewards.device, dtype=dt)
    r = torch.where(m > 0, rewards.to(dt), 0.0)
    out = torch.zeros_like(r)
    nxt = torch.zeros(r.shape[0], dtype=dt, device=r.device)
    for t in range(r.shape[1] - 1, -1, -1):
        nxt = (r[:, t] + gamma * nxt) * m[:, t]
        out[:, t] = nxt
    return out
