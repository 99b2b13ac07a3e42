"""Figures of the parallelism entries, computed by ``impls/parallel`` at site-build time.

* ``pipeline_timeline``: stages × time for GPipe, 1F1B, interleaved 1F1B and ZB-H1 (p = 4, m = 8),
  placed by the schedule simulator, with each schedule's bubble.
* ``activation_memory``: bytes a GPT layer saves for backward, measured with
  ``saved_tensors_hooks``, against sequence length, without and with recomputation.
* ``context_parallel_traffic``: elements one rank sends per layer for Ulysses and ring attention
  as the degree P grows at a fixed sequence length.
"""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

TEXT = {
    "zh": {
        "time": "时间（前向 = 1 个单位）", "device": "设备", "bubble": "气泡", "of_time": "占设备时间",
        "gpipe": "GPipe", "1f1b": "1F1B", "interleaved": "交错式 1F1B（v = 2）", "zb-h1": "ZB-H1（B、W 各 1 个单位）",
        "F": "前向 F", "B": "反向 B", "W": "权重梯度 W", "idle": "空闲",
        "seq": "序列长度 s", "sbh": "每层保存的激活（单位：sbh 字节）",
        "none": "不重算（朴素注意力）", "selective": "选择性重算（注意力核心）",
        "sdpa": "融合注意力（SDPA，类 FlashAttention）", "full": "全量重算（只存层输入）",
        "mem_title": "每层保存的激活：朴素注意力随 s 增长",
        "degree": "并行度 P", "sent": "每卡每层前向发送（单位：bNh 个元素）",
        "ulysses": "Ulysses：4 次 all-to-all", "ring": "Ring Attention：P−1 跳 K/V",
        "cp_title": "序列长度固定时每卡通信量",
    },
    "en": {
        "time": "time (forward = 1 unit)", "device": "device", "bubble": "bubble", "of_time": "of device-time",
        "gpipe": "GPipe", "1f1b": "1F1B", "interleaved": "interleaved 1F1B (v = 2)", "zb-h1": "ZB-H1 (B, W 1 unit each)",
        "F": "forward F", "B": "backward B", "W": "weight gradient W", "idle": "idle",
        "seq": "sequence length s", "sbh": "activations saved per layer\n(units of sbh bytes)",
        "none": "no recomputation (plain attention)", "selective": "selective (attention core)",
        "sdpa": "fused attention (SDPA, FlashAttention-like)", "full": "full recomputation (layer input only)",
        "mem_title": "Saved activations per layer:\nplain attention grows with s",
        "degree": "degree P", "sent": "sent per rank per layer forward\n(units of bNh elements)",
        "ulysses": "Ulysses: 4 all-to-alls", "ring": "Ring Attention: P−1 K/V hops",
        "cp_title": "Per-rank traffic at a fixed sequence length",
    },
}
COLORS = {"F": "#4c72b0", "B": "#55a868", "W": "#dd8452"}
# a box as long as a forward pass or longer carries its micro-batch's number; a shorter one (the interleaved
# schedule's half-length chunks) is too narrow for a number a phone can show at a legible size
NUMBERED = 1.0


def _text(lang: str) -> dict[str, str]:
    if lang not in TEXT:
        raise ValueError(f"lang must be zh or en, not {lang!r}")
    return TEXT[lang]


