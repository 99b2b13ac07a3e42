"""The layout planner: its counts against the paper's formulas, its collectives against gloo, its choices
against Megatron's published layouts.

Oracles: Narayanan et al. 2021 Table 1 (``impls/parallel/megatron_table1.json``, transcribed; its
parameter counts re-derived from Eq. 2 and its aggregate throughput from the per-GPU column) and Eq. 3
(FLOPs); ``kv_cache.parameter_count`` for the Llama presets; the pipeline simulator for the in-flight
micro-batches; the collectives the tensor- and pipeline-parallel probes really call on gloo (the shared
launch, ``conftest.py``); NVIDIA NeMo's published Llama-3-70B layout on 64 GPUs.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from impls.distributed.memory import activation_bytes_num, model_state_bytes_num
from impls.inference.kv_cache import parameter_count, preset
from impls.parallel import planner as P
from impls.parallel.pipeline import run as simulate
from impls.parallel.pipeline_gloo import WIDTH
from impls.parallel.probes import PIPELINE_RUNS, TP_SHAPE
from verifiers.parallel.gloo import Topic

pytestmark = pytest.mark.timeout(420)

TABLE = json.loads((Path(P.__file__).parent / "megatron_table1.json").read_text(encoding="utf-8"))
A100, H100 = P.CLUSTERS["dgx-a100"], P.CLUSTERS["dgx-h100"]
L70 = P.spec_from_config(preset("llama-3-70b"))
L8 = P.spec_from_config(preset("llama-3.1-8b"))


def _rows():
    for params, heads, hidden, layers, t, p, gpus, batch, tflops, pct, agg in TABLE["rows"]:
        yield params, P.gpt_spec(f"GPT-{params}B", layers, hidden, heads), t, p, gpus, batch, tflops, pct, agg


def test_table1_transcription_is_consistent():
    for params, spec, t, p, gpus, batch, tflops, pct, agg in _rows():
        assert round(P.parameter_check(spec, TABLE["sequence_length"]) / 1e9, 1) == params       # Eq. 2
        assert tflops * gpus / 1e3 == pytest.approx(agg, rel=6e-3)                               # per-GPU × GPUs
        assert round(100 * tflops * 1e12 / A100.peak_flops) == pct                                # of 312 TFLOP/s
        assert gpus % (t * p) == 0 and spec.heads % t == 0 and spec.layers % p == 0


def test_counts_match_the_papers_formulas_and_the_presets():
    s = TABLE["sequence_length"]
    for _, spec, *_ in _rows():
        # every parameter Eq. 2 counts, plus the final LayerNorm it leaves out
        assert spec.total_params(s) - P.parameter_check(spec, s) == pytest.approx(2 * spec.hidden, abs=1e-3)
        for batch in (1, 7):
            assert P.step_flops(spec, s, batch, "full", causal=False) == pytest.approx(P.paper_flops(spec, s, batch),
                                                                                      rel=1e-12)
    for name in ("llama-3-70b", "llama-3.1-8b", "llama-2-7b", "qwen2.5-7b"):
        cfg = preset(name)
        assert P.spec_from_config(cfg).total_params(4096) == parameter_count(cfg)


def test_in_flight_rule_is_the_simulators():
    for p in range(1, 7):
        for m in range(1, 15):
            assert P.in_flight(p, m, 1) == tuple(simulate("1f1b", p, m).peak_in_flight())
            if p > 1 and m % p == 0:
                for v in (2, 3):
                    assert P.in_flight(p, m, v) == tuple(simulate("interleaved", p, m, v).peak_in_flight())


def test_memory_parts_are_the_calculators():
    """A hand-assembled budget for one layout: ZeRO-1 states of the first stage's parameters over d·c,
    selective-recompute activations of 20 layers for 4 micro-batches in flight."""
    lay = P.Layout(d=2, t=4, p=4, c=2, v=1, b=1, recompute="selective", zero=1)
    pl = P.evaluate(L70, H100, lay, seq=8192, global_batch=128)
    first = 20 * L70.layer_params() + L70.vocab * L70.hidden
    assert pl.memory["model states"] == pytest.approx(model_state_bytes_num("zero1", first / 4, 4), rel=1e-12)
    per_layer = activation_bytes_num(4096, 1, 8192, 64, 4, "tensor+sequence", "selective", 0)
    assert pl.memory["activations"] == pytest.approx(per_layer * 20 * 4, rel=1e-12)
    assert pl.in_flight == 4 and pl.micro_batches == 64
    assert pl.links == {"tp": "NVLink", "cp": "NVLink", "dp": "IB", "pp": "IB"}


def test_links_follow_the_rank_order():
    assert P.group_links(P.Layout(2, 6, 1), 8)["tp"]                 # tp6 on 8-GPU nodes: some groups straddle
    assert not P.group_links(P.Layout(8, 8, 1), 8)["tp"] and P.group_links(P.Layout(8, 8, 1), 8)["dp"]
    links = P.group_links(P.Layout(4, 2, 2, 2), 8)                  # tp stride 1, cp 2, dp 4, pp 16
    assert links == {"tp": False, "cp": False, "dp": True, "pp": True}


@pytest.mark.claim("plan.megatron-table1")
def test_table1_layouts_against_the_planner(evidence):
    rows, worst, exact, mem = {}, 0.0, 0, []
    for params, spec, t, p, gpus, batch, *_ in _rows():
        fits, _ = P.plan(spec, A100, gpus, seq=TABLE["sequence_length"], global_batch=batch, zero=0,
                         recompute=("full",), interleave=(1,), max_cp=1)
        paper = next(f for f in fits if (f.layout.t, f.layout.p, f.layout.c) == (t, p, 1))   # it fits
        best = fits[0]
        ratio = paper.step_time / best.step_time
        worst, exact = max(worst, ratio), exact + (best is paper)
        mem.append(paper.total_memory / 1e9)
        assert fits.index(paper) <= 1                                    # the planner's first or second choice
        assert best.layout.t <= A100.gpus_per_node and not best.links["tp"] == "IB"   # TP stays in the node
        if params >= 76:
            assert best.layout.t == 8                                    # and fills it for the large models
        rows[f"{params}B"] = {"paper": paper.layout.label(), "planner": best.layout.label(),
                              "paper / best time": round(ratio, 3), "paper layout GB": round(paper.total_memory / 1e9, 1)}
    evidence.quote("share of HBM the planner plans for (%)", quoted=90, measured=100 * paper.capacity / A100.memory, digits=0)
    evidence.quote("worst paper / planner step time", quoted=1.07, measured=worst, digits=2)
    evidence.quote("rows where the planner picks the paper's layout", quoted=3, measured=exact, abs=0)
    evidence.quote("least memory of a paper layout (GB)", quoted=30, measured=min(mem), digits=0)
    evidence.quote("most memory of a paper layout (GB)", quoted=41, measured=max(mem), digits=0)
    evidence["rows"] = rows


@pytest.mark.claim("plan.llama3-70b-64-gpus")
def test_llama3_70b_on_64_h100(evidence):
    fits, no = P.plan(L70, H100, 64, seq=8192, global_batch=128, zero=1)
    best = fits[0]
    assert all(f.links["tp"] == "NVLink" for f in fits[:10])
    beyond = [f for f in fits if f.layout.t > 8]
    assert beyond and min(f.step_time for f in beyond) > 4 * best.step_time
    assert any(n.layout == P.Layout(64, 1, 1) or (n.layout.t, n.layout.p, n.layout.c) == (1, 1, 1) for n in no)
    nemo = P.evaluate(L70, H100, P.Layout(d=2, t=4, p=4, c=2, v=5, b=1, recompute="selective", zero=1),
                      seq=8192, global_batch=128)
    assert nemo.fits
    evidence.quote("NeMo's TP4 PP4 CP2 VP5 over the planner's best", quoted=1.01, measured=nemo.step_time / best.step_time,
                   digits=2)
    evidence.quote("fastest TP > 8 layout over the best", quoted=4, measured=min(f.step_time for f in beyond) / best.step_time,
                   digits=0)
    evidence.update(best=best.layout.label(), best_step_s=round(best.step_time, 2), best_gb=round(best.total_memory / 1e9, 1),
                    top=[f.layout.label() for f in fits[:5]], nemo_gb=round(nemo.total_memory / 1e9, 1))


def _pure_dp(spec, seq, batch):
    return min((P.evaluate(spec, H100, P.Layout(64, 1, 1, 1, 1, b, r, 1), seq=seq, global_batch=batch)
                for r in P.RECOMPUTE for b in (1, 2, 4, 8) if batch % (64 * b) == 0),
               key=lambda x: (not x.fits, x.step_time))


@pytest.mark.claim("plan.dp-first-if-it-fits")
def test_plain_dp_is_not_always_fastest_when_it_fits(evidence):
    short = _pure_dp(L8, 2048, 512)
    long_ = _pure_dp(L8, 8192, 128)
    best_short = P.plan(L8, H100, 64, seq=2048, global_batch=512)[0][0]
    best_long = P.plan(L8, H100, 64, seq=8192, global_batch=128)[0][0]
    assert short.fits and long_.fits and long_.layout.recompute == "full"          # only with full recomputation
    assert best_short.layout.t > 1 and best_long.layout.t * best_long.layout.c > 1
    evidence.quote("pure DP over the best, 2048 tokens (%)", quoted=19, measured=100 * (short.step_time / best_short.step_time - 1),
                   digits=0)
    evidence.quote("pure DP over the best, 8192 tokens (%)", quoted=21, measured=100 * (long_.step_time / best_long.step_time - 1),
                   digits=0)
    evidence.update(counterexample={"2048": {"pure_dp": short.layout.label() + f" b={short.layout.b}",
                                             "best": best_short.layout.label() + f" b={best_short.layout.b}"},
                                    "8192": {"pure_dp_recompute": long_.layout.recompute, "best": best_long.layout.label()}})
    # with the batch no larger than the GPU count pure DP cannot even use every GPU
    with pytest.raises(ValueError):
        P.evaluate(L8, H100, P.Layout(64, 1, 1), seq=8192, global_batch=32)


@pytest.mark.claim("plan.modest-model-tp-over-pp")
def test_a_modest_model_prefers_tp_to_pp(evidence):
    for seq, batch, quoted in ((2048, 512, 15), (8192, 128, 12)):
        fits = P.plan(L8, H100, 64, seq=seq, global_batch=batch)[0]
        best, with_pp = fits[0], next(f for f in fits if f.layout.p > 1)
        assert best.layout.p == 1 and best.layout.t > 1 and best.links["tp"] == "NVLink"
        assert with_pp.time["pipeline bubble"] > 0
        evidence.quote(f"fastest layout with PP over the best, {seq} tokens (%)", quoted=quoted,
                       measured=100 * (with_pp.step_time / best.step_time - 1), digits=0)
        evidence[f"{seq} tokens"] = {"best": best.layout.label(), "best with pp": with_pp.layout.label()}


@pytest.mark.claim("plan.more-tp-not-always-better")
def test_tensor_parallel_past_the_node(evidence):
    rows, mem = {}, {}
    for t in (4, 8, 16):
        plans = [P.evaluate(L70, H100, P.Layout(64 // (4 * t), t, 4, 1, 1, 1, r, 1), seq=8192, global_batch=128)
                 for r in P.RECOMPUTE]
        rows[t] = min(plans, key=lambda x: (not x.fits, x.step_time))
        mem[t] = next(x for x in plans if x.layout.recompute == "selective").total_memory
    assert mem[4] > mem[8] > mem[16]                                                   # memory does fall
    assert rows[16].links["tp"] == "IB" and rows[8].links["tp"] == "NVLink"
    slow = rows[16].step_time / rows[8].step_time
    evidence.quote("step time tp16 / tp8 (pp4, 64 H100s)", quoted=4.1, measured=slow, digits=1)
    evidence.quote("memory saved going tp8 -> tp16 (GB)", quoted=15, measured=(mem[8] - mem[16]) / 1e9, digits=0)
    # activations without sequence parallelism keep 10·sbh per layer however large t is
    floor = activation_bytes_num(8192, 1, 8192, 64, 10**6, "tensor", "none", 1)
    assert floor == pytest.approx(10 * 8192 * 8192, rel=1e-3)
    evidence.update(counterexample={f"tp{t}": {"GB": round(x.total_memory / 1e9, 1), "step_s": round(x.step_time, 2),
                                                "tp_comm_s": round(x.time["tp comm"], 2), "tp link": x.links["tp"]}
                                    for t, x in rows.items()})


@pytest.mark.claim("plan.dp-rule-of-thumb")
def test_what_decides_is_memory_and_batch_not_gpu_count(evidence):
    z3 = P.plan(L70, H100, 64, seq=8192, global_batch=128, zero=3)[0]
    pure = next(f for f in z3 if (f.layout.t, f.layout.p, f.layout.c) == (1, 1, 1))
    best = P.plan(L70, H100, 64, seq=8192, global_batch=128, zero=1)[0][0]
    evidence.quote("70B, ZeRO-3 pure DP on 64 GPUs (GB per GPU)", quoted=51.8, measured=pure.total_memory / 1e9, digits=1)
    evidence.quote("its step time over the best layout (%)", quoted=12, measured=100 * (pure.step_time / best.step_time - 1),
                   digits=0)
    long_ = P.evaluate(L8, H100, P.Layout(64, 1, 1, 1, 1, 1, "full", 1), seq=131072, global_batch=64)
    assert not long_.fits
    evidence.quote("8B pure DP at 128k tokens, full recomputation (GB per GPU)", quoted=152,
                   measured=long_.total_memory / 1e9, digits=0)
    evidence.update(pure_zero3=pure.layout.label(), best=best.layout.label(), long_context=long_.why_not())


@pytest.mark.claim("plan.pp-costs-more-than-bubble")
def test_pipeline_costs_beyond_the_bubble(evidence):
    lay = P.Layout(d=2, t=2, p=4, c=4, v=1, b=1, recompute="selective", zero=1)
    pl = P.evaluate(L70, H100, lay, seq=8192, global_batch=128)
    per_layer = activation_bytes_num(2048, 1, 8192, 64, 2, "tensor+sequence", "selective", 0)
    first, last = per_layer * 20 * P.in_flight(4, pl.micro_batches)[0], per_layer * 20 * P.in_flight(4, pl.micro_batches)[-1]
    f = P.forward_flops_per_sequence(L70, 2048)
    stage = (f["matmuls"] + f["attention"] * 4) / 4
    evidence.quote("bubble share of the step (%)", quoted=4.3, measured=100 * pl.time["pipeline bubble"] / pl.step_time, digits=1)
    evidence.quote("first-stage / last-stage activations", quoted=4, measured=first / last, digits=0)
    evidence.quote("output layer over a stage's layers (%)", quoted=5.7, measured=100 * f["output"] / stage, digits=1)
    assert pl.time["pp comm"] > 0 and pl.memory["activations"] == pytest.approx(first)
    with pytest.raises(ValueError):                                   # interleaving needs m to be a multiple of p
        P.evaluate(L70, H100, P.Layout(d=2, t=2, p=4, c=4, v=2, b=1), seq=8192, global_batch=2 * 6)
    evidence.update(step=pl.time, in_flight=P.in_flight(4, pl.micro_batches))


@pytest.mark.claim("plan.tp-forward-allreduces-pp-p2p")
def test_planner_volumes_are_what_gloo_sends(gloo_parallel, evidence):
    s, b, h = TP_SHAPE["s"], TP_SHAPE["b"], TP_SHAPE["h"]
    tensor, pipe = Topic(gloo_parallel, "tensor"), Topic(gloo_parallel, "pipeline")
    for t in (2, 4):
        rec = tensor[f"t{t}/tp"][0]
        assert rec["fwd"]["all_reduce"]["calls"] == P.tp_all_reduces_per_layer("none") // 2 == 2
        assert rec["bwd"]["all_reduce"]["calls"] == 2
        per_call = rec["fwd"]["all_reduce"]["elements"] / rec["fwd"]["all_reduce"]["calls"]
        assert per_call == P.tp_elements_per_collective(b, s, h)                 # b·s·h each
        assert set(rec["fwd"]) == {"all_reduce"}
    for name, p, m, v in PIPELINE_RUNS:
        if name == "gpipe":
            continue
        recs = pipe[f"{name}/p{p}/m{m}/v{v}"]
        sends = [r["sends"] for r in recs[:p]]
        assert [x.get("isend", {}).get("calls", 0) for x in sends] == list(P.pp_messages(p, m, v))
        assert all(set(x) <= {"isend"} for x in sends)                          # point-to-point only
        for x in sends:
            if "isend" in x:
                assert x["isend"]["elements"] / x["isend"]["calls"] == P.pp_elements_per_message(2, 1, WIDTH, 1)
    evidence.update(tp_forward=tensor["t4/tp"][0]["fwd"], pp_messages_1f1b_p4=list(P.pp_messages(4, 8, 1)))
