"""Figures of the benchmark results in ``benchmarks/results/`` (written by ``benchmarks/*.py``).

The numbers are the measured ones, read from the result files; each figure says the machine.
"""

from __future__ import annotations

import textwrap

from matplotlib.figure import Figure

from figures import L, results


def _col(res: dict, name: str) -> int:
    return res["columns"].index(name)


def _machine(res: dict) -> str:
    """The machine the result was measured on, in lines that fit a figure shown on a phone."""
    return textwrap.fill(res["machine"], 40)


def gae_scan_speedup(lang: str) -> Figure:
    """Speed-up of the scanned GAE over the per-timestep loop, against T, one line per batch size B."""
    res = results("gae_scan.json")
    b, t, sp = _col(res, "B"), _col(res, "T"), _col(res, "speed-up (loop/scan)")
    fig = Figure(figsize=(5.0, 3.4), layout="constrained")
    ax = fig.subplots()
    for i, B in enumerate(sorted({r[b] for r in res["rows"]})):
        rows = sorted((r for r in res["rows"] if r[b] == B), key=lambda r: r[t])
        ax.plot([r[t] for r in rows], [r[sp] for r in rows], marker="o", ms=3.5, color=f"C{i}", label=f"B = {B}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel(L(lang, "序列长度 T（token）", "sequence length T (tokens)"))
    ax.set_ylabel(L(lang, "加速比（循环 / 扫描）", "speed-up (loop / scan)"))
    ax.set_title(L(lang, f"GAE：并行扫描相对逐步循环\n（{_machine(res)}）", f"GAE: parallel scan vs loop\n({_machine(res)})"))
    ax.legend()
    return fig


def logprobs_memory(lang: str) -> Figure:
    """Peak memory and time of chunked token log-probs against the chunk size, relative to the full logits."""
    res = results("logprobs.json")
    v, mem, tm = _col(res, "variant"), _col(res, "peak memory (MiB)"), _col(res, "time (ms)")
    full = next(r for r in res["rows"] if r[v] == "full")
    chunks = sorted((r for r in res["rows"] if r[v] != "full"), key=lambda r: int(str(r[v]).split()[-1]))
    labels = [str(r[v]).split()[-1] for r in chunks]
    fig = Figure(figsize=(5.0, 5.4), layout="constrained")
    ax_m, ax_t = fig.subplots(2, 1, sharex=True)
    ax_m.bar(labels, [r[mem] for r in chunks], color="C0")
    ax_m.axhline(full[mem], color="C1", ls="--")
    ax_m.text(-0.4, full[mem] * 0.93, L(lang, f"整块 logits：{full[mem]:.0f} MiB", f"full logits: {full[mem]:.0f} MiB"),
              color="C1", va="top")
    ax_m.set_ylabel(L(lang, "峰值显存/内存（MiB）", "peak memory (MiB)"))
    ax_m.set_title(L(lang, "峰值内存随分块大小", "peak memory against the chunk"))
    ax_t.bar(labels, [r[tm] for r in chunks], color="C2")
    ax_t.axhline(full[tm], color="C1", ls="--")
    ax_t.set_ylim(0, full[tm] * 1.25)
    ax_t.text(-0.4, full[tm] * 1.04, L(lang, f"整块：{full[tm]:.0f} ms", f"full: {full[tm]:.0f} ms"), color="C1")
    ax_t.set_ylabel(L(lang, "时间（ms）", "time (ms)"))
    ax_t.set_title(L(lang, "前向时间", "forward time"))
    ax_t.set_xlabel(L(lang, "每块位置数（分块计算）", "positions per chunk (chunked)"))
    fig.suptitle(L(lang, "B=1, T=4096, V=152064\n（", "B=1, T=4096, V=152064\n(") + _machine(res) + L(lang, "）", ")"))
    return fig
