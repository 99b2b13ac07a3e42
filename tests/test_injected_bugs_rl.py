"""Injected bugs in the PPO / GAE reference code make the named claims' verifiers fail.

Each case swaps one implementation (``tests/faults.py`` patches the module attribute at
``pytest_configure`` time; the verifiers look the function up at call time) and runs
``mianjing verify`` on a few claims: the ones that depend on the broken behaviour must fail,
an unrelated one must still pass. The broken implementations live in this module.
"""

from __future__ import annotations

import functools
import importlib.util

import pytest
import torch

from mianjing.loader import load
from mianjing.paths import repo_root
from tests.injected import outcomes_with_fault

ROOT = repo_root()


# --------------------------------------------------------------------------- broken implementations


@functools.lru_cache(maxsize=1)
def _reference_ppo():
    """The unpatched ``ppo_clip_loss``: the module attribute is swapped, so load the file afresh."""
    import impls.rl.ppo as P

    spec = importlib.util.spec_from_file_location("_ppo_reference", P.__file__)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.ppo_clip_loss


def ppo_flipped_sign(logp, logp_old, advantages, mask, clip_low=0.2, clip_high=None, dual_clip=None, agg="token-mean"):
    """Returns +mean min(rA, clip(r)A): the objective instead of the loss."""
    loss, stats = _reference_ppo()(logp, logp_old, advantages, mask, clip_low, clip_high, dual_clip, agg)
    return -loss, stats


def ppo_ignores_mask(logp, logp_old, advantages, mask, clip_low=0.2, clip_high=None, dual_clip=None, agg="token-mean"):
    """Averages over every position, padding included."""
    return _reference_ppo()(logp, logp_old, advantages, torch.ones_like(mask), clip_low, clip_high, dual_clip, agg)


def gae_bootstrap_off_by_one(rewards, values, mask, gamma, lam):
    """delta_t = r_t + gamma V(s_t) - V(s_t): bootstraps from the current state instead of the next."""
    m = (mask != 0).double()
    r, v = rewards.double() * m, values.double() * m
    adv = torch.zeros_like(r)
    nxt = torch.zeros(r.shape[0], dtype=r.dtype)
    for t in range(r.shape[1] - 1, -1, -1):
        delta = r[:, t] + gamma * v[:, t] - v[:, t]
        nxt = (delta + gamma * lam * nxt) * m[:, t]
        adv[:, t] = nxt
    return adv, (adv + v) * m


def gae_ignores_mask(rewards, values, mask, gamma, lam):
    """Treats every position as a response token (bootstraps from padding), zeroes padding at the end."""
    r, v = rewards.double(), values.double()
    adv = torch.zeros_like(r)
    nxt_a = torch.zeros(r.shape[0], dtype=r.dtype)
    nxt_v = torch.zeros(r.shape[0], dtype=r.dtype)
    for t in range(r.shape[1] - 1, -1, -1):
        nxt_a = r[:, t] + gamma * nxt_v - v[:, t] + gamma * lam * nxt_a
        nxt_v = v[:, t]
        adv[:, t] = nxt_a
    m = (mask != 0).double()
    return adv * m, (adv + v) * m


# --------------------------------------------------------------------------- the check

ME = "tests.test_injected_bugs_rl"
CASES = [
    ("impls.rl.ppo:ppo_clip_loss=" + ME + ":ppo_flipped_sign",
     {"ppo.clip.code-formula", "ppo.clip-objective-sign", "ppo.clip.one-step-overshoot"},
     {"ppo.clip.positive-advantage-cap", "gae.closed-form-sum"}),
    ("impls.rl.ppo:ppo_clip_loss=" + ME + ":ppo_ignores_mask",
     {"ppo.clip.code-formula"},
     {"ppo.clip-objective-sign"}),
    ("impls.rl.gae:gae=" + ME + ":gae_bootstrap_off_by_one",
     {"gae.closed-form-sum", "gae.lambda0-td-bias-variance", "gae.lambda1-mc-bias-variance"},
     {"ppo.clip.code-formula"}),
    ("impls.rl.gae:gae=" + ME + ":gae_ignores_mask",
     {"gae.closed-form-sum", "gae.padding-independent"},
     {"ppo.clip.case3-gradient-cut"}),
]


@pytest.mark.parametrize("fault, must_fail, must_pass", CASES, ids=["ppo-sign", "ppo-mask", "gae-bootstrap", "gae-mask"])
def test_injected_bug_fails_named_claims(tmp_path, monkeypatch, fault, must_fail, must_pass):
    kb = load(ROOT).kb
    assert (must_fail | must_pass) <= set(kb.claim_index()), "the PPO/GAE claims were renamed: update this test"
    monkeypatch.setenv("MIANJING_MAX_EXAMPLES", "15")
    outcomes = outcomes_with_fault(ROOT, kb, must_fail | must_pass, fault, tmp_path, monkeypatch)
    assert {c for c in must_fail if outcomes.get(c) == "failed"} == must_fail, outcomes
    assert {c for c in must_pass if outcomes.get(c) == "passed"} == must_pass, outcomes
