"""Attention basics: the 1/√d_k scale, Q/K/V and multi-head attention, the causal mask in fp16/bf16.

Oracles: exact enumeration over ±1 components (variance of q·k), sympy/closed-form least squares (what one head
can copy), ``FlopCounterMode`` (multi-head cost), ``torch.linalg.matrix_rank`` and the SVD (low-rank scores),
per-prefix softmax computed row by row (the causal mask), and the IO counter of impls/inference/attention.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st
from torch.utils.flop_counter import FlopCounterMode

from impls.inference.attention import (IOCount, naive_attention, naive_attention_backward, tiled_attention,
                                       tiled_attention_backward)
from impls.ml.attention import (causal_visible, masked_softmax, multihead_self_attention, post_softmax_mask,
                                saturation, softmax_jacobian_norm)

F64 = torch.float64


# ------------------------------------------------------------------------------------------ 1/√d_k
@pytest.mark.claim("attn.scale.prevents-exploding-gradients")
def test_without_the_scale_nothing_explodes_the_softmax_saturates(evidence):
    d = 128
    scaled, raw = saturation(d, True), saturation(d, False)
    assert abs(scaled["logit_std"] - 1) < 0.05 and abs(raw["logit_std"] - d ** 0.5) < 0.5    # 1 vs √d_k
    # the gradient reaching q does not blow up (it is not even smaller: ∂s/∂q = k is not divided by √d) ...
    assert raw["grad_q_norm"] < 20 * scaled["grad_q_norm"]
    # ... what happens is saturation: one key takes the mass and the others get no gradient
    assert raw["max_prob"] > 0.8 > 0.2 > scaled["max_prob"]
    assert raw["starved_keys"] > 0.9 and scaled["starved_keys"] == 0
    big = saturation(4096, False, n_queries=64)
    assert big["jacobian_norm"] < 0.2 * scaled["jacobian_norm"]               # ∂softmax/∂scores → 0 at large d
    evidence.quote("share of keys with probability below 1e-4, d_k = 128, unscaled, %", quoted=92,
                   measured=100 * raw["starved_keys"], abs=1)
    evidence.quote("mean top probability, d_k = 128, unscaled", quoted=0.86, measured=raw["max_prob"], abs=0.01)
    evidence["d_k = 128"] = {"scaled": scaled, "unscaled": raw}
    evidence["d_k = 4096, unscaled"] = big


@pytest.mark.claim("attn.scale.variance-argument")
def test_dot_product_variance_is_d_exactly(evidence):
    # exact: components ±1 with probability 1/2 (mean 0, variance 1), every one of the 2^(2d) outcomes
    for d in (1, 2, 3, 5):
        values = [sum(a * b for a, b in zip(v[:d], v[d:])) for v in itertools.product((-1, 1), repeat=2 * d)]
        mean = Fraction(sum(values), len(values))
        var = Fraction(sum(x * x for x in values), len(values)) - mean ** 2
        assert mean == 0 and var == d
    # Gaussian, Monte Carlo; and dividing by √d gives variance 1
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, 200_000, 64, generator=g, dtype=F64)
    dots = (q * k).sum(-1)
    assert abs(float(dots.var()) / 64 - 1) < 0.02 and abs(float((dots / 8).var()) - 1) < 0.02
    # "the gradients vanish entirely": they do not; they concentrate on the top keys
    raw = saturation(128, False)
    assert raw["grad_q_norm"] > 0.1 and raw["jacobian_norm"] > 0.1
    evidence.quote("logit std at d_k = 128 without the scale (√128 = 11.3)", quoted=11.3, measured=raw["logit_std"],
                   abs=0.15)
    evidence["unscaled, d_k = 128"] = raw


def _score_variance(w_q: torch.Tensor, w_k: torch.Tensor, scale: float, seed: int = 1) -> float:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(4096, w_q.shape[0], generator=g, dtype=F64)         # LayerNorm'd inputs: unit variance
    return float(((x @ w_q) * (x @ w_k)).sum(-1).mul(scale).var())


@pytest.mark.claim("attn.scale.t5-init")
def test_t5_folds_the_scale_into_the_query_init_xavier_does_not(evidence):
    d_model, d_kv = 512, 64
    g = torch.Generator().manual_seed(0)
    normal = lambda std: torch.randn(d_model, d_kv, generator=g, dtype=F64) * std   # noqa: E731
    # T5 (HF T5PreTrainedModel._init_weights): q ~ N(0, (d_model·d_kv)^-1), k ~ N(0, d_model^-1), no 1/√d_kv
    t5 = _score_variance(normal((d_model * d_kv) ** -0.5), normal(d_model ** -0.5), 1.0)
    # the usual init with the scale: q, k ~ N(0, 1/d_model), divide by √d_kv
    std_scaled = _score_variance(normal(d_model ** -0.5), normal(d_model ** -0.5), d_kv ** -0.5)
    # Xavier-normal q, k (std √(2/(d_in+d_out))) and no scale: the variance stays ≈ d_kv/…, far above 1
    xav = (2 / (d_model + d_kv)) ** 0.5
    xavier = _score_variance(normal(xav), normal(xav), 1.0)
    assert abs(t5 - 1) < 0.15 and abs(std_scaled - 1) < 0.15
    assert xavier > 3
    evidence["score variance at init"] = {"T5 init, no scale": t5, "N(0,1/d) + 1/√d_kv": std_scaled,
                                          "Xavier, no scale": xavier}


@pytest.mark.claim("attn.complexity-flash")
def test_time_and_memory_and_flash_attention(evidence):
    n, d = 256, 32
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 1, n, d, generator=g, dtype=F64) for _ in range(3))
    naive, flash = IOCount(), IOCount()
    o1, l1, p = naive_attention(q, k, v, counter=naive, return_probs=True)
    o2, l2 = tiled_attention(q, k, v, block_q=32, block_k=32, counter=flash)
    assert torch.allclose(o1, o2, atol=1e-12)
    assert naive.matmul_flops == flash.matmul_flops == 4 * n * n * d       # O(n²d), the same forward FLOPs
    assert naive.extra_hbm == 2 * n * n and flash.extra_hbm == 0           # O(n²) kept vs only O(n) (ℓ, m on chip)
    do = torch.randn_like(o1)
    bn, bf = IOCount(), IOCount()
    naive_attention_backward(q, k, v, p, do, counter=bn)
    tiled_attention_backward(q, k, v, o2, l2, do, block_q=32, block_k=32, counter=bf)
    assert bn.matmul_flops == 8 * n * n * d and bf.matmul_flops == 10 * n * n * d   # recompute: more FLOPs
    evidence.quote("FlashAttention backward FLOPs over the standard backward", quoted=1.25,
                   measured=bf.matmul_flops / bn.matmul_flops, abs=0)
    evidence["n=256, d=32"] = {"naive extra HBM elements": naive.extra_hbm, "flash extra HBM": flash.extra_hbm}


# ------------------------------------------------------------------------------------------ Q, K, V and heads
@pytest.mark.claim("attn.shared-qk-symmetric")
def test_shared_projection_symmetric_scores_not_symmetric_attention(evidence):
    g = torch.Generator().manual_seed(0)
    t, d = 6, 16
    x = torch.randn(1, t, d, generator=g, dtype=F64)
    w = torch.randn(d, d, generator=g, dtype=F64) / d ** 0.5
    q = x @ w
    s = q @ q.transpose(-1, -2)                        # = X W Wᵀ Xᵀ: symmetric, positive semi-definite
    assert torch.allclose(s, s.transpose(-1, -2)) and float(torch.linalg.eigvalsh(s[0]).min()) > -1e-9
    p = torch.softmax(s / d ** 0.5, -1)
    assert not torch.allclose(p, p.transpose(-1, -2), atol=1e-3)   # row normalisation breaks the symmetry
    a, b = 0, 1
    # the real defect: each token's score with itself is its squared norm, so it tends to attend to itself
    rows = 2000
    xs = torch.randn(rows, t, d, generator=g, dtype=F64)
    shared = (xs @ w) @ (xs @ w).transpose(-1, -2)
    wk = torch.randn(d, d, generator=g, dtype=F64) / d ** 0.5
    separate = (xs @ w) @ (xs @ wk).transpose(-1, -2)
    diag = torch.arange(t)
    own_shared = float((shared.argmax(-1) == diag).double().mean())
    own_separate = float((separate.argmax(-1) == diag).double().mean())
    assert own_shared > 0.6 and own_separate < 0.3
    evidence["counterexample"] = {"P[a->b]": float(p[0, a, b]), "P[b->a]": float(p[0, b, a]),
                                  "rows whose top key is itself: shared W": own_shared,
                                  "separate W_q, W_k": own_separate}


def _best_single_head_mse(p: list[float]) -> float:
    """Least squares: the best M for output M·Σ_j p_j x_j against the target (x_1[0], x_2[1]) with x_j ~ N(0, I₂):
    E|t|² − tr(C_ty C_yy⁻¹ C_yt) = 2 − (p_1² + p_2²)/Σ p_j² (closed form, checked numerically below)."""
    return 2 - (p[1] ** 2 + p[2] ** 2) / sum(x * x for x in p)


def _two_heads(x: torch.Tensor, sharpness: float = 60.0) -> torch.Tensor:
    """Head 1 attends to position 1 and copies coordinate 0, head 2 to position 2 and copies coordinate 1;
    queries and keys are position one-hots, so the scores ignore the content."""
    b, t, _ = x.shape
    pos = torch.eye(t, dtype=x.dtype).expand(b, t, t)
    outs = []
    for target, coord in ((1, 0), (2, 1)):
        scores = sharpness * pos[..., target:target + 1].transpose(-1, -2).expand(b, t, t)
        outs.append(torch.softmax(scores, -1) @ x[..., coord:coord + 1])
    return torch.cat(outs, -1)


def _two_heads_beat_one(seed: int) -> dict[str, float]:
    """Two heads of width 1 copy (x_1[0], x_2[1]) exactly; no single head of width 2 gets below MSE 1."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(20_000, 4, 2, generator=g, dtype=F64)
    target = torch.stack([x[:, 1, 0], x[:, 2, 1]], -1)
    mse_two = float((_two_heads(x)[:, 0] - target).pow(2).sum(-1).mean())
    assert mse_two < 1e-12

    @given(st.lists(st.floats(0.0, 1.0), min_size=4, max_size=4).filter(lambda p: sum(p) > 1e-3))
    def bound(raw):                       # one head: any attention row p, the least-squares best output map
        p = [r / sum(raw) for r in raw]
        assert _best_single_head_mse(p) >= 1 - 1e-12

    bound()
    p = [0.0, 0.5, 0.5, 0.0]              # the best row, and the best M found by least squares on samples
    y = (torch.tensor(p, dtype=F64)[None, :, None] * x).sum(1)
    m = torch.linalg.lstsq(y, target).solution
    mse_one = float((y @ m - target).pow(2).sum(-1).mean())
    assert mse_one == pytest.approx(_best_single_head_mse(p), rel=0.03)
    return {"two heads of width 1": mse_two, "one head of width 2, best": mse_one}


