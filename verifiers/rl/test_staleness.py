"""Asynchronous RL on an exact softmax bandit: the bias of stale updates, importance corrections, the
producer/learner queue, partial rollouts.

Oracles: the exact policy gradient π ⊙ (r − π·r), checked against autograd of the expected reward; the
IS identity (the corrected stale gradient equals the on-policy one at any lag); brute-force enumeration of
actions for the expectations; hand-checked small queue and rollout cases.
"""

from __future__ import annotations

import math
import random

import pytest
import torch

from impls.rl import staleness as S

TH0, R = S.bandit(16, 0)
LR, STEPS = 2.0, 200


@pytest.fixture(scope="module")
def thetas():
    return S.trajectory(TH0, R, STEPS, LR)


def test_exact_gradient_is_autograds():
    for seed in range(3):
        th, r = S.bandit(7, seed)
        th = th.clone().requires_grad_(True)
        (torch.softmax(th, -1) * r).sum().backward()
        torch.testing.assert_close(S.exact_gradient(th.detach(), r), th.grad, rtol=1e-12, atol=1e-14)


def test_stale_gradient_by_enumeration():
    th, r = S.bandit(5, 3)
    mu_logits = th + torch.tensor([0.3, -0.2, 0.1, 0.0, 0.5], dtype=torch.float64)
    pi, mu = S.policy(th), S.policy(mu_logits)
    base = (mu * r).sum()
    for corr in S.CORRECTIONS:
        want = torch.zeros(5, dtype=torch.float64)
        for a in range(5):                                              # Σ_a μ(a) w(a) A(a) ∇log π(a)
            w = {"none": 1.0, "is": pi[a] / mu[a], "tis": min(pi[a] / mu[a], 1.05)}[corr]
            grad_log = -pi.clone()
            grad_log[a] += 1
            want += mu[a] * w * (r[a] - base) * grad_log
        torch.testing.assert_close(S.stale_gradient(th, mu_logits, r, corr, cap=1.05), want, rtol=1e-12, atol=1e-15)


@pytest.mark.claim("async.bias-grows-with-k")
def test_bias_and_ratio_spread_grow_with_staleness(thetas, evidence):
    rows = {k: S.staleness_stats(thetas, R, k) for k in (1, 2, 4, 8, 16, 32)}
    ks = sorted(rows)
    assert all(rows[a].bias < rows[b].bias and rows[a].ratio_std < rows[b].ratio_std for a, b in zip(ks, ks[1:]))
    per_version = [rows[k].bias / k for k in ks[:4]]
    assert max(per_version) / min(per_version) < 1.1                    # about linear while the lag is small
    evidence.quote("relative bias of an uncorrected update, k = 4 (%)", quoted=7.3, measured=100 * rows[4].bias, digits=1)
    evidence.quote("k = 16 (%)", quoted=32, measured=100 * rows[16].bias, digits=0)
    evidence.quote("std of π/μ under μ, k = 16", quoted=0.22, measured=rows[16].ratio_std, digits=2)
    evidence["by_k"] = {k: {"bias": round(v.bias, 4), "ratio_std": round(v.ratio_std, 4), "ratio_max": round(v.ratio_max, 3)}
                        for k, v in rows.items()}


@pytest.mark.claim("async.one-step-is-off-policy")
def test_one_version_of_staleness_is_already_off_policy(thetas, evidence):
    one = S.staleness_stats(thetas, R, 1)
    assert one.bias > 0 and one.ratio_max > 1
    evidence.quote("k = 1: relative bias of the uncorrected update (%)", quoted=1.8, measured=100 * one.bias, digits=1)
    evidence.quote("k = 1: largest π/μ", quoted=1.04, measured=one.ratio_max, digits=2)
    evidence.update(counterexample={"k": 1, "bias": one.bias, "ratio_std": one.ratio_std})


