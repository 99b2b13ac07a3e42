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
    loss = P.value_loss(V, torch.zeros(1, 1, dtype=torch.float64), torch.ones(1, 1, dtype=torch.float64),
                        torch.ones(1, 1), clip=0.2)
    (gV,) = torch.autograd.grad(loss, V)
    loss = loss.detach()
    assert float(gV) == 0.0 and abs(float(loss) - 0.5 * 0.8**2) < 1e-12
    evidence["unclipped_equals_half_mse"] = {"loss": got, "mse": mse}
    evidence["counterexample"] = {"V": 0.5, "V_old": 0.0, "target": 1.0, "clip": 0.2,
                                  "clipped_value_loss": float(loss), "dloss_dV": float(gV)}


_agg_val = st.floats(min_value=-5, max_value=5, allow_nan=False, allow_subnormal=False)


@st.composite
def _loss_batch(draw, allow_empty: bool = False):
    B, T = draw(st.integers(1, 4)), draw(st.integers(1, 6))
    lengths = draw(st.lists(st.integers(0 if allow_empty else 1, T), min_size=B, max_size=B))
    L = draw(st.lists(st.lists(_agg_val, min_size=T, max_size=T), min_size=B, max_size=B))
    return L, lengths, T


def _agg_oracle(L, lengths, T, C):
    """Each mode in plain Python over the non-empty rows only (the documented rule); 0 if there are none."""
    rows = [i for i in range(len(L)) if lengths[i] > 0]
    nb, n_tok = len(rows), sum(lengths)
    if nb == 0:
        return {"token-mean": 0.0, "seq-mean-token-mean": 0.0, "seq-mean-token-sum": 0.0,
                "seq-mean-token-sum-norm": 0.0, "token-sum": 0.0}
    tot = sum(sum(L[i][:lengths[i]]) for i in rows)
    return {
        "token-mean": tot / n_tok,
        "seq-mean-token-mean": sum(sum(L[i][:lengths[i]]) / lengths[i] for i in rows) / nb,
        "seq-mean-token-sum": tot / nb,
        "seq-mean-token-sum-norm": tot / (nb * C),
        "token-sum": tot,
    }


@pytest.mark.claim("ppo.loss.aggregation-weights")
def test_aggregation_modes(evidence):
    @given(_loss_batch())
    def check(batch):
        L, lengths, T = batch
        lm = torch.tensor(L, dtype=torch.float64)
        m = torch.tensor([[1.0] * n + [0.0] * (T - n) for n in lengths], dtype=torch.float64)
        for mode, w in _agg_oracle(L, lengths, T, 7.0).items():
            got = float(AG.aggregate(lm, m, mode, norm_constant=7.0))
            assert math.isclose(got, w, rel_tol=1e-9, abs_tol=1e-12), (mode, L, lengths, w, got)

    check()
    assert set(AG.AGGREGATIONS) == {"token-mean", "seq-mean-token-mean", "seq-mean-token-sum",
                                    "seq-mean-token-sum-norm", "token-sum"}
    # per-token weight a token receives: token-mean 1/N for all; seq-mean-token-mean 1/(B |y_i|)
    lm = torch.zeros(2, 4, dtype=torch.float64, requires_grad=True)
    m = torch.tensor([[1.0, 1, 1, 1], [1, 0, 0, 0]], dtype=torch.float64)
    weights = {}
    for mode in AG.AGGREGATIONS:
        (gw,) = torch.autograd.grad(AG.aggregate(lm, m, mode, norm_constant=4), lm)
        weights[mode] = gw.tolist()
    assert weights["token-mean"][0][0] == weights["token-mean"][1][0] == 0.2
    assert weights["seq-mean-token-mean"][0][0] == 0.125 and weights["seq-mean-token-mean"][1][0] == 0.5
    assert weights["seq-mean-token-sum-norm"][0][0] == weights["seq-mean-token-sum-norm"][1][0] == 0.125
    with pytest.raises(ValueError, match="norm_constant"):  # the padded width is not a default constant
        AG.aggregate(lm, m, "seq-mean-token-sum-norm")
    evidence["per_token_weights_len4_vs_len1"] = weights


