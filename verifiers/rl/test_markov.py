"""The Markov property: exact enumeration of small processes, a repetition game, and a tiny LM with a KV cache."""

from __future__ import annotations

import itertools

import pytest
import sympy as sp
import torch

from impls.rl.tiny_lm import TinyCausalLM
from impls.rl.toy_envs import RepetitionGame, RingWalker, TabularMDP

DT = torch.float64


def _joint_two_steps(P, policy0, policy1):
    """Exact joint over (s0, a0, s1, a1, s2) for 2 states / 2 actions; policy1(s0, a0, s1) -> probs over a1."""
    joint = {}
    for s0, a0, s1, a1, s2 in itertools.product(range(2), repeat=5):
        p = 0.5 * policy0(s0)[a0] * P[s0, a0, s1] * policy1(s0, a0, s1)[a1] * P[s1, a1, s2]
        joint[(s0, a0, s1, a1, s2)] = float(p)
    return joint


def _cond(joint, given, target=4):
    num = [0.0, 0.0]
    for k, p in joint.items():
        if all(k[i] == v for i, v in given.items()):
            num[k[target]] += p
    z = sum(num)
    return [x / z for x in num] if z > 0 else None


@pytest.mark.claim("markov.definition-needs-actions")
def test_markov_definition_conditions_on_actions(evidence):
    # action a moves to state a with prob 0.9: a Markov environment
    P = torch.tensor([[[0.9, 0.1], [0.1, 0.9]], [[0.9, 0.1], [0.1, 0.9]]], dtype=DT)
    uniform = lambda *_: [0.5, 0.5]  # noqa: E731
    copy_prev = lambda s0, a0, s1: [1.0, 0.0] if s0 == 0 else [0.0, 1.0]  # noqa: E731  history-dependent policy
    markov_pol = lambda s0, a0, s1: [0.8, 0.2] if s1 == 0 else [0.3, 0.7]  # noqa: E731
    J_hist = _joint_two_steps(P, uniform, copy_prev)
    J_mark = _joint_two_steps(P, uniform, markov_pol)
    # with actions in the conditioning, the environment is Markov whatever the policy
    gaps_sa = [abs(_cond(J_hist, {2: s1, 3: a1})[1] - _cond(J_hist, {0: s0, 1: a0, 2: s1, 3: a1})[1])
               for s0, a0, s1, a1 in itertools.product(range(2), repeat=4)
               if _cond(J_hist, {0: s0, 1: a0, 2: s1, 3: a1}) is not None]
    assert len(gaps_sa) >= 4
    assert max(gaps_sa) < 1e-12
    # states alone: Markov under a Markov policy, NOT under a history-dependent one
    gap_mark = max(abs(_cond(J_mark, {2: s1})[1] - _cond(J_mark, {0: s0, 2: s1})[1]) for s0, s1 in itertools.product(range(2), repeat=2))
    gap_hist = max(abs(_cond(J_hist, {2: s1})[1] - _cond(J_hist, {0: s0, 2: s1})[1]) for s0, s1 in itertools.product(range(2), repeat=2))
    assert gap_mark < 1e-12 and gap_hist > 0.3, (gap_mark, gap_hist)
    evidence.quote("P(s2=1 | s1=0)", quoted=0.5, measured=_cond(J_hist, {2: 0})[1], digits=12)
    evidence.quote("P(s2=1 | s1=0, s0=0)", quoted=0.1, measured=_cond(J_hist, {0: 0, 2: 0})[1], digits=12)
    evidence.quote("P(s2=1 | s1=0, s0=1)", quoted=0.9, measured=_cond(J_hist, {0: 1, 2: 0})[1], digits=12)
    evidence["counterexample"] = {"env": "a moves to state a w.p. 0.9", "policy": "a_1 = s_0",
                                  "P(s2=1|s1=0)": _cond(J_hist, {2: 0})[1],
                                  "P(s2=1|s1=0,s0=0)": _cond(J_hist, {0: 0, 2: 0})[1],
                                  "P(s2=1|s1=0,s0=1)": _cond(J_hist, {0: 1, 2: 0})[1]}
    evidence.update(max_gap_with_actions=max(gaps_sa), max_gap_states_markov_policy=gap_mark)


