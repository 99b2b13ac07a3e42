"""Kata properties for ``gae(rewards, values, mask, gamma, lam) -> (advantages, returns)``.

Inputs are ``[B, T]`` batches; mask 1 marks the tokens the policy produced (0: padding, or
tool/observation tokens inside a multi-turn answer); each row is one episode and the value after
its last response token is 0. Masked tokens are skipped: value and advantage are carried across
them (verl's convention), i.e. GAE runs on the row with its masked tokens deleted. Oracle: on that
compressed row of L tokens, the closed form written as an explicit double sum in plain Python floats,
A_t = sum_{k=t}^{L-1} (gamma*lam)^(k-t) * delta_k,  delta_k = r_k + gamma * V_{k+1} * [k+1 < L] - V_k,
returns = A + V; 0 on masked positions.
"""

from __future__ import annotations

import torch
from hypothesis import given
from hypothesis import strategies as st

_val = st.floats(min_value=-3, max_value=3, allow_nan=False, allow_subnormal=False)
_unit = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
TOL = 1e-9


@st.composite
def padded_batch(draw, b_max: int = 4, t_max: int = 6):
    """(rewards, values, lengths, T) as python lists; row i has lengths[i] response tokens."""
    B = draw(st.integers(1, b_max))
    T = draw(st.integers(1, t_max))
    lengths = draw(st.lists(st.integers(0, T), min_size=B, max_size=B))
    rewards = draw(st.lists(st.lists(_val, min_size=T, max_size=T), min_size=B, max_size=B))
    values = draw(st.lists(st.lists(_val, min_size=T, max_size=T), min_size=B, max_size=B))
    return rewards, values, lengths, T


def _tensors(rewards, values, lengths, T):
    r = torch.tensor(rewards, dtype=torch.float64)
    v = torch.tensor(values, dtype=torch.float64)
    mask = torch.zeros_like(r)
    for i, n in enumerate(lengths):
        mask[i, :n] = 1.0
    return r, v, mask


def oracle_gae(rewards, values, lengths, gamma, lam):
    """Double sum over k >= t within the response; plain floats, no recursion."""
    advs, rets = [], []
    for r, v, L in zip(rewards, values, lengths):
        T = len(r)
        delta = [r[k] + (gamma * v[k + 1] if k + 1 < L else 0.0) - v[k] for k in range(L)]
        a = [sum((gamma * lam) ** (k - t) * delta[k] for k in range(t, L)) for t in range(L)]
        advs.append(a + [0.0] * (T - L))
        rets.append([a[t] + v[t] for t in range(L)] + [0.0] * (T - L))
    return advs, rets


def oracle_gae_general(rewards, values, mask, gamma, lam, dones=None):
    """Any 0/1 mask and optional episode ends, plain floats: delete the masked tokens of a row, cut it
    into episodes (an end anywhere in [p, q) between consecutive response tokens p < q separates them),
    run the double sum on each episode and scatter back (0 on masked positions)."""
    advs, rets = [], []
    for b, (r, v, m) in enumerate(zip(rewards, values, mask)):
        T = len(r)
        d = dones[b] if dones is not None else [0] * T
        pos = [t for t in range(T) if m[t]]
        episodes, cur = [], []
        for i, p in enumerate(pos):
            cur.append(p)
            nxt = pos[i + 1] if i + 1 < len(pos) else T
            if any(d[s] for s in range(p, nxt)) or i + 1 == len(pos):
                episodes.append(cur)
                cur = []
        a_row, r_row = [0.0] * T, [0.0] * T
        for ep in episodes:
            L = len(ep)
            delta = [r[ep[k]] + (gamma * v[ep[k + 1]] if k + 1 < L else 0.0) - v[ep[k]] for k in range(L)]
            for t in range(L):
                a = sum((gamma * lam) ** (k - t) * delta[k] for k in range(t, L))
                a_row[ep[t]], r_row[ep[t]] = a, a + v[ep[t]]
        advs.append(a_row)
        rets.append(r_row)
    return advs, rets