@pytest.mark.claim("ppo.loss.empty-rows-absent")
def test_empty_rows_are_absent_in_every_mode(evidence):
    """Random masks including all-zero rows (and all-zero batches): every mode equals the oracle over the
    non-empty rows, removing the empty rows changes nothing, and an all-empty batch gives 0 with zero gradient."""
    seen = {"examples": 0, "with_empty_rows": 0, "all_empty": 0}

    @given(_loss_batch(allow_empty=True))
    def check(batch):
        L, lengths, T = batch
        lm = torch.tensor(L, dtype=torch.float64, requires_grad=True)
        m = torch.tensor([[1.0] * n + [0.0] * (T - n) for n in lengths], dtype=torch.float64)
        keep = [i for i, n in enumerate(lengths) if n > 0]
        want = _agg_oracle(L, lengths, T, 5.0)
        for mode in AG.AGGREGATIONS:
            got = AG.aggregate(lm, m, mode, norm_constant=5.0)
            assert math.isclose(float(got.detach()), want[mode], rel_tol=1e-9, abs_tol=1e-12), (mode, L, lengths, want[mode], float(got.detach()))
            if keep and len(keep) < len(lengths):
                sub = float(AG.aggregate(lm.detach()[keep], m[keep], mode, norm_constant=5.0))
                assert math.isclose(float(got.detach()), sub, rel_tol=1e-12, abs_tol=1e-12), (mode, lengths, float(got.detach()), sub)
            (g,) = torch.autograd.grad(got, lm)
            assert bool(torch.isfinite(g).all()) and bool((g[m == 0] == 0).all())
        seen["examples"] += 1
        seen["with_empty_rows"] += int(0 in lengths)
        seen["all_empty"] += int(not keep)

    check()
    # and explicitly: the mixed batch, rows [len 2, empty, len 1]
    L = torch.tensor([[1.0, 2, 3], [0, 0, 0], [5, 6, 7]], dtype=torch.float64)
    M = torch.tensor([[1.0, 1, 0], [0, 0, 0], [1, 0, 0]], dtype=torch.float64)
    table = {mode: [float(AG.aggregate(L, M, mode, norm_constant=3)), float(AG.aggregate(L[[0, 2]], M[[0, 2]], mode, norm_constant=3))]
             for mode in AG.AGGREGATIONS}
    assert all(a == b for a, b in table.values()), table
    assert seen["with_empty_rows"] > 5 and seen["all_empty"] > 0, seen
    evidence["examples"] = seen
    evidence["with_and_without_the_empty_row"] = table


def _padded(T, device):
    """The same 3-token answer, right-padded to width T: log-probs, advantages, values, logits."""
    lp = torch.zeros(1, T, dtype=torch.float64, device=device)
    lp[0, :3] = torch.tensor([-0.5, -1.0, -0.2], dtype=torch.float64)
    mask = torch.zeros(1, T, dtype=torch.float64, device=device)
    mask[0, :3] = 1.0
    g = torch.Generator().manual_seed(9)
    logits = torch.randn(1, 3, 5, generator=g, dtype=torch.float64)
    logits = torch.cat([logits, torch.zeros(1, T - 3, 5, dtype=torch.float64)], dim=1).to(device)
    values = torch.zeros(1, T, dtype=torch.float64, device=device)
    values[0, :3] = torch.tensor([0.1, 0.4, 0.9], dtype=torch.float64)
    return lp, mask, logits, values


@pytest.mark.claim("ppo.loss.constant-normaliser")
def test_dr_grpo_constant_normaliser_through_every_loss(evidence, device):
    """One 3-token answer padded to T = 8 and T = 16: with a given constant C every loss is the same at both
    widths (and equals sum / C by hand); with the padded width as C, as verl's default, it halves."""
    C = 8.0
    out = {}
    for T in (8, 16):
        lp, mask, logits, values = _padded(T, device)
        adv = torch.ones_like(lp)
        pg, _ = P.ppo_clip_loss(lp, lp - 0.1, adv, mask, agg="seq-mean-token-sum-norm", norm_constant=C)
        pg_T, _ = P.ppo_clip_loss(lp, lp - 0.1, adv, mask, agg="seq-mean-token-sum-norm", norm_constant=T)
        vl = P.value_loss(values, values, torch.ones_like(values), mask, agg="seq-mean-token-sum-norm", norm_constant=C)
        ent = P.entropy_from_logits(logits, mask, agg="seq-mean-token-sum-norm", norm_constant=C)
        ts, _ = P.ppo_clip_loss(lp, lp - 0.1, adv, mask, agg="token-sum")
        out[T] = {"policy": float(pg), "policy_padded_width_as_C": float(pg_T), "value": float(vl),
                  "entropy": float(ent), "policy_token_sum": float(ts)}
    r = math.exp(0.1)
    want_pg = -3 * min(r, 1.2) / C
    want_vl = 0.5 * sum((x - 1) ** 2 for x in (0.1, 0.4, 0.9)) / C
    lg = _padded(8, "cpu")[2][0, :3]
    want_ent = sum(_entropy_oracle(lg[t].tolist()) for t in range(3)) / C
    for T in (8, 16):
        assert math.isclose(out[T]["policy"], want_pg, rel_tol=1e-12)
        assert math.isclose(out[T]["value"], want_vl, rel_tol=1e-12)
        assert math.isclose(out[T]["entropy"], want_ent, rel_tol=1e-12)
        assert math.isclose(out[T]["policy_token_sum"], -3 * r, rel_tol=1e-12)
    assert math.isclose(out[16]["policy_padded_width_as_C"], out[8]["policy_padded_width_as_C"] / 2, rel_tol=1e-12)
    evidence.quote("loss at T=8, padded width as C", quoted=-0.4144, measured=out[8]["policy_padded_width_as_C"], digits=4)
    evidence.quote("loss at T=16, padded width as C", quoted=-0.2072, measured=out[16]["policy_padded_width_as_C"], digits=4)
    evidence["losses_by_width"] = out


