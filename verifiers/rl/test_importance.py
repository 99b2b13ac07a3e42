"""Importance sampling in policy gradients: identity, weight variance, what the PPO ratio does and does not do."""

from __future__ import annotations

import math

import pytest
import sympy as sp
import torch
from hypothesis import given
from hypothesis import strategies as st

from impls.rl.importance import (
    chi2_divergence,
    effective_sample_size,
    is_estimate,
    kl_divergence,
    tv_distance,
    weight_variance,
)
from impls.rl.ppo import ppo_clip_loss
from impls.rl.toy_envs import SoftmaxBandit, TabularMDP

DT = torch.float64


# ---------------------------------------------------------------- a2-19 identity and its support condition
@pytest.mark.claim("pg.is.identity-support")
def test_is_identity_needs_support(evidence):
    p1, p2, m1, m2, f1, f2, f3 = sp.symbols("p1 p2 m1 m2 f1 f2 f3", positive=True)
    pi = [p1, p2, 1 - p1 - p2]
    mu = [m1, m2, 1 - m1 - m2]
    f = [f1, f2, f3]
    lhs = sum(p * x for p, x in zip(pi, f))
    rhs = sum(m * (p / m) * x for p, m, x in zip(pi, mu, f))
    assert sp.simplify(lhs - rhs) == 0
    # support gap: mu never samples the third outcome
    pi_n = torch.tensor([1 / 3, 1 / 3, 1 / 3], dtype=DT)
    mu_n = torch.tensor([0.5, 0.5, 0.0], dtype=DT)
    f_n = torch.tensor([0.0, 0.0, 1.0], dtype=DT)
    truth = float((pi_n * f_n).sum())
    g = torch.Generator().manual_seed(0)
    x = torch.multinomial(mu_n, 100_000, replacement=True, generator=g)
    est = float(is_estimate(f_n[x], torch.log(pi_n[x]), torch.log(mu_n[x])))
    assert abs(est - truth) > 0.3, (est, truth)
    # with full support the same estimator converges
    mu_ok = torch.tensor([0.45, 0.45, 0.10], dtype=DT)
    x = torch.multinomial(mu_ok, 200_000, replacement=True, generator=g)
    est_ok = float(is_estimate(f_n[x], torch.log(pi_n[x]), torch.log(mu_ok[x])))
    assert abs(est_ok - truth) < 0.02, (est_ok, truth)
    evidence["counterexample"] = {"pi": pi_n.tolist(), "mu": mu_n.tolist(), "f": f_n.tolist(), "E_pi_f": truth,
                                  "is_estimate_from_mu": est}
    evidence["full_support_estimate"] = est_ok


