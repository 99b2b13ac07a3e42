"""Kata properties for ``kl_estimate(logp, logp_ref, kind)`` with kind in k1, k2, k3.

Oracle: exact enumeration over small categoricals (fp64) and the closed forms
k1 = log(pi/pi_ref), k2 = (log(pi/pi_ref))^2 / 2, k3 = rho - 1 - log rho with rho = pi_ref/pi.
Every estimator is per token: the result has the shape of ``logp`` (``[B, T]`` for a batch).
"""

from __future__ import annotations

import math

import torch
from hypothesis import given
from hypothesis import strategies as st

from verifiers.katas.budgets import fits, floats, realistic

_logit = st.floats(min_value=-4, max_value=4, allow_nan=False)


@st.composite
def two_categoricals(draw, k_max: int = 6):
    k = draw(st.integers(min_value=2, max_value=k_max))
    a = draw(st.lists(_logit, min_size=k, max_size=k))
    b = draw(st.lists(_logit, min_size=k, max_size=k))
    return a, b


def _softmax(z):
    m = max(z)
    e = [math.exp(x - m) for x in z]
    s = sum(e)
    return [x / s for x in e]


def prop_closed_forms(impl) -> None:
    """Each estimator equals its closed form on every token."""

    @given(two_categoricals())
    def check(data):
        p, q = _softmax(data[0]), _softmax(data[1])
        logp = torch.tensor([math.log(x) for x in p], dtype=torch.float64)
        logq = torch.tensor([math.log(x) for x in q], dtype=torch.float64)
        for kind in ("k1", "k2", "k3"):
            where = f"pi={p}, pi_ref={q}, kind={kind}"
            got = floats(impl(logp, logq, kind), len(p), "the per-token estimate", where)
            want = []
            for pi, qi in zip(p, q):
                lr = math.log(pi) - math.log(qi)
                rho = qi / pi
                want.append({"k1": lr, "k2": 0.5 * lr * lr, "k3": rho - 1 - math.log(rho)}[kind])
            ok = all(abs(a - b) <= 1e-6 + 1e-6 * abs(b) for a, b in zip(got, want, strict=True))
            assert ok, f"{where}: expected {want}, got {got}"

    check()


def prop_k1_k3_unbiased(impl) -> None:
    """sum_a pi(a) k(a) = KL(pi || pi_ref) for k1 and k3 (full-support categoricals)."""

    @given(two_categoricals())
    def check(data):
        p, q = _softmax(data[0]), _softmax(data[1])
        kl = math.fsum(pi * math.log(pi / qi) for pi, qi in zip(p, q))
        logp = torch.tensor([math.log(x) for x in p], dtype=torch.float64)
        logq = torch.tensor([math.log(x) for x in q], dtype=torch.float64)
        for kind in ("k1", "k3"):
            got = floats(impl(logp, logq, kind), len(p), "the per-token estimate", f"pi={p}, pi_ref={q}, kind={kind}")
            est = math.fsum(pi * k for pi, k in zip(p, got, strict=True))
            assert abs(est - kl) <= 1e-6 + 1e-6 * kl, f"pi={p}, pi_ref={q}, kind={kind}: expected E[k]={kl}, got {est}"

    check()


def prop_k2_k3_nonnegative(impl) -> None:
    """k2 and k3 are >= 0 on every single sample."""

    @given(two_categoricals())
    def check(data):
        p, q = _softmax(data[0]), _softmax(data[1])
        logp = torch.tensor([math.log(x) for x in p], dtype=torch.float32)
        logq = torch.tensor([math.log(x) for x in q], dtype=torch.float32)
        for kind in ("k2", "k3"):
            got = impl(logp, logq, kind)
            fits(got, logp.shape, "the per-token estimate", f"pi={p}, pi_ref={q}, kind={kind}")
            assert bool((got >= 0).all()), f"pi={p}, pi_ref={q}, kind={kind}: expected all >= 0, got {got.tolist()}"

    check()


