"""Verifiers for qa/coding/mha-from-scratch.yaml (catalog code.mha-from-scratch).

The kata properties (verifiers/katas/mha.py) judge the reference ``impls/ml/mha.py::mha`` against PyTorch's
``F.scaled_dot_product_attention`` and a per-head loop; each claim below also shows the wrong version failing.
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from impls.ml.mha import mha
from verifiers.katas import mha as kata

F64 = torch.float64


def _weights(dim: int, seed: int, dtype=F64):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(dim, dim, generator=g, dtype=F64).div(math.sqrt(dim)).to(dtype) for _ in range(4)]


def _no_transpose(x, wq, wk, wv, wo, heads):
    """The slip: view [B, T, D] as [B, H, T, d] directly (and merge back without the transpose)."""
    b, t, dim = x.shape

    def split(y):
        return y.reshape(b, heads, t, dim // heads)

    q, k, v = split(x @ wq), split(x @ wk), split(x @ wv)
    p = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(dim // heads), dim=-1)
    return (p @ v).reshape(b, t, dim) @ wo


@pytest.mark.claim("coding.mha.split-heads-transpose")
def test_heads_need_the_transpose(evidence):
    kata.prop_each_head_uses_its_own_columns(mha)
    kata.prop_matches_sdpa(mha)
    # which token's features land in "row t" of head h when [B, T, D] is viewed directly as [B, H, T, d]
    b, t, dim, heads = 1, 4, 8, 2
    d = dim // heads
    owner = torch.arange(t)[:, None].expand(t, dim).reshape(b, t, dim)          # token index of each feature
    wrong = owner.reshape(b, heads, t, d)
    right = owner.view(b, t, heads, d).transpose(1, 2)
    assert all(len(set(wrong[0, h, r].tolist())) == 1 for h in range(heads) for r in range(t))
    assert wrong[0, 0, :, 0].tolist() == [0, 0, 1, 1] and right[0, 0, :, 0].tolist() == [0, 1, 2, 3]
    # head 0's "4 tokens" are halves of tokens 0 and 1: its row 0 and row 1 are both token 0
    x = torch.randn(2, 5, 12, dtype=F64, generator=torch.Generator().manual_seed(0))
    ws = _weights(12, 1)
    err = float((_no_transpose(x, *ws, 3) - kata.oracle(x, *ws, 3)).abs().max())
    assert err > 1e-2
    with pytest.raises(AssertionError, match="one softmax per head"):
        kata.prop_each_head_uses_its_own_columns(lambda x, wq, wk, wv, wo, heads, causal=False, key_padding_mask=None:
                                                 _no_transpose(x, wq, wk, wv, wo, heads))
    evidence["counterexample"] = {
        "token owning each row of head 0, [B,T,D] viewed as [B,H,T,d] (T=4, D=8, H=2)": wrong[0, 0, :, 0].tolist(),
        "with view [B,T,H,d] then transpose(1, 2)": right[0, 0, :, 0].tolist(),
        "max |output - SDPA| without the transpose (B=2, T=5, D=12, H=3)": err}


@pytest.mark.claim("coding.mha.max-subtraction")
def test_subtracting_the_max_changes_nothing_and_prevents_overflow(evidence):
    @given(st.lists(st.floats(-50, 50), min_size=1, max_size=12), st.floats(-100, 100))
    def shift(row, c):
        s = torch.tensor(row, dtype=F64)
        e1 = torch.exp(s - s.max())
        e2 = torch.exp(s - c)                       # |s - c| <= 150: finite and non-zero in fp64
        # exp(s - c) = exp(s - m)·exp(m - c): the factor cancels in the ratio
        assert torch.allclose(e1 / e1.sum(), e2 / e2.sum(), rtol=1e-12, atol=0)

    shift()
    # fp32: exp overflows past log(FLT_MAX) = 88.72
    limit = math.log(torch.finfo(torch.float32).max)
    evidence.quote("largest fp32 argument of exp", quoted=88.72, measured=limit, digits=2)
    s = torch.tensor([[90.0, 89.0, 0.0]])
    naive = torch.exp(s) / torch.exp(s).sum(-1, keepdim=True)
    stable = torch.exp(s - s.amax(-1, keepdim=True))
    stable = stable / stable.sum(-1, keepdim=True)
    assert torch.isnan(naive).any() and torch.isfinite(stable).all()
    assert torch.allclose(stable.double(), torch.softmax(s.double(), -1), atol=1e-7)
    kata.prop_stable_softmax_in_fp32(mha)
    with pytest.raises(AssertionError, match="non-finite"):
        kata.prop_stable_softmax_in_fp32(_without_max)
    evidence["counterexample"] = {"scores (fp32)": s[0].tolist(), "exp without the max": naive[0].tolist(),
                                  "with the row max subtracted": stable[0].tolist()}


def _without_max(x, wq, wk, wv, wo, heads, causal=False, key_padding_mask=None):
    b, t, dim = x.shape
    d = dim // heads
    q, k, v = ((x @ w).view(b, t, heads, d).transpose(1, 2) for w in (wq, wk, wv))
    s = q @ k.transpose(-1, -2) / math.sqrt(d)
    vis = torch.ones(b, 1, t, t, dtype=torch.bool)
    if causal:
        vis = vis & torch.ones(t, t, dtype=torch.bool).tril()
    if key_padding_mask is not None:
        vis = vis & key_padding_mask[:, None, None, :]
    e = torch.exp(s).masked_fill(~vis, 0.0)
    p = e / e.sum(-1, keepdim=True).clamp_min(1e-30)
    return (p @ v).transpose(1, 2).reshape(b, t, dim) @ wo


def _mask_after_softmax(x, wq, wk, wv, wo, heads, causal=False, key_padding_mask=None):
    b, t, dim = x.shape
    d = dim // heads
    q, k, v = ((x @ w).view(b, t, heads, d).transpose(1, 2) for w in (wq, wk, wv))
    p = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(d), dim=-1)
    vis = torch.ones(b, 1, t, t, dtype=torch.bool)
    if causal:
        vis = vis & torch.ones(t, t, dtype=torch.bool).tril()
    if key_padding_mask is not None:
        vis = vis & key_padding_mask[:, None, None, :]
    return ((p * vis) @ v).transpose(1, 2).reshape(b, t, dim) @ wo


@pytest.mark.claim("coding.mha.masks-before-softmax")
def test_hidden_tokens_do_not_reach_real_positions(evidence):
    kata.prop_hidden_tokens_do_not_leak(mha)
    kata.prop_fully_masked_rows_are_zero(mha)
    # zeroing the hidden probabilities after the softmax leaves their exp(score) in the normaliser
    x = torch.randn(1, 4, 4, dtype=F64, generator=torch.Generator().manual_seed(3))
    ws = _weights(4, 4)
    x2 = x.clone()
    x2[0, 3] *= 5                                                       # change only the last (future) token
    right = float((mha(x2, *ws, 2, causal=True) - mha(x, *ws, 2, causal=True))[0, :3].abs().max())
    wrong = float((_mask_after_softmax(x2, *ws, 2, causal=True) - _mask_after_softmax(x, *ws, 2, causal=True))[0, :3]
                  .abs().max())
    assert right == 0.0 and wrong > 1e-3
    with pytest.raises(AssertionError, match="after changing the hidden tokens"):
        kata.prop_hidden_tokens_do_not_leak(_mask_after_softmax)
    evidence["counterexample"] = {"change in outputs 0..2 when token 3 changes, mask before the softmax": right,
                                  "the same, zeroing probabilities after the softmax": wrong}


@pytest.mark.claim("coding.mha.scale-model-width")
def test_model_width_scale_is_a_different_temperature(evidence):
    kata.prop_scale_is_one_over_sqrt_head_width(mha)
    dim, heads = 512, 8
    ratio = math.sqrt(dim) / math.sqrt(dim // heads)
    evidence.quote("factor between 1/sqrt(d) and 1/sqrt(D) for D = 512, H = 8", quoted=2.83, measured=ratio, digits=2)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1, 64, dim, generator=g, dtype=F64)
    ws = [torch.randn(dim, dim, generator=g, dtype=F64) / math.sqrt(dim) for _ in range(4)]
    q = (x @ ws[0]).view(1, 64, heads, 64).transpose(1, 2)
    k = (x @ ws[1]).view(1, 64, heads, 64).transpose(1, 2)
    raw = q @ k.transpose(-1, -2)

    def entropy(p):
        return float(-(p * p.clamp_min(1e-300).log()).sum(-1).mean())

    h_head, h_model = entropy(torch.softmax(raw / 8.0, -1)), entropy(torch.softmax(raw / math.sqrt(dim), -1))
    assert h_model > h_head + 0.05                      # the wrong scale flattens every head's attention

    def model_width(x, wq, wk, wv, wo, heads, causal=False, key_padding_mask=None):
        b, t, dd = x.shape
        qq, kk, vv = ((x @ w).view(b, t, heads, dd // heads).transpose(1, 2) for w in (wq, wk, wv))
        hidden = ~torch.ones(t, t, dtype=torch.bool).tril() if causal else torch.zeros(t, t, dtype=torch.bool)
        p = torch.softmax((qq @ kk.transpose(-1, -2) / math.sqrt(dd)).masked_fill(hidden, float("-inf")), -1)
        return (p @ vv).transpose(1, 2).reshape(b, t, dd) @ wo

    with pytest.raises(AssertionError, match=r"q·k/sqrt\(2\)"):
        kata.prop_scale_is_one_over_sqrt_head_width(model_width)
    evidence["mean attention entropy (nats), T = 64, D = 512, H = 8"] = {"1/sqrt(64)": h_head, "1/sqrt(512)": h_model}


def test_the_reference_passes_every_property_and_rejects_bad_widths():
    for prop in kata.ALL:
        prop(mha)
    with pytest.raises(ValueError):
        mha(torch.zeros(1, 2, 6, dtype=F64), *_weights(6, 0), 4)
