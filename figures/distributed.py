"""Distributed-training figures: ZeRO's per-GPU memory by stage and number of GPUs.

Computed by ``impls/distributed/memory.py`` (the ZeRO paper's model-state formulas).
"""

from __future__ import annotations

from matplotlib.figure import Figure

from figures import L
from impls.distributed.memory import STAGES, model_state_bytes_num

PSI = 7.5e9  # the ZeRO paper's running example (§3.1, Figure 1): 7.5B parameters, mixed-precision Adam
GPUS = (1, 2, 4, 8, 16, 64)


def zero_memory_by_stage(lang: str) -> Figure:
    """Model-state memory per GPU (GB) for DP and ZeRO-1/2/3, 7.5B parameters, 1 to 64 GPUs."""
    names = {"dp": L(lang, "数据并行 DP", "DP"), "zero1": "ZeRO-1 (P_os)", "zero2": "ZeRO-2 (P_os+g)", "zero3": "ZeRO-3 (P_os+g+p)"}
    fig = Figure(figsize=(5.0, 3.8), layout="constrained")
    ax = fig.subplots()
    width = 0.2
    for i, stage in enumerate(STAGES):
        gb = [model_state_bytes_num(stage, PSI, n) / 1e9 for n in GPUS]
        xs = [j + (i - 1.5) * width for j in range(len(GPUS))]
        bars = ax.bar(xs, gb, width, label=names[stage], color=f"C{i}")
        if stage in ("zero1", "zero3"):  # on one GPU every stage holds the same: one number, over ZeRO-3
            labels = [f"{v:.0f}" if v >= 10 else f"{v:.1f}" for v in gb]
            ax.bar_label(bars, labels=[""] + labels[1:] if stage == "zero1" else labels, fontsize=9.5, padding=1)
    ax.set_xticks(range(len(GPUS)), [str(n) for n in GPUS])
    ax.set_xlabel(L(lang, "数据并行的 GPU 数 N_d", "data-parallel GPUs N_d"))
    ax.set_ylabel(L(lang, "每卡模型状态显存（GB）", "model states per GPU (GB)"))
    ax.set_title(L(lang, "7.5B 参数、混合精度 Adam\n（每参数 2+2+12 字节）", "7.5B parameters, mixed-precision Adam\n(2+2+12 bytes per parameter)"))
    ax.set_ylim(0, 1.5 * model_state_bytes_num("dp", PSI, 1) / 1e9)  # room for the legend above the DP bars
    ax.legend(ncols=2, loc="upper right")
    return fig
