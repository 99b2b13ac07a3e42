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
    fig = Figure(figsize=(7.0, 3.2))
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
    for k, (idx, label, target, tlabel) in enumerate((
        (i_peak, t["peak"], targets.get("peak_over_naive_max"), t["target_mem"]),
        (i_time, t["time"], targets.get("time_over_naive_max"), t["target_time"]),
    )):
        ax = fig.add_subplot(1, 2, k + 1)
        vals = [float(r[idx]) for r in rows]
        bars = ax.bar(range(len(vals)), vals, color=["#999999"] + ["#3b75af"] * (len(vals) - 1))
        for b, v in zip(bars, vals):
            ax.text(b.get_x() + b.get_width() / 2, v, f"{v:.3g}", ha="center", va="bottom", fontsize=8)
        if target is not None:
            ax.axhline(target, color="#c44e52", linestyle="--", linewidth=1)
            ax.text(len(vals) - 0.5, target, tlabel, color="#c44e52", ha="right", va="bottom", fontsize=8)
        ax.set_xticks(range(len(vals)), names, fontsize=8)
        ax.set_ylabel(label)
        ax.set_ylim(0, max(vals + [target or 0]) * 1.2)
    p = data.get("params", {})
    fig.suptitle(f"{t['title']}: N={p.get('N')}, V={p.get('V')}, H={p.get('H')}", fontsize=10)
    fig.tight_layout()
    return fig
