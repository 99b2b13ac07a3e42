"""On-policy vs off-policy: what PPO's minibatch epochs, a single GRPO update and truly off-policy data do.

Oracle: exact expectations over the arms of a softmax bandit (∇J by autograd of Σ_a π_a r_a) and the
hand-derived softmax score e_a − π.
"""

from __future__ import annotations

import pytest
import torch

from impls.rl.policy_gradient import reinforce_loss
from impls.rl.ppo import ppo_clip_loss
from impls.rl.toy_envs import SoftmaxBandit

DT = torch.float64


def _bandit():
    return SoftmaxBandit(torch.tensor([1.0, 0.6, 0.3, 0.0, -0.2, -0.5], dtype=DT), noise=0.3)


def _exact_grad(band, th):
    q = th.clone().requires_grad_(True)
    (g,) = torch.autograd.grad(band.J(q), q)
    return g


@pytest.mark.claim("pg.ppo.on-policy-classification")
@pytest.mark.claim("pg.on-policy.ppo-grpo-dapo")
@pytest.mark.claim("pg.is.not-only-async-lag")
def test_ppo_epochs_learn_from_a_stale_policy(evidence):
    """Synchronous PPO (no rollout/learner lag): 4 epochs x 4 minibatches on one batch from π_old."""
    band = _bandit()
    gen = torch.Generator().manual_seed(0)
    th_old = torch.zeros(6, dtype=DT)
    pi_old = torch.softmax(th_old, 0)
    a = torch.multinomial(pi_old, 64, replacement=True, generator=gen)
    r = band.pull(a, gen)
    adv = r - r.mean()
    lp_old = torch.log(pi_old[a])
    th = th_old.clone()
    log = []
    for epoch in range(4):
        perm = torch.randperm(64, generator=gen)
        for k in range(4):
            idx = perm[k * 16 : (k + 1) * 16]
            q = th.clone().requires_grad_(True)
            loss, stats = ppo_clip_loss(torch.log_softmax(q, 0)[a[idx]][None], lp_old[idx][None], adv[idx][None],
                                        torch.ones(1, 16, dtype=DT), clip_low=0.2)
            (g,) = torch.autograd.grad(loss, q)
            th = th - 2.0 * g
            log.append({"epoch": epoch, "minibatch": k, "ratio_min": stats["ratio_min"], "ratio_max": stats["ratio_max"],
                        "clip_frac": stats["clip_frac"]})
    pi = torch.softmax(th, 0)
    kl = float((pi_old * (torch.log(pi_old) - torch.log(pi))).sum())
    # exact expectations over a ~ π_old with the true advantage under the *current* π
    A_cur = band.means - band.J(th)
    score = torch.eye(6, dtype=DT) - pi  # row a: ∇ log π(a)
    naive = (pi_old[:, None] * A_cur[:, None] * score).sum(0)  # treat old samples as on-policy
    corrected = (pi_old[:, None] * (pi / pi_old)[:, None] * A_cur[:, None] * score).sum(0)
    g_true = _exact_grad(band, th)
    naive_err = float((naive - g_true).norm() / g_true.norm())
    corr_err = float((corrected - g_true).norm() / g_true.norm())
    assert log[0]["ratio_min"] == 1.0 and log[0]["ratio_max"] == 1.0  # first minibatch: exactly on-policy
    assert abs(log[1]["ratio_max"] - 1) > 1e-3 or abs(log[1]["ratio_min"] - 1) > 1e-3  # no lag, yet ratio != 1
    assert max(x["clip_frac"] for x in log) > 0  # the trust region binds in later epochs
    assert kl > 1e-3 and naive_err > 0.05 and corr_err < 1e-10, (kl, naive_err, corr_err)
    evidence.quote("gradient error without the ratio", quoted=0.25, measured=naive_err, digits=2)
    # "the second minibatch already has ratios away from 1 (here [0.80, 1.15])"
    evidence.quote("second minibatch, smallest ratio", quoted=0.80, measured=log[1]["ratio_min"], digits=2)
    evidence.quote("second minibatch, largest ratio", quoted=1.15, measured=log[1]["ratio_max"], digits=2)
    evidence.update(minibatch_log=log, kl_old_to_final=kl, naive_grad_rel_err=naive_err,
                    is_corrected_grad_rel_err=corr_err, lag="none (synchronous)")


