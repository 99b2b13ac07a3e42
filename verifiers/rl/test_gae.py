"""GAE: closed form vs recursion, the lambda limits, and bias/variance measured exactly.

Bias and variance oracle: a small episodic MDP (2 states, 2 actions, horizon 4, termination with
probability 0.25 after every step, gamma = 1) whose trajectories are enumerated exactly (with their
probabilities), so the expected policy-gradient estimate E[sum_t grad log pi(a_t|s_t) A_t] and its
variance are computed without sampling noise, and compared with the true gradient of
J(theta) = E[sum_t r_t] obtained by autograd through exact dynamic programming.
"""

from __future__ import annotations


import pytest
import torch

import impls.rl.gae as G
from verifiers.katas import gae as kata

# --------------------------------------------------------------------------- closed form


@pytest.mark.claim("gae.closed-form-sum")
def test_recursion_equals_closed_form(evidence, device):
    kata.prop_matches_double_sum(G.gae)
    # second oracle: the matrix form A = M delta with M[t, k] = (gamma lam)^(k-t) for t <= k < L
    g = torch.Generator().manual_seed(0)
    B, T, gamma, lam = 5, 9, 0.97, 0.9
    r = torch.randn(B, T, generator=g, dtype=torch.float64)
    v = torch.randn(B, T, generator=g, dtype=torch.float64)
    lengths = [9, 7, 1, 0, 4]
    mask = torch.zeros(B, T, dtype=torch.float64)
    for i, n in enumerate(lengths):
        mask[i, :n] = 1
    adv, ret = G.gae(r.to(device), v.to(device), mask.to(device), gamma, lam)
    assert adv.device.type == device.type
    worst = 0.0
    for i, L in enumerate(lengths):
        if L == 0:
            assert adv[i].abs().max() == 0
            continue
        v_next = torch.cat([v[i, 1:L], torch.zeros(1, dtype=torch.float64)])
        delta = r[i, :L] + gamma * v_next - v[i, :L]
        k = torch.arange(L)
        M = torch.where(k[None, :] >= k[:, None], (gamma * lam) ** (k[None, :] - k[:, None]).double(), 0.0)
        want = M @ delta
        worst = max(worst, float((adv[i, :L].cpu() - want).abs().max()))
        assert torch.allclose(ret[i, :L].cpu(), want + v[i, :L], atol=1e-12)
    assert worst < 1e-12, worst
    evidence["max_abs_error_vs_matrix_form"] = worst
    evidence["lengths"] = lengths


@pytest.mark.claim("gae.padding-independent")
def test_padding_and_dtype(evidence, device):
    kata.prop_padding_ignored(G.gae)
    # bf16 inputs still accumulate in fp32
    g = torch.Generator().manual_seed(1)
    r = torch.randn(3, 50, generator=g)
    v = torch.randn(3, 50, generator=g)
    m = torch.ones(3, 50)
    a32, _ = G.gae(r.to(device), v.to(device), m.to(device), 1.0, 0.95)
    a16, _ = G.gae(r.to(device, torch.bfloat16), v.to(device, torch.bfloat16), m.to(device), 1.0, 0.95)
    ref, _ = G.gae(r.bfloat16().double(), v.bfloat16().double(), m.double(), 1.0, 0.95)
    assert a16.dtype == torch.float32
    err = float((a16.double().cpu() - ref).abs().max())
    assert err < 1e-4, err
    evidence["bf16_inputs_max_error_vs_fp64"] = err
    # rows are independent: one row alone gives the same result as in the batch
    single, _ = G.gae(r[1:2], v[1:2], m[1:2], 1.0, 0.95)
    assert torch.allclose(single, a32[1:2].cpu())


# --------------------------------------------------------------------------- exact MDP

H, S, K, P_TERM = 4, 2, 2, 0.25


def _mdp():
    g = torch.Generator().manual_seed(3)
    P = torch.softmax(2 * torch.randn(S, K, S, generator=g, dtype=torch.float64), -1)  # s' | s, a (if not ended)
    R = torch.randn(S, K, generator=g, dtype=torch.float64)
    theta = 0.5 * torch.randn(S, K, generator=g, dtype=torch.float64)
    offset = torch.randn(H, S, generator=g, dtype=torch.float64)  # error of a "learned" critic
    return P, R, theta, offset


