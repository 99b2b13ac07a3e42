"""``mianjing zero``: model-state memory and communication per ZeRO stage.

Formulas (ZeRO, arXiv 1910.02054 §5 and §7), Ψ parameters, N_d ranks, K optimizer bytes/param,
16-bit parameters and gradients:

    DP (2+2+K)Ψ · ZeRO-1 4Ψ + KΨ/N_d · ZeRO-2 2Ψ + (2+K)Ψ/N_d · ZeRO-3 (2+2+K)Ψ/N_d

Communication per rank per step: 2Ψ, 2Ψ, 2Ψ, 3Ψ elements (a ring sends (N_d-1)/N_d of that).
torch is not imported; the numbers come from ``impls.distributed.memory`` (sympy).
"""

from __future__ import annotations

import math

from rich.console import Console
from rich.table import Table

MAX_PARAMS = 1e15  # a thousand times the largest dense models trained; beyond it the input is a typo
MAX_GPUS = 10**6


class ZeroInputError(ValueError):
    """A bad option value; the message is the one line the CLI prints (exit 2)."""


def parse_number(option: str, text: str, *, integer: bool = False) -> float:
    """``--params 7e9`` -> 7e9; NaN, infinities and non-numbers are refused with one line."""
    try:
        value = float(str(text).strip().replace("_", ""))
    except ValueError:
        raise ZeroInputError(f"{option} must be a number, not {text!r}") from None
    if not math.isfinite(value):
        raise ZeroInputError(f"{option} must be a finite number, not {text!r}")
    if integer and value != int(value):
        raise ZeroInputError(f"{option} must be a whole number, not {text!r}")
    return int(value) if integer else value


def validate(params: float, gpus: int, optimizer_bytes: int, gpu_memory_gb: float | None = None) -> None:
    if not (isinstance(params, (int, float)) and math.isfinite(params)) or params <= 0:
        raise ZeroInputError(f"--params must be positive, got {params:g}")
    if params < 1:
        raise ZeroInputError(f"--params must be at least 1 parameter, got {params:g}")
    if params > MAX_PARAMS:
        raise ZeroInputError(f"--params {params:.3g} is absurd (more than {MAX_PARAMS:.0e}); did you mean "
                             f"{params / 1e9:.3g}e9?" if params < 1e24 else f"--params {params:.3g} is absurd")
    if not isinstance(gpus, int) or gpus < 1:
        raise ZeroInputError(f"--gpus must be at least 1, got {gpus}")
    if gpus > MAX_GPUS:
        raise ZeroInputError(f"--gpus {gpus} is absurd (more than {MAX_GPUS:,} data-parallel ranks)")
    if gpus > params:
        raise ZeroInputError(f"--gpus {gpus} is more than --params {params:g}: a rank would hold less than one "
                             "parameter")
    if not isinstance(optimizer_bytes, int) or optimizer_bytes < 0:
        raise ZeroInputError(f"--optimizer-bytes must be >= 0, got {optimizer_bytes}")
    if optimizer_bytes > 64:
        raise ZeroInputError(f"--optimizer-bytes {optimizer_bytes} is absurd (Adam in fp32 needs 12 per parameter)")
    if gpu_memory_gb is not None and not (math.isfinite(gpu_memory_gb) and 0 < gpu_memory_gb <= 1e5):
        raise ZeroInputError(f"--gpu-memory-gb must be between 0 and 100000, got {gpu_memory_gb:g}")


def _fmt_gb(x: float) -> str:
    if x == 0:
        return "0"
    return f"{x:,.2f}" if x >= 0.01 else f"{x:.2e}"


def run(params: float, gpus: int, optimizer_bytes: int = 12, console: Console | None = None,
        gpu_memory_gb: float | None = None) -> None:
    """Print the per-stage table for ``params`` parameters on ``gpus`` data-parallel ranks; with
    ``gpu_memory_gb``, say which stages fit a device of that size (model states alone)."""
    validate(params, gpus, optimizer_bytes, gpu_memory_gb)
    try:
        from impls.distributed.memory import STAGE_LABELS, stage_table
    except ImportError:  # run from outside the repository root
        import sys
        from pathlib import Path

        sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
        from impls.distributed.memory import STAGE_LABELS, stage_table

    rows = stage_table(float(params), int(gpus), k=optimizer_bytes)
    console = console or Console()
    table = Table(
        title=(f"Model states per device: Ψ = {params:.4g} parameters, N_d = {gpus}, "
               f"K = {optimizer_bytes} (16-bit params and grads)"),
        caption="GB = 1e9 bytes. Comm: per rank per step in units of Ψ as the ZeRO paper counts it; "
                "ring bytes = (N_d-1)/N_d of it at 2 bytes/element. Activations not included.",
    )
    for col, justify in (("stage", "left"), ("bytes/param", "right"), ("GB / device", "right"),
                         ("vs DP", "right"), ("comm / rank", "right"), ("ring GB sent / rank", "right")):
        table.add_column(col, justify=justify, no_wrap=col in ("stage", "bytes/param"))
    for r in rows:
        table.add_row(
            STAGE_LABELS[r.stage],
            f"{r.bytes_per_param:.4g}",
            _fmt_gb(r.gb_per_device),
            f"{r.reduction_vs_dp:.3g}×",
            f"{r.comm_elements_per_rank / params:g}Ψ",
            _fmt_gb(r.ring_bytes_sent_per_rank / 1e9),
        )
    console.print(table)
    if gpu_memory_gb is not None:
        fits = [STAGE_LABELS[r.stage] for r in rows if r.gb_per_device <= gpu_memory_gb]
        z3 = next(r for r in rows if r.stage == "zero3")
        if fits:
            console.print(f"fits a {gpu_memory_gb:g} GB device (model states only): {', '.join(fits)}", soft_wrap=True)
        else:
            need = math.ceil(z3.gb_per_device * gpus / gpu_memory_gb)
            console.print(f"does not fit: even ZeRO-3 needs {_fmt_gb(z3.gb_per_device)} GB per device for model "
                          f"states alone, more than {gpu_memory_gb:g} GB; it needs N_d >= {need:,} such devices "
                          "(before activations)", soft_wrap=True)