@pytest.mark.claim("markov.state-sufficient-for-optimal")
def test_finite_horizon_optimal_action_depends_on_time(evidence):
    # state 0: stay (+1, remain in 0) or go (+0, move to 1); state 1: +3 per step forever
    P = torch.zeros(2, 2, 2, dtype=DT)
    P[0, 0, 0] = P[0, 1, 1] = P[1, 0, 1] = P[1, 1, 1] = 1.0
    R = torch.tensor([[1.0, 0.0], [3.0, 3.0]], dtype=DT)
    M = TabularMDP(torch.tensor([1.0, 0.0], dtype=DT), P, R, horizon=3)
    Q, greedy = M.optimal_dp()
    # independent oracle: brute force over every open-loop action sequence from s=0 (deterministic MDP)
    def rollout(s, acts):
        tot = 0.0
        for a in acts:
            tot += float(R[s, a])
            s = int(P[s, a].argmax())
        return tot

    best_from = {t: max(itertools.product(range(2), repeat=3 - t), key=lambda acts: rollout(0, acts)) for t in range(3)}
    first = {t: best_from[t][0] for t in range(3)}
    assert first[0] == 1 and first[2] == 0, first  # go early, stay at the last step
    assert [int(greedy[t, 0]) for t in range(3)] == [first[0], first[1], first[2]]
    assert abs(float(Q[0, 0].max()) - rollout(0, best_from[0])) < 1e-12
    evidence["counterexample"] = {"state": 0, "optimal_action_by_t": {str(t): ["stay", "go"][first[t]] for t in range(3)},
                                  "optimal_value_t0": float(Q[0, 0].max())}


@pytest.mark.claim("markov.chess-board-not-state")
def test_repetition_rule_board_not_markov(evidence):
    g = RepetitionGame(p_win=0.5, safe_value=0.6, max_occurrences=3)
    # oracle: brute force over every history-dependent deterministic policy (move at 1st and 2nd occurrence)
    def value(m1, m2):
        v3 = 0.0
        v2 = g.p_win + (1 - g.p_win) * v3 if m2 == "try" else g.safe_value
        return g.p_win + (1 - g.p_win) * v2 if m1 == "try" else g.safe_value

    brute = {(m1, m2): value(m1, m2) for m1 in ("try", "safe") for m2 in ("try", "safe")}
    best_policy = max(brute, key=brute.get)
    v_opt, move1 = g.optimal(1)
    _, move2 = g.optimal(2)
    assert best_policy == ("try", "safe") and (move1, move2) == best_policy
    assert abs(v_opt - brute[best_policy]) < 1e-12
    board_only = max(g.board_only_value(q / 100) for q in range(101))
    assert board_only < v_opt - 0.04, (board_only, v_opt)
    # independent oracle for the board-only optimum over *all* q in [0, 1] (not just the grid): sympy
    q = sp.symbols("q", real=True)
    v2 = q * (sp.Rational(1, 2) + sp.Rational(1, 2) * 0) + (1 - q) * sp.Rational(3, 5)  # second visit, then draw
    v1 = sp.expand(q * (sp.Rational(1, 2) + sp.Rational(1, 2) * v2) + (1 - q) * sp.Rational(3, 5))
    assert sp.expand(v1 - (sp.Rational(3, 5) + q / 5 - q**2 / 20)) == 0
    crit = [c for c in sp.solve(sp.diff(v1, q), q) if 0 <= c <= 1]
    sup = max(v1.subs(q, c) for c in [0, 1, *crit])
    assert sup == sp.Rational(3, 4)
    evidence.quote("best picture-only value", quoted=0.75, measured=board_only, digits=12)
    evidence.quote("optimal value", quoted=0.8, measured=v_opt, digits=12)
    assert all(abs(g.board_only_value(k / 10) - float(v1.subs(q, sp.Rational(k, 10)))) < 1e-12 for k in range(11))
    evidence["counterexample"] = {"same_board": "P", "best_move_first_occurrence": move1,
                                  "best_move_second_occurrence": move2, "optimal_value": v_opt,
                                  "best_board_only_value": board_only, "all_history_policies": {f"{a}/{b}": v for (a, b), v in brute.items()}}


@pytest.mark.claim("markov.decoding-prefix-state")
def test_kv_cache_is_a_function_of_the_prefix(evidence, device):
    torch.manual_seed(0)
    out = {}
    for dtype, tol in ((torch.float64, 1e-10), (torch.float32, 1e-4)):
        m = TinyCausalLM(vocab=11, d=32, n_heads=4, n_layers=2).to(device=device, dtype=dtype).eval()
        prompt = torch.randint(0, 11, (4, 5), generator=torch.Generator().manual_seed(1)).to(device)
        seq_c, log_c = m.greedy_decode(prompt, 12, use_cache=True)
        seq_f, log_f = m.greedy_decode(prompt, 12, use_cache=False)
        diff = float((log_c - log_f).abs().max())
        assert torch.equal(seq_c, seq_f) and diff < tol, (dtype, diff)
        # the cache built incrementally equals the cache built from the prefix in one pass
        with torch.no_grad():
            _, past_full = m(seq_c[:, :-1])
            past = None
            for i in range(seq_c.shape[1] - 1):
                _, past = m(seq_c[:, i : i + 1], past)
        cdiff = max(float((a[0] - b[0]).abs().max()) for a, b in zip(past, past_full))
        assert cdiff < tol
        if dtype == torch.float64:  # the entry says "matching recomputation to 1e-16": round-off level
            assert diff < 1e-14 and cdiff < 1e-14, (diff, cdiff)
        out[str(dtype)] = {"max_logit_diff": diff, "max_cache_diff": cdiff}
    # the last token alone is not a Markov state: same last token, different next-token distribution
    m = TinyCausalLM(vocab=11, d=32, n_heads=4, n_layers=2).to(device=device, dtype=torch.float64).eval()
    a = torch.tensor([[1, 2, 3, 7]], device=device)
    b = torch.tensor([[9, 9, 0, 7]], device=device)
    pa, pb = (torch.softmax(m.next_logits_full(x), -1) for x in (a, b))
    tv = 0.5 * float((pa - pb).abs().sum())
    assert tv > 1e-3, tv
    evidence.update(cache_vs_recompute=out, tv_same_last_token_different_prefix=tv)