@pytest.mark.claim("attn.multihead-subspaces")
def test_two_heads_copy_from_two_places_one_head_cannot(evidence):
    evidence["mean squared error"] = _two_heads_beat_one(0)


@pytest.mark.claim("attn.multihead-low-rank-noise")
def test_multi_head_is_not_a_low_rank_copy_of_one_head(evidence):
    # a single head of the full width cannot reproduce two heads: they are not an approximation of it
    evidence["counterexample"] = _two_heads_beat_one(1)


@pytest.mark.claim("attn.multihead-costs-more")
def test_multi_head_costs_the_same_matmul_flops(evidence):
    g = torch.Generator().manual_seed(0)
    b, t, d = 2, 64, 64
    x = torch.randn(b, t, d, generator=g, dtype=F64)
    ws = [torch.randn(d, d, generator=g, dtype=F64) for _ in range(4)]
    counted = {}
    for h in (1, 2, 8, 16):
        with FlopCounterMode(display=False) as fc:
            multihead_self_attention(x, *ws, heads=h)
        counted[h] = fc.get_total_flops()
    assert len(set(counted.values())) == 1
    assert counted[1] == b * (4 * 2 * t * d * d + 2 * 2 * t * t * d)        # 4 projections + QKᵀ + PV
    evidence["matmul FLOPs by number of heads"] = counted
    evidence["softmax elements"] = {h: b * h * t * t for h in counted}       # what does grow with H


