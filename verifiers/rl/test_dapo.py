"""DAPO: dynamic sampling, token-level loss, soft overlong punishment.
Oracles: autograd of hand-written losses, sympy Piecewise, brute-force criteria."""

from __future__ import annotations

import pytest
import sympy as sp
import torch
from hypothesis import given
from hypothesis import strategies as st

from impls.rl.aggregation import aggregate
from impls.rl.grpo import dynamic_sampling_filter, grpo_advantages, overlong_penalty
from impls.rl.kl import kl_estimate

F64 = torch.float64


@pytest.mark.claim("dapo.dynamic-sampling-filters-extremes")
def test_dynamic_sampling_drops_all_correct_and_all_wrong(evidence):
    @given(st.integers(2, 8), st.lists(st.lists(st.sampled_from([0.0, 1.0]), min_size=8, max_size=8), min_size=1, max_size=4))
    def check(g, rows):
        scores = torch.tensor([x for row in rows for x in row[:g]])
        keep = dynamic_sampling_filter(scores, g).view(-1, g)
        for i, row in enumerate(rows):
            acc = sum(row[:g]) / g
            want = 0.0 < acc < 1.0  # DAPO Eq. 11: 0 < #correct < G
            assert bool(keep[i].all()) == want and bool(keep[i].any()) == want, (row[:g], keep[i].tolist())

    check()
    scores = torch.tensor([0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 1.0, 1.0, 1.0])
    keep = dynamic_sampling_filter(scores, 4)
    adv = grpo_advantages(scores, 4).view(3, 4)
    assert keep.view(3, 4)[:, 0].tolist() == [False, True, False]
    assert bool((adv[0] == 0).all() and (adv[2] == 0).all())
    evidence["counterexample"] = {
        "groups": ["all wrong (hardest prompt)", "mixed", "all correct"],
        "kept": keep.view(3, 4)[:, 0].tolist(),
        "note": "the hardest prompt is dropped, not given more samples",
    }


def _group_grad(scores, beta, kl_kind="k3", ent_coef=0.0):
    g = torch.Generator().manual_seed(0)
    G, T, V = len(scores), 4, 5
    logits = torch.randn(G, T, V, generator=g, dtype=F64, requires_grad=True)
    ref_logits = torch.randn(G, T, V, generator=g, dtype=F64)
    tokens = torch.randint(0, V, (G, T), generator=g)
    mask = torch.ones(G, T, dtype=F64)
    logp = torch.log_softmax(logits, -1).gather(-1, tokens[..., None]).squeeze(-1)
    logp_ref = torch.log_softmax(ref_logits, -1).gather(-1, tokens[..., None]).squeeze(-1)
    adv = grpo_advantages(torch.tensor(scores, dtype=F64), G)[:, None].expand(G, T)
    ratio = torch.exp(logp - logp.detach())
    loss = aggregate(-adv * ratio, mask, "seq-mean-token-mean")
    if beta:
        loss = loss + beta * aggregate(kl_estimate(logp, logp_ref, kl_kind), mask, "seq-mean-token-mean")
    if ent_coef:  # an entropy bonus, -c * H(pi(.|s_t)) per token
        ent = torch.distributions.Categorical(logits=logits).entropy()
        loss = loss - ent_coef * aggregate(ent, mask, "seq-mean-token-mean")
    loss.backward()
    return float(logits.grad.abs().max())


