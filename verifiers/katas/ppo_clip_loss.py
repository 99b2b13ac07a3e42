"""Kata properties for ``ppo_clip_loss(logp, logp_old, advantages, mask, clip_low=0.2,
clip_high=None, dual_clip=None, agg="token-mean") -> (loss, stats)`` (a bare loss is accepted too).

Oracle, in plain Python floats: r_t = exp(logp_t - logp_old_t),
loss = -sum_t m_t * min(r_t A_t, clip(r_t, 1-eps_low, 1+eps_high) A_t) / sum_t m_t, and its
hand-derived gradient d loss / d logp_t = -(m_t / sum m) * r_t * A_t where the unclipped branch
is active, 0 where the clipped one is (A>0, r>1+eps_high or A<0, r<1-eps_low).
Dual clip (``dual_clip=c``, c > 1) acts on negative advantages only: the objective becomes
max(min(r A, clip(r) A), c A) where A < 0 (so the loss is capped at -c A and the gradient is 0 once
r > c); where A > 0 nothing changes.
"""

from __future__ import annotations

import math

import torch
from hypothesis import assume, given
from hypothesis import strategies as st

from verifiers.katas.budgets import realistic

_lp = st.floats(min_value=-3.0, max_value=-0.05, allow_nan=False)
_shift = st.floats(min_value=-0.6, max_value=0.6, allow_nan=False)
_adv = st.floats(min_value=-3, max_value=3, allow_nan=False, allow_subnormal=False)
_eps = st.sampled_from([0.1, 0.2, 0.28, 0.3])


@st.composite
def ppo_batch(draw, b_max: int = 3, t_max: int = 5):
    B, T = draw(st.integers(1, b_max)), draw(st.integers(1, t_max))
    lengths = draw(st.lists(st.integers(0, T), min_size=B, max_size=B))
    assume(sum(lengths) > 0)
    old = draw(st.lists(st.lists(_lp, min_size=T, max_size=T), min_size=B, max_size=B))
    shift = draw(st.lists(st.lists(_shift, min_size=T, max_size=T), min_size=B, max_size=B))
    adv = draw(st.lists(st.lists(_adv, min_size=T, max_size=T), min_size=B, max_size=B))
    new = [[o + s for o, s in zip(ro, rs)] for ro, rs in zip(old, shift)]
    return new, old, adv, lengths


def _loss_of(out):
    return out[0] if isinstance(out, tuple) else out


def _mask(lengths, T):
    m = torch.zeros(len(lengths), T, dtype=torch.float64)
    for i, n in enumerate(lengths):
        m[i, :n] = 1
    return m


def oracle(new, old, adv, lengths, eps_low, eps_high):
    """(loss, d loss / d logp as nested lists, whether any ratio sits within 1e-6 of a clip edge)."""
    n = sum(lengths)
    total, grads, edge = 0.0, [], False
    for i, L in enumerate(lengths):
        row = []
        for t in range(len(new[i])):
            if t >= L:
                row.append(0.0)
                continue
            r, a = math.exp(new[i][t] - old[i][t]), adv[i][t]
            c = min(max(r, 1 - eps_low), 1 + eps_high)
            total += min(r * a, c * a)
            edge |= abs(r - (1 - eps_low)) < 1e-6 or abs(r - (1 + eps_high)) < 1e-6
            clipped_active = (a > 0 and r > 1 + eps_high) or (a < 0 and r < 1 - eps_low)
            row.append(0.0 if clipped_active else -r * a / n)
        grads.append(row)
    return -total / n, grads, edge


def oracle_dual(new, old, adv, lengths, eps, c):
    """Dual-clip version of :func:`oracle` (symmetric eps): (loss, gradient, near any edge)."""
    n = sum(lengths)
    total, grads, edge = 0.0, [], False
    for i, L in enumerate(lengths):
        row = []
        for t in range(len(new[i])):
            if t >= L:
                row.append(0.0)
                continue
            r, a = math.exp(new[i][t] - old[i][t]), adv[i][t]
            obj = min(r * a, min(max(r, 1 - eps), 1 + eps) * a)
            dual = a < 0 and obj < c * a
            if dual:
                obj = c * a
            total += obj
            edge |= min(abs(r - (1 - eps)), abs(r - (1 + eps)), abs(r - c)) < 1e-6
            clipped = (a > 0 and r > 1 + eps) or (a < 0 and r < 1 - eps)
            row.append(0.0 if (clipped or dual) else -r * a / n)
        grads.append(row)
    return -total / n, grads, edge