def oracle_mc_return(rewards, lengths, gamma):
    out = []
    for r, L in zip(rewards, lengths):
        out.append([sum(gamma ** (k - t) * r[k] for k in range(t, L)) for t in range(L)] + [0.0] * (len(r) - L))
    return out


def _close(got: torch.Tensor, want, what: str, inputs: dict) -> None:
    want_t = torch.tensor(want, dtype=torch.float64)
    got64 = got.detach().to("cpu", torch.float64)
    if got64.shape != want_t.shape or not torch.allclose(got64, want_t, atol=TOL, rtol=1e-7):
        raise AssertionError(f"{what} wrong\n  inputs: {inputs}\n  expected: {want}\n  got: {got64.tolist()}")


def prop_matches_double_sum(impl) -> None:
    """Advantages and returns equal the explicit double sum; padded positions are 0."""

    @given(padded_batch(), _unit, _unit)
    def check(batch, gamma, lam):
        rewards, values, lengths, T = batch
        r, v, mask = _tensors(*batch)
        adv, ret = impl(r, v, mask, gamma, lam)
        want_a, want_r = oracle_gae(rewards, values, lengths, gamma, lam)
        inputs = dict(rewards=rewards, values=values, lengths=lengths, gamma=gamma, lam=lam)
        _close(adv, want_a, "advantages", inputs)
        _close(ret, want_r, "returns", inputs)

    check()


def prop_padding_ignored(impl) -> None:
    """Whatever sits in padded slots (here: huge numbers) does not change any output."""

    @given(padded_batch(), _unit, _unit)
    def check(batch, gamma, lam):
        r, v, mask = _tensors(*batch)
        adv, ret = impl(r, v, mask, gamma, lam)
        junk = torch.where(mask > 0, 0.0, 1e6)
        adv2, ret2 = impl(r + junk, v - junk, mask, gamma, lam)
        inputs = dict(rewards=batch[0], values=batch[1], lengths=batch[2], gamma=gamma, lam=lam)
        if not (torch.allclose(adv.double(), adv2.double(), atol=TOL) and torch.allclose(ret.double(), ret2.double(), atol=TOL)):
            raise AssertionError(f"padding leaked into the result\n  inputs: {inputs}\n"
                                 f"  expected: {adv.tolist()}\n  got (junk in padding): {adv2.tolist()}")

    check()


def prop_lambda_zero_is_td(impl) -> None:
    """lam = 0: A_t = delta_t = r_t + gamma V_{t+1} - V_t (V after the last token is 0)."""

    @given(padded_batch(), _unit)
    def check(batch, gamma):
        rewards, values, lengths, T = batch
        r, v, mask = _tensors(*batch)
        adv, _ = impl(r, v, mask, gamma, 0.0)
        want = [[(rw[k] + (gamma * vv[k + 1] if k + 1 < L else 0.0) - vv[k]) if k < L else 0.0 for k in range(T)]
                for rw, vv, L in zip(rewards, values, lengths)]
        _close(adv, want, "lambda=0 advantages (TD residual)",
               dict(rewards=rewards, values=values, lengths=lengths, gamma=gamma))

    check()


def prop_lambda_one_is_mc(impl) -> None:
    """lam = 1: A_t = G_t - V_t with G_t the discounted reward-to-go."""

    @given(padded_batch(), _unit)
    def check(batch, gamma):
        rewards, values, lengths, T = batch
        r, v, mask = _tensors(*batch)
        adv, _ = impl(r, v, mask, gamma, 1.0)
        G = oracle_mc_return(rewards, lengths, gamma)
        want = [[(G[i][k] - values[i][k]) if k < lengths[i] else 0.0 for k in range(T)] for i in range(len(rewards))]
        _close(adv, want, "lambda=1 advantages (MC return - V)",
               dict(rewards=rewards, values=values, lengths=lengths, gamma=gamma))

    check()


