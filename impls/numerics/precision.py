"""Floating-point formats as torch implements them, BF16 conversion, loss scaling and master weights.

* ``layout(dtype)``: sign / exponent / mantissa bits read from the bit patterns of ±1.0 and 2.0 (the
  exponent's lowest bit sits just above the mantissa), plus the range and epsilon from ``torch.finfo``.
* ``bf16_round_bits`` and ``bf16_truncate``: two ways to turn an fp32 into a bf16 bit pattern. Round to
  nearest, ties to even, adds 0x7FFF plus the lowest kept bit before dropping the low 16 bits (NaNs kept
  quiet); truncation just drops them, which rounds toward zero and can turn a NaN into ±∞.
* ``LossScaler``: multiply the loss by S before backward so small gradients stay above the smallest
  subnormal (fp16: 2^-24 ≈ 6.0e-8; anything below half of it, 2^-25 ≈ 3.0e-8, rounds to 0), divide the
  gradients by S in fp32 before the update. Static: S fixed.
  Dynamic (as in Micikevicius et al. 2018 and torch.amp.GradScaler): skip the step and halve S when a
  gradient overflows to inf/NaN, double S after ``growth_interval`` clean steps.
* ``sgd_run``: many small SGD updates applied either to 16-bit weights directly or to an fp32 master
  copy that is rounded to 16 bits for every forward.
* ``running_sum``: a dot product's accumulation done left to right in a chosen dtype, every partial sum
  rounded (what an FP16 accumulator does, against the FP32 accumulation of tensor cores).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

INT_VIEW = {8: torch.uint8, 16: torch.int16, 32: torch.int32, 64: torch.int64}


def bits_of(x: float, dtype: torch.dtype) -> int:
    """The bit pattern of ``x`` stored as ``dtype``, as an unsigned integer."""
    width = torch.finfo(dtype).bits
    v = int(torch.tensor([x], dtype=torch.float64).to(dtype).view(INT_VIEW[width]).item())
    return v & ((1 << width) - 1)


@dataclass(frozen=True)
class Layout:
    bits: int
    sign: int
    exponent: int
    mantissa: int
    max: float
    smallest_normal: float
    smallest_subnormal: float
    eps: float


def layout(dtype: torch.dtype) -> Layout:
    """Field widths measured from bit patterns; ranges from torch.finfo and one subnormal probe."""
    fi = torch.finfo(dtype)
    one, two, minus_one = bits_of(1.0, dtype), bits_of(2.0, dtype), bits_of(-1.0, dtype)
    mantissa = ((two ^ one) & -(two ^ one)).bit_length() - 1        # lowest bit that changes 1.0 -> 2.0
    sign_bit = (minus_one ^ one).bit_length() - 1
    exponent = sign_bit - mantissa
    sub = float(torch.tensor([1], dtype=INT_VIEW[fi.bits]).view(dtype).float().item())  # bit pattern 0…01
    return Layout(fi.bits, fi.bits - sign_bit, exponent, mantissa, float(fi.max), float(fi.smallest_normal),
                  sub, float(fi.eps))


def bf16_round_bits(x: Tensor) -> Tensor:
    """fp32 -> bf16 bit patterns (as int32 in the low 16 bits), round to nearest even; NaN stays NaN."""
    b = x.float().contiguous().view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    rounded = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) & 0xFFFF
    nan = torch.isnan(x)
    return torch.where(nan, (b >> 16) | 0x0040, rounded).to(torch.int32)


def bf16_truncate(x: Tensor) -> Tensor:
    """fp32 -> bf16 by dropping the low 16 bits (round toward zero), as a bfloat16 tensor."""
    b = x.float().contiguous().view(torch.int32)
    return (b & ~0xFFFF).view(torch.float32).to(torch.bfloat16)


def bf16_from_bits(bits: Tensor) -> Tensor:
    return (bits.to(torch.int32) << 16).view(torch.float32).to(torch.bfloat16)


class LossScaler:
    """Static (``dynamic=False``) or dynamic loss scaling for 16-bit gradients."""

    def __init__(self, init_scale: float = 2.0 ** 16, dynamic: bool = True, growth_interval: int = 2000,
                 backoff: float = 0.5, growth: float = 2.0):
        self.scale, self.dynamic = init_scale, dynamic
        self.growth_interval, self.backoff, self.growth = growth_interval, backoff, growth
        self.clean_steps = 0
        self.skipped = 0

    def unscale(self, grads: list[Tensor]) -> list[Tensor] | None:
        """fp32 gradients divided by the scale, or None (step skipped) if any is inf/NaN."""
        g32 = [g.float() / self.scale for g in grads]
        finite = all(bool(torch.isfinite(g).all()) for g in g32)
        if not self.dynamic:
            return g32 if finite else None
        if not finite:
            self.scale *= self.backoff
            self.clean_steps = 0
            self.skipped += 1
            return None
        self.clean_steps += 1
        if self.clean_steps % self.growth_interval == 0:
            self.scale *= self.growth
        return g32


def sgd_run(w0: Tensor, grad_fn, lr: float, steps: int, dtype: torch.dtype, master: bool) -> Tensor:
    """``steps`` SGD updates w ← w − lr·g(w). With ``master`` the update goes to an fp32 copy and the model
    sees it rounded to ``dtype``; without, w is kept in ``dtype`` and every update is rounded into it."""
    w32 = w0.float().clone()
    w16 = w0.to(dtype)
    for _ in range(steps):
        g = grad_fn(w16.float())
        if master:
            w32 -= lr * g
            w16 = w32.to(dtype)
        else:
            w16 = (w16 - (lr * g).to(dtype)).to(dtype)
    return w16


def running_sum(x: Tensor, acc_dtype: torch.dtype) -> Tensor:
    """Σ_i x[..., i] added left to right with the running sum rounded to ``acc_dtype`` after every addition."""
    acc = torch.zeros(x.shape[:-1], dtype=acc_dtype, device=x.device)
    for i in range(x.shape[-1]):
        acc = (acc + x[..., i].to(acc_dtype)).to(acc_dtype)
    return acc
