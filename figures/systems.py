"""Figures of the systems entries (collectives, layout planning, serving, RL systems), computed at build time.

* ``ring_allreduce_steps``: the 2(N-1) steps of a 4-rank ring all-reduce, from
  ``impls.parallel.collectives.ring_schedule`` (which the gloo ring executes).
* ``planner_layouts``: memory and step time of the planner's candidate layouts for Llama-3-70B on 64 H100s.
* ``serving_latency``: TTFT and TBT distributions, whole prompts / chunked prefill / disaggregated.
* ``stale_update_bias``: the bias of an update from k-versions-old data, uncorrected / IS / truncated IS.
"""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

TEXT = {
    "zh": {
        "rank": "卡", "chunk": "块", "step": "第 {k} 步", "reduce": "reduce-scatter：收到的块累加",
        "copy": "all-gather：收到的块复制", "start": "开始",
        "legend": "格子里的数字 = 已累加进这一块的卡数（4 = 全局和）\n橙框 = 这一步收到的块",
    },
    "en": {
        "rank": "rank", "chunk": "chunk", "step": "step {k}", "reduce": "reduce-scatter: received chunk added",
        "copy": "all-gather: received chunk copied", "start": "start",
        "legend": "number in a cell = ranks summed into that chunk so far\n(4 = the global sum); orange frame = received this step",
    },
}


def _text(lang: str, table: dict | None = None) -> dict[str, str]:
    table = TEXT if table is None else table
    if lang not in table:
        raise ValueError(f"lang must be zh or en, not {lang!r}")
    return table[lang]


def ring_allreduce_steps(lang: str) -> Figure:
    """Ranks × chunks after each step of a 4-rank ring: how many ranks' data each chunk holds, the chunk
    each rank just received outlined."""
    from impls.parallel.collectives import ring_schedule

    tx = _text(lang)
    n = 4
    held = [[{r} for _ in range(n)] for r in range(n)]          # held[r][c]: ranks summed into chunk c on r
    states = [("start", [None] * n, [[len(c) for c in row] for row in held])]
    for kind, sends in ring_schedule(n):
        got = [sends[(r - 1) % n] for r in range(n)]             # rank r receives what r-1 sends
        incoming = [set(held[(r - 1) % n][got[r]]) for r in range(n)]
        for r in range(n):
            held[r][got[r]] = held[r][got[r]] | incoming[r] if kind == "reduce" else incoming[r]
        states.append((kind, got, [[len(c) for c in row] for row in held]))
    fig = Figure(figsize=(5.0, 3.9), layout="constrained")
    grid_axes = fig.subplots(2, 4)  # the start and the reduce-scatter steps above, the all-gather steps below
    fig.delaxes(grid_axes[1][3])
    axes = [*grid_axes[0], *grid_axes[1][:3]]
    for k, (ax, (kind, got, grid)) in enumerate(zip(axes, states)):
        for r in range(n):
            for c in range(n):
                full = grid[r][c] == n
                ax.add_patch(Rectangle((c, r), 0.92, 0.92, facecolor="#55a868" if full else "#4c72b0",
                                       alpha=0.25 + 0.75 * grid[r][c] / n,
                                       edgecolor="#dd8452" if got[r] == c else "none", linewidth=2.2))
                ax.text(c + 0.46, r + 0.5, str(grid[r][c]), ha="center", va="center",
                        color="white" if 2 * grid[r][c] > n else "#222222")  # dark on the pale cells
        ax.set_xlim(-0.1, n)
        ax.set_ylim(n, -0.1)
        ax.set_aspect("equal")
        ax.set_xticks([c + 0.46 for c in range(n)], [str(c) for c in range(n)])
        ax.set_yticks([r + 0.46 for r in range(n)], [str(r) for r in range(n)])
        ax.tick_params(length=0, pad=2)
        ax.grid(False)
        ax.set_xlabel(tx["chunk"], labelpad=1)
        if k in (0, 4):
            ax.set_ylabel(tx["rank"])
        ax.set_title(tx["start"] if kind == "start" else tx["step"].format(k=k))
    fig.suptitle(f"{tx['reduce']} (1–{n - 1})\n{tx['copy']} ({n}–{2 * (n - 1)})", fontsize=10)
    fig.supxlabel(tx["legend"], fontsize=9.5)
    return fig


