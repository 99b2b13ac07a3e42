"""PPO clip case analysis: sympy is the oracle, the reference implementation is checked against it.

Regions are parameterised with positive symbols so sympy can decide every min/max:
eps = e/(1+e) in (0, 1); r < 1-eps: r = (1-eps) w/(1+w); inside: r = 1-eps + 2 eps w/(1+w);
r > 1+eps: r = 1+eps+u; advantage A = +a or -a with a > 0.
"""

from __future__ import annotations

import pytest
import sympy as sp
import torch

import impls.rl.ppo as P
from verifiers.katas import ppo_clip_loss as kata

a, e, u, w = sp.symbols("a e u w", positive=True)
EPS = e / (1 + e)
REGIONS = {
    "below": ((1 - EPS) * w / (1 + w), w),
    "inside": (1 - EPS + 2 * EPS * w / (1 + w), w),
    "above": (1 + EPS + u, u),
}


def _decide(expr):
    """Resolve Min/Max whose arguments' difference has a provable sign (innermost first)."""
    def pick(fn, args):
        x, y = args
        d = sp.factor(sp.together(x - y))
        if d.is_positive:
            return y if fn is sp.Min else x
        if d.is_negative:
            return x if fn is sp.Min else y
        if d == 0:
            return x
        raise AssertionError(f"sympy cannot decide the sign of {d}")

    for _ in range(10):
        nodes = [n for n in sp.preorder_traversal(expr) if isinstance(n, (sp.Min, sp.Max)) and len(n.args) == 2
                 and not any(isinstance(m, (sp.Min, sp.Max)) for arg in n.args for m in sp.preorder_traversal(arg))]
        if not nodes:
            return sp.simplify(expr)
        expr = expr.xreplace({n: pick(type(n), n.args) for n in nodes})
    raise AssertionError("could not resolve min/max")


def clip_objective(r, A):
    return sp.Min(r * A, sp.Min(sp.Max(r, 1 - EPS), 1 + EPS) * A)


def region_table():
    """For each (region, sign of A): the resolved objective and its derivative d/dr."""
    out = {}
    for name, (r, var) in REGIONS.items():
        for sign, A in (("+", a), ("-", -a)):
            f = _decide(clip_objective(r, A))
            out[(name, sign)] = (r, f, sp.simplify(sp.diff(f, var) / sp.diff(r, var)))
    return out


TABLE = region_table()


def _impl_value_and_grad(r_val: float, A_val: float, eps_val: float):
    ratio = torch.tensor([r_val], dtype=torch.float64, requires_grad=True)
    loss = P.ppo_clip_objective_per_token(ratio, torch.tensor([A_val], dtype=torch.float64), eps_val, eps_val, None)
    (g,) = torch.autograd.grad(loss.sum(), ratio)
    return -float(loss.detach()), -float(g)  # objective = -loss


def _check_impl_against_table(evidence):
    """Evaluate the implementation at a point of every region and compare with sympy."""
    pts = {"below": {w: sp.Rational(1, 2)}, "inside": {w: sp.Rational(3, 4)}, "above": {u: sp.Rational(1, 3)}}
    subs_common = {e: sp.Rational(1, 4), a: sp.Rational(3, 2)}  # eps = 0.2, |A| = 1.5
    rows = []
    for (name, sign), (r, f, df) in TABLE.items():
        s = {**subs_common, **pts[name]}
        rv, fv, dfv = float(r.subs(s)), float(f.subs(s)), float(df.subs(s))
        got_f, got_df = _impl_value_and_grad(rv, 1.5 if sign == "+" else -1.5, 0.2)
        assert abs(got_f - fv) < 1e-12 and abs(got_df - dfv) < 1e-12, (name, sign, rv, fv, dfv, got_f, got_df)
        rows.append({"region": name, "A": sign, "ratio": rv, "objective": fv, "d_objective_d_ratio": dfv})
    evidence["impl_vs_sympy_points"] = rows


@pytest.mark.claim("ppo.clip.positive-advantage-cap", "ppo.clip.case-positive-benefit-cap")
def test_positive_advantage_is_min_r_cap(evidence):
    for name in REGIONS:
        r, f, _ = TABLE[(name, "+")]
        assert sp.simplify(f - _decide(sp.Min(r, 1 + EPS) * a)) == 0, name
    # the benefit never exceeds (1+eps)A: objective - (1+eps)A <= 0 everywhere, = 0 above the band
    r, f, _ = TABLE[("above", "+")]
    assert sp.simplify(f - (1 + EPS) * a) == 0
    evidence["objective_A_pos"] = {k[0]: str(v[1].subs(e, sp.Rational(1, 4))) for k, v in TABLE.items() if k[1] == "+"}
    _check_impl_against_table(evidence)


@pytest.mark.claim("ppo.clip.negative-advantage-floor", "ppo.clip.case-negative-benefit-cap")
def test_negative_advantage_is_max_r_floor(evidence):
    for name in REGIONS:
        r, f, _ = TABLE[(name, "-")]
        assert sp.simplify(f - _decide(sp.Max(r, 1 - EPS) * (-a))) == 0, name
    r, f, _ = TABLE[("below", "-")]
    assert sp.simplify(f - (1 - EPS) * (-a)) == 0  # lowering r below 1-eps gains nothing more
    evidence["objective_A_neg"] = {k[0]: str(v[1].subs(e, sp.Rational(1, 4))) for k, v in TABLE.items() if k[1] == "-"}
    _check_impl_against_table(evidence)


