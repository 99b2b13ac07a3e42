r"""Generalised Advantage Estimation (Schulman et al. 2016) on ``[B, T]`` token batches.

Two separate ideas, two separate arguments:

* the **loss mask** ``mask`` says which tokens the policy produced and is trained on (1) and which it
  did not (0: padding, or tool / environment observation tokens inside a multi-turn rollout);
* the **episode boundaries** ``dones`` say where an episode ends (``dones[b, t] != 0``: nothing after
  position ``t`` is a successor of what came before). Default: one episode per row, ending after its
  last response token.

Masked tokens are not time steps of the agent's decision process: they are skipped, and the value and
the advantage are carried across them unchanged (verl's ``compute_gae_advantage_return``). With
$\mathrm{next}(t)$ the next response token after $t$ in the same episode,

$$\delta_t = r_t + \gamma V_{\mathrm{next}(t)} - V_t,\qquad
  \hat A_t = \delta_t + \gamma\lambda\,\hat A_{\mathrm{next}(t)},\qquad \hat R_t = \hat A_t + V_t,$$

with $V_{\mathrm{next}(t)} = \hat A_{\mathrm{next}(t)} = 0$ when the episode ends after $t$. This is GAE on
the row with its masked tokens deleted, cut at the episode ends; $\hat R_t$ is the $\lambda$-return
(the value target). Rewards must sit on response tokens (a reward on a masked position is ignored, as
in verl). The "every interior zero ends an episode" convention is ``dones=dones_at_mask_gaps(mask)``.
"""

from __future__ import annotations

import torch

from impls.rl.masking import reduce_dtype

__all__ = ["gae", "discounted_returns", "dones_at_mask_gaps"]


def _check(rewards: torch.Tensor, mask: torch.Tensor, values: torch.Tensor | None = None,
           dones: torch.Tensor | None = None) -> None:
    if rewards.dim() != 2:
        raise ValueError(f"expected [B, T] tensors, got rewards of shape {tuple(rewards.shape)}")
    if mask.shape != rewards.shape:
        raise ValueError(f"mask shape {tuple(mask.shape)} != rewards shape {tuple(rewards.shape)}")
    if values is not None and values.shape != rewards.shape:
        raise ValueError(f"values shape {tuple(values.shape)} != rewards shape {tuple(rewards.shape)}")
    if dones is not None and dones.shape != rewards.shape:
        raise ValueError(f"dones shape {tuple(dones.shape)} != rewards shape {tuple(rewards.shape)}")


def _continues(dones: torch.Tensor | None, like: torch.Tensor) -> torch.Tensor:
    """1 where the episode goes on after position t, 0 where it ends there (float, like ``like``)."""
    if dones is None:
        return torch.ones_like(like)
    return (dones.to(like.device) == 0).to(like.dtype)


def dones_at_mask_gaps(mask: torch.Tensor) -> torch.Tensor:
    """Episode ends at every response token followed by a masked one (bool ``[B, T]``).

    Passing this as ``dones`` gives the convention in which an interior zero of the mask is an
    episode reset (correct only when the masked tokens really separate independent episodes).
    """
    m = mask != 0
    out = torch.zeros_like(m)
    out[:, :-1] = m[:, :-1] & ~m[:, 1:]
    return out


def gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    mask: torch.Tensor,
    gamma: float,
    lam: float,
    *,
    dones: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Raw (unwhitened) GAE advantages and returns, both ``[B, T]`` in >= fp32; 0 on masked tokens.

    Backwards over $t$, with $c_t = 1 - \mathrm{done}_t$ and carries $\bar V, \bar A$ (0 after the row):
    a response token sets $\hat A_t = r_t + \gamma c_t\bar V - V_t + \gamma\lambda c_t\bar A$ and then
    $\bar V \leftarrow V_t$, $\bar A \leftarrow \hat A_t$; a masked token only multiplies the carries by
    $c_t$ (skipped: value and advantage carried across, as verl does). $\hat R_t = \hat A_t + V_t$.
    ``dones`` (optional ``[B, T]``): nonzero where an episode ends after $t$; default one episode per
    row. Loops backwards over T (a linear recurrence; ``impls/rl/gae_scan.py`` has the scanned form).
    """
    _check(rewards, mask, values, dones)
    if not (0.0 <= gamma <= 1.0 and 0.0 <= lam <= 1.0):
        raise ValueError(f"gamma and lam must lie in [0, 1], got gamma={gamma}, lam={lam}")
    dt = reduce_dtype(torch.promote_types(rewards.dtype, values.dtype))
    valid = (mask != 0).to(rewards.device)
    zero = torch.zeros((), dtype=dt, device=rewards.device)
    r = torch.where(valid, rewards.to(dt), zero)
    v = torch.where(valid, values.to(device=rewards.device, dtype=dt), zero)
    cont = _continues(dones, r)
    B, T = r.shape
    adv = torch.zeros_like(r)
    next_adv = torch.zeros(B, dtype=dt, device=r.device)
    next_v = torch.zeros(B, dtype=dt, device=r.device)
    for t in range(T - 1, -1, -1):
        nv = cont[:, t] * next_v
        na = cont[:, t] * next_adv
        a_t = r[:, t] + gamma * nv - v[:, t] + gamma * lam * na
        ok = valid[:, t]
        adv[:, t] = torch.where(ok, a_t, zero)
        next_v = torch.where(ok, v[:, t], nv)  # a masked token passes the carries through
        next_adv = torch.where(ok, a_t, na)
    returns = torch.where(valid, adv + v, zero)
    return adv, returns


def discounted_returns(
    rewards: torch.Tensor, mask: torch.Tensor, gamma: float, *, dones: torch.Tensor | None = None
) -> torch.Tensor:
    r"""Monte-Carlo reward-to-go $G_t = r_t + \gamma G_{\mathrm{next}(t)}$ over response tokens; 0 on masked ones.

    Same conventions as :func:`gae` (masked tokens skipped, the return carried across them; ``dones``
    ends episodes; default one episode per row). Equals ``gae`` with $V=0$, $\lambda=1$.

    OpenRLHF 0.11.2's ``get_cumulative_returns`` differs inside a row: it zeroes the rewards of masked tokens
    but still discounts by $\gamma$ across each of them, and leaves the carried return on masked positions
    (here a masked token is no discount step and gets 0). On response tokens the two agree when the mask has
    no interior zero, or when $\gamma = 1$.
    """
    _check(rewards, mask, dones=dones)
    dt = reduce_dtype(rewards.dtype)
    valid = mask != 0
    zero = torch.zeros((), dtype=dt, device=rewards.device)
    r = torch.where(valid, rewards.to(dt), zero)
    cont = _continues(dones, r)
    out = torch.zeros_like(r)
    nxt = torch.zeros(r.shape[0], dtype=dt, device=r.device)
    for t in range(r.shape[1] - 1, -1, -1):
        carried = cont[:, t] * nxt
        g_t = r[:, t] + gamma * carried
        out[:, t] = torch.where(valid[:, t], g_t, zero)
        nxt = torch.where(valid[:, t], g_t, carried)
    return out
