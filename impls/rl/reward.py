"""Reward-model loss and KL-shaped per-token rewards for RLHF.

* :func:`bradley_terry_loss` -- the pairwise reward-model loss
  (InstructGPT §3.5, Eq. 1):  L = -E[ log sigma(r_w - r_l) ].
* :func:`kl_shaped_rewards` -- InstructGPT-style per-token rewards for PPO:

      R_t = -beta * KL_t                 on every response token t
      R_T += score                       on the last response token T

  where KL_t is a per-token estimate of KL(pi || pi_ref) on the sampled token
  (``kind`` "k1", "k2" or "k3", see :mod:`impls.rl.kl`).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from impls.rl.kl import kl_estimate
from impls.rl.masking import reduce_dtype

__all__ = ["bradley_terry_loss", "kl_shaped_rewards", "last_token_index"]


def bradley_terry_loss(r_chosen: torch.Tensor, r_rejected: torch.Tensor) -> torch.Tensor:
    """Mean Bradley-Terry loss  -log sigma(r_w - r_l)  over pairs, computed in >= fp32.

    Uses ``-logsigmoid`` (= softplus(r_l - r_w)), which is finite for any margin.
    """
    if r_chosen.shape != r_rejected.shape:
        raise ValueError(f"r_chosen {tuple(r_chosen.shape)} and r_rejected {tuple(r_rejected.shape)} differ")
    if r_chosen.numel() == 0:
        raise ValueError("bradley_terry_loss needs at least one pair")
    dt = reduce_dtype(torch.promote_types(r_chosen.dtype, r_rejected.dtype))
    margin = r_chosen.to(dt) - r_rejected.to(dt)
    return -F.logsigmoid(margin).mean()


def last_token_index(mask: torch.Tensor) -> torch.Tensor:
    """Index of the last position with mask = 1 in each row of a [B, T] mask (-1 if the row is empty)."""
    if mask.dim() != 2:
        raise ValueError(f"mask must be [B, T], got shape {tuple(mask.shape)}")
    m = mask.bool()
    pos = torch.arange(m.shape[1], device=m.device).expand_as(m)
    return torch.where(m, pos, torch.full_like(pos, -1)).amax(dim=1)


def kl_shaped_rewards(
    score: torch.Tensor,
    logp: torch.Tensor,
    logp_ref: torch.Tensor,
    mask: torch.Tensor,
    beta: float,
    kind: str = "k1",
) -> torch.Tensor:
    """Per-token RLHF rewards:  R_t = -beta * KL_t * m_t,  plus ``score`` on the last response token.

    Args:
      score:    [B] sequence score from the reward model.
      logp:     [B, T] log pi(a_t | s_t) of the sampled tokens under the rollout policy.
      logp_ref: [B, T] log pi_ref(a_t | s_t) of the same tokens under the frozen reference.
      mask:     [B, T] 1 on response tokens, 0 on padding (right-padded).
      beta:     KL coefficient (a float, e.g. a controller's ``.value``).
      kind:     KL estimator passed to :func:`impls.rl.kl.kl_estimate`.

    Returns:
      rewards [B, T] in >= fp32, zero on padding. Rows without any response token get all-zero
      rewards (the score has nowhere to go).
      No gradient flows: rewards are data for the advantage estimator.
    """
    if logp.dim() != 2 or logp.shape != logp_ref.shape or logp.shape != mask.shape:
        raise ValueError(
            f"logp {tuple(logp.shape)}, logp_ref {tuple(logp_ref.shape)} and mask {tuple(mask.shape)} "
            "must all be the same [B, T] shape"
        )
    if score.shape != (logp.shape[0],):
        raise ValueError(f"score must be [B] = [{logp.shape[0]}], got {tuple(score.shape)}")
    with torch.no_grad():
        dt = reduce_dtype(torch.promote_types(logp.dtype, logp_ref.dtype))
        m = (mask != 0).to(device=logp.device, dtype=dt)
        kl = torch.where(m > 0, kl_estimate(logp.to(dt), logp_ref.to(dt), kind), 0.0)
        rewards = -float(beta) * kl
        last = last_token_index(mask)
        has = last >= 0
        rows = torch.arange(logp.shape[0], device=logp.device)[has]
        rewards[rows, last[has]] += score.to(device=logp.device, dtype=dt)[has]
    return rewards
