"""Measured on gloo: expert parallelism with all-to-all equals the MoE layer run in one process.

The shared launch of 4 CPU ranks (``conftest.py``) runs the MoE layer with its 8 experts spread
over P = 4 ranks and, in pairs, P = 2. The oracle is ``impls.parallel.moe.moe`` with every expert
in one process, each rank's tokens forming one capacity group (as GShard's groups): outputs,
input gradients and expert weight gradients must agree. The all-gather / reduce-scatter
dispatcher is run on the same tokens and must agree too.
"""

from __future__ import annotations

import math

import pytest
import torch

from impls.parallel import moe as M
from impls.parallel.probes import MOE_SHAPE, moe_tokens, moe_weights
from verifiers.errors import max_abs_err, worst
from verifiers.parallel.gloo import Topic

pytestmark = pytest.mark.timeout(420)


@pytest.fixture(scope="module")
def ep(gloo_parallel) -> Topic:
    return Topic(gloo_parallel, "experts")


def _reference(global_ranks: list[int]) -> dict:
    """Single-process MoE with all experts, each rank's tokens as one capacity group."""
    router, w1, w2 = moe_weights()
    w1, w2 = w1.clone().requires_grad_(True), w2.clone().requires_grad_(True)
    outs, xs, loss = {}, {}, 0
    for r in global_ranks:
        x, g = moe_tokens(r)
        x = x.clone().requires_grad_(True)
        y, _ = M.moe(x, router, w1, w2, MOE_SHAPE["k"], MOE_SHAPE["capacity_factor"])
        loss = loss + (y * g).sum()
        outs[r], xs[r] = y.detach(), x
    loss.backward()
    return {"out": outs, "x_grad": {r: xs[r].grad for r in xs}, "w1_grad": w1.grad, "w2_grad": w2.grad}


@pytest.mark.claim("moe.ep-all-to-all", "moe.compute-not-memory")
@pytest.mark.parametrize("p", [2, 4])
def test_expert_parallel_equals_single_process(ep, p, evidence):
    recs = ep[f"P{p}"][:p]                              # global ranks 0..P-1 form one group
    ref = _reference(list(range(p)))
    largest = 0.0
    e = MOE_SHAPE["experts"] // p
    for gr, rec in enumerate(recs):
        largest = worst(largest, max_abs_err(rec["out"], ref["out"][gr]), max_abs_err(rec["x_grad"], ref["x_grad"][gr]),
                        max_abs_err(rec["w1_grad"], ref["w1_grad"][gr * e:(gr + 1) * e]),
                        max_abs_err(rec["w2_grad"], ref["w2_grad"][gr * e:(gr + 1) * e]),
                        max_abs_err(rec["allgather_out"], ref["out"][gr]))
        assert rec["fwd"] == {"all_to_all_single": rec["fwd"]["all_to_all_single"]}
        assert rec["fwd"]["all_to_all_single"]["calls"] == 2
        assert rec["bwd"]["all_to_all_single"]["calls"] == 2
    assert largest < 1e-12, largest
    cap = M.capacity(MOE_SHAPE["tokens"], MOE_SHAPE["experts"], MOE_SHAPE["k"], MOE_SHAPE["capacity_factor"])
    a2a = recs[0]["fwd"]["all_to_all_single"]["elements"]
    assert a2a == 2 * MOE_SHAPE["experts"] * cap * MOE_SHAPE["h"]          # dispatch + combine buffers
    ag = recs[0]["allgather_fwd"]
    ag_elems = ag["all_gather_single"]["elements"] + ag["reduce_scatter_single"]["elements"]
    assert ag_elems == 2 * p * MOE_SHAPE["tokens"] * MOE_SHAPE["h"]
    assert sorted(e for rec in recs for e in rec["experts"]) == list(range(MOE_SHAPE["experts"]))  # spread, not copied
    evidence[f"P={p}"] = {"max_abs_err": largest, "all_to_all_fwd": recs[0]["fwd"], "all_to_all_bwd": recs[0]["bwd"],
                          "allgather_dispatcher_fwd": ag,
                          "ring_elements_sent": {"all_to_all": a2a * (p - 1) / p, "allgather+reducescatter": ag_elems * (p - 1) / p}}


@pytest.mark.claim("moe.ep-all-to-all")
def test_allgather_dispatcher_bytes_grow_with_p_over_cf_k(ep, evidence):
    """Each rank hands out 2·N·C·h to the two all-to-alls and 2·P·T·h to the all-gather and reduce-scatter:
    about P/(cf·k) as much, so more only when P > cf·k (measured at k = 2, cf = 1)."""
    k, cf = MOE_SHAPE["k"], MOE_SHAPE["capacity_factor"]
    rows = {}
    for p, q in ((2, 1), (4, 2)):
        rec = ep[f"P{p}"][0]
        a2a = rec["fwd"]["all_to_all_single"]["elements"]
        ag = rec["allgather_fwd"]["all_gather_single"]["elements"] + rec["allgather_fwd"]["reduce_scatter_single"]["elements"]
        assert a2a == 2 * MOE_SHAPE["experts"] * math.ceil(cf * MOE_SHAPE["tokens"] * k / MOE_SHAPE["experts"]) * MOE_SHAPE["h"]
        assert ag == 2 * p * MOE_SHAPE["tokens"] * MOE_SHAPE["h"]
        evidence.quote(f"allgather / all-to-all elements handed out, P={p}", quoted=q, measured=ag / a2a, abs=1e-12)
        rows[p] = {"all_to_all": a2a, "allgather+reduce_scatter": ag, "P/(cf·k)": p / (cf * k)}
    evidence["elements handed out per rank, forward"] = rows
