"""Which policy a KL term is taken against decides what it does: pi_old (PPO's penalty, TRPO's constraint, the
clip) is a trust region that moves with the policy; pi_ref (the RLHF regulariser) is an anchor.

Set-up: a 8-armed bandit whose reward model is wrong on two arms the reference policy rarely plays (it rates
them highest; their true reward is lowest). Each iteration maximises its objective exactly in expectation over
the arms (several Adam steps on the logits), then pi_old <- pi. Oracles: the closed-form optimum of
E[r] - beta KL(pi || pi_ref), pi* = pi_ref exp(r / beta) / Z, and exact KL and true reward of every iterate.
"""

from __future__ import annotations

import pytest
import torch

from impls.rl.ppo import ppo_clip_loss

F64 = torch.float64
K = 8
PI_REF = torch.softmax(torch.tensor([2.0, 1.5, 1.0, 1.0, 0.5, 0.0, -2.0, -2.0], dtype=F64), 0)
TRUE = torch.tensor([1.0, 0.8, 0.6, 0.5, 0.4, 0.3, -1.0, -1.0], dtype=F64)
PROXY = TRUE.clone()
PROXY[6:] = 1.5  # the reward model's error, where the reference policy seldom goes


def _kl(p, q):
    return float((p * (p.log() - q.log())).sum())


def _iterate(kind: str, beta: float, iters: int = 40, inner: int = 25, lr: float = 0.1):
    theta = PI_REF.log().clone()
    for _ in range(iters):
        old = torch.softmax(theta, 0).detach()
        th = theta.clone().requires_grad_(True)
        opt = torch.optim.Adam([th], lr=lr)
        for _ in range(inner):
            logp = torch.log_softmax(th, 0)
            pi = logp.exp()
            if kind == "penalty-to-old":  # PPO's adaptive-KL surrogate: E_old[r A] - beta KL(pi_old || pi)
                loss = -(pi * PROXY).sum() + beta * (old * (old.log() - logp)).sum()
            elif kind == "kl-to-ref":  # the RLHF regulariser: E_pi[r] - beta KL(pi || pi_ref)
                loss = -(pi * PROXY).sum() + beta * (pi * (logp - PI_REF.log())).sum()
            else:  # "clip": PPO-clip's surrogate in expectation over the arms (A scaled by pi_old, a positive factor)
                adv = (PROXY - (old * PROXY).sum()) * old * K
                loss = ppo_clip_loss(logp[None], old.log()[None], adv[None], torch.ones(1, K, dtype=F64))[0]
            opt.zero_grad()
            loss.backward()
            opt.step()
        theta = th.detach()
    pi = torch.softmax(theta, 0)
    return pi, {"kl_to_ref": _kl(pi, PI_REF), "true_reward": float((pi * TRUE).sum()),
                "proxy_reward": float((pi * PROXY).sum())}


@pytest.mark.claim("pg.kl-penalty.reference-policy", "rlhf.ppo.penalty-variant", "pg.rlhf.clip-old-kl-ref")
def test_kl_to_old_is_a_trust_region_kl_to_ref_an_anchor(evidence):
    beta = 0.5
    start = {"kl_to_ref": 0.0, "true_reward": float((PI_REF * TRUE).sum())}
    _, old_pen = _iterate("penalty-to-old", beta)
    _, clip = _iterate("clip", beta)
    pi_ref_run, ref_pen = _iterate("kl-to-ref", beta)
    # the anchored run ends at the closed-form optimum of E[r] - beta KL(pi || pi_ref) ...
    star = PI_REF * torch.exp(PROXY / beta)
    star = star / star.sum()
    assert torch.allclose(pi_ref_run, star, atol=1e-2), (pi_ref_run, star)
    # ... while a penalty (or clip) against the previous policy only slows the walk: it ends on the arms the
    # reward model over-rates, far from the reference, with the true reward below where it started
    for run in (old_pen, clip):
        assert run["kl_to_ref"] > 2 * ref_pen["kl_to_ref"], (run, ref_pen)
        assert run["true_reward"] < start["true_reward"] < ref_pen["true_reward"] + 0.5, (run, start, ref_pen)
        assert run["proxy_reward"] > ref_pen["proxy_reward"]
    assert ref_pen["true_reward"] > old_pen["true_reward"] + 0.3 and ref_pen["true_reward"] > clip["true_reward"] + 0.3
    evidence.update(beta=beta, start=start, penalty_to_pi_old=old_pen, clip_to_pi_old=clip, penalty_to_pi_ref=ref_pen)
    evidence["counterexample"] = {"same beta": beta, "KL to pi_ref after 40 iterations": {
        "beta KL(pi_old || pi)": old_pen["kl_to_ref"], "beta KL(pi || pi_ref)": ref_pen["kl_to_ref"]}}
