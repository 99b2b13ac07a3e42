"""Figures for the GPU entries, computed by calling ``impls/gpu`` (and the compiler, through its cache).

Each function takes ``lang`` ("zh" or "en") and returns a ``matplotlib.figure.Figure`` labelled in it.
"""

from __future__ import annotations

from matplotlib.figure import Figure

from figures import L


def bank_conflicts_by_stride(lang: str) -> Figure:
    """Wavefronts of one warp reading a column of a row-major tile whose rows are ``s`` words apart, and the
    same tile padded by one word per row (pitch ``s + 1``)."""
    from impls.gpu.banks import tile_column, wavefronts

    strides = list(range(1, 65))
    plain = [wavefronts(tile_column(0, s)) for s in strides]
    padded = [wavefronts(tile_column(0, s + 1)) for s in strides]
    fig = Figure(figsize=(5.0, 3.6), layout="constrained")
    ax = fig.subplots()
    ax.step(strides, plain, where="mid", label=L(lang, "行距 s 个字（未补齐）", "row pitch s words (no padding)"))
    ax.step(strides, padded, where="mid", linestyle="--", label=L(lang, "每行补 1 个字（行距 s+1）",
                                                                  "padded by one word (pitch s+1)"))
    ax.set_xlabel(L(lang, "行距 s（4 字节的字）", "row pitch s (4-byte words)"))
    ax.set_ylabel(L(lang, "每次请求的 wavefront\n（冲突路数）", "wavefronts per request\n(conflict degree)"))
    ax.set_yscale("log", base=2)
    ax.set_xticks([1, 8, 16, 24, 32, 40, 48, 56, 64])
    ax.legend(loc="upper left")
    ax.grid(alpha=0.3)
    return fig


