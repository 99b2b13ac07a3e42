"""Figures for the inference and numerics entries, computed by calling ``impls/`` (nothing typed in).

Each function takes ``lang`` ("zh" or "en") and returns a ``matplotlib.figure.Figure`` with its labels
in that language. Built with ``Figure`` directly (no pyplot state), so it is safe to call from a build.
"""

from __future__ import annotations

from contextlib import contextmanager

from matplotlib.figure import Figure


@contextmanager
def _one_thread():
    """The figures run many small tensor ops; intra-op threads only add contention on a shared CPU."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _t(lang: str, zh: str, en: str) -> str:
    if lang not in ("zh", "en"):
        raise ValueError(f"lang must be 'zh' or 'en', not {lang!r}")
    return zh if lang == "zh" else en


def flash_attention_io(lang: str) -> Figure:
    """HBM traffic of standard attention and of the tiled forward in both loop orders, counted by running the
    implementations, beside the shipped Triton kernel's own byte count (``hbm_bytes``, non-causal and causal).
    Everything uses the kernel's tile, ``BLOCK_M`` × ``BLOCK_N``, at d = 64; the kernel itself is not run, only
    its constants and its byte-count function, so the figure stays CPU-only and fast."""
    import torch

    from impls.inference.attention import IOCount, naive_attention, tiled_attention
    from impls.inference.flash_attention_triton import BLOCK_M, BLOCK_N, hbm_bytes

    d, br, bc = 64, BLOCK_M, BLOCK_N
    ns = [256, 512, 1024, 2048]
    rows = {"std": [], "kv": [], "q": []}
    with _one_thread():
        for n in ns:
            q = k = v = torch.zeros(1, 1, n, d)
            for key, run in (("std", lambda c: naive_attention(q, k, v, counter=c)),
                             ("kv", lambda c: tiled_attention(q, k, v, block_q=br, block_k=bc,
                                                              loop_order="kv_outer", counter=c)),
                             ("q", lambda c: tiled_attention(q, k, v, block_q=br, block_k=bc,
                                                             loop_order="q_outer", counter=c))):
                c = IOCount()
                run(c)
                rows[key].append(c.hbm_total * 2 / 2**20)      # fp16 bytes, MiB
    kernel = [hbm_bytes(n, d, bytes_per_element=2) / 2**20 for n in ns]
    kernel_causal = [hbm_bytes(n, d, causal=True, bytes_per_element=2) / 2**20 for n in ns]
    fig = Figure(figsize=(5.0, 5.4), layout="constrained")
    ax = fig.subplots()
    ax.plot(ns, rows["std"], "o-", label=_t(lang, "标准 Attention（写回 S、P）", "standard attention (S, P through HBM)"))
    ax.plot(ns, rows["kv"], "s-", label=_t(lang, f"FlashAttention-1 顺序（K/V 外层，块 {br}×{bc}）",
                                          f"FlashAttention-1 order (K/V outer, tiles {br}×{bc})"))
    ax.plot(ns, rows["q"], "^-", label=_t(lang, f"FlashAttention-2 顺序（Q 外层，块 {br}×{bc}）",
                                         f"FlashAttention-2 order (Q outer, tiles {br}×{bc})"))
    ax.plot(ns, kernel, "x", ms=9, c="k", label=_t(lang, f"Triton kernel 的 hbm_bytes()（BLOCK_M×BLOCK_N = {br}×{bc}）",
                                                     f"Triton kernel, hbm_bytes() (BLOCK_M×BLOCK_N = {br}×{bc})"))
    ax.plot(ns, kernel_causal, "x--", ms=7, c="gray", label=_t(lang, "Triton kernel 的 hbm_bytes()，causal",
                                                              "Triton kernel, hbm_bytes(), causal"))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel(_t(lang, "序列长度 N（d = 64）", "sequence length N (d = 64)"))
    ax.set_ylabel(_t(lang, "每个头的 HBM 读写量（MiB，fp16）", "HBM traffic per head (MiB, fp16)"))
    ax.set_title(_t(lang, "前向 HBM 流量：逐次计数", "Forward HBM traffic, counted transfer by transfer"))
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(-0.2, -0.16))  # below the axes: the labels are long
    return fig


def kv_memory_vs_seq(lang: str) -> Figure:
    """KV cache (bf16, batch 1) against sequence length for one Llama-3-8B shape with MHA, GQA-8, MQA and
    MLA at DeepSeek-V2's ratios (d_c = 4 d_h, d_h^R = d_h / 2), from the calculator."""
    from dataclasses import replace

    from impls.inference.kv_cache import kv_cache_bytes, preset, with_kv_heads
    from impls.inference.roofline import GPUS

    base = preset("llama-3-8b")
    mla = replace(base, name="mla", attention="mla", kv_lora_rank=4 * base.head_dim,
                  qk_rope_head_dim=base.head_dim // 2, qk_nope_head_dim=base.head_dim, v_head_dim=base.head_dim)
    variants = [("MHA (32 KV)", with_kv_heads(base, 32)), ("GQA-8", base), ("MLA", mla), ("MQA (1 KV)", with_kv_heads(base, 1))]
    seqs = [2**k for k in range(10, 21)]
    fig = Figure(figsize=(5.0, 3.8), layout="constrained")
    ax = fig.subplots()
    for label, cfg in variants:
        ax.plot(seqs, [kv_cache_bytes(cfg, s, 1, "bf16") / 1e9 for s in seqs], "o-", ms=3, label=label)
    ax.axhline(GPUS["H100-SXM"].memory / 1e9, ls="--", c="gray")
    ax.text(seqs[0], GPUS["H100-SXM"].memory / 1e9 * 1.15, _t(lang, "H100 显存 80 GB", "H100 memory, 80 GB"))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel(_t(lang, "序列长度（token）", "sequence length (tokens)"))
    ax.set_ylabel(_t(lang, "KV Cache（GB，bf16，单请求）", "KV cache (GB, bf16, one request)"))
    ax.set_title(_t(lang, "Llama-3-8B 形状\n（32 层、32 个 query 头、d_h = 128）", "Llama-3-8B shape\n(32 layers, 32 query heads, d_h = 128)"))
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="lower right")
    return fig