def _values(probs, T, gamma, reward_cell=0):
    """V_t(o) = E[sum_{k>=t} gamma^{k-t} r_k | x_t = o] with r_k = 1[x_k = reward_cell], exactly."""
    V = {}
    for t in range(T):
        num, den = {}, {}
        for xs, p in probs.items():
            G = sum(gamma ** (k - t) * (xs[k] == reward_cell) for k in range(t, T))
            num[xs[t]] = num.get(xs[t], 0.0) + p * G
            den[xs[t]] = den.get(xs[t], 0.0) + p
        V[t] = {o: num[o] / den[o] for o in num}
    return V


@pytest.mark.claim("markov.values-defined-without-markov")
def test_values_exist_but_bellman_fails_on_observations(evidence):
    rw = RingWalker(n=5, flip=0.1)
    T, gamma = 8, 0.9
    probs = rw.sequence_probs(T)
    V = _values(probs, T, gamma)
    worst = 0.0
    for t in range(T - 1):
        for o in range(rw.n):
            nxt = RingWalker.conditional(probs, {t: o}, t + 1)
            bell = float(o == 0) + gamma * sum(q * V[t + 1][x] for x, q in nxt.items())
            worst = max(worst, abs(bell - V[t][o]))
    # on the Markov state (x_{t-1}, x_t) the Bellman equation holds: check V_t(x_{t-1}, x_t)
    def V_pair(t, prev, cur):
        num = den = 0.0
        for xs, p in probs.items():
            if xs[t - 1] == prev and xs[t] == cur:
                num += p * sum(gamma ** (k - t) * (xs[k] == 0) for k in range(t, T))
                den += p
        return num / den

    worst_pair = 0.0
    for t in range(1, T - 1):
        for prev, cur in [(0, 1), (2, 1), (1, 0), (4, 0)]:
            num = {}
            for xs, p in probs.items():
                if xs[t - 1] == prev and xs[t] == cur:
                    num[xs[t + 1]] = num.get(xs[t + 1], 0.0) + p
            z = sum(num.values())
            bell = float(cur == 0) + gamma * sum(q / z * V_pair(t + 1, cur, x) for x, q in num.items())
            worst_pair = max(worst_pair, abs(bell - V_pair(t, prev, cur)))
    assert all(abs(v) < 1 / (1 - gamma) + 1e-9 for t in V for v in V[t].values())  # finite, well defined
    assert worst > 1e-3 and worst_pair < 1e-12, (worst, worst_pair)
    evidence.quote("Bellman residual on positions only", quoted=0.33, measured=worst, digits=2)
    evidence.update(max_bellman_residual_position_only=worst, max_bellman_residual_pair_state=worst_pair,
                    V0_by_position={str(o): v for o, v in V[0].items()})


@pytest.mark.claim("markov.position-only-pomdp")
def test_position_only_not_markov_two_frames_are(evidence):
    rw = RingWalker(n=5, flip=0.1)
    probs = rw.sequence_probs(5)
    p_one = RingWalker.conditional(probs, {1: 1}, 2)
    p_two_fwd = RingWalker.conditional(probs, {0: 0, 1: 1}, 2)
    p_two_back = RingWalker.conditional(probs, {0: 2, 1: 1}, 2)
    assert abs(p_one[2] - p_two_fwd[2]) > 0.3 and abs(p_two_fwd[2] - p_two_back[2]) > 0.5
    # two frames (x_{t-1}, x_t) are a Markov state: adding x_{t-2} changes nothing
    worst = 0.0
    for x2, x3 in [(1, 2), (1, 0), (3, 4), (4, 0)]:
        base = RingWalker.conditional(probs, {2: x2, 3: x3}, 4)
        for x1 in range(5):
            more = RingWalker.conditional(probs, {1: x1, 2: x2, 3: x3}, 4)
            if more:
                worst = max(worst, max(abs(more.get(k, 0.0) - base.get(k, 0.0)) for k in set(base) | set(more)))
    assert worst < 1e-12, worst
    evidence["counterexample"] = {"P(x2=2|x1=1)": p_one[2], "P(x2=2|x0=0,x1=1)": p_two_fwd[2],
                                  "P(x2=2|x0=2,x1=1)": p_two_back.get(2, 0.0)}
    evidence["two_frame_max_gap"] = worst