@pytest.mark.claim("dapo.zero-advantage-groups")
def test_uniform_group_has_no_policy_gradient(evidence):
    all_one = _group_grad([1.0] * 4, beta=0.0)
    all_zero = _group_grad([0.0] * 4, beta=0.0)
    mixed = _group_grad([1.0, 0.0, 1.0, 0.0], beta=0.0)
    with_kl = _group_grad([1.0] * 4, beta=0.04)
    with_entropy = _group_grad([1.0] * 4, beta=0.0, ent_coef=0.01)
    assert with_entropy > 1e-5
    evidence["max_grad_all_correct_with_entropy_0.01"] = with_entropy
    assert all_one == 0.0 and all_zero == 0.0
    assert mixed > 1e-3 and with_kl > 1e-4
    # under a token-level mean the zero-advantage group's tokens still count in the denominator:
    # adding a uniform group of 4 x 4 tokens halves the per-token gradient of a mixed group of 4 x 4 tokens
    x = torch.zeros(8, 4, dtype=F64, requires_grad=True)
    adv = torch.cat([grpo_advantages(torch.tensor([1.0, 0.0, 1.0, 0.0], dtype=F64), 4),
                     grpo_advantages(torch.ones(4, dtype=F64), 4)])[:, None].expand(8, 4)
    aggregate(-adv * x, torch.ones(8, 4, dtype=F64), "token-mean").backward()
    x_alone = torch.zeros(4, 4, dtype=F64, requires_grad=True)
    aggregate(-adv[:4] * x_alone, torch.ones(4, 4, dtype=F64), "token-mean").backward()
    assert float(x.grad[4:].abs().max()) == 0.0
    assert torch.allclose(x.grad[:4], x_alone.grad / 2, atol=1e-15) and float(x_alone.grad.abs().min()) > 0
    evidence["token_mean_grad_scale_with_uniform_group"] = float(x.grad[0, 0] / x_alone.grad[0, 0])
    evidence["max_grad_all_correct"] = all_one
    evidence["max_grad_all_wrong"] = all_zero
    evidence["max_grad_all_correct_with_kl_beta_0.04"] = with_kl


def _per_token_weights(lengths, agg):
    T = max(lengths)
    mask = torch.zeros(len(lengths), T, dtype=F64)
    for i, n in enumerate(lengths):
        mask[i, :n] = 1
    x = torch.zeros(len(lengths), T, dtype=F64, requires_grad=True)
    aggregate(x, mask, agg).backward()
    return x.grad, mask


@pytest.mark.claim("dapo.grpo-sample-level-weighting")
def test_sample_level_loss_downweights_long_tokens(evidence):
    lengths = [2, 5, 10]
    w, mask = _per_token_weights(lengths, "seq-mean-token-mean")
    for i, n in enumerate(lengths):
        assert torch.allclose(w[i, :n], torch.full((n,), 1 / (len(lengths) * n), dtype=F64))
    evidence["per_token_weight"] = [float(w[i, 0]) for i in range(len(lengths))]
    evidence["per_sequence_total"] = w.sum(-1).tolist()


@pytest.mark.claim("dapo.token-level-loss")
def test_token_level_loss_weights_tokens_equally(evidence):
    lengths = [2, 5, 10]
    w, mask = _per_token_weights(lengths, "token-mean")
    assert torch.allclose(w[mask > 0], torch.full((sum(lengths),), 1 / sum(lengths), dtype=F64))
    totals = w.sum(-1)
    assert torch.allclose(totals, torch.tensor(lengths, dtype=F64) / sum(lengths))
    evidence["per_token_weight"] = [float(w[i, 0]) for i in range(len(lengths))]
    evidence["per_sequence_total"] = totals.tolist()


@pytest.mark.claim("dapo.soft-overlong-penalty")
def test_soft_overlong_penalty_is_piecewise_linear(evidence):
    y, Lmax, Lc = sp.symbols("y L_max L_cache", positive=True)
    oracle = sp.Piecewise((0, y <= Lmax - Lc), (((Lmax - Lc) - y) / Lc, y <= Lmax), (-1, True))
    checked = 0
    for max_len, cache in [(20480, 4096), (100, 10), (64, 64), (7, 3)]:
        lengths = torch.arange(0, max_len + 50)
        got = overlong_penalty(lengths, max_len, cache).double()
        want = torch.tensor([float(oracle.subs({y: int(n), Lmax: max_len, Lc: cache})) for n in lengths.tolist()],
                            dtype=F64) if max_len < 1000 else None
        if want is None:  # large case: evaluate the oracle at the kinks and a sample of points
            pts = [0, max_len - cache - 1, max_len - cache, max_len - cache + 1, max_len - cache // 2, max_len - 1,
                   max_len, max_len + 1, max_len + 49]
            for n in pts:
                assert abs(float(got[n]) - float(oracle.subs({y: n, Lmax: max_len, Lc: cache}))) < 1e-6, n
        else:
            assert float((got - want).abs().max()) < 1e-6
        inside = got[max_len - cache : max_len + 1]
        assert float((inside[2:] - 2 * inside[1:-1] + inside[:-2]).abs().max()) < 1e-5  # linear inside
        checked += len(lengths)
    evidence["lengths_checked"] = checked
    evidence["dapo_setting"] = {"L_max": 20480, "L_cache": 4096,
                                "penalty_at_18432": float(overlong_penalty(torch.tensor([18432]), 20480, 4096)[0])}


