"""``mianjing plan``: the DP × TP × PP (× CP) layouts of a model on a cluster, with memory and time.

    mianjing plan --model llama-3-70b --gpus 64 --gpus-per-node 8 [--zero 1] [--seq 8192] [--batch 128]
                  [--cluster dgx-h100] [--top 8]

Every layout that can be formed is evaluated by ``impls.parallel.planner``: model states from the ZeRO
calculator (``mianjing zero``'s numbers), activations from Korthikanti's formula times the micro-batches
the 1F1B / interleaved schedule keeps in flight, step time from counted FLOPs and an α–β model of every
collective over the link its group crosses. For each (dp, tp, pp, cp) the fastest fitting choice of
micro-batch size, interleaving and recomputation is shown; layouts that fit in no variant are listed
with what they would need. torch is not imported.
"""

from __future__ import annotations

from rich.console import Console

from .kv_cli import KVInputError, positive_int


class PlanInputError(KVInputError):
    """A bad argument: one line, exit status 2."""


def _impl():
    try:
        from impls.inference import kv_cache
        from impls.parallel import planner
    except ImportError:  # run from outside the repository root
        import sys
        from pathlib import Path

        sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
        from impls.inference import kv_cache
        from impls.parallel import planner
    return kv_cache, planner


def _int(flag: str, value) -> int:
    try:
        return positive_int(flag, value)
    except KVInputError as exc:
        raise PlanInputError(str(exc)) from None


def inputs(model: str, gpus, gpus_per_node, zero, seq, batch, cluster: str):
    """(spec, cluster, gpus, seq, batch, zero) after validating every argument (PlanInputError otherwise)."""
    kv, planner = _impl()
    try:
        cfg = kv.preset(model)
    except KeyError as exc:
        raise PlanInputError(f"--model: {exc.args[0]}") from None
    if cfg.attention != "gqa":
        raise PlanInputError(f"--model {model}: the planner covers dense MHA/GQA models, not {cfg.kind}")
    if cluster not in planner.CLUSTERS:
        raise PlanInputError(f"--cluster must be one of {', '.join(planner.CLUSTERS)}, got {cluster!r}")
    n, per_node = _int("--gpus", gpus), _int("--gpus-per-node", gpus_per_node)
    s, b = _int("--seq", seq), _int("--batch", batch)
    z = str(zero).strip()
    if z not in ("0", "1", "2", "3"):
        raise PlanInputError(f"--zero must be 0, 1, 2 or 3, got {z!r}")
    if n > per_node and n % per_node:
        raise PlanInputError(f"--gpus {n} is not a whole number of {per_node}-GPU nodes")
    if n > 100_000:
        raise PlanInputError(f"--gpus {n} is absurd (more than 100,000)")
    if s > 1 << 22:
        raise PlanInputError(f"--seq {s} is absurd (more than 4M tokens)")
    base = planner.CLUSTERS[cluster]
    from dataclasses import replace

    return planner.spec_from_config(cfg), replace(base, gpus_per_node=per_node), n, s, b, int(z)


def _gb(x: float) -> str:
    return f"{x / 1e9:,.1f}"


def run(model: str, gpus, gpus_per_node=8, zero=1, seq=8192, batch=128, cluster: str = "dgx-h100", top=8,
        console: Console | None = None) -> None:
    """Print the best layouts and the ones that do not fit; PlanInputError (one line) on bad input."""
    spec, cl, n, s, b, z = inputs(model, gpus, gpus_per_node, zero, seq, batch, cluster)
    k = _int("--top", top)
    _, planner = _impl()
    fits, no = planner.plan(spec, cl, n, seq=s, global_batch=b, zero=z)
    console = console or Console(highlight=False)
    psi = spec.total_params(s)
    console.print(f"{spec.name}: {psi / 1e9:.2f}B parameters on {n} GPUs ({cl.name}, {cl.gpus_per_node} per node, "
                  f"{cl.memory / 1e9:g} GB each), sequence {s}, global batch {b} sequences, ZeRO-{z}",
                  markup=False, soft_wrap=True)
    console.print("assumed: bf16 weights and grads + fp32 Adam (16 B/param before ZeRO), GEMMs at 60% of peak, "
                  f"{planner.USABLE:.0%} of HBM usable, NVLink {cl.intra.bandwidth / 1e9:g} GB/s, "
                  f"IB {cl.inter.bandwidth / 1e9:g} GB/s per GPU; "
                  "activations by Korthikanti's GPT-layer formula (selective recomputation = FlashAttention's)",
                  markup=False, soft_wrap=True)
    if not fits:
        console.print("no layout fits:", markup=False)
    else:
        console.print(f"fastest {min(k, len(fits))} of {len(fits)} layouts that fit (per GPU; step = one optimizer step):",
                      markup=False)
    for i, pl in enumerate(fits[:k], start=1):
        comm = sum(v for key, v in pl.time.items() if "comm" in key)
        acts = pl.memory["activations"] + pl.memory.get("logits", 0.0)
        links = ", ".join(f"{x} {pl.links[x]}" for x in ("tp", "cp", "dp", "pp")
                          if getattr(pl.layout, {"tp": "t", "cp": "c", "dp": "d", "pp": "p"}[x]) > 1)
        console.print(f"{i:>3}. {pl.layout.label():<22} b={pl.layout.b} recompute={pl.layout.recompute:<9} "
                      f"{_gb(pl.total_memory)} GB (states {_gb(pl.memory['model states'])} + activations {_gb(acts)})  "
                      f"step {pl.step_time:.2f} s = compute {pl.time['compute']:.2f} + bubble "
                      f"{pl.time['pipeline bubble']:.2f} + comm {comm:.2f}  MFU {pl.mfu(cl):.1%}  [{links or 'one GPU'}]",
                      markup=False, soft_wrap=True)
    if no:
        console.print(f"{len(no)} layouts do not fit in any variant (smallest-memory variant shown):", markup=False)
        for pl in no[:k]:
            console.print(f"  {pl.why_not()}", markup=False, soft_wrap=True)