@pytest.mark.claim("attn.small-heads-low-rank")
def test_head_dim_bounds_the_rank_of_the_scores(evidence):
    g = torch.Generator().manual_seed(0)
    t = 32
    ranks = {}
    for dh in (4, 8, 16, 32):
        q, k = torch.randn(2, t, dh, generator=g, dtype=F64)
        ranks[dh] = int(torch.linalg.matrix_rank(q @ k.t()))
        assert ranks[dh] == min(dh, t)
    # a pattern that needs full rank: attend to the previous token (a shifted identity, rank T)
    target = 10.0 * torch.diag(torch.ones(t - 1, dtype=F64), -1) + 10.0 * torch.eye(t, dtype=F64)[0:1].t() @ \
        torch.eye(t, dtype=F64)[0:1]
    sv = torch.linalg.svdvals(target)
    for dh in (4, 8):
        best_err = float(sv[dh:].pow(2).sum().sqrt())            # Eckart–Young: best rank-dh approximation
        assert best_err > 0.5 * float(target.norm())
    evidence["rank of QKᵀ, T = 32"] = ranks


# ------------------------------------------------------------------------------------------ causal mask
@pytest.mark.claim("attn.causal.minus-inf-before-softmax")
def test_causal_mask_before_softmax_equals_per_prefix_softmax(evidence):
    g = torch.Generator().manual_seed(0)
    t = 7
    s = torch.randn(3, t, t, generator=g, dtype=F64)
    p = masked_softmax(s, causal_visible(t))
    for i in range(t):                                  # row i is the softmax over keys 0..i only
        assert torch.allclose(p[:, i, : i + 1], torch.softmax(s[:, i, : i + 1], -1))
        assert bool((p[:, i, i + 1:] == 0).all())
    # and outputs never depend on future tokens: perturb position 5, rows 0..4 unchanged
    x = torch.randn(1, t, 8, generator=g, dtype=F64)
    w = [torch.randn(8, 8, generator=g, dtype=F64) for _ in range(4)]
    y1, _ = multihead_self_attention(x, *w, heads=2, causal=True)
    x2 = x.clone()
    x2[0, 5] += 3.0
    y2, _ = multihead_self_attention(x2, *w, heads=2, causal=True)
    assert torch.equal(y1[0, :5], y2[0, :5]) and not torch.allclose(y1[0, 5:], y2[0, 5:])