def prop_k3_exact_for_small_log_ratios(impl) -> None:
    """In fp32 with log-ratios of order 1e-4..1e-2 (a policy a few steps from its reference), k3 is
    never negative and matches the fp64 value to 2e-3 relative: rho - 1 needs expm1, exp(x) - 1
    cancels catastrophically."""

    @given(st.lists(st.floats(min_value=-1e-2, max_value=1e-2, allow_nan=False, allow_subnormal=False)
                    .filter(lambda x: abs(x) >= 1e-4), min_size=1, max_size=64),
           st.floats(min_value=-8.0, max_value=-0.5))
    def check(deltas, base):
        logq = torch.full((len(deltas),), base, dtype=torch.float32)
        logp = logq + torch.tensor(deltas, dtype=torch.float32)
        got = impl(logp, logq, "k3")
        fits(got, logp.shape, "k3", f"{len(deltas)} small log-ratios")
        lr = (logp.double() - logq.double()).tolist()  # the fp32 inputs' exact difference
        want = [math.expm1(-x) + x for x in lr]
        bad = [(x, float(g), w) for x, g, w in zip(lr, got, want) if not (float(g) >= 0 and abs(float(g) - w) <= 2e-3 * w)]
        assert not bad, f"k3 in fp32 at small log-ratios (log pi - log pi_ref, got, expected): {bad[:5]}"

    check()


def prop_batched_shape(impl) -> None:
    """A [B, T] batch of token log-probs (fp32, B up to 8, T up to 512: a rollout batch) gives a [B, T]
    estimate for every kind, each token equal to its closed form."""

    @realistic(20)
    @given(st.integers(1, 8), st.integers(1, 512), st.integers(0, 2**31 - 1))
    def check(B, T, seed):
        gen = torch.Generator().manual_seed(seed)
        logq = -torch.rand(B, T, generator=gen) * 8
        logp = logq + torch.randn(B, T, generator=gen) * 0.3
        lr = logp.double() - logq.double()
        want = {"k1": lr, "k2": 0.5 * lr * lr, "k3": torch.expm1(-lr) + lr}
        for kind in ("k1", "k2", "k3"):
            got = impl(logp, logq, kind)
            where = f"B={B}, T={T}, kind={kind}, seed={seed}"
            fits(got, (B, T), "the per-token estimate", where)
            err = (got.double() - want[kind]).abs() - 1e-4 * want[kind].abs()
            assert float(err.max()) <= 1e-5, f"{where}: largest error {float(err.max()):.3g} over the fp32 tolerance"

    check()


PROPERTIES = [prop_closed_forms, prop_k1_k3_unbiased, prop_k2_k3_nonnegative, prop_k3_exact_for_small_log_ratios,
              prop_batched_shape]

ZH = {
    "doc": """`kl_estimate(logp, logp_ref, kind)` 的性质，kind 为 k1、k2、k3。

对照答案：在小的类别分布上精确枚举（fp64），以及闭式解 k1 = log(pi/pi_ref)、k2 = (log(pi/pi_ref))^2 / 2、
k3 = rho - 1 - log rho，其中 rho = pi_ref/pi。每个估计量都是逐 token 的：结果与 `logp` 同形（批次为 `[B, T]`）。""",
    "prop_closed_forms": "每个估计量在每个 token 上都等于它的闭式解。",
    "prop_k1_k3_unbiased": "对 k1 和 k3，sum_a pi(a) k(a) = KL(pi || pi_ref)（全支撑的类别分布）。",
    "prop_k2_k3_nonnegative": "k2 和 k3 在每一个样本上都 >= 0。",
    "prop_k3_exact_for_small_log_ratios": "fp32 下对数比在 1e-4..1e-2 量级时（策略离参考策略只差几步），k3 从不为负，且与 fp64 的值相对误差在 2e-3 以内：rho - 1 需要用 expm1，exp(x) - 1 会发生灾难性抵消。",
    "prop_batched_shape": "一个 [B, T] 批次的 token 对数概率（fp32，B 最多 8，T 最多 512：一个 rollout 批次）对每种 kind 都给出 [B, T] 的估计，每个 token 都等于闭式解。",
    "kl_estimate": "对 a ~ pi 的 token，逐 token 估计 KL(pi || pi_ref)（与 `logp` 同形；k1、k2、k3、abs）。\n\n按原样可求导（各自的梯度见模块说明）；`clamp` 与 verl/OpenRLHF 相同。",
}
