"""Speculative sampling: exact losslessness, acceptance, tokens per call and speed-up.

Oracles: exact enumeration in rational arithmetic (integer probability masses through the implementation's
own mass functions, every case of a small vocabulary and of two-token continuations), sympy for the series,
and Monte Carlo runs of the batched sampler ``verify``.
"""

from __future__ import annotations

import itertools
from fractions import Fraction

import pytest
import sympy as sp
import torch
from hypothesis import given
from hypothesis import strategies as st

import impls.inference.speculative as S


def _compositions(total: int, parts: int):
    for cuts in itertools.combinations(range(total + parts - 1), parts - 1):
        bounds = (-1, *cuts, total + parts - 1)
        yield [bounds[i + 1] - bounds[i] - 1 for i in range(parts)]


def _exact_output(p: list[int], q: list[int]) -> list[Fraction]:
    """P(emitted token = x) for integer masses p, q over the same denominator, via the implementation's
    ``accepted_mass`` and ``residual_weights`` on integer tensors, combined in Fractions."""
    pt, qt = torch.tensor(p), torch.tensor(q)
    acc = S.accepted_mass(pt, qt).tolist()
    w = S.residual_weights(pt, qt).tolist()
    total, d = sum(w), sum(p)
    reject = Fraction(d - sum(acc), d)
    return [Fraction(a, d) + (reject * Fraction(wi, total) if total else 0) for a, wi in zip(acc, w)]


@pytest.mark.claim("sd.lossless")
def test_exact_enumeration_every_distribution_pair(evidence):
    n = 0
    for v, d in ((2, 8), (3, 7), (4, 5)):
        dists = list(_compositions(d, v))
        for p in dists:
            for q in dists:
                assert _exact_output(p, q) == [Fraction(x, d) for x in p]
                n += 1
    evidence.update(pairs_enumerated=n, vocab_denominators=[[2, 8], [3, 7], [4, 5]])


@pytest.mark.claim("sd.lossless")
def test_exact_two_token_continuations(evidence):
    """γ = 2 on a Markov toy: the joint law of the first two emitted tokens equals p(y1)·p(y2 | y1)."""
    d = 12
    p1, q1 = [5, 4, 3], [1, 2, 9]
    p2 = {0: [6, 6, 0], 1: [1, 10, 1], 2: [4, 4, 4]}          # target p(· | previous token), masses over 12
    q2 = {0: [12, 0, 0], 1: [3, 3, 6], 2: [2, 5, 5]}
    joint = {}
    first = S.accepted_mass(torch.tensor(p1), torch.tensor(q1)).tolist()
    w1 = S.residual_weights(torch.tensor(p1), torch.tensor(q1)).tolist()
    for y1 in range(3):
        # y1 accepted from the draft: the second position is verified in the same call
        via_accept = Fraction(first[y1], d)
        second = _exact_output(p2[y1], q2[y1])
        # y1 resampled after a rejection: the call ends; the next call's first position gives p2 exactly
        via_reject = Fraction(d - sum(first), d) * Fraction(w1[y1], sum(w1))
        nxt = _exact_output(p2[y1], q2[y1])
        for y2 in range(3):
            joint[(y1, y2)] = via_accept * second[y2] + via_reject * nxt[y2]
    for (y1, y2), pr in joint.items():
        assert pr == Fraction(p1[y1], d) * Fraction(p2[y1][y2], d)
    evidence["joint_equals_target"] = {f"{a}{b}": str(v) for (a, b), v in joint.items()}


@pytest.mark.claim("sd.lossless")
@given(st.integers(2, 12), st.integers(0, 10_000), st.floats(0.1, 5.0))
def test_output_distribution_is_p_for_random_pairs(v, seed, temp):
    g = torch.Generator().manual_seed(seed)
    p = torch.softmax(torch.randn(3, v, generator=g, dtype=torch.float64) * temp, -1)
    q = torch.softmax(torch.randn(3, v, generator=g, dtype=torch.float64) * temp, -1)
    q[0] = p[0]                                              # identical distributions: never rejected
    q[1, 0] = 0
    q[1] /= q[1].sum()                                       # draft that cannot propose token 0
    assert torch.allclose(S.output_distribution(p, q), p, atol=1e-12)


def _run(p, q, batch, gamma, seed=0):
    g = torch.Generator().manual_seed(seed)
    P = p.expand(batch, gamma + 1, -1).contiguous()
    Q = q.expand(batch, gamma, -1).contiguous()
    draft = torch.multinomial(Q.reshape(-1, Q.shape[-1]), 1, generator=g).view(batch, gamma)
    return draft, *S.verify(P, Q, draft, g)


