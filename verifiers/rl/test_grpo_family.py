"""One loss, five algorithms: what exactly differs between GRPO, Dr. GRPO, DAPO, RLOO, GSPO.
Oracles: sympy, fp64 hand formulas, autograd of hand-written objectives."""

from __future__ import annotations

import pytest
import sympy as sp
import torch
from hypothesis import given
from hypothesis import strategies as st

from impls.rl.aggregation import aggregate
from impls.rl.grpo import grpo_advantages, rloo_advantages
from impls.rl.kl import kl_estimate
from impls.rl.ppo import ppo_clip_loss, ppo_clip_objective_per_token

from verifiers.katas import ppo_clip_loss as kata  # noqa: E402

F64 = torch.float64


def _naive_grpo(r: torch.Tensor, eps: float) -> torch.Tensor:
    """The textbook one-liner (r - mean) / (std + eps) on one group, as most codebases write it."""
    return (r - r.mean()) / (r.std() + eps)


@pytest.mark.claim("gf.equal-rewards-zero-advantage")
def test_equal_rewards(evidence):
    # (a) the textbook formula in fp32 is not exactly 0: the mean of equal values is off by an ulp
    found = None
    for g in (3, 5, 6, 7):
        for k in range(1, 2000):
            v = k / 7.0
            r = torch.full((g,), v, dtype=torch.float32)
            naive = _naive_grpo(r, 1e-6)
            if float(naive.abs().max()) > 0.01:
                found = {"group_size": g, "reward": v, "naive_advantage": float(naive[0]),
                         "mean_minus_reward": float(r.mean() - r[0]), "std": float(r.std())}
                break
        if found:
            break
    assert found is not None, "expected an fp32 group of equal rewards with a visibly non-zero advantage"
    # the figures the entry quotes: G=3, r=5/7 is the first hit (0.056); r=20/7 gives 0.18; G=7, r=1794/7 gives 0.9
    assert (found["group_size"], found["reward"]) == (3, 5 / 7)
    quoted = {}
    for g, k, lo, hi in ((3, 5, 0.05, 0.06), (3, 20, 0.18, 0.19), (7, 1794, 0.89, 0.91)):
        r = torch.full((g,), k / 7.0, dtype=torch.float32)
        a = float(_naive_grpo(r, 1e-6).abs().max())
        assert lo < a < hi, (g, k, a)
        assert torch.equal(grpo_advantages(r, g), torch.zeros_like(r))
        quoted[f"G={g},r={k}/7"] = a
    evidence["naive_fp32_advantage_examples"] = quoted
    r = torch.full((found["group_size"],), found["reward"], dtype=torch.float32)
    assert torch.equal(grpo_advantages(r, len(r)), torch.zeros_like(r)), "the reference forces exact 0"
    # (b) without eps the formula is 0/0
    one = torch.ones(4, dtype=F64)
    assert bool(torch.isnan((one - one.mean()) / one.std()).all())
    # (c) the group still contributes: the KL term gives a gradient, and token-mean counts its tokens
    T = 3
    mask = torch.ones(2, T, dtype=F64)
    adv = torch.tensor([[1.0], [0.0]], dtype=F64).expand(2, T)  # group 2 has equal rewards
    logp_ref = torch.full((2, T), -1.2, dtype=F64)
    lp = torch.full((2, T), -1.0, dtype=F64, requires_grad=True)
    pg, _ = ppo_clip_loss(lp, lp.detach(), adv, mask, agg="token-mean")
    (pg + 0.1 * aggregate(kl_estimate(lp, logp_ref, "k3"), mask, "token-mean")).backward()
    assert float(lp.grad[1].abs().min()) > 0, "KL gradient on the zero-advantage sequence"
    lp2 = lp.detach()[:1].clone().requires_grad_(True)
    ppo_clip_loss(lp2, lp2.detach(), adv[:1], mask[:1], agg="token-mean")[0].backward()
    lp3 = lp.detach().clone().requires_grad_(True)
    ppo_clip_loss(lp3, lp3.detach(), adv, mask, agg="token-mean")[0].backward()
    dilution = float(lp3.grad[0, 0] / lp2.grad[0, 0])
    assert abs(dilution - 0.5) < 1e-12
    evidence["counterexample"] = found
    evidence["kl_grad_on_zero_adv_tokens"] = float(lp.grad[1, 0])
    evidence["pg_grad_scale_with_zero_adv_group_in_batch"] = dilution


