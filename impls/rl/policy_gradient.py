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
from impls.rl.masking import masked_sum, whiten

MODES = ("total", "reward-to-go")


def _check(x: torch.Tensor, mask: torch.Tensor, name: str) -> None:
    if x.dim() != 2 or x.shape != mask.shape:
        raise ValueError(f"{name} must be [B, T] and match mask; got {tuple(x.shape)} vs mask {tuple(mask.shape)}")


def episode_starts(mask: torch.Tensor, dones: torch.Tensor | None = None) -> torch.Tensor:
    """Index ``[B, T]`` of the first response token of the episode each position belongs to (-1 before any).

    Same conventions as :func:`impls.rl.gae.gae`: masked tokens are skipped (they do not start an
    episode), an episode ends after a position with ``dones != 0``, default one episode per row.
    """
    valid = mask != 0
    B, T = valid.shape
    pos = torch.arange(T, device=valid.device).expand(B, T)
    ended = torch.zeros_like(valid) if dones is None else (dones.to(valid.device) != 0)
    # an end at or after the previous response token and before t makes t a start
    prev_valid = torch.cummax(torch.where(valid, pos, -1), dim=1).values  # last response token <= t
    prev_before = torch.nn.functional.pad(prev_valid[:, :-1], (1, 0), value=-1)  # last one < t
    ends = torch.nn.functional.pad(ended.long().cumsum(dim=1), (1, 0))  # ends[:, k] = #ends before k
    since = ends[:, :T] - ends.gather(1, prev_before.clamp_min(0))
    start = valid & ((prev_before < 0) | (since > 0))
    return torch.cummax(torch.where(start, pos, -1), dim=1).values


def reinforce_weights(
    rewards: torch.Tensor,
    mask: torch.Tensor,
    gamma: float = 1.0,
    mode: str = "reward-to-go",
    baseline: torch.Tensor | None = None,
    discount_weight: bool = False,
    *,
    dones: torch.Tensor | None = None,
) -> torch.Tensor:
    r"""Per-step weights $\Psi_t$ (fp32 or fp64), 0 on masked tokens.

    ``total``: $\Psi_t=G_{t_0}$, the return from the first response token $t_0$ of $t$'s episode;
    ``reward-to-go``: $\Psi_t=G_t$; minus ``baseline`` $b_t$ if given; times $\gamma^k$ if
    ``discount_weight``, with $k$ the number of response tokens before $t$ in its episode. Masked tokens
    (tool/observation tokens, padding) are skipped, ``dones`` ends episodes, default one episode per
    row (the conventions of :func:`impls.rl.gae.gae`)."""
    _check(rewards, mask, "rewards")
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    G = discounted_returns(rewards, mask, gamma, dones=dones)  # reward-to-go G_t, fp32+
    m = (mask != 0).to(G.dtype)
    need_start = mode == "total" or discount_weight
    start = episode_starts(mask, dones) if need_start else None
    if mode == "total":
        psi = G.gather(1, start.clamp_min(0)) * m  # the episode's G at its first response token
    else:
        psi = G
    if baseline is not None:
        _check(baseline, mask, "baseline")
        psi = psi - baseline.to(G.dtype) * m
    if discount_weight:
        seen = m.cumsum(dim=1) - m  # response tokens before t in the row
        k = seen - seen.gather(1, start.clamp_min(0))
        psi = psi * torch.pow(torch.as_tensor(gamma, dtype=G.dtype, device=G.device), k)
    return psi * m


def reinforce_pp_advantages(
    token_rewards: torch.Tensor, mask: torch.Tensor, gamma: float = 1.0, *, dones: torch.Tensor | None = None
) -> torch.Tensor:
    r"""REINFORCE++ (Hu et al. 2025, arXiv 2501.03262): token advantages without a critic.

    $G_t = r_t + \gamma G_{\mathrm{next}(t)}$ over the response tokens (rewards usually
    $-\beta\,\mathrm{KL}_t$ on every token plus the score on the last; conventions of :func:`discounted_returns`),
    then whitened over all valid tokens of the batch: $A = (G - \mu_B)/\sigma_B$. 0 on masked positions.
    """
    G = discounted_returns(token_rewards, mask, gamma, dones=dones)
    return whiten(G, mask)


def reinforce_loss(logp: torch.Tensor, weights: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    r"""Surrogate to minimise: $L=-\frac1B\sum_b\sum_t \Psi_{b,t}\log\pi_\theta(a_{b,t}\mid s_{b,t})$,
    so $-\nabla L$ is the batch mean of $\hat g$. ``weights`` are treated as constants."""
    _check(logp, mask, "logp")
    _check(weights, mask, "weights")
    per_seq = masked_sum(logp * weights.detach().to(logp.device), mask, dim=1)
    return -per_seq.mean()