def roofline(lang: str) -> Figure:
    """Rooflines of H100, H200 and A100 (dense BF16 datasheet figures) with Llama-3-8B's prefill and decode
    steps placed at their counted arithmetic intensity; y is the attainable FLOP/s on an H100."""
    from impls.inference.kv_cache import preset
    from impls.inference.roofline import GPUS, step_cost

    cfg = preset("llama-3-8b")
    fig = Figure(figsize=(5.0, 4.2), layout="constrained")
    ax = fig.subplots()
    xs = [0.5 * 2 ** (k / 4) for k in range(0, 48)]
    for name in ("H100-SXM", "H200-SXM", "A100-SXM-80GB"):
        g = GPUS[name]
        ax.plot(xs, [min(g.peak_flops, x * g.bandwidth) / 1e12 for x in xs], label=f"{name} ({_t(lang, '屋脊点', 'ridge')} {g.ridge:.0f})")
    h100 = GPUS["H100-SXM"]
    points = [(_t(lang, f"decode b={b}", f"decode b={b}"), step_cost(cfg, batch=b, new=1, context=2048)) for b in (1, 16, 64, 256)]
    points += [(_t(lang, "prefill 16 token", "prefill 16 tok"), step_cost(cfg, batch=1, new=16)),
               (_t(lang, "prefill 2048 token", "prefill 2048 tok"), step_cost(cfg, batch=1, new=2048))]
    for label, c in points:
        y = min(h100.peak_flops, c.intensity * h100.bandwidth) / 1e12
        ax.plot([c.intensity], [y], "ko", ms=4)
        above = label.startswith("prefill")
        ax.annotate(label, (c.intensity, y), textcoords="offset points", xytext=(-30 if above else 4, 6 if above else -12))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(_t(lang, "算术强度（FLOP / 字节）", "arithmetic intensity (FLOP / byte)"))
    ax.set_ylabel(_t(lang, "可达算力（TFLOP/s）", "attainable TFLOP/s"))
    ax.set_title(_t(lang, "Llama-3-8B（bf16，上下文 2048）在屋脊线上的位置", "Llama-3-8B (bf16, context 2048) on the roofline"))
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="lower right")
    return fig