@pytest.mark.claim("async.is-correction")
def test_importance_weights_remove_the_bias(thetas, evidence):
    for k in (1, 4, 16, 32):
        assert S.staleness_stats(thetas, R, k, "is").bias < 1e-10                    # exact at any lag
    tis = {k: S.staleness_stats(thetas, R, k, "tis", cap=2.0) for k in (8, 16, 32)}
    assert tis[8].bias < 1e-10 and tis[16].bias < 1e-10                             # ratios below the cap
    evidence.quote("TIS (C = 2) relative bias at k = 32 (%)", quoted=10, measured=100 * tis[32].bias, digits=0)
    evidence.quote("uncorrected bias per version of lag, k = 1 (%)", quoted=2,
                   measured=100 * S.staleness_stats(thetas, R, 1).bias, digits=0)
    evidence.quote("uncorrected at k = 32 (%)", quoted=71, measured=100 * S.staleness_stats(thetas, R, 32).bias, digits=0)
    sync = S.train_async(TH0, R, 100, LR, 0)
    stale = {k: S.train_async(TH0, R, 100, LR, k) for k in (4, 64)}
    fixed = S.train_async(TH0, R, 100, LR, 64, "is")
    assert fixed == pytest.approx(sync, rel=1e-12)                                 # IS: the synchronous run
    assert stale[64][-1] < stale[4][-1] < sync[-1]
    evidence.quote("expected reward after 100 updates, synchronous", quoted=0.793, measured=sync[-1], digits=3)
    evidence.quote("with data 64 versions old, uncorrected", quoted=0.763, measured=stale[64][-1], digits=3)
    bounded = S.train_async(TH0, R, 100, LR, 64, bound=4)
    assert bounded == pytest.approx(stale[4], rel=1e-12)                           # a bound is a smaller lag


@pytest.mark.claim("async.faster-producers-staler")
def test_faster_producers_make_staler_data(evidence):
    balanced = S.async_queue(4, 1.0, 1.0, 4, 50)
    fast = S.async_queue(16, 1.0, 1.0, 4, 50)
    assert max(balanced.staleness) <= 1 and balanced.queue[-1] <= 4
    first, last = fast.staleness[:8], fast.staleness[-8:]
    assert min(last) > max(first) and fast.queue[-1] > 10 * balanced.queue[-1]     # it keeps growing
    bounded = S.async_queue(16, 1.0, 1.0, 4, 50, max_staleness=2)
    assert max(bounded.staleness) <= 2 and bounded.dropped > 0
    evidence.quote("staleness of the last batch, 16 workers for a 4-per-update learner", quoted=38, measured=fast.staleness[-1],
                   abs=0)
    evidence.quote("with 4 workers", quoted=1, measured=balanced.staleness[-1], abs=0)
    evidence.quote("trajectories dropped under a bound of 2", quoted=584, measured=bounded.dropped, abs=0)
    # a hand-checked case: one worker, one trajectory per update, generation as long as training
    tiny = S.async_queue(1, 1.0, 1.0, 1, 4)
    assert tiny.staleness == [0, 1, 1, 1]
    # a trajectory exactly at the bound is kept: made with v0 at t = 2.5, consumed at v1
    edge = S.async_queue(1, 2.5, 1.0, 1, 2, max_staleness=1)
    assert (edge.staleness, edge.dropped) == ([0, 1], 0)


def _long_tail(n=512, mean=2000, sigma=1.0, seed=0):
    rng = random.Random(seed)
    return [max(1, round(rng.lognormvariate(math.log(mean), sigma))) for _ in range(n)]


@pytest.mark.claim("async.partial-rollouts")
def test_partial_rollouts_cut_the_tail_and_mix_versions(evidence):
    lengths = _long_tail()
    sync, part = S.rollout_round(lengths, 64), S.rollout_round(lengths, 64, budget=2000)
    assert sync.finished == part.finished == len(lengths)
    assert sync.busy_slot_steps == part.busy_slot_steps == sum(lengths)          # the same tokens either way
    assert all(v == 1 for v in sync.versions)
    evidence.quote("decode steps, synchronous / partial (budget 2000)", quoted=3.3, measured=sync.steps / part.steps, digits=1)
    evidence.quote("slot utilisation, synchronous (%)", quoted=19, measured=100 * sync.utilisation, digits=0)
    evidence.quote("slot utilisation, partial (%)", quoted=62, measured=100 * part.utilisation, digits=0)
    evidence.quote("trajectories spanning more than one policy version (%)", quoted=54, measured=100 * part.mixed_share, digits=0)
    evidence.quote("most versions in one trajectory", quoted=12, measured=max(part.versions), abs=0)
    small = S.rollout_round([5, 1, 1], 2, budget=2)                             # hand-checked
    assert (small.steps, small.versions) == (5, [1, 1, 3])
