"""Adam, AdamW and Muon against torch.optim, sympy and the SVD; what the optimizer states cost in bytes.

Oracles: ``torch.optim.Adam`` / ``AdamW`` step for step, sympy for the bias-corrected moments, ``torch.linalg.svd``
for the orthogonal factor, the minimum-norm solution ``torch.linalg.pinv`` for least squares, and the byte
sizes of the tensors torch's optimizer really allocates.
"""

from __future__ import annotations

import pytest
import sympy as sp
import torch
from hypothesis import given
from hypothesis import strategies as st

from impls.distributed.mixed_precision import MixedPrecisionAdam, tiny_bf16_model
from impls.ml.optim import NEWTON_SCHULZ_CUBIC, adam_step, newton_schulz

F64 = torch.float64


GRADS = torch.tensor([100.0, 0.01], dtype=F64)       # one weight with large gradients, one with small


def _run(decay: str, wd: float, steps: int = 50, lr: float = 0.01, impl: str = "ours") -> torch.Tensor:
    """θ after ``steps`` steps from θ = 1 with gradients ±(100, 0.01) alternating in sign: m̂ stays small,
    v̂ ≈ g², so the only steady drift is the weight decay."""
    if impl == "torch":
        p = torch.nn.Parameter(torch.ones(2, dtype=F64))
        cls = torch.optim.AdamW if decay == "decoupled" else torch.optim.Adam
        opt = cls([p], lr=lr, weight_decay=wd)
        for t in range(1, steps + 1):
            p.grad = GRADS * (1 if t % 2 else -1)
            opt.step()
        return p.detach()
    theta, m, v = torch.ones(2, dtype=F64), torch.zeros(2, dtype=F64), torch.zeros(2, dtype=F64)
    for t in range(1, steps + 1):
        theta, m, v = adam_step(theta, GRADS * (1 if t % 2 else -1), m, v, t, lr, weight_decay=wd, decay=decay)
    return theta


@pytest.mark.claim("optim.adam-l2-divided")
def test_l2_in_the_gradient_is_divided_by_sqrt_v(evidence):
    for decay in ("l2", "decoupled"):
        assert torch.allclose(_run(decay, 0.1), _run(decay, 0.1, impl="torch"), atol=1e-12)   # = torch.optim
    l2 = (_run("l2", 0.0) - _run("l2", 0.1)).tolist()                # how far λ = 0.1 pulled each weight
    adamw = (_run("decoupled", 0.0) - _run("decoupled", 0.1)).tolist()
    assert adamw[0] == pytest.approx(adamw[1], rel=1e-6)             # AdamW: the same decay for every weight
    assert l2[1] > 100 * l2[0]                                       # Adam+L2: divided by √v̂ ≈ |g|
    evidence["decay over 50 steps, gradients ±(100, 0.01)"] = {"Adam+L2": l2, "AdamW": adamw}


@pytest.mark.claim("optim.adamw-is-adam-l2")
def test_adamw_differs_from_adam_with_l2(evidence):
    l2, w = _run("l2", 0.1), _run("decoupled", 0.1)
    assert float((l2 - w).abs().max()) > 0.3
    evidence.quote("largest parameter gap between Adam + L2 and AdamW", quoted=0.39, measured=float((l2 - w).abs().max()),
                   abs=0.005)
    # for plain SGD the two are the same thing: L2 λ equals decoupled decay λ (θ ← θ − lr(g + λθ))
    h = torch.tensor([100.0, 1.0, 0.01], dtype=F64)
    a = torch.nn.Parameter(torch.ones(3, dtype=F64))
    b = torch.ones(3, dtype=F64)
    opt = torch.optim.SGD([a], lr=0.005, weight_decay=0.1)
    for _ in range(100):
        opt.zero_grad()
        (0.5 * (h * a * a).sum()).backward()
        opt.step()
        b = b * (1 - 0.005 * 0.1) - 0.005 * h * b
    assert torch.allclose(a.detach(), b, atol=1e-12)
    evidence["counterexample after 50 steps"] = {"Adam + L2": l2.tolist(), "AdamW": w.tolist()}


@pytest.mark.claim("optim.bias-correction")
def test_bias_correction_undoes_the_zero_start(evidence):
    b1, b2, g, t = sp.symbols("beta1 beta2 g t", positive=True)
    i = sp.symbols("i", integer=True, positive=True)
    m_t = sp.summation((1 - b1) * b1 ** (t - i) * g, (i, 1, t))           # m_t with m_0 = 0, constant g
    assert sp.simplify(m_t - (1 - b1 ** t) * g) == 0
    v_t = sp.summation((1 - b2) * b2 ** (t - i) * g ** 2, (i, 1, t))
    assert sp.simplify(v_t / (1 - b2 ** t) - g ** 2) == 0
    # first step: corrected, each weight moves lr·sign(g); uncorrected, by lr·(1−β1)/√(1−β2) = 3.16·lr
    grad = torch.tensor([1e-4, 3.0, -50.0], dtype=F64)
    z = torch.zeros(3, dtype=F64)
    corrected, _, _ = adam_step(torch.zeros(3, dtype=F64), grad, z, z, 1, 1e-3, eps=0.0)
    raw, _, _ = adam_step(torch.zeros(3, dtype=F64), grad, z, z, 1, 1e-3, eps=0.0, bias_correction=False)
    assert torch.allclose(corrected, -1e-3 * grad.sign(), atol=1e-15)
    evidence.quote("uncorrected first step over lr (β1 0.9, β2 0.999)", quoted=3.16,
                   measured=float((raw / corrected)[0]), abs=0.005)


