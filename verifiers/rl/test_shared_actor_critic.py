"""One network or two: PPO's Eq. (9) loss on a policy and a value head that share a trunk, against separate
networks. Set-up: a contextual bandit (8 features, 4 actions, linear mean rewards, Gaussian noise); the loss is
-L^CLIP + c1 L^VF - c2 H with ``ppo_clip_loss``, ``value_loss`` and ``entropy_from_logits``. Oracles: the exact
expected reward and the exact value of the policy (all four actions enumerated per context).
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from impls.rl.ppo import entropy_from_logits, ppo_clip_loss, value_loss

F64 = torch.float64
D, A, H = 8, 4, 16


def _task(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(128, D, generator=g, dtype=F64)
    W = torch.randn(D, A, generator=g, dtype=F64)
    return g, X, X @ W  # contexts, mean reward of every (context, action)


class Shared(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(1)
        self.trunk = nn.Sequential(nn.Linear(D, H), nn.Tanh()).double()
        self.pi, self.v = nn.Linear(H, A).double(), nn.Linear(H, 1).double()

    def forward(self, x):
        h = self.trunk(x)
        return self.pi(h), self.v(h).squeeze(-1)


class Separate(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(1)
        self.actor = nn.Sequential(nn.Linear(D, H), nn.Tanh(), nn.Linear(H, A)).double()
        self.critic = nn.Sequential(nn.Linear(D, H), nn.Tanh(), nn.Linear(H, 1)).double()

    def forward(self, x):
        return self.actor(x), self.critic(x).squeeze(-1)


def _loss(net, X, R, g, c1: float, c2: float = 0.01):
    logits, v = net(X)
    a = torch.multinomial(torch.softmax(logits.detach(), -1), 1, generator=g).squeeze(-1)
    r = R[torch.arange(len(X)), a] + 0.5 * torch.randn(len(X), generator=g, dtype=F64)
    logp = torch.log_softmax(logits, -1)[torch.arange(len(X)), a]
    ones = torch.ones(1, len(X), dtype=F64)
    pg, _ = ppo_clip_loss(logp[None], logp.detach()[None], (r - v.detach())[None], ones)
    vl = value_loss(v[None], v.detach()[None], r[None], ones)
    return pg + c1 * vl - c2 * entropy_from_logits(logits[None], ones)


def _exact(net, X, R):
    with torch.no_grad():
        logits, v = net(X)
        pi = torch.softmax(logits, -1)
        value = (pi * R).sum(-1)  # exact value of the current policy per context
        return float(value.mean()), float(((v - value) ** 2).mean())


@pytest.mark.claim("ppo.objective.actor-critic", "rlhf.critic.shared-parameters")
def test_one_network_with_two_heads_and_the_coupling_it_brings(evidence):
    # (1) one network suffices: Eq. (9) on a shared trunk improves the policy and its value error falls
    g, X, R = _task()
    net = Shared()
    opt = torch.optim.Adam(net.parameters(), lr=0.03)
    J0, mse0 = _exact(net, X, R)
    for _ in range(120):
        opt.zero_grad()
        _loss(net, X, R, g, c1=0.5).backward()
        opt.step()
    J1, mse1 = _exact(net, X, R)
    best = float(R.max(-1).values.mean())
    assert J1 > J0 + 0.5 * (best - J0) and mse1 < 0.5 * mse0, (J0, J1, best, mse0, mse1)
    # (2) the coupling: with a shared trunk the value loss moves the policy, so c1 changes the policy's update;
    # with separate networks it cannot. One step from the same start, same samples, c1 = 0.5 against 5.
    moved = {}
    for name, cls in (("shared", Shared), ("separate", Separate)):
        outs = []
        for c1 in (0.5, 5.0):
            g, X, R = _task()
            net = cls()
            opt = torch.optim.SGD(net.parameters(), lr=0.1)
            _loss(net, X, R, g, c1=c1).backward()
            opt.step()
            outs.append(torch.softmax(net(X)[0], -1).detach())
        moved[name] = float((outs[0] - outs[1]).abs().max())
    assert moved["separate"] == 0.0 and moved["shared"] > 1e-3, moved
    evidence.update(expected_reward={"start": J0, "after_120_steps": J1, "optimum": best},
                    value_mse={"start": mse0, "after_120_steps": mse1},
                    policy_change_from_c1_0_5_to_5={"shared_trunk": moved["shared"], "separate": moved["separate"]})