@st.composite
def holey_batch(draw, b_max: int = 3, t_max: int = 7):
    """(rewards, values, mask) as python lists; masks are arbitrary 0/1 rows (interior zeros, left
    padding, empty rows all allowed)."""
    B = draw(st.integers(1, b_max))
    T = draw(st.integers(1, t_max))
    mask = draw(st.lists(st.lists(st.sampled_from([0, 1, 1]), min_size=T, max_size=T), min_size=B, max_size=B))
    rewards = draw(st.lists(st.lists(_val, min_size=T, max_size=T), min_size=B, max_size=B))
    values = draw(st.lists(st.lists(_val, min_size=T, max_size=T), min_size=B, max_size=B))
    return rewards, values, mask


def prop_observation_tokens_skipped(impl) -> None:
    """Masked tokens inside a row (tool/observation tokens) are skipped, not episode ends: value and
    advantage are carried across them, so the result equals GAE on the row with those tokens deleted."""

    @given(holey_batch(), _unit, _unit)
    def check(batch, gamma, lam):
        rewards, values, mask = batch
        r = torch.tensor(rewards, dtype=torch.float64)
        v = torch.tensor(values, dtype=torch.float64)
        m = torch.tensor(mask, dtype=torch.float64)
        adv, ret = impl(r, v, m, gamma, lam)
        want_a, want_r = oracle_gae_general(rewards, values, mask, gamma, lam)
        inputs = dict(rewards=rewards, values=values, mask=mask, gamma=gamma, lam=lam)
        _close(adv, want_a, "advantages (masked tokens must be skipped, not treated as episode ends)", inputs)
        _close(ret, want_r, "returns", inputs)

    check()


ALL = [prop_matches_double_sum, prop_padding_ignored, prop_lambda_zero_is_td, prop_lambda_one_is_mc,
       prop_observation_tokens_skipped]

ZH = {
    "doc": r"""`gae(rewards, values, mask, gamma, lam) -> (advantages, returns)` 的性质。

输入是 `[B, T]` 的批次；mask 为 1 表示策略生成的 token（0 表示 padding，或多轮回答中的工具/观察 token）；
每一行是一个 episode，最后一个回答 token 之后的价值为 0。被 mask 掉的 token 会被跳过：价值与优势跨过它们继续传递
（verl 的约定），相当于在删掉这些 token 的行上做 GAE。对照答案：在压缩后长度为 L 的行上，用普通 Python 浮点数写出的
双重求和闭式解，
A_t = sum_{k=t}^{L-1} (gamma*lam)^(k-t) * delta_k,  delta_k = r_k + gamma * V_{k+1} * [k+1 < L] - V_k，
returns = A + V；被 mask 的位置为 0。""",
    "prop_matches_double_sum": "优势和回报等于显式的双重求和；padding 位置为 0。",
    "prop_padding_ignored": "padding 位置里放什么（这里是极大的数）都不改变任何输出。",
    "prop_lambda_zero_is_td": "lam = 0：A_t = delta_t = r_t + gamma V_{t+1} - V_t（最后一个 token 之后的 V 为 0）。",
    "prop_lambda_one_is_mc": "lam = 1：A_t = G_t - V_t，G_t 为折扣后的未来回报之和。",
    "prop_observation_tokens_skipped": "行内被 mask 的 token（工具/观察 token）是被跳过，而不是 episode 结束：价值和优势跨过它们传递，结果等于删掉这些 token 后的 GAE。",
    "gae": r"""未做白化的 GAE 优势与回报，都是 `[B, T]`，精度不低于 fp32；被 mask 的 token 处为 0。

沿 t 反向计算，c_t = 1 - done_t，携带量 V̄、Ā（行尾之后为 0）：回答 token 令
Â_t = r_t + gamma c_t V̄ - V_t + gamma lam c_t Ā，然后 V̄ <- V_t、Ā <- Â_t；被 mask 的 token 只把携带量乘以 c_t
（跳过：价值与优势跨过它继续传递，与 verl 相同）。R̂_t = Â_t + V_t。
`dones`（可选，`[B, T]`）：在 t 之后 episode 结束处非零；默认每行一个 episode。""",
}
