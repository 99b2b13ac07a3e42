"""Optional cross-check against verl's ``verl.trainer.ppo.core_algos`` (PyPI ``verl``).

The same random inputs go through verl and through our references; everything that is meant to
agree is compared at fp64 tolerance. Where our reference deliberately differs, a separate test
exhibits the difference instead of loosening a tolerance:

* verl's ``compute_policy_loss_vanilla`` always applies dual-clip (c = ``clip_ratio_c``, default 3);
  ours does only when asked, so the comparison passes ``dual_clip=3.0``.
* verl's GAE returns *whitened* advantages; ours returns raw ones (whitening is a separate step),
  so we compare returns directly and verl's advantages with ``whiten(raw)`` on response tokens.
* verl clamps log-ratios to [-20, 20] (policy loss, k3) and k3 to [-10, 10]; ours does not clamp.
* verl's GRPO divides ``0 / (std + eps)`` for a group of equal scores and can return a non-zero
  advantage in fp32 (the mean is one ulp off); ours returns exactly 0.
* verl's seq-mean-token-mean divides by ``len + 1e-8``; ours by ``len`` (relative effect < 1e-8).

Run (never needed by the main test command):
    PYTHONPATH=. .venv-oracles/bin/python -m pytest tests/oracles -q -o addopts=""
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

if importlib.util.find_spec("verl") is None:
    pytest.skip("verl is not installed (optional oracle; see tests/oracles/README.md)", allow_module_level=True)
if importlib.util.find_spec("ray") is None:  # verl imports ray at load time; core_algos never calls it
    sys.path.insert(0, str(Path(__file__).parent / "_stubs"))
core_algos = pytest.importorskip("verl.trainer.ppo.core_algos", reason="verl present but core_algos not importable")

from impls.rl.aggregation import aggregate  # noqa: E402
from impls.rl.gae import gae  # noqa: E402
from impls.rl.grpo import grpo_advantages, rloo_advantages  # noqa: E402
from impls.rl.gspo import gspo_loss  # noqa: E402
from impls.rl.kl import kl_estimate  # noqa: E402
from impls.rl.masking import whiten  # noqa: E402
from impls.rl.ppo import ppo_clip_loss  # noqa: E402

F64 = torch.float64
SEEDS = list(range(10))
AGGS = ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm"]


def _actor_cfg(clip_low, clip_high, clip_c=3.0):
    """A real verl ActorConfig carrying only the clip fields the policy losses read."""
    from verl.workers.config import ActorConfig

    return ActorConfig(strategy="fsdp", rollout_n=1, ppo_micro_batch_size_per_gpu=1, clip_ratio=clip_low,
                       clip_ratio_low=clip_low, clip_ratio_high=clip_high, clip_ratio_c=clip_c)


def _batch(seed, B=6, T=9, spread=0.4):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, T + 1, (B,), generator=g)
    lengths[0] = T
    mask = (torch.arange(T)[None, :] < lengths[:, None]).to(F64)
    logp_old = -torch.rand(B, T, generator=g, dtype=F64) * 4
    logp = logp_old + spread * torch.randn(B, T, generator=g, dtype=F64)
    adv = torch.randn(B, T, generator=g, dtype=F64)
    return logp, logp_old, adv, mask


def _close(a, b, what, rtol=1e-9, atol=1e-10):
    a, b = torch.as_tensor(a, dtype=F64), torch.as_tensor(b, dtype=F64)
    assert torch.allclose(a, b, rtol=rtol, atol=atol), f"{what}: ours={a.tolist()} verl={b.tolist()}"


@pytest.mark.parametrize("seed", SEEDS)
def test_gae_returns_and_whitened_advantages(seed):
    g = torch.Generator().manual_seed(100 + seed)
    B, T = 5, 8
    lengths = torch.randint(1, T + 1, (B,), generator=g)
    mask = (torch.arange(T)[None, :] < lengths[:, None]).to(F64)
    rewards = torch.randn(B, T, generator=g, dtype=F64) * mask
    values = torch.randn(B, T, generator=g, dtype=F64) * mask
    adv, ret = gae(rewards, values, mask, 0.99, 0.95)
    v_adv, v_ret = core_algos.compute_gae_advantage_return(rewards, values, mask, 0.99, 0.95)
    m = mask.bool()
    _close(ret[m], v_ret[m], "GAE returns")
    _close(whiten(adv, mask)[m], v_adv[m], "GAE advantages (ours whitened, verl whitens internally)", rtol=1e-7, atol=1e-8)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("scale", [True, False])
def test_grpo_advantages(seed, scale):
    g = torch.Generator().manual_seed(200 + seed)
    G, n = 4, 5
    scores = torch.randn(G * n, generator=g, dtype=F64)
    T = 6
    mask = torch.ones(G * n, T, dtype=F64)
    tlr = torch.zeros(G * n, T, dtype=F64)
    tlr[:, -1] = scores
    index = np.repeat(np.arange(n), G)
    v_adv, _ = core_algos.compute_grpo_outcome_advantage(tlr, mask, index, epsilon=1e-6, norm_adv_by_std_in_grpo=scale)
    ours = grpo_advantages(scores, G, scale_by_std=scale, eps=1e-6)
    _close(ours[:, None].expand_as(mask), v_adv, f"GRPO advantages (scale_by_std={scale})")


def test_grpo_equal_group_deliberate_difference():
    """fp32 group of equal scores: verl's formula leaves an ulp-sized numerator divided by ~1e-7 + eps."""
    scores = torch.full((3,), 5 / 7, dtype=torch.float32)
    tlr = scores[:, None].clone()
    v_adv, _ = core_algos.compute_grpo_outcome_advantage(tlr, torch.ones(3, 1), np.zeros(3, dtype=int))
    ours = grpo_advantages(scores, 3)
    assert torch.equal(ours, torch.zeros(3))
    assert float(v_adv.abs().max()) > 0.01, "verl's textbook formula gives a visibly non-zero advantage here"


