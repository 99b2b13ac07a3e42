"""Mixed-precision Adam with fp32 master weights, written so every tensor it holds can be counted.

Per parameter the textbook accounting (ZeRO §3.1) is

    2 (16-bit weight) + 2 (16-bit gradient) + 4 (fp32 master) + 4 (fp32 m) + 4 (fp32 v) = 16 bytes.

The step below is the plain PyTorch way to do it:

    1. backward fills the 16-bit gradients g16 (2 B/param);
    2. g32 = g16.float() is attached to the fp32 master copy (4 B/param more, transient);
    3. Adam updates the master and its moments m, v in fp32;
    4. the master is copied back into the 16-bit weights; g16 and g32 are freed.

So the persistent state between steps is 2 + 4 + 4 + 4 = 14 B/param, 16 B/param at the end of
backward, and 20 B/param while the fp32 gradient copy and the 16-bit gradient coexist (step 2-3),
unless the upcast is done bucket by bucket or gradients are accumulated in fp32 from the start
(then g16 is never materialised and the peak is 2 + 4 + 12 = 18 B/param).
"""

from __future__ import annotations

from typing import Iterable

import torch
from torch import nn


class MixedPrecisionAdam:
    """Adam on fp32 master copies of a 16-bit model: ``m_t = β1 m + (1-β1) g``,
    ``v_t = β2 v + (1-β2) g²``, ``θ ← θ - lr·m̂/(√v̂ + ε)`` in fp32, then ``θ16 ← θ.to(16-bit)``."""

    def __init__(self, params: Iterable[nn.Parameter], lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8):
        self.params16 = [p for p in params if p.requires_grad]
        if not self.params16:
            raise ValueError("no trainable parameters")
        bad = [p.dtype for p in self.params16 if p.dtype not in (torch.float16, torch.bfloat16)]
        if bad:
            raise TypeError(f"model parameters must be fp16/bf16, got {bad[0]}")
        self.master = [p.detach().clone().float().requires_grad_(True) for p in self.params16]
        self.inner = torch.optim.Adam(self.master, lr=lr, betas=betas, eps=eps, foreach=False)
        self.phases: dict[str, dict[str, int]] = {}

    # -- accounting -----------------------------------------------------------------
    def held_bytes(self) -> dict[str, int]:
        """Bytes of every tensor this set-up holds right now, by role (numel · element_size)."""

        def nbytes(ts):
            return sum(t.numel() * t.element_size() for t in ts if t is not None)

        moments = [v for st in self.inner.state.values() for k, v in st.items() if k in ("exp_avg", "exp_avg_sq")]
        steps = [v for st in self.inner.state.values() for k, v in st.items() if k == "step"]
        return {
            "params16": nbytes(self.params16),
            "grads16": nbytes(p.grad for p in self.params16),
            "master32": nbytes(self.master),
            "master_grads32": nbytes(p.grad for p in self.master),
            "adam_moments32": nbytes(moments),
            "step_counters": nbytes(steps),
        }

    def _record(self, phase: str) -> None:
        self.phases[phase] = self.held_bytes()

    # -- the step -------------------------------------------------------------------
    @torch.no_grad()
    def step(self) -> None:
        self._record("after_backward")
        for p16, p32 in zip(self.params16, self.master):
            p32.grad = None if p16.grad is None else p16.grad.float()
        self._record("grads_upcast")
        self.inner.step()
        self._record("after_adam_update")
        for p16, p32 in zip(self.params16, self.master):
            p16.copy_(p32)
            p16.grad = None
            p32.grad = None
        self._record("between_steps")


def tiny_bf16_model(seed: int = 0, dtype: torch.dtype = torch.bfloat16) -> nn.Sequential:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(23, 31), nn.GELU(), nn.Linear(31, 7)).to(dtype)