def _fmt(new, old, adv, lengths, eps_low, eps_high):
    return dict(logp=new, logp_old=old, advantages=adv, lengths=lengths, clip_low=eps_low, clip_high=eps_high)


def prop_matches_formula(impl) -> None:
    """The loss equals -mean over response tokens of min(rA, clip(r)A)."""

    @given(ppo_batch(), _eps, _eps)
    def check(batch, eps_low, eps_high):
        new, old, adv, lengths = batch
        T = len(new[0])
        got = _loss_of(impl(torch.tensor(new, dtype=torch.float64), torch.tensor(old, dtype=torch.float64),
                            torch.tensor(adv, dtype=torch.float64), _mask(lengths, T),
                            clip_low=eps_low, clip_high=eps_high))
        want, _, _ = oracle(new, old, adv, lengths, eps_low, eps_high)
        if not math.isclose(float(got), want, rel_tol=1e-6, abs_tol=1e-9):
            raise AssertionError(f"loss wrong\n  inputs: {_fmt(*batch, eps_low, eps_high)}\n"
                                 f"  expected: {want}\n  got: {float(got)}")

    check()


def prop_gradient_matches_hand_derived(impl) -> None:
    """Autograd of the loss w.r.t. logp equals -(m/n) r A on unclipped tokens and 0 on clipped ones."""

    @given(ppo_batch(), _eps)
    def check(batch, eps):
        new, old, adv, lengths = batch
        want_loss, want_grad, edge = oracle(new, old, adv, lengths, eps, eps)
        assume(not edge)
        T = len(new[0])
        logp = torch.tensor(new, dtype=torch.float64, requires_grad=True)
        loss = _loss_of(impl(logp, torch.tensor(old, dtype=torch.float64), torch.tensor(adv, dtype=torch.float64),
                             _mask(lengths, T), clip_low=eps))
        (g,) = torch.autograd.grad(loss, logp)
        if not torch.allclose(g, torch.tensor(want_grad, dtype=torch.float64), atol=1e-9, rtol=1e-6):
            raise AssertionError(f"gradient wrong\n  inputs: {_fmt(*batch, eps, eps)}\n"
                                 f"  expected d loss/d logp: {want_grad}\n  got: {g.tolist()}")

    check()


def prop_mask_respected(impl) -> None:
    """Garbage in padded positions (huge log-ratios, huge advantages) changes neither loss nor gradient."""

    @given(ppo_batch(), _eps)
    def check(batch, eps):
        new, old, adv, lengths = batch
        T = len(new[0])
        m = _mask(lengths, T)
        junk = torch.where(m > 0, 0.0, 50.0)

        def run(j):
            logp = torch.tensor(new, dtype=torch.float64, requires_grad=True)
            loss = _loss_of(impl(logp + j, torch.tensor(old, dtype=torch.float64) - j,
                                 torch.tensor(adv, dtype=torch.float64) + 1e3 * j, m, clip_low=eps))
            (g,) = torch.autograd.grad(loss, logp)
            return float(loss.detach()), g

        l0, g0 = run(torch.zeros_like(m))
        l1, g1 = run(junk)
        ok = math.isfinite(l1) and math.isclose(l0, l1, rel_tol=1e-9, abs_tol=1e-12) and torch.allclose(g0, g1, atol=1e-12)
        if not ok:
            raise AssertionError(f"padding leaked\n  inputs: {_fmt(*batch, eps, eps)}\n"
                                 f"  expected loss: {l0}\n  got (garbage in padding): {l1}")

    check()


_wide_shift = st.floats(min_value=-1.6, max_value=1.6, allow_nan=False)