@pytest.mark.claim("sd.rejection-rule", "sd.lossless")
def test_sampler_accepts_with_min_one_p_over_q_and_discards_the_rest(evidence):
    v, gamma, batch = 6, 3, 200_000
    g = torch.Generator().manual_seed(5)
    p = torch.softmax(torch.randn(gamma + 1, v, generator=g, dtype=torch.float64), -1)
    q = torch.softmax(torch.randn(gamma, v, generator=g, dtype=torch.float64), -1)
    draft, tokens, n = _run(p, q, batch, gamma)
    assert n.min() >= 1 and n.max() <= gamma + 1
    pos = torch.arange(gamma + 1)[None, :]
    assert bool((tokens[pos >= n[:, None]] == -1).all())                      # the rest is discarded
    kept = pos < (n - 1)[:, None]
    assert torch.equal(tokens[:, :gamma][kept[:, :gamma]], draft[kept[:, :gamma]])   # accepted prefix = draft
    # acceptance rate of the first draft token, per proposed value, against min(1, p/q)
    first_acc = n > 1
    rates = {}
    for x in range(v):
        sel = draft[:, 0] == x
        if int(sel.sum()) > 2000:
            want = min(1.0, float(p[0, x] / q[0, x]))
            got = float(first_acc[sel].double().mean())
            assert abs(got - want) < 0.03
            rates[x] = [round(got, 3), round(want, 3)]
    freq = torch.bincount(tokens[:, 0], minlength=v).double() / batch
    se = (p[0] * (1 - p[0]) / batch).sqrt()
    assert bool(((freq - p[0]).abs() < 5 * se + 1e-4).all())                 # first token ~ p, not q
    evidence.update(acceptance_rate_by_token=rates, first_token_freq=freq.tolist(), target=p[0].tolist())


@pytest.mark.claim("sd.unlikely-is-probabilistic")
def test_unlikely_draft_token_is_accepted_p_over_q_of_the_time(evidence):
    p = torch.tensor([[0.3, 0.7], [0.5, 0.5]], dtype=torch.float64)
    q = torch.tensor([[0.9, 0.1]], dtype=torch.float64)
    batch = 100_000
    g = torch.Generator().manual_seed(2)
    draft = torch.zeros(batch, 1, dtype=torch.long)                          # the draft proposed token 0
    tokens, n = S.verify(p.expand(batch, -1, -1), q.expand(batch, -1, -1), draft, g)
    kept = float((n == 2).double().mean())
    evidence.quote("simulated acceptance of the unlikely token", quoted=0.337, measured=kept, digits=3)
    assert abs(kept - 1 / 3) < 0.01                                           # min(1, 0.3/0.9) = 1/3
    assert bool((tokens[n == 1, 0] == 1).all())                               # a rejection still emits a token
    # the same pair with the draft sampling from q: it proposes the token 90% of the time, yet the token is
    # emitted only as often as the target wants it
    drafted = torch.multinomial(q.expand(batch, -1), 1, generator=g)
    tokens2, _ = S.verify(p.expand(batch, -1, -1), q.expand(batch, -1, -1), drafted, g)
    proposed = float((drafted[:, 0] == 0).double().mean())
    emitted = float((tokens2[:, 0] == 0).double().mean())
    evidence.quote("draft probability q(x), as often as the draft proposes x", quoted=0.9, measured=proposed, digits=1)
    evidence.quote("target probability p(x), as often as x is emitted", quoted=0.3, measured=emitted, digits=1)
    assert abs(emitted - 0.3) < 0.01
    evidence.update(p_over_q=round(0.3 / 0.9, 4), measured_acceptance=round(kept, 4),
                    drafted_from_q={"proposed": round(proposed, 4), "emitted": round(emitted, 4)},
                    counterexample={"q(x)": 0.9, "p(x)": 0.3, "accepted_fraction": round(kept, 4)})