@pytest.mark.claim("gf.rloo-scaled-grpo")
def test_rloo_equals_scaled_mean_centred(evidence):
    for K in range(2, 7):
        r = sp.symbols(f"r0:{K}")
        mean = sum(r) / K
        for i in range(K):
            loo = r[i] - (sum(r) - r[i]) / (K - 1)
            assert sp.simplify(loo - sp.Rational(K, K - 1) * (r[i] - mean)) == 0
    # the reference implementation agrees with the symbolic identity on random scores
    g = torch.Generator().manual_seed(0)
    worst = 0.0
    for K in range(2, 7):
        s = torch.randn(5 * K, generator=g, dtype=F64)
        want = K / (K - 1) * (s.view(5, K) - s.view(5, K).mean(1, keepdim=True)).reshape(-1)
        worst = max(worst, float((rloo_advantages(s, K) - want).abs().max()))
        dr = grpo_advantages(s, K, scale_by_std=False)
        worst = max(worst, float((rloo_advantages(s, K) - K / (K - 1) * dr).abs().max()))
    assert worst < 1e-12
    evidence["group_sizes_proved"] = list(range(2, 7))
    evidence["max_abs_error"] = worst


@pytest.mark.claim("gf.token-mean-equals-seq-mean-same-length")
def test_token_mean_equals_seq_mean_for_equal_lengths(evidence):
    @given(st.integers(1, 5), st.integers(1, 6), st.integers(0, 10_000))
    def check(B, L, seed):
        g = torch.Generator().manual_seed(seed)
        T = L + 2
        x = torch.randn(B, T, generator=g, dtype=F64)
        mask = torch.zeros(B, T, dtype=F64)
        mask[:, :L] = 1
        a, b = aggregate(x, mask, "token-mean"), aggregate(x, mask, "seq-mean-token-mean")
        want = float(x[:, :L].mean())
        assert abs(float(a) - want) < 1e-12 and abs(float(b) - want) < 1e-12, (B, L, seed, float(a), float(b), want)

    check()
    # with unequal lengths they differ
    x = torch.tensor([[1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0]], dtype=F64)
    mask = torch.tensor([[1, 1, 1, 1], [1, 0, 0, 0]], dtype=F64)
    tm, sm = float(aggregate(x, mask, "token-mean")), float(aggregate(x, mask, "seq-mean-token-mean"))
    assert abs(tm - 0.8) < 1e-12 and abs(sm - 0.5) < 1e-12
    evidence["unequal_lengths_token_mean"] = tm
    evidence["unequal_lengths_seq_mean"] = sm


@pytest.mark.claim("gf.dual-clip-bound")
def test_dual_clip_bound(evidence):
    c = 3.0
    ratio = torch.linspace(0.01, 20.0, 4001, dtype=F64)
    worst = 0.0
    for a in (-2.0, -0.5, -0.01):
        adv = torch.full_like(ratio, a)
        loss = ppo_clip_objective_per_token(ratio, adv, 0.2, 0.2, c)
        # independent formula: -max(min(rA, clip(r)A), cA) for A < 0
        want = -torch.maximum(torch.minimum(ratio * a, ratio.clamp(0.8, 1.2) * a), torch.full_like(ratio, c * a))
        worst = max(worst, float((loss - want).abs().max()))
        assert float(loss.max()) <= c * abs(a) + 1e-12
        assert abs(float(loss[-1]) - c * abs(a)) < 1e-12  # the bound is reached for large ratios
        plain = ppo_clip_objective_per_token(ratio, adv, 0.2, 0.2, None)
        assert float(plain.max()) > c * abs(a)  # without dual clip the loss grows with r
    assert worst < 1e-12
    # the dual clip is a bound for A < 0 only: a positive-advantage token keeps the ordinary clipped
    # loss -min(rA, clip(r)A) and its gradient (a dual clip applied there would pin the loss at -cA, gradient 0)
    lr = torch.linspace(-1.0, 1.5, 251, dtype=F64)[None].clone().requires_grad_(True)
    pos = torch.full_like(lr, 1.5)
    with_dual, _ = ppo_clip_loss(lr, torch.zeros_like(lr), pos, torch.ones_like(pos), dual_clip=c, agg="token-sum")
    (g_dual,) = torch.autograd.grad(with_dual, lr)
    r = lr.detach().exp()
    want_pos = -torch.minimum(r * 1.5, r.clamp(0.8, 1.2) * 1.5).sum()
    want_grad = torch.where(r > 1.2, 0.0, -r * 1.5)
    assert abs(float(with_dual.detach()) - float(want_pos)) < 1e-9, (float(with_dual.detach()), float(want_pos))
    assert torch.allclose(g_dual, want_grad, atol=1e-12)
    assert int((g_dual != 0).sum()) > 100  # most positive-advantage tokens still get a gradient
    kata.prop_dual_clip(ppo_clip_loss)  # the kata's dual-clip property, mixed signs and ratios up to e^1.6
    evidence["c"] = c
    evidence["max_abs_error_vs_formula"] = worst
    evidence["positive_advantage_tokens_with_gradient"] = int((g_dual != 0).sum())


