"""``mianjing train-cost``: FLOPs, wall-clock time and GPU-hours of pretraining a model, at an assumed MFU.

    C = D · (6·N_mm + 12·L·H·d_h·T)          (PaLM, Appendix B)
    t = C / (n_gpu · peak · MFU)              GPU-hours = n_gpu · t / 3600
    HFU = MFU · (C + recomputed FLOPs) / C    (Korthikanti et al. 2022)

N_mm counts every weight a token multiplies by (attention and MLP projections, the output head; the embedding
is a lookup). Shapes come from ``impls.ml.counting`` (checked there against each model's published parameter
count and against ``FlopCounterMode``), peaks from ``impls.inference.roofline`` (dense BF16, NVIDIA datasheets),
and the caption shows the MFU that published runs imply, so the assumption can be judged. torch is not imported.
"""

from __future__ import annotations

import math

from rich import box
from rich.console import Console
from rich.table import Table

MAX_TOKENS = 1e16     # a hundred times the largest published pretraining corpora
MAX_GPUS = 10**6
RECOMPUTE = ("none", "selective", "full")


class TrainCostInputError(ValueError):
    """A bad option value; the message is the one line the CLI prints (exit 2)."""


def _impl():
    try:
        from impls.ml import compute, counting
    except ImportError:  # run from outside the repository root
        import sys
        from pathlib import Path

        sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
        from impls.ml import compute, counting
    return compute, counting


def _number(option: str, text, *, integer: bool = False) -> float:
    raw = str(text).strip().replace("_", "")
    try:
        value = float(raw)
    except ValueError:
        raise TrainCostInputError(f"{option} must be a number, not {raw!r}") from None
    if not math.isfinite(value):
        raise TrainCostInputError(f"{option} must be a finite number, not {raw!r}")
    if integer and value != int(value):
        raise TrainCostInputError(f"{option} must be a whole number, not {raw!r}")
    return int(value) if integer else value


def parse(model: str, tokens, gpus, gpu: str, mfu, seq=None, recompute: str = "none") -> dict:
    """The validated arguments (model config, GPU, numbers); TrainCostInputError names the bad option."""
    compute, counting = _impl()
    try:
        cfg = counting.model(model)
    except KeyError as exc:
        raise TrainCostInputError(f"--model: {exc.args[0]}") from None
    try:
        device = compute.gpu(gpu)
    except KeyError as exc:
        raise TrainCostInputError(f"--gpu: {exc.args[0]}") from None
    d = _number("--tokens", tokens)
    if not 1 <= d <= MAX_TOKENS:
        raise TrainCostInputError(f"--tokens must be between 1 and {MAX_TOKENS:.0e}, got {d:g}")
    n = _number("--gpus", gpus, integer=True)
    if not 1 <= n <= MAX_GPUS:
        raise TrainCostInputError(f"--gpus must be between 1 and {MAX_GPUS:,}, got {n}")
    u = _number("--mfu", mfu)
    if not 0 < u <= 1:
        raise TrainCostInputError(f"--mfu is a fraction of peak: 0 < mfu <= 1, got {u:g} (40% is 0.4)")
    t = cfg.context if seq is None else _number("--seq", seq, integer=True)
    if t < 1:
        raise TrainCostInputError(f"--seq must be a positive whole number, got {t}")
    if recompute not in RECOMPUTE:
        raise TrainCostInputError(f"--recompute must be one of {', '.join(RECOMPUTE)}, got {recompute!r}")
    return {"cfg": cfg, "device": device, "tokens": d, "gpus": n, "mfu": u, "seq": t, "recompute": recompute}


def _count(x: float) -> str:
    for unit, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6)):
        if x >= scale:
            return f"{x / scale:,.4g}{unit}"
    return f"{x:,.0f}"


def _e(x: float) -> str:
    return f"{x:.3e}"


def _duration(seconds: float) -> str:
    if seconds < 3600:
        return f"{seconds / 60:,.1f} min"
    if seconds < 86400 * 2:
        return f"{seconds / 3600:,.1f} h"
    return f"{seconds / 86400:,.1f} days"


