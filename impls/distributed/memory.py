"""Model-state memory, communication volume and activation memory of data-parallel training.

All formulas are sympy expressions so they can be printed, differentiated or solved; the
``*_num`` helpers evaluate them for numbers.

Model states per device (ZeRO, Rajbhandari et al. 2019, §3.1 and §5, Figure 1), with
Ψ parameters, ``p`` bytes per parameter, ``g`` bytes per gradient, ``K`` optimizer bytes per
parameter and ``N`` data-parallel ranks:

    DP      : (p + g + K) Ψ
    ZeRO-1  : (p + g) Ψ + K Ψ / N                        (P_os)
    ZeRO-2  : p Ψ + (g + K) Ψ / N                        (P_os+g)
    ZeRO-3  : (p + g + K) Ψ / N                          (P_os+g+p)

Mixed-precision Adam: p = g = 2 (fp16/bf16), K = 12 (fp32 master weights + two fp32 moments).

Communication per rank per step, in units of "elements moved" as the ZeRO paper counts them
(§7: an all-reduce = reduce-scatter + all-gather = 2Ψ): DP 2Ψ, ZeRO-1 2Ψ, ZeRO-2 2Ψ, ZeRO-3 3Ψ.
On a ring each collective of a full size-S buffer sends (N-1)/N of its paper volume per rank:
all-reduce 2(N-1)/N·S, reduce-scatter and all-gather (N-1)/N·S.

Activations per transformer layer (Korthikanti et al. 2022, §4 Eq. (1) and its parallel forms, §5), sequence s,
micro-batch b, hidden h, heads a, tensor-parallel size t, 16-bit activations and ``m`` bytes
per dropout-mask element (m = 1 in the paper):

    no parallelism            : sbh(32 + 2m) + as²b(4 + m)         = sbh(34 + 5as/h) at m = 1
    tensor parallel           : sbh(8 + 2m + 24/t) + as²b(4 + m)/t   (Eq. 2 at m = 1)
    tensor + sequence parallel: [sbh(32 + 2m) + as²b(4 + m)] / t
    + selective recompute     : sbh(32 + 2m)/t  (attention core recomputed; 34sbh/t at m = 1)
    full recompute            : 2sbh            (only the layer input is kept)
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

# ---------------------------------------------------------------------------------- symbols
Psi, N, K, p, g = sp.symbols("Psi N_d K p g", positive=True)
s, b, h, a, t, m = sp.symbols("s b h a t m", positive=True)

STAGES = ("dp", "zero1", "zero2", "zero3")
STAGE_LABELS = {"dp": "DP", "zero1": "ZeRO-1 (P_os)", "zero2": "ZeRO-2 (P_os+g)", "zero3": "ZeRO-3 (P_os+g+p)"}

# bytes per element of the common training dtypes
DTYPE_BYTES = {"fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2, "fp8": 1}


def _check_stage(stage: str) -> None:
    if stage not in STAGES:
        raise ValueError(f"stage must be one of {STAGES}, got {stage!r}")


# ------------------------------------------------------------------------- model states
def model_state_terms(stage: str) -> dict[str, sp.Expr]:
    """Per-device bytes of parameters, gradients and optimizer state for one ZeRO stage."""
    _check_stage(stage)
    shard_os = stage in ("zero1", "zero2", "zero3")
    shard_g = stage in ("zero2", "zero3")
    shard_p = stage == "zero3"
    return {
        "params": p * Psi / (N if shard_p else 1),
        "grads": g * Psi / (N if shard_g else 1),
        "optimizer": K * Psi / (N if shard_os else 1),
    }


def model_state_bytes(stage: str) -> sp.Expr:
    """Total model-state bytes per device: sum of :func:`model_state_terms`."""
    return sp.Add(*model_state_terms(stage).values())


def reduction_factor(stage: str) -> sp.Expr:
    """Memory of plain DP divided by memory of ``stage`` (ZeRO-1 with p=g=2, K=12: 16/(4+12/N))."""
    return sp.simplify(model_state_bytes("dp") / model_state_bytes(stage))


def _subs(expr: sp.Expr, psi: float, n: int, k: float = 12, param_bytes: float = 2, grad_bytes: float = 2) -> float:
    if n < 1:
        raise ValueError(f"N_d must be >= 1, got {n}")
    if psi <= 0:
        raise ValueError(f"Ψ must be positive, got {psi}")
    return float(expr.subs({Psi: psi, N: n, K: k, p: param_bytes, g: grad_bytes}))


def model_state_bytes_num(stage: str, psi: float, n: int, k: float = 12, param_bytes: float = 2,
                          grad_bytes: float = 2) -> float:
    """Numeric bytes per device, e.g. ``model_state_bytes_num("zero1", 7.5e9, 64) / 1e9 == 31.40625``."""
    return _subs(model_state_bytes(stage), psi, n, k, param_bytes, grad_bytes)


def reduction_factor_num(stage: str, n: int, k: float = 12, param_bytes: float = 2, grad_bytes: float = 2) -> float:
    return _subs(reduction_factor(stage), 1.0, n, k, param_bytes, grad_bytes)


# ------------------------------------------------------------------------ communication
def comm_volume(stage: str) -> dict[str, sp.Expr]:
    """Per-rank, per-step collective volume in the ZeRO paper's units (elements, full-buffer sizes).

    DP and ZeRO-1: all-reduce of gradients (2Ψ); ZeRO-1 may equally be done as reduce-scatter +
    all-gather of updated parameters (Ψ + Ψ). ZeRO-2: reduce-scatter of gradients (Ψ) +
    all-gather of parameters (Ψ). ZeRO-3: parameter all-gather in forward (Ψ) and again in
    backward (Ψ) + gradient reduce-scatter (Ψ) = 3Ψ.
    """
    _check_stage(stage)
    if stage == "dp":
        return {"all_reduce(grads)": 2 * Psi}
    if stage == "zero1":
        return {"reduce_scatter(grads)": Psi, "all_gather(params)": Psi}
    if stage == "zero2":
        return {"reduce_scatter(grads)": Psi, "all_gather(params)": Psi}
    return {"all_gather(params, fwd)": Psi, "all_gather(params, bwd)": Psi, "reduce_scatter(grads)": Psi}


def comm_volume_total(stage: str) -> sp.Expr:
    return sp.Add(*comm_volume(stage).values())


def ring_bytes_sent(collective: str, size: sp.Expr = sp.Symbol("S", positive=True), n: sp.Expr = N) -> sp.Expr:
    """Bytes one rank sends in a ring collective on a buffer of ``size`` bytes (size divisible by n).

    all_reduce: 2(n-1)/n·S (reduce-scatter then all-gather); reduce_scatter, all_gather:
    (n-1)/n·S, where S is the full (unsharded) buffer; broadcast (pipelined ring): (n-1)/n·S on
    average over ranks (the root sends S, the last rank sends nothing).
    """
    table = {
        "all_reduce": 2 * (n - 1) / n * size,
        "reduce_scatter": (n - 1) / n * size,
        "all_gather": (n - 1) / n * size,
        "broadcast": (n - 1) / n * size,
    }
    if collective not in table:
        raise ValueError(f"collective must be one of {sorted(table)}, got {collective!r}")
    return table[collective]


def ring_time(collective: str, size_bytes: float, n: int, bandwidth: float, latency: float = 0.0) -> float:
    """α-β cost of a ring collective: steps·α + bytes_sent/β (all-reduce takes 2(n-1) steps)."""
    steps = {"all_reduce": 2 * (n - 1), "reduce_scatter": n - 1, "all_gather": n - 1, "broadcast": n - 1}[collective]
    sent = float(ring_bytes_sent(collective, sp.Float(size_bytes), sp.Integer(n)))
    return steps * latency + sent / bandwidth


# --------------------------------------------------------------------------- activations
def activation_terms(dropout_mask_bytes: sp.Expr = m) -> dict[str, sp.Expr]:
    """Bytes of each tensor a transformer layer stores for backward (Korthikanti §4.1).

    16-bit activations (2 bytes), ``dropout_mask_bytes`` per mask element, no parallelism.
    """
    md = dropout_mask_bytes
    return {
        # attention block
        "attn.qkv_input": 2 * s * b * h,
        "attn.QK^T inputs (Q, K)": 4 * s * b * h,
        "attn.softmax_output": 2 * a * s**2 * b,
        "attn.softmax_dropout_mask": md * a * s**2 * b,
        "attn.dropout_output (for ·V)": 2 * a * s**2 * b,
        "attn.V": 2 * s * b * h,
        "attn.out_proj_input": 2 * s * b * h,
        "attn.out_dropout_mask": md * s * b * h,
        # MLP block (4h intermediate)
        "mlp.fc1_input": 2 * s * b * h,
        "mlp.gelu_input": 8 * s * b * h,
        "mlp.fc2_input": 8 * s * b * h,
        "mlp.dropout_mask": md * s * b * h,
        # two layer norms, each keeps its input
        "layernorm_inputs": 4 * s * b * h,
    }


def activation_bytes(parallel: str = "none", recompute: str = "none", dropout_mask_bytes: sp.Expr = m) -> sp.Expr:
    """Activation bytes per transformer layer.

    parallel: "none" | "tensor" | "tensor+sequence"; recompute: "none" | "selective" | "full".
    """
    terms = activation_terms(dropout_mask_bytes)
    total = sp.Add(*terms.values())
    core = terms["attn.softmax_output"] + terms["attn.softmax_dropout_mask"] + terms["attn.dropout_output (for ·V)"]
    # the parts that tensor parallelism does not split: layer-norm inputs, the attention and MLP
    # block inputs and the two dropout masks after the blocks (Korthikanti §4.2: 10sbh at m=1)
    replicated = (terms["layernorm_inputs"] + terms["attn.qkv_input"] + terms["mlp.fc1_input"]
                  + terms["attn.out_dropout_mask"] + terms["mlp.dropout_mask"])
    if parallel not in ("none", "tensor", "tensor+sequence"):
        raise ValueError(f"parallel must be none, tensor or tensor+sequence, got {parallel!r}")
    if recompute not in ("none", "selective", "full"):
        raise ValueError(f"recompute must be none, selective or full, got {recompute!r}")
    if recompute == "full":
        return 2 * s * b * h / (t if parallel == "tensor+sequence" else 1)
    if recompute == "selective":
        total = total - core
    if parallel == "none":
        return sp.expand(total)
    if parallel == "tensor":
        return sp.expand(replicated + (total - replicated) / t)
    return sp.expand(total / t)


def activation_bytes_num(seq: int, micro_batch: int, hidden: int, heads: int, tp: int = 1,
                         parallel: str = "none", recompute: str = "none", dropout_mask_bytes: float = 1) -> float:
    expr = activation_bytes(parallel, recompute, sp.Float(dropout_mask_bytes))
    return float(expr.subs({s: seq, b: micro_batch, h: hidden, a: heads, t: tp}))


# ------------------------------------------------------------------------- paper tables
@dataclass(frozen=True)
class StageRow:
    stage: str
    bytes_per_param: float
    gb_per_device: float
    reduction_vs_dp: float
    comm_elements_per_rank: float
    ring_bytes_sent_per_rank: float


def stage_table(psi: float, n: int, k: float = 12, param_bytes: float = 2, grad_bytes: float = 2,
                comm_bytes: float = 2) -> list[StageRow]:
    """Numbers behind ``mianjing zero``: one row per stage (GB = 1e9 bytes, as in the paper).

    ``comm_elements_per_rank`` is the paper's volume (2Ψ / 2Ψ / 2Ψ / 3Ψ, elements);
    ``ring_bytes_sent_per_rank`` is what a ring actually sends: (N-1)/N of it, times ``comm_bytes``.
    """
    if n < 1:
        raise ValueError(f"gpus must be >= 1, got {n}")
    if psi <= 0:
        raise ValueError(f"params must be positive, got {psi}")
    rows = []
    dp = model_state_bytes_num("dp", psi, n, k, param_bytes, grad_bytes)
    for st in STAGES:
        total = model_state_bytes_num(st, psi, n, k, param_bytes, grad_bytes)
        vol = float(comm_volume_total(st).subs({Psi: psi}))
        rows.append(StageRow(st, total / psi, total / 1e9, dp / total, vol, vol * comm_bytes * (n - 1) / n))
    return rows