@pytest.mark.claim("gf.clip-higher-upper-bound")
def test_clip_higher_gradient_window(evidence):
    ratios = torch.tensor([0.5, 0.79, 0.81, 1.0, 1.19, 1.21, 1.27, 1.279, 1.281, 1.3, 2.0], dtype=F64)
    lp_old = torch.zeros(1, len(ratios), dtype=F64)
    lp = ratios.log()[None].clone().requires_grad_(True)
    mask = torch.ones_like(lp_old)
    adv = torch.ones_like(lp_old)
    ppo_clip_loss(lp, lp_old, adv, mask, clip_low=0.2, clip_high=0.28)[0].backward()
    has_grad = (lp.grad[0] != 0).tolist()
    want = [bool(r <= 1.28) for r in ratios.tolist()]
    assert has_grad == want, (ratios.tolist(), has_grad)
    evidence["ratios"] = ratios.tolist()
    evidence["has_gradient"] = has_grad


@pytest.mark.claim("dr-grpo.length-bias")
def test_dr_grpo_removes_length_and_difficulty_bias(evidence):
    # one right (A>0) and one wrong (A<0) answer at two lengths each; per-token gradient weight of the loss
    lengths = [2, 8, 2, 8]
    adv = torch.tensor([1.0, 1.0, -1.0, -1.0], dtype=F64)
    T = max(lengths)
    mask = torch.zeros(4, T, dtype=F64)
    for i, n in enumerate(lengths):
        mask[i, :n] = 1

    def weights(agg, **kw):
        lp = torch.zeros(4, T, dtype=F64, requires_grad=True)
        aggregate(-adv[:, None] * lp, mask, agg, **kw).backward()
        return (-lp.grad[:, 0]).tolist()  # ascent weight on the first token of each answer

    grpo = weights("seq-mean-token-mean")
    dr = weights("seq-mean-token-sum-norm", norm_constant=T)
    # GRPO: short right answers rewarded 4x more per token; long wrong answers penalised 4x less per token
    assert abs(grpo[0] / grpo[1] - 4) < 1e-12 and abs(grpo[2] / grpo[3] - 4) < 1e-12
    # Dr. GRPO: the per-token weight depends on A only
    assert dr[0] == dr[1] and dr[2] == dr[3]
    # difficulty bias: dividing by the std inflates a nearly unanimous group
    easy = torch.tensor([1.0, 1.0, 1.0, 0.9], dtype=F64)
    split = torch.tensor([1.0, 0.0, 1.0, 0.0], dtype=F64)
    a_easy, a_split = grpo_advantages(easy, 4), grpo_advantages(split, 4)
    d_easy, d_split = grpo_advantages(easy, 4, scale_by_std=False), grpo_advantages(split, 4, scale_by_std=False)
    assert float(a_easy.abs().max()) > float(a_split.abs().max())  # GRPO: tiny reward gap, big advantage
    assert float(d_easy.abs().max()) < float(d_split.abs().max())  # Dr. GRPO keeps the reward scale
    evidence["grpo_per_token_weight"] = dict(zip(["right_short", "right_long", "wrong_short", "wrong_long"], grpo))
    evidence["dr_grpo_per_token_weight"] = dict(zip(["right_short", "right_long", "wrong_short", "wrong_long"], dr))
    evidence["max_abs_adv_easy_vs_split_grpo"] = [float(a_easy.abs().max()), float(a_split.abs().max())]


@pytest.mark.claim("grpo.advantage.group-standardised", "gf.gspo-ratio-geometric-mean", "gf.rloo-scaled-grpo")
def test_family_follows_the_input_device(device, evidence):
    """The references run where their inputs live (``--device``) and agree with fp64 CPU results."""
    from impls.rl.gspo import gspo_sequence_ratio

    g = torch.Generator().manual_seed(7)
    scores = torch.randn(24, generator=g)
    lp_old = -torch.rand(4, 6, generator=g) * 3
    lp = lp_old + 0.2 * torch.randn(4, 6, generator=g)
    mask = (torch.arange(6)[None, :] < torch.tensor([6, 3, 1, 5])[:, None]).float()
    on = lambda t: t.to(device)  # noqa: E731
    adv = grpo_advantages(on(scores), 6)
    loo = rloo_advantages(on(scores), 6)
    s = gspo_sequence_ratio(on(lp), on(lp_old), on(mask))
    assert adv.device.type == loo.device.type == s.device.type == torch.device(device).type
    assert adv.dtype == torch.float32 and s.dtype == torch.float32
    ref_adv = grpo_advantages(scores.double(), 6)
    ref_s = torch.exp(((lp.double() - lp_old.double()) * mask).sum(-1) / mask.sum(-1))
    err = max(float((adv.cpu().double() - ref_adv).abs().max()), float((s.cpu().double() - ref_s).abs().max()),
              float((loo.cpu().double() - rloo_advantages(scores.double(), 6)).abs().max()))
    assert err < 1e-5
    evidence["device"] = str(device)
    evidence["max_abs_error_vs_fp64_cpu"] = err
