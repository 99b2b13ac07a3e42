"""DPO: the KL-regularised optimum, the reward/policy correspondence, the gradient, Bradley-Terry,
and where offline DPO and online RL part ways. Small discrete settings, fp64."""

from __future__ import annotations

import math

import pytest
import torch

from impls.rl.dpo import dpo_loss, kl_regularised_optimum, solve_kl_regularised_policy
from impls.rl.reward import bradley_terry_loss
from verifiers.katas import dpo_loss as kata

F64 = torch.float64


def _setting(seed: int, k: int = 6):
    g = torch.Generator().manual_seed(seed)
    pi_ref = torch.softmax(torch.randn(k, generator=g, dtype=F64), -1)
    r = torch.randn(k, generator=g, dtype=F64)
    return pi_ref, r


@pytest.mark.claim("dpo.kl-optimum-closed-form")
def test_closed_form_matches_numerical_optimum(evidence):
    worst = 0.0
    for seed in range(5):
        pi_ref, r = _setting(seed)
        for beta in (0.1, 0.5, 2.0):
            num = solve_kl_regularised_policy(pi_ref, r, beta)
            closed = pi_ref * torch.exp(r / beta)
            closed = closed / closed.sum()  # Z(x) = sum_y pi_ref exp(r/beta)
            worst = max(worst, float((num - closed).abs().max()))
            assert torch.allclose(kl_regularised_optimum(pi_ref, r, beta), closed, atol=1e-12)
    assert worst < 1e-6
    evidence["max_abs_diff_numeric_vs_closed_form"] = worst


@pytest.mark.claim("dpo.reward-policy-equivalence")
def test_reward_policy_correspondence_up_to_prompt_shift(evidence):
    beta = 0.5
    pi_ref, r = _setting(1)
    shift = 3.7  # a prompt-only term c(x)
    p1 = solve_kl_regularised_policy(pi_ref, r, beta)
    p2 = solve_kl_regularised_policy(pi_ref, r + shift, beta)
    assert float((p1 - p2).abs().max()) < 1e-6  # rewards differing by c(x) give the same policy
    implicit = beta * (p1 / pi_ref).log()  # beta log pi*/pi_ref = r - beta log Z
    gap = implicit - r
    assert float(gap.std()) < 1e-5  # a constant per prompt ...
    assert abs(float(gap.mean()) + beta * math.log(float((pi_ref * (r / beta).exp()).sum()))) < 1e-5  # ... = -beta log Z
    # the BT probabilities cannot tell r from r + c(x), so the reward is identified only up to c(x)
    i, j = 0, 1
    bt = lambda rr: float(torch.sigmoid(rr[i] - rr[j]))  # noqa: E731
    assert abs(bt(r) - bt(r + shift)) < 1e-15 and abs(bt(r) - bt(implicit)) < 1e-6
    evidence["implicit_minus_true_reward_std"] = float(gap.std())
    evidence["minus_beta_logZ"] = float(gap.mean())


@pytest.mark.claim("dpo.offline-not-sft")
def test_dpo_gradient_is_weighted_contrastive(evidence):
    kata.prop_gradient(dpo_loss)
    beta = 0.1
    pw = torch.tensor([-10.0, -12.0, -8.0], dtype=F64, requires_grad=True)
    pl = torch.tensor([-11.0, -9.0, -8.5], dtype=F64, requires_grad=True)
    rw = torch.tensor([-10.5, -12.0, -9.0], dtype=F64)
    rl = torch.tensor([-10.5, -10.0, -8.0], dtype=F64)
    dpo_loss(pw, pl, rw, rl, beta).backward()
    # SFT on the chosen answers: grad wrt log pi_w is -1/B for every pair, nothing on rejected
    sft_w = torch.full((3,), -1 / 3, dtype=F64)
    weights = (-pw.grad * 3 / beta).tolist()  # sigma(r_l - r_w) per pair
    assert torch.allclose(pl.grad, -pw.grad)  # pushes rejected down as hard as chosen up
    assert float(pl.grad.abs().min()) > 0
    assert max(weights) - min(weights) > 0.05  # per-pair weights vary: not a constant like SFT
    evidence["per_pair_weight_sigma(r_l-r_w)"] = weights
    evidence["sft_grad_on_chosen"] = sft_w.tolist()


