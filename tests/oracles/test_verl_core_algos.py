"""Optional cross-check against verl's ``verl.trainer.ppo.core_algos`` (PyPI ``verl``).

The same random inputs go through verl and through our references; everything that is meant to
agree is compared at fp64 tolerance. Where our reference deliberately differs, a separate test
exhibits the difference instead of loosening a tolerance:

* verl's ``compute_policy_loss_vanilla`` always applies dual-clip (c = ``clip_ratio_c``, default 3);
  ours does only when asked, so the comparison passes ``dual_clip=3.0``.
* verl's GAE returns *whitened* advantages; ours returns raw ones (whitening is a separate step),
  so we compare returns directly and verl's advantages with ``whiten(raw)`` on response tokens.
* verl clamps token log-ratios to [-20, 20] (policy loss, k3) as ours does, and k3 to [-10, 10], which ours does
  not (``test_kl_k3_clamp_deliberate_difference``). For GSPO verl clamps the log-ratio from above at 10, ours to
  [-20, 20] (``test_gspo_clamp_deliberate_difference``).
* verl's trainer passes ``global_batch_size`` (every sequence of the mini-batch) to ``agg_loss``, so its seq-mean
  modes count empty rows in the denominator; ours treat them as absent (equal to verl's standalone call:
  ``test_aggregation_global_batch_size_deliberate_difference``).
* verl's Dr. GRPO on a group of one returns the raw score (mean taken as 0); ours returns 0
  (``test_dr_grpo_group_of_one_deliberate_difference``).
* verl's GRPO divides ``0 / (std + eps)`` for a group of equal scores and can return a non-zero
  advantage in fp32 (the mean is one ulp off); ours returns exactly 0.
* verl's seq-mean-token-mean divides by ``len + 1e-8``; ours by ``len`` (relative effect < 1e-8).
* verl's ``seq-mean-token-sum-norm`` defaults ``loss_scale_factor`` to the padded width; ours requires the
  constant (``test_sum_norm_needs_a_constant_deliberate_difference``).
* verl's GAE leaves the carried advantage on masked (observation) positions; ours writes 0 there (the values
  on response tokens agree, ``test_gae_masked_positions_deliberate_difference``).
* verl's k3 is ``exp(x) - 1 - x``: in fp32 at log-ratios ~1e-3 it goes negative, ours (``expm1``) does not
  (``test_k3_fp32_small_log_ratio_deliberate_difference``).
* verl's GPG counts non-zero *scores* for alpha; the paper (and ours) counts answers in groups that are not all
  equal (``test_gpg_alpha_deliberate_difference``).

Run (never needed by the main test command):
    PYTHONPATH=. .venv-oracles/bin/python -m pytest tests/oracles -q -o addopts=""
"""

from __future__ import annotations

import importlib.util
import math
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
from impls.rl.gae_scan import gae_scan  # noqa: E402
from impls.rl.grpo import (  # noqa: E402
    gpg_advantages, grpo_advantages, reinforce_pp_baseline_advantages, remax_advantages, rloo_advantages)
from impls.rl.gspo import gspo_loss  # noqa: E402
from impls.rl.kl import KL_ESTIMATORS, kl_estimate, kl_penalty  # noqa: E402
from impls.rl.masking import whiten  # noqa: E402
from impls.rl.policy_gradient import reinforce_pp_advantages  # noqa: E402
from impls.rl.policy_losses import cispo_loss  # noqa: E402
from impls.rl.ppo import ppo_clip_loss  # noqa: E402
from impls.rl.rollout_correction import rollout_is_weights  # noqa: E402

F64 = torch.float64
SEEDS = list(range(10))
AGGS = ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm", "token-sum"]
C_NORM = 11.0  # Dr. GRPO's constant (max response length), passed to both sides


