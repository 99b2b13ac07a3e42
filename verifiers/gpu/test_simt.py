"""SIMT divergence: the warp interpreter of impls/gpu/simt.py against each lane run alone, over every
pattern of branch outcomes; and the warp-synchronous reduction over every interleaving of its lanes.

Oracle: run one lane at a time through the program, recording each dynamic instance of an instruction
(the instruction and the iteration counters of its enclosing loops). With reconvergence after every
branch and loop, the warp issues each instance that any lane executes exactly once, with the mask of the
lanes that execute it: so the warp's trace must equal the union of the lanes' traces, and its cost the
sum of the costs of the distinct instances.
"""

from __future__ import annotations

from collections import Counter
import pytest

from impls.gpu.simt import If, Loop, Op, cost, reduction_outcomes, run, utilization

K = 6                # lanes enumerated: 2^6 branch patterns per program
MASK = (1 << K) - 1


def lane_instances(prog, lane, iters=(), out=None):
    out = [] if out is None else out
    for s in prog:
        if isinstance(s, Op):
            out.append((id(s), iters))
        elif isinstance(s, If):
            lane_instances(s.then if s.cond(lane, iters) else s.orelse, lane, iters, out)
        else:
            for i in range(s.trips(lane, iters)):
                lane_instances(s.body, lane, iters + (i,), out)
    return out


def oracle(prog, ops):
    inst: dict = {}
    for lane in range(K):
        for key in lane_instances(prog, lane):
            inst.setdefault(key, 0)
            inst[key] |= 1 << lane
    return sum(ops[k[0]].cost for k in inst), Counter((k[0], m) for k, m in inst.items())


def ops_of(prog, acc=None):
    acc = {} if acc is None else acc
    for s in prog:
        if isinstance(s, Op):
            acc[id(s)] = s
        elif isinstance(s, If):
            ops_of(s.then, acc), ops_of(s.orelse, acc)
        else:
            ops_of(s.body, acc)
    return acc


def programs(bits):
    b = lambda lane, _: bool(bits >> lane & 1)  # noqa: E731  the pattern decides each lane's branch
    p1 = (Op("a"), If(b, (Op("then1", 3), Op("then2", 2)), (Op("else", 4),)), Op("join"))
    p2 = (Loop(lambda lane, _: 1 + (bits >> lane & 1) + (lane % 3 == 0), (Op("body"),
          If(lambda lane, it: (bits >> ((lane + it[0]) % K)) & 1 == 1, (Op("odd", 2),), (Op("even"),)))), Op("tail"))
    p3 = (If(b, (If(lambda lane, _: lane % 2 == 0, (Op("tt", 5),), (Op("tf", 1),)),), (Op("f", 2),)), Op("end"))
    return [p1, p2, p3]


@pytest.mark.claim("gpu.simt.divergence-serializes")
def test_warp_trace_is_the_union_of_lane_traces_for_every_pattern(evidence):
    for bits in range(1 << K):
        for prog in programs(bits):
            ops = ops_of(prog)
            want_cost, want_trace = oracle(prog, ops)
            trace = run(prog, MASK)
            assert Counter((id(op), m) for op, m in trace) == want_trace, bits
            assert cost(prog, MASK) == want_cost, bits
            assert cost(prog, MASK) == sum(op.cost for op, _ in run(prog, MASK, else_first=True))  # order-free
    evidence["patterns"] = 1 << K


@pytest.mark.claim("gpu.simt.divergence-serializes")
def test_cost_is_the_sum_over_the_paths_taken(evidence):
    seen = {}
    for bits in range(1 << K):
        p1 = programs(bits)[0]
        then_taken, else_taken = bits != 0, bits != MASK
        assert cost(p1, MASK) == 1 + 5 * then_taken + 4 * else_taken + 1, bits
        seen[(then_taken, else_taken)] = cost(p1, MASK)
    # uniform: only the taken side; divergent: both sides one after the other (5 + 4, not max(5, 4))
    assert seen == {(True, False): 7, (False, True): 6, (True, True): 11}
    evidence["cost_by_paths_taken"] = {f"then={t},else={e}": c for (t, e), c in seen.items()}


