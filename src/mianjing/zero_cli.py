"""``mianjing zero``: model-state memory and communication per ZeRO stage.

Formulas (ZeRO, arXiv 1910.02054 §5 and §7), Ψ parameters, N_d ranks, K optimizer bytes/param,
16-bit parameters and gradients:

    DP (2+2+K)Ψ · ZeRO-1 4Ψ + KΨ/N_d · ZeRO-2 2Ψ + (2+K)Ψ/N_d · ZeRO-3 (2+2+K)Ψ/N_d

Communication per rank per step: 2Ψ, 2Ψ, 2Ψ, 3Ψ elements (a ring sends (N_d-1)/N_d of that).
torch is not imported; the numbers come from ``impls.distributed.memory`` (sympy).
"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table


def _fmt_gb(x: float) -> str:
    if x == 0:
        return "0"
    return f"{x:,.2f}" if x >= 0.01 else f"{x:.2e}"


def run(params: float, gpus: int, optimizer_bytes: int = 12, console: Console | None = None) -> None:
    """Print the per-stage table for ``params`` parameters on ``gpus`` data-parallel ranks."""
    if params <= 0:
        raise ValueError(f"--params must be positive, got {params}")
    if gpus < 1:
        raise ValueError(f"--gpus must be at least 1, got {gpus}")
    if optimizer_bytes < 0:
        raise ValueError(f"--optimizer-bytes must be >= 0, got {optimizer_bytes}")
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