@pytest.mark.claim("optim.adam-state-bytes")
def test_adam_state_bytes(evidence):
    net = torch.nn.Sequential(torch.nn.Linear(31, 17), torch.nn.Linear(17, 5))
    opt = torch.optim.AdamW(net.parameters())
    net(torch.randn(4, 31)).sum().backward()
    opt.step()
    n = sum(p.numel() for p in net.parameters())
    moments = sum(t.numel() * t.element_size() for st in opt.state.values() for k, t in st.items()
                  if k in ("exp_avg", "exp_avg_sq"))
    assert moments == 8 * n                                                 # two fp32 tensors per parameter
    mp = MixedPrecisionAdam(tiny_bf16_model().parameters())
    m2 = tiny_bf16_model()
    m2(torch.randn(2, 23, dtype=torch.bfloat16)).float().sum().backward()
    mp = MixedPrecisionAdam(m2.parameters())
    mp.step()
    n2 = sum(p.numel() for p in m2.parameters())
    held = mp.phases["between_steps"]
    assert held["master32"] == 4 * n2 and held["adam_moments32"] == 8 * n2
    evidence["bytes per parameter"] = {"Adam moments": moments / n, "fp32 master (mixed precision)": held["master32"] / n2}


@pytest.mark.claim("optim.adam-generalizes-better")
def test_adam_finds_a_worse_interpolating_solution_than_sgd(evidence):
    """Over-parameterised least squares (20 samples, 100 weights, Gaussian teacher): gradient descent from 0
    stays in the row space and ends at the minimum-norm solution, which is the best guess for an isotropic
    teacher; Adam's per-coordinate scaling leaves the row space and lands elsewhere (Wilson et al. 2017, §3)."""
    seeds = 3                     # run side by side: both optimizers act per coordinate, so batching is exact
    g = torch.Generator().manual_seed(0)
    x = torch.randn(seeds, 20, 100, generator=g, dtype=F64)
    w_star = torch.randn(seeds, 100, 1, generator=g, dtype=F64)
    y = x @ w_star
    xt = torch.randn(seeds, 2000, 100, generator=g, dtype=F64)
    errors = {}
    for name in ("sgd", "adam"):
        w = torch.zeros(seeds, 100, 1, dtype=F64, requires_grad=True)
        opt = torch.optim.SGD([w], lr=0.002 * seeds) if name == "sgd" else torch.optim.Adam([w], lr=0.01)
        for _ in range(3000):
            opt.zero_grad()
            ((x @ w - y) ** 2).mean().backward()
            opt.step()
        assert float(((x @ w.detach() - y) ** 2).mean()) < 1e-6               # both interpolate the training set
        if name == "sgd":
            assert torch.allclose(w.detach(), torch.linalg.pinv(x) @ y, atol=1e-6)   # the min-norm solution
        errors[name] = ((xt @ (w.detach() - w_star)) ** 2).mean((1, 2)).tolist()
    assert sum(errors["adam"]) > sum(errors["sgd"])
    evidence["test MSE per seed"] = errors


@pytest.mark.claim("optim.muon-newton-schulz")
def test_muon_orthogonalises_approximately(evidence):
    g = torch.Generator().manual_seed(0)
    lo, hi = 1.0, 1.0
    for shape in ((128, 32), (32, 256), (256, 64)):
        m = torch.randn(*shape, generator=g, dtype=F64)
        sv = torch.linalg.svdvals(newton_schulz(m))
        lo, hi = min(lo, float(sv.min())), max(hi, float(sv.max()))
        u, _, vh = torch.linalg.svd(m, full_matrices=False)
        cubic = newton_schulz(m, steps=60, coeffs=NEWTON_SCHULZ_CUBIC)
        assert torch.allclose(cubic, u @ vh, atol=1e-8)                    # the slow cubic reaches U·Vᵀ exactly
        # the quintic keeps the singular vectors and squeezes the singular values towards 1
        core = u.t() @ newton_schulz(m) @ vh.t()
        assert torch.allclose(core, torch.diag(torch.diagonal(core)), atol=1e-8)
    evidence.quote("smallest singular value after 5 quintic steps (Gaussian matrices)", quoted=0.68, measured=lo,
                   abs=0.01)
    evidence.quote("largest singular value after 5 quintic steps", quoted=1.13, measured=hi, abs=0.01)
    # a direction whose singular value is 1e-4 of the largest is not lifted in 5 steps
    ill = torch.randn(64, 64, generator=g, dtype=F64) @ torch.diag(torch.logspace(-4, 0, 64, dtype=F64))
    small = float(torch.linalg.svdvals(newton_schulz(ill)).min())
    assert small < 0.1
    evidence["smallest singular value, ill-conditioned 64 x 64"] = small
    with pytest.raises(ValueError):
        newton_schulz(torch.randn(3, 4, 5))                                # only matrices: biases, norms use AdamW


@pytest.mark.claim("optim.adam-l2-divided")
@given(st.floats(0.01, 1.0), st.floats(1e-3, 1e3), st.integers(1, 20))
def test_adam_step_matches_torch(wd, scale, steps):
    g = torch.Generator().manual_seed(steps)
    theta0 = torch.randn(5, generator=g, dtype=F64)
    grads = [scale * torch.randn(5, generator=g, dtype=F64) for _ in range(steps)]
    for decay, cls in (("l2", torch.optim.Adam), ("decoupled", torch.optim.AdamW)):
        p = torch.nn.Parameter(theta0.clone())
        opt = cls([p], lr=1e-2, weight_decay=wd)
        ours, m, v = theta0.clone(), torch.zeros(5, dtype=F64), torch.zeros(5, dtype=F64)
        for t, gr in enumerate(grads, 1):
            p.grad = gr.clone()
            opt.step()
            ours, m, v = adam_step(ours, gr, m, v, t, 1e-2, weight_decay=wd, decay=decay)
        assert torch.allclose(p.detach(), ours, atol=1e-12)