@pytest.mark.claim("pg.grpo.single-update-ratio-one")
def test_single_update_makes_clip_inert(evidence):
    gen = torch.Generator().manual_seed(3)
    B, T, V = 4, 6, 5
    logits = torch.randn(T, V, generator=gen, dtype=DT)  # a toy "LM": one logit row per position
    tokens = torch.randint(0, V, (B, T), generator=gen)
    mask = torch.ones(B, T, dtype=DT)
    mask[1, 4:] = 0
    mask[3, 2:] = 0
    A_seq = torch.tensor([1.0, -0.5, 0.7, -1.2], dtype=DT)
    adv = A_seq[:, None].expand(B, T) * mask  # one outcome advantage broadcast to all tokens

    def logp_of(p):
        return torch.log_softmax(p, -1)[torch.arange(T)[None, :].expand(B, T), tokens]

    q = logits.clone().requires_grad_(True)
    lp = logp_of(q)
    loss, stats = ppo_clip_loss(lp, lp.detach(), adv, mask, agg="seq-mean-token-sum")
    (g_ppo,) = torch.autograd.grad(loss, q)
    q2 = logits.clone().requires_grad_(True)
    (g_pg,) = torch.autograd.grad(reinforce_loss(logp_of(q2), adv, mask), q2)
    err = float((g_ppo - g_pg).abs().max())
    assert err < 1e-12 and stats["clip_frac"] == 0.0 and stats["ratio_max"] == 1.0, (err, stats)
    # a second pass over the same batch: ratio moves, clipping can act
    th = logits - 3.0 * g_ppo
    loss2, stats2 = ppo_clip_loss(logp_of(th), lp.detach(), adv, mask, agg="seq-mean-token-sum")
    assert stats2["clip_frac"] > 0
    evidence.update(max_grad_diff_vs_vanilla_pg=err, first_pass=stats, second_pass=stats2)


@pytest.mark.claim("pg.ppo.not-off-policy")
def test_ppo_clip_cannot_learn_from_far_off_policy_data(evidence):
    band = _bandit()
    th = torch.tensor([-1.0, 0.0, 3.0, 0.0, 0.0, 0.0], dtype=DT)  # current π: mostly arm 2
    pi = torch.softmax(th, 0)
    mu = torch.full((6,), 1 / 6, dtype=DT)  # the data came from another (uniform) policy
    A = band.means - band.J(th)
    g_true = _exact_grad(band, th)
    # exact expectation of the PPO-clip gradient over a ~ mu, with logp_old = log mu
    g_ppo = torch.zeros(6, dtype=DT)
    active = 0.0
    for arm in range(6):
        q = th.clone().requires_grad_(True)
        lp = torch.log_softmax(q, 0)[arm].reshape(1, 1)
        loss, st = ppo_clip_loss(lp, torch.log(mu[arm]).reshape(1, 1), A[arm].reshape(1, 1), torch.ones(1, 1, dtype=DT))
        (g,) = torch.autograd.grad(loss, q)
        g_ppo += mu[arm] * (-g)
        active += float(mu[arm]) * (1 - st["clip_frac"])
    # the unclipped IS estimator is exact (identity), so the failure is PPO's trust region
    g_is = (mu[:, None] * (pi / mu)[:, None] * A[:, None] * (torch.eye(6, dtype=DT) - pi)).sum(0)
    cos = float(g_ppo @ g_true / (g_ppo.norm() * g_true.norm()))
    norm_ratio = float(g_ppo.norm() / g_true.norm())
    assert float((g_is - g_true).abs().max()) < 1e-12
    assert cos < 0.9 or norm_ratio < 0.3, (cos, norm_ratio)
    # the figures the entry quotes: the expected PPO gradient points away from the true one (cosine
    # about -0.25) and only the 2 of 6 arms whose ratio lies on the unclipped side keep a gradient
    evidence.quote("cosine with the true gradient", quoted=-0.25, measured=cos, digits=2)
    assert abs(active - 1 / 3) < 1e-12, active
    # hand oracle for which arms keep a gradient: clipped active iff (A>0, r>1+eps) or (A<0, r<1-eps)
    r_arm = pi / mu
    alive = [not ((A[k] > 0 and r_arm[k] > 1.2) or (A[k] < 0 and r_arm[k] < 0.8)) for k in range(6)]
    assert abs(sum(float(mu[k]) for k in range(6) if alive[k]) - active) < 1e-12, (alive, active)
    evidence["counterexample"] = {"pi": pi.tolist(), "mu": mu.tolist(), "ratios": (pi / mu).tolist(),
                                  "cosine_ppo_vs_true_grad": cos, "norm_ratio": norm_ratio,
                                  "fraction_of_data_with_gradient": active}


