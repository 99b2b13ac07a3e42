"""RoPE scaling (PI, NTK-aware, YaRN) checked from the formulas: what each does to high and low frequencies,
and the wavelength argument by brute force over distances.

Oracles: sympy for NTK-aware's end points, an enumeration of every training and test distance's angle
(independent of ``angles_beyond_training``), the KV-cache arithmetic against a decoder's real cache tensors
(impls/inference), and the paper's closed-form temperature.
"""

from __future__ import annotations

import math

import pytest
import sympy as sp
import torch

from impls.arch.rope import frequencies, unseen_rotation_pairs
from impls.inference.kv_cache import PRESETS, kv_cache_bytes, with_kv_heads
from impls.ml.rope_scaling import (angles_beyond_training, dynamic_ntk_frequencies, ntk_frequencies,
                                   pi_frequencies, wavelengths, yarn_frequencies, yarn_logit_scale, yarn_ramp)

D, L = 128, 4096


def _unseen_brute_force(theta_train: torch.Tensor, theta_test: torch.Tensor, train: int, test: int) -> int:
    """Pairs with some test-distance angle more than one trained turn past every angle training produced."""
    count = 0
    for t0, t1 in zip(theta_train.tolist(), theta_test.tolist()):
        if (train - 1) * t0 >= 2 * math.pi:
            continue                                     # a full turn in training: every angle was seen
        top = max(dist * t0 for dist in range(0, train, 7))
        top = max(top, (train - 1) * t0)
        if any(dist * t1 > top + t0 for dist in range(train, test, 3)) or (test - 1) * t1 > top + t0:
            count += 1
    return count


@pytest.mark.claim("rope-scaling.ntk-high-low")
def test_ntk_keeps_high_frequencies_and_interpolates_low_ones(evidence):
    d, s, b, i = sp.symbols("d s b i", positive=True)
    theta = lambda base, j: base ** (-2 * j / d)   # noqa: E731
    b_ntk = b * s ** (d / (d - 2))
    same = lambda x, y: sp.simplify(sp.expand_log(sp.log(x) - sp.log(y), force=True)) == 0   # noqa: E731
    assert same(theta(b_ntk, 0), theta(b, 0))                                        # fastest pair: untouched
    assert same(theta(b_ntk, d / 2 - 1), theta(b, d / 2 - 1) / s)                     # slowest pair: θ/s, as PI
    for s_ in (2, 4, 8):
        ratio = ntk_frequencies(D, s_) / frequencies(D)
        assert float(ratio[0]) == pytest.approx(1.0) and float(ratio[-1]) == pytest.approx(1 / s_)
        assert bool((ratio[1:] < ratio[:-1]).all())                                   # in between: smoothly
    # without fine-tuning it still extrapolates part of the spectrum: at s = L'/L pairs reach unseen angles
    base = frequencies(D)
    ntk = angles_beyond_training(base, ntk_frequencies(D, 2), L, 2 * L)
    assert ntk["unseen_pairs"] == _unseen_brute_force(base, ntk_frequencies(D, 2), L, 2 * L) > 0
    assert angles_beyond_training(base, base, L, 2 * L)["unseen_pairs"] == unseen_rotation_pairs(D, L, 2 * L)["unseen_pairs"]
    evidence.quote("pairs still reaching unseen angles, NTK-aware at s = 2", quoted=17, measured=ntk["unseen_pairs"],
                   abs=0)
    evidence.quote("pairs reaching unseen angles, plain RoPE from 4096 to 8192", quoted=18,
                   measured=angles_beyond_training(base, base, L, 2 * L)["unseen_pairs"], abs=0)
    evidence["NTK-aware at s = 2, 4, 8"] = {s_: angles_beyond_training(base, ntk_frequencies(D, s_), L, s_ * L)
                                           for s_ in (2, 4, 8)}
    # dynamic NTK: the original frequencies up to L; beyond, NTK-aware with scale α·ℓ/L − (α − 1)
    assert torch.equal(dynamic_ntk_frequencies(D, 4, L, L), base)
    assert torch.allclose(dynamic_ntk_frequencies(D, 1, 4 * L, L), ntk_frequencies(D, 4))        # α = 1: ℓ/L
    assert torch.allclose(dynamic_ntk_frequencies(D, 4, 4 * L, L), ntk_frequencies(D, 13))       # α = 4: 13


@pytest.mark.claim("rope-scaling.pi")
def test_position_interpolation_stays_inside_the_trained_angles(evidence):
    base = frequencies(D)
    for s in (2, 4, 8):
        pi = pi_frequencies(D, s)
        got = angles_beyond_training(base, pi, L, s * L)
        assert got["unseen_pairs"] == 0 == _unseen_brute_force(base, pi, L, s * L)
    # and it is RoPE with positions divided by s (impls/arch/rope's `scale`)
    assert unseen_rotation_pairs(D, L, 8 * L, scale=8.0)["unseen_pairs"] == 0
    # the price: neighbouring tokens are s times closer in angle on the fastest pair
    evidence["angle between adjacent tokens on the fastest pair"] = {s: float(pi_frequencies(D, s)[0]) for s in (1, 2, 8)}


@pytest.mark.claim("rope-scaling.yarn")
def test_yarn_is_ntk_by_parts_plus_temperature(evidence):
    base = frequencies(D)
    for s in (2, 4, 16):
        y = yarn_frequencies(D, s, L)
        lam = wavelengths(base)
        turns = L / lam
        keep, interp = turns > 32, turns < 1
        assert torch.equal(y[keep], base[keep])                                  # high frequencies: untouched
        assert torch.allclose(y[interp], base[interp] / s)                       # low frequencies: PI
        ramp = yarn_ramp(D, L)
        mid = ~(keep | interp)
        assert torch.allclose(y[mid], (1 - ramp[mid]) * base[mid] / s + ramp[mid] * base[mid])
        assert bool((y <= base).all()) and bool((y >= base / s - 1e-15).all())
        got = angles_beyond_training(base, y, L, s * L)
        assert got["unseen_pairs"] == 0 == _unseen_brute_force(base, y, L, s * L)
    # the attention temperature: √(1/t) = 0.1 ln s + 1
    for s, root in ((1, 1.0), (4, 1.139), (16, 1.277)):
        evidence.quote(f"√(1/t) at s = {s}", quoted=root, measured=math.sqrt(yarn_logit_scale(s)), abs=0.0005)
    evidence["pairs kept / ramped / interpolated, d = 128, L = 4096"] = {
        "kept": int((L / wavelengths(base) > 32).sum()), "interpolated": int((L / wavelengths(base) < 1).sum())}


@pytest.mark.claim("rope-scaling.kv-cache")
def test_gqa_shrinks_the_cache_but_not_the_position_problem(evidence):
    cfg = PRESETS["llama-3-8b"]
    seq = 128 * 1024
    gqa = kv_cache_bytes(cfg, seq, 1, "bf16")
    mha = kv_cache_bytes(with_kv_heads(cfg, cfg.n_heads), seq, 1, "bf16")
    assert gqa == 2 * 32 * 8 * 128 * seq * 2                       # layers · 2 · kv heads · head dim · seq · bytes
    evidence.quote("MHA cache over GQA-8 cache, Llama-3-8B", quoted=4, measured=mha / gqa, abs=0)
    evidence["cache at 128K tokens, GiB"] = {"GQA-8": gqa / 2**30, "MHA": mha / 2**30}
    # the rotation angles do not depend on how many K/V heads there are: the extrapolation count is the same
    assert unseen_rotation_pairs(128, 8192, 131072)["unseen_pairs"] > 0