@st.composite
def ppo_batch_wide(draw, b_max: int = 3, t_max: int = 5):
    """Like ``ppo_batch`` but with ratios up to e^1.6 ~ 5, so that a dual clip at c = 2 or 3 can bind."""
    B, T = draw(st.integers(1, b_max)), draw(st.integers(1, t_max))
    lengths = draw(st.lists(st.integers(0, T), min_size=B, max_size=B))
    assume(sum(lengths) > 0)
    old = draw(st.lists(st.lists(_lp, min_size=T, max_size=T), min_size=B, max_size=B))
    shift = draw(st.lists(st.lists(_wide_shift, min_size=T, max_size=T), min_size=B, max_size=B))
    adv = draw(st.lists(st.lists(_adv, min_size=T, max_size=T), min_size=B, max_size=B))
    new = [[o + s for o, s in zip(ro, rs)] for ro, rs in zip(old, shift)]
    return new, old, adv, lengths


def prop_dual_clip(impl) -> None:
    """With ``dual_clip=c`` the loss is capped at -c A on negative-advantage tokens (gradient 0 once r > c);
    positive-advantage tokens keep the ordinary clipped loss and gradient."""

    @given(ppo_batch_wide(), _eps, st.sampled_from([2.0, 3.0]))
    def check(batch, eps, c):
        new, old, adv, lengths = batch
        want_loss, want_grad, edge = oracle_dual(new, old, adv, lengths, eps, c)
        assume(not edge)
        T = len(new[0])
        logp = torch.tensor(new, dtype=torch.float64, requires_grad=True)
        loss = _loss_of(impl(logp, torch.tensor(old, dtype=torch.float64), torch.tensor(adv, dtype=torch.float64),
                             _mask(lengths, T), clip_low=eps, dual_clip=c))
        (g,) = torch.autograd.grad(loss, logp)
        inputs = dict(_fmt(*batch, eps, eps), dual_clip=c)
        if not math.isclose(float(loss), want_loss, rel_tol=1e-6, abs_tol=1e-9):
            raise AssertionError(f"dual-clip loss wrong\n  inputs: {inputs}\n  expected: {want_loss}\n  got: {float(loss)}")
        if not torch.allclose(g, torch.tensor(want_grad, dtype=torch.float64), atol=1e-9, rtol=1e-6):
            raise AssertionError(f"dual-clip gradient wrong\n  inputs: {inputs}\n"
                                 f"  expected d loss/d logp: {want_grad}\n  got: {g.tolist()}")

    check()


def prop_fp32_rollouts_with_rare_tokens(impl) -> None:
    """fp32 log-probs of rollout length (T up to 1024) where a share of the sampled tokens are rare
    (log-prob -90 to -120, as tokens sampled at high temperature are under the trained policy): the loss and
    its gradient match the fp64 formula. The ratio must come from the log difference: exp(logp)/exp(logp_old)
    underflows to 0/0 in fp32 below about -88."""

    @realistic(20)
    @given(st.integers(1, 4), st.integers(64, 1024), _eps, st.integers(0, 2**31 - 1))
    def check(B, T, eps, seed):
        gen = torch.Generator().manual_seed(seed)
        old = -torch.rand(B, T, generator=gen) * 3 - 0.01
        rare = torch.rand(B, T, generator=gen) < 0.2
        old = torch.where(rare, -90 - torch.rand(B, T, generator=gen) * 30, old)
        new = old + (torch.randn(B, T, generator=gen) * 0.3).clamp(-1.5, 1.5)
        adv = torch.randn(B, 1, generator=gen).expand(B, T).contiguous()  # one advantage per sequence
        lengths = torch.randint(1, T + 1, (B,), generator=gen).tolist()
        mask = _mask(lengths, T).float()
        n = sum(lengths)
        r = torch.exp(new.double() - old.double())
        a = adv.double()
        edge = bool((((r - (1 - eps)).abs() < 1e-5) | ((r - (1 + eps)).abs() < 1e-5))[mask > 0].any())
        assume(not edge)
        clipped = (a > 0) & (r > 1 + eps) | (a < 0) & (r < 1 - eps)
        m = mask.double()
        want_loss = float(-(torch.minimum(r * a, r.clamp(1 - eps, 1 + eps) * a) * m).sum() / n)
        want_grad = torch.where(clipped, 0.0, -r * a / n) * m
        logp = new.clone().requires_grad_(True)
        loss = _loss_of(impl(logp, old, adv, mask, clip_low=eps))
        (g,) = torch.autograd.grad(loss, logp)
        where = (f"B={B}, T={T}, lengths={lengths}, clip={eps}, fp32, {int(rare.sum())} rare tokens "
                 f"(log-prob -90..-120), seed={seed}")
        got = float(loss.detach())
        if not (math.isfinite(got) and math.isclose(got, want_loss, rel_tol=1e-4, abs_tol=1e-6)):
            raise AssertionError(f"loss wrong\n  inputs: {where}\n  expected: {want_loss}\n  got: {got}")
        err = float((g.double() - want_grad).abs().max())
        scale = float(want_grad.abs().max()) or 1.0
        if not err <= 1e-3 * scale + 1e-9:
            raise AssertionError(f"gradient wrong\n  inputs: {where}\n  largest error {err:.3g} "
                                 f"(largest expected |d loss/d logp| {scale:.3g})")

    check()