def _groups(p: torch.Tensor, G: int, gen: torch.Generator) -> torch.Tensor:
    """0/1 rewards of G answers for each prompt with solve probability p: [len(p) * G]."""
    return (torch.rand(len(p), G, generator=gen) < p[:, None]).to(F64).reshape(-1)


@pytest.mark.claim("dapo.dynamic-sampling-not-resample-same")
def test_dynamic_sampling_refills_with_new_prompts(evidence):
    """Counterexample to "DAPO keeps sampling that input until the condition holds": read literally, a prompt the
    model never (or always) solves is resampled for ever; DAPO's procedure (over-sample a batch of prompts, drop
    the groups ``dynamic_sampling_filter`` rejects, draw the next batch of prompts until the training batch is
    full) terminates and leaves such prompts out."""
    G, want, cap = 8, 16, 2000
    pool = torch.tensor([0.0, 1.0, 0.02, 0.3, 0.5, 0.7, 0.95] * 10, dtype=F64)  # solve probability per prompt
    gen = torch.Generator().manual_seed(0)
    # DAPO: batches of 16 prompts until 16 groups survive the filter
    kept: list[int] = []
    generated = 0
    while len(kept) < want:
        idx = torch.randint(0, len(pool), (want,), generator=gen)
        scores = _groups(pool[idx], G, gen)
        generated += len(scores)
        ok = dynamic_sampling_filter(scores, G).view(-1, G)[:, 0]
        kept += idx[ok].tolist()
    kept = kept[:want]
    assert all(0 < float(pool[i]) < 1 for i in kept), "a never- or always-solved prompt got into the batch"
    # the literal reading: resample one prompt until its group is neither all right nor all wrong
    tries = {}
    for p in (0.0, 1.0, 0.02, 0.5):
        for n in range(1, cap + 1):
            if bool(dynamic_sampling_filter(_groups(torch.tensor([p], dtype=F64), G, gen), G).all()):
                break
        tries[p] = n
    assert tries[0.0] == tries[1.0] == cap, tries  # never satisfied: the loop would not end
    assert tries[0.5] < 5
    evidence["dapo_generations_for_16_groups"] = generated
    evidence["counterexample"] = {"group_size": G, "resample_same_prompt_tries": {str(k): v for k, v in tries.items()},
                                  "cap": cap, "note": "p = 0 or 1: the condition never holds"}


@pytest.mark.claim("dapo.overlong-truncation-noise")
def test_truncation_penalty_punishes_sound_long_answers(evidence):
    """Answers whose correctness does not depend on their length, truncated at L_max: a punitive reward for every
    truncated answer punishes the correct long ones, so the reward disagrees with correctness on those samples
    (noise); masking truncated samples out (DAPO's overlong filtering) removes the disagreement."""
    gen = torch.Generator().manual_seed(1)
    n, L_max = 20_000, 4096
    correct = torch.rand(n, generator=gen) < 0.6
    length = torch.distributions.LogNormal(7.5, 0.5).sample((n,))  # median ~1800 tokens, a long tail
    truncated = length > L_max
    reward = torch.where(correct, 1.0, -1.0)
    punitive = torch.where(truncated, -1.0, reward)
    wrong_sign = (punitive != reward).double().mean()
    corr = lambda a, b: float(torch.corrcoef(torch.stack([a.double(), b.double()]))[0, 1])  # noqa: E731
    c_full, c_punitive = corr(reward, correct), corr(punitive, correct)
    keep = ~truncated
    c_masked = corr(punitive[keep], correct[keep])
    assert truncated.any() and correct[truncated].any()
    assert c_full == pytest.approx(1.0) and c_masked == pytest.approx(1.0)
    assert c_punitive < 0.95, c_punitive
    assert float(wrong_sign) == pytest.approx(float((truncated & correct).double().mean()))  # exactly the sound long ones
    evidence.update(truncated_share=float(truncated.double().mean()), correct_but_punished_share=float(wrong_sign),
                    reward_correctness_correlation={"no_truncation": c_full, "punitive": c_punitive,
                                                    "truncated_masked_out": c_masked})
