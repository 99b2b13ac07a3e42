"""Prefill vs decode on the roofline, and static vs continuous batching on one trace.

Oracles: FLOPs and bytes counted matrix by matrix from the model config (``roofline.step_cost``),
independently of the parameter count, which is checked against Llama-3-8B's published 8,030,261,248;
NVIDIA datasheet peaks (dense BF16) and bandwidths; a real small decoder under FlopCounterMode, its parameters
and its cache tensors for the counts themselves; an iteration-level simulation for the schedulers.
"""

from __future__ import annotations

from statistics import median

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from impls.inference import kv_cache as K
from impls.inference import roofline as R
from impls.inference.batching import Job, continuous_batching, static_batching
from impls.inference.paged_kv import synthetic_trace
from impls.inference.tiny_decoder import TinyDecoder, tiny_config

LLAMA3 = K.preset("llama-3-8b")
H100 = R.GPUS["H100-SXM"]


def test_linear_params_count_every_matmul_once():
    cfg = LLAMA3
    assert R.linear_params(cfg) == K.parameter_count(cfg) - cfg.vocab_size * cfg.hidden_size \
        - (2 * cfg.n_layers + 1) * cfg.hidden_size                 # all but the embedding lookup and the norms


@pytest.mark.claim("pd.prefill-compute-decode-memory")
def test_which_phase_is_bound_by_what(evidence):
    cases = {
        "prefill 2048 tokens, batch 1": R.step_cost(LLAMA3, batch=1, new=2048),
        "prefill 16 tokens, batch 1": R.step_cost(LLAMA3, batch=1, new=16),
        "decode, batch 1, context 4096": R.step_cost(LLAMA3, batch=1, new=1, context=4096),
        "decode, batch 512, context 128": R.step_cost(LLAMA3, batch=512, new=1, context=128),
    }
    bound = {k: c.bound(H100) for k, c in cases.items()}
    evidence.quote("FLOP/B of a 16-token Llama-3-8B prefill", quoted=15.9,
                   measured=cases["prefill 16 tokens, batch 1"].intensity, digits=1)
    assert bound["prefill 2048 tokens, batch 1"] == "compute"
    assert bound["decode, batch 1, context 4096"] == "memory"
    assert bound["prefill 16 tokens, batch 1"] == "memory"                  # a short prompt is memory-bound
    big = cases["decode, batch 512, context 128"]
    assert big.linear_intensity > H100.ridge                                # its weight GEMMs are compute-bound
    assert big.attention_intensity == LLAMA3.n_heads // LLAMA3.n_kv_heads   # attention stays at G FLOP/byte
    evidence.update(ridge_h100=round(H100.ridge, 1),
                    intensity={k: round(c.intensity, 1) for k, c in cases.items()},
                    weight_gemm_intensity={k: round(c.linear_intensity, 1) for k, c in cases.items()}, bound=bound,
                    counterexample={"prefill 16 tokens": "memory-bound",
                                    "decode batch 512 weight GEMMs": round(big.linear_intensity, 1)})


