"""Verifiers for qa/coding/layernorm-rmsnorm.yaml (catalog code.layernorm-rmsnorm).

Oracles: PyTorch's ``F.layer_norm`` / ``F.rms_norm`` in fp64 (the kata properties), exact rational arithmetic
(``fractions.Fraction``) for Welford's update and Chan's merge against the two-pass formulas.
"""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st

from impls.arch.norms import chan_merge, layer_norm, rms_norm, welford
from verifiers.katas import layer_norm as ln_kata
from verifiers.katas import rms_norm as rms_kata

F64 = torch.float64


@pytest.mark.claim("coding.norm.biased-variance-eps-inside")
def test_layer_norm_divides_by_n_inside_the_sqrt(evidence):
    for prop in ln_kata.ALL:
        prop(layer_norm)
    x = torch.tensor([[-1.0, 1.0]], dtype=F64)
    ln = torch.nn.LayerNorm(2, eps=1e-5, dtype=F64)
    by_n, by_n1 = float(ln(x).detach()[0, 1]), 1.0 / math.sqrt(2.0 + 1e-5)
    y = torch.tensor([[0.0, 0.002]], dtype=F64)
    inside, outside = float(F.layer_norm(y, (2,), eps=1e-5)[0, 1]), 0.001 / (0.001 + 1e-5)
    assert by_n == pytest.approx(1 / math.sqrt(1 + 1e-5), abs=1e-12) and inside == pytest.approx(0.001 / math.sqrt(1.1e-5))
    evidence["nn.LayerNorm on [-1, 1] (eps 1e-5)"] = {"torch": by_n, "dividing by N - 1 would give": by_n1}
    evidence["F.layer_norm on [0, 0.002] (eps 1e-5)"] = {"torch (eps inside the sqrt)": inside,
                                                         "eps added to the standard deviation": outside}


@pytest.mark.claim("coding.norm.welford-chan")
def test_welford_and_chan_are_exact_in_rational_arithmetic(evidence):
    @given(st.lists(st.integers(-1000, 1000), min_size=1, max_size=30), st.data())
    def exact(ints, data):
        xs = [Fraction(v, 7) for v in ints]
        n = len(xs)
        mean = sum(xs, Fraction(0)) / n
        m2 = sum(((x - mean) ** 2 for x in xs), Fraction(0))
        assert welford(xs, (0, Fraction(0), Fraction(0))) == (n, mean, m2)
        # any split into pieces (one per warp / block), merged pairwise in any order
        cuts = sorted(data.draw(st.lists(st.integers(0, n), max_size=4), label="cuts"))
        bounds = [0, *cuts, n]
        parts = [welford(xs[a:b], (0, Fraction(0), Fraction(0))) for a, b in zip(bounds, bounds[1:])]
        while len(parts) > 1:
            i = data.draw(st.integers(0, len(parts) - 2), label="merge at")
            parts[i:i + 2] = [chan_merge(parts[i], parts[i + 1])]
        assert parts[0] == (n, mean, m2)

    exact()
    # in float32, on a row whose mean is 10^4 times its spread, one-pass E[x²] - E[x]² cancels; Welford does not
    g = torch.Generator().manual_seed(0)
    row = (1e4 + torch.randn(4096, generator=g, dtype=F64)).float()
    truth = float(row.double().var(unbiased=False))
    s, s2 = torch.zeros((), dtype=torch.float32), torch.zeros((), dtype=torch.float32)
    for v in row:
        s, s2 = s + v, s2 + v * v
    one_pass = float(s2 / 4096 - (s / 4096) ** 2)
    n, mean, m2 = torch.tensor(0), torch.zeros((), dtype=torch.float32), torch.zeros((), dtype=torch.float32)
    for v in row:
        n = n + 1
        delta = v - mean
        mean = mean + delta / n
        m2 = m2 + delta * (v - mean)
    welford32 = float(m2 / 4096)
    assert abs(welford32 - truth) < 0.01 * truth and abs(one_pass - truth) > 0.5 * truth
    evidence["variance of 4096 fp32 values with mean 1e4 and std 1"] = {
        "exact (fp64)": truth, "Welford in fp32": welford32, "E[x²] - E[x]² in fp32": one_pass}


@pytest.mark.claim("coding.norm.shift-invariance")
def test_rms_norm_is_not_shift_invariant(evidence):
    x = torch.tensor([[1.0, -1.0, 2.0, 0.0]], dtype=F64)
    c = 10.0
    ln_shift = float((layer_norm(x + c, eps=0.0) - layer_norm(x, eps=0.0)).abs().max())
    rms_shift = float((rms_norm(x + c, eps=0.0) - rms_norm(x, eps=0.0)).abs().max())
    assert ln_shift < 1e-12 and rms_shift > 0.5
    # RMSNorm is invariant to scaling instead
    assert float((rms_norm(3.5 * x, eps=0.0) - rms_norm(x, eps=0.0)).abs().max()) < 1e-12
    evidence["counterexample"] = {"x": x[0].tolist(), "c": c,
                                  "max change of LayerNorm(x + c)": ln_shift, "max change of RMSNorm(x + c)": rms_shift,
                                  "RMSNorm(x)": rms_norm(x, eps=0.0)[0].tolist(),
                                  "RMSNorm(x + c)": rms_norm(x + c, eps=0.0)[0].tolist()}


@pytest.mark.claim("coding.norm.rmsnorm-needs-eps")
def test_rms_norm_without_eps_fails_on_zero_and_tiny_rows(evidence):
    for prop in rms_kata.ALL:
        prop(rms_norm)
    zero = torch.zeros(1, 8)
    no_eps = zero / zero.pow(2).mean(-1, keepdim=True).sqrt()
    assert torch.isnan(no_eps).all() and bool((rms_norm(zero) == 0).all())
    # a real row whose mean square is 0 in floating point: x = 1e-4 in fp16, x² = 1e-8 underflows to 0
    small = torch.full((1, 8), 1e-4, dtype=torch.float16)
    ms16 = small.pow(2).mean(-1, keepdim=True)
    assert float(ms16) == 0.0 and bool((small != 0).all())
    naive16 = small / ms16.sqrt()
    ok = rms_norm(small, eps=0.0)
    assert torch.isinf(naive16).all() and float(ok[0, 0]) == pytest.approx(1.0, rel=1e-3)
    with pytest.raises(AssertionError, match="nan"):
        rms_kata.prop_zero_row_gives_zero(lambda x, w=None, eps=1e-6: (x / x.double().pow(2).mean(-1, keepdim=True)
                                                                        .sqrt().to(x.dtype)) * (1 if w is None else w))
    evidence["counterexample"] = {"all-zero row without eps": no_eps[0].tolist(),
                                  "a row of 1e-4 in fp16: mean(x²) computed in fp16": float(ms16),
                                  "its RMSNorm without eps, in fp16": float(naive16[0, 0]),
                                  "the reference (fp32 inside, eps 0)": float(ok[0, 0])}