@pytest.mark.parametrize("seed", SEEDS)
def test_rloo_advantages(seed):
    g = torch.Generator().manual_seed(300 + seed)
    K, n = 4, 5
    scores = torch.randn(K * n, generator=g, dtype=F64)
    tlr = scores[:, None].clone()
    index = np.repeat(np.arange(n), K)
    v_adv, _ = core_algos.compute_rloo_outcome_advantage(tlr, torch.ones(K * n, 1, dtype=F64), index)
    _close(rloo_advantages(scores, K), v_adv[:, 0], "RLOO advantages")


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("agg", AGGS)
@pytest.mark.parametrize("clip", [(0.2, 0.2), (0.2, 0.28)])
def test_policy_loss_each_aggregation(seed, agg, clip):
    logp, logp_old, adv, mask = _batch(400 + seed)
    ours, _ = ppo_clip_loss(logp, logp_old, adv, mask, clip_low=clip[0], clip_high=clip[1], dual_clip=3.0, agg=agg)
    theirs, _ = core_algos.compute_policy_loss_vanilla(logp_old, logp, adv, mask, loss_agg_mode=agg,
                                                       config=_actor_cfg(*clip))
    _close(ours, theirs, f"policy loss agg={agg} clip={clip}", rtol=1e-7)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("agg", AGGS)
def test_aggregation_registry(seed, agg):
    g = torch.Generator().manual_seed(500 + seed)
    _, _, _, mask = _batch(500 + seed)
    x = torch.randn(mask.shape, generator=g, dtype=F64)
    _close(aggregate(x, mask, agg), core_algos.agg_loss(x, mask, agg), f"aggregate {agg}", rtol=1e-7)


@pytest.mark.parametrize("seed", SEEDS)
def test_gspo_loss(seed):
    logp, logp_old, _, mask = _batch(600 + seed, spread=0.01)
    g = torch.Generator().manual_seed(600 + seed)
    seq_adv = torch.randn(mask.shape[0], generator=g, dtype=F64)
    ours, _ = gspo_loss(logp, logp_old, seq_adv, mask, clip_low=3e-4, clip_high=4e-4)
    theirs, _ = core_algos.compute_policy_loss_gspo(logp_old, logp, seq_adv[:, None] * mask, mask,
                                                    loss_agg_mode="seq-mean-token-mean",
                                                    config=_actor_cfg(3e-4, 4e-4))
    _close(ours, theirs, "GSPO loss", rtol=1e-7)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("kind", ["k1", "k2", "k3"])
def test_kl_estimators(seed, kind):
    logp, logp_ref, _, _ = _batch(700 + seed, spread=0.5)
    assert float((logp_ref - logp).max()) < 2.0  # stay inside verl's clamps (see the test below)
    _close(kl_estimate(logp, logp_ref, kind), core_algos.kl_penalty_forward(logp, logp_ref, kind), f"KL {kind}")


def test_kl_k3_clamp_deliberate_difference():
    logp = torch.tensor([-30.0], dtype=F64)
    logp_ref = torch.tensor([-1.0], dtype=F64)  # log rho = 29: verl clamps it to 20, then k3 to 10
    ours = float(kl_estimate(logp, logp_ref, "k3"))
    theirs = float(core_algos.kl_penalty_forward(logp, logp_ref, "k3"))
    assert theirs == 10.0 and ours > 1e12
