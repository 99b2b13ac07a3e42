"""What SFT can and cannot express against preference-based RL, on a tabular policy over a few responses.

Oracles: autograd gradients of the SFT and DPO losses (impls/rl/dpo), the closed-form KL-regularised optimum
π* = π_ref·exp(r/β)/Z, and exact evaluation of the DPO loss.
"""

from __future__ import annotations

import math

import pytest
import torch

from impls.rl.dpo import dpo_loss, kl_regularised_optimum, solve_kl_regularised_policy

F64 = torch.float64
CHOSEN, REJECTED, NEUTRAL, OTHER = 0, 1, 2, 3


@pytest.mark.claim("sft.only-positive")
def test_sft_cannot_single_out_a_bad_response(evidence):
    ref = torch.zeros(4, dtype=F64)                                  # uniform reference over four responses
    z = torch.zeros(4, dtype=F64, requires_grad=True)
    logp = torch.log_softmax(z, -1)
    (-logp[CHOSEN]).backward()                                        # SFT on the demonstration
    sft = z.grad.clone()
    assert sft[REJECTED] == sft[NEUTRAL] == sft[OTHER] > 0           # every other response pushed down alike
    z.grad = None
    logp = torch.log_softmax(z, -1)
    lref = torch.log_softmax(ref, -1)
    dpo_loss(logp[CHOSEN:CHOSEN + 1], logp[REJECTED:REJECTED + 1], lref[CHOSEN:CHOSEN + 1],
             lref[REJECTED:REJECTED + 1], beta=0.1).backward()
    dpo = z.grad.clone()
    assert dpo[REJECTED] > 0 > dpo[CHOSEN] and dpo[NEUTRAL] == dpo[OTHER] == 0   # only the pair moves
    # a policy-gradient step with reward −1 on a sampled bad response lowers that response's logit specifically
    z.grad = None
    logp = torch.log_softmax(z, -1)
    (-(-1.0) * logp[REJECTED]).backward()                             # −(reward · log π(y))
    pg = z.grad.clone()
    assert pg[REJECTED] > 0 and pg[NEUTRAL] == pg[OTHER] == pg[CHOSEN] < 0
    evidence["logit gradients (descent lowers positive entries)"] = {"SFT": sft.tolist(), "DPO": dpo.tolist(),
                                                                     "PG, reward -1 on rejected": pg.tolist()}


@pytest.mark.claim("sft.rlhf-new-knowledge")
def test_the_kl_regularised_optimum_only_reweights_the_reference(evidence):
    ref = torch.tensor([0.5, 0.3, 0.2, 0.0], dtype=F64)               # the last answer the SFT model never gives
    reward = torch.tensor([0.0, 0.0, 0.0, 100.0], dtype=F64)          # ...and the reward model loves it
    for beta in (1.0, 0.1, 0.01):
        opt = kl_regularised_optimum(ref, reward, beta)
        assert float(opt[3]) == 0.0                                   # π* = π_ref·exp(r/β)/Z: zero stays zero
    # a nearly absent answer needs r/β ≈ ln(1/π_ref) nats of reward to reach even odds
    ref2 = torch.tensor([1 - 1e-9, 1e-9], dtype=F64)
    needed = math.log((1 - 1e-9) / 1e-9)
    half = kl_regularised_optimum(ref2, torch.tensor([0.0, needed], dtype=F64), 1.0)
    assert float(half[1]) == pytest.approx(0.5, abs=1e-9)
    num = solve_kl_regularised_policy(torch.tensor([0.6, 0.3, 0.1], dtype=F64), torch.tensor([0.0, 1.0, 2.0],
                                                                                               dtype=F64), 0.5)
    closed = kl_regularised_optimum(torch.tensor([0.6, 0.3, 0.1], dtype=F64), torch.tensor([0.0, 1.0, 2.0],
                                                                                           dtype=F64), 0.5)
    assert torch.allclose(num, closed, atol=1e-6)                     # the closed form is the optimum
    evidence["reward/β needed to lift a 1e-9 answer to 1/2"] = needed


@pytest.mark.claim("sft.dpo-beats-ppo")
def test_dpo_cannot_tell_policies_apart_on_unseen_responses(evidence):
    ref = torch.log(torch.full((3,), 1 / 3, dtype=F64))              # chosen, rejected, never in the data
    a = torch.log(torch.tensor([0.98, 0.001, 0.019], dtype=F64))     # mass on the chosen answer
    b = torch.log(torch.tensor([0.098, 0.0001, 0.9019], dtype=F64))  # same chosen/rejected ratio, mass elsewhere
    loss_a = float(dpo_loss(a[:1], a[1:2], ref[:1], ref[1:2], beta=0.1))
    loss_b = float(dpo_loss(b[:1], b[1:2], ref[:1], ref[1:2], beta=0.1))
    assert loss_a == pytest.approx(loss_b, abs=1e-12)                 # DPO's loss is blind to the third answer
    # a reward model that scores the unseen answer badly separates them, as PPO's objective would
    reward = torch.tensor([1.0, -1.0, -5.0], dtype=F64)
    ra, rb = float((a.exp() * reward).sum()), float((b.exp() * reward).sum())
    assert ra - rb > 3
    evidence.quote("policy B's mass on the answer never in the data", quoted=0.9, measured=float(b.exp()[2]), abs=0.005)
    evidence["counterexample"] = {"DPO loss A": loss_a, "DPO loss B": loss_b, "expected reward A": ra,
                                  "expected reward B": rb, "π(unseen) A / B": [0.019, 0.9019]}
