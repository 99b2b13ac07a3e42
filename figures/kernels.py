"""Figures for the kernel entries (topic scale/kernels), drawn from benchmarks/results/*.json."""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"

_TEXT = {
    "zh": {"peak": "峰值内存 / 朴素", "time": "时间 / 朴素", "naive": "朴素 [N,V]", "fused": "融合，块",
           "title": "融合 log-prob + 熵（前向 + 反向）", "target_mem": "目标 ≤ 1/8", "target_time": "目标 ≤ 1.3×",
           "missing": "尚无基准结果：运行 python benchmarks/fused_logprobs.py"},
    "en": {"peak": "peak memory / naive", "time": "time / naive", "naive": "naive [N,V]", "fused": "fused, chunk",
           "title": "Fused log-prob + entropy (forward + backward)", "target_mem": "target ≤ 1/8",
           "target_time": "target ≤ 1.3×", "missing": "no benchmark result yet: run python benchmarks/fused_logprobs.py"},
}


def fused_logprob_memory(lang: str):
    """Peak memory and time of each variant relative to the naive computation, from fused_logprobs.json."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    t = _TEXT["zh" if lang == "zh" else "en"]
    fig = Figure(figsize=(5.0, 5.0), layout="constrained")
    path = RESULTS / "fused_logprobs.json"
    if not path.is_file():
        ax = fig.add_subplot(1, 1, 1)
        ax.axis("off")
        ax.text(0.5, 0.5, t["missing"], ha="center", va="center")
        return fig
    data = json.loads(path.read_text(encoding="utf-8"))
    cols = data["columns"]
    rows = data["rows"]
    i_peak, i_time = cols.index("peak / naive"), cols.index("time / naive")
    names = [t["naive"] if r[0].startswith("naive") else f"{t['fused']} {r[0].split()[-1]}" for r in rows]
    targets = data.get("targets", {})
    axes = fig.subplots(2, 1, sharex=True)
    for k, (idx, label, target, tlabel) in enumerate((
        (i_peak, t["peak"], targets.get("peak_over_naive_max"), t["target_mem"]),
        (i_time, t["time"], targets.get("time_over_naive_max"), t["target_time"]),
    )):
        ax = axes[k]
        vals = [float(r[idx]) for r in rows]
        bars = ax.bar(range(len(vals)), vals, color=["#999999"] + ["#3b75af"] * (len(vals) - 1))
        for b, v in zip(bars, vals):
            ax.text(b.get_x() + b.get_width() / 2, v, f"{v:.3g}", ha="center", va="bottom")
        if target is not None:
            ax.axhline(target, color="#c44e52", linestyle="--", linewidth=1, label=tlabel)
            ax.legend(loc="upper right")  # the target's name, clear of the bars' numbers
        ax.set_xticks(range(len(vals)), names)
        ax.set_ylabel(label)
        ax.set_ylim(0, max(vals + [target or 0]) * 1.35)
    p = data.get("params", {})
    fig.suptitle(f"{t['title']}:\nN={p.get('N')}, V={p.get('V')}, H={p.get('H')}", fontsize=10)
    return fig


def gemm_intensity(lang: str):
    """Arithmetic intensity of each GEMM tiling level (fp32 and fp16, a large square GEMM), counted by
    impls/kernels/gemm_model.py, against the ridge points of an A100 and an H100 (CUDA-core FP32 and Tensor-Core
    FP16): a level below a ridge is memory-bound on that machine."""
    from matplotlib.figure import Figure

    from figures import L
    from impls.kernels import gemm_model as G

    levels = [(L(lang, "朴素", "naive"), G.NAIVE), (L(lang, "共享内存\n32×32", "shared\n32×32"), G.shared(32)),
              (L(lang, "共享内存\n64×64", "shared\n64×64"), G.shared(64)),
              (L(lang, "寄存器\n128×128", "register\n128×128"), G.register()),
              (L(lang, "寄存器\n256×128", "register\n256×128"), G.register(256, 128, 8, 16, 8))]
    fig = Figure(figsize=(5.0, 4.6), layout="constrained")  # drawn at the width a phone shows it
    ax = fig.subplots()
    xs = range(len(levels))
    width = 0.38
    for k, (b, name) in enumerate(((4, "fp32"), (2, "fp16"))):
        vals = [G.intensity(t, b) for _, t in levels]
        bars = ax.bar([x + (k - 0.5) * width for x in xs], vals, width, label=name)
        for bar, v in zip(bars, vals):
            ax.text(bar.get_x() + bar.get_width() / 2, v * 1.08, f"{v:.3g}", ha="center", va="bottom",
                    rotation=90)
    styles = {("A100", False): ":", ("H100", False): ":", ("A100", True): "--", ("H100", True): "--"}
    colors = {"A100": "#4c72b0", "H100": "#c44e52"}
    for (m, tc), style in styles.items():
        ridge = G.MACHINES[m].ridge(tc)
        what = L(lang, "Tensor Core FP16", "Tensor Core FP16") if tc else L(lang, "CUDA core FP32", "CUDA-core FP32")
        ax.axhline(ridge, color=colors[m], linestyle=style, linewidth=1)
        ax.text(-0.45, ridge, f"{m} {what}: {ridge:.0f}", color=colors[m], ha="left", va="bottom", zorder=5,
                bbox={"fc": "white", "ec": "none", "alpha": 0.85, "pad": 1})
    ax.set_yscale("log")
    ax.set_xticks(list(xs), [n for n, _ in levels])
    ax.set_ylabel(L(lang, "计算访存比（FLOP/字节）", "arithmetic intensity (FLOP/byte)"))
    ax.set_title(L(lang, "GEMM 各级分块的计算访存比与屋脊点", "GEMM tiling levels against the roofline ridge"))
    ax.set_ylim(top=ax.get_ylim()[1] * 4)  # room for the rotated values above the tallest bars
    ax.legend(loc="lower right")
    return fig
