"""RL figures: PPO's clipped objective, GAE's lambda trade-off, KL estimators, GRPO-family switches.

Every curve is computed by calling ``impls/rl`` (autograd for gradients, exact enumeration
for expectations), never typed in.
"""

from __future__ import annotations

import torch
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from figures import L
from impls.rl.aggregation import aggregate
from impls.rl.gae import gae
from impls.rl.grpo import grpo_advantages, rloo_advantages
from impls.rl.kl import kl_estimate
from impls.rl.ppo import ppo_clip_objective_per_token
from impls.rl.toy_envs import TabularMDP

EPS = 0.2


def ppo_clip_objective(lang: str) -> Figure:
    """min(rA, clip(r)A) and its derivative in r, for A = +1 and A = -1 (epsilon 0.2)."""
    r = torch.linspace(0.4, 1.8, 561, dtype=torch.float64, requires_grad=True)
    fig = Figure(figsize=(5.0, 5.4), layout="constrained")
    ax_obj, ax_grad = fig.subplots(2, 1, sharex=True)
    for adv, colour in ((1.0, "C0"), (-1.0, "C1")):
        a = torch.full_like(r, adv)
        objective = -ppo_clip_objective_per_token(r, a, EPS)  # the function returns the loss -L^CLIP
        (grad,) = torch.autograd.grad(objective.sum(), r)
        ax_obj.plot(r.detach(), objective.detach(), color=colour, label=f"A = {adv:+.0f}")
        ax_obj.plot(r.detach(), (r * a).detach(), color=colour, ls=":", lw=1.2)
        ax_grad.plot(r.detach(), grad, color=colour)
    for ax in (ax_obj, ax_grad):
        ax.axvspan(1 - EPS, 1 + EPS, color="0.5", alpha=0.12, lw=0)
    ax_grad.set_xlabel(L(lang, "比值 r = π/π_old", "ratio r = π/π_old"))
    ax_obj.set_title(L(lang, "目标 min(rA, clip(r)A)（ε = 0.2）", "objective min(rA, clip(r)A) (ε = 0.2)"))
    ax_grad.set_title(L(lang, "对 r 的梯度：出带后只有一侧为 0", "gradient in r: zero on one side only"))
    ax_grad.set_ylim(-1.4, 1.4)
    # one legend for both panels, below them: nothing of a curve is covered
    handles = ax_obj.get_legend_handles_labels()[0] + [Line2D([], [], color="0.3", ls=":", lw=1.2)]
    labels = ["A = +1", "A = −1", L(lang, "不裁剪的 rA", "unclipped rA")]
    fig.legend(handles, labels, loc="outside lower center", ncols=3)
    return fig


