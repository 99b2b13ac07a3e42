"""Measured on gloo: DeepSpeed-Ulysses and Ring Attention against full attention.

The shared launch of 4 CPU ranks (``conftest.py``) runs both at P = 4 and, in pairs, at P = 2 (batch 1, N = 16 tokens,
h = 16, 4 heads, fp64). The oracle is plain softmax attention over the whole sequence computed
here; the communication is what ``torch.distributed`` was asked to send, counted per rank.
Causal load is recounted by enumerating (query, key) pairs.
"""

from __future__ import annotations

import pytest
import torch

from impls.parallel.context import attention, ring_elements_sent, self_attention, shard_positions, ulysses_elements_sent
from impls.parallel.probes import CP_SHAPE, cp_qkv, cp_weights
from verifiers.parallel.gloo import Topic

pytestmark = pytest.mark.timeout(420)

Bt, N, H, HEADS = CP_SHAPE["b"], CP_SHAPE["n"], CP_SHAPE["h"], CP_SHAPE["heads"]


@pytest.fixture(scope="module")
def runs(gloo_parallel) -> Topic:
    return Topic(gloo_parallel, "context")


def _t(x) -> torch.Tensor:
    return torch.tensor(x, dtype=torch.float64)


def _dense_layer(causal: bool) -> dict[str, torch.Tensor]:
    x, w_qkv, w_out, g = cp_weights()
    x, w_qkv, w_out = (t.clone().requires_grad_(True) for t in (x, w_qkv, w_out))
    y = self_attention(x, w_qkv, w_out, HEADS, causal)
    (y * g).sum().backward()
    return {"out": y.detach(), "x_grad": x.grad, "w_qkv_grad": w_qkv.grad, "w_out_grad": w_out.grad}