PLAN_TEXT = {
    "zh": {"mem": "每卡显存（GB）", "time": "每步时间（秒）", "states": "模型状态", "acts": "激活（含 logits）",
           "usable": "可用 90%", "compute": "计算", "bubble": "流水线气泡", "comm": "通信（未重叠部分）",
           "nofit": "\n（放不下）", "title": "Llama-3-70B，64 张 H100\n序列 8192，batch 128，ZeRO-1"},
    "en": {"mem": "memory per GPU (GB)", "time": "seconds per step", "states": "model states", "acts": "activations (with logits)",
           "usable": "90% usable", "compute": "compute", "bubble": "pipeline bubble", "comm": "communication (exposed)",
           "nofit": "\n(does not fit)", "title": "Llama-3-70B, 64 H100s,\nsequence 8192, batch 128, ZeRO-1"},
}


def planner_layouts(lang: str) -> Figure:
    """The planner's fastest fitting layouts and the smallest non-fitting ones: memory and step time."""
    from impls.inference.kv_cache import preset
    from impls.parallel.planner import CLUSTERS, USABLE, plan, spec_from_config

    tx = _text(lang, PLAN_TEXT)
    cluster = CLUSTERS["dgx-h100"]
    fits, no = plan(spec_from_config(preset("llama-3-70b")), cluster, 64, seq=8192, global_batch=128, zero=1)
    shown = fits[:8] + no[:4]
    labels = [pl.layout.label() + ("" if pl.fits else tx["nofit"]) for pl in shown]
    fig = Figure(figsize=(5.0, 9.0), layout="constrained")
    ax_m, ax_t = fig.subplots(2, 1, height_ratios=[12, 8])
    y = range(len(shown))
    states = [pl.memory["model states"] / 1e9 for pl in shown]
    acts = [(pl.memory["activations"] + pl.memory.get("logits", 0.0)) / 1e9 for pl in shown]
    ax_m.barh(list(y), states, label=tx["states"])
    ax_m.barh(list(y), acts, left=states, label=tx["acts"])
    ax_m.axvline(USABLE * cluster.memory / 1e9, color="0.3", linestyle="--", linewidth=1, label=tx["usable"])
    ax_m.set_yticks(list(y), labels)
    ax_m.invert_yaxis()
    ax_m.set_xlabel(tx["mem"])
    ax_m.legend(loc="upper left", bbox_to_anchor=(-0.02, -0.1))  # below: the bars fill the panel
    n = len(fits[:8])
    parts = [("compute", [pl.time["compute"] for pl in shown[:n]]),
             ("bubble", [pl.time["pipeline bubble"] for pl in shown[:n]]),
             ("comm", [sum(v for k, v in pl.time.items() if "comm" in k) for pl in shown[:n]])]
    left = [0.0] * n
    for key, vals in parts:
        ax_t.barh(list(range(n)), vals, left=left, label=tx[key])
        left = [a + b for a, b in zip(left, vals)]
    ax_t.set_yticks(list(range(n)), labels[:n])  # the fitting layouts only: the others have no step time
    ax_t.invert_yaxis()
    ax_t.set_xlabel(tx["time"])
    ax_t.legend(loc="upper left", bbox_to_anchor=(-0.02, -0.16))
    fig.suptitle(tx["title"], fontsize=10)
    return fig


SERVE_TEXT = {
    "zh": {"ttft": "TTFT（毫秒，对数轴）", "tbt": "相邻 token 间隔 TBT（毫秒，对数轴）", "cdf": "累计比例",
           "whole": "整段 prompt（预算 8192）", "chunk": "chunked prefill（预算 512）", "disagg": "PD 分离（1P + 1D，IB）",
           "title": "同一条 trace：Llama-3-8B、H100、\n64 个槽位、6 req/s"},
    "en": {"ttft": "TTFT (ms, log scale)", "tbt": "time between tokens, TBT (ms, log scale)", "cdf": "cumulative share",
           "whole": "whole prompts (budget 8192)", "chunk": "chunked prefill (budget 512)", "disagg": "disaggregated (1P + 1D, IB)",
           "title": "One trace: Llama-3-8B, H100,\n64 slots, 6 requests/s"},
}


