"""The full PPO loss: signs of the three terms, the value loss, and how a token matrix is reduced."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import impls.rl.aggregation as AG
import impls.rl.ppo as P


def _entropy_oracle(logits_row):
    m = max(logits_row)
    e = [math.exp(z - m) for z in logits_row]
    s = sum(e)
    return -sum((x / s) * math.log(x / s) for x in e)


@pytest.mark.claim("ppo.loss.total-signs")
def test_entropy_term_sign(evidence, device):
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(2, 3, 5, generator=g, dtype=torch.float64)
    mask = torch.tensor([[1.0, 1, 1], [1, 1, 0]], dtype=torch.float64)
    want = sum(_entropy_oracle(logits[i, t].tolist()) for i in range(2) for t in range(3) if mask[i, t]) / 5
    got = float(P.entropy_from_logits(logits.to(device), mask.to(device)))
    assert abs(got - want) < 1e-12, (got, want)

    def train(sign_of_entropy_term: float) -> float:
        z = logits.clone().requires_grad_(True)
        opt = torch.optim.SGD([z], lr=1.0)
        c2 = 0.01
        for _ in range(20):
            logp = torch.log_softmax(z, -1)[..., 0]
            pg, _ = P.ppo_clip_loss(logp, logp.detach(), torch.zeros(2, 3, dtype=torch.float64), mask)  # A = 0
            loss = pg + sign_of_entropy_term * c2 * P.entropy_from_logits(z, mask)
            opt.zero_grad()
            loss.backward()
            opt.step()
        return float(P.entropy_from_logits(z.detach(), mask))

    h0 = want
    h_plus, h_minus = train(+1.0), train(-1.0)
    assert h_plus < h0 < h_minus, (h_plus, h0, h_minus)
    evidence.quote("entropy before", quoted=1.1585, measured=h0, digits=4)
    evidence.quote("entropy after minimising +c2*H", quoted=1.1524, measured=h_plus, digits=4)
    evidence.quote("entropy after minimising -c2*H", quoted=1.1646, measured=h_minus, digits=4)
    evidence["entropy_before"] = h0
    evidence["after minimising L_clip + c2*H (catalog's sign)"] = h_plus
    evidence["after minimising L_clip - c2*H (paper's Eq. 9 as a loss)"] = h_minus
    evidence["counterexample"] = {"c2": 0.01, "entropy_before": h0, "entropy_after_plus_sign": h_plus}


@pytest.mark.claim("ppo.loss.value-mse")
def test_value_loss_forms(evidence, device):
    g = torch.Generator().manual_seed(1)
    v = torch.randn(3, 4, generator=g, dtype=torch.float64)
    v_old = torch.randn(3, 4, generator=g, dtype=torch.float64)
    ret = torch.randn(3, 4, generator=g, dtype=torch.float64)
    mask = torch.tensor([[1.0, 1, 1, 1], [1, 1, 0, 0], [1, 0, 0, 0]], dtype=torch.float64)
    sel = mask.bool()
    mse = float(((v - ret)[sel] ** 2).mean())
    got = float(P.value_loss(v.to(device), v_old.to(device), ret.to(device), mask.to(device)))
    assert abs(got - 0.5 * mse) < 1e-12, (got, mse)  # without clipping: half the MSE
    # with clipping (PPO2 baselines / many RLHF codes): the max of two squared errors
    vc = v_old + (v - v_old).clamp(-0.2, 0.2)
    want = float((0.5 * torch.maximum((v - ret) ** 2, (vc - ret) ** 2))[sel].mean())
    assert abs(float(P.value_loss(v, v_old, ret, mask, clip=0.2)) - want) < 1e-12
    # counterexample: V != target, yet the clipped value loss has zero gradient
    V = torch.tensor([[0.5]], dtype=torch.float64, requires_grad=True)
    c = 0.2
    loss = P.value_loss(V, torch.zeros(1, 1, dtype=torch.float64), torch.ones(1, 1, dtype=torch.float64),
                        torch.ones(1, 1), clip=c)
    (gV,) = torch.autograd.grad(loss, V)
    loss = loss.detach()
    assert float(gV) == 0.0
    evidence.quote("V", quoted=0.5, measured=float(V), digits=1)
    evidence.quote("value clip c", quoted=0.2, measured=c, digits=1)
    evidence.quote("clipped value loss", quoted=0.32, measured=float(loss), digits=12)  # 1/2 (0.2 - 1)^2
    evidence["unclipped_equals_half_mse"] = {"loss": got, "mse": mse}
    evidence["counterexample"] = {"V": 0.5, "V_old": 0.0, "target": 1.0, "clip": 0.2,
                                  "clipped_value_loss": float(loss), "dloss_dV": float(gV)}


_agg_val = st.floats(min_value=-5, max_value=5, allow_nan=False, allow_subnormal=False)


@st.composite
def _loss_batch(draw):
    B, T = draw(st.integers(1, 4)), draw(st.integers(1, 6))
    lengths = draw(st.lists(st.integers(1, T), min_size=B, max_size=B))
    L = draw(st.lists(st.lists(_agg_val, min_size=T, max_size=T), min_size=B, max_size=B))
    return L, lengths, T


@pytest.mark.claim("ppo.loss.aggregation-weights")
def test_aggregation_modes(evidence):
    @given(_loss_batch())
    def check(batch):
        L, lengths, T = batch
        B = len(L)
        lm = torch.tensor(L, dtype=torch.float64)
        m = torch.tensor([[1.0] * n + [0.0] * (T - n) for n in lengths], dtype=torch.float64)
        n_tok = sum(lengths)
        want = {
            "token-mean": sum(L[i][t] for i in range(B) for t in range(lengths[i])) / n_tok,
            "seq-mean-token-mean": sum(sum(L[i][:lengths[i]]) / lengths[i] for i in range(B)) / B,
            "seq-mean-token-sum": sum(sum(L[i][:lengths[i]]) for i in range(B)) / B,
            "seq-mean-token-sum-norm": sum(sum(L[i][:lengths[i]]) for i in range(B)) / (B * T),
        }
        for mode, w in want.items():
            got = float(AG.aggregate(lm, m, mode))
            assert math.isclose(got, w, rel_tol=1e-9, abs_tol=1e-12), (mode, L, lengths, w, got)
        assert math.isclose(float(AG.aggregate(lm, m, "seq-mean-token-sum-norm", norm_constant=7)),
                            want["seq-mean-token-sum"] / 7, rel_tol=1e-9, abs_tol=1e-12)

    check()
    # per-token weight a token receives: token-mean 1/N for all; seq-mean-token-mean 1/(B |y_i|)
    lm = torch.zeros(2, 4, dtype=torch.float64, requires_grad=True)
    m = torch.tensor([[1.0, 1, 1, 1], [1, 0, 0, 0]], dtype=torch.float64)
    weights = {}
    for mode in AG.AGGREGATIONS:
        (gw,) = torch.autograd.grad(AG.aggregate(lm, m, mode), lm)
        weights[mode] = gw.tolist()
    assert weights["token-mean"][0][0] == weights["token-mean"][1][0] == 0.2
    assert weights["seq-mean-token-mean"][0][0] == 0.125 and weights["seq-mean-token-mean"][1][0] == 0.5
    evidence["per_token_weights_len4_vs_len1"] = weights


@pytest.mark.claim("ppo.loss.aggregation-weights")
def test_masked_reductions_and_whiten(evidence, device):
    """The masked reductions the aggregations are built on, against the statistics module."""
    import statistics

    from impls.rl import masking as M

    g = torch.Generator().manual_seed(4)
    x = torch.randn(3, 5, generator=g, dtype=torch.float64)
    mask = torch.tensor([[1.0, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0]], dtype=torch.float64)
    x = torch.where(mask > 0, x, torch.tensor(float("nan"), dtype=torch.float64))  # nan in padding must not leak
    vals = [float(v) for v, m in zip(x.flatten(), mask.flatten()) if m > 0]
    xd, md = x.to(device), mask.to(device)
    assert math.isclose(float(M.masked_sum(xd, md)), sum(vals), rel_tol=1e-12)
    assert math.isclose(float(M.masked_mean(xd, md)), statistics.fmean(vals), rel_tol=1e-12)
    assert math.isclose(float(M.masked_var(xd, md)), statistics.variance(vals), rel_tol=1e-12)
    assert math.isclose(float(M.masked_var(xd, md, unbiased=False)), statistics.pvariance(vals), rel_tol=1e-12)
    row_means = M.masked_mean(xd, md, dim=-1).cpu()
    assert torch.allclose(row_means, torch.tensor([statistics.fmean(vals[:3]), statistics.fmean(vals[3:8]), vals[8]],
                                                  dtype=torch.float64))
    w = M.whiten(xd, md).cpu()
    wv = [float(v) for v, m in zip(w.flatten(), mask.flatten()) if m > 0]
    assert abs(statistics.fmean(wv)) < 1e-12 and abs(statistics.variance(wv) - 1) < 1e-6
    assert torch.all(w[mask == 0] == 0)
    w2 = M.whiten(xd, md, shift_mean=False).cpu()
    assert abs(statistics.fmean([float(v) for v, m in zip(w2.flatten(), mask.flatten()) if m > 0]) - statistics.fmean(vals)) < 1e-12
    half = M.masked_mean(x.float().half().to(device), md)
    assert half.dtype == torch.float32
    evidence["whitened_mean_var"] = [statistics.fmean(wv), statistics.variance(wv)]