@pytest.mark.claim("ppo.stats.clip-frac-approx-kl")
def test_logged_stats_clip_frac_and_approx_kl(evidence):
    """The stats a trainer logs and early-stops on: clip_frac is sign-aware (the fraction of tokens whose
    gradient the clip removes), approx_kl is the k3 estimate of KL(pi_old || pi): by exact token frequencies
    from pi_old, its mean equals the exact KL; a k1 mean would not be non-negative per token."""
    # (1) clip_frac against a plain-Python count, mixed signs: r outside the band but on the unclipped side is NOT clipped
    g = torch.Generator().manual_seed(12)
    lr = torch.randn(4, 50, generator=g, dtype=torch.float64) * 0.4
    adv = torch.randn(4, 50, generator=g, dtype=torch.float64)
    mask = (torch.rand(4, 50, generator=g) < 0.8).double()
    for lo, hi in ((0.2, 0.2), (0.2, 0.28)):
        _, st_ = P.ppo_clip_loss(lr, torch.zeros_like(lr), adv, mask, clip_low=lo, clip_high=hi)
        n = clipped = outside = 0
        for r_, a_, m_ in zip(lr.exp().flatten().tolist(), adv.flatten().tolist(), mask.flatten().tolist()):
            if not m_:
                continue
            n += 1
            clipped += (a_ > 0 and r_ > 1 + hi) or (a_ < 0 and r_ < 1 - lo)
            outside += r_ > 1 + hi or r_ < 1 - lo
        assert math.isclose(st_["clip_frac"], clipped / n, rel_tol=1e-12), (st_["clip_frac"], clipped / n)
        assert outside / n > clipped / n + 0.05  # a sign-blind count would be visibly larger
    evidence["clip_frac"] = {"sign_aware": clipped / n, "sign_blind_would_be": outside / n}
    # (2) approx_kl: tokens drawn from pi_old with exact frequencies (probabilities are multiples of 1/40)
    counts = [14, 10, 8, 5, 3]  # out of 40
    p_old = [c / 40 for c in counts]
    p_new = [0.25, 0.30, 0.20, 0.15, 0.10]
    tokens = [a for a, c in enumerate(counts) for _ in range(c)]
    lp_old = torch.tensor([[math.log(p_old[a]) for a in tokens]], dtype=torch.float64)
    lp_new = torch.tensor([[math.log(p_new[a]) for a in tokens]], dtype=torch.float64)
    _, st_ = P.ppo_clip_loss(lp_new, lp_old, torch.ones_like(lp_new), torch.ones_like(lp_new))
    exact = sum(po * math.log(po / pn) for po, pn in zip(p_old, p_new))  # KL(pi_old || pi)
    k1_mean = sum(po * math.log(pn / po) for po, pn in zip(p_old, p_new)) * -1  # also KL in expectation...
    per_token_k1 = [math.log(p_old[a] / p_new[a]) for a in tokens]
    assert math.isclose(st_["approx_kl"], exact, rel_tol=1e-12), (st_["approx_kl"], exact)
    assert min(per_token_k1) < 0  # ... but k1 is negative on some tokens; k3 never is
    # and on a batch that is not an exact sample, approx_kl is the mean of (r - 1) - log r, not of -log r
    _, st2 = P.ppo_clip_loss(lr, torch.zeros_like(lr), adv, mask)
    vals = [(math.exp(x) - 1) - x for x, m_ in zip(lr.flatten().tolist(), mask.flatten().tolist()) if m_]
    k1 = [-x for x, m_ in zip(lr.flatten().tolist(), mask.flatten().tolist()) if m_]
    assert math.isclose(st2["approx_kl"], sum(vals) / len(vals), rel_tol=1e-9)
    assert abs(sum(k1) / len(k1) - st2["approx_kl"]) > 1e-3
    evidence["approx_kl_exact_sample"] = {"approx_kl": st_["approx_kl"], "KL(pi_old||pi)": exact, "k1_mean": k1_mean}


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