def serving_latency(lang: str) -> Figure:
    """CDFs of TTFT and TBT on one seeded trace for whole-prompt batching, chunked prefill and P/D split."""
    from impls.inference import batching as B
    from impls.inference.kv_cache import preset
    from impls.inference.roofline import GPUS

    tx = _text(lang, SERVE_TEXT)
    cfg, gpu = preset("llama-3-8b"), GPUS["H100-SXM"]
    trace = B.poisson_trace(120, 6, seed=1, mean_prompt=1024, mean_output=128, max_len=8192)
    runs = {"whole": B.serve(trace, cfg, gpu, slots=64, token_budget=8192),
            "chunk": B.serve(trace, cfg, gpu, slots=64, token_budget=512, chunked=True),
            "disagg": B.serve_disaggregated(trace, cfg, gpu, prefill_gpus=1, decode_gpus=1, slots=64, bandwidth=50e9,
                                            prefill_budget=8192)}
    fig = Figure(figsize=(5.0, 6.0), layout="constrained")
    ax_f, ax_t = fig.subplots(2, 1)
    for key, res in runs.items():
        for ax, xs in ((ax_f, list(res.ttft.values())), (ax_t, res.tbt)):
            xs = sorted(1e3 * x for x in xs)
            ax.step(xs, [(i + 1) / len(xs) for i in range(len(xs))], where="post", label=tx[key])
    for ax, key in ((ax_f, "ttft"), (ax_t, "tbt")):
        ax.set_xscale("log")
        ax.set_xlabel(tx[key])
        ax.set_ylabel(tx["cdf"])
        ax.grid(alpha=0.3)
    ax_t.set_ylim(0.9, 1.001)
    ax_t.legend(loc="lower right")
    fig.suptitle(tx["title"], fontsize=10)
    return fig


STALE_TEXT = {
    "zh": {"k": "数据落后的策略版本数 k", "bias": "更新的相对偏差 ‖ĝ − g‖ / ‖g‖", "std": "π/μ 的标准差（右轴）",
           "none": "不修正", "is": "重要性采样（IS）", "tis": "截断 IS（C = 2）",
           "title": "softmax bandit 上的精确期望：\n16 个动作，每步学习率 2"},
    "en": {"k": "policy versions the data lags, k", "bias": "relative bias of the update\n‖ĝ − g‖ / ‖g‖",
           "std": "std of π/μ (right axis)", "none": "uncorrected", "is": "importance sampling (IS)",
           "tis": "truncated IS (C = 2)", "title": "Exact expectations on a softmax bandit:\n16 actions, learning rate 2"},
}


def stale_update_bias(lang: str) -> Figure:
    """Relative bias of a stale update against k, uncorrected / IS / truncated IS, and the ratio spread."""
    from impls.rl import staleness as S

    tx = _text(lang, STALE_TEXT)
    th0, r = S.bandit(16, 0)
    thetas = S.trajectory(th0, r, 200, 2.0)
    ks = [1, 2, 4, 8, 12, 16, 24, 32, 48]
    fig = Figure(figsize=(5.0, 3.9), layout="constrained")
    ax = fig.subplots()
    for corr in ("none", "is", "tis"):
        ax.plot(ks, [S.staleness_stats(thetas, r, k, corr, cap=2.0).bias for k in ks], marker="o", label=tx[corr])
    right = ax.twinx()
    right.plot(ks, [S.staleness_stats(thetas, r, k).ratio_std for k in ks], color="0.5", linestyle="--", label=tx["std"])
    right.set_ylabel(tx["std"])
    ax.set_xlabel(tx["k"])
    ax.set_ylabel(tx["bias"])
    ax.grid(alpha=0.3)
    handles = ax.get_legend_handles_labels()[0] + right.get_legend_handles_labels()[0]
    ax.legend(handles, [h.get_label() for h in handles], loc="upper left")
    ax.set_title(tx["title"])
    return fig