def sectors_by_stride(lang: str) -> Figure:
    """32-byte sectors one warp instruction touches, by stride and bytes per lane (4, 8, 16)."""
    from impls.gpu.coalescing import strided_addresses, warp_access

    strides = list(range(1, 33))
    fig = Figure(figsize=(5.0, 3.6), layout="constrained")
    ax = fig.subplots()
    for width in (4, 8, 16):
        sectors = [warp_access(strided_addresses(s, 4, vector=width // 4), width).sectors for s in strides]
        ax.plot(strides, sectors, marker="o", markersize=3,
                label=L(lang, f"每线程 {width} 字节", f"{width} bytes per lane"))
    ax.set_xlabel(L(lang, "步长（以每线程访问的宽度为单位）", "stride (in units of one lane's access)"))
    ax.set_ylabel(L(lang, "每条 warp 指令的 sector 数", "sectors per warp instruction"))
    ax.set_yscale("log", base=2)
    ax.legend(loc="lower right")
    ax.grid(alpha=0.3)
    return fig


def _project_kernels():
    """(label, sm, registers, threads, shared bytes) of this project's kernels compiled for sm_80 and sm_90,
    or the one-line reason they could not be compiled here."""
    from impls.gpu.compiled import compile_many, missing
    from impls.gpu.project_kernels import KERNELS

    why = missing(sass=False)
    if why:
        return [], why
    out = []
    for arch in (80, 90):
        for spec, c in zip(KERNELS.values(), compile_many([k.request(arch) for k in KERNELS.values()])):
            out.append((spec.key, arch, c.registers, c.threads, c.shared + c.static_shared))
    return out, ""


def occupancy_vs_registers(lang: str) -> Figure:
    """Occupancy of 256-thread blocks against registers per thread on sm_80 and sm_90, without shared memory and
    with 64 KB per block, and this project's Triton kernels at the registers and shared memory they compile to."""
    from impls.gpu.occupancy import KB, occupancy

    regs = list(range(8, 256))
    fig = Figure(figsize=(5.0, 4.0), layout="constrained")
    ax = fig.subplots()
    series = [("sm_80", 0, L(lang, "sm_80 与 sm_90，无 shared memory", "sm_80 and sm_90, no shared memory"), "-"),
              ("sm_80", 64 * KB, L(lang, "sm_80，每 block 64 KB", "sm_80, 64 KB per block"), "--"),
              ("sm_90", 64 * KB, L(lang, "sm_90，每 block 64 KB", "sm_90, 64 KB per block"), ":")]
    for arch, smem, label, style in series:
        ax.step(regs, [100 * occupancy(arch, 256, r, smem).fraction for r in regs], where="post", linestyle=style,
                label=label)
    kernels, why = _project_kernels()
    names = {"flash_attention": "FlashAttention", "fused_logprob": L(lang, "融合 log-prob", "fused log-prob"),
             "gae": "GAE"}
    points: dict[tuple[str, int, float], list[str]] = {}      # one label per kernel and spot: "GAE (sm_80, sm_90)"
    for key, arch, r, threads, smem in kernels:
        occ = occupancy(f"sm_{arch}", threads, r, smem)
        ax.plot([r], [100 * occ.fraction], marker="x" if arch == 90 else "+", markersize=9, color="black")
        points.setdefault((key, r, 100 * occ.fraction), []).append(f"sm_{arch}")
    last = 112.0                                  # labels top-down, at least 6 points of occupancy apart
    for (key, r, y), archs in sorted(points.items(), key=lambda kv: -kv[0][2]):
        last = min(y + 5, last - 6)
        ax.annotate(f"{names[key]} ({', '.join(archs)})", (r, y), xytext=(r + 14, last), va="center",
                    arrowprops={"arrowstyle": "-", "color": "gray", "linewidth": 0.6},
                    bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.85})
    if why:
        ax.text(0.5, 0.5, why, transform=ax.transAxes, ha="center", wrap=True)
    ax.set_xlabel(L(lang, "每线程寄存器数", "registers per thread"))
    ax.set_ylabel(L(lang, "occupancy（%）", "occupancy (%)"))
    ax.set_ylim(0, 105)
    ax.legend(loc="upper right")
    ax.grid(alpha=0.3)
    return fig


def roofline_kernels(lang: str) -> Figure:
    """The H100 SXM roofline with this project's kernels at their counted arithmetic intensity."""
    import numpy as np

    from impls.gpu.project_kernels import KERNELS
    from impls.inference.roofline import GPUS

    gpu = GPUS["H100-SXM"]
    x = np.logspace(-1, 4, 200)
    fig = Figure(figsize=(5.0, 3.8), layout="constrained")
    ax = fig.subplots()
    ax.loglog(x, np.minimum(gpu.peak_flops, gpu.bandwidth * x) / 1e12, label=L(lang, "H100 SXM 屋顶线",
                                                                               "H100 SXM roofline"))
    ax.axvline(gpu.ridge, linestyle=":", color="gray")
    ax.annotate(L(lang, f"屋脊点 {gpu.ridge:.0f} FLOP/B", f"ridge {gpu.ridge:.0f} FLOP/B"), (gpu.ridge, 2),
                xytext=(4, 0), textcoords="offset points")
    names = {"flash_attention": "FlashAttention", "fused_logprob": L(lang, "融合 log-prob", "fused log-prob"),
             "gae": "GAE"}
    for key, k in KERNELS.items():
        attainable = min(gpu.peak_flops, gpu.bandwidth * k.intensity) / 1e12
        ax.plot([k.intensity], [attainable], marker="o")
        ax.annotate(names[key], (k.intensity, attainable), xytext=(5, -12), textcoords="offset points")
    ax.set_xlabel(L(lang, "算术强度（FLOP/字节）", "arithmetic intensity (FLOP/byte)"))
    ax.set_ylabel(L(lang, "可达算力（TFLOP/s）", "attainable TFLOP/s"))
    ax.legend(loc="lower right")
    ax.grid(alpha=0.3, which="both")
    return fig
