"""Inputs of the LayerNorm and RMSNorm katas: a row shape, eps, an offset and spread of the values, an optional
affine pair, drawn from one seed (``build`` gives ``x, weight, bias``; RMSNorm ignores the bias, drawn last so
that ``x`` and ``weight`` are the same either way)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from hypothesis import strategies as st

F64 = torch.float64


@dataclass(frozen=True)
class Case:
    lead: tuple
    n: int
    eps: float
    offset: float
    spread: float
    affine: bool
    seed: int

    def build(self, dtype=F64):
        """x = randn · spread + offset [*lead, n]; weight = randn + 1 and bias = randn [n] when affine."""
        g = torch.Generator().manual_seed(self.seed)
        x = (torch.randn(*self.lead, self.n, generator=g, dtype=F64) * self.spread + self.offset).to(dtype)
        w = (torch.randn(self.n, generator=g, dtype=F64) + 1).to(dtype) if self.affine else None
        b = torch.randn(self.n, generator=g, dtype=F64).to(dtype) if self.affine else None
        return x, w, b


@st.composite
def cases(draw):
    """Leading dims up to 2 of size 1..3, rows of 1..33, three eps, offsets 0/3/−50, spreads 1/1e-3/20."""
    return Case(tuple(draw(st.lists(st.integers(1, 3), max_size=2))), draw(st.integers(1, 33)),
                draw(st.sampled_from([1e-5, 1e-6, 0.1])), draw(st.sampled_from([0.0, 3.0, -50.0])),
                draw(st.sampled_from([1.0, 1e-3, 20.0])), draw(st.booleans()), draw(st.integers(0, 2**31 - 1)))
