"""Warm-up, batch-size scaling of the learning rate, gradient clipping.

Oracles: torch.optim.Adam's own first step (its size does not depend on the gradient's scale), a small
transformer's update norms with and without warm-up, the mean update of SGD and Adam under gradient noise at
two batch sizes, and ``torch.nn.utils.clip_grad_norm_``.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st

from impls.ml.counting import ARCHS, model, scaled_down
from impls.ml.optim import clip_by_global_norm, warmup_cosine
from impls.ml.transformer import build

F64 = torch.float64


def _first_update_norms(warmup: int, lr: float = 1e-2, steps: int = 5) -> list[float]:
    cfg = scaled_down(replace(model("llama-3-8b"), arch=ARCHS["transformer"]), d=32, layers=2, vocab=32, context=16)
    net = build(cfg, seed=0)
    opt = torch.optim.Adam(net.parameters(), lr=lr, betas=(0.9, 0.98))
    g = torch.Generator().manual_seed(0)
    norms = []
    for s in range(steps):
        for group in opt.param_groups:
            group["lr"] = warmup_cosine(s, warmup, 1000, lr, 0.1) if warmup else lr
        x = torch.randint(0, cfg.vocab, (8, cfg.context + 1), generator=g)
        before = [p.detach().clone() for p in net.parameters()]
        opt.zero_grad()
        F.cross_entropy(net(x[:, :-1]).reshape(-1, cfg.vocab), x[:, 1:].reshape(-1)).backward()
        opt.step()
        norms.append(math.sqrt(sum(float((p.detach() - b).pow(2).sum()) for p, b in zip(net.parameters(), before))))
    return norms, sum(p.numel() for p in net.parameters())


@pytest.mark.claim("lr.warmup-reason")
def test_warmup_bounds_adams_first_steps(evidence):
    # Adam's first step moves every weight by lr·sign(g), whatever the gradient's size
    for scale in (1e-6, 1.0, 1e6):
        p = torch.nn.Parameter(torch.zeros(1000, dtype=F64))
        opt = torch.optim.Adam([p], lr=1e-2, eps=1e-30)
        p.grad = scale * torch.randn(1000, generator=torch.Generator().manual_seed(0), dtype=F64)
        opt.step()
        assert torch.allclose(p.detach().abs(), torch.full((1000,), 1e-2, dtype=F64), rtol=1e-9)
    no_warm, n = _first_update_norms(0)
    warm, _ = _first_update_norms(20)
    assert no_warm[0] == pytest.approx(1e-2 * math.sqrt(n), rel=0.01)           # lr·√N: the whole model at once
    ratio = no_warm[0] / warm[0]
    evidence.quote("first update norm without warm-up over with a 20-step warm-up", quoted=20, measured=ratio, abs=0.5)
    # LayerNorm has no running statistics to be "unstable": nothing is estimated across steps or samples
    ln, bn = torch.nn.LayerNorm(8), torch.nn.BatchNorm1d(8)
    assert list(ln.buffers()) == [] and {n for n, _ in bn.named_buffers()} >= {"running_mean", "running_var"}
    x = torch.randn(4, 8)
    out_train = ln.train()(x)
    assert torch.equal(out_train, ln.eval()(x))
    evidence["update norms, first 5 steps"] = {"no warm-up": no_warm, "20-step warm-up": warm}


def _mean_update(opt_name: str, batch: int, steps: int = 3000, mu: float = 0.01, sigma: float = 1.0) -> float:
    """A weight whose per-sample gradient is μ + σ·ξ (the loss surface is flat, so only the optimizer moves it):
    the mean update per step over the last two thirds."""
    g = torch.Generator().manual_seed(batch)
    p = torch.nn.Parameter(torch.zeros(256, dtype=F64))                 # 256 independent copies, averaged
    opt = torch.optim.SGD([p], lr=0.1) if opt_name == "sgd" else torch.optim.Adam([p], lr=1e-3, betas=(0.9, 0.999))
    start = None
    for t in range(steps):
        if t == steps // 3:
            start = p.detach().clone()
        p.grad = mu + sigma * torch.randn(256, generator=g, dtype=F64) / math.sqrt(batch)
        opt.step()
    return float((start - p.detach()).mean()) / (steps - steps // 3)


@pytest.mark.claim("lr.linear-scaling")
def test_linear_scaling_fits_sgd_and_square_root_fits_adam(evidence):
    small, large = 16, 64
    sgd = _mean_update("sgd", large) / _mean_update("sgd", small)
    adam = _mean_update("adam", large) / _mean_update("adam", small)
    evidence.quote("batch ratio", quoted=4, measured=large / small, abs=0)
    # 4x the batch: SGD's step is the same size, so to cover the same ground per sample the lr must grow 4x;
    # Adam's step already grows about 2x (m̂/√v̂ ≈ μ·√B/σ when noise dominates): the lr should grow about 2x
    assert sgd == pytest.approx(1.0, abs=0.05)
    evidence.quote("Adam's mean step at batch 64 over batch 16", quoted=2.0, measured=adam, abs=0.15)
    evidence["SGD's mean step at batch 64 over batch 16"] = sgd


@pytest.mark.claim("lr.clipping-vanishing")
@given(st.lists(st.floats(-1e3, 1e3, allow_nan=False), min_size=1, max_size=12), st.floats(1e-3, 10))
def test_clipping_only_shrinks(values, max_norm):
    grads = [torch.tensor(values, dtype=F64)]
    clipped, norm = clip_by_global_norm(grads, max_norm)
    params = [torch.nn.Parameter(torch.zeros_like(g)) for g in grads]
    for p, g in zip(params, grads):
        p.grad = g.clone()
    torch.nn.utils.clip_grad_norm_(params, max_norm)
    assert torch.allclose(clipped[0], params[0].grad, atol=1e-12)           # = torch's clip_grad_norm_
    assert float(clipped[0].norm()) <= norm + 1e-12                        # never larger
    if norm + 1e-6 <= max_norm:
        assert torch.equal(clipped[0], grads[0])                           # below the threshold: untouched


@pytest.mark.claim("lr.clipping-vanishing")
def test_clipping_leaves_a_vanishing_gradient_vanishing(evidence):
    tiny = [torch.full((4,), 1e-9, dtype=F64)]
    clipped, _ = clip_by_global_norm(tiny, 1.0)
    assert torch.equal(clipped[0], tiny[0] * min(1.0, 1.0 / (float(tiny[0].norm()) + 1e-6)))
    assert float(clipped[0].norm()) == pytest.approx(float(tiny[0].norm()))
    evidence["counterexample"] = {"gradient norm": float(tiny[0].norm()), "after clipping at 1.0": float(clipped[0].norm())}


def test_warmup_cosine_shape():
    lr = [warmup_cosine(s, 2000, 100_000, 3e-4) for s in range(100_000)]
    assert lr[0] == pytest.approx(3e-4 / 2000) and lr[1999] == pytest.approx(3e-4)
    assert max(lr) == pytest.approx(3e-4) and lr[-1] == pytest.approx(3e-5, rel=1e-3)   # Llama 2: down to 10%
    assert all(a >= b for a, b in zip(lr[2000:], lr[2001:]))
