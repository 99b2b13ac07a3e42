"""What clipping does and does not do over several epochs of minibatch updates.

Setup: a contextual bandit (256 contexts, 8 features, 4 actions, linear softmax policy with shared
weights), one batch sampled from pi_old, normalised advantages, Adam, minibatches of 64, fixed seeds.
After each epoch the ratio pi/pi_old is measured on the whole batch.
"""

from __future__ import annotations

import pytest
import torch

import impls.rl.ppo as P

EPS = 0.2


def _batch(seed: int, device, N: int = 256, d: int = 8, K: int = 4):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(N, d, generator=g, dtype=torch.float64)
    W_true = torch.randn(d, K, generator=g, dtype=torch.float64)
    W0 = 0.1 * torch.randn(d, K, generator=g, dtype=torch.float64)
    R = X @ W_true  # mean reward of each (context, action)
    pi0 = torch.softmax(X @ W0, -1)
    a = torch.multinomial(pi0, 1, generator=g).squeeze(-1)
    rew = R[torch.arange(N), a] + 0.5 * torch.randn(N, generator=g, dtype=torch.float64)
    adv = rew - (pi0 * R).sum(-1)
    adv = (adv - adv.mean()) / adv.std()
    to = lambda t: t.to(device)  # noqa: E731
    return g, to(X), to(R), to(W0), to(a), to(torch.log_softmax(X @ W0, -1)[torch.arange(N), a]), to(adv)


def _train(X, a, logp_old, adv, W0, g, *, epochs: int, lr: float, clip: float | None, mb: int = 64, sgd: bool = False):
    """PPO epochs; clip=None trains the bare importance-sampled surrogate -mean(r A)."""
    N = X.shape[0]
    W = W0.clone().requires_grad_(True)
    opt = torch.optim.SGD([W], lr=lr) if sgd else torch.optim.Adam([W], lr=lr)
    hist = []
    for ep in range(epochs):
        perm = torch.randperm(N, generator=g).to(X.device)
        for s in range(0, N, mb):
            idx = perm[s : s + mb]
            logp = torch.log_softmax(X[idx] @ W, -1)[torch.arange(len(idx), device=X.device), a[idx]]
            if clip is None:
                loss = -(torch.exp(logp - logp_old[idx]) * adv[idx]).mean()
            else:
                ones = torch.ones(1, len(idx), device=X.device)
                loss, _ = P.ppo_clip_loss(logp[None], logp_old[idx][None], adv[idx][None], ones, clip_low=clip)
            opt.zero_grad()
            loss.backward()
            opt.step()
        with torch.no_grad():
            lr_all = torch.log_softmax(X @ W, -1)[torch.arange(N, device=X.device), a] - logp_old
            r = lr_all.exp()
            # exact KL(pi_old(.|x) || pi(.|x)) over all actions, averaged over the contexts (no sampling)
            lp0, lp1 = torch.log_softmax(X @ W0, -1), torch.log_softmax(X @ W, -1)
            hist.append({"epoch": ep + 1, "ratio_max": float(r.max()), "ratio_min": float(r.min()),
                         "frac_outside_band": float(((r > 1 + EPS) | (r < 1 - EPS)).double().mean()),
                         "kl_old_new": float((torch.expm1(lr_all) - lr_all).mean()),  # k3 estimate on the batch
                         "kl_old_new_exact": float((lp0.exp() * (lp0 - lp1)).sum(-1).mean())})
    return W.detach(), hist