def _ulysses_error(runs, p: int, causal: bool) -> float:
    ref = _dense_layer(causal)
    recs = runs[f"ulysses/P{p}/causal{int(causal)}"]
    worst = 0.0
    for rec in recs:
        sl = slice(rec["rank"] * N // p, (rec["rank"] + 1) * N // p)
        worst = max(worst, float((_t(rec["out"]) - ref["out"][:, sl]).abs().max()),
                    float((_t(rec["x_grad"]) - ref["x_grad"][:, sl]).abs().max()))
    # weight gradients are partial sums over the ranks of one group (global ranks 0..P-1)
    for name in ("w_qkv_grad", "w_out_grad"):
        worst = max(worst, float((sum(_t(rec[name]) for rec in recs[:p]) - ref[name]).abs().max()))
    return worst


def _ring_error(runs, p: int, causal: bool, layout: str) -> float:
    q, k, v = cp_qkv()
    ref = attention(q, k, v, causal)
    worst = 0.0
    for rec in runs[f"ring/P{p}/causal{int(causal)}/{layout}"]:
        pos = rec["positions"]
        assert pos == shard_positions(N, p, rec["rank"], layout).tolist()
        worst = max(worst, float((_t(rec["out"]) - ref[:, :, pos]).abs().max()))
    return worst


@pytest.mark.claim("cp.equal-to-full-attention")
@pytest.mark.parametrize("p", [2, 4])
def test_both_equal_full_attention(runs, p, evidence):
    errs = {f"ulysses causal={c}": _ulysses_error(runs, p, c) for c in (False, True)}
    errs.update({f"ring causal={c} {lay}": _ring_error(runs, p, c, lay)
                 for c, lay in ((False, "contiguous"), (True, "contiguous"), (True, "zigzag"))})
    assert max(errs.values()) < 1e-12, errs
    evidence[f"P={p} max_abs_err"] = errs


@pytest.mark.claim("cp.qkv-sharding")
@pytest.mark.parametrize("p", [2, 4])
def test_what_the_attention_kernel_sees(runs, p, evidence):
    d = H // HEADS
    uly = {tuple(r["q_shape"]) for r in runs[f"ulysses/P{p}/causal0"]}
    ring = {tuple(r["q_shape"]) for r in runs[f"ring/P{p}/causal0/contiguous"]}
    assert uly == {(Bt, HEADS // p, N, d)}          # every token, a 1/P slice of the heads
    assert ring == {(Bt, HEADS, N // p, d)}         # every head, a 1/P slice of the tokens
    assert _ulysses_error(runs, p, False) < 1e-12
    evidence[f"P={p}"] = {"ulysses_q_[b,H,N,d]": sorted(uly)[0], "ring_q_[b,H,N,d]": sorted(ring)[0]}


@pytest.mark.claim("cp.ulysses-volume")
def test_ulysses_volume_shrinks_with_p(runs, evidence):
    sent = {}
    for p in (2, 4):
        for rec in runs[f"ulysses/P{p}/causal0"]:
            fwd, bwd = rec["fwd"]["all_to_all_single"], rec["bwd"]["all_to_all_single"]
            assert fwd["calls"] == 4 and bwd["calls"] == 4
            assert fwd["elements"] == 4 * Bt * (N // p) * H          # the buffers handed out
            leaves = fwd["elements"] * (p - 1) / p                  # a rank keeps its own chunk
            assert leaves == pytest.approx(ulysses_elements_sent(Bt, N, H, p))
            sent[p] = leaves
    assert sent[4] < sent[2]                                        # not independent of P
    ring = {p: ring_elements_sent(Bt, N, H, p) for p in (2, 4)}
    assert sent[4] / ring[4] == pytest.approx(2 / 4)                # Ulysses / ring = 2/P
    evidence["elements sent per rank per layer forward"] = {"ulysses": sent, "ring": ring}
    evidence.quote("Ulysses per-rank volume, P=4 over P=2", 0.75, sent[4] / sent[2], digits=2)


@pytest.mark.claim("cp.ring-volume")
def test_ring_volume_does_not_shrink(runs, evidence):
    sent = {}
    for p in (2, 4):
        for rec in runs[f"ring/P{p}/causal0/contiguous"]:
            isend = rec["sends"]["isend"]
            assert isend["calls"] == p - 1                           # P-1 hops
            assert isend["elements"] == (p - 1) * 2 * Bt * (N // p) * H
            assert isend["elements"] == ring_elements_sent(Bt, N, H, p)
            sent[p] = isend["elements"]
    assert sent[4] > sent[2]                                        # grows toward 2bNh
    evidence["elements sent per rank per layer forward"] = sent
    evidence.quote("ring per-rank volume, P=4 over P=2", 1.5, sent[4] / sent[2], digits=2)


@pytest.mark.claim("cp.ring-point-is-memory")
def test_ring_holds_only_blocks(runs, evidence):
    for p in (2, 4):
        for rec in runs[f"ring/P{p}/causal0/contiguous"]:
            assert rec["stats"]["max_tile"] == Bt * HEADS * (N // p) ** 2   # never an N×N score tile
            assert rec["stats"]["blocks"] == p
    assert _ring_error(runs, 4, False, "contiguous") < 1e-12
    # overlap hides a hop only if computing on a block takes longer than sending it:
    # 4·b·n²·h FLOPs against 2·b·n·h bf16 elements (4·b·n·h bytes)  =>  n >= FLOPS / (bytes/s)
    def min_block(flops: float, bandwidth: float) -> float:
        return flops / bandwidth

    a100_nvlink, a100_ib = min_block(312e12, 300e9), min_block(312e12, 25e9)
    evidence["min tokens per device for full overlap"] = {"A100, 300 GB/s": a100_nvlink, "A100, 25 GB/s": a100_ib}
    evidence.quote("A100 NVLink min block (tokens)", 1040, a100_nvlink, rel=0.001)
    evidence["score tile per rank vs full"] = {p: [Bt * HEADS * (N // p) ** 2, Bt * HEADS * N**2] for p in (2, 4)}


@pytest.mark.claim("cp.ulysses-head-limit")
def test_ulysses_cannot_use_more_ranks_than_heads(runs, evidence):
    for rec in runs["ulysses/heads2"]:
        assert rec["P"] == 4 and rec["heads"] == 2
        assert rec["refused"] and "heads" in rec["refused"]
    assert _ulysses_error(runs, 4, False) < 1e-12                  # 4 heads over 4 ranks works
    # the head partition: some rank gets no head as soon as P > H
    for heads in range(1, 9):
        for p in range(1, 17):
            per_rank = [len(range(r, heads, p)) for r in range(p)]
            assert (min(per_rank) == 0) == (p > heads)
    evidence["refused"] = runs["ulysses/heads2"][0]["refused"]


def _pairs(positions: list[int]) -> int:
    return sum(1 for qp in positions for kp in range(N) if kp <= qp)


@pytest.mark.claim("cp.causal-zigzag")
@pytest.mark.parametrize("p", [2, 4])
def test_zigzag_balances_causal_work(runs, p, evidence):
    load = {}
    for layout in ("contiguous", "zigzag"):
        recs = runs[f"ring/P{p}/causal1/{layout}"][:p]          # global ranks 0..P-1: one group
        assert [r["rank"] for r in recs] == list(range(p))
        got = [r["stats"]["pairs"] for r in recs]              # (query, key) pairs per head
        want = [_pairs(r["positions"]) for r in recs]
        assert got == want
        load[layout] = got
    assert len(set(load["zigzag"])) == 1
    assert max(load["contiguous"]) > min(load["contiguous"])
    n = N // p
    assert load["contiguous"] == [r * n * n + n * (n + 1) // 2 for r in range(p)]
    assert _ring_error(runs, p, True, "zigzag") < 1e-12
    evidence[f"P={p} pairs per rank"] = load
    evidence.quote(f"P={p} contiguous max/min load", (2 * p * n - n + 1) / (n + 1),
                   max(load["contiguous"]) / min(load["contiguous"]), rel=1e-9)