def _actor_cfg(clip_low, clip_high, clip_c=3.0):
    """A real verl ActorConfig carrying only the clip fields the policy losses read (and Dr. GRPO's constant)."""
    from verl.workers.config import ActorConfig

    cfg = ActorConfig(strategy="fsdp", rollout_n=1, ppo_micro_batch_size_per_gpu=1, clip_ratio=clip_low,
                      clip_ratio_low=clip_low, clip_ratio_high=clip_high, clip_ratio_c=clip_c)
    cfg.global_batch_info["loss_scale_factor"] = C_NORM
    return cfg


def _batch(seed, B=6, T=9, spread=0.4, holes=False):
    """Right-padded batch; with ``holes`` also interior zeros (observation tokens) and one empty row."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, T + 1, (B,), generator=g)
    lengths[0] = T
    mask = (torch.arange(T)[None, :] < lengths[:, None]).to(F64)
    if holes:
        mask = mask * (torch.rand(B, T, generator=g) > 0.25).to(F64)
        mask[0, 0] = 1.0
        mask[-1] = 0.0
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
@pytest.mark.parametrize("gl", [(1.0, 1.0), (0.99, 0.95), (1.0, 0.9)])
def test_gae_interior_masks(seed, gl):
    """Observation tokens inside rows: verl skips them (carries V and A); so do ours, loop and scan."""
    g = torch.Generator().manual_seed(150 + seed)
    B, T = 5, 12
    mask = (torch.rand(B, T, generator=g) > 0.3).to(F64)
    mask[:, 0] = 1.0
    mask[1, 7:] = 0.0  # right padding too
    rewards = torch.randn(B, T, generator=g, dtype=F64) * mask
    values = torch.randn(B, T, generator=g, dtype=F64)
    for impl in (gae, gae_scan):
        adv, ret = impl(rewards, values, mask, *gl)
        v_adv, v_ret = core_algos.compute_gae_advantage_return(rewards, values, mask, *gl)
        m = mask.bool()
        _close(ret[m], v_ret[m], f"{impl.__name__} returns with interior masks")
        _close(whiten(adv, mask)[m], v_adv[m], f"{impl.__name__} advantages with interior masks", rtol=1e-7, atol=1e-8)


def test_gae_issue_reproducer():
    mask = torch.tensor([[1, 1, 0, 0, 1]], dtype=F64)
    rewards = torch.tensor([[0, 0, 0, 0, 1]], dtype=F64)
    values = torch.tensor([[0.5, 0.5, 9, 9, 0.5]], dtype=F64)
    _, v_ret = core_algos.compute_gae_advantage_return(rewards, values, mask, 1.0, 1.0)
    adv, ret = gae(rewards, values, mask, 1.0, 1.0)
    assert adv[0].tolist() == [0.5, 0.5, 0.0, 0.0, 0.5]
    assert (v_ret - values)[0, :2].tolist() == [0.5, 0.5]  # verl's raw advantage = return - V


def test_gae_masked_positions_deliberate_difference():
    mask = torch.tensor([[1, 1, 0, 0, 1]], dtype=F64)
    rewards = torch.tensor([[0, 0, 0, 0, 1]], dtype=F64)
    values = torch.tensor([[0.5, 0.5, 9, 9, 0.5]], dtype=F64)
    _, v_ret = core_algos.compute_gae_advantage_return(rewards, values, mask, 1.0, 1.0)
    _, ret = gae(rewards, values, mask, 1.0, 1.0)
    assert ret[0, 2:4].tolist() == [0.0, 0.0]
    assert (v_ret - values)[0, 2:4].tolist() == [0.5, 0.5]  # verl leaves the carried advantage there


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
    ours, _ = ppo_clip_loss(logp, logp_old, adv, mask, clip_low=clip[0], clip_high=clip[1], dual_clip=3.0, agg=agg,
                            norm_constant=C_NORM)
    theirs, _ = core_algos.compute_policy_loss_vanilla(logp_old, logp, adv, mask, loss_agg_mode=agg,
                                                       config=_actor_cfg(*clip))
    _close(ours, theirs, f"policy loss agg={agg} clip={clip}", rtol=1e-7)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("agg", AGGS)
@pytest.mark.parametrize("holes", [False, True])
def test_aggregation_registry(seed, agg, holes):
    """Including interior zeros and an all-empty row: verl excludes empty rows from its seq-mean modes too."""
    g = torch.Generator().manual_seed(500 + seed)
    _, _, _, mask = _batch(500 + seed, holes=holes)
    x = torch.randn(mask.shape, generator=g, dtype=F64)
    _close(aggregate(x, mask, agg, norm_constant=C_NORM),
           core_algos.agg_loss(x, mask, agg, loss_scale_factor=C_NORM), f"aggregate {agg}", rtol=1e-7)


def test_aggregation_global_batch_size_deliberate_difference():
    """The trainer path: global_batch_size = all B rows, so verl's seq-mean modes divide by B, empty rows included."""
    g = torch.Generator().manual_seed(520)
    _, _, _, mask = _batch(520, holes=True)          # the last row is empty
    x = torch.randn(mask.shape, generator=g, dtype=F64)
    B, live = mask.shape[0], int((mask.sum(-1) > 0).sum())
    assert live < B
    for agg in ("seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm"):
        theirs = core_algos.agg_loss(x, mask, agg, global_batch_size=B, loss_scale_factor=C_NORM)
        _close(aggregate(x, mask, agg, norm_constant=C_NORM) * live / B, theirs, f"{agg} with global_batch_size",
               rtol=1e-7)
    theirs = core_algos.agg_loss(x, mask, "token-mean", batch_num_tokens=mask.sum())
    _close(aggregate(x, mask, "token-mean"), theirs, "token-mean with the global token count", rtol=1e-7)


