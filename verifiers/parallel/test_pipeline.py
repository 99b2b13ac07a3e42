"""Pipeline schedules: the simulator against closed forms, and the schedules run for real on gloo.

The simulator's timelines are checked by hypothesis over stages, micro-batches and op times
against the bubble formulas (exact fractions). The idle time is recounted here from the raw
slots (gaps before, between and after each device's ops), independently of the module's own
``bubble_fraction``, and so is the memory: the micro-batches a device holds at any instant, swept
over the slot times (alive from the start of its F to the end of its last op there). The gloo run
executes GPipe, 1F1B and interleaved 1F1B on 4 (and 2) ranks with a tiny 8-layer MLP; the oracle is
the unsplit model's gradient computed here, and the held micro-batches and bytes are what autograd
really kept alive (holders that die with the graph), not a counter stepped over the op list.
"""

from __future__ import annotations

from fractions import Fraction

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from impls.parallel import pipeline as P
from impls.parallel.pipeline_gloo import batch, tiny_stack
from impls.parallel.probes import PIPELINE_RUNS
from verifiers.errors import max_abs_err, worst
from verifiers.parallel.gloo import Topic

pytestmark = pytest.mark.timeout(420)

times = st.fractions(min_value=Fraction(1, 4), max_value=4, max_denominator=4)


def idle_from_slots(tl: P.Timeline) -> Fraction:
    """Σ over devices of the gaps: before the first op, between ops and after the last op."""
    idle = Fraction(0)
    for dev in tl.slots:
        clock = Fraction(0)
        for slot in dev:
            assert slot.start >= clock
            idle += slot.start - clock
            clock = slot.end
        idle += tl.makespan - clock
    return idle


def bubble_from_slots(tl: P.Timeline) -> Fraction:
    return idle_from_slots(tl) / (tl.p * tl.makespan)


def held_from_slots(tl: P.Timeline) -> list[int]:
    """Per device, the most micro-batch chunks alive at one instant, from the slot times alone: a chunk is alive
    from the start of its F to the end of its last op on that device (its W when the backward is split, since W
    still needs the saved inputs; else its B). A sweep over interval end points, releases before starts."""
    out = []
    for dev in tl.slots:
        life: dict[tuple[int, int], list[Fraction]] = {}
        for s in dev:
            span = life.setdefault((s.op.micro, s.op.chunk), [s.start, s.end])
            span[0], span[1] = min(span[0], s.start), max(span[1], s.end)
        events = sorted([(a, 1) for a, _ in life.values()] + [(b, -1) for _, b in life.values()])
        live = peak = 0
        for _, step in events:
            live += step
            peak = max(peak, live)
        out.append(peak)
    return out


@pytest.fixture(scope="module")
def gloo(gloo_parallel) -> Topic:
    return Topic(gloo_parallel, "pipeline")


def _key(name: str, p: int, m: int, v: int) -> str:
    return f"{name}/p{p}/m{m}/v{v}"


# ----------------------------------------------------------------------------- simulator
@pytest.mark.claim("pp.gpipe-bubble")
@given(p=st.integers(1, 8), m=st.integers(1, 24), t_f=times, t_b=times)
def test_gpipe_bubble_formula(p, m, t_f, t_b):
    tl = P.simulate(P.gpipe(p, m), 1, t_f, t_b)
    assert tl.makespan == (m + p - 1) * (t_f + t_b)
    assert bubble_from_slots(tl) == Fraction(p - 1, m + p - 1)
    assert P.bubble_fraction(tl) == Fraction(p - 1, m + p - 1)
    assert tl.bubble_over_ideal == Fraction(p - 1, m)


@pytest.mark.claim("pp.gpipe-bubble")
def test_gpipe_bubble_example(evidence):
    tl = P.run("gpipe", 4, 8)
    assert bubble_from_slots(tl) == P.bubble_fraction(tl) == Fraction(3, 11)
    evidence.quote("GPipe p=4 m=8 bubble / iteration", 0.27, float(tl.bubble), digits=2)
    evidence.quote("GPipe p=4 m=8 bubble / ideal", 0.375, float(tl.bubble_over_ideal), digits=3)
    evidence["timeline"] = tl.render()


@pytest.mark.claim("pp.1f1b-same-bubble")
@given(p=st.integers(1, 8), m=st.integers(1, 24), t_f=times, t_b=times)
def test_1f1b_finishes_when_gpipe_does(p, m, t_f, t_b):
    g, o = P.simulate(P.gpipe(p, m), 1, t_f, t_b), P.simulate(P.one_f_one_b(p, m), 1, t_f, t_b)
    assert o.makespan == g.makespan
    assert bubble_from_slots(o) == bubble_from_slots(g) == P.bubble_fraction(o)