@pytest.mark.claim("attn.causal.fill-value-fp16")
def test_fill_values_in_fp16_and_bf16(evidence):
    vis = causal_visible(4)
    s = torch.randn(4, 4, generator=torch.Generator().manual_seed(0))
    ref = masked_softmax(s.double(), vis)
    outcome = {}
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        for fill in ("-inf", -1e9, -1e4, "min"):
            for additive in (False, True):
                key = f"{str(dtype).split('.')[1]}, {fill}, {'added' if additive else 'filled'}"
                try:
                    got = masked_softmax(s.to(dtype), vis, fill, additive).double()
                except RuntimeError:
                    outcome[key] = "raises"
                    continue
                outcome[key] = ("NaN" if torch.isnan(got).any()
                                else "ok" if torch.allclose(got, ref, atol=1e-2) else "wrong")
    # -1e9 and -inf both work in fp32 when filled; -1e4 and finfo.min work in every dtype
    for dtype in ("float32", "float16", "bfloat16"):
        assert outcome[f"{dtype}, -inf, filled"] == outcome[f"{dtype}, -10000.0, filled"] == "ok"
        assert outcome[f"{dtype}, min, filled"] == outcome[f"{dtype}, min, added"] == "ok"
        assert outcome[f"{dtype}, -10000.0, added"] == "ok"
        assert outcome[f"{dtype}, -inf, added"] == "NaN"          # a multiplied -inf mask: 0·(-inf) = NaN
    assert outcome["float32, -1000000000.0, filled"] == outcome["bfloat16, -1000000000.0, filled"] == "ok"
    assert outcome["float16, -1000000000.0, filled"] == "raises"  # fp16 cannot hold -1e9: masked_fill refuses
    assert outcome["float16, -1000000000.0, added"] == "ok"       # ...and a multiplied -1e9 becomes -inf
    assert torch.tensor(-1e9).half().item() == -math.inf
    evidence["outcome on causal rows"] = outcome


