"""Policy-gradient foundations, checked by exact enumeration of every trajectory of small MDPs.

Oracles: the gradient of the enumerated J(θ) by autograd, and the hand-derived tabular score
∇_θ log softmax(θ_s)_a = e_s ⊗ (e_a − π_s) for the estimators (never autograd of the estimator itself).
"""

from __future__ import annotations

import itertools

import pytest
import sympy as sp
import torch
from hypothesis import given
from hypothesis import strategies as st

from impls.rl.grpo import grpo_advantages, rloo_advantages
from impls.rl.policy_gradient import reinforce_loss, reinforce_weights
from impls.rl.toy_envs import SoftmaxBandit, TabularMDP

DT = torch.float64


def tabular_score(logits: torch.Tensor, states: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
    """Hand-derived ∇_θ log π(a_t|s_t) for tabular softmax, shape [N, H, S, A]."""
    S, A = logits.shape
    pi = torch.softmax(logits, -1)
    es = torch.nn.functional.one_hot(states, S).to(DT)  # [N,H,S]
    ea = torch.nn.functional.one_hot(actions, A).to(DT)  # [N,H,A]
    return es[..., :, None] * (ea - pi[states])[..., None, :]


def estimator(M: TabularMDP, logits, tr, mode, baseline=None, discount_weight=False):
    mask = torch.ones_like(tr.rewards)
    psi = reinforce_weights(tr.rewards, mask, M.gamma, mode=mode, baseline=baseline, discount_weight=discount_weight)
    return (psi[..., None, None] * tabular_score(logits, tr.states, tr.actions)).sum(1)  # [N,S,A]


def mdp_and_policy(seed=0, gamma=1.0, S=3, A=2, H=3):
    M = TabularMDP.random(S, A, H, gamma=gamma, seed=seed)
    g = torch.Generator().manual_seed(seed + 100)
    return M, torch.randn(S, A, generator=g, dtype=DT)


@pytest.mark.claim("pg.score.dynamics-cancel")
def test_dynamics_cancel_in_score_not_in_expectation(evidence):
    M, th = mdp_and_policy(seed=1)
    tr = M.trajectories()
    # (1) score of the whole trajectory (dynamics included) = sum of policy scores
    worst = 0.0
    for i in range(len(tr.states)):
        p = th.clone().requires_grad_(True)
        full = tr.env_logp[i] + M.policy_logp(p, tr.states[i : i + 1], tr.actions[i : i + 1]).sum()
        (g_full,) = torch.autograd.grad(full, p)
        g_pol = tabular_score(th, tr.states[i : i + 1], tr.actions[i : i + 1]).sum((0, 1))
        worst = max(worst, float((g_full - g_pol).abs().max()))
    assert worst < 1e-12, f"score of log p(τ) differs from Σ∇logπ by {worst}"
    # (2) but the gradient itself depends on the dynamics: same policy, other P -> other ∇J
    M2 = TabularMDP(M.p0, M.P.flip(-1), M.R, M.H, M.gamma)
    g1, g2 = M.exact_grad(th), M2.exact_grad(th)
    diff = float((g1 - g2).norm())
    assert diff > 0.05, f"∇J did not change with the dynamics: {g1} vs {g2}"
    # (3) the estimator is unbiased in both worlds, using only sampled (s, a, r)
    for MM, g in ((M, g1), (M2, g2)):
        t2 = MM.trajectories()
        mean, _ = MM.estimator_moments(th, estimator(MM, th, t2, "total"))
        assert torch.allclose(mean, g, atol=1e-10), (mean, g)
    evidence.quote("gradient norm, original dynamics", quoted=0.63, measured=float(g1.norm()), digits=2)
    evidence.quote("gradient norm, other dynamics", quoted=0.53, measured=float(g2.norm()), digits=2)
    evidence.update(score_max_abs_diff=worst, grad_norm_P=float(g1.norm()), grad_norm_flippedP=float(g2.norm()),
                    grad_diff_norm=diff)


@pytest.mark.claim("pg.reinforce.unbiased-high-variance")
@pytest.mark.claim("pg.reinforce.reward-to-go")
def test_unbiased_and_variance(evidence):
    rows = []
    for seed in range(3):
        M, th = mdp_and_policy(seed=seed)
        tr = M.trajectories()
        g = M.exact_grad(th)
        m_tot, v_tot = M.estimator_moments(th, estimator(M, th, tr, "total"))
        m_rtg, v_rtg = M.estimator_moments(th, estimator(M, th, tr, "reward-to-go"))
        err = max(float((m_tot - g).abs().max()), float((m_rtg - g).abs().max()))
        assert err < 1e-10, f"seed {seed}: E[ĝ] != ∇J (max err {err})"
        rel = float(v_tot / g.norm() ** 2)
        rows.append({"seed": seed, "max_bias": err, "var_total": float(v_tot), "var_rtg": float(v_rtg),
                     "grad_norm_sq": float(g.norm() ** 2), "relative_var_one_sample": rel})
        assert rel > 1.0, f"seed {seed}: one-sample variance {float(v_tot)} not large vs |∇J|^2 {float(g.norm()**2)}"
    # few samples: how often does a 4-sample estimate point the wrong way?
    M, th = mdp_and_policy(seed=0)
    g = M.exact_grad(th)
    gen = torch.Generator().manual_seed(0)
    wrong = 0
    for _ in range(500):
        tr = M.sample(th, 4, gen)
        est = estimator(M, th, tr, "total").mean(0)
        wrong += int((est * g).sum() < 0)
    evidence.update(per_seed=rows, frac_wrong_direction_N4=wrong / 500)
    assert wrong / 500 > 0.05


@pytest.mark.claim("pg.reinforce.model-free")
def test_monte_carlo_from_black_box_samples(evidence):
    M, th = mdp_and_policy(seed=2)
    g = M.exact_grad(th)
    gen = torch.Generator().manual_seed(1)
    tr = M.sample(th, 20000, gen)  # the learner sees only (s, a, r)
    # use the batched loss: -∇L is the sample mean of ĝ
    mask = torch.ones_like(tr.rewards)
    psi = reinforce_weights(tr.rewards, mask, 1.0, mode="reward-to-go")
    p = th.clone().requires_grad_(True)
    loss = reinforce_loss(M.policy_logp(p, tr.states, tr.actions), psi, mask)
    (gl,) = torch.autograd.grad(loss, p)
    est = -gl
    per = estimator(M, th, tr, "reward-to-go")
    se = per.std(0) / len(per) ** 0.5
    z = ((est - g).abs() / se).max()
    assert float(z) < 5, f"MC estimate {est} vs exact {g}: max z = {float(z)}"
    assert torch.allclose(est, per.mean(0), atol=1e-10)
    evidence.update(n_samples=20000, max_z=float(z), exact=g.flatten().tolist(), estimate=est.flatten().tolist())


@pytest.mark.claim("pg.reinforce.discounted-gradient")
def test_discounting_needs_gamma_t(evidence):
    out = {}
    gammas = (1.0, 0.5)
    for gamma in gammas:
        M, th = mdp_and_policy(seed=3, gamma=gamma)
        tr = M.trajectories()
        g = M.exact_grad(th)
        plain, _ = M.estimator_moments(th, estimator(M, th, tr, "reward-to-go"))
        fixed, _ = M.estimator_moments(th, estimator(M, th, tr, "reward-to-go", discount_weight=True))
        out[str(gamma)] = {"err_without_gamma_t": float((plain - g).norm()), "err_with_gamma_t": float((fixed - g).norm()),
                           "grad_norm": float(g.norm())}
        assert float((fixed - g).abs().max()) < 1e-10
    assert out["1.0"]["err_without_gamma_t"] < 1e-10
    assert out["0.5"]["err_without_gamma_t"] > 0.05 * out["0.5"]["grad_norm"], out
    evidence.quote("gamma of the discounted case", quoted=0.5, measured=gammas[1], digits=1)
    evidence.quote("error without gamma^t (gamma=0.5)", quoted=0.22, measured=out["0.5"]["err_without_gamma_t"], digits=2)
    evidence.quote("true gradient norm (gamma=0.5)", quoted=0.24, measured=out["0.5"]["grad_norm"], digits=2)
    evidence["by_gamma"] = out
    evidence["counterexample"] = {"gamma": 0.5, **out["0.5"]}


def conditional_Q(M: TabularMDP, th, tr):
    """Q_t(s,a) = E[G_t | s_t=s, a_t=a] from the enumerated trajectories (no Bellman equation)."""
    p = M.traj_probs(th, tr)
    disc = M.gamma ** torch.arange(M.H, dtype=DT)
    Q = torch.full((M.H, M.S, M.A), float("nan"), dtype=DT)
    for t in range(M.H):
        Gt = (tr.rewards[:, t:] * disc[: M.H - t]).sum(1)
        for s in range(M.S):
            for a in range(M.A):
                sel = (tr.states[:, t] == s) & (tr.actions[:, t] == a)
                if p[sel].sum() > 0:
                    Q[t, s, a] = (p[sel] * Gt[sel]).sum() / p[sel].sum()
    return Q


@pytest.mark.claim("pg.actor-critic.td-error-advantage")
def test_td_error_is_advantage_only_with_true_V(evidence):
    M, th = mdp_and_policy(seed=4, gamma=0.9)
    tr = M.trajectories()
    dp = M.dp(th)
    Q = conditional_Q(M, th, tr)
    p = M.traj_probs(th, tr)

    def mean_delta(V):
        out = torch.zeros(M.H, M.S, M.A, dtype=DT)
        for t in range(M.H):
            vnext = V[t + 1][tr.states[:, t + 1]] if t + 1 < M.H else torch.zeros(len(p), dtype=DT)
            delta = tr.rewards[:, t] + M.gamma * vnext - V[t][tr.states[:, t]]
            for s in range(M.S):
                for a in range(M.A):
                    sel = (tr.states[:, t] == s) & (tr.actions[:, t] == a)
                    out[t, s, a] = (p[sel] * delta[sel]).sum() / p[sel].sum()
        return out

    A_true = Q - dp["V"][: M.H, :, None]
    err_true = float((mean_delta(dp["V"]) - A_true).abs().max())
    Vbad = dp["V"].clone()
    Vbad[1] += 0.5  # a critic that is off by 0.5 at t=1
    err_bad = float((mean_delta(Vbad) - A_true).abs().max())
    # MC advantage G_t - b(s_t): unbiased for Q - b with ANY state baseline
    assert err_true < 1e-10, err_true
    assert err_bad > 0.1, err_bad
    # the squared-error critic target: argmin_v E[(G_t - v)^2 | s_t] is V_t(s_t)
    disc = M.gamma ** torch.arange(M.H, dtype=DT)
    G0 = (tr.rewards * disc).sum(1)
    for s in range(M.S):
        sel = tr.states[:, 0] == s
        v_ls = (p[sel] * G0[sel]).sum() / p[sel].sum()
        assert abs(float(v_ls - dp["V"][0, s])) < 1e-10
    # ... while G_t - V(s_t) keeps the policy gradient unbiased even with the wrong critic
    steps = torch.arange(M.H)[None, :].expand_as(tr.states)
    g_exact = M.exact_grad(th)
    mc_bias = {}
    for name, VV in (("true_V", dp["V"]), ("V_off_by_half", Vbad)):
        m_b, _ = M.estimator_moments(th, estimator(M, th, tr, "reward-to-go", baseline=VV[steps, tr.states],
                                                   discount_weight=True))
        mc_bias[name] = float((m_b - g_exact).abs().max())
        assert mc_bias[name] < 1e-10, (name, mc_bias[name])
    evidence.quote("bias of the TD error with a critic 0.5 off", quoted=0.5, measured=err_bad, digits=9)
    evidence.update(max_err_true_V=err_true, max_err_critic_off_by_half=err_bad,
                    mc_advantage_policy_gradient_bias=mc_bias)


@pytest.mark.claim("pg.reinforce.baseline-variance")
@pytest.mark.claim("pg.reinforce.optimal-baseline")
def test_baseline_can_increase_variance(evidence):
    # two-armed bandit, one logit θ, π(arm1)=σ(θ); score s1 = 1-p, s2 = -p (sympy oracle)
    p, r1, r2, b = sp.symbols("p r1 r2 b", real=True)
    s1, s2 = 1 - p, -p
    Eg = p * r1 * s1 + (1 - p) * r2 * s2
    var = p * ((r1 - b) * s1) ** 2 + (1 - p) * ((r2 - b) * s2) ** 2 - Eg**2
    bstar = sp.solve(sp.diff(var, b), b)[0]
    assert sp.simplify(bstar - ((1 - p) * r1 + p * r2)) == 0
    Es2G = p * s1**2 * r1 + (1 - p) * s2**2 * r2
    Es2 = p * s1**2 + (1 - p) * s2**2
    assert sp.simplify(bstar - Es2G / Es2) == 0  # b* = E[s^2 G] / E[s^2]
    # exactly when a constant baseline helps: Var(b) - Var(0) = E[s^2] b (b - 2 b*), i.e. only for b between 0 and 2b*
    assert sp.simplify(var - var.subs(b, 0) - Es2 * b * (b - 2 * bstar)) == 0
    vals = {p: sp.Rational(1, 10), r1: 1, r2: -1}
    V = sp.Rational(1, 10) * 1 + sp.Rational(9, 10) * (-1)
    var0, varV, varstar = (float(var.subs(vals).subs(b, x)) for x in (0, V, bstar.subs(vals)))
    # independent numeric check by enumeration with torch autograd scores
    th = torch.tensor([float(sp.log(sp.Rational(1, 9))), 0.0], dtype=DT)  # softmax -> (0.1, 0.9)
    band = SoftmaxBandit(torch.tensor([1.0, -1.0], dtype=DT))
    pi = torch.softmax(th, 0)

    def var_num(bv):
        gs = []
        for a in range(2):
            q = th.clone().requires_grad_(True)
            (g,) = torch.autograd.grad(torch.log_softmax(q, 0)[a], q)
            gs.append((band.means[a] - bv) * g)
        gs = torch.stack(gs)
        m = (pi[:, None] * gs).sum(0)
        return float((pi * (gs**2).sum(-1)).sum() - (m**2).sum())

    # 2-logit parameterisation: variance is twice the 1-logit one (score on both logits)
    assert abs(var_num(0.0) - 2 * var0) < 1e-9 and abs(var_num(float(V)) - 2 * varV) < 1e-9
    assert varV > var0 > varstar
    evidence.quote("pi(arm 1)", quoted=0.1, measured=float(pi[0]), digits=12)
    evidence.quote("pi(arm 2)", quoted=0.9, measured=float(pi[1]), digits=12)
    evidence.quote("variance without a baseline", quoted=0.0576, measured=var0, digits=4)
    evidence.quote("variance with b = V", quoted=0.2304, measured=varV, digits=4)
    evidence["counterexample"] = {"pi": [0.1, 0.9], "rewards": [1, -1], "V": float(V), "var_no_baseline": var0,
                                  "var_baseline_V": varV, "optimal_baseline": float(bstar.subs(vals)),
                                  "var_optimal_baseline": varstar}
    # In the MDPs of the other tests V(s_t) does help:
    M, th2 = mdp_and_policy(seed=0, gamma=1.0)
    tr = M.trajectories()
    V_t = M.dp(th2)["V"]
    base = V_t[torch.arange(M.H)[None, :].expand_as(tr.states), tr.states]
    _, v_rtg = M.estimator_moments(th2, estimator(M, th2, tr, "reward-to-go"))
    m_b, v_b = M.estimator_moments(th2, estimator(M, th2, tr, "reward-to-go", baseline=base))
    assert torch.allclose(m_b, M.exact_grad(th2), atol=1e-10)  # still unbiased
    evidence.update(mdp_var_rtg=float(v_rtg), mdp_var_rtg_minus_V=float(v_b))


@pytest.mark.claim("pg.grpo.group-baseline-is-estimate")
def test_group_mean_baseline_shrinks_gradient(evidence):
    band = SoftmaxBandit(torch.tensor([1.0, 0.3, -0.5], dtype=DT))
    th = torch.tensor([0.2, -0.1, 0.4], dtype=DT)
    pi = torch.softmax(th, 0)
    q = th.clone().requires_grad_(True)
    (g_true,) = torch.autograd.grad(band.J(q), q)
    eye = torch.eye(3, dtype=DT)
    out = {}
    for G in (2, 3, 4):
        m_grpo = torch.zeros(3, dtype=DT)
        m_rloo = torch.zeros(3, dtype=DT)
        for arms in itertools.product(range(3), repeat=G):  # every group of G samples
            a = torch.tensor(arms)
            prob = pi[a].prod()
            r = band.means[a]
            score = eye[a] - pi  # ∇ log π(a) for softmax
            A_g = grpo_advantages(r, G, scale_by_std=False)
            A_l = rloo_advantages(r, G)
            m_grpo += prob * (A_g[:, None] * score).mean(0)
            m_rloo += prob * (A_l[:, None] * score).mean(0)
        ratio = float((m_grpo @ g_true) / (g_true @ g_true))
        out[G] = {"grpo_mean_over_true": ratio, "rloo_max_err": float((m_rloo - g_true).abs().max())}
        assert abs(ratio - (1 - 1 / G)) < 1e-10 and torch.allclose(m_grpo, (1 - 1 / G) * g_true, atol=1e-12)
        assert out[G]["rloo_max_err"] < 1e-12
    evidence["by_group_size"] = {str(k): v for k, v in out.items()}


@given(st.lists(st.lists(st.floats(-3, 3), min_size=1, max_size=6), min_size=1, max_size=4),
       st.sampled_from([1.0, 0.9, 0.5]), st.sampled_from(["total", "reward-to-go"]), st.booleans())
def _weights_match_python_loop(seqs, gamma, mode, discount_weight):
    T = max(len(s) for s in seqs)
    rewards = torch.zeros(len(seqs), T, dtype=DT)
    mask = torch.zeros(len(seqs), T, dtype=DT)
    for b, s in enumerate(seqs):  # right padding
        rewards[b, : len(s)] = torch.tensor(s, dtype=DT)
        mask[b, : len(s)] = 1
    rewards = rewards + 7.0 * (1 - mask)  # garbage on padding must be ignored
    got = reinforce_weights(rewards, mask, gamma, mode=mode, discount_weight=discount_weight)
    for b, s in enumerate(seqs):
        for t in range(T):
            if t >= len(s):
                want = 0.0
            else:
                start = 0 if mode == "total" else t
                want = sum(gamma ** (k - start) * s[k] for k in range(start, len(s)))
                if discount_weight:
                    want *= gamma**t
            assert abs(float(got[b, t]) - want) < 1e-9, f"seqs={seqs} gamma={gamma} mode={mode} b={b} t={t}: want {want}, got {float(got[b, t])}"


@pytest.mark.claim("pg.reinforce.reward-to-go")
def test_batched_weights_match_loop_oracle(evidence):
    """The batched, masked weights equal a plain per-sequence loop (padding ignored)."""
    _weights_match_python_loop()
    with pytest.raises(ValueError):
        reinforce_weights(torch.zeros(2, 3), torch.ones(3, 2))
    evidence["property"] = "reinforce_weights == per-sequence Python loop on random right-padded batches"
