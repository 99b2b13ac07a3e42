"""Verifiers for qa/coding/int8-quantize.yaml (catalog code.int8-quantize).

Oracles: the definition in fp64 (verifiers/katas/int8_quantize.py) and a dense grid of values between the
codes, on which rounding and truncation are compared exactly.
"""

from __future__ import annotations

import pytest
import torch

from impls.numerics.quantization import quantize_int8
from verifiers.katas import int8_quantize as kata

F64 = torch.float64


@pytest.mark.claim("coding.int8.half-step-error")
def test_round_to_nearest_is_within_half_a_step(evidence):
    for prop in kata.ALL:
        prop(quantize_int8)
    # the bound is reached: a value halfway between two codes is half a step from either
    x = torch.tensor([[127.0, 10.5, -3.5, 0.25]])
    q, s = quantize_int8(x)
    err = (x.double() - q.double() * s.double()).abs()
    assert float(s) == 1.0 and float(err.max()) == 0.5
    evidence["x = [127, 10.5, -3.5, 0.25] (scale 1)"] = {"codes": q[0].tolist(), "errors": err[0].tolist()}


@pytest.mark.claim("coding.int8.truncation")
def test_truncation_doubles_the_error_and_pulls_toward_zero(evidence):
    scale = 1.0
    x = torch.linspace(-127.0, 127.0, 2_000_001, dtype=F64)            # a dense grid, 1000 points per step
    rounded = torch.round(x / scale) * scale
    truncated = torch.trunc(x / scale) * scale                           # what .astype(int8) / .to(int8) do
    stats = {}
    for name, y in (("round", rounded), ("truncate", truncated)):
        e = y - x
        stats[name] = {"max |error| / scale": float(e.abs().max()), "mean |error| / scale": float(e.abs().mean()),
                       "mean error · sign(x) / scale": float((e * x.sign()).mean())}
    assert stats["round"]["max |error| / scale"] == 0.5
    assert 0.999 < stats["truncate"]["max |error| / scale"] < 1.0
    assert abs(stats["round"]["mean error · sign(x) / scale"]) < 1e-3
    assert stats["truncate"]["mean error · sign(x) / scale"] < -0.49          # always toward zero
    with pytest.raises(AssertionError, match="nearest code"):
        kata.prop_rounds_to_nearest(lambda x, per_channel=True: _truncating(x, per_channel))
    evidence["errors over a dense grid of [-127, 127] steps"] = stats


def _truncating(x, per_channel):
    amax = x.abs().amax(-1, keepdim=True) if per_channel else x.abs().amax().reshape(1, 1)
    scale = (amax / 127).clamp_min(1e-12)
    return (x / scale).to(torch.int8), scale


@pytest.mark.claim("coding.int8.zero-channel")
def test_an_all_zero_channel(evidence):
    w = torch.tensor([[0.0, 0.0, 0.0], [1.0, -2.0, 0.5]])
    scale = w.abs().amax(-1, keepdim=True) / 127                          # row 0: 0
    ratio = w / scale
    cast = ratio.to(torch.int8)
    assert float(scale[0]) == 0.0 and torch.isnan(ratio[0]).all()
    q, s = quantize_int8(w)
    assert float(s[0]) > 0 and bool((q[0] == 0).all()) and torch.isfinite(s).all()
    kata.prop_all_zero_rows(quantize_int8)
    with pytest.raises(AssertionError, match="positive and finite"):
        kata.prop_all_zero_rows(lambda x, per_channel=True: (torch.round(x / (x.abs().amax(-1, keepdim=True) / 127))
                                                             .nan_to_num(0.0).to(torch.int8),
                                                             x.abs().amax(-1, keepdim=True) / 127))
    evidence["row of zeros, scale = max|x|/127 = 0"] = {
        "x / scale": ratio[0].tolist(), "NaN cast to int8 on this machine (undefined behaviour in C)": cast[0].tolist(),
        "reference scale": float(s[0]), "reference codes": q[0].tolist()}