@pytest.mark.claim("attn.causal.mask-after-softmax")
def test_masking_after_softmax_leaks_the_future(evidence):
    g = torch.Generator().manual_seed(0)
    t = 5
    s = torch.randn(1, t, t, generator=g, dtype=F64)
    vis = causal_visible(t)
    after = post_softmax_mask(s, vis)
    assert not torch.allclose(after.sum(-1), torch.ones(1, t, dtype=F64))      # rows no longer sum to 1
    s2 = s.clone()
    s2[0, 1, 4] += 5.0                                                             # change a future score of row 1
    assert not torch.allclose(post_softmax_mask(s2, vis)[0, 1], after[0, 1])       # the visible weights move
    assert torch.equal(masked_softmax(s2, vis)[0, 1], masked_softmax(s, vis)[0, 1])
    # renormalising fixes it in exact arithmetic, but future scores can underflow the visible ones to 0/0
    assert torch.allclose(post_softmax_mask(s, vis, renormalize=True), masked_softmax(s, vis))
    big = s.clone().float()
    big[0, 0, 1:] = 200.0                                                           # future keys dominate row 0
    renorm = post_softmax_mask(big, vis, renormalize=True)
    assert torch.isnan(renorm[0, 0]).any() and not torch.isnan(masked_softmax(big, vis)[0, 0]).any()
    evidence["counterexample"] = {"row sums after masking": after.sum(-1).tolist(),
                                  "row 1 before/after changing a future score": [after[0, 1].tolist(),
                                                                                post_softmax_mask(s2, vis)[0, 1].tolist()]}


@pytest.mark.claim("attn.causal.fully-masked-nan")
def test_fully_masked_row(evidence):
    s = torch.randn(1, 3, 4, generator=torch.Generator().manual_seed(0))
    vis = torch.tensor([[True, True, False, False], [False, False, False, False], [True, True, True, True]])
    nan_row = masked_softmax(s, vis, "-inf")[0, 1]
    uniform = masked_softmax(s, vis, -1e4)[0, 1]
    assert torch.isnan(nan_row).all()                          # 0/0: and the NaN spreads through P·V and backward
    assert torch.allclose(uniform, torch.full((4,), 0.25))     # a finite fill attends uniformly to hidden keys
    # a causal mask never hides a whole row (the diagonal stays visible); padding does. Kernels guard the row:
    q = torch.randn(1, 1, 3, 8, dtype=F64)
    k = v = torch.randn(1, 1, 4, 8, dtype=F64)
    o, lse = naive_attention(q, k, v, mask=vis)
    assert torch.equal(o[0, 0, 1], torch.zeros(8, dtype=F64)) and lse[0, 0, 1] == -math.inf
    assert bool(causal_visible(6).any(-1).all())
    # torch's own SDPA: NaN for the fully masked row in this version, unlike the guarded kernel above
    sdpa = F.scaled_dot_product_attention(q, k, v, attn_mask=vis)
    evidence["torch SDPA row, fully masked"] = sdpa[0, 0, 1].tolist()
    evidence["-inf fill"] = nan_row.tolist()
    evidence["-1e4 fill"] = uniform.tolist()
    evidence["softmax Jacobian norm of a uniform row of 4"] = float(softmax_jacobian_norm(uniform))
