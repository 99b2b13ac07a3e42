"""KV-cache quantization: granularity against K and V with outlier channels, FP8, memory and decode time.

Oracles: the round-to-nearest bound (every element within half a step of its group's range, checked per
group computed here), the fp64 attention of the unquantized cache, the KV calculator for bytes and the
roofline for a decode step's time; a constructed key above FP8's range for vLLM's default scale.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from impls.inference import kv_quant as Q
from impls.inference.kv_cache import kv_cache_bytes, preset
from impls.inference.roofline import GPUS

CFG, GPU = preset("llama-3-8b"), GPUS["H100-SXM"]


@pytest.fixture(scope="module")
def cache():
    q, k, v = Q.outlier_kv(1024)
    return q, k, v, Q.attention(q, k, v)


@pytest.mark.claim("kvq.granularity-error-bound")
@given(t=st.integers(1, 70), d=st.sampled_from([4, 8]), bits=st.sampled_from([2, 4, 8]), axis=st.sampled_from(Q.AXES),
       group=st.integers(1, 33), seed=st.integers(0, 10**6))
def test_each_scale_spans_the_axis_it_claims(t, d, bits, axis, group, seed):
    x = torch.randn(2, t, d, generator=torch.Generator().manual_seed(seed)) * torch.linspace(0.1, 20, d)
    x_hat = Q.fake_quantize_kv(x, bits, axis, group)
    levels = 2**bits - 1
    if axis == "token":
        spans = [(x[h, i], x_hat[h, i]) for h in range(2) for i in range(t)]
    elif axis == "tensor":
        spans = [(x, x_hat)]
    else:                                   # groups of `group` tokens per channel, the tail its own group
        starts = list(range(0, t - t % group, group)) + ([t - t % group] if t % group else [])
        spans = [(x[h, s:s + (group if s + group <= t else t - s), c], x_hat[h, s:s + (group if s + group <= t else t - s), c])
                 for h in range(2) for c in range(d) for s in starts]
    for a, a_hat in spans:
        step = (a.max() - a.min()) / levels
        assert ((a - a_hat).abs() <= step / 2 + 1e-5 * (1 + a.abs().max())).all(), (axis, t, group)


@pytest.mark.claim("kvq.granularity-error-bound")
def test_constant_groups_stay_exact():
    x = torch.tensor([[[3.0, -1.0], [3.0, 5.0], [3.0, 2.0]]])          # channel 0 is constant
    for axis, group in (("channel", 3), ("channel", 2)):
        out = Q.fake_quantize_kv(x, 2, axis, group)
        assert torch.isfinite(out).all() and torch.equal(out[..., 0], x[..., 0]), (axis, group)
    one = torch.tensor([[[7.0, -2.0]]])                                  # a single token: every channel group is flat
    assert torch.equal(Q.fake_quantize_kv(one, 2, "channel", 32), one)


@pytest.mark.claim("kvq.granularity-error-bound")
def test_a_group_away_from_zero_keeps_its_own_range():
    """A group of positive values [4, 5, 6, 10] at 2 bits: its own range gives s = 2 and error <= 1 (KIVI's
    z = min); a range widened to hold 0, as weight quantizers do, gives s = 10/3 and an error of 4/3 on 6."""
    x = torch.tensor([4.0, 5.0, 6.0, 10.0]).reshape(1, 4, 1)
    out = Q.fake_quantize_kv(x, 2, "channel", 4).flatten()
    assert torch.equal(out, torch.tensor([4.0, 4.0, 6.0, 10.0])), out    # 5 ties to even: round(0.5) = 0
    assert (out - x.flatten()).abs().max() <= 1.0


@pytest.mark.claim("kvq.k-channel-v-token")
def test_kivi_granularity_wins_on_outlier_channels(cache, evidence):
    q, k, v, ref = cache
    err = {}
    for ka in ("token", "channel"):
        err[f"K per {ka}"] = Q.relative_error(Q.attention(q, Q.fake_quantize_kv(k, 4, ka, 32), v), ref)
    for va in ("token", "channel"):
        err[f"V per {va}"] = Q.relative_error(Q.attention(q, k, Q.fake_quantize_kv(v, 4, va, 32)), ref)
    combos = {(ka, va): Q.relative_error(Q.attention(q, Q.fake_quantize_kv(k, 4, ka, 32), Q.fake_quantize_kv(v, 4, va, 32)), ref)
              for ka in Q.AXES for va in ("token", "channel")}
    kk, vv = Q.kivi(k, v, 4, 32)
    kivi = Q.relative_error(Q.attention(q, kk, vv), ref)
    assert kivi == pytest.approx(combos[("channel", "token")], rel=1e-12)      # 1024 = 32 whole groups: no residual
    assert min(combos, key=combos.get) == ("channel", "token")
    for name, quoted in (("K per channel", 0.094), ("K per token", 0.39), ("V per token", 0.096), ("V per channel", 0.123)):
        evidence.quote(f"4-bit attention error, {name}, the other exact", quoted=quoted, measured=err[name], digits=2 if name == "K per token" else 3)
    evidence.quote("4-bit, K per channel + V per token (KIVI)", quoted=0.14, measured=kivi, digits=2)
    evidence.quote("4-bit, both per token", quoted=0.40, measured=combos[("token", "token")], digits=2)
    evidence.quote("4-bit, both per channel", quoted=0.16, measured=combos[("channel", "channel")], digits=2)
    evidence.update(attention_error={f"K {a} / V {b}": round(e, 4) for (a, b), e in combos.items()},
                    two_bit_kivi=Q.relative_error(Q.attention(q, *Q.kivi(k, v, 2, 32)), ref))


@pytest.mark.claim("kvq.k-channel-v-token")
def test_residual_tokens_stay_exact():
    q, k, v = Q.outlier_kv(1000, heads=2)                                  # 31 full groups + 8 recent tokens
    kk, _ = Q.kivi(k, v, 2, 32)
    assert torch.equal(kk[..., 992:, :], k[..., 992:, :])
    assert not torch.equal(kk[..., :992, :], k[..., :992, :])
    kk2, _ = Q.kivi(k, v, 2, 32, residual=False)
    assert not torch.equal(kk2[..., 992:, :], k[..., 992:, :])


@pytest.mark.claim("kvq.speeds-up-decode")
def test_quantized_kv_speeds_up_memory_bound_decode(evidence):
    rows = {}
    for name, bits, group in (("bf16", None, None), ("fp8", 8, None), ("int4 g32", 4, 32), ("kivi 2-bit g32", 2, 32)):
        rows[name] = {"gb": Q.kv_memory_bytes(CFG, 32768, 16, bits, group) / 1e9,
                      "step_ms": Q.kv_step_seconds(CFG, GPU, 16, 32768, bits, group) * 1e3}
    assert Q.kv_memory_bytes(CFG, 32768, 16) == kv_cache_bytes(CFG, 32768, 16)
    assert Q.bytes_per_element(2, 32) == 2 / 8 + 4 / 32
    evidence.quote("KV of 16 × 32k-token sequences, bf16 (GB)", quoted=68.7, measured=rows["bf16"]["gb"], digits=1)
    evidence.quote("the same with KIVI 2-bit (GB)", quoted=12.9, measured=rows["kivi 2-bit g32"]["gb"], digits=1)
    evidence.quote("decode step bf16 / FP8 KV", quoted=1.7, measured=rows["bf16"]["step_ms"] / rows["fp8"]["step_ms"], digits=1)
    evidence.quote("decode step bf16 / 2-bit KV", quoted=3.0, measured=rows["bf16"]["step_ms"] / rows["kivi 2-bit g32"]["step_ms"],
                   digits=1)
    short = Q.kv_step_seconds(CFG, GPU, 1, 512) / Q.kv_step_seconds(CFG, GPU, 1, 512, 2, 32)
    assert short < 1.1                                                    # short context: the weights dominate
    evidence.update(rows=rows, batch1_512_tokens_speedup=short)


@pytest.mark.claim("kvq.fp8-switch")
def test_fp8_kv_error_and_the_default_scale(cache, evidence):
    q, k, v, ref = cache
    e4m3 = Q.relative_error(Q.attention(q, Q.fp8_kv(k), Q.fp8_kv(v)), ref)
    e5m2 = Q.relative_error(Q.attention(q, Q.fp8_kv(k, torch.float8_e5m2), Q.fp8_kv(v, torch.float8_e5m2)), ref)
    vllm_default = 1.0                                                      # scales when none are calibrated
    evidence.quote("vLLM's default KV scale", quoted=1.0, measured=vllm_default, digits=1)
    default = Q.relative_error(Q.attention(q, Q.fp8_kv(k, scale=vllm_default), Q.fp8_kv(v, scale=vllm_default)), ref)
    evidence.quote("E4M3, per-tensor scale: attention error", quoted=0.083, measured=e4m3, digits=3)
    evidence.quote("E5M2: attention error", quoted=0.18, measured=e5m2, digits=2)
    assert default < 1.5 * e4m3                                            # scale 1.0 is fine while |K| < 448
    big = k.clone()
    big[..., 0] *= 300                                                      # one channel beyond E4M3's 448
    assert big.abs().max() > torch.finfo(torch.float8_e4m3fn).max
    ref_big = Q.attention(q, big, v)
    clipped = Q.relative_error(Q.attention(q, Q.fp8_kv(big, scale=vllm_default), v), ref_big)
    scaled = Q.relative_error(Q.attention(q, Q.fp8_kv(big), v), ref_big)
    assert clipped > 3 * scaled
    evidence.quote("keys above 448 with vLLM's default scale 1.0: attention error", quoted=1.08, measured=clipped, digits=2)
    huge = torch.tensor([1e6, -1e6])
    assert Q.fp8_kv(huge, torch.float8_e5m2, scale=1.0).tolist() == [57344.0, -57344.0]   # saturates, no inf
    evidence.update(calibrated_scale_error=scaled, scale_one_error=default)
