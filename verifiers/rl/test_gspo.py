"""GSPO: sequence-level ratio and clip; checked against fp64 products of token ratios and
hand-derived gradients."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from impls.rl.gspo import gspo_loss, gspo_sequence_ratio, gspo_token_ratio

F64 = torch.float64


def _batch(seed: int, B: int = 4, T: int = 7, spread: float = 0.3):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, T + 1, (B,), generator=g)
    mask = (torch.arange(T)[None, :] < lengths[:, None]).to(F64)
    logp_old = -torch.rand(B, T, generator=g, dtype=F64) * 3
    logp = logp_old + spread * torch.randn(B, T, generator=g, dtype=F64)
    return logp, logp_old, mask, lengths


@pytest.mark.claim("gf.gspo-ratio-geometric-mean")
def test_sequence_ratio_is_geometric_mean(evidence):
    worst = [0.0]

    @given(st.integers(min_value=0, max_value=10_000))
    def check(seed):
        logp, logp_old, mask, lengths = _batch(seed)
        s = gspo_sequence_ratio(logp, logp_old, mask)
        for i in range(logp.shape[0]):
            n = int(lengths[i])
            prod = 1.0
            for t in range(n):  # product of token ratios, then the n-th root
                prod *= math.exp(float(logp[i, t])) / math.exp(float(logp_old[i, t]))
            want = prod ** (1.0 / n)
            err = abs(float(s[i]) - want) / want
            worst[0] = max(worst[0], err)
            assert err < 1e-10, f"seed={seed}, seq {i}: expected {want}, got {float(s[i])}"

    check()
    # padding must not count: garbage in padded slots leaves the ratio unchanged
    logp, logp_old, mask, _ = _batch(1)
    noisy = torch.where(mask > 0, logp, torch.full_like(logp, 123.0))
    assert torch.equal(gspo_sequence_ratio(noisy, logp_old, mask), gspo_sequence_ratio(logp, logp_old, mask))
    evidence["max_relative_error"] = worst[0]


@pytest.mark.claim("gspo.not-pairwise")
def test_gspo_is_a_clipped_policy_gradient_not_pairwise(evidence):
    logp, logp_old, mask, lengths = _batch(3, B=4, spread=0.0)
    adv = torch.tensor([1.2, -0.4, 0.5, -1.3], dtype=F64)
    # (1) the group loss is the mean of per-sequence terms: no term couples two responses
    whole, _ = gspo_loss(logp, logp_old, adv, mask)
    alone = [float(gspo_loss(logp[i : i + 1], logp_old[i : i + 1], adv[i : i + 1], mask[i : i + 1])[0]) for i in range(4)]
    assert abs(float(whole) - sum(alone) / 4) < 1e-12
    # (2) at s_i = 1 its gradient is the length-normalised policy gradient -(1/G) sum_i A_i/|y_i| sum_t grad log pi
    lp = logp.clone().requires_grad_(True)
    gspo_loss(lp, logp_old, adv, mask)[0].backward()
    hand = -(adv[:, None] / lengths[:, None].to(F64)) * mask / 4
    assert torch.allclose(lp.grad, hand, atol=1e-12)
    # (3) a pairwise logistic (DPO-style) loss is not linear in the advantages; GSPO at s = 1 is
    doubled, _ = gspo_loss(logp, logp_old, 2 * adv, mask)
    assert abs(float(doubled) - 2 * float(whole)) < 1e-12
    pair = lambda a: float(-torch.nn.functional.logsigmoid(a[0] - a[1]))  # noqa: E731
    assert abs(pair(2 * adv) - 2 * pair(adv)) > 1e-2
    evidence["counterexample"] = {
        "advantages": adv.tolist(), "gspo_loss(group)": float(whole), "mean of per-sequence losses": sum(alone) / 4,
        "gspo_loss(2A)/gspo_loss(A)": float(doubled) / float(whole),
    }


@pytest.mark.claim("gspo.clip.sequence-level")
def test_whole_sequence_is_clipped(evidence):
    # sequence 0: A > 0, mean log-ratio 0.01 > log(1 + 4e-4) although one token's ratio is below 1
    logp_old = torch.full((2, 4), -1.0, dtype=F64)
    delta = torch.tensor([[0.03, 0.03, 0.03, -0.05], [0.0, 0.0, 0.0, 0.0]], dtype=F64)
    mask = torch.ones(2, 4, dtype=F64)
    adv = torch.tensor([1.0, -1.0], dtype=F64)
    lp = (logp_old + delta).requires_grad_(True)
    loss, stats = gspo_loss(lp, logp_old, adv, mask)
    loss.backward()
    s = gspo_sequence_ratio(lp.detach(), logp_old, mask)
    assert float(s[0]) > 1 + 4e-4
    assert torch.all(lp.grad[0] == 0), "every token of a clipped sequence loses its gradient"
    assert torch.all(lp.grad[1] != 0), "an unclipped sequence keeps it"
    # a token-level PPO clip with the same range would keep the gradient of token 3 (ratio < 1, A > 0)
    tok_ratio = torch.exp(delta[0, 3])
    assert float(tok_ratio) < 1
    # GSPO-token: same value as s_i on every token; gradient = s_i * A * grad log pi per token / |y|
    st_ = gspo_token_ratio(lp.detach(), logp_old, mask)
    assert torch.allclose(st_, s[:, None].expand_as(st_))
    evidence["s_0"] = float(s[0])
    evidence["token_ratio_of_token_3"] = float(tok_ratio)
    evidence["clip_frac"] = stats["clip_frac"]


@pytest.mark.claim("gspo.clip.sequence-level")
def test_clip_range_is_asymmetric_and_clip_frac_counts_the_favourable_side(evidence):
    """Defaults (3e-4, 4e-4): a sequence with A > 0 and 1 + 3e-4 < s < 1 + 4e-4 keeps its gradient (only the
    upper bound 1 + eps_high binds for A > 0); ``clip_frac`` counts sequences clipped on the side where the
    gradient is cut (A > 0 above the band, A < 0 below it), not every sequence outside the band."""
    logp_old = torch.full((4, 3), -2.0, dtype=F64)
    shift = torch.tensor([3.5e-4, 3.5e-4, 1e-2, -1e-2], dtype=F64)  # mean log-ratios: s = e^shift
    adv = torch.tensor([1.0, 1.0, -1.0, -1.0], dtype=F64)
    mask = torch.ones(4, 3, dtype=F64)
    lp = (logp_old + shift[:, None]).requires_grad_(True)
    loss, stats = gspo_loss(lp, logp_old, adv, mask)
    loss.backward()
    kept = [bool(torch.all(lp.grad[i] != 0)) for i in range(4)]
    # seq 0/1: inside (1 - 3e-4, 1 + 4e-4): kept; seq 2: A < 0, s > 1 + eps: kept (unclipped side);
    # seq 3: A < 0, s < 1 - eps: cut
    assert kept == [True, True, True, False], kept
    assert stats["clip_frac"] == 0.25, stats
    lp2 = (logp_old + shift[:, None]).requires_grad_(True)
    gspo_loss(lp2, logp_old, adv, mask, clip_low=3e-4, clip_high=None)[0].backward()  # symmetric 3e-4
    assert torch.all(lp2.grad[0] == 0), "with a symmetric 3e-4 band the same sequence is clipped"
    # GSPO-token: the sequence factor is a constant; each token's ratio moves only with its own log-prob
    lp3 = (logp_old + shift[:, None]).requires_grad_(True)
    w = torch.arange(12, dtype=F64).view(4, 3)
    (gspo_token_ratio(lp3, logp_old, mask) * w).sum().backward()
    s = torch.exp(shift)
    assert torch.allclose(lp3.grad, s[:, None] * w, atol=1e-12), lp3.grad
    evidence["gradient_kept_per_sequence"] = kept
    evidence["clip_frac"] = stats["clip_frac"]


@pytest.mark.claim("gspo.log-ratio-guard")
def test_stale_sequence_gives_a_finite_loss_and_gradient(evidence):
    """A sequence whose mean log-ratio exceeds log(fp32 max) would make s_i = inf: the guard keeps the loss and
    the gradient finite, and leaves ordinary ratios untouched."""
    overflow = math.log(torch.finfo(torch.float32).max)
    assert torch.isinf(torch.exp(torch.tensor(overflow + 1.0, dtype=torch.float32)))   # what an unguarded s_i gets
    mask = torch.ones(2, 3)
    logp_old = torch.full((2, 3), -95.0)
    adv = torch.tensor([-1.0, 1.0])                      # A < 0: the unclipped branch s·A is the one taken
    for shift in (overflow + 1.0, 94.0):                 # mean log-ratio just past the overflow, and well past it
        logp = (logp_old + shift).requires_grad_(True)
        loss, stats = gspo_loss(logp, logp_old, adv, mask, clip_low=0.2, clip_high=0.2)
        loss.backward()
        assert math.isfinite(float(loss)) and bool(torch.isfinite(logp.grad).all()), (shift, float(loss), logp.grad)
        s = gspo_sequence_ratio(logp.detach(), logp_old, mask)
        assert torch.allclose(s, torch.full((2,), math.exp(20.0)), rtol=1e-6)        # clamped at e^20
    # the guard binds only past |log s| = 20: an ordinary batch is unchanged (fp64, against the plain formula)
    logp, logp_old2, mask2, _ = _batch(5)
    plain = torch.exp(((logp - logp_old2) * mask2).sum(-1) / mask2.sum(-1))
    assert torch.allclose(gspo_sequence_ratio(logp, logp_old2, mask2), plain, rtol=1e-14)
    evidence.quote("log of the largest fp32 (the mean log-ratio at which s_i overflows)", quoted=88.7,
                   measured=overflow, digits=1)
    evidence["guard"] = {"clamp of log s_i": [-20, 20], "verl 0.9.1": "clamp(max=10) on the GSPO log-ratio",
                         "TRL 1.16": "no clamp"}
