r"""KV-cache quantization: which axis a scale spans, the error that leaves in attention, and what it buys.

The cache of one layer and KV head is ``[tokens, d]`` (d = head_dim). Asymmetric round-to-nearest as
KIVI does it (zero point z = the group's min, scale s = (max − min)/(2^b − 1), both stored as fp16; unlike
``impls.numerics.quantization.quantize`` the range is not widened to contain 0) shares one scale by

* **per token**: over a token's d channels (``axis="token"``);
* **per channel**: over ``group`` consecutive tokens of one channel (``axis="channel"``);
* **per tensor**: over everything (``axis="tensor"``).

Keys carry a few *outlier channels* (large magnitudes in fixed channels, the pattern KIVI reports for
Llama keys), so a per-token scale is stretched by the outlier and crushes the other channels, while a
per-channel scale isolates it. Values show no such channel pattern, and the attention output is a
weighted sum of value *rows*, so per-token quantization keeps each token's error relative to its own size.
KIVI (Liu et al. 2024, §3–4) therefore quantizes **K per channel in groups of G tokens and V per token**;
the latest ``T mod G`` tokens of K (a group not yet full) stay in full precision until the group fills.

Bytes per cached element with b-bit codes and an fp16 scale + zero per group of n elements:
b/8 + 4/n. ``kv_step_seconds`` times a decode step on the roofline with that many bytes per cached
element (``roofline.mixed_step_cost(cache_bytes=…)``), assuming an attention kernel that reads the
quantized cache directly (dequantizing on chip); a kernel that first writes a bf16 copy gains nothing.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .kv_cache import ModelConfig, kv_cache_bytes
from .roofline import GPU, mixed_step_cost

AXES = ("token", "channel", "tensor")
SCALE_BYTES = 2          # fp16 scale and fp16 zero point per group


def _rtn(rows: Tensor, bits: int, granularity: str, group: int = 128) -> Tensor:
    """Quantize-dequantize 2-D ``rows`` in fp32, one scale per row (``granularity="channel"``) or per ``group``
    consecutive elements of a row (``"group"``), asymmetric as KIVI: z = min, s = (max − min)/(2^b − 1),
    x̂ = round((x − z)/s)·s + z, so |x − x̂| ≤ s/2 (the group's own range, not widened to hold 0 as weight
    quantizers do). A group whose values are all equal has s clamped to the smallest normal, so x̂ = z = x."""
    if not 2 <= bits <= 8:
        raise ValueError(f"bits must be between 2 and 8, got {bits}")
    g = rows.float().reshape(-1, group) if granularity == "group" else rows.float()
    lo, hi = g.amin(-1, keepdim=True), g.amax(-1, keepdim=True)
    levels = 2 ** bits - 1
    scale = ((hi - lo) / levels).clamp_min(torch.finfo(torch.float32).tiny)
    return (torch.round((g - lo) / scale).clamp(0, levels) * scale + lo).reshape(rows.shape)


def fake_quantize_kv(x: Tensor, bits: int, axis: str, group: int = 32) -> Tensor:
    """Quantize and dequantize ``x [..., T, d]`` with one scale per token, per ``group`` tokens of a channel,
    or per tensor; a trailing partial channel group (T mod group tokens) is quantized as its own group."""
    if axis not in AXES:
        raise ValueError(f"axis must be one of {AXES}, got {axis!r}")
    if x.dim() < 2:
        raise ValueError(f"expected [..., tokens, d], got shape {tuple(x.shape)}")
    *lead, t, d = x.shape
    if axis == "token":
        rows = x.reshape(-1, d)                                      # one row = one token
        return _rtn(rows, bits, "channel").reshape(x.shape).to(x.dtype)
    if axis == "tensor":
        return _rtn(x.reshape(1, -1), bits, "channel").reshape(x.shape).to(x.dtype)
    if group < 1:
        raise ValueError(f"group must be >= 1 token, got {group}")
    cols = x.reshape(-1, t, d).transpose(1, 2)                       # [N, d, T]: a row is one channel
    out = torch.empty_like(cols, dtype=torch.float32)
    full = t - t % group
    if full:
        out[..., :full] = _rtn(cols[..., :full].reshape(-1, full), bits, "group", group).reshape(
            cols.shape[0], d, full)
    if full < t:
        out[..., full:] = _rtn(cols[..., full:].reshape(-1, t - full), bits, "channel").reshape(
            cols.shape[0], d, t - full)
    return out.transpose(1, 2).reshape(x.shape).to(x.dtype)


def kivi(k: Tensor, v: Tensor, bits: int = 2, group: int = 32, residual: bool = True) -> tuple[Tensor, Tensor]:
    """KIVI: K per channel in groups of ``group`` tokens (with ``residual``, the last T mod group tokens stay
    in full precision), V per token. Returns the dequantized (K̂, V̂)."""
    t = k.shape[-2]
    full = t - t % group
    k_hat = k.clone()
    if full:
        k_hat[..., :full, :] = fake_quantize_kv(k[..., :full, :], bits, "channel", group)
    if not residual and full < t:
        k_hat[..., full:, :] = fake_quantize_kv(k[..., full:, :], bits, "channel", t - full)
    return k_hat, fake_quantize_kv(v, bits, "token")


def fp8_kv(x: Tensor, dtype: torch.dtype = torch.float8_e4m3fn, scale: float | None = None) -> Tensor:
    """FP8 storage of the cache with one per-tensor scale: ``scale=None`` calibrates absmax / max(dtype);
    ``scale=1.0`` is vLLM's default when no scales are given."""
    s = (x.float().abs().amax() / torch.finfo(dtype).max).clamp_min(torch.finfo(torch.float32).tiny) \
        if scale is None else torch.tensor(float(scale))
    return ((x.float() / s).clamp(torch.finfo(dtype).min, torch.finfo(dtype).max).to(dtype).float() * s).to(x.dtype)


