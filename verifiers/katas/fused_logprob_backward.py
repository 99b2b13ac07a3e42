"""Kata properties for ``fused_logprob_backward(hidden, weight, targets, grad_logp, grad_entropy, *,
temperature, ignore_index, chunk_size)`` -> ``(dH, dW)``: the gradients of
``L = sum_i g_i log pi(y_i) + gH_i H_i`` with ``x = hidden @ weight.T / temperature``, computed
``chunk_size`` rows at a time without forming ``[N, V]``.

Conventions: a row whose target is ``ignore_index`` has log-prob 0 (no gradient through it) but its
entropy still counts; ``dH`` is ``[N, H]`` and ``dW`` is ``[V, H]``, fp64 for fp64 inputs.
Oracle: autograd through the full-logits computation in fp64, computed here.
"""

from __future__ import annotations

import math

import torch
from hypothesis import given
from hypothesis import strategies as st

IGNORE = -100
TOL = 1e-9


@st.composite
def cases(draw):
    N = draw(st.integers(1, 24))
    H = draw(st.integers(1, 8))
    V = draw(st.integers(2, 60))
    chunk = draw(st.integers(1, 30))
    tau = draw(st.sampled_from([1.0, 0.7, 1.5]))
    seed = draw(st.integers(0, 2**31 - 1))
    gen = torch.Generator().manual_seed(seed)
    h = torch.randn(N, H, generator=gen, dtype=torch.float64)
    W = torch.randn(V, H, generator=gen, dtype=torch.float64) * (2 / math.sqrt(H))
    y = torch.randint(0, V, (N,), generator=gen)
    y = torch.where(torch.rand(N, generator=gen) < 0.25, IGNORE, y)
    g = torch.randn(N, generator=gen, dtype=torch.float64)
    gh = torch.randn(N, generator=gen, dtype=torch.float64)
    return h, W, y, g, gh, tau, chunk


def _oracle(h, W, y, g, gh, tau):
    h = h.clone().requires_grad_()
    W = W.clone().requires_grad_()
    ls = torch.log_softmax(h @ W.T / tau, -1)
    lp = torch.where(y == IGNORE, 0.0, ls.gather(1, y.clamp(min=0)[:, None])[:, 0])
    ent = -(ls.exp() * ls).sum(-1)
    (lp * g + ent * gh).sum().backward()
    return h.grad, W.grad


def _call(impl, h, W, y, g, gh, tau, chunk):
    dH, dW = impl(h.clone(), W.clone(), y.clone(), g.clone(), gh.clone(), temperature=tau, ignore_index=IGNORE,
                  chunk_size=chunk)
    return torch.as_tensor(dH).double(), torch.as_tensor(dW).double()


def _close(got, want, what, where):
    assert tuple(got.shape) == tuple(want.shape), f"{where}: {what} expected shape {tuple(want.shape)}, got {tuple(got.shape)}"
    err = float((got - want).abs().max()) if want.numel() else 0.0
    assert err <= TOL * max(1.0, float(want.abs().max()) if want.numel() else 1.0), (
        f"{where}: {what} differs from autograd by {err:.3g}\n  expected {want.tolist()}\n  got {got.tolist()}")


def prop_matches_autograd(impl) -> None:
    """dH and dW equal autograd through the full [N, V] computation (ignored targets, temperature != 1,
    chunk sizes that do not divide N)."""

    @given(cases())
    def check(case):
        h, W, y, g, gh, tau, chunk = case
        want_h, want_w = _oracle(h, W, y, g, gh, tau)
        dH, dW = _call(impl, h, W, y, g, gh, tau, chunk)
        where = f"N,H,V={tuple(h.shape) + (W.shape[0],)}, chunk_size={chunk}, temperature={tau}, targets={y.tolist()}"
        _close(dH, want_h, "dH", where)
        _close(dW, want_w, "dW", where)

    check()


def prop_ignored_rows_only_through_entropy(impl) -> None:
    """With every target ignored and no entropy gradient, both gradients are exactly zero."""

    @given(cases())
    def check(case):
        h, W, y, g, gh, tau, chunk = case
        dH, dW = _call(impl, h, W, torch.full_like(y, IGNORE), g, torch.zeros_like(gh), tau, chunk)
        where = f"N,H,V={tuple(h.shape) + (W.shape[0],)}, all targets ignored, grad_entropy = 0"
        assert float(dH.abs().max()) == 0.0 and float(dW.abs().max()) == 0.0, (
            f"{where}: expected zero gradients, got max |dH| {float(dH.abs().max())}, max |dW| {float(dW.abs().max())}")

    check()


def prop_temperature_is_a_weight_rescale(impl) -> None:
    """x = h W^T / tau = h (W/tau)^T: dH(W, tau) = dH(W/tau, 1) and dW(W, tau) = dW(W/tau, 1) / tau."""

    @given(cases())
    def check(case):
        h, W, y, g, gh, tau, chunk = case
        dH, dW = _call(impl, h, W, y, g, gh, tau, chunk)
        dH1, dW1 = _call(impl, h, W / tau, y, g, gh, 1.0, chunk)
        where = f"N,H,V={tuple(h.shape) + (W.shape[0],)}, chunk_size={chunk}, temperature={tau}"
        _close(dH, dH1, "dH at temperature tau vs at 1 with W/tau", where)
        _close(dW, dW1 / tau, "dW at temperature tau vs (at 1 with W/tau)/tau", where)

    check()


ALL = [prop_matches_autograd, prop_ignored_rows_only_through_entropy, prop_temperature_is_a_weight_rescale]
