"""Verifiers for qa/coding/rope-apply.yaml (catalog code.rope-apply).

Oracles: the complex-number rotation of verifiers/katas/rope.py, attention computed directly from scores,
and the permutation of projection columns that turns one pair layout into the other.
"""

from __future__ import annotations

import math

import pytest
import torch

from impls.arch.rope import rope
from verifiers.katas import rope as kata

F64 = torch.float64


def _attention(q, k, v):
    p = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]), dim=-1)
    return p @ v


@pytest.mark.claim("coding.rope.q-and-k-only")
def test_rotating_v_breaks_relative_positions(evidence):
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 6, 8, generator=g, dtype=F64) for _ in range(3))
    pos = torch.arange(6)
    shifted = {}
    for c in (0, 37, 1000):
        qk = _attention(rope(q, pos + c), rope(k, pos + c), v)
        qkv = _attention(rope(q, pos + c), rope(k, pos + c), rope(v, pos + c))
        shifted[c] = (qk, qkv)
    moved_qk = max(float((shifted[c][0] - shifted[0][0]).abs().max()) for c in (37, 1000))
    moved_qkv = max(float((shifted[c][1] - shifted[0][1]).abs().max()) for c in (37, 1000))
    assert moved_qk < 1e-12 and moved_qkv > 0.1
    evidence["max change of the attention output when every position moves by 37 or 1000"] = {
        "RoPE on q and k": moved_qk, "RoPE on q, k and v": moved_qkv}


def _interleaved_to_halves(d: int) -> list[int]:
    """Column order that moves pair (2i, 2i+1) to (i, i + d/2): the even columns, then the odd ones."""
    return list(range(0, d, 2)) + list(range(1, d, 2))


@pytest.mark.claim("coding.rope.layouts-interchangeable")
def test_pair_layouts_need_permuted_weights(evidence):
    g = torch.Generator().manual_seed(1)
    d, t = 8, 7
    x = torch.randn(t, 16, generator=g, dtype=F64)
    wq, wk = torch.randn(16, d, generator=g, dtype=F64), torch.randn(16, d, generator=g, dtype=F64)
    pos = torch.arange(t)

    def scores(wq_, wk_, layout):
        return rope(x @ wq_, pos, layout=layout) @ rope(x @ wk_, pos, layout=layout).T

    inter, halves = scores(wq, wk, "interleaved"), scores(wq, wk, "halves")
    perm = _interleaved_to_halves(d)
    permuted = scores(wq[:, perm], wk[:, perm], "halves")
    same_weights = float((inter - halves).abs().max())
    after_perm = float((inter - permuted).abs().max())
    assert same_weights > 0.1 and after_perm < 1e-10
    # elementwise: rotating the permuted vector in halves is the permuted rotation in interleaved
    y = x @ wq
    assert torch.allclose(rope(y[:, perm], pos, layout="halves"), rope(y, pos, layout="interleaved")[:, perm],
                          atol=1e-12)
    evidence["max |score difference| over a 7-token sequence, d = 8"] = {
        "same weights, interleaved vs halves": same_weights,
        "halves with W_q, W_k columns permuted (evens then odds)": after_perm}
    evidence["column permutation for d = 8"] = perm


@pytest.mark.claim("coding.rope.norm-preserving")
def test_rope_keeps_norms(evidence):
    kata.prop_norm_of_each_pair_is_kept(rope)
    kata.prop_matches_complex_rotation(rope)
    x = torch.randn(3, 50, 64, dtype=F64, generator=torch.Generator().manual_seed(2))
    pos = torch.arange(1000, 1050)
    worst = float(((rope(x, pos).norm(dim=-1) - x.norm(dim=-1)).abs() / x.norm(dim=-1)).max())
    assert worst < 1e-14
    evidence["max relative change of ||x|| (fp64, d = 64, positions 1000..1049)"] = worst


@pytest.mark.claim("coding.rope.frequencies")
def test_first_pair_turns_fastest(evidence):
    kata.prop_pair_i_turns_by_theta_i(rope)
    kata.prop_positions_are_absolute(rope)
    d, base = 128, 10000.0
    theta = [base ** (-2 * i / d) for i in range(d // 2)]
    assert all(a > b for a, b in zip(theta, theta[1:])) and theta[0] == 1.0
    slowest = 2 * math.pi / theta[-1]
    evidence.quote("positions per turn of the slowest pair (d = 128, base 10000)", quoted=54410, measured=slowest,
                   rel=1e-3)
    evidence["wavelengths (positions per turn), d = 128"] = {"pair 0": 2 * math.pi, "pair 63": slowest}
