"""Integer quantization of weights and activations: round-to-nearest, LLM.int8(), GPTQ and AWQ.

Uniform quantization with b bits of a tensor W, one scale per tensor, per output channel (row) or per group
of ``group_size`` consecutive input columns:

    symmetric (absmax):  s = max|W| / (2^{b−1} − 1),          q = clamp(round(W/s), −(2^{b−1}−1), 2^{b−1}−1),  Ŵ = s·q
    asymmetric:          s = (hi − lo) / (2^b − 1),  lo = min(min W, 0), hi = max(max W, 0),  z = round(−lo / s),
                         q = clamp(round(W/s) + z, 0, 2^b − 1),                                               Ŵ = s·(q − z)

so every element inside the range is reproduced within |W − Ŵ| <= s/2 (round to nearest). The asymmetric
range always contains 0 (as torch.ao's observers and GPTQ's reference quantizer do): 0 is exact, and a
constant group does not collapse to a zero-width range. ``rounding`` is
the one place that rounds (ties to even, like ``torch.round``).

* ``pack_int4`` stores two 4-bit codes per byte: b-bit weights take b/8 bytes per element plus the scales.
* ``int8_matmul`` (vector-wise: one scale per row of X, i.e. per token, or one per tensor, and one per
  output row of W) and ``llm_int8_matmul`` (Dettmers et al. 2022): input features whose activations reach
  ``threshold`` (6.0 in the paper) are multiplied in floating point, the rest in int8. Only row scales of X
  and column scales of Wᵀ factor out of Σ_j X_tj W_oj: a per-input-channel scale of X sits inside the sum.
* ``smoothquant_scales`` (Xiao et al. 2023, Eq. 4): s_j = max|X_j|^α / max|W_j|^{1−α}; X·diag(s)^{-1} and
  W·diag(s) give the same product and move the activation outliers (fixed channels) into the weights.
* ``gptq_quantize`` (Frantar et al. 2022, Algorithm 1): quantize W column by column; after each column,
  spread its error over the not-yet-quantized columns with the inverse Hessian H^{-1}, H = 2XᵀX + λI,
  taken through its upper Cholesky factor, in blocks of ``block_size`` columns (lazy batch updates).
* ``fp8_roundtrip``: FP8 storage with one absmax scale per tensor or per block of the last dimension
  (DeepSeek-V3 uses 1×128 tiles; a last dimension that is not a multiple of the block ends in a shorter one).
* ``awq_quantize`` (Lin et al. 2023, §3.2): scale input channel j of W by s_j = mean|X_j|^α (and X by
  1/s_j, which a preceding op absorbs), quantize, and grid-search α ∈ [0, 1] for the lowest output error.

Weights are [out_features, in_features] like ``nn.Linear``; activations X are [tokens, in_features].
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


def rounding(x: Tensor) -> Tensor:
    """Round to nearest, ties to even."""
    return torch.round(x)


@dataclass
class Quantized:
    q: Tensor            # integer codes (int8 for b <= 8), same shape as W
    scale: Tensor        # broadcastable to W
    zero: Tensor | None  # asymmetric zero point (in code units), broadcastable to W
    bits: int

    def dequantize(self) -> Tensor:
        q = self.q.float()
        return self.scale * (q - self.zero if self.zero is not None else q)


def _grouped(w: Tensor, granularity: str, group_size: int) -> Tensor:
    """View W so that the reduction for one scale runs over the last dimension."""
    if granularity == "tensor":
        return w.reshape(1, -1)
    if granularity == "channel":
        return w.reshape(w.shape[0], -1)
    if granularity == "group":
        if w.shape[-1] % group_size:
            raise ValueError(f"in_features {w.shape[-1]} is not a multiple of group_size {group_size}")
        return w.reshape(-1, group_size)
    raise ValueError(f"granularity must be tensor, channel or group, not {granularity!r}")


def quantize(w: Tensor, bits: int = 8, *, symmetric: bool = True, granularity: str = "channel",
             group_size: int = 128) -> Quantized:
    """Round-to-nearest quantization of W (fp32 arithmetic whatever W's dtype)."""
    if not 2 <= bits <= 8:
        raise ValueError("bits must be between 2 and 8")
    wf = w.float()
    g = _grouped(wf, granularity, group_size)
    tiny = torch.finfo(torch.float32).tiny
    if symmetric:
        qmax = 2 ** (bits - 1) - 1
        scale = (g.abs().amax(-1, keepdim=True) / qmax).clamp_min(tiny)
        q = rounding(g / scale).clamp(-qmax, qmax)
        zero = None
    else:
        lo, hi = g.amin(-1, keepdim=True).clamp(max=0), g.amax(-1, keepdim=True).clamp(min=0)
        qmax = 2 ** bits - 1
        scale = ((hi - lo) / qmax).clamp_min(tiny)
        zero = rounding(-lo / scale)
        q = (rounding(g / scale) + zero).clamp(0, qmax)
    dtype = torch.int8 if symmetric else (torch.uint8 if bits == 8 else torch.int8)

    def full(t: Tensor) -> Tensor:
        return t.expand_as(g).reshape(w.shape)

    return Quantized(q.to(dtype).reshape(w.shape), full(scale), None if zero is None else full(zero), bits)


def quantize_int8(x: Tensor, per_channel: bool = True) -> tuple[Tensor, Tensor]:
    """Symmetric INT8 of a weight x [out, in]: scale = max|x| / 127 per output row (``per_channel``) or over
    the whole tensor, q = clamp(round(x / scale), −127, 127) as int8; x ≈ q · scale within scale/2. A scale
    of 0 (an all-zero row) is clamped to the smallest normal float32, so that row's codes are 0, not
    round(0/0) = NaN. Returns (q [out, in] int8, scale [out, 1] or [] float32)."""
    qz = quantize(x, 8, symmetric=True, granularity="channel" if per_channel else "tensor")
    scale = qz.scale[:, :1] if per_channel else qz.scale.reshape(-1)[0]
    return qz.q, scale


def fake_quantize(w: Tensor, bits: int = 8, **kw) -> Tensor:
    return quantize(w, bits, **kw).dequantize().to(w.dtype)


def pack_int4(codes: Tensor) -> Tensor:
    """Two signed 4-bit codes in [−8, 7] per uint8 byte (low nibble first); last dimension must be even."""
    if codes.shape[-1] % 2:
        raise ValueError("need an even number of codes per row")
    u = (codes.to(torch.int16) & 0xF).to(torch.uint8)
    return u[..., 0::2] | (u[..., 1::2] << 4)


def unpack_int4(packed: Tensor) -> Tensor:
    lo = (packed & 0xF).to(torch.int16)
    hi = (packed >> 4).to(torch.int16)
    both = torch.stack([lo, hi], -1).reshape(*packed.shape[:-1], -1)
    return torch.where(both > 7, both - 16, both).to(torch.int8)


def storage_bytes(numel: int, bits: int, group_size: int | None = None, scale_bytes: int = 2,
                  zero_point: bool = False) -> float:
    """Bytes to store ``numel`` weights at ``bits`` bits with one ``scale_bytes`` scale (and optionally a
    zero point of the same size) per ``group_size`` weights."""
    extra = 0 if group_size is None else numel / group_size * scale_bytes * (2 if zero_point else 1)
    return numel * bits / 8 + extra


def int8_matmul(x: Tensor, w: Tensor, act: str = "token") -> Tensor:
    """X Wᵀ with X quantized per row (``act="token"``, dynamic) or with one scale (``act="tensor"``) and W per
    output row, int32 accumulation, fp32 rescale: Y_to = s^x_t · s^w_o · Σ_j q^x_tj q^w_oj."""
    if act not in ("token", "tensor"):
        raise ValueError(f"act must be 'token' or 'tensor', not {act!r}")
    qx = quantize(x, 8, granularity="channel" if act == "token" else "tensor")
    qw = quantize(w, 8, granularity="channel")
    acc = qx.q.to(torch.int32) @ qw.q.to(torch.int32).T
    return acc.float() * qx.scale[:, :1] * qw.scale[:, :1].T


def smoothquant_scales(x: Tensor, w: Tensor, alpha: float = 0.5) -> Tensor:
    """Per-input-channel migration strengths s_j = max_t|X_tj|^α / max_o|W_oj|^{1−α} (SmoothQuant Eq. 4);
    use X / s (folded into the previous LayerNorm or linear) and W · s."""
    ax = x.abs().amax(0).float().clamp_min(1e-5)
    aw = w.abs().amax(0).float().clamp_min(1e-5)
    return (ax ** alpha / aw ** (1 - alpha)).clamp_min(1e-5)


def llm_int8_matmul(x: Tensor, w: Tensor, threshold: float = 6.0) -> tuple[Tensor, Tensor]:
    """LLM.int8() mixed-precision decomposition: input features j with max_t |X_tj| >= threshold go through a
    floating-point matmul, the rest through ``int8_matmul``. Returns (Y, outlier feature mask)."""
    outliers = x.abs().amax(0) >= threshold
    y = torch.zeros(x.shape[0], w.shape[0], dtype=torch.float32, device=x.device)
    if (~outliers).any():
        y = y + int8_matmul(x[:, ~outliers], w[:, ~outliers])
    if outliers.any():
        y = y + x[:, outliers].float() @ w[:, outliers].float().T
    return y, outliers


def gptq_quantize(w: Tensor, x: Tensor, bits: int = 4, *, group_size: int | None = None, block_size: int = 128,
                  percdamp: float = 0.01) -> Tensor:
    """GPTQ on one linear layer: returns the dequantized Ŵ that approximately minimises ‖XWᵀ − XŴᵀ‖² (in fp32,
    or fp64 for fp64 inputs).

    Per-channel symmetric scales from the original W (or per ``group_size`` columns, taken from the updated
    weights when the group starts), columns in their natural order, dampening λ = percdamp · mean diag(H)."""
    acc = torch.promote_types(w.dtype, torch.float32)                  # fp32 at least (fp64 stays fp64)
    wq = w.to(acc).clone()
    n_in = wq.shape[1]
    h = 2 * x.to(acc).T @ x.to(acc)
    dead = torch.diag(h) == 0
    h[dead, dead] = 1
    wq[:, dead] = 0
    h += percdamp * torch.diag(h).mean() * torch.eye(n_in, device=h.device)
    hinv = torch.linalg.cholesky(torch.cholesky_inverse(torch.linalg.cholesky(h)), upper=True)
    if group_size is not None and block_size % group_size:
        raise ValueError("block_size must be a multiple of group_size")
    qmax = 2 ** (bits - 1) - 1
    out = torch.zeros_like(wq)
    scale = None
    for b0 in range(0, n_in, block_size):
        b1 = min(b0 + block_size, n_in)
        w_blk = wq[:, b0:b1].clone()
        err = torch.zeros_like(w_blk)
        hb = hinv[b0:b1, b0:b1]
        for i in range(b1 - b0):
            col = b0 + i
            if scale is None or (group_size is not None and col % group_size == 0):
                src = w_blk[:, i:i + group_size] if group_size else wq      # the group, as updated so far
                scale = (src.abs().amax(1) / qmax).clamp_min(torch.finfo(torch.float32).tiny)
            wc = w_blk[:, i]
            qc = rounding(wc / scale).clamp(-qmax, qmax) * scale
            out[:, col] = qc
            e = (wc - qc) / hb[i, i]
            w_blk[:, i:] -= e[:, None] * hb[i, i:][None, :]
            err[:, i] = e
        wq[:, b1:] -= err @ hinv[b0:b1, b1:]
    return out.to(w.dtype)


def awq_quantize(w: Tensor, x: Tensor, bits: int = 4, *, group_size: int = 128, grid: int = 20
                 ) -> tuple[Tensor, Tensor, float]:
    """Activation-aware scaling: returns (Ŵ·diag(1/s) folded back, the per-input-channel s, the best α).
    The returned Ŵ multiplies the original X: XŴᵀ ≈ XWᵀ."""
    wf, xf = w.float(), x.float()
    ref = xf @ wf.T
    x_mag = xf.abs().mean(0).clamp_min(1e-8)
    best_loss, best = float("inf"), None
    for k in range(grid + 1):
        alpha = k / grid
        s = x_mag ** alpha
        s = s / (s.max() * s.min()).sqrt()
        wq = fake_quantize(wf * s, bits, granularity="group", group_size=group_size) / s
        loss = float(((xf @ wq.T - ref) ** 2).mean())
        if loss < best_loss:
            best_loss, best = loss, (wq, s, alpha)
    wq, s, alpha = best
    return wq.to(w.dtype), s, alpha


def fp8_roundtrip(x: Tensor, dtype: torch.dtype, block_size: int | None = None) -> Tensor:
    """Scale x so its absmax (per tensor, or per block of ``block_size`` along the last dimension) maps to the
    format's largest value, cast to ``dtype`` (float8_e4m3fn / float8_e5m2) and back: what FP8 storage keeps."""
    fmax = torch.finfo(dtype).max
    xf = x.float()
    if block_size:
        pad = -x.shape[-1] % block_size                                   # a shorter last block, padded with 0
        xf = torch.nn.functional.pad(xf, (0, pad))
        g = xf.reshape(*xf.shape[:-1], -1, block_size)
    else:
        g = xf.reshape(1, -1)
    scale = (g.abs().amax(-1, keepdim=True) / fmax).clamp_min(torch.finfo(torch.float32).tiny)
    out = ((g / scale).to(dtype).float() * scale).reshape(xf.shape)
    return out[..., : x.shape[-1]] if block_size else out.reshape(x.shape)


def output_error(x: Tensor, w: Tensor, w_hat: Tensor) -> float:
    """Mean squared error of the layer output, ‖XWᵀ − XŴᵀ‖² / numel."""
    return float(((x.float() @ w.float().T - x.float() @ w_hat.float().T) ** 2).mean())
