"""Verifiers for qa/coding/kv-cache-decode.yaml (catalog code.kv-cache-decode).

Oracle: the uncached forward of the whole sequence (verifiers/katas/kv_cache_decode.py: RoPE as a complex
multiplication, ``F.scaled_dot_product_attention(is_causal=True)`` on the square score matrix), and at the
model level the Llama-style ``TinyDecoder`` run once over the whole sequence.
"""

from __future__ import annotations

import math

import pytest
import torch

from impls.inference.tiny_decoder import TinyDecoder, tiny_config
from impls.ml.mha import cached_attention
from verifiers.katas import kv_cache_decode as kata

F64 = torch.float64


def _setup(b=1, n=9, heads=2, d=4, seed=0, dtype=F64):
    s = kata.Seq(b, n, 0, heads, d, 10000.0, seed)
    return s.build(dtype)


@pytest.mark.claim("coding.kv-decode.same-logits")
def test_cached_decode_equals_recomputation(evidence):
    for prop in kata.ALL:
        prop(cached_attention)
    # a whole model: prefill 5 tokens, then 7 steps of one token against the recomputation of every prefix
    torch.manual_seed(0)
    model = TinyDecoder(tiny_config(n_kv_heads=2), seed=0).eval()
    tokens = torch.randint(0, model.cfg.vocab_size, (2, 12), generator=torch.Generator().manual_seed(1))
    worst = 0.0
    with torch.no_grad():
        cache = model.new_cache(2, 12, dtype="fp32")
        model(tokens[:, :5], cache=cache, start=0)
        for pos in range(5, 12):
            step = model(tokens[:, pos:pos + 1], cache=cache, start=pos)[:, -1]
            full = model(tokens[:, :pos + 1])[:, -1]
            worst = max(worst, float((step - full).abs().max()))
            assert torch.equal(step.argmax(-1), full.argmax(-1))
    assert worst < 1e-4
    evidence["max |cached - recomputed| logit, fp32 TinyDecoder, 7 steps"] = worst


@pytest.mark.claim("coding.kv-decode.no-mask-for-one-token")
def test_one_token_needs_no_mask_a_chunk_needs_an_offset_one(evidence):
    x, ws = _setup(n=9)
    want, k, v = kata.full_forward(x, *ws, 2, 10000.0)
    pos = torch.arange(9)
    q = kata.rope_complex(kata._heads(x @ ws[0], 2), pos, 10000.0)

    def attend(rows, mask):
        s = q[:, :, rows] @ k.transpose(-1, -2) / math.sqrt(4)
        if mask is not None:
            s = s.masked_fill(~mask, float("-inf"))
        o = torch.softmax(s, -1) @ v
        return o.permute(0, 2, 1, 3).reshape(1, len(rows), 8) @ ws[3]

    # one new token (position 8) after 8 cached: every key is in its past, a mask changes nothing
    one = attend([8], None)
    assert float((one - want[:, 8:9]).abs().max()) < 1e-12
    # a chunk of 3 (positions 6..8) after 6 cached: no mask lets 6 see 7 and 8
    rows = [6, 7, 8]
    nomask = float((attend(rows, None) - want[:, 6:9]).abs().max())
    top_left = torch.tril(torch.ones(3, 9, dtype=torch.bool))                 # tril(ones(T, S+T)): hides the cache
    bottom_right = torch.arange(9)[None, :] <= torch.arange(6, 9)[:, None]
    tl = float((attend(rows, top_left) - want[:, 6:9]).abs().max())
    br = float((attend(rows, bottom_right) - want[:, 6:9]).abs().max())
    assert nomask > 1e-3 and tl > 1e-3 and br < 1e-12
    # PyTorch's is_causal=True on a non-square score matrix is the top-left one
    sdpa = torch.nn.functional.scaled_dot_product_attention(q[:, :, rows], k, v, is_causal=True)
    sdpa = sdpa.permute(0, 2, 1, 3).reshape(1, 3, 8) @ ws[3]
    assert torch.allclose(sdpa, attend(rows, top_left), atol=1e-12)
    kata.prop_chunk_after_a_cache_uses_an_offset_mask(cached_attention)
    evidence["max error against the full forward, chunk of 3 after 6 cached"] = {
        "no mask": nomask, "top-left tril(ones(T, S+T)) / SDPA is_causal": tl, "offset by S (bottom-right)": br}


@pytest.mark.claim("coding.kv-decode.rope-position-zero")
def test_rotating_the_new_token_at_zero_is_wrong(evidence):
    x, ws = _setup(n=9, seed=2)
    want, k, v = kata.full_forward(x, *ws, 2, 10000.0)
    pos8 = torch.tensor([8])
    new_at_zero = {}
    for name, p in (("absolute position 8", pos8), ("position 0", torch.tensor([0]))):
        q = kata.rope_complex(kata._heads(x[:, 8:] @ ws[0], 2), p, 10000.0)
        kk = torch.cat([k[:, :, :8], kata.rope_complex(kata._heads(x[:, 8:] @ ws[1], 2), p, 10000.0)], 2)
        out = kata.attend(q, kk, v, ws[3], 8)
        new_at_zero[name] = float((out - want[:, 8:]).abs().max())
    assert new_at_zero["absolute position 8"] < 1e-12 and new_at_zero["position 0"] > 1e-2
    # the score of the new query with key j must depend on 8 - j; rotated at 0 it depends on 0 - j
    qv = torch.randn(4, dtype=F64, generator=torch.Generator().manual_seed(5))
    kv = torch.randn(4, dtype=F64, generator=torch.Generator().manual_seed(6))

    def score(m, n):
        return float(kata.rope_complex(qv[None], torch.tensor([m]), 1e4)[0] @ kata.rope_complex(kv[None],
                                                                                             torch.tensor([n]), 1e4)[0])

    assert abs(score(8, 3) - score(105, 100)) < 1e-12 and abs(score(8, 3) - score(0, 3)) > 1e-3
    with pytest.raises(AssertionError, match="rotated at position"):
        kata.prop_rope_at_the_absolute_position(_rope_at_zero)
    evidence["counterexample"] = {"max error of the 9th token's output": new_at_zero,
                                  "q·k score, positions (8, 3) vs (105, 100) vs (0, 3)":
                                      [score(8, 3), score(105, 100), score(0, 3)]}


def _rope_at_zero(x, wq, wk, wv, wo, heads, cache_k, cache_v, base=10000.0):
    """The mistake: the new tokens are rotated at positions 0..T-1 whatever the cache holds."""
    b, t, dim = x.shape
    d = dim // heads
    q = kata.rope_complex(kata._heads(x @ wq, heads), torch.arange(t), base)
    k = kata.rope_complex(kata._heads(x @ wk, heads), torch.arange(t), base)
    keys = torch.cat([cache_k, k], 2)
    values = torch.cat([cache_v, kata._heads(x @ wv, heads)], 2)
    return kata.attend(q, keys, values, wo, cache_k.shape[2]), keys, values
