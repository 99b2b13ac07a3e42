"""Measured: the bytes a bf16/fp32-master Adam set-up really allocates, phase by phase.

Allocated bytes come from the CUDA allocator on a GPU and from an allocation meter (every tensor
storage created and not yet freed) on the CPU, read at each phase of a real step -- not from the
optimizer's bookkeeping, which is only compared with them. A separate test checks the set-up is a
correct Adam step against torch.optim.Adam on an fp32 copy.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from impls.distributed.mixed_precision import MixedPrecisionAdam, tiny_bf16_model
from impls.rl.logprobs import LiveTensorBytes


def _one_step(dtype=torch.bfloat16, device="cpu", steps: int = 1):
    model = tiny_bf16_model(dtype=dtype).to(device)
    psi = sum(p.numel() for p in model.parameters())
    opt = MixedPrecisionAdam(model.parameters(), lr=1e-2)
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(8, 23, generator=gen).to(device=device, dtype=dtype)
    y = torch.randn(8, 7, generator=gen).to(device=device, dtype=dtype)
    for _ in range(steps):
        nn.functional.mse_loss(model(x).float(), y.float()).backward()
        opt.step()
    return model, opt, psi


class _Meter:
    """Bytes allocated to tensors right now and the high-water mark since ``reset_peak``: the CUDA caching
    allocator's counters on a GPU, :class:`LiveTensorBytes` (every tensor storage created and not yet freed)
    elsewhere. Nothing is taken from the optimizer's own bookkeeping."""

    def __init__(self, device):
        self.cuda = torch.device(device).type == "cuda"
        self.mode = None if self.cuda else LiveTensorBytes()

    def __enter__(self):
        if self.cuda:
            torch.cuda.synchronize()
            self.base = torch.cuda.memory_allocated()
        else:
            self.mode.__enter__()
            self.base = 0
        return self

    def __exit__(self, *exc):
        if not self.cuda:
            self.mode.__exit__(*exc)

    def current(self) -> int:
        if self.cuda:
            torch.cuda.synchronize()
            return torch.cuda.memory_allocated() - self.base
        return self.mode.current

    def peak(self) -> int:
        if self.cuda:
            torch.cuda.synchronize()
            return torch.cuda.max_memory_allocated() - self.base
        return self.mode.peak

    def reset_peak(self) -> None:
        if self.cuda:
            torch.cuda.reset_peak_memory_stats()
        else:
            self.mode.peak = self.mode.current


def _measured_step(dtype, device, layers: int = 32, width: int = 64):
    """Two steps of a ``layers``-deep stack of ``width x width`` 16-bit linear maps (no biases: every tensor a
    multiple of the CUDA allocator's 512-byte blocks); allocated bytes at each phase of the second step and the
    peak inside it, all built and run under the meter."""
    measured: dict[str, int] = {}
    with _Meter(device) as meter:

        class Probed(MixedPrecisionAdam):
            def _record(self, phase):
                super()._record(phase)
                measured[phase] = meter.current()
                if phase == "after_backward":
                    meter.reset_peak()
                elif phase == "between_steps":
                    measured["peak_inside_step"] = meter.peak()

        torch.manual_seed(0)
        model = nn.Sequential(*[nn.Linear(width, width, bias=False) for _ in range(layers)]).to(device, dtype)
        x = torch.randn(4, width, device=device).to(dtype)
        opt = Probed(model.parameters(), lr=1e-2)
        for _ in range(2):
            model(x).float().pow(2).mean().backward()
            opt.step()
        counters = opt.phases["between_steps"]["step_counters"]  # Adam's 0-dim `step` tensors
        extra = x.numel() * x.element_size() + (0 if meter.cuda else counters)  # CUDA: counters live on the CPU
    psi = sum(p.numel() for p in model.parameters())
    per_param = {k: (v - extra) / psi for k, v in measured.items()}
    return per_param, psi, opt.phases, width * width


@pytest.mark.claim("zero.mixed-adam-measured-16", "zero.mixed-adam-16-bytes-7b")
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_bytes_per_param_by_phase(dtype, device, evidence):
    per, psi, book, largest = _measured_step(dtype, device)
    # allocated bytes, phase by phase (the second step: Adam's moments exist)
    evidence.quote("bytes/param at the end of backward", quoted=16, measured=per["after_backward"], digits=2)
    evidence.quote("bytes/param after the Adam update", quoted=20, measured=per["after_adam_update"], digits=2)
    evidence.quote("bytes/param between steps", quoted=14, measured=per["between_steps"], digits=2)
    # the peak inside the step: the 20 above plus Adam's scratch for one tensor at a time (a few fp32 buffers)
    scratch = per["peak_inside_step"] - per["after_adam_update"]
    assert 0 <= scratch <= 4 * 4 * largest / psi + 1e-9, (per, largest, psi)
    # the optimizer's own bookkeeping names the same bytes, role by role
    assert sum(book["after_backward"].values()) - book["after_backward"]["step_counters"] == 16 * psi
    up = book["after_adam_update"]
    assert up["adam_moments32"] == 8 * psi and up["master_grads32"] == 4 * psi and up["grads16"] == 2 * psi
    evidence[str(dtype).removeprefix("torch.")] = {"psi": psi, "bytes_per_param_step2": per,
                                                   "adam_scratch_bytes_per_param": scratch}
    evidence["meter"] = "CUDA memory_allocated" if torch.device(device).type == "cuda" else "LiveTensorBytes"
    evidence["counterexample"] = {"phase": "after_adam_update", "bytes_per_param": per["after_adam_update"],
                                  "extra": "fp32 copy of the gradients (4 B/param)"}


@pytest.mark.claim("zero.mixed-adam-measured-16")
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_the_setup_is_a_correct_adam_step(dtype, device):
    """Two steps (Adam's first step is sign(g)·lr whatever |g|, so one step cannot show a gradient that was
    rounded on its way to the fp32 master) against torch.optim.Adam on an fp32 copy fed the 16-bit gradients."""
    model, _, _ = _one_step(dtype, device, steps=2)
    ref = tiny_bf16_model(dtype=dtype).to(device)
    ref32 = [p.detach().float().clone().requires_grad_(True) for p in ref.parameters()]
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(8, 23, generator=gen).to(device=device, dtype=dtype)
    y = torch.randn(8, 7, generator=gen).to(device=device, dtype=dtype)
    adam = torch.optim.Adam(ref32, lr=1e-2)
    for _ in range(2):
        nn.functional.mse_loss(ref(x).float(), y.float()).backward()
        with torch.no_grad():
            for p16, p32 in zip(ref.parameters(), ref32):
                p32.grad = p16.grad.float()
                p16.grad = None
            adam.step()
            for p16, p32 in zip(ref.parameters(), ref32):
                p16.copy_(p32)
    for got, want in zip(model.parameters(), ref32):
        assert torch.equal(got, want.detach().to(dtype))
    with pytest.raises(TypeError, match="fp16/bf16"):
        MixedPrecisionAdam(nn.Linear(2, 2).parameters())