@pytest.mark.claim("pd.prefill-compute-decode-memory", "pd.decode-flops-per-byte")
@pytest.mark.parametrize("new, context", [(16, 0), (1, 31), (3, 9)])
def test_roofline_counts_what_a_real_decoder_does(new, context, evidence):
    """An oracle independent of the roofline's own arithmetic: the tiny decoder's forward under torch's
    FlopCounterMode, its parameters and its cache tensors. Dense masked attention computes every (query, key)
    pair, n·(c + n), where the roofline counts the causal n·c + n(n+1)/2 (equal for one new token)."""
    cfg = tiny_config(2)
    model = TinyDecoder(cfg)
    cost = R.step_cost(cfg, batch=2, new=new, context=context)
    cache = model.new_cache(2, context + new, "bf16")
    tokens = torch.randint(0, cfg.vocab_size, (2, context + new), generator=torch.Generator().manual_seed(0))
    if context:
        model(tokens[:, :context], cache, 0)
    with FlopCounterMode(display=False) as fc:
        model(tokens[:, context:], cache, context)
    per_pair = 4 * cfg.n_layers * cfg.n_heads * cfg.head_dim
    dense_pairs = 2 * new * (context + new)
    assert fc.get_total_flops() == cost.linear_flops + per_pair * dense_pairs
    assert cost.attention_flops == per_pair * 2 * (new * context + new * (new + 1) // 2)
    linear = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    assert cost.weight_bytes == 2 * sum(m.weight.numel() for m in linear)          # every matmul weight, bf16
    assert cost.kv_bytes == cache.nbytes()                                          # the whole cache is read
    evidence[f"new={new}, context={context}"] = {"flop_counter": fc.get_total_flops(),
                                                 "roofline_linear": cost.linear_flops,
                                                 "roofline_attention_causal": cost.attention_flops}


@pytest.mark.claim("pd.decode-flops-per-byte")
def test_batch1_decode_does_one_flop_per_weight_byte(evidence):
    c = R.step_cost(LLAMA3, batch=1, new=1, context=1)
    evidence.quote("FLOPs per byte of 16-bit weights at batch 1", quoted=1, measured=c.linear_intensity, digits=0)
    assert c.linear_intensity == pytest.approx(1, abs=0.01) and 0.9 < c.intensity <= 2
    ridges = {g.name: round(g.ridge, 1) for g in R.GPUS.values()}
    assert min(ridges.values()) > 100 * c.linear_intensity
    evidence.update(weight_gemm_intensity=c.linear_intensity, ridge_points=ridges)


@pytest.mark.claim("pd.batching-raises-intensity")
def test_batching_raises_weight_gemm_intensity_not_attention(evidence):
    rows = {}
    for b in (1, 8, 64, 256):
        c = R.step_cost(LLAMA3, batch=b, new=1, context=2048)
        rows[b] = {"weight_gemms": round(c.linear_intensity, 2), "attention": round(c.attention_intensity, 2),
                   "time_per_token_us": round(c.time(H100) / b * 1e6, 2)}
    assert all(rows[b]["weight_gemms"] == pytest.approx(b, rel=0.1) for b in (1, 8, 64))
    assert len({r["attention"] for r in rows.values()}) == 1              # KV is per sequence: no reuse
    assert rows[64]["time_per_token_us"] < rows[1]["time_per_token_us"] / 10
    # "attention stays at G" is single-token decode: verifying γ + 1 = 5 drafted tokens per sequence at once
    # (speculative decoding) scores 5 queries against every cached key
    g = LLAMA3.n_heads // LLAMA3.n_kv_heads
    assert rows[64]["attention"] == pytest.approx(g, rel=1e-3)
    spec = R.step_cost(LLAMA3, batch=64, new=5, context=2048)
    assert spec.attention_intensity == pytest.approx(5 * g, rel=0.01)
    evidence.quote("attention FLOP/B verifying 5 tokens per sequence", quoted=20, measured=spec.attention_intensity,
                   digits=0)
    evidence.update(intensity_by_batch=rows, attention_intensity_verifying_5_tokens=round(spec.attention_intensity, 2))


@pytest.mark.claim("pd.decode-latency-floor")
def test_decode_floor_for_70b_on_two_gpus(evidence):
    floor = R.decode_floor_seconds(70e9, 2, 2, 3e12)
    evidence.quote("ms per token, 70B fp16 over 2 GPUs at 3 TB/s", quoted=23, measured=floor * 1e3, digits=0)
    llama70 = K.parameter_count(K.preset("llama-2-70b"))
    real = {name: R.decode_floor_seconds(llama70, 2, 2, R.GPUS[name].bandwidth) * 1e3
            for name in ("H100-SXM", "H200-SXM", "A100-SXM-80GB")}
    step = R.step_cost(K.preset("llama-2-70b"), batch=1, new=1, context=1)
    assert step.bound(H100) == "memory" and step.time(H100) >= step.weight_bytes / H100.bandwidth
    evidence.update(llama2_70b_params=llama70, floor_ms_by_gpu={k: round(v, 1) for k, v in real.items()})


def _jobs():
    return [Job(len(r.prompt), r.output_len) for r in synthetic_trace(n=256, seed=0)]


@pytest.mark.claim("pd.static-vs-continuous")
def test_continuous_batching_refills_slots_at_the_next_iteration(evidence):
    jobs = _jobs()
    st_ = static_batching(jobs, LLAMA3, H100, batch=32)
    co = continuous_batching(jobs, LLAMA3, H100, batch=32)
    assert st_.tokens_out == co.tokens_out == sum(j.output for j in jobs)
    assert st_.idle_while_waiting > 0 and co.idle_while_waiting == 0
    assert co.slot_occupancy > 2 * st_.slot_occupancy
    assert co.throughput > 2 * st_.throughput
    evidence.update(throughput_tokens_per_s={"static": round(st_.throughput), "continuous": round(co.throughput)},
                    slot_occupancy={"static": round(st_.slot_occupancy, 3), "continuous": round(co.slot_occupancy, 3)},
                    idle_slot_iterations_while_jobs_waited={"static": st_.idle_while_waiting,
                                                            "continuous": co.idle_while_waiting})


@pytest.mark.claim("pd.continuous-fully-loaded")
def test_continuous_batching_leaves_compute_idle(evidence):
    jobs = _jobs()
    co = continuous_batching(jobs, LLAMA3, H100, batch=64)
    util = co.compute_utilisation(H100)
    evidence.quote("share of peak FLOP/s used with 64 slots", quoted=28, measured=100 * util, digits=0)
    evidence.quote("longest iteration with decodes in flight over the median decode iteration", quoted=9.1,
                   measured=co.stall_ratio, digits=1)
    assert util < 0.5
    assert co.stall_ratio > 5                        # an iteration carrying a prefill delays every decode in it
    # the cold start (64 prompts prefilled at once, nothing decoding yet) is the longest iteration of all,
    # and it stalls no one: it must not count as a generation stall
    longest = max(range(len(co.iter_times)), key=co.iter_times.__getitem__)
    assert longest == 0 and co.decodes_in_flight[0] == 0
    cold = co.iter_times[0] / median(co.decode_only_times)
    assert cold > 5 * co.stall_ratio
    evidence.quote("cold start over the median decode iteration (no decode in flight)", quoted=69, measured=cold,
                   digits=0)
    mixing = sorted(t / median(co.decode_only_times) for t, d in zip(co.iter_times, co.decodes_in_flight) if d)
    # KV memory caps the batch: Llama-2-7B (MHA) at 2048 tokens per sequence on an 80 GB H100
    l2 = K.preset("llama-2-7b")
    max_batch = int((H100.memory - K.parameter_count(l2) * 2) // K.kv_cache_bytes(l2, 2048))
    at_cap = R.step_cost(l2, batch=max_batch, new=1, context=2047)
    assert at_cap.bound(H100) == "memory"
    evidence.update(compute_utilisation=round(util, 3), slot_occupancy=round(co.slot_occupancy, 3),
                    worst_stall_over_median_decode_iteration=round(co.stall_ratio, 2),
                    cold_start_over_median_decode_iteration=round(cold, 1),
                    iterations_with_decodes_in_flight=len(mixing),
                    their_median_and_p99_over_median_decode=[round(mixing[len(mixing) // 2], 2),
                                                             round(mixing[int(0.99 * len(mixing))], 2)],
                    llama2_7b_max_batch_at_2048=max_batch,
                    decode_intensity_at_that_batch=round(at_cap.intensity, 1), ridge=round(H100.ridge, 1),
                    counterexample={"compute_utilisation": round(util, 3), "max_batch_llama2_7b_2k": max_batch})