def _online_td(kind: str, P, R, gamma: float, eps: float, steps: int, seed: int):
    """Tabular TD control from the agent's own, online, epsilon-greedy experience (plain Python lists):
    Q-learning bootstraps from max_a Q(s', a) (target policy: greedy), SARSA from Q(s', a') with a' the action the
    epsilon-greedy behaviour really takes next (target = behaviour)."""
    import random

    rng = random.Random(seed)
    S, A = len(R), len(R[0])
    Q = [[0.0] * A for _ in range(S)]
    visits = [[0] * A for _ in range(S)]

    def act(s):
        return rng.randrange(A) if rng.random() < eps else max(range(A), key=lambda a: Q[s][a])

    s = 0
    a = act(s)
    for _ in range(steps):
        s2 = rng.choices(range(S), weights=P[s][a])[0]
        a2 = act(s2)
        target = R[s][a] + gamma * (max(Q[s2]) if kind == "q-learning" else Q[s2][a2])
        visits[s][a] += 1
        Q[s][a] += (target - Q[s][a]) / visits[s][a] ** 0.6
        s, a = s2, a2
    return torch.tensor(Q, dtype=DT)


@pytest.mark.claim("rl.on-off-policy-definition")
def test_off_policy_learning_from_online_data(evidence):
    """Same online data source for both learners: the agent's own epsilon-greedy interaction, nothing
    pre-collected. Q-learning is off-policy (behaviour epsilon-greedy, target greedy) and finds Q* of the greedy
    optimum; SARSA is on-policy and finds the value of the epsilon-greedy policy itself. Oracles: value iteration
    for Q*, and the linear solve Q^pi = R + gamma P V^pi for the epsilon-greedy policy."""
    import impls.rl.trpo as TR

    g = torch.Generator().manual_seed(5)
    mdp = TR.TabularMDP.random(4, 3, 0.8, g)
    P, R, gamma, eps = mdp.P, mdp.R, mdp.gamma, 0.3
    Q_star = torch.zeros_like(R)
    for _ in range(2000):  # value iteration
        Q_star = R + gamma * torch.einsum("sat,t->sa", P, Q_star.max(-1).values)
    Qq = _online_td("q-learning", P.tolist(), R.tolist(), gamma, eps, 60_000, seed=1)
    Qs = _online_td("sarsa", P.tolist(), R.tolist(), gamma, eps, 60_000, seed=1)

    def eps_greedy_q(Q):  # exact Q of the epsilon-greedy policy built on Q's greedy actions
        pi = torch.full_like(R, eps / R.shape[1])
        pi[torch.arange(R.shape[0]), Q.argmax(-1)] += 1 - eps
        return mdp.q(pi)

    Q_eps = eps_greedy_q(Q_star)
    err_q, err_s = float((Qq - Q_star).abs().max()), float((Qs - Q_eps).abs().max())
    gap = float((Q_star - Q_eps).abs().max())
    assert torch.equal(Qq.argmax(-1), Q_star.argmax(-1))
    assert err_q < gap / 3 and err_s < gap / 3, (err_q, err_s, gap)  # each converges to its own target
    assert float((Qs - Q_star).abs().max()) > gap / 2  # and SARSA does not reach Q*: on-policy
    evidence.update(epsilon=eps, max_err_q_learning_vs_q_star=err_q, max_err_sarsa_vs_q_eps_greedy=err_s,
                    gap_q_star_vs_q_eps_greedy=gap)