@pytest.mark.claim("gpu.simt.volta-its-cost")
def test_interleaved_paths_cost_the_same(evidence):
    # independent thread scheduling lets the two sides alternate, but every issued instruction still serves the
    # lanes of one side: over every branch pattern the cost is the pre-Volta sum, above the uniform cost
    for bits in range(1 << K):
        for prog in programs(bits):
            stack, its = run(prog, MASK), run(prog, MASK, interleave=True)
            assert Counter((id(op), m) for op, m in its) == Counter((id(op), m) for op, m in stack), bits
            assert sum(op.cost for op, _ in its) == cost(prog, MASK)
    p1 = programs(0b010101)[0]
    its = run(p1, MASK, interleave=True)
    order = [op.name for op, _ in its]
    assert order.index("else") < order.index("then2")          # the sides really interleave...
    assert sum(op.cost for op, _ in its) == 11 > 7              # ...and still cost 1 + 5 + 4 + 1, not one side
    evidence["interleaved_order"] = order


@pytest.mark.claim("gpu.simt.same-cycle")
def test_lanes_of_a_warp_do_not_run_in_the_same_cycle(evidence):
    p1 = programs(0b010101)[0]
    trace = run(p1, MASK)
    masks = {op.name: m for op, m in trace}
    assert masks["then1"] & masks["else"] == 0          # the two groups of lanes issue at different times
    assert masks["then1"] | masks["else"] == MASK
    assert utilization(p1, MASK) < 1
    # and since Volta a warp's lanes need not even stay in step between branches (see the reduction below)
    assert len(reduction_outcomes([1, 2, 4, 8], sync="none")) > 1
    evidence["active_masks"] = {k: bin(v) for k, v in masks.items()}


@pytest.mark.claim("gpu.simt.avoid-divergence")
def test_warp_aligned_branches_and_selects_cost_one_path(evidence):
    # a block of two warps branching on the warp index: each warp is uniform and runs one side only
    then, other = (Op("A", 5),), (Op("B", 4),)
    by_warp = If(lambda lane, it: lane // 32 == 0, then, other)
    per_warp = [cost((by_warp,), ((1 << 32) - 1) << (32 * w)) for w in range(2)]
    by_lane = If(lambda lane, it: lane % 2 == 0, then, other)
    assert per_warp == [5, 4] and cost((by_lane,), (1 << 32) - 1) == 9
    # arithmetic instead of a branch (compute both, select): every lane active, no divergence
    select = (Op("A", 5), Op("B", 4), Op("select"))
    assert utilization(select) == 1.0 and utilization((by_lane,)) == 0.5
    evidence["cost"] = {"warp-aligned": per_warp, "lane-parity": 9, "select": cost(select)}


@pytest.mark.claim("gpu.simt.warp-synchronous-unsafe")
def test_unrolled_warp_reduction_needs_syncwarp(evidence):
    for values in ([1, 2, 4, 8], [1, 2, 4, 8, 16, 32, 64, 128]):
        right = sum(values)
        lock = reduction_outcomes(values, sync="lockstep")
        none = reduction_outcomes(values, sync="none")
        synced = reduction_outcomes(values, sync="syncwarp")
        assert lock == {right} and synced == {right}
        assert right in none and len(none) > 1              # some interleavings are right, others are not
        evidence[f"L={len(values) // 2}"] = {"outcomes_without_sync": sorted(none), "right": right}
    # powers of two make each wrong outcome say which terms were lost or counted twice
    wrong = sorted(reduction_outcomes([1, 2, 4, 8], sync="none") - {15})
    assert any(v < 15 for v in wrong) and any(v > 15 for v in wrong)


@pytest.mark.claim("gpu.simt.divergence-serializes")
def test_bad_input():
    with pytest.raises(ValueError):
        reduction_outcomes([1, 2, 3], sync="none")
    with pytest.raises(ValueError):
        reduction_outcomes([1, 2], sync="sometimes")
    with pytest.raises(TypeError):
        run(("not a statement",))
