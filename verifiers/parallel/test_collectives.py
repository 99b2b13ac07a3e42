"""Measured on gloo: ring, halving-doubling and tree all-reduce on point-to-point, and what DDP sends.

The shared launch (``conftest.py``, 4 CPU ranks) runs each algorithm of ``impls.parallel.collectives`` at
degree 4 and in two pairs on buffers of 12, 13 and 1001 fp64 elements, counting every ``isend`` with
:class:`~impls.distributed.probes.CollectiveLog`; the oracle for the sum is the inputs regenerated here and
added in one process. DDP is run with a comm hook that records its buckets and the order in which their
all-reduces start among the gradients' ready events; the gradient oracle is the single-process model on
every rank's data.
"""

from __future__ import annotations

import math

import pytest
import sympy as sp
import torch

from impls.distributed.memory import model_state_bytes_num
from impls.inference.kv_cache import parameter_count, preset
from impls.parallel import collectives as C
from impls.parallel.ddp import all_reduces_per_micro_step, ddp_buckets
from impls.parallel.probes import (ALL_REDUCE_SIZES, DDP_ACCUMULATION, DDP_BIG_LAYERS, DDP_CAP_BYTES,
                                   DDP_EXACT_CAP_BYTES, DDP_LAYERS, collective_input, ddp_batch, ddp_model)
from verifiers.parallel.gloo import Topic

pytestmark = pytest.mark.timeout(420)
ELEM = 8  # fp64


def _t(x) -> torch.Tensor:
    return torch.tensor(x, dtype=torch.float64)


@pytest.fixture(scope="module")
def runs(gloo_parallel) -> Topic:
    return Topic(gloo_parallel, "collectives")


def _each_run(runs: Topic, algorithm: str):
    """(degree, size, the records of one group's ranks): the whole world, then each pair."""
    for p in (2, 4):
        for size in ALL_REDUCE_SIZES:
            recs = runs[f"{algorithm}/P{p}/S{size}"]
            for ranks in sorted({tuple(r["ranks"]) for r in recs}):
                group = [r for r in recs if tuple(r["ranks"]) == ranks]
                assert len(group) == p == len(ranks)
                yield p, size, group


@pytest.mark.parametrize("algorithm", C.ALGORITHMS)
def test_every_algorithm_sums_like_one_process(runs, algorithm):
    for p, size, recs in _each_run(runs, algorithm):
        for rec in recs:
            xs = [collective_input(size, r) for r in rec["ranks"]]
            want = torch.stack(xs).sum(0)
            bound = 8 * torch.finfo(torch.float64).eps * torch.stack(xs).abs().sum(0)
            assert ((_t(rec["out"]) - want).abs() <= bound).all(), (algorithm, p, size)
            assert rec["max_abs_err_vs_dist"] <= bound.max().item()
            assert rec["other_collectives"] == [], rec["other_collectives"]   # point-to-point only