def outlier_kv(tokens: int, d: int = 128, outliers: int = 4, magnitude: float = 10.0, seed: int = 0,
               heads: int = 8, token_spread: float = 0.5) -> tuple[Tensor, Tensor, Tensor]:
    """(q [heads, d], K, V [heads, tokens, d]), fp32. K: unit normal with ``outliers`` fixed channels scaled by
    ``magnitude`` (attention logits then have a standard deviation near 2); V: unit-normal rows, each scaled
    by a log-normal per-token norm exp(``token_spread``·z); q: unit normal."""
    gen = torch.Generator().manual_seed(seed)
    k = torch.randn(heads, tokens, d, generator=gen)
    ch = torch.randperm(d, generator=gen)[:outliers]
    k[..., ch] *= magnitude
    v = torch.randn(heads, tokens, d, generator=gen) * torch.exp(token_spread * torch.randn(heads, tokens, 1, generator=gen))
    return torch.randn(heads, d, generator=gen), k, v


def attention(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
    """softmax(q Kᵀ / √d) V for one query per head, in fp64: q [H, d], K, V [H, T, d]."""
    s = torch.einsum("hd,htd->ht", q.double(), k.double()) / k.shape[-1] ** 0.5
    return torch.einsum("ht,htd->hd", torch.softmax(s, -1), v.double())


def relative_error(x: Tensor, ref: Tensor) -> float:
    """‖x − ref‖ / ‖ref‖ (Frobenius, fp64)."""
    return float((x.double() - ref.double()).norm() / ref.double().norm())


def bytes_per_element(bits: int, group: int | None) -> float:
    """Cache bytes per element: b/8 for the codes plus an fp16 scale and zero point per ``group`` elements."""
    return bits / 8 + (0 if group is None else 2 * SCALE_BYTES / group)


def kv_memory_bytes(cfg: ModelConfig, seq: int, batch: int, bits: int | None = None, group: int | None = None) -> float:
    """KV-cache bytes at ``bits`` per element (None: bf16) with per-group scale overhead."""
    elems = kv_cache_bytes(cfg, seq, batch, "bf16") / 2
    return elems * (2 if bits is None else bytes_per_element(bits, group))


def kv_step_seconds(cfg: ModelConfig, gpu: GPU, batch: int, context: int, bits: int | None = None,
                    group: int | None = None) -> float:
    """One decode step (batch sequences, ``context`` cached tokens each) on the roofline, the cache read at
    ``bytes_per_element`` (bf16 weights and activations)."""
    cache = 2 if bits is None else bytes_per_element(bits, group)
    return mixed_step_cost(cfg, [(1, context)] * batch, cache_bytes=cache).time(gpu)
