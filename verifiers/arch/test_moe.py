"""MoE routing, balancing, capacity and dropping, and parameter counts from published configs.

Oracles: a per-token dense MoE written here (softmax, Python sort, renormalised gates, the capacity
queue counted in a loop, y_t = Σ_k g_k·E_k(x_t)) for the outputs and every gradient, the router's
included; a Python loop over assignments for the capacity queue; Cauchy-Schwarz for the balancing
loss; module trees built on the meta device for the parameter arithmetic, anchored to the totals
the model cards publish. Expert parallelism on gloo is in ``verifiers/parallel/test_expert_parallel.py``
(checked against ``moe``, which is anchored here).
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch.utils.flop_counter import FlopCounterMode

from impls.arch.params import counts, load_config, numel, skeleton
from impls.parallel import moe as M
from impls.parallel.probes import moe_tokens, moe_weights
from verifiers.errors import max_abs_err, worst


# ---------------------------------------------------------------------- parameter counts
@pytest.fixture(scope="module")
def mixtral() -> dict:
    return counts(load_config("mixtral-8x7b"))


@pytest.fixture(scope="module")
def deepseek() -> dict:
    return counts(load_config("deepseek-v3"))


@pytest.mark.claim("moe.mixtral-params")
def test_mixtral_total_and_active(mixtral, evidence):
    cfg = load_config("mixtral-8x7b")
    assert numel(skeleton(cfg).main) == mixtral["total"]        # the module tree agrees with the arithmetic
    total, active = mixtral["total"] / 1e9, mixtral["active"] / 1e9
    naive_total, naive_active = 8 * 7, 2 * 7
    assert total < 0.85 * naive_total and active < 0.95 * naive_active
    shared = mixtral["total"] - 32 * 8 * mixtral["expert"]
    evidence.quote("total (B)", 46.7, total, digits=1)
    evidence.quote("active per token (B)", 12.9, active, digits=1)
    evidence.quote("active per token without the embedding (B)", 12.75, mixtral["active_without_embedding"] / 1e9, digits=2)
    evidence.quote("attention per layer (M)", 41.9, mixtral["attention_per_layer"] / 1e6, digits=1)
    evidence.quote("one expert (M)", 176.2, mixtral["expert"] / 1e6, digits=1)
    evidence["counterexample"] = {"total_B": total, "active_B": active, "active_without_embedding_B":
                                  mixtral["active_without_embedding"] / 1e9, "shared_B (attention, embeddings, norms, router)":
                                  shared / 1e9, "one_expert_stack_B (32 layers)": 32 * mixtral["expert"] / 1e9}


@pytest.mark.claim("moe.mixtral-params", "moe.deepseek-params")
@given(h=st.integers(1, 4).map(lambda i: 8 * i), layers=st.integers(1, 4), experts=st.integers(1, 6),
       k=st.integers(1, 2), dense=st.integers(0, 2), mtp=st.integers(0, 1), tie=st.booleans())
def test_counts_match_module_trees(h, layers, experts, k, dense, mtp, tie):
    mix = dict(load_config("mixtral-8x7b"), hidden_size=h, intermediate_size=3 * h, num_hidden_layers=layers,
               num_attention_heads=4, num_key_value_heads=2, num_local_experts=experts,
               num_experts_per_tok=min(k, experts), vocab_size=50, tie_word_embeddings=tie)
    assert numel(skeleton(mix).main) == counts(mix)["total"]
    ds = dict(load_config("deepseek-v3"), hidden_size=h, intermediate_size=3 * h, moe_intermediate_size=h,
              num_hidden_layers=layers + dense, first_k_dense_replace=dense, n_routed_experts=experts,
              num_experts_per_tok=min(k, experts), num_attention_heads=2, q_lora_rank=6, kv_lora_rank=4,
              qk_nope_head_dim=4, qk_rope_head_dim=2, v_head_dim=3, vocab_size=50, num_nextn_predict_layers=mtp,
              tie_word_embeddings=tie)
    tree, c = skeleton(ds), counts(ds)
    assert numel(tree.main) == c["total"]
    assert numel(tree.mtp) == c["mtp_unique"]


@pytest.mark.claim("moe.deepseek-params")
def test_deepseek_v3_total_and_active(deepseek, evidence):
    total = deepseek["total"] / 1e9
    active_matmul = deepseek["active_without_embedding"] / 1e9
    evidence.quote("main model total (B)", 671, total, digits=0)
    evidence.quote("active per token, without the embedding lookup (B)", 37, active_matmul, digits=0)
    evidence.quote("active counting the embedding table (B)", 37.6, deepseek["active"] / 1e9, digits=1)
    evidence.quote("MTP module (B)", 11.6, deepseek["mtp_unique"] / 1e9, digits=1)
    evidence.quote("checkpoint weights (B)", 684.5, deepseek["checkpoint"] / 1e9, digits=1)
    evidence.quote("Hugging Face listing (B)", 685, deepseek["checkpoint"] / 1e9, rel=1e-3)
    cfg = load_config("deepseek-v3")
    per_token_experts = cfg["num_experts_per_tok"] + cfg["n_shared_experts"]
    assert per_token_experts == 9 and cfg["n_routed_experts"] == 256
    evidence["breakdown_B"] = {k: v / 1e9 for k, v in deepseek.items()}


# ------------------------------------------------------------------------------- the layer itself
def dense_moe_oracle(x, w_router, w1, w2, k: int, capacity_factor: float, normalize: bool) -> torch.Tensor:
    """MoE(x) token by token: y_t = Σ_{j<k, kept} g_{t,j} · GeLU(x_t W1_e) W2_e, e the j-th choice of token t.

    Router probabilities from exp / sum written out; the k choices by a Python sort; the gates renormalised
    over the k when ``normalize``; the capacity queue (every first choice before any second, then token
    order) counted in a dict. Built from per-token torch ops, so autograd gives every gradient.
    """
    tokens, n = x.shape[0], w1.shape[0]
    cap = math.ceil(capacity_factor * tokens * k / n)
    logits = x @ w_router.T
    probs = [torch.exp(logits[t] - logits[t].max()) / torch.exp(logits[t] - logits[t].max()).sum() for t in range(tokens)]
    choice = [sorted(range(n), key=lambda e, t=t: -float(probs[t][e]))[:k] for t in range(tokens)]
    filled, kept = {}, set()
    for j in range(k):
        for t in range(tokens):
            e = choice[t][j]
            if filled.get(e, 0) < cap:
                kept.add((t, j))
            filled[e] = filled.get(e, 0) + 1
    rows = []
    for t in range(tokens):
        gates = [probs[t][e] for e in choice[t]]
        if normalize:
            total = sum(gates)
            gates = [g / total for g in gates]
        y = torch.zeros_like(x[t])
        for j, e in enumerate(choice[t]):
            if (t, j) in kept:
                y = y + gates[j] * (torch.nn.functional.gelu(x[t] @ w1[e]) @ w2[e])
        rows.append(y)
    return torch.stack(rows)


def _moe_case(seed: int, tokens: int, n: int, h: int = 6, f: int = 10):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(tokens, h, generator=gen, dtype=torch.float64)
    router = torch.randn(n, h, generator=gen, dtype=torch.float64)
    router[0] += 1.0                                            # one popular expert: the queue overflows
    w1 = torch.randn(n, h, f, generator=gen, dtype=torch.float64) * h**-0.5
    w2 = torch.randn(n, f, h, generator=gen, dtype=torch.float64) * f**-0.5
    g = torch.randn(tokens, h, generator=gen, dtype=torch.float64)
    return x, router, w1, w2, g


def _grads(fn, x, router, w1, w2, g):
    leaves = [t.clone().requires_grad_(True) for t in (x, router, w1, w2)]
    y = fn(*leaves)
    (y * g).sum().backward()
    return y.detach(), [t.grad for t in leaves]


@pytest.mark.claim("moe.gate-weighted-sum")
@pytest.mark.parametrize("k, normalize", [(1, False), (2, True), (2, False), (3, True)])
@pytest.mark.parametrize("capacity_factor", [0.75, 4.0])
def test_moe_equals_per_token_dense_oracle(k, normalize, capacity_factor, evidence):
    """Outputs and the gradients of x, the router and both expert weights, against the loop above, with and
    without dropped assignments (13 tokens: capacity is not a divisor)."""
    x, router, w1, w2, g = _moe_case(seed=k * 10 + normalize, tokens=13, n=6)
    got, got_g = _grads(lambda *a: M.moe(*a, k=k, capacity_factor=capacity_factor, normalize=normalize)[0],
                        x, router, w1, w2, g)
    want, want_g = _grads(lambda *a: dense_moe_oracle(*a, k, capacity_factor, normalize), x, router, w1, w2, g)
    errs = {name: max_abs_err(a, b) for name, a, b in zip(("x", "router", "w1", "w2"), got_g, want_g)}
    errs["output"] = max_abs_err(got, want)
    assert worst(*errs.values()) < 1e-12, errs
    # the router learns through the gates: its gradient is there, and it is the oracle's
    assert float(want_g[1].abs().max()) > 1e-3
    _, info = M.moe(x, router, w1, w2, k=k, capacity_factor=capacity_factor, normalize=normalize)
    if capacity_factor < 1:
        assert info["dropped"] > 0
    evidence[f"k={k} normalize={normalize} cf={capacity_factor}"] = {"dropped": info["dropped"], "max_abs_err": errs}


@pytest.mark.claim("moe.gate-weighted-sum")
def test_a_single_renormalised_gate_is_one(evidence):
    """k = 1 with renormalisation makes every gate exactly 1: the task loss gives the router no gradient at all
    (Switch uses the raw probability for k = 1, so that it does)."""
    x, router, w1, w2, g = _moe_case(seed=3, tokens=13, n=6)
    _, (_, g_norm, _, _) = _grads(lambda *a: M.moe(*a, k=1, capacity_factor=4.0, normalize=True)[0], x, router, w1, w2, g)
    _, (_, g_raw, _, _) = _grads(lambda *a: M.moe(*a, k=1, capacity_factor=4.0, normalize=False)[0], x, router, w1, w2, g)
    assert float(g_norm.abs().max()) < 1e-12            # d(g/g) = 0 up to rounding
    assert float(g_raw.abs().max()) > 1e-3
    evidence["router gradient, k=1"] = {"renormalised": float(g_norm.abs().max()), "raw probability": float(g_raw.abs().max())}


# ------------------------------------------------------------------------------- balancing
@pytest.mark.claim("moe.switch-loss-uniform")
@pytest.mark.parametrize("n", [2, 4, 8, 16, 64])
@pytest.mark.parametrize("k", [1, 2])
def test_switch_loss_is_alpha_when_uniform(n, k, evidence):
    if k > n:
        return
    tokens = n * 6
    probs = torch.full((tokens, n), 1.0 / n)
    idx = torch.stack([(torch.arange(tokens) + j) % n for j in range(k)], dim=1)   # every expert equally often
    for alpha in (1e-2, 1e-3):
        assert float(M.load_balancing_loss(probs, idx, alpha)) == pytest.approx(alpha, rel=1e-6)
    # Hugging Face's load_balancing_loss_func normalises f per choice slot instead of over the T·k assignments:
    # written out here, it gives k·α at uniform routing (2α for Mixtral's top-2)
    per_slot = torch.stack([torch.nn.functional.one_hot(idx[:, j], n).double().mean(0) for j in range(k)])
    hf = 1e-2 * n * float((per_slot * probs.double().mean(0)).sum())
    assert hf == pytest.approx(k * 1e-2, rel=1e-9)
    evidence[f"N={n},k={k}"] = {"ours (f over T·k)": float(M.load_balancing_loss(probs, idx, 1e-2)), "per-slot f (HF)": hf}


@pytest.mark.claim("moe.switch-loss-uniform")
@given(st.lists(st.integers(1, 9), min_size=2, max_size=12))
def test_switch_loss_minimum_when_dispatch_matches_probs(counts):
    """Expert i gets counts[i] of T = Σ counts tokens and every token's router distribution is f itself, so
    f = P exactly: the loss is α·N·Σ f_i² >= α (Cauchy-Schwarz), with equality only when uniform."""
    n, tokens, alpha = len(counts), sum(counts), 1e-2
    f = torch.tensor(counts, dtype=torch.float64) / tokens
    idx = torch.tensor([e for e, c in enumerate(counts) for _ in range(c)])[:, None]
    got = float(M.load_balancing_loss(f.expand(tokens, n), idx, alpha))
    assert got == pytest.approx(alpha * n * sum(c * c for c in counts) / tokens**2, rel=1e-12)
    assert got >= alpha * (1 - 1e-12)
    if len(set(counts)) > 1:
        assert got > alpha * (1 + 1e-9)


@pytest.mark.claim("moe.capacity-dropping")
@given(tokens=st.integers(1, 40), n=st.integers(1, 8), k=st.integers(1, 3), cf=st.sampled_from([0.5, 1.0, 1.25, 2.0]),
       seed=st.integers(0, 10_000))
def test_capacity_queue_matches_a_loop(tokens, n, k, cf, seed):
    k = min(k, n)
    gen = torch.Generator().manual_seed(seed)
    idx = torch.stack([torch.randperm(n, generator=gen)[:k] for _ in range(tokens)])
    cap = M.capacity(tokens, n, k, cf)
    assert cap == math.ceil(cf * tokens * k / n)
    slot, keep = M.dispatch_plan(idx, n, cap)
    filled = [0] * n
    for j in range(k):                     # every first choice before any second choice
        for t in range(tokens):
            e = int(idx[t, j])
            assert int(slot[t, j]) == filled[e]
            assert bool(keep[t, j]) == (filled[e] < cap)
            filled[e] += 1
    load = torch.bincount(idx.reshape(-1), minlength=n)
    assert int(keep.sum()) == int(torch.clamp(load, max=cap).sum())


@pytest.mark.claim("moe.capacity-dropping")
def test_dropped_tokens_ride_the_residual(evidence):
    router, w1, w2 = moe_weights()
    x, _ = moe_tokens(0)
    y, info = M.moe(x, router, w1, w2, k=1, capacity_factor=0.5)
    assert info["dropped"] > 0
    _, idx, _ = M.route(x.matmul(router.t()), 1)
    _, keep = M.dispatch_plan(idx, 8, info["capacity"])
    dropped = ~keep[:, 0]
    layer = x + y
    assert torch.equal(layer[dropped], x[dropped])                 # untouched: the residual alone
    assert (layer[~dropped] - x[~dropped]).abs().amax(1).min() > 0
    evidence["example"] = {"tokens": x.shape[0], "experts": 8, "k": 1, "capacity_factor": 0.5,
                           "capacity": info["capacity"], "dropped": info["dropped"], "load": info["load"]}


@pytest.mark.claim("moe.compute-not-memory")
def test_moe_saves_compute_and_activation_memory(mixtral, evidence):
    torch.manual_seed(0)
    t, h, f, n, k = 64, 16, 32, 8, 2
    x = torch.randn(t, h, requires_grad=True)
    router = torch.randn(n, h) * 0.01                          # near-uniform routing: little dropping
    w1, w2 = torch.randn(n, h, f, requires_grad=True), torch.randn(n, f, h, requires_grad=True)
    dense1, dense2 = torch.randn(h, n * f, requires_grad=True), torch.randn(n * f, h, requires_grad=True)
    assert w1.numel() + w2.numel() == dense1.numel() + dense2.numel()   # same weights resident
    saved = {}
    for name, fn in (("moe", lambda: M.moe(x, router, w1, w2, k, 1.0)[0]),
                     ("dense", lambda: torch.nn.functional.gelu(x @ dense1) @ dense2)):
        seen: dict = {}

        def pack(tt):
            if tt.data_ptr() not in {w.data_ptr() for w in (w1, w2, dense1, dense2)}:
                seen.setdefault((tt.data_ptr(), tt.numel()), tt.numel() * tt.element_size())
            return tt

        with FlopCounterMode(display=False) as flops, torch.autograd.graph.saved_tensors_hooks(pack, lambda tt: tt):
            fn()
        saved[name] = {"bytes": sum(seen.values()), "flops": flops.get_total_flops()}
    cap = M.capacity(t, n, k, 1.0)
    assert saved["moe"]["flops"] <= 2 * 2 * n * cap * h * f + 2 * t * h * n   # expert GEMMs on the slots + router
    assert saved["moe"]["flops"] < 0.3 * saved["dense"]["flops"]
    assert saved["moe"]["bytes"] < 0.5 * saved["dense"]["bytes"]
    evidence["toy layer (T=64, h=16, f=32, N=8, k=2)"] = saved
    evidence.quote("Mixtral weights touched per token", 0.276, mixtral["active"] / mixtral["total"], digits=3)


@pytest.mark.claim("moe.deepseek-bias")
def test_bias_balances_without_touching_gates(evidence):
    gen = torch.Generator().manual_seed(7)
    n, k, tokens, steps = 16, 2, 512, 300
    skew = torch.linspace(2.0, -2.0, n, dtype=torch.float64)                 # expert 0 strongly preferred
    bias = torch.zeros(n, dtype=torch.float64)

    def imbalance(b: torch.Tensor) -> float:
        scores = torch.sigmoid(torch.randn(tokens, n, generator=gen, dtype=torch.float64) + skew)
        idx, _ = M.biased_topk(scores, b, k)
        load = torch.bincount(idx.reshape(-1), minlength=n).double()
        return float(load.max() / load.mean())

    before = imbalance(bias)
    for _ in range(steps):
        scores = torch.sigmoid(torch.randn(tokens, n, generator=gen, dtype=torch.float64) + skew)
        idx, _ = M.biased_topk(scores, bias, k)
        bias = M.update_bias(bias, torch.bincount(idx.reshape(-1), minlength=n), gamma=1e-2)
    after = sum(imbalance(bias) for _ in range(5)) / 5
    assert before > 3 and after < 1.5
    evidence.quote("busiest expert over the mean load, no bias", 4.7, before, digits=1)
    evidence.quote("busiest expert over the mean load, after the bias updates", 1.3, after, digits=1)
    # the bias only chooses: for a fixed choice the gate weights are the unbiased affinities
    scores = torch.sigmoid(torch.randn(tokens, n, generator=gen, dtype=torch.float64) + skew)
    idx, gates = M.biased_topk(scores, bias, k)
    chosen = scores.gather(1, idx)
    assert torch.allclose(gates, chosen / chosen.sum(1, keepdim=True), rtol=0, atol=1e-15)
    # DeepSeek-V3 keeps a sequence-wise loss; with perfectly even use it equals α
    even = torch.stack([(torch.arange(n) + j) % n for j in range(k)], dim=1)
    flat = torch.full((n, n), 0.5, dtype=torch.float64)
    assert float(M.sequence_balance_loss(flat, even, 1e-4)) == pytest.approx(1e-4)
    evidence["max/mean expert load"] = {"before": before, f"after {steps} bias updates": after}
