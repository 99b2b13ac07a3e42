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


PROPERTIES = [prop_matches_formula, prop_gradient, prop_reference_shift_invariance]
