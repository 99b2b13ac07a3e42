r"""Per-token estimators of $\mathrm{KL}(\pi\,\|\,\pi_{ref})$ from tokens sampled from $\pi$ (Schulman 2020).

With $\log\rho = \log\pi_{ref}(a) - \log\pi(a)$:
- ``k1`` $= -\log\rho$: unbiased, high variance, can be negative;
- ``k2`` $= \tfrac12(\log\rho)^2$: biased, low variance, $\ge 0$;
- ``k3`` $= \rho - 1 - \log\rho$: unbiased, $\ge 0$, low variance when $\pi\approx\pi_{ref}$.
Computed in >= fp32.
"""

from __future__ import annotations

import torch

from impls.rl.masking import reduce_dtype

__all__ = ["kl_estimate", "KL_ESTIMATORS"]


def _k1(log_ratio: torch.Tensor) -> torch.Tensor:  # log_ratio = log pi - log pi_ref
    return log_ratio


def _k2(log_ratio: torch.Tensor) -> torch.Tensor:
    return 0.5 * log_ratio**2


def _k3(log_ratio: torch.Tensor) -> torch.Tensor:
    log_rho = -log_ratio
    return torch.expm1(log_rho) - log_rho


KL_ESTIMATORS = {"k1": _k1, "k2": _k2, "k3": _k3}


def kl_estimate(logp: torch.Tensor, logp_ref: torch.Tensor, kind: str = "k1") -> torch.Tensor:
    """Per-token estimate (same shape as ``logp``) of KL(pi || pi_ref) for tokens a ~ pi."""
    if logp.shape != logp_ref.shape:
        raise ValueError(f"logp shape {tuple(logp.shape)} != logp_ref shape {tuple(logp_ref.shape)}")
    try:
        fn = KL_ESTIMATORS[kind]
    except KeyError:
        raise ValueError(f"unknown KL estimator {kind!r}; known: {sorted(KL_ESTIMATORS)}") from None
    dt = reduce_dtype(torch.promote_types(logp.dtype, logp_ref.dtype))
    return fn(logp.to(dt) - logp_ref.to(dt))