def _hours(h: float) -> str:
    return f"{h / 1e6:,.3f} M" if h >= 1e5 else f"{h:,.0f}"


def rows(model: str, tokens, gpus, gpu: str, mfu, seq=None, recompute: str = "none") -> tuple[object, list]:
    """(the TrainCost, the table's rows as (quantity, formula, value) triples)."""
    compute, _ = _impl()
    a = parse(model, tokens, gpus, gpu, mfu, seq, recompute)
    c = compute.train_cost(a["cfg"], a["tokens"], a["gpus"], a["device"], a["mfu"], a["seq"], a["recompute"])
    dense_only = c.seconds * c.dense_flops_per_token / (c.dense_flops_per_token + c.attention_flops_per_token)
    out = [
        ("parameters", "all weights", f"{c.params / 1e9:,.3f} B"),
        ("N (matmul weights)", "linear layers + output head", f"{c.matmul_params / 1e9:,.3f} B"),
        ("tokens per parameter", "D / parameters (Chinchilla-optimal: about 20)", f"{c.tokens / c.params:,.1f}"),
        ("FLOPs / token, dense", "6·N", _e(c.dense_flops_per_token)),
        ("FLOPs / token, attention", f"12·L·H·d_h·T, T = {c.seq:,}", _e(c.attention_flops_per_token)),
        ("model FLOPs C", "D·(6N + 12LHd_hT)", _e(c.model_flops)),
        ("peak per GPU", f"{c.gpu.name}, dense BF16", f"{c.gpu.peak_flops / 1e12:,.1f} TFLOP/s"),
        ("achieved per GPU", "peak · MFU", f"{c.gpu.peak_flops * c.mfu / 1e12:,.1f} TFLOP/s"),
        ("throughput", "tokens / (GPU · s)", f"{c.tokens_per_gpu_second:,.0f}"),
        ("wall-clock", "C / (n_gpu · peak · MFU)", _duration(c.seconds)),
        ("GPU-hours", "n_gpu · t / 3600", _hours(c.gpu_hours)),
        ("wall-clock, 6ND only", "the rule of thumb (no attention term)", _duration(dense_only)),
    ]
    if c.recompute != "none":
        out.append((f"HFU ({c.recompute} recompute)", "MFU · hardware FLOPs / model FLOPs", f"{c.hfu:.3f}"))
    return c, out


def run(model: str, tokens, gpus, gpu: str, mfu, seq=None, recompute: str = "none",
        console: Console | None = None) -> None:
    """Print the table; raises TrainCostInputError for a bad argument."""
    compute, _ = _impl()
    c, table_rows = rows(model, tokens, gpus, gpu, mfu, seq, recompute)
    implied = {r.model: compute.published_mfu(r) for r in compute.PUBLISHED_RUNS}
    llama2 = [v for k, v in implied.items() if k.startswith("llama-2")]
    console = console or Console()
    table = Table(
        box=box.SIMPLE_HEAD, padding=(0, 1),
        title=(f"Pretraining {c.model.name} on {_count(c.tokens)} tokens with {c.gpus:,} × {c.gpu.name} "
               f"at MFU {c.mfu:.2f} (assumed)"),
        caption=(f"Assumption: MFU {c.mfu:.2f}. Published runs imply {min(llama2):.2f}–{max(llama2):.2f} "
                 f"(Llama 2 7B–70B, A100, Table 2 of the paper), {implied['llama-3.1-405b']:.2f} "
                 f"(Llama 3.1 405B, H100; the paper's Table 4 reports 0.38–0.43) and only "
                 f"{implied['llama-3-8b']:.2f} (Llama 3 8B's model-card GPU-hours). "
                 f"C = D·(6N + 12·L·H·d_h·T), PaLM Appendix B. Config: {c.model.source}"),
    )
    for col in ("quantity", "formula", "value"):
        table.add_column(col, justify="right" if col == "value" else "left", overflow="fold")
    for r in table_rows:
        table.add_row(*r)
    console.print(table)