ALL = [prop_matches_formula, prop_gradient_matches_hand_derived, prop_mask_respected, prop_dual_clip,
       prop_fp32_rollouts_with_rare_tokens]

ZH = {
    "doc": r"""`ppo_clip_loss(logp, logp_old, advantages, mask, clip_low=0.2, clip_high=None, dual_clip=None,
agg="token-mean") -> (loss, stats)` 的性质（只返回 loss 也可以）。

对照答案（普通 Python 浮点数）：r_t = exp(logp_t - logp_old_t)，
loss = -sum_t m_t * min(r_t A_t, clip(r_t, 1-eps_low, 1+eps_high) A_t) / sum_t m_t，以及手推的梯度
d loss / d logp_t = -(m_t / sum m) * r_t * A_t（未裁剪分支生效时），裁剪分支生效时为 0
（A>0 且 r>1+eps_high，或 A<0 且 r<1-eps_low）。
Dual clip（`dual_clip=c`，c > 1）只作用于负优势：A < 0 处目标变为 max(min(r A, clip(r) A), c A)
（loss 上限为 -c A，r > c 后梯度为 0）；A > 0 处不变。""",
    "prop_matches_formula": "loss 等于回答 token 上 min(rA, clip(r)A) 的均值取负。",
    "prop_gradient_matches_hand_derived": "loss 对 logp 的自动求导梯度：未裁剪的 token 上为 -(m/n) r A，被裁剪的 token 上为 0。",
    "prop_mask_respected": "padding 位置里的垃圾值（极大的对数比、极大的优势）既不改变 loss，也不改变梯度。",
    "prop_dual_clip": "设 `dual_clip=c` 时，负优势 token 的 loss 上限为 -c A（r > c 后梯度为 0）；正优势 token 保持普通的裁剪 loss 和梯度。",
    "prop_fp32_rollouts_with_rare_tokens": "rollout 长度（T 最多 1024）的 fp32 对数概率，其中一部分采样到的 token 很罕见（对数概率 -90 到 -120，就像高温采样的 token 在被训练策略下那样）：loss 和梯度与 fp64 公式一致。比值必须由对数差得到：fp32 下 exp(logp)/exp(logp_old) 在约 -88 以下会下溢成 0/0。",
    "ppo_clip_loss": r"""PPO 裁剪策略损失 -agg_t w_t min(r_t A_t, clip(r_t) A_t)，r_t = exp(log pi - log pi_old)。

`logp_old` 和 `advantages` 视为常数（detach）。比值用 fp32 计算（fp64 保持 fp64）。`agg`/`norm_constant`：
见 `impls/rl/aggregation.py`。`is_weights`（可选 `[B, T]`，detach）：rollout 与训练不一致的校正权重 w_t。
返回 `(loss, stats)`；stats（Python 浮点数，按 mask 求均值）：`clip_frac`（裁剪分支生效、梯度被去掉的 token 比例）、
`approx_kl`（旧样本上 KL(pi_old || pi) 的 k3 估计 (r-1)-log r）、`ratio_mean`/`ratio_min`/`ratio_max`、`dual_clip_frac`。""",
}
