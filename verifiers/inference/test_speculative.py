"""Speculative sampling: exact losslessness, acceptance, tokens per call and speed-up.

Oracles: exact enumeration in rational arithmetic (integer probability masses through the implementation's
own mass functions, every case of a small vocabulary); the exact law of ``verify`` itself, called on every
draft and every cell of a grid of its uniforms, against the target's law computed from the toy's tables;
sympy for the series; Monte Carlo runs of ``verify`` checked at every position.
"""

from __future__ import annotations

import itertools
import math
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


# A first-order Markov toy: the target's and the draft's next-token law depend on the previous token.
# Integer masses over a denominator d. Each table has a state the draft cannot leave (or propose) freely,
# residuals with one and with several positive entries, and (toy B) a state where p == q.
TOYS = {
    "gamma2-v3": dict(gamma=2, d=12, p=[[5, 4, 3], [1, 9, 2], [6, 3, 3]], q=[[6, 4, 2], [3, 9, 0], [12, 0, 0]]),
    "gamma4-v3": dict(gamma=4, d=4, p=[[1, 1, 2], [2, 1, 1], [0, 2, 2]], q=[[2, 2, 0], [2, 1, 1], [4, 0, 0]]),
}


def _grid(n: int) -> torch.Tensor:
    return (torch.arange(n, dtype=torch.float64) + 0.5) / n


def _emission_law(toy: dict, start: int) -> dict[tuple[int, ...], Fraction]:
    """The exact law of the tokens one call of ``S.verify`` emits from state ``start``, found by calling it
    on every outcome of its randomness at once: every draft x_1..x_γ (weight Π q(x_i | x_{i-1}), as the draft
    model would sample it), and every cell of a grid of L^γ acceptance uniforms and L' uniforms for the
    extra token. Every threshold ``verify`` can meet is a multiple of 1/L (acceptance p/q, L a multiple of
    every draft mass) or of 1/L' (inverse-CDF cut points, L' a multiple of every residual total and of d), so
    its output is constant on each grid cell and the grid midpoints give the continuous law exactly."""
    gamma, d, P, Q = toy["gamma"], toy["d"], toy["p"], toy["q"]
    v = len(P)
    lu = math.lcm(*(m for row in Q for m in row if m))
    lv = math.lcm(d, *(d - sum(map(min, P[s], Q[s])) for s in range(v) if P[s] != Q[s]))
    drafts = torch.tensor(list(itertools.product(range(v), repeat=gamma)), dtype=torch.long)
    states = torch.cat([torch.full((len(drafts), 1), start), drafts], 1)                  # context of each position
    Pt, Qt = torch.tensor(P, dtype=torch.long), torch.tensor(Q, dtype=torch.long)
    draft_weight = Qt[states[:, :gamma], drafts].prod(-1)                              # Π q masses
    u_idx = torch.tensor(list(itertools.product(range(lu), repeat=gamma)), dtype=torch.long)
    n_d, n_u = len(drafts), len(u_idx)
    di = torch.arange(n_d).repeat_interleave(n_u * lv)
    ui = torch.arange(n_u).repeat_interleave(lv).repeat(n_d)
    vi = torch.arange(lv).repeat(n_d * n_u)
    uniform = torch.cat([_grid(lu)[u_idx[ui]], _grid(lv)[vi, None]], 1)
    p = Pt[states[di]].double() / d                                                     # [B, γ+1, V]
    q = Qt[states[di, :gamma]].double() / d
    tokens, n = S.verify(p, q, drafts[di], uniform=uniform)
    keys, inverse = torch.unique(torch.cat([n[:, None], tokens], 1), dim=0, return_inverse=True)
    mass = torch.zeros(len(keys), dtype=torch.long).scatter_add_(0, inverse, draft_weight[di])
    total = d ** gamma * n_u * lv
    assert int(mass.sum()) == total
    return {tuple(k[1:1 + k[0]].tolist()): Fraction(int(m), total) for k, m in zip(keys, mass)}


def _target_law(toy: dict, start: int, ys: tuple[int, ...]) -> Fraction:
    out, s = Fraction(1), start
    for y in ys:
        out *= Fraction(toy["p"][s][y], toy["d"])
        s = y
    return out


@pytest.mark.claim("sd.lossless", "sd.rejection-rule")
@pytest.mark.parametrize("name", sorted(TOYS))
def test_exact_law_of_every_emitted_position(name, evidence):
    """For every start state and every k <= γ+1: the first k tokens of the stream have the target's law
    p(y_1..y_k). A call that stops after j < k tokens hands over to a fresh call from state y_j, whose next
    k - j tokens follow the target by the same identity at a shorter horizon (checked from every state), so

        Σ_{j<k} P(call emits exactly y_1..y_j)·p(y_{j+1..k} | y_j) + P(call emits y_1..y_k, and maybe more)
            = p(y_1..y_k),

    which by induction makes the whole stream the target's. The left side comes from ``verify`` itself."""
    toy = TOYS[name]
    gamma, v = toy["gamma"], len(toy["p"])
    checked = 0
    for start in range(v):
        law = _emission_law(toy, start)
        assert all(1 <= len(e) <= gamma + 1 for e in law)
        for k in range(1, gamma + 2):
            for ys in itertools.product(range(v), repeat=k):
                lhs = sum(pr * _target_law(toy, e[-1], ys[len(e):]) for e, pr in law.items()
                          if len(e) < k and e == ys[:len(e)])
                lhs += sum(pr for e, pr in law.items() if len(e) >= k and e[:k] == ys)
                assert lhs == _target_law(toy, start, ys), (name, start, ys, lhs)
                checked += 1
        if start == 0:
            evidence[f"{name}: law of one call from state 0"] = {" ".join(map(str, e)): str(pr)
                                                                 for e, pr in sorted(law.items())}
    evidence[f"{name}: prefixes checked exactly"] = checked


