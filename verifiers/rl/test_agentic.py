"""Agentic RL vs single-turn RLHF: both have a delayed, sequence-end reward; agentic RL adds
environment steps whose tokens the policy did not choose. Exact enumeration of tiny processes."""

from __future__ import annotations

import itertools

import pytest
import torch

from impls.rl.gae import discounted_returns
from impls.rl.reward import kl_shaped_rewards

F64 = torch.float64


def _exact_pg(theta, reward_fn, env_prob, include_obs):
    """Exact E[R * sum_t grad log pi(token_t)] over a 3-step process: agent token a1, environment
    token o ~ P_env(.|a1), agent token a2. ``include_obs`` also differentiates log pi(o) (a mistake)."""
    V = theta.shape[1]
    th = theta.clone().requires_grad_(True)
    total = 0.0
    for a1, o, a2 in itertools.product(range(V), repeat=3):
        logp = torch.log_softmax(th, -1)
        p = logp[0, a1].exp().detach() * env_prob[a1, o] * logp[2, a2].exp().detach()
        score = logp[0, a1] + logp[2, a2] + (logp[1, o] if include_obs else 0.0)
        total = total + p * reward_fn(a1, o, a2) * score
    total.backward()
    return th.grad


@pytest.mark.claim("agentic.delayed-reward")
def test_delayed_reward_in_both_settings(evidence):
    # (1) single-turn RLHF: the score lands on the last response token only
    score = torch.tensor([2.0], dtype=F64)
    mask = torch.tensor([[1, 1, 1, 1, 0]], dtype=F64)
    lp = torch.full((1, 5), -1.0, dtype=F64)
    rewards = kl_shaped_rewards(score, lp, lp, mask, beta=0.0)
    rewards = rewards[0] if isinstance(rewards, tuple) else rewards
    nonzero = (rewards[0] != 0).nonzero().flatten().tolist()
    assert nonzero == [3], rewards
    g = discounted_returns(rewards, mask, 1.0)
    assert torch.allclose(g[0, :4], torch.full((4,), 2.0, dtype=F64))  # every earlier token gets credit only via the return
    # (2) agentic: reward only at the end, depends on the first action through the environment
    V = 2
    env_prob = torch.tensor([[0.9, 0.1], [0.2, 0.8]], dtype=F64)  # P(o | a1): a1 = 0 "calls the tool"
    reward_fn = lambda a1, o, a2: float(o == 0 and a2 == 0)  # noqa: E731
    theta = torch.zeros(3, V, dtype=F64)

    def j(th):  # exact expected reward; row 1 (observation position) does not enter: the env chooses o
        pa = torch.softmax(th, -1)
        return sum(pa[0, a1] * env_prob[a1, o] * pa[2, a2] * reward_fn(a1, o, a2)
                   for a1, o, a2 in itertools.product(range(V), repeat=3))

    th = theta.clone().requires_grad_(True)
    j(th).backward()
    true = th.grad
    masked = _exact_pg(theta, reward_fn, env_prob, include_obs=False)
    unmasked = _exact_pg(theta, reward_fn, env_prob, include_obs=True)
    assert float(true[0].abs().max()) > 0.05  # the first action gets credit from a reward two steps later
    assert torch.allclose(masked, true, atol=1e-12)
    assert float((unmasked - true).abs().max()) > 0.05  # training on environment tokens biases the gradient
    evidence["rlhf_reward_positions"] = nonzero
    evidence["true_grad_first_action"] = true[0].tolist()
    evidence["grad_on_observation_logits_if_unmasked"] = unmasked[1].tolist()
