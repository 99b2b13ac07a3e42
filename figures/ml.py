"""Figures for the LLM-fundamentals entries (attention basics, the LLaMA block, RoPE scaling, LoRA), computed by
calling ``impls/`` (nothing typed in). Each function takes ``lang`` ("zh" or "en") and returns a
``matplotlib.figure.Figure`` built without pyplot."""

from __future__ import annotations

from functools import lru_cache

from matplotlib.figure import Figure

from figures import L


def _lang(lang: str) -> None:
    if lang not in ("zh", "en"):
        raise ValueError(f"lang must be 'zh' or 'en', not {lang!r}")


@lru_cache(maxsize=None)
def _grad_norms(layers: int) -> tuple[list[float], list[float]]:
    """(Pre-LN, Post-LN) per-layer gradient norms, computed once for both languages."""
    from impls.arch.norms import layer_grad_norms

    kw = {"d": 64, "heads": 4, "seq": 8, "batch": 4, "seeds": (0, 1, 2)}
    return layer_grad_norms(layers, False, **kw), layer_grad_norms(layers, True, **kw)


def preln_postln_grad_norms(lang: str) -> Figure:
    """‖∂loss/∂W‖ of each block's last MLP weight at initialisation, Pre-LN vs Post-LN, 16 layers
    (``impls/arch/norms.py::layer_grad_norms``, mean of three seeds; the setting its verifier checks)."""
    _lang(lang)
    layers = 16
    pre, post = _grad_norms(layers)
    fig = Figure(figsize=(5.0, 3.6), layout="constrained")
    ax = fig.subplots()
    xs = list(range(1, layers + 1))
    ax.plot(xs, post, marker="o", label="Post-LN: x = LN(x + F(x))")
    ax.plot(xs, pre, marker="s", label="Pre-LN: x = x + F(LN(x))")
    ax.set_yscale("log")
    ax.set_xlabel(L(lang, "层（1 = 最靠近输入）", "layer (1 = nearest the input)"))
    ax.set_ylabel(L(lang, "初始化时 MLP 权重的梯度范数", "gradient norm of the MLP\nweight at init"))
    ax.set_title(L(lang, "Post-LN 顶层梯度不减小，Pre-LN 越靠上越小", "Post-LN's top layers keep large gradients,\nPre-LN's shrink"))
    ax.legend()
    return fig


def softmax_saturation(lang: str) -> Figure:
    """Top probability and ‖softmax Jacobian‖_F against d_k, with and without 1/√d_k
    (``impls/ml/attention.py::saturation``: q, k ~ N(0, I), 64 keys, 64 queries)."""
    _lang(lang)
    from impls.ml.attention import saturation

    ds = [16, 32, 64, 128, 256, 512, 1024, 2048]
    rows = {s: [saturation(d, s, n_queries=64) for d in ds] for s in (True, False)}
    fig = Figure(figsize=(5.0, 5.2), layout="constrained")
    left, right = fig.subplots(2, 1, sharex=True)
    for scaled, style in ((True, "o-"), (False, "s--")):
        label = L(lang, "除以 √d_k", "divided by √d_k") if scaled else L(lang, "不除", "not divided")
        left.plot(ds, [r["max_prob"] for r in rows[scaled]], style, label=label)
        right.plot(ds, [r["jacobian_norm"] for r in rows[scaled]], style, label=label)
    for ax in (left, right):
        ax.set_xscale("log", base=2)
    right.set_xlabel("d_k")
    left.set_ylabel(L(lang, "softmax 最大概率（平均）", "mean top probability"))
    right.set_ylabel(L(lang, "softmax 雅可比范数（平均）", "mean softmax Jacobian norm"))
    left.legend()
    fig.suptitle(L(lang, "不缩放时 softmax 随 d_k 饱和", "Without the scale the softmax saturates as d_k grows"), fontsize=10)
    return fig


def lora_trainable_params(lang: str) -> Figure:
    """LoRA's trainable parameters for Llama-3-8B by rank and target modules
    (``impls/ml/lora.py::lora_params``, r·(in + out) per adapted module per layer)."""
    _lang(lang)
    from impls.ml.counting import model, param_counts
    from impls.ml.lora import lora_params

    cfg = model("llama-3-8b")
    total = param_counts(cfg)["total"]
    ranks = [1, 2, 4, 8, 16, 32, 64, 128, 256]
    sets = [("q_proj", "v_proj"), ("q_proj", "k_proj", "v_proj", "o_proj"),
            ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")]
    names = [L(lang, "q、v", "q, v"), L(lang, "q、k、v、o", "q, k, v, o"), L(lang, "全部线性层", "all linear layers")]
    fig = Figure(figsize=(5.0, 3.8), layout="constrained")
    ax = fig.subplots()
    for targets, name in zip(sets, names):
        ax.plot(ranks, [lora_params(cfg, r, targets) / 1e6 for r in ranks], marker="o", label=name)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel(L(lang, "秩 r", "rank r"))
    ax.set_ylabel(L(lang, "可训练参数（百万）", "trainable parameters (millions)"))
    right = ax.secondary_yaxis("right", functions=(lambda m: 100 * m * 1e6 / total, lambda p: p * total / 1e6 / 100))
    right.set_ylabel(L(lang, "占 Llama-3-8B 总参数 %", "% of Llama-3-8B's weights"))
    ax.set_title(L(lang, "Llama-3-8B 的 LoRA 可训练参数", "LoRA trainable parameters of Llama-3-8B"))
    ax.legend()
    return fig


def rope_wavelengths(lang: str) -> Figure:
    """Wavelength 2π/θ_i of each RoPE pair (d = 128, base 10⁴) originally and when extending 4096 → 16384
    (s = 4) by PI, NTK-aware and YaRN (``impls/ml/rope_scaling.py``), against the training length."""
    _lang(lang)
    from impls.arch.rope import frequencies
    from impls.ml.rope_scaling import ntk_frequencies, pi_frequencies, wavelengths, yarn_frequencies

    d, s, train = 128, 4, 4096
    curves = [(L(lang, "原始 RoPE", "original RoPE"), frequencies(d), "-"),
              ("PI", pi_frequencies(d, s), "--"),
              ("NTK-aware", ntk_frequencies(d, s), "-."),
              ("YaRN", yarn_frequencies(d, s, train), ":")]
    fig = Figure(figsize=(5.0, 3.9), layout="constrained")
    ax = fig.subplots()
    pairs = list(range(d // 2))
    for label, theta, style in curves:
        ax.plot(pairs, wavelengths(theta).tolist(), style, label=label)
    ax.axhline(train, color="gray", linewidth=0.8)
    ax.axhline(s * train, color="gray", linewidth=0.8, linestyle="--")
    ax.text(1, train * 1.3, L(lang, "训练长度 4096", "training length 4096"))
    ax.text(1, s * train * 1.3, L(lang, "目标长度 16384", "target length 16384"))
    ax.set_yscale("log")
    ax.set_xlabel(L(lang, "维度对 i（0 = 最高频）", "pair i (0 = highest frequency)"))
    ax.set_ylabel(L(lang, "波长 2π/θ_i（token）", "wavelength 2π/θ_i (tokens)"))
    ax.set_title(L(lang, "高频保持（外推）、低频按 s 拉长（插值）", "High frequencies kept (extrapolated),\nlow ones stretched by s"))
    ax.legend()
    return fig
