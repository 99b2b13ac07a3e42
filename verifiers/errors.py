"""Error measures that never hide a NaN.

Python's ``max()`` keeps its first argument unless a later one compares greater, and every comparison
with NaN is False: ``max(0.0, nan)`` is ``0.0``, so a worst-error loop over floats drops a NaN that is not
first and ``assert worst <= tol`` passes. ``torch.max`` propagates NaN, but only within one tensor. These
helpers turn any NaN (or an infinity where the reference is finite) into ``inf``, which fails every
``<= tol``.
"""

from __future__ import annotations

import math

import torch


def _f64(x) -> torch.Tensor:
    """fp64 on the CPU; nested lists and numbers are read as fp64 directly (``as_tensor`` would make them fp32)."""
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().to(torch.float64)
    return torch.as_tensor(x, dtype=torch.float64)


def max_abs_err(got, want) -> float:
    """``max |got - want|`` over all elements (tensors, nested lists or numbers) as a float.

    A position where exactly one side is NaN, or the two differ by an infinity, gives ``inf``; equal values
    (equal infinities included) and NaN on both sides give 0.
    """
    g, w = _f64(got), _f64(want)
    g, w = torch.broadcast_tensors(g, w)
    if g.numel() == 0:
        return 0.0
    same = (g == w) | (torch.isnan(g) & torch.isnan(w))
    d = torch.where(same, torch.zeros((), dtype=torch.float64), (g - w).abs())
    d = torch.where(torch.isnan(d), torch.full((), math.inf, dtype=torch.float64), d)
    return float(d.max())


def worst(*errors: float) -> float:
    """The largest of ``errors``; a NaN counts as ``inf`` (0.0 when there is none)."""
    vals = [float(e) for e in errors]
    return math.inf if any(math.isnan(e) for e in vals) else max(vals, default=0.0)