@pytest.mark.claim("pp.1f1b-same-bubble")
def test_1f1b_counterexample(evidence):
    g, o = P.run("gpipe", 4, 8), P.run("1f1b", 4, 8)
    assert g.makespan == o.makespan and g.bubble == o.bubble
    assert o.peak_in_flight()[0] < g.peak_in_flight()[0]
    evidence.quote("bubble of both, p=4 m=8", 3 / 11, float(bubble_from_slots(o)), rel=1e-12)
    evidence["counterexample"] = {"p": 4, "m": 8, "gpipe_makespan": str(g.makespan), "1f1b_makespan": str(o.makespan),
                                  "bubble_both": str(o.bubble), "peak_in_flight_gpipe": g.peak_in_flight(),
                                  "peak_in_flight_1f1b": o.peak_in_flight(), "1f1b_timeline": o.render()}


@pytest.mark.claim("pp.1f1b-in-flight")
@given(p=st.integers(1, 10), m=st.integers(1, 24))
def test_1f1b_in_flight_is_p_minus_d(p, m):
    one, gp = P.run("1f1b", p, m), P.run("gpipe", p, m)
    assert held_from_slots(one) == one.peak_in_flight() == [min(p - d, m) for d in range(p)]
    assert held_from_slots(gp) == gp.peak_in_flight() == [m] * p


@pytest.mark.claim("pp.interleaved-divides-bubble")
@given(p=st.integers(2, 6), groups=st.integers(1, 4), v=st.integers(2, 4), t_f=times, t_b=times)
def test_interleaved_bubble_over_v(p, groups, v, t_f, t_b):
    m = p * groups
    tl = P.simulate(P.interleaved(p, m, v), v, t_f, t_b)
    base = P.simulate(P.one_f_one_b(p, m), 1, t_f, t_b)
    assert tl.makespan - m * (t_f + t_b) == (p - 1) * (t_f + t_b) / v
    assert bubble_from_slots(tl) / (1 - bubble_from_slots(tl)) == Fraction(p - 1, v * m)
    assert tl.bubble_over_ideal == base.bubble_over_ideal / v
    # the price in memory: device 0 keeps 2(p-1) + (v-1)p + 1 chunk forwards, i.e. 1 + (p-1)/(pv) of L layers
    assert held_from_slots(tl) == tl.peak_in_flight()
    peak0 = tl.peak_in_flight()[0]
    assert peak0 == min(2 * (p - 1) + (v - 1) * p + 1, m * v)
    if m > p:
        assert Fraction(peak0, p * v) == 1 + Fraction(p - 1, p * v)


@pytest.mark.claim("pp.interleaved-divides-bubble")
def test_interleaved_needs_m_multiple_of_p():
    with pytest.raises(ValueError, match="multiple"):
        P.interleaved(4, 6, 2)


@pytest.mark.claim("pp.first-stage-l-layers")
@given(p=st.integers(1, 16), m=st.integers(16, 40))
def test_first_stage_holds_l_layers(p, m):
    layers = 96
    peak = P.run("1f1b", p, m).peak_in_flight()[0]
    assert peak * Fraction(layers, p) == layers                     # p micro-batches × L/p layers
    assert P.run("gpipe", p, m).peak_in_flight()[0] * Fraction(layers, p) == Fraction(m * layers, p)


@pytest.mark.claim("pp.zero-bubble-h1")
@given(p=st.integers(2, 8), more=st.integers(0, 16), t_w=times, f_over_w=st.fractions(0, 4, max_denominator=4),
       extra=times)
def test_zb_h1_bubble(p, more, t_w, f_over_w, extra):
    # drawn inside the theorem's conditions (m >= p, W no longer than F), not filtered: every example counts
    m, t_f = p + more, t_w + f_over_w
    t_b = t_w + extra                     # the input-gradient half is at least as long as W
    tl = P.simulate(P.zero_bubble_h1(p, m), 1, t_f, t_b, t_w)
    assert tl.makespan - m * (t_f + t_b + t_w) == (p - 1) * (t_f + t_b - t_w)
    base = P.simulate(P.one_f_one_b(p, m), 1, t_f, t_b + t_w)
    assert base.makespan - m * (t_f + t_b + t_w) == (p - 1) * (t_f + t_b + t_w)
    # memory, recounted from the slot times: a micro-batch is held until its W. The peak over devices is 1F1B's
    # p (device 0), but every device reaches it, where 1F1B's device d holds only p - d
    held, base_held = held_from_slots(tl), held_from_slots(base)
    assert held == tl.peak_in_flight() and base_held == base.peak_in_flight()
    assert max(held) == max(base_held) == p
    assert held == [p] * p and base_held == [p - d for d in range(p)]


@pytest.mark.claim("pp.zero-bubble-h1")
def test_zb_h1_third_of_1f1b(evidence):
    zb, base = P.run("zb-h1", 4, 8, t_f=1, t_b=1, t_w=1), P.run("1f1b", 4, 8, t_f=1, t_b=2)
    idle_zb, idle_base = idle_from_slots(zb) / 4, idle_from_slots(base) / 4
    assert idle_zb * 3 == idle_base
    evidence.quote("ZB-H1 bubble / 1F1B bubble", 1 / 3, float(idle_zb / idle_base), digits=3)
    evidence["micro-batches held per device (F to W / F to B), p=4 m=8"] = {"zb-h1": held_from_slots(zb),
                                                                         "1f1b": held_from_slots(base)}
    evidence["timeline"] = zb.render()


