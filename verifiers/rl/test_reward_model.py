"""Verifiers for the reward-model claims of `handwrite-ppo-rlhf` and `ppo-objective`."""

import pytest
import sympy as sp
import torch
from hypothesis import given, strategies as st

from impls.rl.gae import gae
from impls.rl.reward import bradley_terry_loss, kl_shaped_rewards


@pytest.mark.claim("rlhf.rm.bradley-terry-loss")
def test_bt_loss_matches_sympy(evidence, device):
    """Oracle: sympy. P(w > l) under Bradley-Terry with strengths e^r is sigma(r_w - r_l), and the
    gradient of -log sigma(r_w - r_l) w.r.t. r_w is sigma(r_w - r_l) - 1 (and the opposite for r_l)."""
    rw, rl = sp.symbols("r_w r_l", real=True)
    p_bt = sp.exp(rw) / (sp.exp(rw) + sp.exp(rl))
    sigma = 1 / (1 + sp.exp(-(rw - rl)))
    assert sp.simplify(p_bt - sigma) == 0
    loss = -sp.log(sigma)
    g_w = sp.lambdify((rw, rl), sp.diff(loss, rw))
    g_l = sp.lambdify((rw, rl), sp.diff(loss, rl))
    f = sp.lambdify((rw, rl), loss)
    torch.manual_seed(0)
    a = (3 * torch.randn(64, dtype=torch.float64, device=device)).requires_grad_()
    b = (3 * torch.randn(64, dtype=torch.float64, device=device)).requires_grad_()
    out = bradley_terry_loss(a, b)
    out.backward()
    A, Bv = a.detach().cpu().tolist(), b.detach().cpu().tolist()
    want = sum(f(x, y) for x, y in zip(A, Bv)) / len(A)
    gw = torch.tensor([g_w(x, y) / len(A) for x, y in zip(A, Bv)], dtype=torch.float64)
    gl = torch.tensor([g_l(x, y) / len(A) for x, y in zip(A, Bv)], dtype=torch.float64)
    err_loss = abs(out.item() - want)
    err_grad = max(float((a.grad.cpu() - gw).abs().max()), float((b.grad.cpu() - gl).abs().max()))
    assert err_loss < 1e-12, (err_loss, float(out), want)
    assert err_grad < 1e-12, err_grad
    # Large margins: the naive -log(sigmoid(x)) underflows in fp32; the loss must stay finite.
    big = bradley_terry_loss(torch.tensor([-200.0], device=device), torch.tensor([0.0], device=device))
    naive = -torch.log(torch.sigmoid(torch.tensor(-200.0)))
    assert torch.isfinite(big) and abs(float(big) - 200.0) < 1e-3, float(big)
    evidence.update(max_abs_loss_error=err_loss, max_abs_grad_error=err_grad,
                    loss_at_margin_minus_200=float(big), naive_fp32_loss_at_margin_minus_200=float(naive))


@pytest.mark.claim("rlhf.rm.not-regression")
@given(
    r=st.lists(st.floats(-5, 5), min_size=2, max_size=8),
    c=st.floats(-50, 50),
)
def test_bt_loss_only_sees_differences(r, c):
    """The BT loss and its gradient are unchanged by adding any constant c to every reward:
    a pairwise-ranking model has no absolute target, unlike a regression onto labels."""
    x = torch.tensor(r, dtype=torch.float64, requires_grad=True)
    xs = (torch.tensor(r, dtype=torch.float64) + c).requires_grad_()
    w, l_ = x[:-1], x[1:]
    ws, ls = xs[:-1], xs[1:]
    la, lb = bradley_terry_loss(w, l_), bradley_terry_loss(ws, ls)
    la.backward()
    lb.backward()
    assert abs(float(la) - float(lb)) < 1e-9, (r, c, float(la), float(lb))
    assert torch.allclose(x.grad, xs.grad, atol=1e-12), (r, c, x.grad, xs.grad)
    # The gradient sums to zero over the rewards: the pairwise loss cannot move their mean.
    assert abs(float(x.grad.sum())) < 1e-12, (r, x.grad)