@pytest.mark.claim("ppo.clip.case3-gradient-cut")
def test_case3_gradient_zero(evidence):
    assert TABLE[("above", "+")][2] == 0
    obj, g = _impl_value_and_grad(1.5, 2.0, 0.2)
    assert g == 0.0 and abs(obj - 1.2 * 2.0) < 1e-12
    evidence["r=1.5,A=2,eps=0.2"] = {"objective": obj, "d_objective_d_ratio": g}


@pytest.mark.claim("ppo.clip.case4-gradient-cut")
def test_case4_gradient_zero(evidence):
    assert TABLE[("below", "-")][2] == 0
    obj, g = _impl_value_and_grad(0.5, -2.0, 0.2)
    assert g == 0.0 and abs(obj - 0.8 * -2.0) < 1e-12
    evidence["r=0.5,A=-2,eps=0.2"] = {"objective": obj, "d_objective_d_ratio": g}


@pytest.mark.claim("ppo.clip.gradient-kept-on-unclipped-side")
def test_gradient_survives_on_the_other_side(evidence):
    """Outside the band on the 'wrong' side the min picks the unclipped term: gradient = A, not 0."""
    assert sp.simplify(TABLE[("above", "-")][2] + a) == 0  # r > 1+eps, A < 0: d/dr = A = -a
    assert sp.simplify(TABLE[("below", "+")][2] - a) == 0  # r < 1-eps, A > 0: d/dr = A = a
    zero_regions = sorted(f"{k[0]}{k[1]}" for k, v in TABLE.items() if v[2] == 0)
    assert zero_regions == ["above+", "below-"], zero_regions
    obj, g = _impl_value_and_grad(1.5, -2.0, 0.2)
    assert g == -2.0, g
    evidence["counterexample_to_zero_gradient_outside_band"] = {
        "ratio": 1.5, "advantage": -2.0, "eps": 0.2, "objective": obj, "d_objective_d_ratio": g}
    evidence["zero_gradient_regions"] = zero_regions
    # that side is unbounded: the loss grows linearly in r; dual clip (c = 3) caps it at -c A
    for r_val, want_loss, want_grad in ((5.0, 6.0, 0.0), (2.0, 4.0, 2.0)):
        ratio = torch.tensor([r_val], dtype=torch.float64, requires_grad=True)
        loss = P.ppo_clip_objective_per_token(ratio, torch.tensor([-2.0], dtype=torch.float64), 0.2, 0.2, 3.0)
        (g,) = torch.autograd.grad(loss.sum(), ratio)
        assert abs(float(loss.detach()) - want_loss) < 1e-12 and abs(float(g) - want_grad) < 1e-12, (r_val, loss, g)
    evidence["dual_clip_c3_A-2"] = {"r=5": {"loss": 6.0, "dloss_dr": 0.0}, "r=2": {"loss": 4.0, "dloss_dr": 2.0}}


@pytest.mark.claim("ppo.clip.code-formula")
def test_reference_matches_formula_and_gradient(evidence):
    kata.prop_matches_formula(P.ppo_clip_loss)
    kata.prop_gradient_matches_hand_derived(P.ppo_clip_loss)
    kata.prop_mask_respected(P.ppo_clip_loss)
    kata.prop_dual_clip(P.ppo_clip_loss)
    kata.prop_fp32_rollouts_with_rare_tokens(P.ppo_clip_loss)  # T up to 1024, fp32, log-probs down to -120
    # ratio must come from log-probs: a long answer's sequence probability underflows in fp32
    logp = torch.full((1, 400), -0.3)
    naive = torch.exp(logp.sum()) / torch.exp((logp - 0.01).sum())
    _, stats = P.ppo_clip_loss(logp, logp - 0.01, torch.ones(1, 400), torch.ones(1, 400))
    assert torch.isnan(naive) and abs(stats["ratio_mean"] - torch.exp(torch.tensor(0.01)).item()) < 1e-6
    evidence["properties"] = [p.__name__ for p in kata.ALL]
    evidence["fp32_probability_ratio_of_400_token_answer"] = "nan (0/0 underflow); exp(logp - logp_old) is finite"


@pytest.mark.claim("ppo.clip-objective-sign")
def test_objective_is_maximised_not_minimised(evidence):
    """Minimising +min(rA, clip(r)A) pushes a good action's probability down; the loss is its negative."""
    logits = torch.zeros(1, 1, 3, dtype=torch.float64)
    action, A = 0, 1.0

    def run(sign):
        z = logits.clone().requires_grad_(True)
        opt = torch.optim.SGD([z], lr=0.1)
        logp_old = torch.log_softmax(logits, -1)[..., action]
        for _ in range(5):
            logp = torch.log_softmax(z, -1)[..., action]
            loss, _ = P.ppo_clip_loss(logp, logp_old, torch.full((1, 1), A, dtype=torch.float64),
                                      torch.ones(1, 1), clip_low=0.2)
            opt.zero_grad()
            (sign * loss).backward()
            opt.step()
        return float(torch.softmax(z.detach(), -1)[0, 0, action])

    p_loss, p_objective = run(+1.0), run(-1.0)
    assert p_loss > 1 / 3 > p_objective, (p_loss, p_objective)
    evidence["pi(good action) before"] = 1 / 3
    evidence["after minimising -min(...) (the PPO loss)"] = p_loss
    evidence["after minimising +min(...) (sign error)"] = p_objective
    evidence["counterexample"] = {"advantage": A, "pi_before": 1 / 3, "pi_after_minimising_min_term": p_objective}