# ---------------------------------------------------------------- a2-21 variance of the weight is chi^2
@pytest.mark.claim("pg.is.weight-variance-chi2")
@pytest.mark.claim("pg.is.ess-chi2")
def test_weight_variance_is_chi2_not_proportional(evidence):
    # (1) equal TV, very different variance (Bernoulli pairs)
    pairs = [((0.6, 0.4), (0.5, 0.5)), ((0.1001, 0.8999), (0.0001, 0.9999))]
    rows = []
    for p, q in pairs:
        p, q = torch.tensor(p, dtype=DT), torch.tensor(q, dtype=DT)
        rows.append({"pi": p.tolist(), "mu": q.tolist(), "tv": float(tv_distance(p, q)), "kl": float(kl_divergence(p, q)),
                     "chi2": float(chi2_divergence(p, q)), "var_w": float(weight_variance(p, q))})
        assert abs(rows[-1]["chi2"] - rows[-1]["var_w"]) < 1e-9
    assert abs(rows[0]["tv"] - rows[1]["tv"]) < 1e-12
    assert rows[1]["var_w"] / rows[0]["var_w"] > 1000
    evidence.quote("TV of both pairs", quoted=0.1, measured=rows[0]["tv"], digits=1)
    evidence.quote("variance ratio at equal TV", quoted=2500, measured=rows[1]["var_w"] / rows[0]["var_w"], abs=50)
    assert rows[1]["var_w"] / rows[1]["kl"] > 50 * rows[0]["var_w"] / rows[0]["kl"]
    # (2) Gaussians N(m,1) vs N(0,1): chi2 = e^{m^2}-1 (exponential), KL = m^2/2 (quadratic)
    x, m = sp.symbols("x m", real=True)
    npdf = lambda mean, var: sp.exp(-((x - mean) ** 2) / (2 * var)) / sp.sqrt(2 * sp.pi * var)  # noqa: E731
    chi2_gauss = sp.simplify(sp.integrate(npdf(m, 1) ** 2 / npdf(0, 1), (x, -sp.oo, sp.oo)) - 1)
    assert sp.simplify(chi2_gauss - (sp.exp(m**2) - 1)) == 0
    # ... and KL(N(m,1) || N(0,1)) = m^2/2, integrated rather than quoted (log-ratio = m x - m^2/2)
    log_ratio_gauss = sp.simplify(sp.expand_log(sp.log(npdf(m, 1) / npdf(0, 1)), force=True))
    kl_gauss = sp.simplify(sp.integrate(npdf(m, 1) * log_ratio_gauss, (x, -sp.oo, sp.oo)))
    assert sp.simplify(kl_gauss - m**2 / 2) == 0, kl_gauss
    # (3) infinite variance with finite KL: pi = N(0, 2), mu = N(0, 1)
    second_moment = sp.integrate(npdf(0, 2) ** 2 / npdf(0, 1), (x, -sp.oo, sp.oo))
    kl_finite = float(sp.Rational(1, 2) * (2 - 1 - sp.log(2)))
    assert second_moment == sp.oo
    log_ratio_var = sp.simplify(sp.expand_log(sp.log(npdf(0, 2) / npdf(0, 1)), force=True))
    kl_int = sp.integrate(npdf(0, 2) * log_ratio_var, (x, -sp.oo, sp.oo))
    assert kl_int.is_finite and abs(float(kl_int) - kl_finite) < 1e-12, kl_int
    # (4) Monte Carlo: the empirical variance of w under mu matches chi2
    p = torch.tensor([0.5, 0.3, 0.15, 0.05], dtype=DT)
    q = torch.tensor([0.25, 0.25, 0.25, 0.25], dtype=DT)
    g = torch.Generator().manual_seed(0)
    xs = torch.multinomial(q, 400_000, replacement=True, generator=g)
    w = p[xs] / q[xs]
    assert abs(float(w.var()) - float(chi2_divergence(p, q))) < 0.01
    ess = float(effective_sample_size(w)) / len(w)
    assert abs(ess - 1 / (1 + float(chi2_divergence(p, q)))) < 0.01
    evidence["counterexample"] = {"equal_tv_pairs": rows, "ratio_of_variances": rows[1]["var_w"] / rows[0]["var_w"]}
    evidence["gaussian"] = {"chi2": "exp(m^2)-1", "kl": "m^2/2",
                            "infinite_variance_example": {"pi": "N(0,2)", "mu": "N(0,1)", "kl": kl_finite}}
    evidence["mc_ess_fraction"] = ess


@given(st.lists(st.floats(0.01, 1.0), min_size=2, max_size=6), st.randoms(use_true_random=False))
def _kl_le_log1p_chi2(ws, rnd):
    p = torch.tensor(ws, dtype=DT)
    p = p / p.sum()
    q = torch.tensor([rnd.uniform(0.01, 1.0) for _ in ws], dtype=DT)
    q = q / q.sum()
    kl, chi2 = float(kl_divergence(p, q)), float(chi2_divergence(p, q))
    assert kl <= float(torch.log1p(torch.tensor(chi2))) + 1e-12, f"p={p.tolist()} q={q.tolist()} kl={kl} chi2={chi2}"


@pytest.mark.claim("pg.is.weight-variance-chi2")
def test_kl_bounded_by_log1p_chi2(evidence):
    _kl_le_log1p_chi2()
    evidence["property"] = "KL(pi||mu) <= log(1 + chi2(pi||mu)) on random discrete pairs"


# ---------------------------------------------------------------- a2-22 / a2-23 / b3-14: what the ratio and clip do
def _grad_wrt_logp(logp_val, logp_old, adv, **kw):
    logp = torch.tensor(logp_val, dtype=DT)[None].requires_grad_(True)
    lo = torch.tensor(logp_old, dtype=DT)[None]
    A = torch.tensor(adv, dtype=DT)[None]
    mask = torch.ones_like(lo)
    loss, stats = ppo_clip_loss(logp, lo, A, mask, agg="token-mean", **kw)
    (g,) = torch.autograd.grad(loss, logp)
    return float(loss.detach()), g[0].tolist(), stats