def paged_kv_utilisation(lang: str) -> Figure:
    """Share of held KV slots that store a token, on one synthetic trace: contiguous reservation against
    paging with several block sizes (step-by-step simulation)."""
    from impls.inference.paged_kv import simulate, synthetic_trace

    trace = synthetic_trace(n=300, seed=0)
    cap = 64 * 2048
    bars = [(_t(lang, "连续，按 max_len", "contiguous, max_len"), simulate(trace, capacity_tokens=cap, paged=False, reserve="max").utilisation),
            (_t(lang, "连续，按实际长度", "contiguous, exact"), simulate(trace, capacity_tokens=cap, paged=False, reserve="exact").utilisation)]
    for bs in (256, 64, 16, 1):
        bars.append((_t(lang, f"分页，块 {bs}", f"paged, block {bs}"), simulate(trace, capacity_tokens=cap, paged=True, block_size=bs).utilisation))
    fig = Figure(figsize=(5.0, 3.8), layout="constrained")
    ax = fig.subplots()
    ax.barh(range(len(bars)), [100 * u for _, u in bars], color=["#c44", "#e96"] + ["#48c"] * 4)
    for i, (_, u) in enumerate(bars):
        ax.text(100 * u + 1.5, i, f"{100 * u:.1f}%", va="center")
    ax.set_yticks(range(len(bars)), [b for b, _ in bars])
    ax.invert_yaxis()
    ax.set_xlim(0, 118)
    ax.set_ylabel(_t(lang, "KV 显存的管理方式", "how KV memory is managed"))
    ax.set_xlabel(_t(lang, "KV 显存利用率（%）", "KV memory utilisation (%)"))
    ax.set_title(_t(lang, "同一合成 trace：\n存了 token 的槽位 / 占用的槽位", "One synthetic trace:\nslots holding a token / slots held"))
    return fig


def speculative_tokens(lang: str) -> Figure:
    """Expected tokens per target call (Leviathan Eq. 1) and speed-up (Theorem 3.8, c = 0.1) against α,
    with Monte Carlo points from the batched verification step."""
    import torch

    from impls.inference.speculative import expected_speedup, expected_tokens, verify

    alphas = [i / 50 for i in range(0, 50)]
    fig = Figure(figsize=(5.0, 5.8), layout="constrained")
    ax1, ax2 = fig.subplots(2, 1, sharex=True)
    g = torch.Generator().manual_seed(0)
    for gamma in (2, 4, 8):
        ax1.plot(alphas, [expected_tokens(a, gamma) for a in alphas], label=f"γ = {gamma}")
        ax2.plot(alphas, [expected_speedup(a, gamma, 0.1) for a in alphas], label=f"γ = {gamma}")
        sim_a = [0.3, 0.6, 0.9]
        sims = []
        with _one_thread():
            for a in sim_a:     # Σ min(p, q) = a: the draft always proposes token 0, the target gives it a
                p = torch.tensor([a, 1 - a], dtype=torch.float64).expand(20_000, gamma + 1, -1)
                q = torch.tensor([1.0, 0.0], dtype=torch.float64).expand(20_000, gamma, -1)
                _, n = verify(p, q, torch.zeros(20_000, gamma, dtype=torch.long), g)
                sims.append(float(n.double().mean()))
        ax1.plot(sim_a, sims, "k.", ms=6)
    ax1.set_ylabel(_t(lang, "每次 target 调用产出的 token", "tokens per target call"))
    ax1.set_title(_t(lang, "(1−α^{γ+1})/(1−α)，点为模拟", "(1−α^{γ+1})/(1−α); dots simulated"))
    ax2.axhline(1, c="gray", lw=0.8)
    ax2.set_xlabel("α")
    ax2.set_ylabel(_t(lang, "加速比（c = 0.1）", "speed-up (c = 0.1)"))
    ax2.set_title(_t(lang, "除以一次调用的代价 γc+1", "divided by the cost of a call, γc+1"))
    for ax in (ax1, ax2):
        ax.grid(True, alpha=0.3)
        ax.legend(loc="upper left")
    return fig