def test_sum_norm_needs_a_constant_deliberate_difference():
    _, _, _, mask = _batch(510)
    x = torch.ones_like(mask)
    with pytest.raises(ValueError, match="norm_constant"):
        aggregate(x, mask, "seq-mean-token-sum-norm")
    wide = torch.nn.functional.pad(mask, (0, 9))
    a = float(core_algos.agg_loss(x, mask, "seq-mean-token-sum-norm"))
    b = float(core_algos.agg_loss(torch.ones_like(wide), wide, "seq-mean-token-sum-norm"))
    assert abs(b - a * mask.shape[1] / wide.shape[1]) < 1e-12  # verl's default follows the padded width


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


def test_gspo_clamp_deliberate_difference():
    """A stale sequence (mean log-ratio 15, A < 0): verl's ratio stops at e^10, ours at e^20; below 10 they agree."""
    mask = torch.ones(1, 4, dtype=F64)
    logp_old = torch.full((1, 4), -20.0, dtype=F64)
    adv = torch.tensor([-1.0], dtype=F64)
    cfg = _actor_cfg(0.2, 0.2)
    for shift, ours_log, verl_log in ((15.0, 15.0, 10.0), (5.0, 5.0, 5.0)):
        ours, _ = gspo_loss(logp_old + shift, logp_old, adv, mask, clip_low=0.2, clip_high=0.2)
        theirs, _ = core_algos.compute_policy_loss_gspo(logp_old, logp_old + shift, adv[:, None] * mask, mask,
                                                        loss_agg_mode="seq-mean-token-mean", config=cfg)
        _close(ours, math.exp(ours_log), "ours: -A·s, log s clamped to [-20, 20]", rtol=1e-9)
        _close(theirs, math.exp(verl_log), "verl: -A·s, log s clamped at 10", rtol=1e-9)


def test_dr_grpo_group_of_one_deliberate_difference():
    scores = torch.tensor([0.7, -0.2, 1.5], dtype=F64)
    theirs, _ = core_algos.compute_grpo_outcome_advantage(scores[:, None], torch.ones(3, 1, dtype=F64),
                                                          np.arange(3), norm_adv_by_std_in_grpo=False)
    _close(theirs[:, 0], scores, "verl: a one-answer group keeps its raw score")
    _close(grpo_advantages(scores, 1, scale_by_std=False), torch.zeros(3, dtype=F64), "ours: its own baseline, 0")


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("kind", sorted(KL_ESTIMATORS))
def test_kl_estimators(seed, kind):
    logp, logp_ref, _, _ = _batch(700 + seed, spread=0.5)
    assert float((logp_ref - logp).max()) < 2.0  # stay inside verl's clamps (see the test below)
    _close(kl_estimate(logp, logp_ref, kind), core_algos.kl_penalty_forward(logp, logp_ref, kind), f"KL {kind}")
    _close(kl_estimate(logp, logp_ref, kind, clamp=10.0), core_algos.kl_penalty_forward(logp, logp_ref, kind),
           f"KL {kind} with verl's clamp")


