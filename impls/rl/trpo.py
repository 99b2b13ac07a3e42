r"""TRPO (Schulman et al. 2015) on a small tabular softmax policy, with exact quantities.

Practical TRPO step, paper Eq. (14): maximise the surrogate
$L_{\theta_{old}}(\theta)=\sum_s\rho_{old}(s)\sum_a\pi_\theta(a|s)A_{old}(s,a)$ subject to the *average*
$\bar D_{KL}(\theta_{old},\theta)=\mathbb E_{s\sim\rho_{old}}\,\mathrm{KL}(\pi_{old}(\cdot|s)\,\|\,\pi_\theta(\cdot|s))\le\delta$:
1. $g=\nabla_\theta L$; solve $F x = g$ by conjugate gradient, using only Fisher-vector products
   $Fv=\nabla_\theta\big((\nabla_\theta \bar D_{KL})^\top v\big)$ (two backward passes; $F$ is never formed);
2. full step $\beta x$ with $\beta=\sqrt{2\delta/(x^\top F x)}$;
3. backtracking line search: shrink by ``backtrack_coef`` until $\bar D_{KL}\le\delta$ and $L$ improves.
The theoretical (monotonic) version maximises $L - C\,D^{\max}_{KL}$, $C=4\epsilon\gamma/(1-\gamma)^2$,
$\epsilon=\max_{s,a}|A(s,a)|$ (Theorem 1); ``TabularMDP`` gives the exact $\eta$, $A$, $\rho$ to check it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

__all__ = [
    "TabularMDP",
    "policy",
    "mean_kl",
    "max_kl",
    "surrogate",
    "conjugate_gradient",
    "fisher_vector_product",
    "trpo_step",
    "TRPOInfo",
]


@dataclass
class TabularMDP:
    """A discounted MDP: ``P[s, a, s']``, ``R[s, a]``, start distribution ``rho0[s]``, ``gamma < 1``."""

    P: torch.Tensor
    R: torch.Tensor
    rho0: torch.Tensor
    gamma: float

    @staticmethod
    def random(n_states: int, n_actions: int, gamma: float, generator: torch.Generator,
               dtype: torch.dtype = torch.float64) -> "TabularMDP":
        P = torch.rand(n_states, n_actions, n_states, generator=generator, dtype=dtype) ** 3
        P = P / P.sum(-1, keepdim=True)
        R = torch.randn(n_states, n_actions, generator=generator, dtype=dtype)
        rho0 = torch.rand(n_states, generator=generator, dtype=dtype)
        return TabularMDP(P, R, rho0 / rho0.sum(), gamma)

    def _p_pi(self, pi: torch.Tensor) -> torch.Tensor:
        return torch.einsum("sa,sat->st", pi, self.P)

    def v(self, pi: torch.Tensor) -> torch.Tensor:
        r"""$V^\pi = (I-\gamma P_\pi)^{-1} r_\pi$ (exact, differentiable)."""
        S = self.R.shape[0]
        r_pi = (pi * self.R).sum(-1)
        eye = torch.eye(S, dtype=pi.dtype, device=pi.device)
        return torch.linalg.solve(eye - self.gamma * self._p_pi(pi), r_pi)

    def q(self, pi: torch.Tensor) -> torch.Tensor:
        return self.R + self.gamma * torch.einsum("sat,t->sa", self.P, self.v(pi))

    def advantage(self, pi: torch.Tensor) -> torch.Tensor:
        return self.q(pi) - self.v(pi)[:, None]

    def eta(self, pi: torch.Tensor) -> torch.Tensor:
        r"""$\eta(\pi)=\mathbb E_{s_0\sim\rho_0}V^\pi(s_0)$, the expected discounted return."""
        return self.rho0 @ self.v(pi)

    def visitation(self, pi: torch.Tensor) -> torch.Tensor:
        r"""Unnormalised discounted visitation $\rho_\pi(s)=\sum_t\gamma^t P(s_t=s)$."""
        S = self.R.shape[0]
        eye = torch.eye(S, dtype=pi.dtype, device=pi.device)
        return torch.linalg.solve((eye - self.gamma * self._p_pi(pi)).T, self.rho0)


def policy(theta: torch.Tensor) -> torch.Tensor:
    """Tabular softmax policy ``pi[s, a]`` from logits ``theta[s, a]``."""
    return torch.softmax(theta, dim=-1)


def _kl_rows(theta_p: torch.Tensor, theta_q: torch.Tensor) -> torch.Tensor:
    """Per-state KL(softmax(theta_p) || softmax(theta_q))."""
    lp, lq = torch.log_softmax(theta_p, -1), torch.log_softmax(theta_q, -1)
    return (lp.exp() * (lp - lq)).sum(-1)


def mean_kl(theta_old: torch.Tensor, theta: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    r"""$\sum_s w(s)\,\mathrm{KL}(\pi_{old}(\cdot|s)\|\pi_\theta(\cdot|s))$ with $w$ normalised to sum 1."""
    w = weights / weights.sum()
    return w @ _kl_rows(theta_old, theta)


def max_kl(theta_old: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
    r"""$D^{\max}_{KL} = \max_s \mathrm{KL}(\pi_{old}(\cdot|s)\|\pi_\theta(\cdot|s))$."""
    return _kl_rows(theta_old, theta).max()


def surrogate(theta: torch.Tensor, theta_old: torch.Tensor, rho_old: torch.Tensor, adv_old: torch.Tensor):
    r"""$L(\theta) - \eta(\theta_{old}) = \sum_s\rho_{old}(s)\sum_a\pi_\theta(a|s)A_{old}(s,a)$
    (importance-sampled form $\mathbb E_{a\sim\pi_{old}}[\pi_\theta/\pi_{old}\,A]$ evaluated exactly)."""
    pi_old = policy(theta_old).detach()
    ratio = policy(theta) / pi_old
    return (rho_old[:, None] * pi_old * ratio * adv_old).sum()


def conjugate_gradient(Avp: Callable[[torch.Tensor], torch.Tensor], b: torch.Tensor, n_iters: int = 10,
                       tol: float = 1e-12) -> tuple[torch.Tensor, int]:
    """Solve ``A x = b`` for symmetric positive (semi)definite ``A`` given only ``v -> A v``.
    Returns ``(x, number_of_products_used)``."""
    x = torch.zeros_like(b)
    r = b.clone()
    p = b.clone()
    rr = r @ r
    used = 0
    for _ in range(n_iters):
        if rr <= tol:
            break
        Ap = Avp(p)
        used += 1
        alpha = rr / (p @ Ap)
        x = x + alpha * p
        r = r - alpha * Ap
        rr_new = r @ r
        p = r + (rr_new / rr) * p
        rr = rr_new
    return x, used


def fisher_vector_product(kl_fn: Callable[[torch.Tensor], torch.Tensor], theta: torch.Tensor,
                          v: torch.Tensor, damping: float = 0.0) -> torch.Tensor:
    r"""$(F+\text{damping}\,I)v$ with $F=\nabla^2_\theta \bar D_{KL}$ at ``theta``, by double backprop."""
    th = theta.detach().requires_grad_(True)
    (g,) = torch.autograd.grad(kl_fn(th), th, create_graph=True)
    (hv,) = torch.autograd.grad((g.reshape(-1) * v).sum(), th)
    return hv.reshape(-1) + damping * v


@dataclass
class TRPOInfo:
    step_fraction: float  # 1.0 = full step, 0.5**k after k backtracks, 0 = rejected
    mean_kl: float
    max_kl: float
    surrogate_gain: float
    fvp_calls: int
    direction: torch.Tensor


def trpo_step(theta_old: torch.Tensor, rho_old: torch.Tensor, adv_old: torch.Tensor, max_kl_delta: float,
              cg_iters: int = 10, damping: float = 0.0, backtrack_coef: float = 0.5,
              max_backtracks: int = 10,
              logits_fn: Callable[[torch.Tensor], torch.Tensor] | None = None) -> tuple[torch.Tensor, TRPOInfo]:
    """One TRPO update of the policy parameters ``theta_old`` (see the module docstring).

    ``logits_fn`` maps parameters to the ``[S, A]`` logit table (default: the parameters *are* the
    table, a tabular policy; pass e.g. ``lambda th: phi @ th`` for a log-linear policy with shared
    features). ``rho_old``/``adv_old``: visitation and advantages of the old policy.
    """
    if max_kl_delta <= 0:
        raise ValueError("max_kl_delta must be positive")
    f = (lambda t: t) if logits_fn is None else logits_fn
    theta_old = theta_old.detach()
    shape = theta_old.shape
    z_old = f(theta_old).detach()
    if z_old.shape != adv_old.shape or z_old.shape[0] != rho_old.shape[0]:
        raise ValueError(f"logits {tuple(z_old.shape)}, advantages {tuple(adv_old.shape)} and visitation "
                         f"{tuple(rho_old.shape)} do not match")

    def surr(t: torch.Tensor) -> torch.Tensor:
        return surrogate(f(t), z_old, rho_old, adv_old)

    def kl_fn(t: torch.Tensor) -> torch.Tensor:
        return mean_kl(z_old, f(t), rho_old)

    th = theta_old.clone().requires_grad_(True)
    (g,) = torch.autograd.grad(surr(th), th)
    g = g.reshape(-1)
    fvp = lambda v: fisher_vector_product(lambda t: kl_fn(t.reshape(shape)), theta_old.reshape(-1), v, damping)  # noqa: E731
    x, used = conjugate_gradient(fvp, g, cg_iters)
    xFx = x @ fvp(x)
    used += 1
    full = torch.sqrt(2 * max_kl_delta / xFx.clamp_min(1e-30)) * x
    base = float(surr(theta_old))
    frac = 1.0
    for _ in range(max_backtracks):
        cand = theta_old + (frac * full).reshape(shape)
        gain = float(surr(cand)) - base
        kl = float(kl_fn(cand))
        if kl <= max_kl_delta and gain > 0:
            return cand.detach(), TRPOInfo(frac, kl, float(max_kl(z_old, f(cand))), gain, used, x)
        frac *= backtrack_coef
    return theta_old.clone(), TRPOInfo(0.0, 0.0, 0.0, 0.0, used, x)
