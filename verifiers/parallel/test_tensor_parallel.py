"""Measured on gloo: Megatron tensor and sequence parallelism of one GPT layer.

The shared launch of 4 CPU ranks (``conftest.py``) runs the layer at t = 4 and, in two pairs, at t = 2, in three modes:
TP, SP as Megatron implements it (the column-parallel linear keeps only its sequence shard and
all-gathers it again in backward) and SP keeping the gathered input. The oracle is the dense
layer run here in one process: outputs, input gradients and every weight gradient (sliced by
the index arithmetic below, written independently of ``impls.parallel.tensor``) must agree.
Collectives are counted by wrapping the ``torch.distributed`` functions the layer calls.
"""

from __future__ import annotations

import pytest
import torch

from impls.distributed.activations import dropout_mask_bytes_per_element
from impls.distributed.memory import activation_bytes_num
from impls.parallel.probes import TP_SHAPE, dense_layer, tp_inputs
from verifiers.errors import max_abs_err, worst
from verifiers.parallel.gloo import Topic

pytestmark = pytest.mark.timeout(420)

S, B, H, A = TP_SHAPE["s"], TP_SHAPE["b"], TP_SHAPE["h"], TP_SHAPE["a"]
SBH = S * B * H
MODES = ("tp", "sp", "sp_keep")


@pytest.fixture(scope="module")
def runs(gloo_parallel) -> Topic:
    return Topic(gloo_parallel, "tensor")


@pytest.fixture(scope="module")
def dense() -> dict:
    layer = dense_layer()
    x, g = tp_inputs()
    x = x.clone().requires_grad_(True)
    out = layer(x)
    (out * g).sum().backward()
    return {"out": out.detach(), "x_grad": x.grad, "grads": {n: p.grad for n, p in layer.named_parameters()}}


def _rec(runs: Topic, key: str) -> list[dict]:
    return runs[key]


def _t(x) -> torch.Tensor:
    return torch.tensor(x, dtype=torch.float64)


def _rows(n_out: int, t: int, r: int, groups: int = 1) -> list[int]:
    """Output features of rank r when each of ``groups`` stacked blocks is split in t."""
    block = n_out // groups
    part = block // t
    return [g * block + r * part + i for g in range(groups) for i in range(part)]


def _expected_local_grads(dense: dict, t: int, r: int) -> dict[str, torch.Tensor]:
    gr = dense["grads"]
    qkv_rows, fc1_rows = _rows(3 * H, t, r, groups=3), _rows(4 * H, t, r)
    proj_cols, fc2_cols = _rows(H, t, r), _rows(4 * H, t, r)
    return {
        "qkv_w": gr["qkv.weight"][qkv_rows], "qkv_b": gr["qkv.bias"][qkv_rows],
        "proj_w": gr["proj.weight"][:, proj_cols], "proj_b": gr["proj.bias"],
        "fc1_w": gr["fc1.weight"][fc1_rows], "fc1_b": gr["fc1.bias"][fc1_rows],
        "fc2_w": gr["fc2.weight"][:, fc2_cols], "fc2_b": gr["fc2.bias"],
        "ln1.weight": gr["ln1.weight"], "ln1.bias": gr["ln1.bias"],
        "ln2.weight": gr["ln2.weight"], "ln2.bias": gr["ln2.bias"],
    }