@pytest.mark.claim("rlhf.rm.not-regression")
def test_regression_would_not_be_shift_invariant(evidence):
    """Contrast: a regression (MSE to labels) changes when every prediction shifts; BT does not."""
    r = torch.tensor([1.0, 0.2, -0.5, 2.0], dtype=torch.float64)
    labels = torch.tensor([1.0, 0.0, -1.0, 2.0], dtype=torch.float64)
    c = 3.0
    mse = lambda p: float(((p - labels) ** 2).mean())  # noqa: E731
    bt = lambda p: float(bradley_terry_loss(p[:-1], p[1:]))  # noqa: E731
    assert abs(mse(r) - mse(r + c)) > 1.0
    assert abs(bt(r) - bt(r + c)) < 1e-12
    evidence.update(shift=c, bt_loss=bt(r), bt_loss_shifted=bt(r + c), mse=mse(r), mse_shifted=mse(r + c))


def _loop_oracle(score, logp, logp_ref, mask, beta):
    """Per-token rewards built by a plain Python loop over lists (independent of the vectorised code)."""
    B, T = len(logp), len(logp[0])
    out = [[0.0] * T for _ in range(B)]
    for b in range(B):
        last = None
        for t in range(T):
            if mask[b][t]:
                out[b][t] = -beta * (logp[b][t] - logp_ref[b][t])
                last = t
        if last is not None:
            out[b][last] += score[b]
    return out


@pytest.mark.claim("rlhf.reward.per-token-source")
@given(
    lengths=st.lists(st.integers(0, 7), min_size=1, max_size=5),
    beta=st.floats(0.0, 0.5),
    seed=st.integers(0, 2**16),
)
def test_kl_shaped_rewards_layout(lengths, beta, seed):
    """The RM score lands only on the last response token; every response token carries -beta*KL_t;
    the rewards of a sequence sum to score - beta*log(pi(y)/pi_ref(y)) (the telescoped sequence KL)."""
    g = torch.Generator().manual_seed(seed)
    B, T = len(lengths), 7
    mask = (torch.arange(T)[None, :] < torch.tensor(lengths)[:, None]).float()
    logp = -torch.rand(B, T, generator=g, dtype=torch.float64) * 3
    logp_ref = -torch.rand(B, T, generator=g, dtype=torch.float64) * 3
    score = torch.randn(B, generator=g, dtype=torch.float64)
    rewards = kl_shaped_rewards(score, logp, logp_ref, mask, beta)
    want = torch.tensor(_loop_oracle(score.tolist(), logp.tolist(), logp_ref.tolist(), mask.tolist(), beta), dtype=torch.float64)
    assert torch.allclose(rewards.double(), want, atol=1e-5), (lengths, beta, rewards, want)
    for b, n in enumerate(lengths):
        if n == 0:
            continue
        seq_log_ratio = float(logp[b, :n].sum() - logp_ref[b, :n].sum())
        total = float(rewards[b].sum())
        assert abs(total - (float(score[b]) - beta * seq_log_ratio)) < 1e-4, (b, total, seq_log_ratio)


@pytest.mark.claim("rlhf.reward.per-token-source")
def test_beta_zero_reward_is_sparse(evidence):
    """With beta = 0 the only non-zero reward in each sequence is the RM score on its last token."""
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], dtype=torch.float32)
    logp = torch.log(torch.full((2, 5), 0.3))
    logp_ref = torch.log(torch.full((2, 5), 0.5))
    score = torch.tensor([2.0, -1.0])
    r0 = kl_shaped_rewards(score, logp, logp_ref, mask, beta=0.0)
    r1 = kl_shaped_rewards(score, logp, logp_ref, mask, beta=0.1)
    assert torch.count_nonzero(r0).item() == 2 and r0[0, 2] == 2.0 and r0[1, 4] == -1.0
    assert torch.count_nonzero(r1 * mask).item() == 8
    evidence.update(rewards_beta0=r0.tolist(), rewards_beta01=[[round(x, 4) for x in row] for row in r1.tolist()])