@pytest.mark.claim("sd.lossless")
@given(st.integers(2, 12), st.integers(0, 10_000), st.floats(0.1, 5.0))
def test_output_distribution_is_p_for_random_pairs(v, seed, temp):
    g = torch.Generator().manual_seed(seed)
    p = torch.softmax(torch.randn(3, v, generator=g, dtype=torch.float64) * temp, -1)
    q = torch.softmax(torch.randn(3, v, generator=g, dtype=torch.float64) * temp, -1)
    q[0] = p[0]                                              # identical distributions: never rejected
    q[1, 0] = 0
    q[1] /= q[1].sum()                                       # draft that cannot propose token 0
    assert torch.allclose(S.output_distribution(p, q), p, atol=1e-12, rtol=0)


def _run(p, q, batch, gamma, seed=0):
    g = torch.Generator().manual_seed(seed)
    P = p.expand(batch, gamma + 1, -1).contiguous()
    Q = q.expand(batch, gamma, -1).contiguous()
    draft = torch.multinomial(Q.reshape(-1, Q.shape[-1]), 1, generator=g).view(batch, gamma)
    return draft, *S.verify(P, Q, draft, g)


@pytest.mark.claim("sd.rejection-rule", "sd.lossless")
def test_sampler_accepts_with_min_one_p_over_q_and_discards_the_rest(evidence):
    """Monte Carlo over a context-free toy (p_i, q_i the same whatever came before), every position: a
    reached draft x is accepted with probability min(1, p_i(x)/q_i(x)), and the token emitted at position i
    (residual, accepted draft or bonus), among calls that emit more than i tokens, follows p_i."""
    v, gamma, batch = 6, 3, 400_000
    g = torch.Generator().manual_seed(5)
    p = torch.softmax(torch.randn(gamma + 1, v, generator=g, dtype=torch.float64), -1)
    q = torch.softmax(torch.randn(gamma, v, generator=g, dtype=torch.float64), -1)
    draft, tokens, n = _run(p, q, batch, gamma)
    assert n.min() >= 1 and n.max() <= gamma + 1 and bool((n == gamma + 1).any())
    pos = torch.arange(gamma + 1)[None, :]
    assert bool((tokens[pos >= n[:, None]] == -1).all())                      # the rest is discarded
    kept = pos < (n - 1)[:, None]
    assert torch.equal(tokens[:, :gamma][kept[:, :gamma]], draft[kept[:, :gamma]])   # accepted prefix = draft
    rates, worst, worst_big = {}, {}, 0.0
    for i in range(gamma):
        reached = n - 1 >= i
        accepted = n - 1 > i
        for x in range(v):
            sel = reached & (draft[:, i] == x)
            count = int(sel.sum())
            if count < 2000:
                continue
            want = min(1.0, float(p[i, x] / q[i, x]))
            got = float(accepted[sel].double().mean())
            se = max(want * (1 - want), 1e-6) ** 0.5 / count ** 0.5
            assert abs(got - want) < 5 * se + 1e-9, (i, x, got, want)
            if count >= 40_000:
                worst_big = max(worst_big, abs(got - want))
            rates[f"position {i + 1}, token {x}"] = [round(got, 4), round(want, 4), count]
    assert worst_big < 0.01                                    # the full answer's "within 0.01"
    freqs = {}
    for i in range(gamma + 1):
        sel = n > i
        m = int(sel.sum())
        freq = torch.bincount(tokens[sel, i], minlength=v).double() / m
        se = (p[i] * (1 - p[i]) / m).sqrt()
        assert bool(((freq - p[i]).abs() < 5 * se + 1e-4).all()), (i, freq, p[i])      # ~ p_i, not q_i
        worst[i + 1] = float((freq - p[i]).abs().max())
        freqs[i + 1] = [round(f, 4) for f in freq.tolist()]
    evidence.update(acceptance_by_position_and_token=rates, max_acceptance_error_40k_proposals=worst_big,
                    emitted_freq_by_position=freqs, max_abs_freq_error_by_position=worst,
                    target_by_position=[[round(x, 4) for x in row] for row in p.tolist()])