def pipeline_timeline(lang: str) -> Figure:
    """Stages × time of the four schedules for p = 4 devices and m = 8 micro-batches."""
    from impls.parallel.pipeline import run

    tx = _text(lang)
    runs = [("gpipe", run("gpipe", 4, 8)), ("1f1b", run("1f1b", 4, 8)),
            ("interleaved", run("interleaved", 4, 8, 2)), ("zb-h1", run("zb-h1", 4, 8, t_f=1, t_b=1, t_w=1))]
    fig = Figure(figsize=(5.0, 6.6), layout="constrained")
    axes = fig.subplots(len(runs), 1, sharex=True)
    for ax, (name, tl) in zip(axes, runs):
        for d, dev in enumerate(tl.slots):
            for s in dev:
                start, width = float(s.start), float(s.end - s.start)
                shade = 1.0 if s.op.chunk == 0 else 0.6
                ax.add_patch(Rectangle((start, d - 0.4), width, 0.8, facecolor=COLORS[s.op.kind], alpha=shade,
                                       edgecolor="white", linewidth=0.6))
                if width >= NUMBERED:
                    ax.text(start + width / 2, d, str(s.op.micro), ha="center", va="center",
                            color="white" if shade == 1.0 else "#222222")  # dark on the lighter second chunk
        ax.set_xlim(0, float(max(r.makespan for _, r in runs)))
        ax.set_ylim(tl.p - 0.5, -0.5)
        ax.set_yticks(range(tl.p))
        ax.set_ylabel(tx["device"])
        ax.set_title(f"{tx[name]} — {tx['bubble']} {float(tl.bubble):.1%} {tx['of_time']}", loc="left")
    axes[-1].set_xlabel(tx["time"])
    handles = [Rectangle((0, 0), 1, 1, facecolor=COLORS[k]) for k in ("F", "B", "W")]
    fig.legend(handles, [tx["F"], tx["B"], tx["W"]], loc="outside upper center", ncols=3, handlelength=1.2,
               columnspacing=1.0)
    return fig


def activation_memory(lang: str) -> Figure:
    """Measured saved bytes per layer / (s·b·h) for s = 16..128 (h = 32, a = 4, b = 2, bf16)."""
    import torch

    from impls.distributed.activations import TransformerLayer, saved_activation_bytes
    from impls.parallel.recompute import FullRecompute, SDPALayer, SelectiveRecomputeLayer

    tx = _text(lang)
    h, a, b = 32, 4, 2
    seqs = [16, 32, 64, 128]
    makers = {
        "none": lambda: TransformerLayer(h, a), "selective": lambda: SelectiveRecomputeLayer(h, a),
        "sdpa": lambda: SDPALayer(h, a), "full": lambda: FullRecompute(TransformerLayer(h, a)),
    }
    fig = Figure(figsize=(5.0, 4.2), layout="constrained")
    ax = fig.subplots()
    for key, make in makers.items():
        ys = []
        for s in seqs:
            torch.manual_seed(0)
            layer = make().to(torch.bfloat16).train()
            x = torch.randn(s, b, h, dtype=torch.bfloat16, requires_grad=True)
            ys.append(saved_activation_bytes(layer, x)["activations"] / (s * b * h))
        ax.plot(seqs, ys, marker="o", label=tx[key])
    ax.set_xscale("log", base=2)
    ax.set_xticks(seqs, [str(s) for s in seqs])
    ax.set_xlabel(tx["seq"])
    ax.set_ylabel(tx["sbh"])
    ax.set_title(tx["mem_title"])
    ax.legend()
    return fig


def context_parallel_traffic(lang: str) -> Figure:
    """Ulysses' 4bNh(P-1)/P² against ring attention's 2bNh(P-1)/P, in units of bNh."""
    from impls.parallel.context import ring_elements_sent, ulysses_elements_sent

    tx = _text(lang)
    degrees = [1, 2, 4, 8, 16, 32, 64]
    fig = Figure(figsize=(5.0, 3.6), layout="constrained")
    ax = fig.subplots()
    ax.plot(degrees, [ulysses_elements_sent(1, 1, 1, p) for p in degrees], marker="o", label=tx["ulysses"])
    ax.plot(degrees, [ring_elements_sent(1, 1, 1, p) for p in degrees], marker="s", label=tx["ring"])
    ax.set_xscale("log", base=2)
    ax.set_xticks(degrees, [str(p) for p in degrees])
    ax.set_xlabel(tx["degree"])
    ax.set_ylabel(tx["sent"])
    ax.set_title(tx["cp_title"])
    ax.legend()
    return fig