@pytest.mark.claim("ppo.objective.reward-on-last-token")
def test_copying_score_to_every_token_biases_length(evidence):
    """Counterexample: copy the sequence score to every token (gamma = lambda = 1, V = 0) and the
    advantage of the first token is length x score, so the same score pays a longer answer more.
    With the score on the last token (InstructGPT layout) A_0 = score whatever the length."""
    score = 1.0
    lengths = [2, 6]
    T = max(lengths)
    mask = (torch.arange(T)[None, :] < torch.tensor(lengths)[:, None]).float()
    zeros = torch.zeros(2, T)
    copied = mask * score
    last = kl_shaped_rewards(torch.full((2,), score), zeros, zeros, mask, beta=0.0)
    a_copy, _ = gae(copied, zeros, mask, 1.0, 1.0)
    a_last, _ = gae(last, zeros, mask, 1.0, 1.0)
    evidence["counterexample"] = {
        "score": score, "lengths": lengths,
        "A0_copied_to_every_token": a_copy[:, 0].tolist(),
        "A0_score_on_last_token": a_last[:, 0].tolist(),
    }
    assert a_copy[0, 0] == 2.0 and a_copy[1, 0] == 6.0  # proportional to length
    assert a_last[0, 0] == 1.0 and a_last[1, 0] == 1.0


def _optimum(logp_ref, r, beta):
    """pi_beta ∝ pi_ref exp(r / beta): the exact maximiser of E[r] - beta KL(pi || pi_ref)."""
    return torch.softmax(logp_ref + r / beta, 0)


@pytest.mark.claim("rlhf.rm.overoptimisation")
def test_proxy_overoptimisation_and_normalisation(evidence):
    """A fixed proxy RM fitted on samples from pi_ref is accurate where pi_ref puts mass and noisy
    where it does not (error std ∝ 1/sqrt(expected count)). Along the exact KL-regularised optimum
    pi_beta, lowering beta raises the proxy reward monotonically while the gold reward peaks and then
    falls: over-optimisation needs no drift of the RM itself, only of the policy. Normalising the
    reward (r - mu)/sigma gives exactly the optimum of beta*sigma: it rescales beta and nothing else."""
    g = torch.Generator().manual_seed(0)
    K, n_samples = 200, 2000
    logp_ref = torch.log_softmax(2.0 * torch.randn(K, generator=g, dtype=torch.float64), 0)
    gold = torch.randn(K, generator=g, dtype=torch.float64)
    count = n_samples * logp_ref.exp()
    proxy = gold + torch.randn(K, generator=g, dtype=torch.float64) / torch.sqrt(count + 0.5)
    betas = [10 ** (k / 8) for k in range(8, -25, -1)]  # 10 down to 1e-3
    rows = []
    for beta in betas:
        logp = torch.log_softmax(logp_ref + proxy / beta, 0)
        p = logp.exp()
        kl = float((p * (logp - logp_ref)).sum())
        rows.append({"beta": beta, "kl": kl, "proxy": float((p * proxy).sum()), "gold": float((p * gold).sum())})
    proxies = [x["proxy"] for x in rows]
    golds = [x["gold"] for x in rows]
    assert all(b >= a - 1e-12 for a, b in zip(proxies, proxies[1:])), proxies
    peak = max(range(len(golds)), key=golds.__getitem__)
    assert 0 < peak < len(golds) - 1 and golds[-1] < golds[peak] - 0.3, golds
    # Normalisation is a rescaling of beta.
    mu, sigma = float(proxy.mean()), float(proxy.std())
    p_norm = _optimum(logp_ref, (proxy - mu) / sigma, 0.1)
    p_scaled = _optimum(logp_ref, proxy, 0.1 * sigma)
    gap = float((p_norm - p_scaled).abs().max())
    assert gap < 1e-12, gap
    evidence.update(
        gold_peak={"beta": rows[peak]["beta"], "kl": rows[peak]["kl"], "gold": golds[peak], "proxy": proxies[peak]},
        most_optimised={"beta": rows[-1]["beta"], "kl": rows[-1]["kl"], "gold": golds[-1], "proxy": proxies[-1]},
        normalised_vs_rescaled_beta_max_gap=gap,
    )
