"""Where Triton kernels can run, and how this repository runs them without a GPU.

Triton compiles kernels for CUDA (and ROCm) devices. With ``TRITON_INTERPRET=1`` set before the
kernel modules are imported, ``@triton.jit`` returns an interpreted function instead, which runs
the same kernel on CPU tensors (block by block, in numpy): slow, but the same program text, so
the CPU tests exercise the indexing, masking and arithmetic the GPU runs. ``verifiers/conftest.py``
sets it when the verifiers run on the CPU device.
"""

from __future__ import annotations

import torch

try:  # Triton ships wheels for Linux x86-64 / aarch64 only
    import triton
    import triton.language as tl

    HAVE_TRITON = True
    WHY_NOT = ""
except ImportError as exc:  # pragma: no cover - depends on the platform
    triton = tl = None
    HAVE_TRITON = False
    WHY_NOT = f"Triton is not installed ({exc}); it has wheels for Linux x86-64/aarch64 only"

__all__ = ["HAVE_TRITON", "WHY_NOT", "triton", "tl", "interpreting", "check_device"]


def interpreting() -> bool:
    """True when ``@triton.jit`` kernels run in Triton's CPU interpreter (``TRITON_INTERPRET=1``)."""
    if not HAVE_TRITON:
        return False
    from triton import knobs

    return bool(knobs.runtime.interpret)


def check_device(*tensors: torch.Tensor) -> None:
    """Raise one clear error when the kernels cannot run on these tensors' device."""
    if not HAVE_TRITON:
        raise RuntimeError(WHY_NOT)
    devices = {t.device for t in tensors}
    if len(devices) != 1:
        raise ValueError(f"all tensors must be on one device, got {sorted(map(str, devices))}")
    (dev,) = devices
    if interpreting():
        if dev.type != "cpu":
            raise RuntimeError("TRITON_INTERPRET=1 runs kernels on CPU tensors only; move the inputs to the CPU")
    elif dev.type != "cuda":
        raise RuntimeError(
            f"Triton kernels need CUDA tensors (got {dev}); for CPU tensors set TRITON_INTERPRET=1 "
            "before importing the kernel modules"
        )
