r"""REINFORCE-style policy-gradient estimators over right-padded ``[B, T]`` batches.

For a trajectory $\tau$ the estimators are $\hat g=\sum_t \Psi_t\,\nabla_\theta\log\pi_\theta(a_t\mid s_t)$ with

* ``"total"``:         $\Psi_t = G_0 = \sum_k \gamma^k r_k$ (the same weight on every step);
* ``"reward-to-go"``:  $\Psi_t = G_t = \sum_{k\ge t}\gamma^{k-t} r_k$ (causality: past rewards dropped);
* either minus a baseline $b_t$ (e.g. $V(s_t)$), which keeps the estimator unbiased when $b_t$
  depends on the state but not on the action.

With $\gamma<1$ the gradient of $J=E[\sum_t\gamma^t r_t]$ carries an extra $\gamma^t$ on step $t$
(``discount_weight=True``); the common form without it is not the gradient of $J$.
"""

from __future__ import annotations

import torch

from impls.rl.gae import discounted_returns
from impls.rl.masking import masked_sum

MODES = ("total", "reward-to-go")


def _check(x: torch.Tensor, mask: torch.Tensor, name: str) -> None:
    if x.dim() != 2 or x.shape != mask.shape:
        raise ValueError(f"{name} must be [B, T] and match mask; got {tuple(x.shape)} vs mask {tuple(mask.shape)}")


def reinforce_weights(
    rewards: torch.Tensor,
    mask: torch.Tensor,
    gamma: float = 1.0,
    mode: str = "reward-to-go",
    baseline: torch.Tensor | None = None,
    discount_weight: bool = False,
) -> torch.Tensor:
    r"""Per-step weights $\Psi_t$ (fp32 or fp64), 0 on padding.

    ``total``: $\Psi_t=G_0$; ``reward-to-go``: $\Psi_t=G_t$; minus ``baseline`` $b_t$ if given;
    times $\gamma^t$ if ``discount_weight``."""
    _check(rewards, mask, "rewards")
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    G = discounted_returns(rewards, mask, gamma)  # reward-to-go G_t, fp32+
    m = (mask != 0).to(G.dtype)
    if mode == "total":
        psi = G[:, :1].expand_as(G) * m  # G_0 on every response token (right padding: t=0 is the first)
    else:
        psi = G
    if baseline is not None:
        _check(baseline, mask, "baseline")
        psi = psi - baseline.to(G.dtype) * m
    if discount_weight:
        t = torch.arange(G.shape[1], device=G.device, dtype=G.dtype)
        psi = psi * gamma**t
    return psi * m


def reinforce_loss(logp: torch.Tensor, weights: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    r"""Surrogate to minimise: $L=-\frac1B\sum_b\sum_t \Psi_{b,t}\log\pi_\theta(a_{b,t}\mid s_{b,t})$,
    so $-\nabla L$ is the batch mean of $\hat g$. ``weights`` are treated as constants."""
    _check(logp, mask, "logp")
    _check(weights, mask, "weights")
    per_seq = masked_sum(logp * weights.detach().to(logp.device), mask, dim=1)
    return -per_seq.mean()

