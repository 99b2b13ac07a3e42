"""Compute-optimal model size from a fitted scaling law (Chinchilla, Hoffmann et al. 2022, Approach 3).

The parametric loss (Hoffmann et al. §3.3, Eq. 2)

    L(N, D) = E + A / N^α + B / D^β

minimised under the budget C = 6·N·D (Eq. 4) gives (their Eq. 10, Appendix D.2)

    N_opt(C) = G · (C/6)^a,   D_opt(C) = G⁻¹ · (C/6)^b,   G = (αA / (βB))^(1/(α+β)),   a = β/(α+β), b = α/(α+β).

Two sets of coefficients: the paper's as printed (E = 1.69, A = 406.4, B = 410.7, α = 0.34, β = 0.28) and
Besiroglu et al.'s 2024 refit of the same data (E = 1.8172, A = 482.01, B = 2085.43, α = 0.3478,
β = 0.3658), who show the printed values are rounded and the fit stopped early, so that they disagree
with the paper's Approaches 1 and 2 (a ≈ b ≈ 0.5, about 20 tokens per parameter).

``inference_aware_optimum`` adds serving cost (Sardana & Frankle 2023): reach a target loss with the least
6·N·D + 2·N·D_inference, which favours smaller models trained on more tokens.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class LossFit:
    E: float
    A: float
    B: float
    alpha: float
    beta: float
    source: str

    def loss(self, n: float, d: float) -> float:
        """E + A/N^α + B/D^β."""
        return self.E + self.A / n ** self.alpha + self.B / d ** self.beta

    @property
    def a(self) -> float:
        """Exponent of N_opt in C."""
        return self.beta / (self.alpha + self.beta)

    @property
    def b(self) -> float:
        """Exponent of D_opt in C."""
        return self.alpha / (self.alpha + self.beta)

    def compute_optimal(self, c: float) -> tuple[float, float]:
        """(N_opt, D_opt) for a budget of c FLOPs, C = 6ND."""
        g = (self.alpha * self.A / (self.beta * self.B)) ** (1 / (self.alpha + self.beta))
        n = g * (c / 6) ** self.a
        return n, c / (6 * n)

    def tokens_per_parameter(self, c: float) -> float:
        n, d = self.compute_optimal(c)
        return d / n

    def tokens_for_loss(self, n: float, target: float) -> float:
        """The D at which a model of n parameters reaches ``target`` (inf if it never does)."""
        rest = target - self.E - self.A / n ** self.alpha
        return math.inf if rest <= 0 else (self.B / rest) ** (1 / self.beta)


HOFFMANN_2022 = LossFit(1.69, 406.4, 410.7, 0.34, 0.28,
                        "Hoffmann et al. 2022, §3.3 and Appendix D.2 (Approach 3, as printed)")
BESIROGLU_2024 = LossFit(1.8172, 482.01, 2085.43, 0.3478, 0.3658,
                         "Besiroglu et al. 2024, Chinchilla Scaling: A Replication Attempt, §3 (re-estimated parameters)")

# Kaplan et al. 2020, §6.1 (Eq. 6.1 and Figure 14): N_opt ∝ C^0.73, and with B ∝ C^0.24, S ∝ C^0.03, D ∝ C^0.27
KAPLAN_N_EXPONENT, KAPLAN_D_EXPONENT = 0.73, 0.27

# Hoffmann et al. 2022, Table 3 (Approach 1 projections): (parameters, FLOPs, tokens)
CHINCHILLA_TABLE3 = [(400e6, 1.92e19, 8.0e9), (1e9, 1.21e20, 20.2e9), (10e9, 1.23e22, 205.1e9),
                     (67e9, 5.76e23, 1.5e12), (175e9, 3.85e24, 3.7e12), (280e9, 9.90e24, 5.9e12),
                     (520e9, 3.43e25, 11.0e12), (1e12, 1.27e26, 21.2e12), (10e12, 1.30e28, 216.2e12)]


def inference_aware_optimum(fit: LossFit, target: float, inference_tokens: float,
                            n_grid: tuple[float, float, int] = (1e8, 1e13, 4000)) -> tuple[float, float, float]:
    """(N, D, total FLOPs) reaching loss ``target`` with the least 6·N·D + 2·N·inference_tokens,
    by a search over log-spaced N (D is then fixed by the loss)."""
    lo, hi, steps = n_grid
    best = (math.inf, math.nan, math.nan)
    for i in range(steps + 1):
        n = lo * (hi / lo) ** (i / steps)
        d = fit.tokens_for_loss(n, target)
        cost = 6 * n * d + 2 * n * inference_tokens
        if cost < best[0]:
            best = (cost, n, d)
    return best[1], best[2], best[0]