@pytest.mark.claim("pg.is.ratio-not-credit-assignment")
def test_ratio_does_not_pick_tokens(evidence):
    # first minibatch: all ratios are 1, yet tokens get different gradients (from A)
    _, g1, _ = _grad_wrt_logp([-1.0, -2.0, -0.5, -1.5], [-1.0, -2.0, -0.5, -1.5], [1.0, 0.0, -1.0, 0.0])
    expect = [-1.0 / 4, 0.0, 1.0 / 4, 0.0]  # hand-derived: d(-rA)/dlogp = -rA, mean over 4 tokens
    assert max(abs(a - b) for a, b in zip(g1, expect)) < 1e-12, (g1, expect)
    # ratios far from 1 but all advantages 0: no token is adjusted
    _, g0, _ = _grad_wrt_logp([-1.0, -2.0, -0.5, -1.5], [-1.1, -1.8, -0.5, -1.3], [0.0, 0.0, 0.0, 0.0])
    assert all(v == 0.0 for v in g0), g0
    evidence["counterexample"] = {"ratio_all_one_grad": g1, "advantages": [1, 0, -1, 0],
                                  "ratios_not_one_zero_adv_grad": g0}


@pytest.mark.claim("pg.clip.gradient-zero-one-side")
def test_clip_gradient_depends_on_sign(evidence):
    eps = 0.2
    cases = {}
    for name, r, A in [("A>0,r<1-eps", 0.5, 1.0), ("A<0,r>1+eps", 1.5, -1.0), ("A>0,r>1+eps", 1.5, 1.0),
                       ("A<0,r<1-eps", 0.5, -1.0), ("A>0,inside", 1.1, 1.0)]:
        lp_old = -1.0
        loss, g, _ = _grad_wrt_logp([lp_old + math.log(r)], [lp_old], [A], clip_low=eps)
        cases[name] = {"ratio": r, "A": A, "loss": loss, "dloss_dlogp": g[0]}
    # hand-derived: outside the range on the "helpful" side -> 0; on the other side -> -r*A
    assert cases["A>0,r>1+eps"]["dloss_dlogp"] == 0.0 and cases["A<0,r<1-eps"]["dloss_dlogp"] == 0.0
    evidence.quote("gradient at A>0, r=0.5", quoted=-0.5, measured=cases["A>0,r<1-eps"]["dloss_dlogp"], digits=12)
    evidence.quote("gradient at A<0, r=1.5", quoted=1.5, measured=cases["A<0,r>1+eps"]["dloss_dlogp"], digits=12)
    evidence["counterexample"] = cases


@pytest.mark.claim("pg.is.clip-does-not-bound-ratio")
def test_clip_does_not_bound_ratio(evidence):
    r, A = 50.0, -1.0
    loss, g, stats = _grad_wrt_logp([math.log(r)], [0.0], [A], clip_low=0.2)
    assert abs(loss - r * 1.0) < 1e-9 and abs(g[0] - r) < 1e-9, (loss, g)  # -min(rA, clip(r)A) = 50
    loss_d, g_d, stats_d = _grad_wrt_logp([math.log(r)], [0.0], [A], clip_low=0.2, dual_clip=3.0)
    assert abs(loss_d - 3.0) < 1e-9 and g_d[0] == 0.0
    evidence["counterexample"] = {"ratio": r, "A": A, "loss": loss, "dloss_dlogp": g[0], "clip_frac": stats["clip_frac"],
                                  "with_dual_clip_3": {"loss": loss_d, "dloss_dlogp": g_d[0]}}


