"""DPO (Rafailov et al. 2023, arXiv 2305.18290) and the KL-regularised optimum it rests on.

The KL-regularised RLHF objective, for one prompt x,

$$\\max_\\pi\\ \\mathbb{E}_{y\\sim\\pi}[r(x,y)] - \\beta\\,\\mathrm{KL}(\\pi(\\cdot\\mid x)\\,\\|\\,\\pi_{ref}(\\cdot\\mid x))$$

has the closed-form optimum $\\pi^*(y\\mid x) = \\pi_{ref}(y\\mid x)\\exp(r(x,y)/\\beta)/Z(x)$. Solving for
$r = \\beta\\log\\frac{\\pi^*}{\\pi_{ref}} + \\beta\\log Z(x)$ and putting it into the Bradley-Terry
likelihood (where $Z$ cancels) gives the DPO loss

$$L = -\\log\\sigma\\Big(\\beta\\log\\frac{\\pi_\\theta(y_w)}{\\pi_{ref}(y_w)} - \\beta\\log\\frac{\\pi_\\theta(y_l)}{\\pi_{ref}(y_l)}\\Big).$$
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from impls.rl.masking import reduce_dtype

__all__ = ["dpo_implicit_rewards", "dpo_loss", "dpo_variant_loss", "DPO_LOSSES", "kl_regularised_optimum",
           "solve_kl_regularised_policy"]


def dpo_implicit_rewards(policy_logps: torch.Tensor, ref_logps: torch.Tensor, beta: float) -> torch.Tensor:
    """$\\hat r(x, y) = \\beta(\\log\\pi_\\theta(y\\mid x) - \\log\\pi_{ref}(y\\mid x))$ in fp32 (fp64 stays fp64)."""
    dt = reduce_dtype(torch.promote_types(policy_logps.dtype, ref_logps.dtype))
    return beta * (policy_logps.to(dt) - ref_logps.to(dt))


def dpo_loss(
    policy_chosen_logps: torch.Tensor,
    policy_rejected_logps: torch.Tensor,
    ref_chosen_logps: torch.Tensor,
    ref_rejected_logps: torch.Tensor,
    beta: float,
) -> torch.Tensor:
    """Mean DPO loss over the batch: $-\\log\\sigma(\\hat r_w - \\hat r_l)$.

    Inputs are ``[B]`` sequence log-probabilities (sum of token log-probs of each response).
    """
    shapes = {t.shape for t in (policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps)}
    if len(shapes) != 1:
        raise ValueError(f"all four log-prob tensors must have the same shape, got {sorted(map(tuple, shapes))}")
    if beta <= 0:
        raise ValueError(f"beta must be > 0, got {beta}")
    margin = dpo_implicit_rewards(policy_chosen_logps, ref_chosen_logps, beta) - dpo_implicit_rewards(
        policy_rejected_logps, ref_rejected_logps, beta
    )
    return -F.logsigmoid(margin).mean()


def _sigmoid_loss(h: torch.Tensor, beta: float, eps: float) -> torch.Tensor:
    return -F.logsigmoid(beta * h)


def _cdpo_loss(h: torch.Tensor, beta: float, eps: float) -> torch.Tensor:
    # conservative DPO (Mitchell 2023): labels flipped with probability eps, cross-entropy against smoothed labels.
    # Not a TRL 1.16 loss type: TRL's sigmoid ignores label_smoothing (only robust, exo_pair, aot read it).
    return -(1 - eps) * F.logsigmoid(beta * h) - eps * F.logsigmoid(-beta * h)


def _robust_loss(h: torch.Tensor, beta: float, eps: float) -> torch.Tensor:
    # rDPO (Chowdhury et al. 2024): unbiased under flips: (1-eps) l(h) + eps l(-h) = -log sigma(beta h)
    if not 0.0 <= eps < 0.5:
        raise ValueError(f"robust DPO needs 0 <= label_smoothing < 0.5, got {eps}")
    return (-(1 - eps) * F.logsigmoid(beta * h) + eps * F.logsigmoid(-beta * h)) / (1 - 2 * eps)


def _hinge_loss(h: torch.Tensor, beta: float, eps: float) -> torch.Tensor:
    # SLiC-HF (Zhao et al. 2023): max(0, 1 - beta h)
    return torch.relu(1 - beta * h)


def _ipo_loss(h: torch.Tensor, beta: float, eps: float) -> torch.Tensor:
    # IPO (Azar et al. 2023, Eq. 17; beta is their tau): (h - 1/(2 tau))^2 on length-averaged log-ratios
    return (h - 1 / (2 * beta)) ** 2


DPO_LOSSES = {"sigmoid": _sigmoid_loss, "cdpo": _cdpo_loss, "robust": _robust_loss, "hinge": _hinge_loss, "ipo": _ipo_loss}


def dpo_variant_loss(
    policy_chosen_logps: torch.Tensor,
    policy_rejected_logps: torch.Tensor,
    ref_chosen_logps: torch.Tensor,
    ref_rejected_logps: torch.Tensor,
    beta: float,
    loss_type: str = "sigmoid",
    label_smoothing: float = 0.0,
    chosen_lengths: torch.Tensor | None = None,
    rejected_lengths: torch.Tensor | None = None,
) -> torch.Tensor:
    r"""Mean preference loss over ``[B]`` pairs, named as TRL 1.16's ``loss_type`` except ``cdpo``, with
    $h = (\log\pi_\theta(y_w)-\log\pi_{ref}(y_w)) - (\log\pi_\theta(y_l)-\log\pi_{ref}(y_l))$ (sequence log-probs):

    - ``sigmoid`` (DPO): $-\log\sigma(\beta h)$; ``label_smoothing`` is ignored, as in TRL 1.16;
    - ``cdpo`` (conservative DPO, Mitchell 2023, label smoothing $\varepsilon$):
      $-(1-\varepsilon)\log\sigma(\beta h)-\varepsilon\log\sigma(-\beta h)$, minimised at the finite margin
      $\beta h = \log\frac{1-\varepsilon}{\varepsilon}$. TRL 1.16 has no such loss type: its ``sigmoid`` ignores
      ``label_smoothing`` (which only ``robust``, ``exo_pair`` and ``aot`` read);
    - ``robust`` (rDPO): $\frac{-(1-\varepsilon)\log\sigma(\beta h)+\varepsilon\log\sigma(-\beta h)}{1-2\varepsilon}$, whose expectation
      under labels flipped with probability $\varepsilon$ is the clean DPO loss;
    - ``hinge`` (SLiC): $\max(0, 1-\beta h)$;
    - ``ipo``: $(h/|y| - \frac{1}{2\beta})^2$ with each log-ratio averaged over its tokens (TRL's normalisation,
      ``chosen_lengths``/``rejected_lengths`` required), minimised at the margin $\frac{1}{2\beta}$.
    """
    shapes = {t.shape for t in (policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps)}
    if len(shapes) != 1:
        raise ValueError(f"all four log-prob tensors must have the same shape, got {sorted(map(tuple, shapes))}")
    if beta <= 0:
        raise ValueError(f"beta must be > 0, got {beta}")
    try:
        fn = DPO_LOSSES[loss_type]
    except KeyError:
        raise ValueError(f"unknown DPO loss_type {loss_type!r}; known: {sorted(DPO_LOSSES)}") from None
    chosen = dpo_implicit_rewards(policy_chosen_logps, ref_chosen_logps, 1.0)
    rejected = dpo_implicit_rewards(policy_rejected_logps, ref_rejected_logps, 1.0)
    if loss_type == "ipo":
        if chosen_lengths is None or rejected_lengths is None:
            raise ValueError("ipo averages each log-ratio over its tokens: pass chosen_lengths and rejected_lengths")
        chosen = chosen / chosen_lengths.to(chosen).clamp_min(1.0)
        rejected = rejected / rejected_lengths.to(rejected).clamp_min(1.0)
    return fn(chosen - rejected, beta, label_smoothing).mean()


def kl_regularised_optimum(pi_ref: torch.Tensor, reward: torch.Tensor, beta: float) -> torch.Tensor:
    """Closed form $\\pi^* = \\pi_{ref}\\exp(r/\\beta)/Z$ over the last dimension (discrete responses)."""
    return torch.softmax(torch.log(pi_ref) + reward / beta, dim=-1)


def solve_kl_regularised_policy(
    pi_ref: torch.Tensor, reward: torch.Tensor, beta: float, steps: int = 200
) -> torch.Tensor:
    """Numerical maximiser of $\\sum_y \\pi(y) r(y) - \\beta\\sum_y \\pi(y)\\log\\frac{\\pi(y)}{\\pi_{ref}(y)}$
    over the simplex, by L-BFGS on softmax logits in fp64 started from uniform logits.
    It never uses the closed form, so the two can be compared."""
    pi_ref = pi_ref.double()
    reward = reward.double()
    logits = torch.zeros_like(pi_ref, requires_grad=True)
    opt = torch.optim.LBFGS([logits], lr=1.0, max_iter=steps, tolerance_grad=1e-12, tolerance_change=1e-15,
                            line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        logpi = torch.log_softmax(logits, dim=-1)
        pi = logpi.exp()
        objective = (pi * reward).sum() - beta * (pi * (logpi - torch.log(pi_ref))).sum()
        (-objective).backward()
        return -objective

    opt.step(closure)
    return torch.softmax(logits.detach(), dim=-1)