@pytest.mark.parametrize("seed", SEEDS[:5])
@pytest.mark.parametrize("kind", ["k1+", "k2+", "k3+", "abs+"])
def test_kl_straight_through_gradients(seed, kind):
    """verl's '+' kinds: the same value and the same gradient (k2's) as ours; verl clamps only k3's value."""
    logp, logp_ref, _, _ = _batch(750 + seed, spread=1.5)
    a = logp.clone().requires_grad_(True)
    b = logp.clone().requires_grad_(True)
    ours = kl_penalty(a, logp_ref, kind, clamp=10.0 if kind == "k3+" else None)
    theirs = core_algos.kl_penalty(b, logp_ref, kind)
    _close(ours.detach(), theirs.detach(), f"{kind} value")
    (ga,) = torch.autograd.grad(ours.sum(), a)
    (gb,) = torch.autograd.grad(theirs.sum(), b)
    _close(ga, gb, f"{kind} gradient")


def test_k3_fp32_small_log_ratio_deliberate_difference():
    g = torch.Generator().manual_seed(760)
    lr = (torch.rand(20000, generator=g) * 2e-3 - 1e-3).float()
    zero = torch.zeros_like(lr)
    ours = kl_estimate(lr, zero, "k3")
    theirs = core_algos.kl_penalty_forward(lr, zero, "k3")
    assert bool((ours >= 0).all())
    assert float((theirs < 0).float().mean()) > 0.01  # exp(x) - 1 cancels in fp32 (about 2% of these come out negative)


def test_kl_k3_clamp_deliberate_difference():
    logp = torch.tensor([-30.0], dtype=F64)
    logp_ref = torch.tensor([-1.0], dtype=F64)  # log rho = 29: verl clamps it to 20, then k3 to 10
    ours = float(kl_estimate(logp, logp_ref, "k3"))
    theirs = float(core_algos.kl_penalty_forward(logp, logp_ref, "k3"))
    assert theirs == 10.0 and ours > 1e12


# ---------------------------------------------------------------- the newer estimators
class _AlgoCfg(dict):
    """The attribute access verl's advantage estimators use on an AlgoConfig."""

    __getattr__ = dict.get


@pytest.mark.parametrize("seed", SEEDS)
def test_reinforce_pp(seed):
    _, _, _, mask = _batch(800 + seed, holes=True)
    mask[-1, 0] = 1.0  # no empty row here: verl's masked_whiten counts every token
    g = torch.Generator().manual_seed(800 + seed)
    rewards = torch.randn(mask.shape, generator=g, dtype=F64) * mask
    ours = reinforce_pp_advantages(rewards, mask, 0.97)
    theirs, _ = core_algos.compute_reinforce_plus_plus_outcome_advantage(rewards, mask, config=_AlgoCfg(gamma=0.97))
    _close(ours, theirs, "REINFORCE++ advantages", rtol=1e-7, atol=1e-8)


@pytest.mark.parametrize("seed", SEEDS)
def test_reinforce_pp_baseline_and_remax(seed):
    g = torch.Generator().manual_seed(850 + seed)
    G, n = 4, 5
    _, _, _, mask = _batch(850 + seed, B=G * n)
    scores = torch.randn(G * n, generator=g, dtype=F64)
    tlr = torch.zeros_like(mask)
    last = mask.sum(-1).long() - 1
    tlr[torch.arange(G * n), last] = scores
    index = np.repeat(np.arange(n), G)
    theirs, _ = core_algos.compute_reinforce_plus_plus_baseline_outcome_advantage(tlr, mask, index)
    _close(reinforce_pp_baseline_advantages(scores, G, mask), theirs, "REINFORCE++-baseline", rtol=1e-7, atol=1e-8)
    greedy = torch.randn(G * n, generator=g, dtype=F64)
    v_adv, _ = core_algos.compute_remax_outcome_advantage(tlr, greedy, mask)
    # verl's ReMax returns reward-to-go minus the baseline on every token; with the score on the last token
    # that is (score - greedy) on every response token, which is ours broadcast
    _close(remax_advantages(scores, greedy)[:, None] * mask, v_adv, "ReMax")


