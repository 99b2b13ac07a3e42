"""Serving latency: TTFT and TBT with whole-prompt batching, chunked prefill and prefill/decode
disaggregation, on the same seeded traces (``batching.serve`` / ``serve_disaggregated``).

Oracles: every iteration is timed by the roofline (``roofline.mixed_step_cost``), so constructed cases
(one request alone, one queued behind another, a long prompt arriving while another decodes) are
checked against step costs computed here; the simulator's invariants (every token produced once, the
budget respected, every prompt token prefilled once) are properties over random traces; the seeded
Llama-3-8B / H100 traces give the figures the claims quote.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from impls.inference import batching as B
from impls.inference.kv_cache import kv_cache_bytes, parameter_count, preset
from impls.inference.roofline import GPUS, mixed_step_cost, step_cost

CFG, GPU = preset("llama-3-8b"), GPUS["H100-SXM"]
SLOTS, WHOLE, CHUNK = 64, 8192, 512
IB, ETH25 = 50e9, 25e9 / 8


def _p(xs, q):
    return B.percentile(list(xs), q)


@pytest.fixture(scope="module")
def light():
    tr = B.poisson_trace(120, 6, seed=1, mean_prompt=1024, mean_output=128, max_len=8192)
    return {"trace": tr,
            "whole": B.serve(tr, CFG, GPU, slots=SLOTS, token_budget=WHOLE),
            "chunk": B.serve(tr, CFG, GPU, slots=SLOTS, token_budget=CHUNK, chunked=True),
            "disagg": B.serve_disaggregated(tr, CFG, GPU, prefill_gpus=1, decode_gpus=1, slots=SLOTS, bandwidth=IB,
                                            prefill_budget=WHOLE),
            "disagg_eth": B.serve_disaggregated(tr, CFG, GPU, prefill_gpus=1, decode_gpus=1, slots=SLOTS,
                                                bandwidth=ETH25, prefill_budget=WHOLE)}


@pytest.fixture(scope="module")
def heavy():
    tr = B.poisson_trace(150, 1000, seed=1, mean_prompt=1024, mean_output=128, max_len=8192)
    long_prompts = B.poisson_trace(150, 1000, seed=1, mean_prompt=2048, mean_output=64, max_len=8192)
    out = {"whole": B.serve(tr, CFG, GPU, slots=SLOTS, token_budget=WHOLE),
           "chunk": B.serve(tr, CFG, GPU, slots=SLOTS, token_budget=CHUNK, chunked=True)}
    for name, t in (("", tr), ("long_", long_prompts)):
        out[f"{name}2chunk"] = B.serve(t, CFG, GPU, slots=SLOTS, token_budget=CHUNK, chunked=True, replicas=2)
        out[f"{name}disagg"] = B.serve_disaggregated(t, CFG, GPU, prefill_gpus=1, decode_gpus=1, slots=SLOTS,
                                                     bandwidth=IB, prefill_budget=WHOLE)
    return out


# ------------------------------------------------------------------------------ constructed cases
def _decode(context: int, batch: int = 1) -> float:
    return step_cost(CFG, batch=batch, new=1, context=context).time(GPU)


@pytest.mark.claim("serve.ttft-tpot-decomposition")
def test_ttft_is_queueing_plus_prefill(evidence):
    alone = B.serve([B.Arrival(0.0, B.Job(2000, 3))], CFG, GPU, slots=4, token_budget=WHOLE)
    prefill = step_cost(CFG, batch=1, new=2000).time(GPU)
    assert alone.ttft[0] == pytest.approx(prefill, rel=1e-12)
    assert alone.gaps[0] == pytest.approx([_decode(2000), _decode(2001)], rel=1e-12)
    # one slot: the second request waits for the whole first one, then its own prefill
    two = B.serve([B.Arrival(0.0, B.Job(2000, 50)), B.Arrival(0.001, B.Job(100, 5))], CFG, GPU, slots=1,
                  token_budget=WHOLE)
    first_done = prefill + sum(_decode(2000 + k) for k in range(49))
    queue = first_done - 0.001
    assert two.ttft[1] == pytest.approx(queue + step_cost(CFG, batch=1, new=100).time(GPU), rel=1e-12)
    evidence.update(alone_ttft_ms=alone.ttft[0] * 1e3, queued_ttft_ms=two.ttft[1] * 1e3, queue_ms=queue * 1e3)


@pytest.mark.claim("serve.ttft-tpot-decomposition")
def test_a_prompt_arriving_mid_decode_stretches_tbt(evidence):
    trace = [B.Arrival(0.0, B.Job(16, 200)), B.Arrival(0.3, B.Job(4000, 2))]
    whole = B.serve(trace, CFG, GPU, slots=2, token_budget=WHOLE)
    gaps = whole.gaps[0]
    worst = max(gaps)
    k = gaps.index(worst)                                     # the iteration that carried the 4000-token prompt
    assert worst == pytest.approx(mixed_step_cost(CFG, [(1, 16 + k), (4000, 0)]).time(GPU), rel=1e-12)
    assert worst > 10 * _decode(16 + k)
    chunk = B.serve(trace, CFG, GPU, slots=2, token_budget=CHUNK, chunked=True)
    assert max(chunk.gaps[0]) <= mixed_step_cost(CFG, [(1, 16 + 200), (CHUNK - 1, 4000 - CHUNK + 1)]).time(GPU)
    evidence.quote("stretched gap / ordinary gap (whole prompt)", quoted=14.5, measured=worst / _decode(16 + k), digits=1)
    evidence.update(stretched_gap_ms=worst * 1e3, ordinary_gap_ms=_decode(16 + k) * 1e3,
                    chunked_worst_gap_ms=max(chunk.gaps[0]) * 1e3)


@st.composite
def _traces(draw):
    n = draw(st.integers(1, 7))
    return [B.Arrival(draw(st.floats(0, 0.2)), B.Job(draw(st.integers(1, 900)), draw(st.integers(1, 6))))
            for _ in range(n)]


@given(trace=_traces(), slots=st.integers(1, 4), budget=st.integers(8, 600), chunked=st.booleans(),
       disagg=st.booleans())
def test_every_token_once_and_budget_kept(trace, slots, budget, chunked, disagg):
    if disagg:
        res = B.serve_disaggregated(trace, CFG, GPU, prefill_gpus=1, decode_gpus=2, slots=slots, bandwidth=IB,
                                    prefill_budget=budget, chunked=chunked)
    else:
        res = B.serve(trace, CFG, GPU, slots=slots, token_budget=budget, chunked=chunked)
    assert res.tokens_out == sum(a.job.output for a in trace)
    assert sorted(res.ttft) == list(range(len(trace)))
    for i, a in enumerate(trace):
        assert res.ttft[i] > 0 and len(res.gaps.get(i, [])) == a.job.output - 1
        assert all(g > 0 for g in res.gaps.get(i, []))
        assert res.done[i] == pytest.approx(a.at + res.ttft[i] + sum(res.gaps.get(i, [])), rel=1e-9)
    prefilled = sum(pre for _, _, pre in res.iterations)
    assert prefilled == sum(a.job.prompt for a in trace)                 # every prompt token exactly once
    for _, dec, pre in res.iterations:
        assert dec <= max(slots, 1)
        if chunked:
            assert dec + pre <= max(budget, dec)
        else:                                                            # whole prompts: over budget only alone
            assert pre <= max(budget, max(a.job.prompt for a in trace))


# --------------------------------------------------------------------------------- seeded traces
@pytest.mark.claim("serve.stall-over-decodes")
def test_stall_measured_over_iterations_with_decodes(light, evidence):
    whole, chunk = light["whole"], light["chunk"]
    cold = [t for t, dec, pre in whole.iterations if pre and not dec]
    assert cold                                                          # cold starts exist and are left out
    evidence.quote("longest iteration with decodes / median decode-only, whole prompts", quoted=29,
                   measured=whole.decode_stall, digits=0)
    evidence.quote("the same with chunked prefill (512 tokens)", quoted=2.1, measured=chunk.decode_stall, digits=1)
    evidence.quote("token budget", quoted=512, measured=CHUNK, abs=0)
    assert chunk.decode_stall < 3 < 10 < whole.decode_stall
    evidence.update(tbt_max_ms={"whole": max(whole.tbt) * 1e3, "chunked": max(chunk.tbt) * 1e3})


@pytest.mark.claim("serve.chunked-prefill-latency-throughput")
def test_chunked_prefill_cuts_tbt_and_keeps_throughput(light, heavy, evidence):
    lw, lc = light["whole"], light["chunk"]
    evidence.quote("TBT p99 whole (ms)", quoted=25, measured=_p(lw.tbt, 99) * 1e3, digits=0)
    evidence.quote("TBT p99 chunked (ms)", quoted=8.4, measured=_p(lc.tbt, 99) * 1e3, digits=1)
    gain = heavy["chunk"].throughput / heavy["whole"].throughput
    evidence.quote("throughput chunked / whole at overload", quoted=1.16, measured=gain, digits=2)
    ttft = _p(lc.ttft.values(), 50) / _p(lw.ttft.values(), 50)
    evidence.quote("TTFT p50 chunked / whole, light load", quoted=1.14, measured=ttft, digits=2)
    assert _p(lc.tbt, 50) == pytest.approx(_p(lw.tbt, 50), rel=0.05)      # the median gap is the same
    evidence.update(throughput={"whole": heavy["whole"].throughput, "chunked": heavy["chunk"].throughput})


@pytest.mark.claim("serve.chunked-prefill-ttft")
def test_chunked_prefill_ttft_depends_on_load(light, heavy, evidence):
    up = _p(light["chunk"].ttft.values(), 50) / _p(light["whole"].ttft.values(), 50) - 1
    down = 1 - _p(heavy["chunk"].ttft.values(), 50) / _p(heavy["whole"].ttft.values(), 50)
    evidence.quote("light load (6 req/s): median TTFT rises (%)", quoted=14, measured=100 * up, digits=0)
    evidence.quote("overload: median TTFT falls (%)", quoted=15, measured=100 * down, digits=0)
    evidence.update(counterexample={"light_ttft_ms": {"whole": _p(light["whole"].ttft.values(), 50) * 1e3,
                                                      "chunked": _p(light["chunk"].ttft.values(), 50) * 1e3}})


@pytest.mark.claim("serve.pd-not-always-more-throughput")
def test_disaggregation_can_lose_throughput(heavy, evidence):
    mixed = heavy["disagg"].throughput / heavy["2chunk"].throughput
    long_ = heavy["long_disagg"].throughput / heavy["long_2chunk"].throughput
    evidence.quote("1P+1D over 2 chunked replicas, 1024/128 tokens (%)", quoted=-10, measured=100 * (mixed - 1), digits=0)
    evidence.quote("the same, 2048-token prompts, 64-token outputs (%)", quoted=-40, measured=100 * (long_ - 1), digits=0)
    assert mixed < 1 and long_ < mixed
    evidence.update(counterexample={"tokens_per_s": {"2 colocated chunked": heavy["2chunk"].throughput,
                                                     "1 prefill + 1 decode": heavy["disagg"].throughput}})


@pytest.mark.claim("serve.disagg-removes-interference")
def test_disaggregation_removes_prefill_interference(light, evidence):
    d, w = light["disagg"], light["whole"]
    assert d.decode_stall == 1.0                         # no decode iteration ever carries a prompt
    evidence.quote("TBT p99 disaggregated (ms)", quoted=5.4, measured=_p(d.tbt, 99) * 1e3, digits=1)
    evidence.quote("TBT p99 colocated, whole prompts (ms)", quoted=25, measured=_p(w.tbt, 99) * 1e3, digits=0)
    first = [g[0] for g in d.gaps.values() if g]
    evidence.quote("first inter-token gap p50, disaggregated over IB (ms)", quoted=10,
                   measured=_p(first, 50) * 1e3, digits=0)


@pytest.mark.claim("serve.kv-transfer-not-negligible")
def test_kv_transfer_cost(light, evidence):
    kv = kv_cache_bytes(CFG, 1024)
    ib, eth = B.kv_transfer_seconds(CFG, 1024, IB), B.kv_transfer_seconds(CFG, 1024, ETH25)
    assert ib == pytest.approx(kv / IB) and eth == pytest.approx(kv / ETH25)
    assert B.kv_transfer_seconds(CFG, 1024, IB, latency=1e-5) == pytest.approx(1e-5 + kv / IB, rel=1e-12)
    prefill = step_cost(CFG, batch=1, new=1024).time(GPU)
    evidence.quote("KV of a 1024-token Llama-3-8B prompt (MB)", quoted=134, measured=kv / 1e6, digits=0)
    evidence.quote("over 400 Gb/s InfiniBand (ms)", quoted=2.7, measured=ib * 1e3, digits=1)
    evidence.quote("over 25 Gb/s Ethernet (ms)", quoted=43, measured=eth * 1e3, digits=0)
    evidence.quote("its prefill on an H100 (ms)", quoted=15.8, measured=prefill * 1e3, digits=1)
    l2 = preset("llama-2-7b")
    mha = B.kv_transfer_seconds(l2, 4096, IB) / step_cost(l2, batch=1, new=4096).time(GPU)
    evidence.quote("Llama-2-7B (MHA), 4096 tokens: transfer / prefill over IB (%)", quoted=73, measured=100 * mha, digits=0)
    first_ib = _p([g[0] for g in light["disagg"].gaps.values() if g], 50)
    first_eth = _p([g[0] for g in light["disagg_eth"].gaps.values() if g], 50)
    evidence.quote("first gap p50 over 25 Gb/s Ethernet (ms)", quoted=51, measured=first_eth * 1e3, digits=0)
    assert first_eth > 4 * first_ib
    assert light["disagg_eth"].ttft == light["disagg"].ttft             # the first token comes from the prefill node


# ------------------------------------------------------------------------------ design questions
@pytest.mark.claim("serve.kv-limits-concurrency")
def test_kv_memory_caps_concurrency(evidence):
    weights = parameter_count(CFG) * 2
    n = int((GPU.memory - weights) // kv_cache_bytes(CFG, 8192))
    c = step_cost(CFG, batch=n, new=1, context=8191)
    assert c.bound(GPU) == "memory"
    assert weights + kv_cache_bytes(CFG, 8192, n + 1) > GPU.memory
    evidence.quote("8192-token sequences that fit beside Llama-3-8B on an 80 GB H100", quoted=59, measured=n, abs=0)
    evidence.quote("share of peak FLOP/s a decode step uses at that batch (%)", quoted=4.9,
                   measured=100 * c.flops / GPU.peak_flops / c.time(GPU), digits=1)


@pytest.mark.claim("serve.bigger-batch-not-always-better")
def test_batch_size_trade_off(evidence):
    rows = {}
    for b in (64, 238, 1024):
        c = step_cost(CFG, batch=b, new=1, context=2048)
        rows[b] = {"tbt_ms": c.time(GPU) * 1e3, "tokens_per_s": b / c.time(GPU),
                   "fits": parameter_count(CFG) * 2 + kv_cache_bytes(CFG, 2048, b) <= GPU.memory}
    assert rows[238]["fits"] and not rows[1024]["fits"]
    assert not (parameter_count(CFG) * 2 + kv_cache_bytes(CFG, 2048, 239) <= GPU.memory)
    evidence.quote("throughput 238 / 64 sequences", quoted=1.5, measured=rows[238]["tokens_per_s"] / rows[64]["tokens_per_s"],
                   digits=1)
    evidence.quote("TBT 238 / 64 sequences", quoted=2.5, measured=rows[238]["tbt_ms"] / rows[64]["tbt_ms"], digits=1)
    evidence["rows"] = rows