def _score(mdp: TabularMDP, logits: torch.Tensor, states: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
    """∇θ log π(a_t|s_t) for every trajectory and step, [N, H, S, A]: the Jacobian of the policy's log-probs."""
    return torch.func.jacfwd(lambda th: mdp.policy_logp(th, states, actions))(logits.detach())


def gae_lambda_bias_variance(lang: str) -> Figure:
    """Exact bias and variance of the GAE policy-gradient estimate as lambda goes from 0 to 1.

    A 2-state, 2-action MDP with horizon 4 (every trajectory enumerated): with the exact critic
    the estimate is unbiased for every lambda; with a critic that is off (the exact V plus a fixed
    error) the bias shrinks to 0 as lambda -> 1 while the variance grows.
    """
    mdp = TabularMDP.random(S=2, A=2, horizon=4, gamma=1.0, seed=3)
    g = torch.Generator().manual_seed(4)
    logits = 0.5 * torch.randn(2, 2, generator=g, dtype=torch.float64)
    error = torch.randn(4, 2, generator=g, dtype=torch.float64)
    tr = mdp.trajectories()
    V = mdp.dp(logits)["V"][:4]  # V_t(s), t = 0..H-1
    true = mdp.exact_grad(logits).reshape(-1)
    score = _score(mdp, logits, tr.states, tr.actions)
    mask = torch.ones_like(tr.rewards)
    t_idx = torch.arange(4)[None].expand_as(tr.states)
    prob = mdp.traj_probs(logits, tr)  # p(τ) of every trajectory
    lams = torch.linspace(0, 1, 21, dtype=torch.float64)
    out = {"exact": ([], []), "wrong": ([], [])}
    for lam in lams.tolist():
        for name, values in (("exact", V[t_idx, tr.states]), ("wrong", (V + error)[t_idx, tr.states])):
            adv, _ = gae(tr.rewards, values, mask, 1.0, lam)
            per_traj = torch.einsum("nt,ntsa->nsa", adv, score).reshape(len(prob), -1)
            mean = prob @ per_traj  # exact expectations over every trajectory
            var = prob @ (per_traj**2).sum(-1) - (mean**2).sum()
            out[name][0].append(float((mean - true).norm()))
            out[name][1].append(float(var))
    fig = Figure(figsize=(5.0, 4.6), layout="constrained")
    ax_b, ax_v = fig.subplots(2, 1, sharex=True)
    for name, colour, label in (("exact", "C0", L(lang, "准确的价值函数", "exact critic")),
                                ("wrong", "C1", L(lang, "有误差的价值函数", "critic with an error"))):
        ax_b.plot(lams, out[name][0], color=colour, label=label)
        ax_v.plot(lams, out[name][1], color=colour, label=label)
    ax_b.set_title(L(lang, "偏差 ‖E[ĝ] − ∇J‖", "bias ‖E[ĝ] − ∇J‖"))
    ax_v.set_title(L(lang, "方差 E‖ĝ − E[ĝ]‖²", "variance E‖ĝ − E[ĝ]‖²"))
    ax_v.set_xlabel("λ")
    ax_b.legend(loc="upper right")
    return fig


def kl_estimators(lang: str) -> Figure:
    """Bias and standard deviation of k1, k2, k3 (one sample a ~ π) against the true KL(π‖π_ref).

    π_ref is a fixed 16-way categorical; π moves away from it along a fixed logit direction.
    Means and variances are exact sums over the 16 actions, not samples.
    """
    g = torch.Generator().manual_seed(0)
    logits_ref = torch.randn(16, generator=g, dtype=torch.float64)
    direction = torch.randn(16, generator=g, dtype=torch.float64)
    logp_ref = torch.log_softmax(logits_ref, -1)
    kls, stats = [], {k: ([], []) for k in ("k1", "k2", "k3")}
    for s in torch.linspace(0, 1.6, 49, dtype=torch.float64).tolist():
        logp = torch.log_softmax(logits_ref + s * direction, -1)
        p = logp.exp()
        kl = float((p * (logp - logp_ref)).sum())
        kls.append(kl)
        for kind in stats:
            k = kl_estimate(logp, logp_ref, kind)  # the estimate for each possible sampled action
            mean = float((p * k).sum())
            stats[kind][0].append(mean - kl)
            stats[kind][1].append(float((p * (k - mean) ** 2).sum()) ** 0.5)
    fig = Figure(figsize=(5.0, 4.6), layout="constrained")
    ax_b, ax_s = fig.subplots(2, 1, sharex=True)
    for kind, colour in (("k1", "C0"), ("k2", "C1"), ("k3", "C2")):
        ax_b.plot(kls, stats[kind][0], color=colour, label=kind)
        ax_s.plot(kls, stats[kind][1], color=colour, label=kind)
    ax_b.set_title(L(lang, "偏差 E[k] − KL", "bias E[k] − KL"))
    ax_s.set_title(L(lang, "单样本标准差", "standard deviation, one sample"))
    ax_s.set_xlabel(L(lang, "真实 KL(π‖π_ref)", "true KL(π‖π_ref)"))
    ax_b.legend(loc="upper left")
    return fig


def grpo_family_advantages(lang: str) -> Figure:
    """One group of six answers under each switch: the advantage, then the push each token gets.

    Left: A_i for GRPO (std-scaled), Dr. GRPO (no std) and RLOO. Right: the gradient a policy
    loss -A_i·r puts on one token of answer i, for each aggregation (d loss / d r, by autograd).
    """
    scores = torch.tensor([1.0, 1.0, 0.0, 0.0, 0.0, 1.0])
    lengths = torch.tensor([40, 400, 60, 300, 120, 150])
    G = scores.numel()
    advs = {
        L(lang, "GRPO（除以标准差）", "GRPO (÷ std)"): grpo_advantages(scores, G),
        L(lang, "Dr. GRPO（不除标准差）", "Dr. GRPO (no std)"): grpo_advantages(scores, G, scale_by_std=False),
        "RLOO": rloo_advantages(scores, G),
    }
    T = int(lengths.max())
    mask = (torch.arange(T)[None] < lengths[:, None]).float()
    a_grpo = grpo_advantages(scores, G)
    pushes = {}
    for agg, name in (("seq-mean-token-mean", L(lang, "GRPO：先序列内平均", "GRPO: mean per sequence")),
                      ("token-mean", L(lang, "DAPO：全部 token 平均", "DAPO: mean over all tokens")),
                      ("seq-mean-token-sum-norm", L(lang, "Dr. GRPO：除以常数", "Dr. GRPO: ÷ a constant"))):
        r = torch.ones(G, T, requires_grad=True)
        loss = aggregate(-a_grpo[:, None] * r, mask, agg, norm_constant=float(T))  # Dr. GRPO: ÷ the max length
        (grad,) = torch.autograd.grad(loss, r)
        pushes[name] = -grad[:, 0] * 1000  # per token, scaled for reading
    fig = Figure(figsize=(5.0, 6.0), layout="constrained")
    ax_a, ax_p = fig.subplots(2, 1, sharex=True)
    x = torch.arange(G).float()
    w = 0.27
    for i, (name, a) in enumerate(advs.items()):
        ax_a.bar(x + (i - 1) * w, a, w, label=name, color=f"C{i}")
    for i, (name, pz) in enumerate(pushes.items()):
        ax_p.bar(x + (i - 1) * w, pz, w, label=name, color=f"C{i + 3}")
    ticks = [f"{int(s)}\n{int(n)}" for s, n in zip(scores, lengths)]
    for ax in (ax_a, ax_p):
        ax.axhline(0, color="0.3", lw=0.8)
    ax_a.set_ylim(-1.1, 1.6)  # room above the bars for the legend
    ax_a.legend(loc="upper center", ncols=3, handlelength=1.2, columnspacing=1.0)
    ax_p.legend(loc="upper right")  # the short answers' bars are on the left
    ax_p.set_xticks(x, ticks)
    ax_p.set_xlabel(L(lang, "奖励 / 长度（token）", "reward / length (tokens)"))
    ax_a.set_title(L(lang, "优势 A_i", "advantage A_i"))
    ax_p.set_title(L(lang, "每个 token 的梯度 ×1000（GRPO 优势）", "gradient per token ×1000 (GRPO advantage)"))
    return fig
