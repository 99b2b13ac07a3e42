"""GRPO advantages, loss and baseline: checked against fp64 statistics, exact enumeration of
a small bandit, and autograd of hand-written objectives."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from impls.rl.aggregation import aggregate
from impls.rl.dpo import solve_kl_regularised_policy
from impls.rl.grpo import grpo_advantages, rloo_advantages
from impls.rl.ppo import ppo_clip_loss
from verifiers.katas import grpo_advantages as kata

F64 = torch.float64


@pytest.mark.claim("grpo.advantage.group-standardised")
def test_group_standardised_advantage(evidence):
    kata.prop_matches_group_formula(grpo_advantages)
    kata.prop_equal_group_is_exactly_zero(grpo_advantages)
    kata.prop_groups_are_independent(grpo_advantages)
    kata.prop_eps_guards_nearly_equal_groups(grpo_advantages)
    kata.prop_realistic_group_sizes(grpo_advantages)  # G = 16, 64, 128; 0/1 and continuous rewards
    # a nearly-equal group, by hand: scores 0, 1e-6, with eps = 1e-6 the advantages are +-0.5 / (1/sqrt 2 + 1)... exactly
    near = torch.tensor([0.0, 1e-6], dtype=F64)
    sd = 1e-6 / 2**0.5  # unbiased std of {0, 1e-6}
    want = [-0.5e-6 / (sd + 1e-6), 0.5e-6 / (sd + 1e-6)]
    got = grpo_advantages(near, 2, eps=1e-6).tolist()
    assert all(abs(a - b) < 1e-9 for a, b in zip(got, want)), (got, want)
    evidence["nearly_equal_group"] = {"scores": near.tolist(), "advantages": got, "without_eps": [-2**-0.5, 2**-0.5]}
    scores = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0])
    adv = grpo_advantages(scores, 4, eps=0.0).view(2, 4)
    assert torch.allclose(adv.mean(1), torch.zeros(2), atol=1e-7)
    assert torch.allclose(adv.std(1), torch.ones(2), atol=1e-6)
    evidence["example"] = {"scores": scores.tolist(), "advantages": adv.reshape(-1).tolist()}


def _batch(seed, B=4, T=6):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, T + 1, (B,), generator=g)
    mask = (torch.arange(T)[None, :] < lengths[:, None]).to(F64)
    logits = torch.randn(B, T, 5, generator=g, dtype=F64)
    tokens = torch.randint(0, 5, (B, T), generator=g)
    return logits, tokens, mask, lengths


def _logp(logits, tokens):
    return torch.log_softmax(logits, -1).gather(-1, tokens[..., None]).squeeze(-1)


@pytest.mark.claim("grpo.loss.logprob-form")
def test_logprob_form_is_the_on_policy_gradient(evidence):
    logits, tokens, mask, lengths = _batch(0)
    adv = torch.tensor([1.0, -0.5, 0.8, -1.3], dtype=F64)
    G = len(adv)

    def logprob_form(lg):  # -1/G sum_i A_i * sum_t log pi / |y_i|
        return -(adv * (_logp(lg, tokens) * mask).sum(-1) / lengths.to(F64)).sum() / G

    def clipped(lg, logp_old):
        return ppo_clip_loss(_logp(lg, tokens), logp_old, adv[:, None].expand_as(mask), mask,
                             agg="seq-mean-token-mean")[0]

    def grad(fn):
        x = logits.clone().requires_grad_(True)
        fn(x).backward()
        return x.grad

    old = _logp(logits, tokens).detach()
    g_form, g_clip = grad(logprob_form), grad(lambda x: clipped(x, old))
    on_policy_err = float((g_form - g_clip).abs().max())
    assert on_policy_err < 1e-12
    # after some updates the samples are off-policy: ratio != 1 and tokens beyond the clip range
    stale = old - 0.5 * torch.sign(adv)[:, None]  # ratios e^{±0.5} land outside [0.8, 1.2]
    g_stale = grad(lambda x: clipped(x, stale))
    off_policy_gap = float((g_form - g_stale).abs().max())
    assert off_policy_gap > 1e-2
    # every token here is clipped (A>0 above 1.2, A<0 below 0.8): the clipped tokens lose their gradient entirely
    assert float(g_stale.abs().max()) == 0.0
    # inside the clip range the ratios still move off 1: the gradient is the ratio-weighted log pi form,
    # -(1/G) sum_i A_i sum_t rho_{i,t} grad log pi_{i,t} / |y_i| (hand-written, rho held as a constant)
    near = old - 0.1 * torch.sign(adv)[:, None]  # ratios e^{±0.1} stay inside [0.8, 1.2]
    rho = torch.exp(_logp(logits, tokens) - near).detach()

    def weighted_form(lg):
        return -(adv * (rho * _logp(lg, tokens) * mask).sum(-1) / lengths.to(F64)).sum() / G

    g_near, g_weighted = grad(lambda x: clipped(x, near)), grad(weighted_form)
    assert float((g_near - g_weighted).abs().max()) < 1e-12
    unclipped_gap = float((g_near - g_form).abs().max())
    assert unclipped_gap > 1e-3
    evidence["unclipped_off_policy_max_abs_diff"] = unclipped_gap
    evidence["on_policy_max_abs_diff"] = on_policy_err
    evidence["off_policy_max_abs_diff"] = off_policy_gap


@pytest.mark.claim("grpo.loss.length-normaliser-equal-weight")
def test_length_normaliser_gives_per_token_bias(evidence):
    # two wrong answers (A = -1), lengths 2 and 8; per-token gradient of the GRPO aggregation
    T = 8
    mask = torch.zeros(2, T, dtype=F64)
    mask[0, :2] = 1
    mask[1, :] = 1
    adv = torch.tensor([-1.0, -1.0], dtype=F64)
    logp = torch.full((2, T), -1.0, dtype=F64, requires_grad=True)
    loss = aggregate(-adv[:, None] * logp, mask, "seq-mean-token-mean")
    loss.backward()
    per_token = logp.grad
    # hand-derived: d loss / d log pi_{i,t} = -A_i / (G |y_i|)
    hand = (-adv[:, None] / mask.sum(-1, keepdim=True) / 2) * mask
    assert torch.allclose(per_token, hand, atol=1e-15)
    # each response's total push is the same ...
    totals = per_token.sum(-1)
    assert torch.allclose(totals[0], totals[1])
    # ... so each token of the long wrong answer is pushed down 4x less
    short_tok, long_tok = float(per_token[0, 0]), float(per_token[1, 0])
    assert abs(short_tok / long_tok - 4.0) < 1e-12
    # and for right answers (A = +1) the short one is rewarded 4x more per token
    logp_r = torch.full((2, T), -1.0, dtype=F64, requires_grad=True)
    aggregate(-torch.ones(2, 1, dtype=F64) * logp_r, mask, "seq-mean-token-mean").backward()
    assert torch.allclose(logp_r.grad, (-1.0 / mask.sum(-1, keepdim=True) / 2) * mask, atol=1e-15)
    assert abs(float(logp_r.grad[0, 0]) / float(logp_r.grad[1, 0]) - 4.0) < 1e-12
    evidence["per_token_push_short_right"] = float(-logp_r.grad[0, 0])
    evidence["per_token_push_long_right"] = float(-logp_r.grad[1, 0])
    evidence["per_token_push_short_wrong"] = short_tok
    evidence["per_token_push_long_wrong"] = long_tok
    evidence["per_response_total"] = totals.tolist()


@pytest.mark.claim("grpo.kl.keeps-near-reference")
def test_kl_penalty_keeps_optimum_near_reference(evidence):
    g = torch.Generator().manual_seed(0)
    pi_ref = torch.softmax(torch.randn(6, generator=g, dtype=F64), -1)
    r = torch.randn(6, generator=g, dtype=F64)
    kls = []
    for beta in [0.05, 0.1, 0.3, 1.0, 3.0, 10.0]:
        pi = solve_kl_regularised_policy(pi_ref, r, beta)
        kls.append(float((pi * (pi / pi_ref).log()).sum()))
    assert all(a > b for a, b in zip(kls, kls[1:])), kls
    assert kls[-1] < 0.01 * kls[0]
    evidence["beta"] = [0.05, 0.1, 0.3, 1.0, 3.0, 10.0]
    evidence["kl_of_optimum"] = kls


def _bandit_estimator_moments(G: int, baseline: str):
    """Exact mean and total variance of (1/G) sum_i (r_i - b_i) grad log pi(a_i) over all K^G draws."""
    theta = torch.tensor([0.3, -0.2, 0.5], dtype=F64)
    r = torch.tensor([1.0, 0.0, 0.4], dtype=F64)
    K = len(r)
    pi = torch.softmax(theta, -1)
    eye = torch.eye(K, dtype=F64)
    score = eye - pi  # grad_theta log pi(a) = e_a - pi
    mean = torch.zeros(K, dtype=F64)
    second = torch.zeros(K, dtype=F64)
    for draw in itertools.product(range(K), repeat=G):
        p = math.prod(float(pi[a]) for a in draw)
        rs = torch.stack([r[a] for a in draw])
        if baseline == "none":  # plain REINFORCE: the reward itself
            adv = rs
        elif baseline == "group-mean":  # the implementation under test (Dr. GRPO form: no std scaling)
            adv = grpo_advantages(rs, G, scale_by_std=False)
        elif baseline == "grpo":  # the implementation's default: group-standardised
            adv = grpo_advantages(rs, G)
        else:  # leave-one-out, the implementation
            adv = rloo_advantages(rs, G)
        est = sum(adv[i] * score[draw[i]] for i in range(G)) / G
        mean += p * est
        second += p * est**2
    true = score.T @ (pi * r)  # grad of sum_a pi(a) r(a)
    th = theta.clone().requires_grad_(True)
    (torch.softmax(th, -1) * r).sum().backward()
    assert torch.allclose(true, th.grad)
    return mean, float((second - mean**2).sum()), th.grad


@pytest.mark.claim("grpo.no-critic.group-baseline")
def test_group_baseline_replaces_critic(evidence):
    """Exact enumeration of every group of G = 4 answers on a 3-armed bandit, with advantages from
    ``grpo_advantages`` itself. Oracles: the true gradient by autograd of sum_a pi(a) r(a), and the closed form
    E[(1/G) sum_i (r_i - mean r) grad log pi(a_i)] = (1 - 1/G) grad J (the mean includes the sample itself;
    each cross term E[r_j grad log pi(a_i)], j != i, vanishes)."""
    G = 4
    m_none, v_none, true = _bandit_estimator_moments(G, "none")
    m_mean, v_mean, _ = _bandit_estimator_moments(G, "group-mean")
    m_std, v_std, _ = _bandit_estimator_moments(G, "grpo")
    assert torch.allclose(m_none, true, atol=1e-12)  # no baseline: unbiased, but ...
    assert torch.allclose(m_mean, (G - 1) / G * true, atol=1e-12)  # the group baseline: right direction, scale (G-1)/G
    assert v_mean < 0.5 * v_none, (v_mean, v_none)  # ... and far less variance, with no value model at all
    cos = float(m_std @ true / (m_std.norm() * true.norm()))  # standardised: an ascent direction, rescaled per group
    assert cos > 0.95, cos
    evidence.update(true_grad=true.tolist(), expected_grad_group_mean=m_mean.tolist(),
                    expected_grad_group_standardised=m_std.tolist(), cosine_standardised_vs_true=cos,
                    variance_no_baseline=v_none, variance_group_mean=v_mean, variance_group_standardised=v_std)


@pytest.mark.claim("rloo.origin-and-baseline")
def test_rloo_is_unbiased_and_a_rescaled_group_mean(evidence):
    G = 4
    m_loo, v_loo, true = _bandit_estimator_moments(G, "loo")
    m_mean, v_mean, _ = _bandit_estimator_moments(G, "group-mean")
    assert torch.allclose(m_loo, true, atol=1e-12)  # leave-one-out: unbiased
    assert not torch.allclose(m_mean, true, atol=1e-6)
    assert torch.allclose(m_mean, (G - 1) / G * true, atol=1e-12)  # group mean: (K-1)/K of the true gradient
    # and the two estimators differ only by the constant factor G/(G-1): variance ratio (G/(G-1))^2
    assert abs(v_loo / v_mean - (G / (G - 1)) ** 2) < 1e-10
    scores = torch.tensor([1.0, 0.0, 0.0, 0.0])
    # per sample, RLOO = r_i - mean(others) = G/(G-1) x (r_i - group mean): hand values on the counterexample
    assert torch.allclose(rloo_advantages(scores, G), torch.tensor([1.0, -1 / 3, -1 / 3, -1 / 3]))
    assert torch.allclose(grpo_advantages(scores, G, scale_by_std=False), torch.tensor([0.75, -0.25, -0.25, -0.25]))
    evidence["counterexample"] = {
        "scores": scores.tolist(),
        "rloo": rloo_advantages(scores, G).tolist(),
        "group_mean_centred": grpo_advantages(scores, G, scale_by_std=False).tolist(),
        "variance_ratio_rloo_over_group_mean": v_loo / v_mean,
        "expected_grad_rloo": m_loo.tolist(), "true_grad": true.tolist(),
    }