def _exact_values(P, R, theta):
    """V_t(s) for t = 0..H-1 and J(theta) by backward induction (differentiable in theta)."""
    pi = torch.softmax(theta, -1)
    V = [None] * (H + 1)
    V[H] = torch.zeros(S, dtype=theta.dtype)
    for t in range(H - 1, -1, -1):
        Q = R + (1 - P_TERM) * torch.einsum("sat,t->sa", P, V[t + 1])
        V[t] = (pi * Q).sum(-1)
    rho0 = torch.full((S,), 1.0 / S, dtype=theta.dtype)
    return torch.stack(V[:H]), rho0 @ V[0]


def _trajectories(P, pi):
    """Every trajectory with its probability: states, actions, length."""
    out = []

    def rec(states, actions, prob):
        t = len(actions)
        s = states[-1]
        for a in range(K):
            pa = prob * float(pi[s, a])
            acts = actions + [a]
            if t + 1 == H:
                out.append((states, acts, pa))
                continue
            out.append((states, acts, pa * P_TERM))
            for s2 in range(S):
                rec(states + [s2], acts, pa * (1 - P_TERM) * float(P[s, a, s2]))

    for s0 in range(S):
        rec([s0], [], 1.0 / S)
    return out


def _estimator_stats(lam: float, use_exact_v: bool):
    P, R, theta, offset = _mdp()
    pi = torch.softmax(theta, -1)
    Vt, _ = _exact_values(P, R, theta)
    th = theta.clone().requires_grad_(True)
    _, J = _exact_values(P, R, th)
    (true_grad,) = torch.autograd.grad(J, th)
    V_used = Vt if use_exact_v else Vt + offset
    trajs = _trajectories(P, pi)
    N = len(trajs)
    rew = torch.zeros(N, H, dtype=torch.float64)
    val = torch.zeros(N, H, dtype=torch.float64)
    mask = torch.zeros(N, H, dtype=torch.float64)
    score = torch.zeros(N, H, S, K, dtype=torch.float64)
    prob = torch.tensor([p for *_, p in trajs], dtype=torch.float64)
    for n, (states, acts, _) in enumerate(trajs):
        for t, (s, a) in enumerate(zip(states, acts)):
            rew[n, t], val[n, t], mask[n, t] = R[s, a], V_used[t, s], 1.0
            score[n, t, s] = -pi[s]
            score[n, t, s, a] += 1.0  # grad_theta log softmax(theta[s])[a]
    adv, _ = G.gae(rew, val, mask, 1.0, lam)
    g = torch.einsum("nt,ntsk->nsk", adv, score).reshape(N, -1)
    mean = prob @ g
    var = float(prob @ ((g - mean) ** 2).sum(-1))
    bias = float((mean - true_grad.reshape(-1)).norm())
    return {"bias": bias, "variance": var, "true_grad_norm": float(true_grad.norm()), "n_trajectories": N, "prob_total": float(prob.sum())}


LAMS = [0.0, 0.5, 0.9, 0.95, 1.0]


def _table():
    return {f"lam={lam}": {"exact_V": _estimator_stats(lam, True), "wrong_V": _estimator_stats(lam, False)}
            for lam in LAMS}


@pytest.fixture(scope="module")
def bias_variance_table():
    return _table()


@pytest.mark.claim("gae.lambda0-td-bias-variance")
def test_lambda0(evidence, bias_variance_table):
    kata.prop_lambda_zero_is_td(G.gae)
    tab = bias_variance_table
    assert abs(tab["lam=0.0"]["exact_V"]["prob_total"] - 1) < 1e-12
    # bias comes only from the critic's error: none with the exact V, clearly some with a wrong one
    assert tab["lam=0.0"]["exact_V"]["bias"] < 1e-10
    assert tab["lam=0.0"]["wrong_V"]["bias"] > 0.05
    biases = [tab[f"lam={lam}"]["wrong_V"]["bias"] for lam in LAMS]
    assert all(x > y for x, y in zip(biases, biases[1:])), biases  # shrinks as lambda grows
    # lowest variance of the family
    assert tab["lam=0.0"]["exact_V"]["variance"] < tab["lam=1.0"]["exact_V"]["variance"]
    assert tab["lam=0.0"]["wrong_V"]["bias"] == max(v["wrong_V"]["bias"] for v in tab.values())
    # "shrinks monotonically to 0 as lambda grows": on a fine grid too, not only at the five tabulated values
    fine = [_estimator_stats(k / 20, False)["bias"] for k in range(21)]
    assert all(x > y for x, y in zip(fine, fine[1:])), fine
    assert fine[-1] < 1e-10 and abs(fine[0] - tab["lam=0.0"]["wrong_V"]["bias"]) < 1e-15
    evidence.quote("variance at lambda=0 (exact V)", quoted=1.70, measured=tab["lam=0.0"]["exact_V"]["variance"], digits=2)
    evidence.quote("variance at lambda=1 (exact V)", quoted=3.28, measured=tab["lam=1.0"]["exact_V"]["variance"], digits=2)
    evidence.quote("bias at lambda=0 with a wrong V", quoted=0.094, measured=tab["lam=0.0"]["wrong_V"]["bias"], digits=3)
    evidence["wrong_V_bias_lambda_0_to_1_step_0.05"] = fine
    evidence["bias_variance_by_lambda"] = tab
    evidence["mdp"] = f"{S} states, {K} actions, horizon {H}, P(terminate)={P_TERM}, gamma=1, seed 3"


