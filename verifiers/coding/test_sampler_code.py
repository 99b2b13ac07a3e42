"""Verifiers for qa/coding/sampler-top-k-top-p.yaml (catalog code.sampler-top-k-top-p).

Oracles: brute force over every subset of a small vocabulary for the nucleus, exact interval arithmetic for
what inverse-CDF sampling draws, and the kata's plain-Python definition (verifiers/katas/sampler.py).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from impls.ml.decoding import distribution, sample, top_k_filter, top_p_filter
from verifiers.katas import sampler as kata

F64 = torch.float64


def _log(ps) -> torch.Tensor:
    return torch.tensor([math.log(p) for p in ps], dtype=F64)


def _smallest_reaching(probs: list[float], p: float) -> tuple[int, float]:
    """Brute force: the fewest tokens whose mass reaches p, and the largest mass such a set can have."""
    for r in range(1, len(probs) + 1):
        masses = [math.fsum(probs[i] for i in s) for s in itertools.combinations(range(len(probs)), r)]
        ok = [m for m in masses if m >= p]
        if ok:
            return r, max(ok)
    raise AssertionError("p above the total mass")


@pytest.mark.claim("coding.sampler.top-p-keeps-the-crossing-token")
def test_nucleus_is_the_smallest_set_reaching_p(evidence):
    @given(st.lists(st.integers(1, 30), min_size=2, max_size=7), st.sampled_from([0.3, 0.5, 0.75, 0.9, 0.99]))
    def check(weights, p):
        total = sum(weights)
        z = _log([w / total for w in weights])
        probs = torch.softmax(z, -1).tolist()
        got = distribution(z, 1.0, None, p)
        kept = [i for i in range(len(probs)) if got[i] > 0]
        size, mass = _smallest_reaching(probs, p)
        assert len(kept) == size and abs(math.fsum(probs[i] for i in kept) - mass) <= 1e-12, (probs, p, kept)

    check()
    for prop in (kata.prop_top_p_keeps_the_token_that_crosses_p, kata.prop_top_p_boundary_is_exact,
                 kata.prop_top_p_ties_at_the_boundary, kata.prop_most_probable_token_always_survives):
        prop(distribution)
    got = distribution(_log([0.5, 0.3, 0.2]), 1.0, None, 0.6).tolist()
    assert got == pytest.approx([0.625, 0.375, 0.0], abs=1e-12)
    evidence["probs [0.5, 0.3, 0.2], top_p 0.6"] = {"kept (renormalised)": got,
                                                     "why": "0.5 < 0.6, so the 0.3 that crosses 0.6 is kept"}


def _inverse_cdf_distribution(weights: list[float]) -> list[float]:
    """What ``searchsorted(cumsum(w), u)`` with u ~ U[0, 1) draws, exactly: token i gets the length of
    [c_{i-1}, c_i); a u beyond the total mass runs off the end and is clamped to the last token."""
    c = list(itertools.accumulate(weights))
    out = [max(0.0, min(hi, 1.0) - min(lo, 1.0)) for lo, hi in zip([0.0] + c[:-1], c)]
    out[-1] += max(0.0, 1.0 - c[-1])
    return out


@pytest.mark.claim("coding.sampler.renormalise")
def test_what_unnormalised_weights_draw(evidence):
    z = _log([0.5, 0.3, 0.1, 0.1])
    kept = torch.softmax(z, -1) * (top_p_filter(z, 0.7) > float("-inf"))        # [0.5, 0.3, 0, 0], mass 0.8
    right = (kept / kept.sum()).tolist()
    # inverse-CDF sampling on the unnormalised kept mass hands the missing 0.2 to the last token, a filtered one
    inv = _inverse_cdf_distribution(kept.tolist())
    assert inv == pytest.approx([0.5, 0.3, 0.0, 0.2], abs=1e-12) and inv[3] > 0 and right[3] == 0
    # torch.multinomial takes unnormalised weights and normalises them itself
    g = torch.Generator().manual_seed(0)
    draws = torch.multinomial(kept.expand(20000, 4).contiguous(), 1, replacement=True, generator=g).flatten()
    freq = (torch.bincount(draws, minlength=4).to(F64) / draws.numel()).tolist()
    assert freq[2] == freq[3] == 0 and abs(freq[0] - 0.625) < 0.02
    # NumPy refuses probabilities that do not sum to 1
    with pytest.raises(ValueError):
        np.random.default_rng(0).choice(4, p=kept.numpy())
    # the reference's sample() draws from the renormalised distribution
    logits = z.expand(20000, 4).contiguous()
    got = sample(logits, 1.0, None, 0.7, generator=torch.Generator().manual_seed(1))
    freq_ref = (torch.bincount(got, minlength=4).to(F64) / got.numel()).tolist()
    assert freq_ref[2] == freq_ref[3] == 0 and abs(freq_ref[0] - 0.625) < 0.02
    evidence["probs [0.5, 0.3, 0.1, 0.1], top_p 0.7"] = {
        "renormalised": right, "inverse CDF on the unnormalised kept mass": inv,
        "torch.multinomial on the unnormalised weights (20000 draws)": freq}


@pytest.mark.claim("coding.sampler.cumsum-exceeds-p-mask")
def test_masking_cumsum_above_p_drops_the_crossing_token(evidence):
    def cumsum_mask(z, p):
        probs = torch.softmax(z, -1)
        s, order = torch.sort(probs, descending=True, stable=True)
        remove = torch.zeros_like(s, dtype=torch.bool).scatter(-1, order, torch.cumsum(s, -1) > p)
        return torch.softmax(z.masked_fill(remove, float("-inf")), -1)

    probs, p, p_small = [0.5, 0.3, 0.2], 0.6, 0.4
    z = _log(probs)
    wrong, right = cumsum_mask(z, p).tolist(), distribution(z, 1.0, None, p).tolist()
    assert wrong == pytest.approx([1.0, 0.0, 0.0]) and right == pytest.approx([0.625, 0.375, 0.0])
    small = cumsum_mask(z, p_small)                             # p below the top probability: nothing survives
    assert torch.isnan(small).all()
    measured = torch.softmax(z, -1).tolist()
    for what, quoted, value in (("first probability", 0.5, measured[0]), ("second probability", 0.3, measured[1]),
                                ("third probability", 0.2, measured[2]), ("top_p", 0.6, p), ("smaller top_p", 0.4, p_small)):
        evidence.quote(what, quoted=quoted, measured=value, abs=1e-12)
    with pytest.raises(AssertionError, match="kept"):
        kata.prop_top_p_keeps_the_token_that_crosses_p(lambda z, t, k, p: cumsum_mask(z, p))
    evidence["counterexample"] = {"probs": [0.5, 0.3, 0.2], "top_p": 0.6,
                                  "mask cumsum > p (kept mass 0.5 < 0.6)": wrong, "nucleus": right,
                                  "the same mask at top_p 0.4": small.tolist()}


@pytest.mark.claim("coding.sampler.top-k-top-p-order")
def test_top_k_and_top_p_do_not_commute(evidence):
    probs, k, p = [0.4, 0.3, 0.2, 0.1], 2, 0.5
    z = _log(probs)
    k_then_p = torch.softmax(top_p_filter(top_k_filter(z, k), p), -1)
    p_then_k = torch.softmax(top_k_filter(top_p_filter(z, p), k), -1)
    assert int((k_then_p > 0).sum()) == 1 and int((p_then_k > 0).sum()) == 2
    assert float(k_then_p.max()) == 1.0 and float(torch.softmax(top_k_filter(z, k), -1)[0]) > p
    measured = torch.softmax(z, -1).tolist()
    for what, quoted, value in (("first probability", 0.4, measured[0]), ("second probability", 0.3, measured[1]),
                                ("third probability", 0.2, measured[2]), ("fourth probability", 0.1, measured[3]),
                                ("top_p", 0.5, p)):
        evidence.quote(what, quoted=quoted, measured=value, abs=1e-12)

    @given(st.lists(kata._logit, min_size=2, max_size=8), st.integers(1, 8),
           st.sampled_from([0.3, 0.5, 0.8, 0.95]))
    def superset(logits, k, p):                   # top-k first never keeps more than top-p first
        zz = torch.tensor(logits, dtype=F64)
        a = top_p_filter(top_k_filter(zz, k), p) > float("-inf")
        b = top_k_filter(top_p_filter(zz, p), k) > float("-inf")
        assert bool((a <= b).all()), (logits, k, p, a.tolist(), b.tolist())

    superset()
    kata.prop_filters_apply_in_order(distribution)
    evidence["counterexample"] = {"probs": [0.4, 0.3, 0.2, 0.1], "top_k": 2, "top_p": 0.5,
                                  "top-k then top-p": k_then_p.tolist(), "top-p then top-k": p_then_k.tolist()}


def test_sampler_kata_judges_the_reference():
    for prop in kata.ALL:
        prop(distribution)
    assert distribution(torch.tensor([1.0, 3.0, 3.0]), 0.0).tolist() == [0.0, 1.0, 0.0]      # T = 0: argmax