@pytest.mark.claim("ppo.clip.ratio-leaves-band", "ppo.clip-does-not-bound-ratio", "ppo.clip.multi-epoch-reuse")
def test_ratio_leaves_band_after_epochs(evidence, device):
    g, X, R, W0, a, logp_old, adv = _batch(0, device)
    _, hist = _train(X, a, logp_old, adv, W0, g, epochs=4, lr=0.01, clip=EPS)
    last = hist[-1]
    # refutes "every update stays within [1-eps, 1+eps]"
    assert last["ratio_max"] > 1.3 or last["ratio_min"] < 0.7, last
    assert last["frac_outside_band"] > 0.05, last
    # multi-epoch reuse: the drift grows with every pass over the same batch
    kls = [h["kl_old_new"] for h in hist]
    assert all(x < y for x, y in zip(kls, kls[1:])), kls
    # ... while clipping still does damp it: the same run without clipping drifts further
    g2, X2, R2, W02, a2, lo2, adv2 = _batch(0, device)
    _, hist_free = _train(X2, a2, lo2, adv2, W02, g2, epochs=4, lr=0.01, clip=None)
    assert hist_free[-1]["kl_old_new"] > last["kl_old_new"], (hist_free[-1], last)
    # the figures the entry quotes: out of the band already after epoch 1, about half outside after 4,
    # and the same ordering for the exact KL (not only for its sample estimate)
    assert hist[0]["ratio_max"] > 1 + EPS, hist[0]
    evidence.quote("epsilon", quoted=0.2, measured=EPS, digits=1)
    evidence.quote("band lower edge", quoted=0.8, measured=1 - EPS, digits=1)
    evidence.quote("band upper edge", quoted=1.2, measured=1 + EPS, digits=1)
    evidence.quote("largest ratio after epoch 1", quoted=1.41, measured=hist[0]["ratio_max"], digits=2)
    evidence.quote("smallest ratio after 4 epochs", quoted=0.42, measured=last["ratio_min"], digits=2)
    evidence.quote("largest ratio after 4 epochs", quoted=2.24, measured=last["ratio_max"], digits=2)
    evidence.quote("share of ratios outside the band after 4 epochs", quoted=0.48, measured=last["frac_outside_band"],
                   digits=2)
    evidence.quote("KL on the batch after 4 epochs, clipped", quoted=0.042, measured=last["kl_old_new"], digits=3)
    evidence.quote("KL on the batch after 4 epochs, unclipped", quoted=0.077, measured=hist_free[-1]["kl_old_new"],
                   digits=3)
    evidence.quote("exact KL after 4 epochs, clipped", quoted=0.036, measured=last["kl_old_new_exact"], digits=3)
    evidence.quote("exact KL after 4 epochs, unclipped", quoted=0.063, measured=hist_free[-1]["kl_old_new_exact"],
                   digits=3)
    kls_exact = [h["kl_old_new_exact"] for h in hist]
    assert all(x < y for x, y in zip(kls_exact, kls_exact[1:])), kls_exact
    assert hist_free[-1]["kl_old_new_exact"] > 1.5 * last["kl_old_new_exact"], (hist_free[-1], last)
    evidence["setup"] = "bandit N=256, d=8, K=4; Adam lr=0.01; 4 epochs x 4 minibatches of 64; eps=0.2; seed 0"
    evidence["per_epoch_clipped"] = hist
    evidence["per_epoch_unclipped"] = hist_free
    evidence["counterexample"] = {"ratio_max": last["ratio_max"], "ratio_min": last["ratio_min"],
                                  "fraction_of_tokens_outside_[0.8,1.2]": last["frac_outside_band"]}


