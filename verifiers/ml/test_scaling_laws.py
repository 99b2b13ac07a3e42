"""Chinchilla's compute-optimal N and D from the fitted law, and the 20-tokens-per-parameter rule against it.

Oracles: sympy for the optimum's closed form (the derivative along C = 6ND vanishes there), a brute-force
scan of the loss along the budget, and the paper's own Table 3 (Approach 1 projections).
"""

from __future__ import annotations

import math

import pytest
import sympy as sp

from impls.ml.scaling import BESIROGLU_2024, CHINCHILLA_TABLE3, HOFFMANN_2022, inference_aware_optimum

BUDGETS = (1e21, 5.76e23, 1e24, 3.8e25)      # a small run, Gopher/Chinchilla's budget, 1e24, Llama 3 405B's


def _scan_optimum(fit, c: float) -> float:
    """argmin over N of L(N, C/6N), by a fine log-grid scan then golden-section refinement."""
    lo, hi = 1e6, 1e15
    grid = [lo * (hi / lo) ** (i / 4000) for i in range(4001)]
    i = min(range(len(grid)), key=lambda j: fit.loss(grid[j], c / (6 * grid[j])))
    a, b = math.log(grid[max(i - 1, 0)]), math.log(grid[min(i + 1, 4000)])
    phi = (math.sqrt(5) - 1) / 2
    f = lambda x: fit.loss(math.exp(x), c / (6 * math.exp(x)))  # noqa: E731
    for _ in range(200):
        x1, x2 = b - phi * (b - a), a + phi * (b - a)
        a, b = (a, x2) if f(x1) < f(x2) else (x1, b)
    return math.exp((a + b) / 2)


@pytest.mark.claim("scaling.chinchilla-20-tokens")
def test_closed_form_optimum(evidence):
    # symbolic: on C = 6ND, dL/dN = 0 exactly at N = G (C/6)^(β/(α+β))
    n, c, e, a_, b_, al, be = sp.symbols("N C E A B alpha beta", positive=True)
    loss = e + a_ / n ** al + b_ / (c / (6 * n)) ** be
    g = (al * a_ / (be * b_)) ** (1 / (al + be))
    n_opt = g * (c / 6) ** (be / (al + be))
    vals = {e: 1.69, a_: 406.4, b_: 410.7, al: sp.Rational(34, 100), be: sp.Rational(28, 100), c: 5.76e23}
    assert abs(float(sp.diff(loss, n).subs(n, n_opt).subs(vals))) < 1e-25
    for fit in (HOFFMANN_2022, BESIROGLU_2024):
        for budget in BUDGETS:
            closed, _ = fit.compute_optimal(budget)
            assert closed == pytest.approx(_scan_optimum(fit, budget), rel=1e-6)


@pytest.mark.claim("scaling.chinchilla-20-tokens")
def test_twenty_tokens_per_parameter_against_the_fits(evidence):
    # Approach 1 (Table 3): about 20 tokens per parameter at every size, and C = 6ND within rounding
    ratios = [d / n for n, c, d in CHINCHILLA_TABLE3]
    assert all(19.5 < r < 23 for r in ratios)
    evidence.quote("tokens per parameter in Table 3, mean", quoted=20, measured=sum(ratios) / len(ratios), abs=2)
    assert all(abs(c / (6 * n * d) - 1) < 0.05 for n, c, d in CHINCHILLA_TABLE3)
    # Approach 3 as printed: N ∝ C^0.45, D ∝ C^0.55, and the ratio drifts far from 20
    printed = {c: HOFFMANN_2022.tokens_per_parameter(c) for c in BUDGETS}
    refit = {c: BESIROGLU_2024.tokens_per_parameter(c) for c in BUDGETS}
    evidence.quote("exponent a of N_opt, printed fit", quoted=0.45, measured=HOFFMANN_2022.a, abs=0.005)
    evidence.quote("exponent b of D_opt, printed fit", quoted=0.55, measured=HOFFMANN_2022.b, abs=0.005)
    evidence.quote("tokens per parameter at 5.76e23 FLOPs, printed fit", quoted=93, measured=printed[5.76e23], abs=0.5)
    evidence.quote("tokens per parameter at 5.76e23 FLOPs, refit", quoted=18.4, measured=refit[5.76e23], abs=0.05)
    assert printed[1e21] < printed[5.76e23] < printed[3.8e25]          # grows with compute: N and D not equal
    assert all(15 < r < 23 for r in refit.values())                   # the refit agrees with Approaches 1 and 2
    evidence["tokens per parameter"] = {"Table 3 (Approach 1)": ratios,
                                        "printed Approach 3": {f"{c:.3g}": r for c, r in printed.items()},
                                        "Besiroglu refit": {f"{c:.3g}": r for c, r in refit.items()}}


@pytest.mark.claim("scaling.past-20-not-wasteful")
def test_training_past_twenty_tokens_per_parameter(evidence):
    fit = BESIROGLU_2024
    # the loss keeps falling well past 20 tokens per parameter (an 8B model: 160B tokens vs 15T)
    assert fit.loss(8e9, 15e12) < fit.loss(8e9, 160e9) - 0.1
    # counting inference, reaching the loss of the 1e24-FLOP compute-optimal model costs least with a smaller
    # model trained on more tokens
    n0, d0 = fit.compute_optimal(1e24)
    target = fit.loss(n0, d0)
    n_free, d_free, _ = inference_aware_optimum(fit, target, 0.0)
    assert n_free == pytest.approx(n0, rel=0.01)                       # without inference: Chinchilla again
    evidence.quote("tokens per parameter when nothing is served", quoted=20, measured=d_free / n_free, abs=2)
    n_inf, d_inf, cost = inference_aware_optimum(fit, target, 1e13)    # serving ten trillion tokens
    saved = 1 - cost / (6 * n0 * d0 + 2 * n0 * 1e13)
    assert n_inf < 0.6 * n0 and d_inf / n_inf > 80
    evidence.quote("tokens per parameter of the cheapest model when 1e13 tokens are served", quoted=90,
                   measured=d_inf / n_inf, abs=1)
    evidence.quote("total compute saved against the Chinchilla-optimal model, %", quoted=24, measured=100 * saved,
                   abs=1)
    evidence["Llama 3 8B tokens per parameter"] = 15e12 / 8.03e9