@pytest.mark.claim("sd.expected-tokens")
def test_expected_tokens_formula_and_its_iid_assumption(evidence):
    a = sp.Symbol("alpha")
    for gamma in range(1, 9):      # P(n >= j + 1) = α^j for j = 0..γ, so E[n] = 1 + α + … + α^γ
        series = sum(a ** j for j in range(gamma + 1))
        assert sp.expand(series * (1 - a) - (1 - a ** (gamma + 1))) == 0
    sims = {}
    for alpha, gamma in ((0.5, 2), (0.8, 4), (0.9, 6)):
        p = torch.tensor([alpha, 1 - alpha, 0.0], dtype=torch.float64).expand(gamma + 1, -1)
        q = torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64).expand(gamma, -1)   # Σ min(p, q) = α exactly
        _, _, n = _run(p, q, 100_000, gamma, seed=gamma)
        got = float(n.double().mean())
        want = S.expected_tokens(alpha, gamma)
        assert abs(got - want) < 0.01 * want
        sims[f"alpha={alpha}, gamma={gamma}"] = [round(got, 3), round(want, 3)]
    # acceptance that varies by position: the formula with the mean α is off
    alphas = [0.95, 0.2, 0.95, 0.95]
    gamma = len(alphas)
    p = torch.tensor([[a, 1 - a, 0.0] for a in alphas] + [[1.0, 0.0, 0.0]], dtype=torch.float64)
    q = torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64).expand(gamma, -1)
    _, _, n = _run(p, q, 200_000, gamma, seed=7)
    reached = [float((n - 1 >= i).double().mean()) for i in range(gamma)]
    accepted = [float((n - 1 > i).double().mean()) for i in range(gamma)]
    by_position = [a / r for a, r in zip(accepted, reached)]                 # P(accept | position reached)
    for i, q_ in ((0, 0.95), (1, 0.2), (2, 0.95), (3, 0.95)):
        evidence.quote(f"simulated acceptance at position {i + 1}", quoted=q_, measured=by_position[i], digits=2)
    exact = sum(float(torch.tensor(alphas[:j], dtype=torch.float64).prod()) for j in range(gamma + 1))
    assert abs(float(n.double().mean()) - exact) < 0.01 * exact
    mean_alpha = sum(alphas) / len(alphas)
    plug_in = S.expected_tokens(mean_alpha, gamma)
    evidence.quote("true tokens per call, acceptance by position", quoted=2.49, measured=exact, digits=2)
    evidence.quote("formula with the mean acceptance", quoted=3.13, measured=plug_in, digits=2)
    assert plug_in > 1.2 * exact
    evidence.update(simulated_vs_formula=sims,
                    simulated_by_position={"acceptance": [round(x, 4) for x in by_position],
                                           "tokens_per_call": round(float(n.double().mean()), 4)},
                    counterexample={"alphas_by_position": alphas, "exact_tokens_per_call": round(exact, 4),
                                    "formula_with_mean_alpha": round(plug_in, 4)})


@pytest.mark.claim("sd.speedup-formula")
def test_speedup_formula_drops_the_target_token(evidence):
    alpha, k, c = 0.8, 4, 0.1
    quoted = alpha * (1 - alpha ** k) / (1 - alpha) / (1 + k * c)
    evidence.quote("speed-up by the quoted formula", quoted=1.69, measured=quoted, digits=2)
    leviathan = S.expected_speedup(alpha, k, c)
    evidence.quote("speed-up by Leviathan's walltime formula", quoted=2.40, measured=leviathan, digits=2)
    p = torch.tensor([alpha, 1 - alpha, 0.0], dtype=torch.float64).expand(k + 1, -1)
    q = torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64).expand(k, -1)
    _, _, n = _run(p, q, 200_000, k, seed=11)
    tokens_per_call = float(n.double().mean())
    simulated = tokens_per_call / (1 + k * c)                  # a plain decode makes 1 token per unit of time
    assert abs(simulated - leviathan) < 0.01 * leviathan
    assert abs(quoted - (tokens_per_call - 1) / (1 + k * c)) < 0.01   # the quoted formula counts accepted drafts only
    evidence.update(leviathan_speedup=round(leviathan, 3), simulated_speedup=round(simulated, 3),
                    tokens_per_call=round(tokens_per_call, 3),
                    counterexample={"alpha": alpha, "k": k, "c": c, "quoted": round(quoted, 3),
                                    "leviathan": round(leviathan, 3)})


@pytest.mark.claim("sd.alpha-is-not-survival")
def test_alpha_is_not_the_fraction_of_drafts_kept(evidence):
    alpha, gamma = 0.8, 4
    p = torch.tensor([alpha, 1 - alpha, 0.0], dtype=torch.float64).expand(gamma + 1, -1)
    q = torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64).expand(gamma, -1)
    _, _, n = _run(p, q, 200_000, gamma, seed=3)
    kept_fraction = float((n - 1).double().mean()) / gamma
    exact = (alpha - alpha ** (gamma + 1)) / ((1 - alpha) * gamma)
    assert abs(kept_fraction - exact) < 0.005 and kept_fraction < alpha - 0.15
    per_position = [float(((n - 1) > i).double().mean()) for i in range(gamma)]
    conditional = [per_position[0]] + [per_position[i] / per_position[i - 1] for i in range(1, gamma)]
    assert all(abs(x - alpha) < 0.01 for x in conditional)                    # α: P(accept | reached)
    pooled = sum(per_position) / (1 + sum(per_position[:-1]))                 # accepted / reached, all positions
    evidence.quote("α measured as P(accept | position reached)", quoted=0.8, measured=pooled, digits=1)
    evidence.quote("fraction of drafts that survive", quoted=0.59, measured=kept_fraction, digits=2)
    evidence.update(alpha=alpha, fraction_of_drafts_kept=round(kept_fraction, 4), exact=round(exact, 4),
                    conditional_acceptance_by_position=[round(x, 3) for x in conditional],
                    counterexample={"alpha": alpha, "gamma": gamma, "fraction_kept": round(kept_fraction, 4)})
