"""KL(pi || pi_ref) estimators k1, k2, k3: values and gradients, settled by exact enumeration
over small categoricals (fp64) and autograd of the exact expected loss.

Naming: KL(pi || pi_ref) is the reverse (mode-seeking) KL the RLHF objective penalises;
KL(pi_ref || pi) is the forward (mass-covering) KL."""

from __future__ import annotations

import math

import pytest
import sympy as sp
import torch
from torch.distributions import Categorical, kl_divergence

from impls.rl.kl import KL_PENALTIES, kl_estimate, kl_full, kl_penalty
from verifiers.katas import kl_estimate as kata

F64 = torch.float64


def _pair(seed: int, k: int = 6, scale: float = 1.0):
    g = torch.Generator().manual_seed(seed)
    theta = torch.randn(k, generator=g, dtype=torch.float64) * scale
    theta_ref = torch.randn(k, generator=g, dtype=torch.float64) * scale
    return theta, theta_ref


def _expect(p: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    return (p * values).sum()


@pytest.mark.claim("kl.k1.unbiased-can-be-negative")
def test_k1_unbiased_but_negative(evidence):
    kata.prop_k1_k3_unbiased(kl_estimate)
    worst = 0.0
    for seed in range(20):
        theta, theta_ref = _pair(seed)
        p, q = torch.softmax(theta, -1), torch.softmax(theta_ref, -1)
        k1 = kl_estimate(p.log(), q.log(), "k1")
        exact = kl_divergence(Categorical(probs=p), Categorical(probs=q))
        worst = max(worst, abs(float(_expect(p, k1) - exact)))
        assert bool((k1 < 0).any()), "a token with pi < pi_ref must give a negative k1"
    assert worst < 1e-12
    theta, theta_ref = _pair(0)
    p, q = torch.softmax(theta, -1), torch.softmax(theta_ref, -1)
    k1 = kl_estimate(p.log(), q.log(), "k1")
    i = int(torch.argmin(k1))
    evidence["max_abs_bias"] = worst
    evidence["counterexample"] = {"pi(a)": float(p[i]), "pi_ref(a)": float(q[i]), "k1(a)": float(k1[i])}


@pytest.mark.claim("kl.k3.unbiased-nonnegative")
def test_k3_unbiased_nonnegative_full_support_only(evidence):
    # never negative: f(x) = x - 1 - log x has f(1) = 0, f'(1) = 0, f'' = 1/x^2 > 0 on x > 0 (sympy)
    x = sp.symbols("x", positive=True)
    f = x - 1 - sp.log(x)
    assert f.subs(x, 1) == 0 and sp.diff(f, x).subs(x, 1) == 0
    assert sp.simplify(sp.diff(f, x, 2) - 1 / x**2) == 0
    kata.prop_k2_k3_nonnegative(kl_estimate)
    kata.prop_k3_exact_for_small_log_ratios(kl_estimate)
    kata.prop_k1_k3_unbiased(kl_estimate)
    # never negative in fp32 either, where it matters most: log-ratios ~ 1e-3 (exp(x) - 1 would cancel)
    g = torch.Generator().manual_seed(5)
    lr32 = (torch.rand(100_000, generator=g) * 2e-3 - 1e-3).float()
    zero = torch.zeros_like(lr32)
    k3_32 = kl_estimate(lr32, zero, "k3")
    naive = torch.exp(-lr32) - 1 + lr32  # the same formula with exp(x) - 1 instead of expm1
    want = torch.expm1(-lr32.double()) + lr32.double()
    big = lr32.abs() >= 1e-4  # below that even x^2/2 is under fp32's resolution of expm1(-x) ~ -x
    rel_err = float(((k3_32.double() - want).abs() / want)[big].max())
    neg_frac_naive = float((naive < 0).float().mean())
    assert bool((k3_32 >= 0).all()) and rel_err < 2e-3 and neg_frac_naive > 0.05, (rel_err, neg_frac_naive)
    evidence["fp32_log_ratio_within_1e-3"] = {"negative_fraction_expm1": float((k3_32 < 0).float().mean()),
                                              "negative_fraction_exp_minus_1": neg_frac_naive,
                                              "max_rel_error_expm1_vs_fp64": rel_err}
    # the condition the claim leaves out: pi_ref must put no mass where pi has none
    p = torch.tensor([0.5, 0.5, 0.0], dtype=F64)
    q = torch.tensor([0.4, 0.3, 0.3], dtype=F64)
    support = p > 0
    k3 = kl_estimate(p[support].log(), q[support].log(), "k3")
    e_k3 = float(_expect(p[support], k3))
    exact = float((p[support] * (p[support] / q[support]).log()).sum())
    missing = float(q[~support].sum())
    assert abs(e_k3 - (exact - missing)) < 1e-12 and e_k3 < exact - 0.1
    evidence["counterexample"] = {"pi": p.tolist(), "pi_ref": q.tolist(), "E[k3]": e_k3, "KL": exact,
                                  "bias": e_k3 - exact}


@pytest.mark.claim("kl.k2.biased-low-variance")
def test_k2_biased_lower_variance_near_ref(evidence):
    kata.prop_closed_forms(kl_estimate)  # k2 = (log pi/pi_ref)^2 / 2 token by token
    kata.prop_k2_k3_nonnegative(kl_estimate)
    kata.prop_batched_shape(kl_estimate)  # [B, T] in, [B, T] out, every kind
    ratios, biases = [], []
    for seed in range(20):
        theta, theta_ref = _pair(seed, scale=0.3)  # pi close to pi_ref
        p, q = torch.softmax(theta, -1), torch.softmax(theta_ref, -1)
        exact = float(kl_divergence(Categorical(probs=p), Categorical(probs=q)))
        k1 = kl_estimate(p.log(), q.log(), "k1")
        k2 = kl_estimate(p.log(), q.log(), "k2")
        var = lambda k: float(_expect(p, (k - _expect(p, k)) ** 2))  # noqa: E731
        biases.append(float(_expect(p, k2)) - exact)
        ratios.append(var(k2) / var(k1))
    assert all(abs(b) > 1e-9 for b in biases), "k2 should be biased"
    assert max(ratios) < 0.5, ratios
    evidence["max_relative_variance_k2_over_k1"] = max(ratios)
    evidence["bias_range"] = [min(biases), max(biases)]


def _expected_pathwise_grad(theta, theta_ref, kind):
    """E_{a~pi}[grad_theta k(a)] with the sample a held fixed (no score-function term)."""
    th = theta.clone().requires_grad_(True)
    logp = torch.log_softmax(th, -1)
    logq = torch.log_softmax(theta_ref, -1)
    k = kl_estimate(logp, logq, kind)
    (logp.exp().detach() * k).sum().backward()
    return th.grad


def _grad_of(fn, theta):
    th = theta.clone().requires_grad_(True)
    fn(th).backward()
    return th.grad


def _kl_reverse(th, theta_ref):  # KL(pi || pi_ref): the reverse KL, the one RLHF penalises
    logp, logq = torch.log_softmax(th, -1), torch.log_softmax(theta_ref, -1)
    return (logp.exp() * (logp - logq)).sum()


def _kl_forward(th, theta_ref):  # KL(pi_ref || pi): the forward KL
    logp, logq = torch.log_softmax(th, -1), torch.log_softmax(theta_ref, -1)
    return (logq.exp() * (logq - logp)).sum()


@pytest.mark.claim("kl.k3-loss.gradient-is-forward-kl")
def test_k3_as_loss_gives_forward_kl_gradient(evidence):
    worst_rev_gap, worst_fwd_err = 0.0, 0.0
    for seed in range(10):
        theta, theta_ref = _pair(seed)
        g = _expected_pathwise_grad(theta, theta_ref, "k3")
        g_rev = _grad_of(lambda t: _kl_reverse(t, theta_ref), theta)  # what the penalty should give
        g_fwd = _grad_of(lambda t: _kl_forward(t, theta_ref), theta)  # what k3 gives
        worst_fwd_err = max(worst_fwd_err, float((g - g_fwd).abs().max()))
        worst_rev_gap = max(worst_rev_gap, float((g - g_rev).abs().max()))
    assert worst_fwd_err < 1e-12
    assert worst_rev_gap > 1e-2
    # near pi_ref the two gradients agree to first order: the relative gap shrinks in proportion to the distance
    rel = {}
    for scale in (0.1, 0.01, 0.001):
        gaps = []
        for seed in range(10):
            theta, theta_ref = _pair(seed, scale=scale)
            g = _expected_pathwise_grad(theta, theta_ref, "k3")
            g_rev = _grad_of(lambda t: _kl_reverse(t, theta_ref), theta)
            gaps.append(float((g - g_rev).norm() / g_rev.norm()))
        rel[scale] = max(gaps)
    assert rel[0.01] < rel[0.1] / 5 and rel[0.001] < rel[0.01] / 5 and rel[0.001] < 1e-2, rel
    evidence["relative_gap_to_reverse_kl_grad_by_logit_scale"] = rel
    theta, theta_ref = _pair(0)
    evidence["counterexample"] = {
        "theta": theta.tolist(), "theta_ref": theta_ref.tolist(),
        "E[grad k3]": _expected_pathwise_grad(theta, theta_ref, "k3").tolist(),
        "grad KL(pi||pi_ref)": _grad_of(lambda t: _kl_reverse(t, theta_ref), theta).tolist(),
    }
    evidence["max_abs_error_vs_forward_kl_grad"] = worst_fwd_err


@pytest.mark.claim("kl.k2-loss.gradient-unbiased")
def test_k2_as_loss_gives_reverse_kl_gradient(evidence):
    worst = 0.0
    for seed in range(10):
        theta, theta_ref = _pair(seed)
        g = _expected_pathwise_grad(theta, theta_ref, "k2")
        g_rev = _grad_of(lambda t: _kl_reverse(t, theta_ref), theta)
        assert float(g_rev.abs().max()) > 1e-3
        worst = max(worst, float((g - g_rev).abs().max()))
    assert worst < 1e-12
    evidence["max_abs_error"] = worst


@pytest.mark.claim("kl.k1-loss.zero-gradient")
def test_k1_as_loss_has_zero_expected_gradient(evidence):
    worst, kl_grad = 0.0, 0.0
    for seed in range(10):
        theta, theta_ref = _pair(seed)
        worst = max(worst, float(_expected_pathwise_grad(theta, theta_ref, "k1").abs().max()))
        kl_grad = max(kl_grad, float(_grad_of(lambda t: _kl_reverse(t, theta_ref), theta).abs().max()))
    assert worst < 1e-12 and kl_grad > 1e-2
    evidence["max_abs_expected_grad"] = worst
    evidence["max_abs_true_kl_grad"] = kl_grad


# ---------------------------------------------------------------- gradient-correct variants
_EXACT = {  # which kinds give exactly grad KL(pi || pi_ref) in expectation, on- and off-policy
    "on": {"k2", "k1+", "k2+", "k3+", "abs+", "k1+is", "k2+is", "k3+is", "abs+is", "k3-is", "full"},
    "off": {"k1+is", "k2+is", "k3+is", "abs+is", "k3-is", "full"},
}


def _expected_penalty_grad(theta, theta_ref, theta_old, kind):
    """E_{a ~ pi_old}[grad_theta term(a)] by enumeration over the vocabulary (pi_old = sg[pi] on-policy)."""
    th = theta.clone().requires_grad_(True)
    logp = torch.log_softmax(th, -1)
    logq = torch.log_softmax(theta_ref, -1)
    if kind == "full":
        (g,) = torch.autograd.grad(kl_full(th, theta_ref), th)
        return g
    if theta_old is None:
        weights, term = logp.exp().detach(), kl_penalty(logp, logq, kind)
    else:
        logo = torch.log_softmax(theta_old, -1)
        weights, term = logo.exp(), kl_penalty(logp, logq, kind, logp_old=logo)
    (g,) = torch.autograd.grad((weights * term).sum(), th)
    return g


@pytest.mark.claim("kl.gradient-variants-exact")
def test_each_kl_term_gradient_against_the_exact_kl_gradient(evidence):
    """Every KL kind of the registry, on 8-token vocabularies, on-policy and with samples from an older policy:
    the expected gradient by enumeration against autograd of the exact KL(pi || pi_ref). The straight-through
    (verl k3+), IS-weighted (OpenRLHF unbiased_gradient), r*k3 (TRL bias correction) and full-vocabulary
    kinds are exact where the table says so; plain k1/k3/abs never are; plain k2 and "+" only on-policy."""
    table = {}
    for setting in ("on", "off"):
        for kind in [*KL_PENALTIES, "full"]:
            worst = 0.0
            for seed in range(8):
                theta, theta_ref = _pair(100 + seed, k=8)
                theta_old = None if setting == "on" else theta + 0.6 * _pair(200 + seed, k=8)[0]
                g = _expected_penalty_grad(theta, theta_ref, theta_old, kind)
                exact = _grad_of(lambda t: _kl_reverse(t, theta_ref), theta)
                worst = max(worst, float((g - exact).abs().max() / exact.abs().max()))
            table[f"{setting}-policy {kind}"] = worst
            if kind in _EXACT[setting]:
                assert worst < 1e-12, (setting, kind, worst)
            else:
                assert worst > 1e-2, (setting, kind, worst)
    evidence["max_relative_gradient_error_vs_exact_KL(pi||pi_ref)"] = table
    # values: "+" kinds keep their base estimator's value; k3-is has value r*k3 (= k3 on-policy)
    theta, theta_ref = _pair(3, k=8)
    lp, lq = torch.log_softmax(theta, -1), torch.log_softmax(theta_ref, -1)
    for base in ("k1", "k2", "k3", "abs"):
        assert torch.allclose(kl_penalty(lp, lq, base + "+"), kl_estimate(lp, lq, base), atol=0, rtol=0)
        assert torch.allclose(kl_penalty(lp, lq, base + "+is"), kl_estimate(lp, lq, base), atol=0, rtol=0)
    assert torch.allclose(kl_penalty(lp, lq, "k3-is"), kl_estimate(lp, lq, "k3"), atol=1e-15)
    assert abs(float(kl_full(theta, theta_ref)) - float(_kl_reverse(theta, theta_ref))) < 1e-15


@pytest.mark.claim("kl.gradient-variants-exact")
def test_openrlhf_importance_weight_is_capped_at_10(evidence):
    """The "+is" kinds weight k2's gradient by sg[min(pi / pi_old, 10)]: per token, d/dlogp of the penalty is
    w (log pi - log pi_ref); a token 20x likelier now than under pi_old gets weight 10, not 20."""
    lp = torch.tensor([math.log(0.4), math.log(0.02), math.log(0.3)], dtype=torch.float64, requires_grad=True)
    lq = torch.log(torch.tensor([0.1, 0.3, 0.3], dtype=torch.float64))
    lo = lp.detach() - torch.log(torch.tensor([20.0, 0.5, 3.0], dtype=torch.float64))  # pi / pi_old = 20, 0.5, 3
    (g,) = torch.autograd.grad(kl_penalty(lp, lq, "k2+is", logp_old=lo).sum(), lp)
    want = torch.tensor([10.0, 0.5, 3.0], dtype=torch.float64) * (lp.detach() - lq)
    assert torch.allclose(g, want, atol=1e-12), (g, want)
    evidence["weights"] = {"pi/pi_old": [20.0, 0.5, 3.0], "weight_used": [10.0, 0.5, 3.0]}


@pytest.mark.claim("kl.clamp-kills-gradient")
def test_value_clamp_zeroes_the_gradient_where_it_binds(evidence):
    """verl and OpenRLHF clamp the k3 value to [-10, 10]: a token with pi_ref/pi = e^3 (k3 = e^3 - 4 = 16.1)
    then gets exactly zero KL gradient, while the unclamped k3 pulls it with d k3 / d log pi = 1 - e^3 = -19.1;
    the straight-through "k3+" keeps k2's gradient (log pi - log pi_ref = -3) whatever the clamp."""
    lp = torch.tensor([-4.0, -1.0 - 1e-3, -1.5], dtype=F64, requires_grad=True)
    lq = torch.tensor([-1.0, -1.0, -1.5 + 2.0], dtype=F64)  # log rho = 3, 1e-3, 2
    out = {}
    for label, fn in {
        "k3": lambda: kl_estimate(lp, lq, "k3"),
        "k3 clamped to 10 (verl/OpenRLHF)": lambda: kl_estimate(lp, lq, "k3", clamp=10.0),
        "k3+ clamped to 10": lambda: kl_penalty(lp, lq, "k3+", clamp=10.0),
    }.items():
        (g,) = torch.autograd.grad(fn().sum(), lp)
        out[label] = {"value": fn().detach().tolist(), "d/dlogpi": g.tolist()}
    import math
    assert math.isclose(out["k3"]["value"][0], math.exp(3) - 4, rel_tol=1e-12)
    assert out["k3 clamped to 10 (verl/OpenRLHF)"]["value"][0] == 10.0
    assert out["k3 clamped to 10 (verl/OpenRLHF)"]["d/dlogpi"][0] == 0.0
    assert math.isclose(out["k3"]["d/dlogpi"][0], 1 - math.exp(3), rel_tol=1e-12)
    assert math.isclose(out["k3+ clamped to 10"]["d/dlogpi"][0], -3.0, rel_tol=1e-12)
    # below the clamp nothing changes
    assert out["k3"]["d/dlogpi"][1:] == out["k3 clamped to 10 (verl/OpenRLHF)"]["d/dlogpi"][1:]
    # the smallest pi_ref/pi at which k3 reaches 10: rho - 1 - log rho = 10
    lo, hi = 1.0, 100.0
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if mid - 1 - math.log(mid) < 10 else (lo, mid)
    evidence.quote("pi_ref/pi where the k3 clamp starts", quoted=13.6, measured=lo, digits=1)
    evidence.quote("d k3 / d log pi at log rho = 3", quoted=-19.1, measured=out["k3"]["d/dlogpi"][0], digits=1)
    evidence.quote("k3 at log rho = 3", quoted=16.1, measured=out["k3"]["value"][0], digits=1)
    evidence["tokens"] = out