def _check_equal_to_dense(runs, dense, t: int, mode: str) -> float:
    largest = 0.0
    for rec in _rec(runs, f"t{t}/{mode}"):
        r = rec["rank"]
        sl = slice(None) if mode == "tp" else slice(r * S // t, (r + 1) * S // t)
        diffs = [max_abs_err(rec["out"], dense["out"][sl]), max_abs_err(rec["x_grad"], dense["x_grad"][sl])]
        for name, want in _expected_local_grads(dense, t, r).items():
            diffs.append(max_abs_err(rec["grads"][name], want))
        largest = worst(largest, *diffs)
    assert largest < 1e-10, (t, mode, largest)
    return largest


@pytest.mark.claim("tp.mlp-column-row-no-comm")
@pytest.mark.parametrize("t", [2, 4])
def test_mlp_column_then_row_needs_one_collective(runs, dense, t, evidence):
    worst = _check_equal_to_dense(runs, dense, t, "tp")
    for rec in _rec(runs, f"t{t}/tp"):
        # the MLP block's forward calls exactly one collective: the all-reduce after B
        assert rec["mlp_fwd"] == {"all_reduce": {"calls": 1, "elements": SBH, "bytes": SBH * 8}}, rec["mlp_fwd"]
    evidence[f"t={t}"] = {"max_abs_err_vs_dense": worst, "mlp_forward_collectives": _rec(runs, f"t{t}/tp")[0]["mlp_fwd"]}


@pytest.mark.claim("tp.row-split-needs-sync")
def test_gelu_of_partial_sums_is_wrong(evidence):
    torch.manual_seed(0)
    x = torch.randn(6, 8, dtype=torch.float64)
    a = torch.randn(8, 12, dtype=torch.float64)
    full = torch.nn.functional.gelu(x @ a)
    x1, x2, a1, a2 = x[:, :4], x[:, 4:], a[:4], a[4:]          # A split by rows, X by columns
    assert torch.allclose(x1 @ a1 + x2 @ a2, x @ a, rtol=0, atol=1e-12)   # the partial sums do add up
    local = torch.nn.functional.gelu(x1 @ a1) + torch.nn.functional.gelu(x2 @ a2)
    gap = float((local - full).abs().max())
    assert gap > 0.1, gap                                        # GeLU is not additive
    synced = torch.nn.functional.gelu(x1 @ a1 + x2 @ a2)         # all-reduce before GeLU
    assert torch.allclose(synced, full, rtol=0, atol=1e-12)
    # the smallest counterexample: GeLU(1) + GeLU(1) != GeLU(2)
    g = torch.nn.functional.gelu(torch.tensor([1.0, 2.0], dtype=torch.float64))
    assert abs(2 * g[0] - g[1]) > 0.1
    evidence.quote("GeLU(1) + GeLU(1)", 1.683, float(2 * g[0]), digits=3)
    evidence.quote("GeLU(2)", 1.954, float(g[1]), digits=3)
    evidence["counterexample"] = {"GeLU(1)+GeLU(1)": float(2 * g[0]), "GeLU(2)": float(g[1]),
                                  "max_abs_gap_random_6x8x12": gap}


@pytest.mark.claim("tp.column-parallel-no-allgather")
def test_no_allgather_in_forward(runs, dense, evidence):
    for t in (2, 4):
        _check_equal_to_dense(runs, dense, t, "tp")
        for rec in _rec(runs, f"t{t}/tp"):
            names = set(rec["fwd"]) | set(rec["bwd"])
            assert not any(n.startswith("all_gather") for n in names), names
    evidence.quote("all-reduces in the layer forward", 2, _rec(runs, "t4/tp")[0]["fwd"]["all_reduce"]["calls"], abs=0)
    evidence["counterexample"] = {"forward_collectives_t4": _rec(runs, "t4/tp")[0]["fwd"],
                                  "output_equals_dense": True}


@pytest.mark.claim("tp.four-allreduces-per-layer")
@pytest.mark.parametrize("t", [2, 4])
def test_two_forward_two_backward_allreduces(runs, t, evidence):
    for rec in _rec(runs, f"t{t}/tp"):
        assert rec["fwd"] == {"all_reduce": {"calls": 2, "elements": 2 * SBH, "bytes": 2 * SBH * 8}}, rec["fwd"]
        assert rec["bwd"] == {"all_reduce": {"calls": 2, "elements": 2 * SBH, "bytes": 2 * SBH * 8}}, rec["bwd"]
        assert rec["grad_sync"] == {}
    evidence.quote("all-reduces forward", 2, _rec(runs, f"t{t}/tp")[0]["fwd"]["all_reduce"]["calls"], abs=0)
    evidence.quote("all-reduces backward", 2, _rec(runs, f"t{t}/tp")[0]["bwd"]["all_reduce"]["calls"], abs=0)
    evidence[f"t={t}"] = {"elements_per_all_reduce": SBH, "sbh": SBH}


def _ring_elements(collectives: dict, t: int) -> float:
    """Independent ring model: all-reduce 2(t-1)/t·S, all-gather and reduce-scatter (t-1)/t·S."""
    out = 0.0
    for name, row in collectives.items():
        factor = 2 if name == "all_reduce" else 1
        assert name in ("all_reduce", "all_gather_single", "reduce_scatter_single"), name
        out += factor * (t - 1) / t * row["elements"]
    return out


@pytest.mark.claim("tp.sequence-parallel-same-bytes")
@pytest.mark.parametrize("t", [2, 4])
def test_sequence_parallel_bytes_depend_on_the_variant(runs, dense, t, evidence):
    """Equal bytes only when the gathered input is kept (and its memory paid); the paper's design re-gathers."""
    from impls.parallel.tensor import layer_elements_sent, ring_sent

    sent = {}
    for mode in MODES:
        _check_equal_to_dense(runs, dense, t, mode)
        rec = _rec(runs, f"t{t}/{mode}")[0]
        sent[mode] = _ring_elements(rec["fwd"], t) + _ring_elements(rec["bwd"], t)
        assert ring_sent(rec["fwd"], t) + ring_sent(rec["bwd"], t) == pytest.approx(sent[mode])
        assert sent[mode] == pytest.approx(layer_elements_sent(S, B, H, t, mode))
    # replacing each all-reduce by reduce-scatter + all-gather: exactly the same bytes
    assert sent["sp_keep"] == pytest.approx(sent["tp"])
    # Megatron re-gathers the saved shard in backward: 2 more all-gathers of sbh per layer
    assert sent["sp"] == pytest.approx(sent["tp"] * 10 / 8)
    saved = {mode: _rec(runs, f"t{t}/{mode}/saved")[0]["activations"] for mode in MODES}
    assert saved["sp"] < saved["sp_keep"] < saved["tp"]
    # the equal-bytes variant pays for it in memory: it keeps the two all-gathered inputs, 2·(2sbh - 2sbh/t) bytes
    assert saved["sp_keep"] - saved["sp"] == 2 * (2 * SBH - 2 * SBH // t)
    evidence.quote(f"SP/TP ring bytes, t={t}", 1, sent["sp_keep"] / sent["tp"], abs=1e-12)
    evidence.quote(f"Megatron SP/TP ring bytes, t={t}", 1.25, sent["sp"] / sent["tp"], abs=1e-12)
    evidence.quote(f"Megatron SP extra bytes over TP, t={t}", 0.25, sent["sp"] / sent["tp"] - 1, abs=1e-12)
    keep = _rec(runs, f"t{t}/sp_keep")[0]
    evidence.quote("all-gathers per layer (SP)", 4, sum(keep[ph]["all_gather_single"]["calls"] for ph in ("fwd", "bwd")), abs=0)
    evidence.quote("reduce-scatters per layer (SP)", 4, sum(keep[ph]["reduce_scatter_single"]["calls"] for ph in ("fwd", "bwd")), abs=0)
    meg = _rec(runs, f"t{t}/sp")[0]
    evidence.quote("extra all-gathers (Megatron SP)", 2, sum(meg[ph]["all_gather_single"]["calls"] for ph in ("fwd", "bwd")) - 4, abs=0)
    evidence[f"t={t}"] = {"ring_elements_sent_per_layer": sent, "saved_activation_bytes": saved,
                          "condition": "equal bytes only for sp_keep, which saves more activation bytes than sp"}


@pytest.mark.claim("tp.activation-memory-measured")
@pytest.mark.parametrize("t", [2, 4])
def test_saved_activations_match_korthikanti(runs, t, evidence):
    m = dropout_mask_bytes_per_element(torch.bfloat16)
    got = {mode: _rec(runs, f"t{t}/{mode}/saved") for mode in MODES}
    want_tp = activation_bytes_num(S, B, H, A, tp=t, parallel="tensor", dropout_mask_bytes=m)
    want_sp = activation_bytes_num(S, B, H, A, tp=t, parallel="tensor+sequence", dropout_mask_bytes=m)
    dense_bytes = activation_bytes_num(S, B, H, A, dropout_mask_bytes=m)
    assert _rec(runs, "dense/saved")[0]["activations"] == dense_bytes
    for rec in got["tp"]:
        assert rec["activations"] == want_tp
    for rec in got["sp"]:
        assert rec["activations"] == want_sp
    for rec in got["sp_keep"]:  # keeping the two gathered inputs costs 2·(2sbh - 2sbh/t)
        assert rec["activations"] == want_sp + 2 * (2 * SBH - 2 * SBH // t)
    evidence[f"t={t}"] = {"dropout_mask_bytes": m, "dense": dense_bytes, "tp": want_tp, "tp+sp": want_sp,
                          "tp_over_dense/t": want_tp / (dense_bytes / t)}


@pytest.mark.claim("tp.memory-not-params-over-tp-pp")
def test_memory_per_gpu_is_not_params_over_tp_pp(runs, evidence):
    # 1. measured: a tensor-parallel rank holds more than 1/t of the layer's parameters
    dense_numel = sum(p.numel() for p in dense_layer().parameters())
    for t in (2, 4):
        local = sum(_t(v).numel() for v in _rec(runs, f"t{t}/tp")[0]["grads"].values())
        replicated = 4 * H + 2 * H               # two LayerNorms + the two biases added after g
        assert local == (dense_numel - replicated) / t + replicated > dense_numel / t
        evidence[f"layer params per rank, t={t}"] = {"local": local, "dense/t": dense_numel / t}
    # 2. GPT-3 175B on t = 8, p = 16 (Megatron-LM's example), bf16 with mixed-precision Adam, b = 1
    psi, L, h, a, s, t, p = 175e9, 96, 12288, 96, 2048, 8, 16
    weights_only = 2 * psi / (t * p)
    model_states = 16 * psi / (t * p)                       # 2 + 2 + 12 bytes per parameter
    # 1F1B: device 0 holds p micro-batches of L/p layers = L layers of activations
    act_none = L * activation_bytes_num(s, 1, h, a, tp=t, parallel="tensor", dropout_mask_bytes=1)
    act_full = L * 2 * s * h                                 # full recomputation keeps each layer's input
    assert model_states + act_full > 9 * weights_only
    assert model_states + act_none > 28 * weights_only
    evidence["counterexample"] = {
        "params/(t·p) as bf16 GB": weights_only / 1e9, "model states GB": model_states / 1e9,
        "activations GB, no recomputation": act_none / 1e9, "activations GB, full recomputation": act_full / 1e9,
        "ratio, no recomputation": (model_states + act_none) / weights_only,
        "ratio, full recomputation": (model_states + act_full) / weights_only,
    }
    evidence.quote("GPT-3 params per GPU / 1e9", 1.37, psi / (t * p) / 1e9, digits=2)
    evidence.quote("bf16 weights per GPU (GB)", 2.7, weights_only / 1e9, digits=1)
    evidence.quote("model states per GPU (GB)", 21.9, model_states / 1e9, digits=1)
    evidence.quote("activations, no recomputation (GB)", 55.6, act_none / 1e9, digits=1)
    evidence.quote("activations, full recomputation (GB)", 4.8, act_full / 1e9, digits=1)


@pytest.mark.claim("tp.intra-node-rule")
def test_tensor_parallel_traffic_dwarfs_pipeline_traffic(evidence):
    # GPT-3 175B, t = 8, p = 16: bytes one GPU sends per micro-batch (bf16, b = 1)
    L, h, s, t, p = 96, 12288, 2048, 8, 16
    act = 2 * s * h                                           # one [s, b, h] activation in bf16
    tp_bytes = (L // p) * 4 * 2 * (t - 1) / t * act           # 4 ring all-reduces per layer
    pp_bytes = 2 * act                                        # activation forward + gradient backward
    ratio = tp_bytes / pp_bytes
    assert ratio == pytest.approx(4 * (t - 1) / t * L / p)
    assert ratio > 20
    compute_s = 72 * s * h * h * (L // p) * (1 + s / (6 * h)) / t / 312e12    # at A100 peak
    nvlink, ib = 300e9, 25e9
    assert tp_bytes / ib > 0.8 * compute_s > tp_bytes / nvlink   # over InfiniBand TP alone costs about a step
    evidence.quote("TP/PP bytes per micro-batch", 21, ratio, abs=0.5)
    evidence.quote("TP bytes per micro-batch per GPU (GB)", 2.1, tp_bytes / 1e9, digits=1)
    evidence.quote("over NVLink (ms)", 7, 1e3 * tp_bytes / nvlink, digits=0)
    evidence.quote("over InfiniBand (ms)", 85, 1e3 * tp_bytes / ib, abs=0.5)
    evidence.quote("compute at A100 peak (ms)", 55, 1e3 * compute_s, digits=0)
    evidence["per micro-batch per GPU"] = {
        "tp_GB": tp_bytes / 1e9, "pp_GB": pp_bytes / 1e9, "compute_ms_at_312TFLOPS": 1e3 * compute_s,
        "tp_ms_over_NVLink_300GBps": 1e3 * tp_bytes / nvlink, "tp_ms_over_IB_25GBps": 1e3 * tp_bytes / ib,
    }