def test_gpg_alpha_deliberate_difference():
    # 0/1 scores, groups of 2: group 0 = {1, 0} (valid), group 1 = {1, 1} (all equal), group 2 = {0, 0}
    scores = torch.tensor([1.0, 0.0, 1.0, 1.0, 0.0, 0.0], dtype=F64)
    tlr = scores[:, None].clone()
    index = np.repeat(np.arange(3), 2)
    theirs, _ = core_algos.compute_gpg_outcome_advantage(tlr, torch.ones_like(tlr), index)
    ours = gpg_advantages(scores, 2)
    # both are alpha * (r - group mean); the paper's alpha = N / N_valid = 6 / 2, verl's = N / #nonzero scores = 6 / 3
    assert torch.allclose(ours, torch.tensor([1.5, -1.5, 0, 0, 0, 0], dtype=F64))
    assert torch.allclose(theirs[:, 0], torch.tensor([1.0, -1.0, 0, 0, 0, 0], dtype=F64))


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-mean"])
def test_cispo_and_gpg_losses(seed, agg):
    logp, logp_old, adv, mask = _batch(900 + seed, spread=0.5)
    cfg = _actor_cfg(0.2, 0.28)
    a = logp.clone().requires_grad_(True)
    b = logp.clone().requires_grad_(True)
    ours, st = cispo_loss(a, logp_old, adv, mask, clip_low=0.2, clip_high=0.28, agg=agg)
    theirs, met = core_algos.compute_policy_loss_cispo(logp_old, b, adv, mask, loss_agg_mode=agg, config=cfg)
    _close(ours.detach(), theirs.detach(), f"CISPO {agg}", rtol=1e-7)
    (ga,) = torch.autograd.grad(ours, a)
    (gb,) = torch.autograd.grad(theirs, b)
    _close(ga, gb, f"CISPO gradient {agg}", rtol=1e-7)
    assert abs(st["clip_frac"] - met["actor/pg_clipfrac"]) < 1e-9
    from impls.rl.policy_losses import gpg_loss

    ours_g, _ = gpg_loss(logp, logp_old, adv, mask, agg=agg)
    theirs_g, _ = core_algos.compute_policy_loss_gpg(logp_old, logp, adv, mask, loss_agg_mode=agg, config=cfg)
    _close(ours_g, theirs_g, f"GPG loss {agg}", rtol=1e-7)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("threshold", ["2.0", "0.5_2.0"])
def test_rollout_is_weights(seed, threshold):
    """TIS (one threshold) and IcePop masking (lower_upper), token level, against verl's rollout correction."""
    from verl.trainer.ppo.rollout_corr_helper import compute_rollout_correction_weights

    logp, logp_roll, _, mask = _batch(950 + seed, spread=0.6)
    theirs, _ = compute_rollout_correction_weights(logp - logp_roll, mask, "token", threshold)
    if "_" in threshold:
        lo, hi = map(float, threshold.split("_"))
        ours = rollout_is_weights(logp, logp_roll, mask, mode="mask", lower=lo, upper=hi)
    else:
        ours = rollout_is_weights(logp, logp_roll, mask, mode="truncate", upper=float(threshold))
    _close(ours, theirs, f"rollout IS weights {threshold}")
    seq_t, _ = compute_rollout_correction_weights(logp - logp_roll, mask, "sequence", "1e9")
    _close(rollout_is_weights(logp, logp_roll, mask, level="sequence", upper=None), seq_t, "sequence-level IS", rtol=1e-7)