@pytest.mark.claim("ppo.clip.one-step-overshoot")
def test_single_step_overshoots_band(evidence):
    """At r = 1 the gradient is the unclipped one; a single large step lands far beyond 1+eps."""
    z = torch.zeros(1, 1, 4, dtype=torch.float64, requires_grad=True)
    logp_old = torch.log_softmax(z.detach(), -1)[..., 0]
    for A, name in ((2.0, "A>0"), (-2.0, "A<0")):
        zz = z.detach().clone().requires_grad_(True)
        loss, _ = P.ppo_clip_loss(torch.log_softmax(zz, -1)[..., 0], logp_old, torch.full((1, 1), A, dtype=torch.float64),
                                  torch.ones(1, 1), clip_low=EPS)
        (gz,) = torch.autograd.grad(loss, zz)
        assert gz.abs().sum() > 0  # inside the band nothing is cut
        z_new = zz.detach() - 1.0 * gz  # one SGD step, lr = 1
        r = float(torch.exp(torch.log_softmax(z_new, -1)[..., 0] - logp_old))
        if A > 0:
            evidence.quote("ratio after one step, A > 0", quoted=2.84, measured=r, digits=2)
        else:
            evidence.quote("ratio after one step, A < 0", quoted=0.17, measured=r, digits=2)
        evidence[f"ratio_after_one_step_{name}"] = r
    evidence["counterexample"] = {"start_ratio": 1.0, "lr": 1.0, "eps": EPS,
                                  "ratio_after_A>0": evidence["ratio_after_one_step_A>0"],
                                  "ratio_after_A<0": evidence["ratio_after_one_step_A<0"]}


def _outlier_run(clip, lr, A):
    g, X, R, W0, a, logp_old, adv = _batch(1, "cpu")
    N = X.shape[0]
    i = int(torch.argmin(R[torch.arange(N), a]))  # the worst action that was sampled
    adv = torch.zeros_like(adv)
    adv[i] = A
    W, hist = _train(X, a, logp_old, adv, W0, g, epochs=8, lr=lr, clip=clip, sgd=True)
    pi_new, pi_old = torch.softmax(X @ W, -1), torch.softmax(X @ W0, -1)
    value = lambda p: float((p * R).sum(-1).mean())  # noqa: E731
    return {"outlier_ratio": float(pi_new[i, a[i]] / pi_old[i, a[i]]), "kl_old_new": hist[-1]["kl_old_new"],
            "kl_old_new_exact": hist[-1]["kl_old_new_exact"],
            "expected_reward_before": value(pi_old), "expected_reward_after": value(pi_new)}


@pytest.mark.claim("ppo.unconstrained-outlier")
def test_one_outlier_moves_unclipped_policy_far(evidence):
    """Only one sample carries signal: a large, mis-estimated advantage on the worst sampled action.
    SGD (Adam would normalise the outlier's scale away), 8 epochs of 4 minibatches."""
    clipped, free = _outlier_run(EPS, 0.3, 10.0), _outlier_run(None, 0.3, 10.0)
    assert free["kl_old_new"] > 10 * clipped["kl_old_new"], (clipped, free)
    evidence.quote("exact KL, unclipped over clipped", quoted=30, measured=free["kl_old_new_exact"] / clipped["kl_old_new_exact"],
                   digits=-1)
    evidence.quote("expected reward before", quoted=0.136, measured=free["expected_reward_before"], digits=3)
    evidence.quote("expected reward after, unclipped", quoted=-0.041, measured=free["expected_reward_after"], digits=3)
    evidence.quote("expected reward after, clipped", quoted=0.102, measured=clipped["expected_reward_after"], digits=3)
    assert free["expected_reward_after"] < 0 < clipped["expected_reward_after"], (clipped, free)
    assert free["expected_reward_after"] < free["expected_reward_before"], free
    assert clipped["outlier_ratio"] < 1.3 < free["outlier_ratio"], (clipped, free)
    # ...but clipping is no hard guarantee: a big enough step overshoots the band anyway
    big_clipped = _outlier_run(EPS, 1.0, 50.0)
    assert big_clipped["outlier_ratio"] > 1.5 and big_clipped["expected_reward_after"] < big_clipped["expected_reward_before"]
    evidence.quote("expected reward after, clipped, lr 1.0", quoted=-0.21, measured=big_clipped["expected_reward_after"],
                   digits=2)
    evidence["lr=0.3, A_outlier=10"] = {"clipped": clipped, "unclipped": free}
    evidence["lr=1.0, A_outlier=50, clipped"] = big_clipped
