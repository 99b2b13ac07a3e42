"""Masked reductions over right-padded ``[B, T]`` batches (mask: 1 = response token).

All reductions run in at least fp32 (fp64 inputs stay fp64), whatever the input dtype,
and padded positions never leak into a result, even when they hold ``nan``/``inf``.
"""

from __future__ import annotations

import torch

__all__ = ["masked_sum", "masked_mean", "masked_var", "whiten", "reduce_dtype"]


def reduce_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype reductions run in: fp32, or fp64 when the input already is fp64."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def _prepare(x: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    if not isinstance(x, torch.Tensor) or not isinstance(mask, torch.Tensor):
        raise TypeError("x and mask must be torch tensors")
    if x.shape != mask.shape:
        raise ValueError(f"x and mask must have the same shape, got {tuple(x.shape)} and {tuple(mask.shape)}")
    dt = reduce_dtype(x.dtype)
    m = mask.to(device=x.device, dtype=dt)
    # torch.where so that nan/inf in padded slots cannot turn into nan via 0 * inf.
    xm = torch.where(m != 0, x.to(dt), torch.zeros((), dtype=dt, device=x.device)) * m
    return xm, m


def masked_sum(x: torch.Tensor, mask: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    r"""$\sum_i m_i x_i$ (over ``dim``, or everything when ``dim`` is None)."""
    xm, _ = _prepare(x, mask)
    return xm.sum() if dim is None else xm.sum(dim=dim)


def masked_mean(x: torch.Tensor, mask: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    r"""$\sum_i m_i x_i / \sum_i m_i$; a slice with no response token gives 0."""
    xm, m = _prepare(x, mask)
    s = xm.sum() if dim is None else xm.sum(dim=dim)
    n = m.sum() if dim is None else m.sum(dim=dim)
    return torch.where(n > 0, s / n.clamp_min(torch.finfo(n.dtype).tiny), torch.zeros_like(s))


def masked_var(x: torch.Tensor, mask: torch.Tensor, unbiased: bool = True) -> torch.Tensor:
    r"""Variance over all masked elements: $\frac{1}{n-1}\sum_i m_i (x_i-\bar x)^2$ (or $1/n$)."""
    xm, m = _prepare(x, mask)
    n = m.sum()
    if n <= 0:
        raise ValueError("masked_var: the mask selects no element")
    mean = xm.sum() / n
    centered = torch.where(m != 0, x.to(xm.dtype) - mean, torch.zeros((), dtype=xm.dtype, device=x.device))
    var = (centered**2 * m).sum() / n
    if unbiased:
        if n <= 1:
            raise ValueError("masked_var: unbiased variance needs at least two masked elements")
        var = var * n / (n - 1)
    return var


def whiten(x: torch.Tensor, mask: torch.Tensor, shift_mean: bool = True, eps: float = 1e-8) -> torch.Tensor:
    r"""$(x-\bar x)/\sqrt{\mathrm{Var}(x)+\epsilon}$ over masked elements (mean added back if not
    ``shift_mean``); padded positions are 0. Output dtype is the reduction dtype (>= fp32).

    $\bar x$ is the exact masked mean $\sum m x/\sum m$; verl's ``masked_whiten`` divides by $\sum m + 10^{-8}$
    (a relative difference below $10^{-8}/n$). Both add $\epsilon = 10^{-8}$ to the unbiased variance."""
    xm, m = _prepare(x, mask)
    mean = masked_mean(x, mask)
    var = masked_var(x, mask, unbiased=True)
    out = (x.to(xm.dtype) - mean) * torch.rsqrt(var + eps)
    if not shift_mean:
        out = out + mean
    return torch.where(m != 0, out, torch.zeros_like(out))
