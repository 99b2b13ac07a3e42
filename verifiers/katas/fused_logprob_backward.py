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

from verifiers.katas.budgets import metered, realistic, within_memory

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


def prop_never_materialises_logits(impl) -> None:
    """N = 512 rows, V = 2048, chunk_size = 32 (fp32): the gradients match autograd to fp32 accuracy while the
    call holds at most the two outputs plus 8 [chunk, V] fp64 buffers of tensors (the size of one [N, V] fp32
    tensor): autograd through the full logits, which keeps several [N, V] tensors, is rejected; a chunked
    backward of any style passes (the reference holds about 2, a plain chunked autograd about 4)."""

    @realistic(6)
    @given(st.sampled_from([1.0, 0.7]), st.integers(0, 2**31 - 1))
    def check(tau, seed):
        N, H, V, chunk = 512, 16, 2048, 32
        gen = torch.Generator().manual_seed(seed)
        h = torch.randn(N, H, generator=gen)
        W = torch.randn(V, H, generator=gen) * (2 / math.sqrt(H))
        y = torch.randint(0, V, (N,), generator=gen)
        y = torch.where(torch.rand(N, generator=gen) < 0.1, IGNORE, y)
        g = torch.randn(N, generator=gen)
        gh = torch.randn(N, generator=gen)
        (dH, dW), usage = metered(impl, h, W, y, g, gh, temperature=tau, ignore_index=IGNORE, chunk_size=chunk)
        where = f"N,H,V={N, H, V}, chunk_size={chunk}, temperature={tau}, fp32 (seed {seed})"
        outputs = (N * H + V * H) * 8
        within_memory(usage, outputs + 8 * chunk * V * 8, "the backward", where)
        want_h, want_w = _oracle(h.double(), W.double(), y, g.double(), gh.double(), tau)
        for what, got, want in (("dH", dH, want_h), ("dW", dW, want_w)):
            got = torch.as_tensor(got).double()
            assert tuple(got.shape) == tuple(want.shape), f"{where}: {what} expected shape {tuple(want.shape)}, got {tuple(got.shape)}"
            err = float((got - want).abs().max())
            assert err <= 1e-4 * max(1.0, float(want.abs().max())), f"{where}: {what} differs from autograd by {err:.3g}"

    check()


ALL = [prop_matches_autograd, prop_ignored_rows_only_through_entropy, prop_temperature_is_a_weight_rescale,
       prop_never_materialises_logits]

ZH = {
    "doc": """`fused_logprob_backward(hidden, weight, targets, grad_logp, grad_entropy, *, temperature, ignore_index,
chunk_size) -> (dH, dW)` 的性质：L = sum_i g_i log pi(y_i) + gH_i H_i 的梯度，其中 x = hidden @ weight.T / temperature，
每次计算 `chunk_size` 行，不构造 `[N, V]`。

约定：target 为 `ignore_index` 的行对数概率为 0（不经它回传梯度），但它的熵仍然计入；`dH` 是 `[N, H]`，`dW` 是 `[V, H]`，
fp64 输入时为 fp64。对照答案：在这里用 fp64、经完整 logits 的自动求导。""",
    "prop_matches_autograd": "dH 和 dW 等于经完整 [N, V] 计算的自动求导（包含被忽略的 target、temperature != 1、不能整除 N 的块大小）。",
    "prop_ignored_rows_only_through_entropy": "所有 target 都被忽略、且没有熵的梯度时，两个梯度都恰好为 0。",
    "prop_temperature_is_a_weight_rescale": "温度等价于缩放权重：x = h W^T / tau = h (W/tau)^T，所以 dH(W, tau) = dH(W/tau, 1)，dW(W, tau) = dW(W/tau, 1) / tau。",
    "prop_never_materialises_logits": "N = 512 行、V = 2048、chunk_size = 32（fp32）：梯度与自动求导一致（fp32 精度），而调用期间同时持有的张量不超过两个输出加 8 个 [chunk, V] 的 fp64 缓冲（相当于一个 [N, V] fp32 张量）：经完整 logits 的自动求导会保留多个 [N, V] 张量，被拒绝；任何分块的反向都能通过（参考实现约占 2 个，分块的自动求导约 4 个）。",
    "fused_logprob_backward": r"""L = sum_i g_i log pi(y_i) + g_{H,i} H_i 的梯度 `(dH [N, H], dW [V, H])`，每次处理一个行块。

对每个 `chunk_size` 行的块：重新计算 x = h_c W^T / tau、log pi = x - lse、pi = e^{log pi}、H；然后
dL/dz_j = (1/tau)(g[j=y] - pi_j (g + g_H (log pi_j + H)))，dH_c = (dL/dz) W，dW += (dL/dz)^T h_c。
target 为 `ignore_index` 的行只通过熵贡献梯度。从不构造 `[N, V]`；结果为 fp32（fp64 输入时为 fp64）。""",
}
