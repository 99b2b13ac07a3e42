"""``mianjing pp``: a pipeline schedule's timeline, bubble and in-flight micro-batches.

    mianjing pp --stages 4 --micro 8 --schedule 1f1b|gpipe|interleaved|zb-h1 [--chunks v]

The schedule comes from ``impls.parallel.pipeline`` and is placed by its exact simulator
(forward 1 unit, backward 2 units per micro-batch and device; ZB-H1 splits the backward into
B = 1 and W = 1). torch is not imported.
"""

from __future__ import annotations

from fractions import Fraction

from rich.console import Console


def _int(name: str, raw: str) -> int:
    try:
        return int(raw)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a whole number, got {raw!r}") from None


def run(stages: str | int, micro: str | int, schedule: str, chunks: str | int | None = None,
        console: Console | None = None) -> None:
    """Print the timeline of ``schedule``; ValueError (one line, naming the option) on bad input."""
    p, m = _int("--stages", stages), _int("--micro", micro)
    v = None if chunks is None else _int("--chunks", chunks)
    if schedule == "interleaved" and v is None:
        v = 2
    try:
        from impls.parallel.pipeline import run as simulate
    except ImportError:  # run from outside the repository root
        import sys
        from pathlib import Path

        sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
        from impls.parallel.pipeline import run as simulate

    if schedule == "zb-h1":
        tl = simulate(schedule, p, m, v or 1, t_f=1, t_b=1, t_w=1)
        units = "F = B = W = 1 time unit"
    else:
        tl = simulate(schedule, p, m, v or 1, t_f=1, t_b=2)
        units = "F = 1, B = 2 time units per micro-batch and device" + (f", {v} chunks: each chunk op 1/{v} of that" if v and v > 1 else "")
    console = console or Console(highlight=False)
    console.print(f"{schedule}: {p} stages, {m} micro-batches" + (f", {v} chunks per device" if v and v > 1 else "")
                  + f" ({units}; '·' = idle)", markup=False, soft_wrap=True)
    console.print(tl.render(), markup=False, soft_wrap=True)
    b = tl.bubble
    console.print(f"makespan {_fmt(tl.makespan)} units; bubble {_fmt(b)} = {float(b):.4f} of the device-time, "
                  f"{_fmt(tl.bubble_over_ideal)} = {float(tl.bubble_over_ideal):.4f} of the compute time", markup=False, soft_wrap=True)
    peaks = tl.peak_in_flight()
    unit = "chunk forwards" if v and v > 1 else "micro-batches"
    console.print(f"peak in-flight {unit} per device: {', '.join(map(str, peaks))}", markup=False, soft_wrap=True)


def _fmt(x: Fraction) -> str:
    return str(x.numerator) if x.denominator == 1 else f"{x.numerator}/{x.denominator}"