@pytest.mark.claim("dpo.bradley-terry")
def test_dpo_is_bradley_terry_on_implicit_rewards(evidence):
    kata.prop_matches_formula(dpo_loss)
    kata.prop_reference_shift_invariance(dpo_loss)
    kata.prop_large_margins_in_fp32(dpo_loss)  # margins to +-1000 in fp32: logsigmoid, not log(sigmoid)
    g = torch.Generator().manual_seed(0)
    pw, pl, rw, rl = (-torch.rand(8, generator=g, dtype=F64) * 20 for _ in range(4))
    beta = 0.1
    a = float(dpo_loss(pw, pl, rw, rl, beta))
    b = float(bradley_terry_loss(beta * (pw - rw), beta * (pl - rl)))
    assert abs(a - b) < 1e-6  # bradley_terry_loss reduces in fp32
    # Bradley-Terry maximum likelihood recovers reward differences from sampled pairwise choices
    true = torch.tensor([0.0, 0.7, -0.4, 1.5], dtype=F64)
    n = 4000
    i = torch.randint(0, 4, (n,), generator=g)
    j = (i + torch.randint(1, 4, (n,), generator=g)) % 4
    first_wins = torch.rand(n, generator=g, dtype=F64) < torch.sigmoid(true[i] - true[j])
    w, lo = torch.where(first_wins, i, j), torch.where(first_wins, j, i)
    est = torch.zeros(4, dtype=F64, requires_grad=True)
    opt = torch.optim.LBFGS([est], max_iter=200, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = bradley_terry_loss(est[w], est[lo])
        loss.backward()
        return loss

    opt.step(closure)
    diff_err = float(((est - est[0]) - (true - true[0])).detach().abs().max())
    assert diff_err < 0.15
    evidence["dpo_vs_bt_abs_diff"] = abs(a - b)
    evidence["bt_mle_max_error_of_reward_differences"] = diff_err


@pytest.mark.claim("dpo.not-everything-ppo-does")
def test_offline_dpo_misses_what_online_rl_sees(evidence):
    # three answers, a shared-parameter (log-linear) policy logit(y) = w . phi(y); the offline pairs only
    # ever compare y0 (chosen) with y1 (rejected). y2 resembles y0 in feature space but is bad.
    beta = 0.1
    phi = torch.tensor([[1.0, 0.0], [0.0, 1.0], [2.0, 0.0]], dtype=F64)
    true_r = torch.tensor([1.0, 0.0, -5.0], dtype=F64)
    logp_ref = torch.log_softmax(phi @ torch.zeros(2, dtype=F64), -1)  # uniform reference

    def train(loss_fn, steps=400, lr=0.2):
        w = torch.zeros(2, dtype=F64, requires_grad=True)
        opt = torch.optim.Adam([w], lr=lr)
        for _ in range(steps):
            opt.zero_grad()
            loss_fn(torch.log_softmax(phi @ w, -1)).backward()
            opt.step()
        return torch.softmax(phi @ w.detach(), -1)

    pi_dpo = train(lambda lp: dpo_loss(lp[0:1], lp[1:2], logp_ref[0:1], logp_ref[1:2], beta))
    # online RL (PPO-style) samples every answer, sees y2's reward and optimises E[r] - beta KL in the same class
    pi_rl = train(lambda lp: -((lp.exp() * true_r).sum() - beta * (lp.exp() * (lp - logp_ref)).sum()))
    value = lambda p: float((p * true_r).sum())  # noqa: E731
    assert float(pi_dpo[2]) > 0.5 > 0.01 > float(pi_rl[2])
    assert value(pi_dpo) < value(pi_rl) - 1.0
    # the figures the entry quotes: pi_dpo(y2) ~ 1, E[r] ~ -5 after DPO; ~ 0.99 online
    assert float(pi_dpo[2]) > 0.99 and value(pi_dpo) < -4.9 and value(pi_rl) > 0.98
    # independent check on the online side: the closed-form KL-regularised optimum over all answers
    # (pi_ref e^{r/beta}/Z) also gives y2 almost nothing
    closed = torch.softmax(logp_ref + true_r / beta, -1)
    assert float(closed[2]) < 1e-6 and abs(value(closed) - 1.0) < 1e-3
    evidence["counterexample"] = {
        "features": phi.tolist(), "true_reward": true_r.tolist(), "pairs": "only (y0 > y1)",
        "pi_dpo": pi_dpo.tolist(), "pi_online_rl": pi_rl.tolist(),
        "expected_reward_dpo": value(pi_dpo), "expected_reward_online": value(pi_rl),
    }
