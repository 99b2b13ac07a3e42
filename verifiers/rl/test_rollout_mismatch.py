"""Rollout/training mismatch: two log-prob sources for the same tokens, the bias of the uncorrected
policy gradient and its removal by importance weights. Exact expectations over the vocabulary (no
sampling noise): the rollout engine computes its distribution from bf16 logits, the trainer in fp32
(held in fp64 here so that the only difference is the bf16 rounding)."""

from __future__ import annotations

import math

import pytest
import torch

from impls.rl.ppo import ppo_clip_loss
from impls.rl.rollout_correction import rollout_is_weights

F64 = torch.float64
V = 4096


def _setting(seed: int = 0, scale: float = 4.0):
    """Logits whose largest values sit around 20-30 (where bf16's spacing is 0.125), a per-token advantage."""
    g = torch.Generator().manual_seed(seed)
    z = (torch.randn(V, generator=g, dtype=F64) * scale + 12.0).float().double()  # fp32 logits
    adv = torch.randn(V, generator=g, dtype=F64)
    logp_train = torch.log_softmax(z, -1)
    logp_roll = torch.log_softmax(z.to(torch.bfloat16).double(), -1)  # what a bf16 engine samples from
    return z, adv, logp_train, logp_roll


def _expected_grad(z, adv, logp_roll, weights):
    """E_{a ~ pi_roll}[w(a) A(a) grad_z log pi_train(a)], exactly: sum over the vocabulary."""
    zz = z.clone().requires_grad_(True)
    lp_train = torch.log_softmax(zz, -1)
    surrogate = (logp_roll.exp() * weights * adv * lp_train).sum()
    (g,) = torch.autograd.grad(surrogate, zz)
    return g


def _true_grad(z, adv):
    zz = z.clone().requires_grad_(True)
    (g,) = torch.autograd.grad((torch.softmax(zz, -1) * adv).sum(), zz)
    return g


@pytest.mark.claim("mismatch.uncorrected-gradient-biased")
def test_uncorrected_gradient_is_biased_and_is_weights_remove_it(evidence):
    z, adv, lp_t, lp_r = _setting()
    true = _true_grad(z, adv)
    mask = torch.ones(1, V, dtype=F64)
    rho = (lp_t - lp_r).exp()
    w_full = rollout_is_weights(lp_t[None], lp_r[None], mask, upper=None)[0]
    w_tis = rollout_is_weights(lp_t[None], lp_r[None], mask, mode="truncate", upper=2.0)[0]
    w_mis = rollout_is_weights(lp_t[None], lp_r[None], mask, mode="mask", lower=0.5, upper=2.0)[0]
    rel = {}
    for name, w in {"uncorrected": torch.ones(V, dtype=F64), "IS": w_full, "TIS C=2": w_tis,
                    "masked IS [0.5, 2]": w_mis}.items():
        rel[name] = float((_expected_grad(z, adv, lp_r, w) - true).norm() / true.norm())
    assert rel["uncorrected"] > 1e-3, rel
    assert rel["IS"] < 1e-12 and rel["TIS C=2"] < 1e-12 and rel["masked IS [0.5, 2]"] < 1e-12, rel
    assert float(rho.max()) < 2 and float(rho.min()) > 0.5  # bf16 rounding keeps every ratio inside the band
    p_r = lp_r.exp()
    mismatch = {
        "max_abs_logprob_diff_over_vocab": float((lp_t - lp_r).abs().max()),
        "expected_abs_logprob_diff_on_sampled_tokens": float((p_r * (lp_t - lp_r).abs()).sum()),
        "KL(pi_roll||pi_train)": float((p_r * (lp_r - lp_t)).sum()),
        "rho_range": [float(rho.min()), float(rho.max())],
        "max_logit": float(z.max()),
    }
    evidence.quote("relative bias of the uncorrected gradient", quoted=0.030, measured=rel["uncorrected"], digits=3)
    evidence.quote("largest |log pi_train - log pi_roll| over the vocabulary", quoted=0.068, measured=mismatch["max_abs_logprob_diff_over_vocab"], digits=3)
    evidence.quote("KL(pi_roll || pi_train)", quoted=4.6e-4, measured=mismatch["KL(pi_roll||pi_train)"], rel=0.01)
    evidence.quote("smallest ratio", quoted=0.94, measured=mismatch["rho_range"][0], digits=2)
    evidence.quote("largest ratio", quoted=1.07, measured=mismatch["rho_range"][1], digits=2)
    evidence["relative_gradient_error"] = rel
    evidence["mismatch_size"] = mismatch
    # other logit scales: still biased, by an amount that depends on the policy, not a constant of the engine
    by_scale = {}
    for scale in (1.0, 4.0, 8.0):
        z2, a2, t2, r2 = _setting(1, scale)
        tg = _true_grad(z2, a2)
        by_scale[scale] = {"max_logit": float(z2.max()),
                           "rel_bias": float((_expected_grad(z2, a2, r2, torch.ones(V, dtype=F64)) - tg).norm() / tg.norm())}
    assert all(v["rel_bias"] > 1e-3 for v in by_scale.values()), by_scale
    evidence["uncorrected_bias_by_logit_scale"] = by_scale


