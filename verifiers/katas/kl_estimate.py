"""Kata properties for ``kl_estimate(logp, logp_ref, kind)`` with kind in k1, k2, k3.

Oracle: exact enumeration over small categoricals (fp64) and the closed forms
k1 = log(pi/pi_ref), k2 = (log(pi/pi_ref))^2 / 2, k3 = rho - 1 - log rho with rho = pi_ref/pi.
"""

from __future__ import annotations

import math

import torch
from hypothesis import given
from hypothesis import strategies as st

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
            got = [float(x) for x in impl(logp, logq, kind)]
            want = []
            for pi, qi in zip(p, q):
                lr = math.log(pi) - math.log(qi)
                rho = qi / pi
                want.append({"k1": lr, "k2": 0.5 * lr * lr, "k3": rho - 1 - math.log(rho)}[kind])
            ok = all(abs(a - b) <= 1e-6 + 1e-6 * abs(b) for a, b in zip(got, want))
            assert ok, f"pi={p}, pi_ref={q}, kind={kind}: expected {want}, got {got}"

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
            est = math.fsum(pi * float(k) for pi, k in zip(p, impl(logp, logq, kind)))
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
        lr = (logp.double() - logq.double()).tolist()  # the fp32 inputs' exact difference
        want = [math.expm1(-x) + x for x in lr]
        bad = [(x, float(g), w) for x, g, w in zip(lr, got, want) if not (float(g) >= 0 and abs(float(g) - w) <= 2e-3 * w)]
        assert not bad, f"k3 in fp32 at small log-ratios (log pi - log pi_ref, got, expected): {bad[:5]}"

    check()


PROPERTIES = [prop_closed_forms, prop_k1_k3_unbiased, prop_k2_k3_nonnegative, prop_k3_exact_for_small_log_ratios]