# ---------------------------------------------------------------- b3-13: unbiased per state, biased over states
@pytest.mark.claim("pg.is.surrogate-gradient-bias")
@pytest.mark.claim("pg.is.surrogate-first-order")
def test_ppo_surrogate_gradient_exact(evidence):
    M = TabularMDP.random(3, 2, 3, gamma=1.0, seed=7)
    g = torch.Generator().manual_seed(7)
    th_old = torch.randn(3, 2, generator=g, dtype=DT)
    dp_old = M.dp(th_old)
    A_old = dp_old["Q"] - dp_old["V"][: M.H, :, None]

    def surrogate(th):  # L_mu(θ) = Σ_t Σ_s d_t^μ(s) Σ_a μ(a|s) [π_θ(a|s)/μ(a|s)] A_t^μ(s,a)
        pi, mu = torch.softmax(th, -1), dp_old["pi"]
        return sum((dp_old["d"][t][:, None] * mu * (pi / mu) * A_old[t]).sum() for t in range(M.H))

    def grad(f, th):
        q = th.clone().requires_grad_(True)
        (gr,) = torch.autograd.grad(f(q), q)
        return gr

    rows = []
    for step in (0.0, 0.25, 0.5, 1.0):
        th = th_old + step * torch.tensor([[1.0, -1.0], [-0.5, 0.5], [0.8, 0.0]], dtype=DT)
        true_g = M.exact_grad(th)
        sur_g = grad(surrogate, th)
        # per-state IS with states and advantages of the *current* policy: exact (policy-gradient theorem)
        dp = M.dp(th)
        pi, mu = dp["pi"], dp_old["pi"]
        A_cur = dp["Q"] - dp["V"][: M.H, :, None]
        score = torch.eye(2, dtype=DT)[None, :, :] - pi[:, None, :]  # [S, a, a'] = ∇_{θ_s} log π(a|s)
        corr = torch.zeros_like(th)
        for t in range(M.H):
            w = dp["d"][t][:, None] * mu * (pi / mu) * A_cur[t]  # [S, A]
            corr += (w[:, :, None] * score).sum(1)
        rel = float((sur_g - true_g).norm() / true_g.norm())
        rows.append({"step": step, "kl_old_new_mean_over_states": float((mu * (torch.log(mu) - torch.log(pi))).sum(-1).mean()),
            "surrogate_rel_err": rel, "state_corrected_err": float((corr - true_g).abs().max())})
        assert rows[-1]["state_corrected_err"] < 1e-10
    assert rows[0]["surrogate_rel_err"] < 1e-10  # first-order match at θ = θ_old
    assert rows[-1]["surrogate_rel_err"] > 0.1, rows
    evidence.quote("surrogate gradient relative error", quoted=0.35, measured=rows[-1]["surrogate_rel_err"], digits=2)
    evidence.quote("KL old->new (mean over states)", quoted=0.18, measured=rows[-1]["kl_old_new_mean_over_states"],
                   digits=2)
    assert all(rows[i]["surrogate_rel_err"] <= rows[i + 1]["surrogate_rel_err"] + 1e-12 for i in range(len(rows) - 1))
    evidence["by_distance"] = rows
    evidence["counterexample"] = rows[-1]


# ---------------------------------------------------------------- a2-20: K epochs is not K-fold data efficiency
def _ppo_bandit_iters(K, lr, seed, target=0.95, max_iters=300, n=32):
    band = SoftmaxBandit(torch.linspace(0.0, 1.0, 10, dtype=DT), noise=0.5)
    th = torch.zeros(10, dtype=DT)
    gen = torch.Generator().manual_seed(seed)
    for it in range(1, max_iters + 1):
        pi_old = torch.softmax(th, 0)
        a = torch.multinomial(pi_old, n, replacement=True, generator=gen)
        r = band.pull(a, gen)
        adv = (r - r.mean())[None]
        lp_old = torch.log(pi_old[a])[None]
        mask = torch.ones_like(lp_old)
        for _ in range(K):
            q = th.clone().requires_grad_(True)
            loss, _ = ppo_clip_loss(torch.log_softmax(q, 0)[a][None], lp_old, adv, mask, clip_low=0.2)
            (gr,) = torch.autograd.grad(loss, q)
            th = th - lr * gr
        if float(band.J(th)) >= target:
            return it
    return max_iters + 1


@pytest.mark.claim("pg.is.k-epochs-not-k-fold")
def test_k_epochs_not_k_fold(evidence):
    lrs = (0.3, 1.0, 3.0, 10.0, 30.0)
    best = {}
    table = {}
    for K in (1, 4, 16):
        for lr in lrs:
            its = [_ppo_bandit_iters(K, lr, s) for s in range(3)]
            table[f"K={K},lr={lr}"] = sum(its) / 3
        best[K] = min(table[f"K={K},lr={lr}"] for lr in lrs)
    speedup = {K: best[1] / best[K] for K in best}
    evidence.update(batches_to_target_best_lr={str(k): v for k, v in best.items()},
                    speedup_vs_K1={str(k): v for k, v in speedup.items()}, table=table, target_J=0.95,
                    batch_size=32, clip=0.2, arms="10 arms, means linspace(0,1), reward noise std 0.5", seeds=3)
    assert best[1] <= 300, "K=1 never reached the target: experiment mis-set"
    assert speedup[4] < 4 and speedup[16] < 16 / 2, speedup
    evidence.quote("speed-up of K=4 over K=1", quoted=2.2, measured=speedup[4], digits=1)
    evidence.quote("speed-up of K=16 over K=1", quoted=3.2, measured=speedup[16], digits=1)
    evidence["counterexample"] = {"K": 16, "speedup": speedup[16]}