@pytest.mark.claim("gae.lambda1-mc-bias-variance")
def test_lambda1(evidence, bias_variance_table):
    kata.prop_lambda_one_is_mc(G.gae)
    # G - V with the discounted reward-to-go computed independently
    g = torch.Generator().manual_seed(2)
    r, v = torch.randn(2, 6, generator=g, dtype=torch.float64), torch.randn(2, 6, generator=g, dtype=torch.float64)
    m = torch.tensor([[1.0] * 6, [1.0] * 3 + [0.0] * 3], dtype=torch.float64)
    adv, _ = G.gae(r, v, m, 0.9, 1.0)
    assert torch.allclose(adv, (G.discounted_returns(r, m, 0.9) - v) * m, atol=1e-12)
    lengths = [6, 3]
    mc = kata.oracle_mc_return(r.tolist(), lengths, 0.9)  # plain-Python reward-to-go, not the module's
    want = torch.tensor([[(mc[i][t] - float(v[i, t])) if t < lengths[i] else 0.0 for t in range(6)] for i in range(2)],
                        dtype=torch.float64)
    assert torch.allclose(adv, want, atol=1e-12), (adv, want)
    tab = bias_variance_table
    # unbiased whatever the critic: the baseline V(s_t) has zero-mean score-function term
    assert tab["lam=1.0"]["exact_V"]["bias"] < 1e-10
    assert tab["lam=1.0"]["wrong_V"]["bias"] < 1e-10
    variances = [tab[f"lam={lam}"]["exact_V"]["variance"] for lam in LAMS]
    assert all(x < y for x, y in zip(variances, variances[1:])), variances  # grows with lambda here
    evidence.quote("variance at lambda=1 (exact V)", quoted=3.28, measured=variances[-1], digits=2)
    evidence.quote("variance at lambda=0 (exact V)", quoted=1.70, measured=variances[0], digits=2)
    # as an estimate of A(s,a) itself: E[A_0 | s_0, a_0] = Q_0(s,a) - V_used(s), not Q_0 - V^pi, with a wrong critic
    P, R, theta, offset = _mdp()
    pi = torch.softmax(theta, -1)
    Vt, _ = _exact_values(P, R, theta)
    Q0 = R + (1 - P_TERM) * torch.einsum("sat,t->sa", P, Vt[1])  # exact Q at t = 0 (backward induction)
    trajs = _trajectories(P, pi)
    num, den = torch.zeros(S, K, dtype=torch.float64), torch.zeros(S, K, dtype=torch.float64)
    for states, acts, p in trajs:
        L = len(acts)
        rr = torch.tensor([[float(R[s, a]) for s, a in zip(states, acts)]], dtype=torch.float64)
        vv = torch.tensor([[float(Vt[t, s] + offset[t, s]) for t, s in enumerate(states)]], dtype=torch.float64)
        a1, _ = G.gae(rr, vv, torch.ones(1, L, dtype=torch.float64), 1.0, 1.0)
        num[states[0], acts[0]] += p * float(a1[0, 0])
        den[states[0], acts[0]] += p
    cond = num / den
    gap_used = float((cond - (Q0 - (Vt[0] + offset[0])[:, None])).abs().max())
    gap_true = float((cond - (Q0 - Vt[0][:, None])).abs().max())
    assert gap_used < 1e-12 and gap_true > 0.1, (gap_used, gap_true)
    evidence["lam1_wrong_V_conditional_mean_minus_true_advantage"] = gap_true
    evidence["bias_variance_by_lambda"] = tab