@pytest.mark.claim("mismatch.truncation-trades-bias")
def test_truncation_and_masking_when_ratios_are_large(evidence):
    """A rollout engine sampling at temperature 0.8 while the trainer scores at 1.0 (a larger mismatch):
    ratios now leave [0.5, 2]; full IS stays exact, TIS and masked IS keep a bias, smaller than none."""
    z, adv, lp_t, _ = _setting(2)
    lp_r = torch.log_softmax(z / 0.8, -1)
    true = _true_grad(z, adv)
    mask = torch.ones(1, V, dtype=F64)
    rho = (lp_t - lp_r).exp()
    out = {}
    for name, kw in {"uncorrected": None, "IS": dict(upper=None), "TIS C=2": dict(mode="truncate", upper=2.0),
                     "masked IS [0.5, 2]": dict(mode="mask", lower=0.5, upper=2.0)}.items():
        w = torch.ones(V, dtype=F64) if kw is None else rollout_is_weights(lp_t[None], lp_r[None], mask, **kw)[0]
        out[name] = float((_expected_grad(z, adv, lp_r, w) - true).norm() / true.norm())
    p_r = lp_r.exp()
    out_of_band = float((p_r * ((rho > 2) | (rho < 0.5)).double()).sum())
    assert out_of_band > 0.01
    assert out["IS"] < 1e-12
    assert 1e-6 < out["TIS C=2"] < out["uncorrected"] and 1e-6 < out["masked IS [0.5, 2]"] < out["uncorrected"], out
    evidence.quote("uncorrected, temperature 0.8", quoted=0.35, measured=out["uncorrected"], digits=2)
    evidence.quote("TIS C=2, temperature 0.8", quoted=0.0085, measured=out["TIS C=2"], digits=4)
    evidence.quote("masked IS [0.5, 2], temperature 0.8", quoted=0.042, measured=out["masked IS [0.5, 2]"], digits=3)
    evidence["relative_gradient_error"] = out
    evidence["rollout_mass_with_ratio_outside_[0.5,2]"] = out_of_band


@pytest.mark.claim("mismatch.support-not-fixable")
def test_top_p_rollout_leaves_a_bias_no_weight_can_fix(evidence):
    """Sampling from a top-p truncated distribution: tokens outside the nucleus are never sampled, so
    their share of the gradient is missing whatever weight the sampled tokens get."""
    z, adv, lp_t, _ = _setting(3, scale=2.0)
    p = lp_t.exp()
    order = torch.argsort(p, descending=True)
    keep = torch.zeros(V, dtype=torch.bool)
    keep[order[: int((p[order].cumsum(0) < 0.9).sum()) + 1]] = True
    p_r = torch.where(keep, p, torch.zeros_like(p))
    p_r = p_r / p_r.sum()
    lp_r = torch.where(keep, p_r.log(), torch.full_like(p_r, -1e30))
    true = _true_grad(z, adv)
    w = torch.where(keep, (lp_t - lp_r).exp(), torch.zeros_like(p))  # exact IS on the support
    got = _expected_grad(z, adv, p_r.clamp_min(0).log().clamp_min(-1e30), w)
    zz = z.clone().requires_grad_(True)
    lpt = torch.log_softmax(zz, -1)
    (missing,) = torch.autograd.grad((p * adv * lpt * (~keep).double()).sum(), zz)
    assert torch.allclose(true - got, missing, atol=1e-12)
    rel = float((got - true).norm() / true.norm())
    assert rel > 1e-2
    evidence.quote("relative bias left by top-p 0.9 sampling", quoted=0.055, measured=rel, digits=3)
    evidence["nucleus_size"] = int(keep.sum())


@pytest.mark.claim("mismatch.uncorrected-gradient-biased")
def test_weights_enter_the_ppo_loss(evidence):
    """The weights multiply the per-token PPO loss: gradient scaled token by token, masked positions ignored."""
    g = torch.Generator().manual_seed(4)
    lp = (-torch.rand(2, 5, generator=g, dtype=F64) * 3).requires_grad_(True)
    adv = torch.randn(2, 5, generator=g, dtype=F64)
    mask = torch.tensor([[1.0, 1, 1, 0, 0], [1, 1, 1, 1, 1]], dtype=F64)
    lp_roll = lp.detach() + 0.3 * torch.randn(2, 5, generator=g, dtype=F64)
    w = rollout_is_weights(lp.detach(), lp_roll, mask, mode="mask", lower=0.8, upper=1.25)
    assert bool((w[mask == 0] == 0).all())
    base, _ = ppo_clip_loss(lp, lp.detach(), adv, mask)
    (g0,) = torch.autograd.grad(base, lp)
    corr, _ = ppo_clip_loss(lp, lp.detach(), adv, mask, is_weights=w)
    (g1,) = torch.autograd.grad(corr, lp)
    assert torch.allclose(g1, g0 * w, atol=1e-15)
    rho = (lp.detach() - lp_roll).exp()
    kept = ((rho >= 0.8) & (rho <= 1.25) & (mask > 0))
    assert torch.equal(w > 0, kept) and int(kept.sum()) < int(mask.sum())
    seq = rollout_is_weights(lp.detach(), lp_roll, mask, level="sequence", upper=None)
    want = math.exp(float(((lp.detach() - lp_roll) * mask)[0].sum()))
    assert abs(float(seq[0, 0]) - want) < 1e-12 and float(seq[0, 4]) == 0.0
    evidence["tokens_dropped_by_masked_IS"] = int(mask.sum() - kept.sum())
