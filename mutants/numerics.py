"""Mutants of impls/numerics: floating-point formats, BF16 rounding, loss scaling, master weights, FP32
accumulation, and integer / FP8 quantization (RTN, int4 packing, LLM.int8(), SmoothQuant, GPTQ, AWQ).

One mutant per line: Mutant(name, file, exact original snippet, replacement[, why=...][, equivalent=...]).
"""

from mianjing.mutation import Mutant as M

PREC = "impls/numerics/precision.py"
QUANT = "impls/numerics/quantization.py"

MUTANTS = [
    # formats and BF16 conversion
    M("numerics.layout-mantissa-off-by-one", PREC,
      "    mantissa = ((two ^ one) & -(two ^ one)).bit_length() - 1",
      "    mantissa = ((two ^ one) & -(two ^ one)).bit_length()"),
    M("numerics.bf16-round-half-up", PREC, "    rounded = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) & 0xFFFF",
      "    rounded = ((b + 0x8000) >> 16) & 0xFFFF", why="ties away from zero instead of to even"),
    M("numerics.bf16-ties-down", PREC, "    rounded = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) & 0xFFFF",
      "    rounded = ((b + 0x7FFF) >> 16) & 0xFFFF"),
    M("numerics.bf16-nan-not-quieted", PREC, "    return torch.where(nan, (b >> 16) | 0x0040, rounded).to(torch.int32)",
      "    return torch.where(nan, b >> 16, rounded).to(torch.int32)", why="a low-payload NaN truncates to inf"),
    # loss scaling, master weights, accumulation
    M("numerics.scaler-no-reset-after-overflow", PREC,
      "            self.scale *= self.backoff\n            self.clean_steps = 0\n",
      "            self.scale *= self.backoff\n",
      why="issue 20: the clean-step count survives an overflow, so the scale grows too early"),
    M("numerics.scaler-backoff-inverted", PREC, "            self.scale *= self.backoff\n",
      "            self.scale /= self.backoff\n"),
    M("numerics.static-scaler-keeps-inf", PREC, "            return g32 if finite else None", "            return g32"),
    M("numerics.scaler-grows-on-every-later-step", PREC,
      "        if self.clean_steps % self.growth_interval == 0:",
      "        if self.clean_steps >= self.growth_interval:", why="the count is not restarted after a growth"),
    M("numerics.master-copy-rounded-every-step", PREC, "            w32 -= lr * g\n",
      "            w32 = (w32 - lr * g).to(dtype).float()\n", why="the fp32 master stored back in 16 bits"),
    M("numerics.running-sum-drops-last-term", PREC, "    for i in range(x.shape[-1]):\n        acc = (acc",
      "    for i in range(x.shape[-1] - 1):\n        acc = (acc"),
    # integer quantization
    M("numerics.symmetric-qmax-2-to-the-b-1", QUANT, "        qmax = 2 ** (bits - 1) - 1\n        scale = (g.abs()",
      "        qmax = 2 ** (bits - 1)\n        scale = (g.abs()", why="int8 absmax divisor 128"),
    M("numerics.asym-zero-point-not-rounded", QUANT, "        zero = rounding(-lo / scale)", "        zero = -lo / scale"),
    M("numerics.asym-range-excludes-zero", QUANT,
      "        lo, hi = g.amin(-1, keepdim=True).clamp(max=0), g.amax(-1, keepdim=True).clamp(min=0)",
      "        lo, hi = g.amin(-1, keepdim=True), g.amax(-1, keepdim=True)",
      why="a constant group has a zero-width range: zero point -inf, dequantized to inf"),
    M("numerics.group-scale-per-column", QUANT, "        return w.reshape(-1, group_size)",
      "        return w.T.reshape(-1, group_size)", why="groups taken down a column instead of along a row"),
    M("numerics.int4-sign-extension-off-by-one", QUANT, "    return torch.where(both > 7, both - 16, both).to(torch.int8)",
      "    return torch.where(both > 8, both - 16, both).to(torch.int8)",
      why="issue 20: code -8 (nibble 0x8) unpacks as +8"),
    M("numerics.int4-nibbles-swapped", QUANT, "    return u[..., 0::2] | (u[..., 1::2] << 4)",
      "    return (u[..., 0::2] << 4) | u[..., 1::2]", why="high nibble first while unpack reads low first"),
    M("numerics.storage-zero-point-free", QUANT, "numel / group_size * scale_bytes * (2 if zero_point else 1)",
      "numel / group_size * scale_bytes"),
    M("numerics.int8-matmul-one-weight-scale", QUANT, "    return acc.float() * qx.scale[:, :1] * qw.scale[:, :1].T",
      "    return acc.float() * qx.scale[:, :1] * qw.scale.amax()", why="per-tensor weight scale assumed"),
    M("numerics.llm-int8-outliers-dropped", QUANT,
      "        y = y + x[:, outliers].float() @ w[:, outliers].float().T", "        y = y"),
    M("numerics.smoothquant-alpha-swapped", QUANT, "    return (ax ** alpha / aw ** (1 - alpha)).clamp_min(1e-5)",
      "    return (ax ** (1 - alpha) / aw ** alpha).clamp_min(1e-5)"),
    M("numerics.gptq-no-cross-block-update", QUANT, "        wq[:, b1:] -= err @ hinv[b0:b1, b1:]\n", "",
      why="lazy batches that never hand their errors to later blocks"),
    M("numerics.gptq-error-not-divided", QUANT, "            e = (wc - qc) / hb[i, i]", "            e = wc - qc"),
    M("numerics.gptq-inverse-not-its-cholesky", QUANT,
      "    hinv = torch.linalg.cholesky(torch.cholesky_inverse(torch.linalg.cholesky(h)), upper=True)",
      "    hinv = torch.cholesky_inverse(torch.linalg.cholesky(h))",
      why="H^-1 itself where the updates need its upper Cholesky factor"),
    M("numerics.awq-scale-not-undone", QUANT,
      "        wq = fake_quantize(wf * s, bits, granularity=\"group\", group_size=group_size) / s",
      "        wq = fake_quantize(wf * s, bits, granularity=\"group\", group_size=group_size)"),
    # FP8
    M("numerics.e5m2-scaled-to-448", QUANT, "    fmax = torch.finfo(dtype).max", "    fmax = 448.0",
      why="issue 20: E4M3's maximum used for every FP8 format"),
    M("numerics.fp8-scale-not-undone", QUANT, "    out = ((g / scale).to(dtype).float() * scale).reshape(xf.shape)",
      "    out = (g / scale).to(dtype).float().reshape(xf.shape)"),
]