@pytest.mark.claim("sd.rejection-rule")
def test_greedy_is_argmax_agreement():
    """Temperature → 0 (one-hot p and q): a draft is kept iff it is the target's argmax, and the emitted
    tokens are the target's greedy choices. (p and q must be warped the same way for this to hold.)"""
    v, gamma, batch = 5, 3, 64
    g = torch.Generator().manual_seed(9)
    tgt = torch.randint(0, v, (batch, gamma + 1), generator=g)
    drf = torch.where(torch.rand(batch, gamma, generator=g) < 0.6, tgt[:, :gamma],
                      torch.randint(0, v, (batch, gamma), generator=g))
    p = torch.nn.functional.one_hot(tgt, v).double()
    q = torch.nn.functional.one_hot(drf, v).double()
    tokens, n = S.verify(p, q, drf, g)
    agree = (drf == tgt[:, :gamma]).int()
    want_n = agree.cumprod(-1).sum(-1) + 1                       # the agreeing prefix, then one target token
    assert torch.equal(n, want_n)
    for b in range(batch):
        assert tokens[b, : n[b]].tolist() == tgt[b, : n[b]].tolist()


@pytest.mark.claim("sd.unlikely-is-probabilistic")
def test_unlikely_draft_token_is_accepted_p_over_q_of_the_time(evidence):
    p = torch.tensor([[0.3, 0.7], [0.5, 0.5]], dtype=torch.float64)
    q = torch.tensor([[0.9, 0.1]], dtype=torch.float64)
    batch = 100_000
    g = torch.Generator().manual_seed(2)
    draft = torch.zeros(batch, 1, dtype=torch.long)                          # the draft proposed token 0
    tokens, n = S.verify(p.expand(batch, -1, -1), q.expand(batch, -1, -1), draft, g)
    kept = float((n == 2).double().mean())
    evidence.quote("simulated acceptance of the unlikely token", quoted=0.336, measured=kept, digits=3)
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
    # ... but not always upward. E[n] = f(α) = Σ_{j<=γ} α^j has non-negative coefficients, so it is convex on
    # [0, 1]: acceptance that varies ACROSS calls (easy and hard contexts, i.i.d. within a call) makes the
    # mean-α formula an underestimate (Jensen), and so does a low acceptance placed late in the draft.
    f = sp.Poly(sum(a ** j for j in range(gamma + 1)), a)
    assert all(c >= 0 for c in f.diff(a).diff(a).all_coeffs())
    late = [Fraction(19, 20)] * 3 + [Fraction(1, 5)]
    exact_late = sum(math.prod(late[:j]) for j in range(gamma + 1))
    plug_late = f.eval(sum(late) / gamma)
    assert exact_late > plug_late
    evidence.quote("true tokens per call, acceptance 0.95, 0.95, 0.95, 0.2", quoted=3.88, measured=exact_late, digits=2)
    mix = (Fraction(3, 5), Fraction(1))
    true_mix = sum(f.eval(x) for x in mix) / 2
    plug_mix = f.eval(sum(mix) / 2)
    assert true_mix > plug_mix
    evidence.quote("true tokens per call, acceptance 0.6 or 1.0 across calls", quoted=3.65, measured=true_mix, digits=2)
    evidence.quote("formula with the mean acceptance 0.8", quoted=3.36, measured=plug_mix, digits=2)
    # simulated with verify: half the calls at α = 0.6, half at α = 1.0
    batch = 200_000
    rows = torch.tensor([0.6, 1.0], dtype=torch.float64).repeat_interleave(batch // 2)
    pm = torch.stack([rows, 1 - rows, torch.zeros_like(rows)], -1)[:, None].expand(-1, gamma + 1, -1).contiguous()
    qm = torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64).expand(batch, gamma, -1).contiguous()
    gm = torch.Generator().manual_seed(13)
    evidence.quote("acceptance on the hard half of the calls", quoted=0.6, measured=float(rows[0]), digits=1)
    evidence.quote("acceptance on the easy half of the calls", quoted=1.0, measured=float(rows[-1]), digits=1)
    _, nm = S.verify(pm, qm, torch.zeros(batch, gamma, dtype=torch.long), gm)
    sim_mix = float(nm.double().mean())
    assert abs(sim_mix - float(true_mix)) < 0.01 * float(true_mix) and sim_mix > float(plug_mix) + 0.2
    # α estimated the usual way, accepted drafts over verified positions, pooled over calls: overestimates here
    pooled = float((nm - 1).sum() / (nm - 1 + (nm <= gamma).long()).sum())
    assert S.expected_tokens(pooled, gamma) > sim_mix + 0.05
    evidence.update(direction_of_the_bias={
        "early dip 0.95, 0.2, 0.95, 0.95": {"true": round(exact, 3), "mean-alpha formula": round(plug_in, 3)},
        "late dip 0.95, 0.95, 0.95, 0.2": {"true": round(float(exact_late), 3), "mean-alpha formula": round(float(plug_late), 3)},
        "0.6 or 1.0 across calls": {"true": round(float(true_mix), 3), "simulated": round(sim_mix, 3),
                                    "mean-alpha formula": round(float(plug_mix), 3),
                                    "pooled accepted/verified alpha": round(pooled, 3),
                                    "formula with the pooled alpha": round(S.expected_tokens(pooled, gamma), 3)}})
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
