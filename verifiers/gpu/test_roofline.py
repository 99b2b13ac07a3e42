"""Roofline: the bound as an identity (sympy), the A100 → H100 ratios from the datasheet figures in
impls/inference/roofline.py, what decode gains from the upgrade, a matmul's FLOPs and minimum bytes
counted by brute force, and peak FLOP/s rebuilt from the A100 whitepaper's per-SM figures."""

from __future__ import annotations

import itertools

import pytest
import sympy as sp

from impls.inference import roofline as R
from impls.inference.kv_cache import preset

A100, A100_40, H100 = R.GPUS["A100-SXM-80GB"], R.GPUS["A100-SXM-40GB"], R.GPUS["H100-SXM"]


@pytest.mark.claim("gpu.roofline.min")
def test_attainable_is_min_of_peak_and_bandwidth_times_intensity(evidence):
    F, B, P, W = sp.symbols("F B P W", positive=True)
    attainable = F / sp.Max(F / P, B / W)              # work over the roofline time bound
    for f, b, p, w in itertools.product((1, 3, 1000), (1, 7, 50), (10, 989), (2, 3)):
        vals = {F: f, B: b, P: p, W: w}
        assert sp.simplify(attainable.subs(vals) - sp.Min(P, W * F / B).subs(vals)) == 0
    # and the model's time bound gives it for real steps
    cfg = preset("llama-3-8b")
    for batch, new, ctx in ((1, 1, 4096), (64, 1, 4096), (1, 2048, 0)):
        c = R.step_cost(cfg, batch=batch, new=new, context=ctx)
        got = c.flops / c.time(H100)
        assert got == pytest.approx(min(H100.peak_flops, H100.bandwidth * c.intensity), rel=1e-12)
    evidence["ridge_H100"] = H100.ridge


@pytest.mark.claim("gpu.roofline.h100-vs-a100")
def test_h100_over_a100(evidence):
    evidence.quote("dense BF16 ratio", quoted=3.2, measured=H100.peak_flops / A100.peak_flops, abs=0.05)
    evidence.quote("H100 dense FP8 / A100 dense BF16", quoted=6.3, measured=H100.peak_int8 / A100.peak_flops, abs=0.05)
    evidence.quote("HBM bandwidth vs A100 80GB", quoted=1.64, measured=H100.bandwidth / A100.bandwidth, digits=2)
    evidence.quote("the statement's compute ratio (FP8 vs BF16)", quoted=6, measured=H100.peak_int8 / A100.peak_flops,
                   abs=0.5)
    evidence.quote("the statement's bandwidth ratio", quoted=1.6, measured=H100.bandwidth / A100.bandwidth, abs=0.05)
    evidence.quote("HBM bandwidth vs A100 40GB", quoted=2.15, measured=H100.bandwidth / A100_40.bandwidth, digits=2)


@pytest.mark.claim("gpu.roofline.decode-upgrade")
def test_decode_speeds_up_by_the_bandwidth_ratio(evidence):
    cfg = preset("llama-3-8b")
    for batch in (1, 8, 32):
        c = R.step_cost(cfg, batch=batch, new=1, context=4096)
        assert c.bound(A100) == c.bound(H100) == "memory"
        speedup = c.time(A100) / c.time(H100)
        assert speedup == pytest.approx(H100.bandwidth / A100.bandwidth, rel=1e-9)
        evidence[f"batch {batch}"] = speedup
    evidence.quote("decode step speedup A100 80GB -> H100", quoted=1.64, measured=speedup, digits=2)


def _matmul_counts(m, k, n):
    flops = 0
    for i, j in itertools.product(range(m), range(n)):
        acc = 0
        for p in range(k):
            acc += 1                                  # stands for one a[i,p]*b[p,j] + acc
            flops += 2
    return flops, 2 * (m * k + k * n + m * n)         # read A and B once, write C once, 2 bytes each


@pytest.mark.claim("gpu.roofline.matmul-cost")
def test_matmul_flops_and_minimum_bytes(evidence):
    for m, k, n in ((1, 1, 1), (2, 3, 5), (4, 8, 3), (7, 2, 6)):
        f, b = _matmul_counts(m, k, n)
        assert f == 2 * m * k * n and b == 2 * (m * k + k * n + m * n)
    # the interview's shapes on an A100 80GB: k = 512, n = 2^20, m from 2 to 8192
    k, n = 512, 1 << 20
    rows = {}
    for m in (2, 16, 128, 256, 1024, 8192):
        flops, bytes_ = 2 * m * k * n, 2 * (m * k + k * n + m * n)
        t = max(flops / A100.peak_flops, bytes_ / A100.bandwidth)
        rows[m] = {"intensity": flops / bytes_, "bound": "compute" if flops / A100.peak_flops >= bytes_ / A100.bandwidth
                   else "memory", "ms": 1e3 * t}
    assert rows[2]["bound"] == rows[128]["bound"] == "memory" and rows[256]["bound"] == rows[8192]["bound"] == "compute"
    evidence.quote("m=2: FLOP per byte", quoted=2.0, measured=rows[2]["intensity"], abs=0.05)
    evidence.quote("m=2: time (ms)", quoted=0.53, measured=rows[2]["ms"], abs=0.005)
    evidence.quote("m=8192: time (ms)", quoted=28.2, measured=rows[8192]["ms"], abs=0.05)
    evidence.quote("ridge point A100 80GB (FLOP/B)", quoted=153, measured=A100.ridge, abs=0.5)
    evidence["table"] = rows


@pytest.mark.claim("gpu.roofline.peak-formula")
def test_peak_flops_from_units_and_clock(evidence):
    sms, clock = 108, 1.41e9                          # A100 whitepaper: 108 SMs, 1410 MHz boost
    fp32 = sms * 64 * 2 * clock                       # 64 FP32 lanes per SM, an FMA is 2 FLOPs
    tc = sms * 4 * 256 * 2 * clock                    # 4 Tensor Cores per SM, 256 dense FP16 FMA per clock each
    evidence.quote("A100 boost clock (GHz)", quoted=1.41, measured=clock / 1e9, abs=0)
    evidence.quote("A100 FP32 CUDA cores (TFLOPS)", quoted=19.5, measured=fp32 / 1e12, abs=0.05)
    evidence.quote("A100 dense FP16 Tensor Cores (TFLOPS)", quoted=312, measured=tc / 1e12, abs=0.5)
    assert tc == pytest.approx(A100.peak_flops, rel=2e-3)