@pytest.mark.claim("comm.ring-bytes-per-rank")
def test_ring_sends_two_n_minus_one_over_n(runs, evidence):
    per_s = {}
    for p, size, recs in _each_run(runs, "ring"):
        sent = [sum(r["send_bytes"]) for r in recs]
        assert all(len(r["send_bytes"]) == 2 * (p - 1) for r in recs)          # 2(N-1) steps
        assert sum(sent) == 2 * (p - 1) * size * ELEM                           # mean exactly 2(N-1)/N·S
        assert max(sent) <= 2 * (p - 1) * math.ceil(size / p) * ELEM            # ragged chunks: at most ⌈S/N⌉ a step
        if size % p == 0:
            assert set(sent) == {2 * (p - 1) * size * ELEM // p}
        elif p > 2:
            assert len(set(sent)) > 1                                           # uneven chunks: ranks differ
        per_s[p] = sent[0] / (size * ELEM) if size % p == 0 else per_s.get(p)
        evidence[f"N={p}, S={size}"] = {"bytes_sent_per_rank": sent, "2(N-1)/N·S": 2 * (p - 1) * size * ELEM / p}
    evidence.quote("bytes per rank / S at N = 2", quoted=1, measured=per_s[2], digits=2)
    evidence.quote("bytes per rank / S at N = 4", quoted=1.5, measured=per_s[4], digits=2)
    n = sp.Symbol("N", positive=True)
    limit = sp.limit(2 * (n - 1) / n, n, sp.oo)
    evidence.quote("limit of 2(N-1)/N as N grows", quoted=2, measured=float(limit), digits=2)
    assert per_s[2] < per_s[4] < float(limit)                                   # it does depend on N


@pytest.mark.claim("comm.tree-vs-ring-latency")
def test_measured_steps_and_bytes_of_the_three(runs, evidence):
    rows = {}
    for algorithm in C.ALGORITHMS:
        for p, size, recs in _each_run(runs, algorithm):
            sends = [r["send_bytes"] for r in recs]
            total = sum(map(sum, sends))
            assert total == 2 * (p - 1) * size * ELEM, (algorithm, p, size)      # all three move 2(N-1)·S in total
            lg = int(math.log2(p))
            if algorithm == "halving_doubling":
                assert all(len(s) == 2 * lg for s in sends)
                if size % p == 0:                                                   # S/2, S/4, ... then back
                    halves = [size * ELEM // 2 ** (j + 1) for j in range(lg)]
                    assert all(s == halves + halves[::-1] for s in sends)
            if algorithm == "tree":
                assert all(b == size * ELEM for s in sends for b in s)            # every step carries all of S
                assert len(sends[0]) == lg                                          # the root broadcasts log2 N times
                assert sum(map(len, sends)) == 2 * (p - 1)
            if p == 4 and size == 12:
                rows[algorithm] = {"steps per rank": [len(s) for s in sends], "bytes per rank": list(map(sum, sends))}
    assert rows["ring"]["steps per rank"] == [6] * 4 and rows["halving_doubling"]["steps per rank"] == [4] * 4
    assert rows["ring"]["bytes per rank"] == rows["halving_doubling"]["bytes per rank"]   # same volume, fewer steps
    evidence["N=4, S=12 fp64"] = rows


@pytest.mark.claim("comm.tree-vs-ring-latency")
def test_alpha_beta_time_is_the_measured_sends(runs, evidence):
    """Each rank's sends are sequential rounds (ring, halving-doubling): Σ (α + bytes·β) over the measured
    sends of the slowest rank is the model's time; the tree's critical path is 2·log2 N sends of S."""
    lat, bw = 5e-6, 25e9
    for algorithm in C.ALGORITHMS:
        for p, size, recs in _each_run(runs, algorithm):
            if size % p:
                continue
            if algorithm == "tree":
                measured = 2 * math.log2(p) * (lat + size * ELEM / bw)
                assert len(recs[0]["send_bytes"]) == math.log2(p)           # the root's half of the path
            else:
                measured = max(sum(lat + b / bw for b in r["send_bytes"]) for r in recs)
            model = C.alpha_beta_time(algorithm, size * ELEM, p, bw, lat)
            assert model == pytest.approx(measured, rel=1e-12), (algorithm, p, size, model, measured)
            expr = C.alpha_beta_expr(algorithm).subs({C.S_: size * ELEM, C.N_: p, C.ALPHA: lat, C.BETA: 1 / bw})
            assert float(expr) == pytest.approx(model, rel=1e-12)
            evidence[f"{algorithm}, N={p}, S={size}"] = {"seconds": model}


@pytest.mark.claim("comm.tree-vs-ring-latency")
def test_alpha_beta_crossover(evidence):
    S, N, a, b = C.S_, C.N_, C.ALPHA, C.BETA
    ring, tree, hd = (C.alpha_beta_expr(x) for x in ("ring", "tree", "halving_doubling"))
    for n, quoted in ((4, 0.8), (64, 11.4)):
        (root,) = sp.solve(sp.Eq(ring.subs(N, n), tree.subs(N, n)), S)           # sympy solves the two models
        in_units = float(sp.simplify(root / (a / b)))
        evidence.quote(f"crossover S* at N = {n}, in units of α/β", quoted=quoted, measured=in_units, digits=1)
        assert C.tree_ring_crossover(n, 1.0, 1.0) == pytest.approx(in_units, rel=1e-12)
        for s_bytes, faster in ((0.5 * in_units, "tree"), (2 * in_units, "ring")):
            t = {x: C.alpha_beta_time(x, s_bytes, n, 1.0, 1.0) for x in ("ring", "tree")}
            assert min(t, key=t.get) == faster, (n, s_bytes, t)
        # halving-doubling is never slower than either in this model
        assert sp.simplify((ring - hd).subs(N, n) - 2 * (n - 1 - sp.log(n, 2)) * a) == 0
        assert float(sp.simplify((tree - hd).subs(N, n) / (S * b))) >= 0
    # the same crossover on InfiniBand numbers: 64 ranks, 5 µs, 25 GB/s per GPU
    s_ib = C.tree_ring_crossover(64, 25e9, 5e-6)
    evidence.quote("crossover at 64 ranks, 5 µs, 25 GB/s (MB)", quoted=1.4, measured=s_ib / 1e6, digits=1)
    assert C.alpha_beta_time("tree", 64e3, 64, 25e9, 5e-6) < C.alpha_beta_time("ring", 64e3, 64, 25e9, 5e-6)
    assert C.alpha_beta_time("ring", 256e6, 64, 25e9, 5e-6) < C.alpha_beta_time("tree", 256e6, 64, 25e9, 5e-6) / 5
    evidence.update(ring_over_tree_at_256MB=C.alpha_beta_time("ring", 256e6, 64, 25e9, 5e-6)
                    / C.alpha_beta_time("tree", 256e6, 64, 25e9, 5e-6))


@pytest.mark.claim("comm.ddp-not-the-only-way")
def test_ddp_replica_does_not_fit_a_70b_model(evidence):
    psi = parameter_count(preset("llama-3.1-70b"))
    ddp_gb = model_state_bytes_num("dp", psi, 64) / 1e9
    zero3_gb = model_state_bytes_num("zero3", psi, 64) / 1e9
    evidence.quote("DDP model states per GPU, Llama-3-70B (TB)", quoted=1.1, measured=ddp_gb / 1e3, digits=1)
    evidence.quote("ZeRO-3 over 64 GPUs (GB)", quoted=17.6, measured=zero3_gb, digits=1)
    assert ddp_gb > 10 * 80 and zero3_gb < 80
    evidence.update(counterexample={"params": psi, "ddp_gb_per_gpu": round(ddp_gb), "h100_gb": 80})


def _param_bytes(layers, elem):
    return [n * elem for i in range(len(layers) - 1) for n in (layers[i] * layers[i + 1], layers[i + 1])]


@pytest.mark.claim("comm.ddp-buckets-gradients")
def test_ddp_buckets_match_the_model_and_move_every_gradient_once(runs, evidence):
    for key, layers, elem, cap in (("ddp/buckets", DDP_LAYERS, 8, DDP_CAP_BYTES / 2**20),
                                   ("ddp/buckets_exact", DDP_LAYERS, 8, DDP_EXACT_CAP_BYTES / 2**20),
                                   ("ddp/buckets_default", DDP_BIG_LAYERS, 4, None)):
        for rec in runs[key]:
            assert rec["param_bytes"] == _param_bytes(layers, elem)
            for it, got in enumerate(rec["iterations"], start=1):
                want = ddp_buckets(rec["param_bytes"], it, cap)
                assert [b["params"] for b in got["buckets"]] == want, (key, it)
                assert [b["bytes"] for b in got["buckets"]] == [sum(rec["param_bytes"][i] for i in b) for b in want]
            assert rec["broadcast_bytes_at_init"] == [sum(rec["param_bytes"])]   # the replica synced once
            assert rec["broadcast_bytes_during_steps"] == []                      # never the model again
        evidence[key] = {f"iteration {i}": [b["bytes"] for b in it["buckets"]]
                         for i, it in enumerate(runs[key][0]["iterations"], start=1)}
    acc = runs["ddp/accumulate/no_sync0"][0]["per_micro"]
    assert [b["params"] for b in runs["ddp/buckets_exact"][0]["iterations"][1]["buckets"]][0] == [5, 4]  # full at the cap
    grads_bytes = sum(_param_bytes(DDP_LAYERS, 8))
    assert all(m == {"all_reduces": 3, "bytes": grads_bytes} for m in acc)        # gradients, not weights
    evidence.update(gradient_bytes_per_step=grads_bytes, bucket_all_reduces_per_step=3)


@pytest.mark.claim("comm.ddp-overlaps-backward")
def test_bucket_all_reduce_starts_before_backward_ends(runs, evidence):
    rec = runs["ddp/buckets"][0]
    first, later = rec["iterations"][0]["events"], rec["iterations"][2]["events"]
    assert first[-1] == ("launch", 0) and sum(e[0] == "launch" for e in first) == 1   # iteration 1: one bucket, at the end
    launch0, last_grad = later.index(("launch", 0)), max(i for i, e in enumerate(later) if e[0] == "grad")
    assert launch0 < last_grad                                                     # overlap: comm starts mid-backward
    ready_before = [e[1] for e in later[:launch0] if e[0] == "grad"]
    assert ready_before == [5, 4]                                                  # the last layer's, first
    evidence.update(events_iteration_1=first, events_iteration_3=later)


@pytest.mark.claim("comm.ddp-buckets-gradients")
def test_no_sync_defers_the_all_reduce_to_the_last_micro_batch(runs, evidence):
    model = ddp_model()
    for r in range(4):
        for i in range(DDP_ACCUMULATION):
            x, y = ddp_batch(r, i)
            (torch.nn.functional.mse_loss(model(x), y) / DDP_ACCUMULATION / 4).backward()
    want = [p.grad.flatten() for p in model.parameters()]
    for no_sync in (0, 1):
        recs = runs[f"ddp/accumulate/no_sync{no_sync}"]
        counts = [m["all_reduces"] for m in recs[0]["per_micro"]]
        assert counts == all_reduces_per_micro_step(DDP_ACCUMULATION, 3, bool(no_sync))
        for rec in recs:
            for g, w in zip(rec["grads"], want):
                torch.testing.assert_close(_t(g), w, rtol=1e-12, atol=1e-14)
        evidence[f"all-reduces per micro-batch, no_sync={bool(no_sync)}"] = counts
    assert counts == [0, 0, 0, 3]


@pytest.mark.claim("comm.double-allreduce-scales-lr")
def test_gradients_synced_twice(runs, evidence):
    n = 4
    for rec in runs["ddp/double_sync"]:
        g = [_t(x) for x in rec["grads"]["ddp"]]
        for a, b in zip(rec["grads"]["SUM"], g):
            torch.testing.assert_close(_t(a), n * b, rtol=1e-15, atol=0)
        avg_diff = max((_t(a) - b).abs().max().item() for a, b in zip(rec["grads"]["AVG"], g))
        sgd, adam = rec["updates"]["sgd"], rec["updates"]["adam"]
        sgd_ratio = [_t(s) / _t(d) for s, d in zip(sgd["SUM"], sgd["ddp"])]
        assert all(torch.allclose(r, torch.full_like(r, n), rtol=1e-9, atol=0) for r in sgd_ratio)
        sum_u, ddp_u = torch.cat([_t(s) for s in adam["SUM"]]), torch.cat([_t(d) for d in adam["ddp"]])
        adam_rel = ((sum_u - ddp_u).norm() / ddp_u.norm()).item()
        assert adam_rel < 1e-3                                                    # Adam divides the scale out
        adam_elem = ((sum_u - ddp_u).abs() / ddp_u.abs()).max().item()          # largest where |g| ~ ε
    evidence.quote("SGD update with the extra SUM / correct update", quoted=4, measured=sgd_ratio[0].mean().item(),
                   digits=6)
    evidence.update(N=n, avg_again_max_abs_change=avg_diff, adam_update_relative_change=adam_rel,
                    adam_largest_elementwise_relative_change=adam_elem)
    assert avg_diff <= 4 * torch.finfo(torch.float64).eps * max(b.abs().max().item() for b in g)


@pytest.mark.claim("comm.loss-allreduced-twice")
def test_loss_all_reduced_twice(runs, evidence):
    n = 4
    recs = runs["ddp/loss_twice"]
    total = sum(r["once"]["local_loss"] for r in recs)
    for rec in recs:
        once, inplace, auto = rec["once"], rec["inplace_twice"], rec["autograd_twice"]
        for a, b in zip(inplace["grads"], once["grads"]):
            assert a == b                                                        # outside autograd: no effect
        for a, b in zip(auto["grads"], once["grads"]):
            torch.testing.assert_close(_t(a), n * n * _t(b), rtol=1e-12, atol=1e-15)
        assert inplace["logged_loss"] == pytest.approx(n * total, rel=1e-12)     # what gets logged: N·Σ losses
        assert auto["logged_loss"] == pytest.approx(n * total, rel=1e-12)
    ratio = _t(recs[0]["autograd_twice"]["grads"][0]) / _t(recs[0]["once"]["grads"][0])
    evidence.quote("gradient scale, differentiable SUM twice, N = 4", quoted=16, measured=ratio.mean().item(), digits=6)
    warned = recs[0]["inplace_twice"]["warnings"]
    assert warned and not recs[0]["once"]["warnings"]                        # PyTorch flags the in-place call
    evidence.update(logged_over_local_rank0=recs[0]["inplace_twice"]["logged_loss"] / recs[0]["once"]["local_loss"],
                    pytorch_warning=warned[0])
