"""KL-coefficient controllers for RLHF with a KL penalty to a reference policy.

Two published rules, each with ``.value`` (the current coefficient beta) and
``update(observed_kl, n_steps)`` (call once per PPO iteration with the
measured KL(pi || pi_ref) per sequence and the number of samples it covered):

* :class:`AdaptiveKLController` -- the PPO paper's adaptive penalty
  (Schulman et al. 2017, §4): with ``d = observed_kl``,

      d < d_targ / 1.5  ->  beta <- beta / 2
      d > d_targ * 1.5  ->  beta <- beta * 2

  and beta is left alone inside the band.

* :class:`ProportionalKLController` -- Ziegler et al. 2019, §2.2: a clipped
  proportional controller

      e_t = clip((KL_t - KL_targ) / KL_targ, -0.2, 0.2)
      beta_{t+1} = beta_t * (1 + K_beta * e_t),   K_beta = n_steps / horizon

  (their code uses ``horizon = 10000`` and updates with ``n_steps`` = batch
  size, so ``K_beta`` is about 0.1 per update, the paper's figure).

:class:`FixedKLController` keeps beta constant (the "fixed beta" baseline).
"""

from __future__ import annotations

import math

__all__ = ["AdaptiveKLController", "ProportionalKLController", "FixedKLController"]


def _as_float(x) -> float:
    """Accept a Python number, a numpy scalar or a 0-d torch tensor."""
    v = float(x.item()) if hasattr(x, "item") else float(x)
    if not math.isfinite(v):
        raise ValueError(f"observed_kl must be finite, got {v}")
    return v


class FixedKLController:
    """beta stays at its initial value."""

    def __init__(self, init_kl_coef: float):
        if init_kl_coef < 0:
            raise ValueError(f"init_kl_coef must be >= 0, got {init_kl_coef}")
        self.value = float(init_kl_coef)

    def update(self, observed_kl, n_steps: int = 1) -> float:
        _as_float(observed_kl)
        return self.value


class AdaptiveKLController:
    """PPO paper §4 rule: halve beta if KL < d_targ/1.5, double it if KL > 1.5*d_targ.

    ``factor`` (2) and ``tolerance`` (1.5) are the paper's heuristic constants.
    ``n_steps`` is accepted for interface compatibility and ignored: the rule
    is applied once per call (once per policy update in the paper).
    """

    def __init__(self, init_kl_coef: float, target: float, factor: float = 2.0, tolerance: float = 1.5):
        if init_kl_coef <= 0 or target <= 0:
            raise ValueError(f"init_kl_coef and target must be > 0, got {init_kl_coef}, {target}")
        if factor <= 1 or tolerance <= 1:
            raise ValueError(f"factor and tolerance must be > 1, got {factor}, {tolerance}")
        self.value = float(init_kl_coef)
        self.target = float(target)
        self.factor = float(factor)
        self.tolerance = float(tolerance)

    def update(self, observed_kl, n_steps: int = 1) -> float:
        d = _as_float(observed_kl)
        if d < self.target / self.tolerance:
            self.value /= self.factor
        elif d > self.target * self.tolerance:
            self.value *= self.factor
        return self.value


class ProportionalKLController:
    """Ziegler et al. 2019: beta <- beta * (1 + clip(KL/KL_targ - 1, -0.2, 0.2) * n_steps/horizon)."""

    def __init__(self, init_kl_coef: float, target: float, horizon: float = 10_000, clip: float = 0.2):
        if init_kl_coef <= 0 or target <= 0 or horizon <= 0 or clip <= 0:
            raise ValueError(
                f"init_kl_coef, target, horizon, clip must be > 0, got {init_kl_coef}, {target}, {horizon}, {clip}"
            )
        self.value = float(init_kl_coef)
        self.target = float(target)
        self.horizon = float(horizon)
        self.clip = float(clip)

    def update(self, observed_kl, n_steps: int = 1) -> float:
        if n_steps < 0:
            raise ValueError(f"n_steps must be >= 0, got {n_steps}")
        e = min(max(_as_float(observed_kl) / self.target - 1.0, -self.clip), self.clip)
        mult = 1.0 + e * n_steps / self.horizon
        if mult <= 0:
            raise ValueError(f"n_steps/horizon = {n_steps / self.horizon} is so large that beta would turn non-positive")
        self.value *= mult
        return self.value