@pytest.mark.claim("pp.gpipe-bubble", "pp.1f1b-same-bubble")
def test_simulator_rejects_deadlocks():
    bad = [[P.Op("F", 0), P.Op("B", 0)], [P.Op("B", 0), P.Op("F", 0)]]
    with pytest.raises(ValueError, match="deadlock"):
        P.simulate(bad)


# ---------------------------------------------------------------------------------- gloo
def _unsplit_grads(m: int) -> list[list[float]]:
    layers = tiny_stack(8)
    model = torch.nn.Sequential(*layers)
    x, y = batch(m)
    loss = sum(torch.nn.functional.mse_loss(model(x[i]), y[i]) for i in range(m)) / m
    loss.backward()
    return [[q.grad.flatten() for q in blk.parameters()] for blk in layers]


@pytest.mark.claim("pp.staged-grads-equal")
@pytest.mark.parametrize("run", PIPELINE_RUNS, ids=lambda r: f"{r[0]}-p{r[1]}-v{r[3]}")
def test_staged_gradients_equal_unsplit(gloo, run, evidence):
    name, p, m, v = run
    ref = _unsplit_grads(m)
    largest = 0.0
    for rec in gloo[_key(name, p, m, v)]:
        per = rec["layers_per_stage"]
        for stage, grads in rec["grads"].items():
            stage = int(stage)
            for j, g in enumerate(grads):
                layer, which = divmod(j, 2)
                want = ref[stage * per + layer][which]
                largest = worst(largest, max_abs_err(g, want))
    assert largest < 1e-12, largest
    evidence[f"{name} p={p} v={v}"] = {"max_abs_grad_err": largest}


@pytest.mark.claim("pp.1f1b-in-flight")
def test_measured_in_flight_matches_simulator(gloo, evidence):
    for name, p, m, v in PIPELINE_RUNS:
        sim = P.run(name, p, m, v).peak_in_flight()
        got = [rec["peak_in_flight"] for rec in gloo[_key(name, p, m, v)]]
        assert got == (sim if p == 4 else sim * 2), (name, p, got, sim)
        evidence[f"{name} p={p} v={v}"] = got
    assert [r["peak_in_flight"] for r in gloo[_key("1f1b", 4, 8, 1)]] == [4, 3, 2, 1]
    assert [r["peak_in_flight"] for r in gloo[_key("gpipe", 4, 8, 1)]] == [8] * 4


@pytest.mark.claim("pp.first-stage-l-layers")
def test_measured_first_stage_bytes_independent_of_p(gloo, evidence):
    p4, p2 = gloo[_key("1f1b", 4, 8, 1)][0], gloo[_key("1f1b", 2, 8, 1)][0]
    assert p4["device"] == p2["device"] == 0
    assert p4["peak_saved_bytes"] == p2["peak_saved_bytes"] > 0
    g4, g2 = gloo[_key("gpipe", 4, 8, 1)][0], gloo[_key("gpipe", 2, 8, 1)][0]
    assert g2["peak_saved_bytes"] == 2 * g4["peak_saved_bytes"]       # GPipe: m micro-batches of L/p layers
    evidence["device 0 peak saved bytes"] = {"1f1b p=4": p4["peak_saved_bytes"], "1f1b p=2": p2["peak_saved_bytes"],
                                              "gpipe p=4": g4["peak_saved_bytes"], "gpipe p=2": g2["peak_saved_bytes"]}


@pytest.mark.claim("pp.interleaved-divides-bubble")
def test_measured_interleaved_traffic_and_memory(gloo, evidence):
    base, inter = gloo[_key("1f1b", 4, 8, 1)], gloo[_key("interleaved", 4, 8, 2)]
    for b_rec, i_rec in zip(base, inter):
        d = b_rec["device"]
        b_msgs, i_msgs = b_rec["sends"]["isend"]["calls"], i_rec["sends"]["isend"]["calls"]
        # 1F1B: an activation out unless last, a gradient back unless first; interleaved: per chunk
        assert b_msgs == 8 * ((d < 3) + (d > 0))
        assert i_msgs == 8 * (2 * 2 - (d == 3) - (d == 0))
        if 0 < d < 3:
            assert i_msgs == 2 * b_msgs
    assert inter[0]["peak_saved_bytes"] * 8 == base[0]["peak_saved_bytes"] * 11   # 11 half-stage chunks vs 4 stages
    evidence["p2p messages per device"] = {"1f1b": [r["sends"]["isend"]["calls"] for r in base],
                                           "interleaved v=2": [r["sends"]["isend"]["calls"] for r in inter]}
    evidence["device 0 peak saved bytes"] = {"1f1b": base[0]["peak_saved_bytes"], "interleaved": inter[0]["peak_saved_bytes"]}
    evidence.quote("messages from device 1, interleaved", 32, inter[1]["sends"]["isend"]["calls"], abs=0)
    evidence.quote("messages from device 1, 1F1B", 16, base[1]["sends"]["isend"]["calls"], abs=0)
    evidence.quote("interleaved/1F1B device-0 activations", 1.375,
                   inter[0]["peak_saved_bytes"] / base[0]["peak_saved_bytes"], digits=3)
