"""Kata properties for ``dpo_loss(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps,
ref_rejected_logps, beta)`` -> mean of -log sigmoid(beta*(log pi_w - log ref_w) - beta*(log pi_l - log ref_l)).

Oracle: the formula in fp64 with math.log1p, and the hand-derived gradient
d loss / d log pi_w = -beta * sigmoid(-margin) / B.
"""

from __future__ import annotations

import math

import torch
from hypothesis import given
from hypothesis import strategies as st

from verifiers.katas.budgets import realistic

_lp = st.floats(min_value=-30, max_value=0, allow_nan=False)


@st.composite
def batches(draw, max_b: int = 5):
    b = draw(st.integers(min_value=1, max_value=max_b))
    cols = [draw(st.lists(_lp, min_size=b, max_size=b)) for _ in range(4)]
    beta = draw(st.sampled_from([0.05, 0.1, 0.5, 1.0]))
    return cols, beta


def _neg_log_sigmoid(z: float) -> float:
    return math.log1p(math.exp(-z)) if z >= 0 else -z + math.log1p(math.exp(z))


def prop_matches_formula(impl) -> None:
    @given(batches())
    def check(data):
        (pw, pl, rw, rl), beta = data
        want = math.fsum(
            _neg_log_sigmoid(beta * (a - c) - beta * (b - d)) for a, b, c, d in zip(pw, pl, rw, rl)
        ) / len(pw)
        got = float(impl(*(torch.tensor(x, dtype=torch.float64) for x in (pw, pl, rw, rl)), beta))
        assert abs(got - want) <= 1e-5 + 1e-5 * abs(want), (
            f"chosen={pw}, rejected={pl}, ref_chosen={rw}, ref_rejected={rl}, beta={beta}: expected {want}, got {got}"
        )

    check()


def prop_gradient(impl) -> None:
    """d loss/d log pi_w = -beta*sigmoid(-m)/B and d loss/d log pi_l = +beta*sigmoid(-m)/B."""

    @given(batches())
    def check(data):
        (pw, pl, rw, rl), beta = data
        tw = torch.tensor(pw, dtype=torch.float64, requires_grad=True)
        tl = torch.tensor(pl, dtype=torch.float64, requires_grad=True)
        impl(tw, tl, torch.tensor(rw, dtype=torch.float64), torch.tensor(rl, dtype=torch.float64), beta).backward()
        n = len(pw)
        for i in range(n):
            m = beta * (pw[i] - rw[i]) - beta * (pl[i] - rl[i])
            w = beta / (1.0 + math.exp(m)) / n  # beta * sigmoid(-m) / B
            gw, gl = float(tw.grad[i]), float(tl.grad[i])
            assert abs(gw + w) <= 1e-6 and abs(gl - w) <= 1e-6, (
                f"pair {i} of chosen={pw}, rejected={pl}, ref_chosen={rw}, ref_rejected={rl}, beta={beta}: "
                f"expected grads ({-w}, {w}), got ({gw}, {gl})"
            )

    check()


def prop_reference_shift_invariance(impl) -> None:
    """Adding the same constant to a response's policy and reference log-prob leaves the loss unchanged."""

    @given(batches(), st.floats(min_value=-5, max_value=5))
    def check(data, c):
        cols, beta = data
        t = [torch.tensor(x, dtype=torch.float64) for x in cols]
        base = float(impl(*t, beta))
        shifted = float(impl(t[0] + c, t[1], t[2] + c, t[3], beta))
        assert abs(base - shifted) <= 1e-6, f"inputs={cols}, beta={beta}, shift={c}: expected {base}, got {shifted}"

    check()


def prop_large_margins_in_fp32(impl) -> None:
    """fp32 sequence log-probs of real responses (sums over hundreds of tokens: the reference's -2000 to -50)
    and margins up to +-1000 (a policy far from its reference): the loss is finite and equals softplus(-margin)
    in fp64, its gradient is the hand-derived one. -log(sigmoid(m)) overflows: sigmoid(-200) is 0 in fp32,
    sigmoid(-1000) in fp64. Tolerances are those of fp32 differences of log-probs of that size."""

    @realistic(20)
    @given(st.integers(1, 64), st.sampled_from([0.1, 0.5, 1.0]), st.integers(0, 2**31 - 1))
    def check(B, beta, seed):
        gen = torch.Generator().manual_seed(seed)
        rw = -50 - torch.rand(B, generator=gen) * 1950
        rl = -50 - torch.rand(B, generator=gen) * 1950
        drift = (torch.rand(B, generator=gen) * 2 - 1) * (1000 / beta)  # margin = beta * drift up to +-1000
        pw = (rw + drift / 2).clamp(max=-1.0)
        pl = (rl - drift / 2).clamp(max=-1.0)
        pw[0], pl[0] = rw[0] - 1000 / beta, rl[0]  # at least one pair at margin -1000
        tw, tl = pw.clone().requires_grad_(True), pl.clone().requires_grad_(True)
        loss = impl(tw, tl, rw, rl, beta)
        gw, gl = torch.autograd.grad(loss, [tw, tl])
        m = beta * ((pw.double() - rw.double()) - (pl.double() - rl.double()))
        want = float(torch.nn.functional.softplus(-m).mean())
        w = beta * torch.sigmoid(-m) / B
        where = f"B={B}, beta={beta}, fp32 sequence log-probs, margins {float(m.min()):.0f}..{float(m.max()):.0f} (seed {seed})"
        got = float(loss.detach())
        assert math.isfinite(got) and abs(got - want) <= 1e-3 + 1e-4 * abs(want), (
            f"{where}: expected loss {want}, got {got}")
        err = max(float((gw.double() + w).abs().max()), float((gl.double() - w).abs().max()))
        assert err <= 2e-3 * beta / B, (
            f"{where}: gradients differ from -+beta*sigmoid(-m)/B by up to {err:.3g}")

    check()


PROPERTIES = [prop_matches_formula, prop_gradient, prop_reference_shift_invariance, prop_large_margins_in_fp32]

ZH = {
    "doc": """`dpo_loss(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps, beta)` 的性质：
返回批次上 -log sigmoid(beta*(log pi_w - log ref_w) - beta*(log pi_l - log ref_l)) 的均值。

对照答案：fp64 下用 math.log1p 写的公式，以及手推的梯度 d loss / d log pi_w = -beta * sigmoid(-margin) / B。""",
    "prop_matches_formula": "loss 等于上述公式。",
    "prop_gradient": "梯度等于手推结果：d loss/d log pi_w = -beta*sigmoid(-m)/B，d loss/d log pi_l = +beta*sigmoid(-m)/B。",
    "prop_reference_shift_invariance": "给同一个回答的策略对数概率和参考对数概率加上同一个常数，loss 不变。",
    "prop_large_margins_in_fp32": "真实回答的 fp32 序列对数概率（几百个 token 之和：参考模型的 -2000 到 -50），以及最大 +-1000 的 margin（策略远离参考）：loss 有限，等于 fp64 的 softplus(-margin)，梯度等于手推的梯度。-log(sigmoid(m)) 会溢出：fp32 下 sigmoid(-200) 为 0，fp64 下 sigmoid(-1000) 为 0。容差按这种量级的 fp32 对数概率之差确定。",
    "dpo_loss": "批次上的平均 DPO loss：-log sigmoid(r_w - r_l)。\n\n输入是 `[B]` 的序列对数概率（每个回答的 token 对数概率之和）。",
}
