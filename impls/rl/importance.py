r"""Importance sampling (IS) and the divergences that govern it.

Identity (needs $\mu(x)>0$ wherever $\pi(x)f(x)\neq0$):
$$E_{x\sim\pi}[f(x)] = E_{x\sim\mu}\Big[\tfrac{\pi(x)}{\mu(x)}f(x)\Big].$$
The weight $w=\pi/\mu$ has $E_\mu[w]=1$ and
$$\mathrm{Var}_\mu[w] = E_\mu[w^2]-1 = \chi^2(\pi\,\|\,\mu)=\sum_x \frac{\pi(x)^2}{\mu(x)}-1,$$
which is not proportional to KL or TV; by Jensen $\mathrm{KL}(\pi\|\mu)\le\log(1+\chi^2(\pi\|\mu))$.
Kish's effective sample size of $N$ weights: $\mathrm{ESS}=(\sum w)^2/\sum w^2\approx N/(1+\chi^2)$.
"""

from __future__ import annotations

import torch


def is_weights(logp_target: torch.Tensor, logp_behavior: torch.Tensor) -> torch.Tensor:
    r"""$w=\exp(\log\pi-\log\mu)$, computed in fp32 (fp64 kept)."""
    if logp_target.shape != logp_behavior.shape:
        raise ValueError(f"shape mismatch {tuple(logp_target.shape)} vs {tuple(logp_behavior.shape)}")
    dt = torch.promote_types(torch.promote_types(logp_target.dtype, logp_behavior.dtype), torch.float32)
    return torch.exp(logp_target.to(dt) - logp_behavior.to(dt))


def is_estimate(
    f: torch.Tensor, logp_target: torch.Tensor, logp_behavior: torch.Tensor, self_normalised: bool = False
) -> torch.Tensor:
    r"""Estimate $E_\pi[f]$ from samples $x_i\sim\mu$: $\frac1N\sum_i w_i f_i$ (unbiased), or
    $\sum_i w_i f_i/\sum_i w_i$ (self-normalised: biased, consistent)."""
    w = is_weights(logp_target, logp_behavior)
    f = f.to(w.dtype)
    return (w * f).sum() / w.sum() if self_normalised else (w * f).mean()


def _check_dist(p: torch.Tensor, q: torch.Tensor) -> None:
    if p.shape != q.shape:
        raise ValueError(f"distributions differ in shape: {tuple(p.shape)} vs {tuple(q.shape)}")


def chi2_divergence(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    r"""$\chi^2(p\|q)=\sum_x p(x)^2/q(x)-1$ over the last dim; $+\infty$ if $q=0<p$ somewhere."""
    _check_dist(p, q)
    p, q = p.double(), q.double()
    term = torch.where(p > 0, p**2 / q, torch.zeros_like(p))
    return term.sum(-1) - 1.0


def kl_divergence(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    r"""$\mathrm{KL}(p\|q)=\sum_x p\log(p/q)$ over the last dim."""
    _check_dist(p, q)
    p, q = p.double(), q.double()
    return torch.where(p > 0, p * (torch.log(p) - torch.log(q)), torch.zeros_like(p)).sum(-1)


def tv_distance(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    r"""$\mathrm{TV}(p,q)=\tfrac12\sum_x|p-q|$."""
    _check_dist(p, q)
    return 0.5 * (p.double() - q.double()).abs().sum(-1)


def weight_variance(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    r"""$\mathrm{Var}_{x\sim q}[p(x)/q(x)]$ computed directly from its definition (second oracle for $\chi^2$)."""
    _check_dist(p, q)
    p, q = p.double(), q.double()
    supp = q > 0
    w = torch.where(supp, p / torch.where(supp, q, torch.ones_like(q)), torch.zeros_like(p))
    mean = (q * w).sum(-1)
    var = (q * (w - mean.unsqueeze(-1)) ** 2).sum(-1)
    return var  # equals chi2(p||q) only when q covers the support of p


def effective_sample_size(w: torch.Tensor) -> torch.Tensor:
    r"""Kish ESS $=(\sum_i w_i)^2/\sum_i w_i^2$ over the last dim."""
    w = w.double()
    return w.sum(-1) ** 2 / (w**2).sum(-1)
