"""Mutants of the ML coding-round references (issue 26): multi-head attention and its KV-cached form, the
sampler's greedy branch, LayerNorm's half-precision path, Welford and Chan, INT8, BPE and the one-block GPT.

One mutant per line: Mutant(name, file, exact original snippet, replacement[, why=...][, equivalent=...]).
"""

from mianjing.mutation import Mutant as M

MHA = "impls/ml/mha.py"
DEC = "impls/ml/decoding.py"
NORM = "impls/arch/norms.py"
QUANT = "impls/numerics/quantization.py"
BPE = "impls/ml/bpe.py"
GPT = "impls/ml/gpt.py"

MUTANTS = [
    # ---- multi-head attention
    M("mha.split-without-transpose", MHA, "    return y.view(b, t, heads, dim // heads).transpose(1, 2)",
      "    return y.reshape(b, heads, t, dim // heads)",
      why="[B, T, D] viewed straight as [B, H, T, d]: one head's rows mix several tokens"),
    M("mha.merge-without-transpose", MHA, "    return o.transpose(1, 2).reshape(b, t, h * d)", "    return o.reshape(b, t, h * d)"),
    M("mha.scale-by-model-width", MHA, "/ math.sqrt(q.shape[-1])", "/ math.sqrt(q.shape[-1] * q.shape[1])",
      why="1/sqrt(D) instead of 1/sqrt(D/H)"),
    M("mha.softmax-without-max", MHA, "    e = torch.exp(scores - top)", "    e = torch.exp(scores)",
      why="exp overflows to inf for scores above 88.7 in fp32"),
    M("mha.fully-masked-row-nan", MHA,
      "    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))       # a row with no visible key\n", "",
      why="a query that sees no key gets -inf - (-inf) = NaN"),
    M("mha.mask-ignored", MHA, '    scores = scores.masked_fill(~visible, float("-inf"))\n', ""),
    M("mha.padding-on-queries", MHA, "key_padding_mask.to(torch.bool)[:, None, None, :]",
      "key_padding_mask.to(torch.bool)[:, None, :, None]", why="the padding mask broadcast over the query axis"),
    M("mha.causal-upper-triangle", MHA, "        visible = torch.tril(visible)", "        visible = torch.triu(visible)"),
    M("mha.no-width-check", MHA,
      '    b, t, dim = x.shape\n    if heads < 1 or dim % heads:\n        raise ValueError(f"model width {dim} is not divisible by '
      '{heads} heads")\n    q, k, v = _split(x @ wq, heads)',
      "    b, t, dim = x.shape\n    q, k, v = _split(x @ wq, heads)",
      why="D not divisible by H reaches view(), which raises a RuntimeError instead of a clear ValueError"),
    # ---- KV-cached attention
    M("kv.rope-at-position-zero", MHA, "    pos = torch.arange(s, s + t, device=x.device)", "    pos = torch.arange(0, t, device=x.device)",
      why="the new tokens rotated at 0..T-1 whatever the cache holds"),
    M("kv.mask-aligned-top-left", MHA,
      "    visible = torch.arange(s + t, device=x.device)[None, :] <= pos[:, None]      # [T, S+T], offset by S",
      "    visible = torch.arange(s + t, device=x.device)[None, :] <= torch.arange(t, device=x.device)[:, None]",
      why="tril(ones(T, S+T)), as SDPA's is_causal with T != S+T: the cache is hidden"),
    M("kv.rotates-v", MHA, "    v = _split(x @ wv, heads)\n    keys", '    v = rope(_split(x @ wv, heads), pos, base, layout="halves")\n    keys'),
    M("kv.new-keys-in-front", MHA, "    keys = torch.cat([cache_k.to(k.dtype), k], dim=2)", "    keys = torch.cat([k, cache_k.to(k.dtype)], dim=2)"),
    M("kv.q-in-the-other-layout", MHA, '    q = rope(_split(x @ wq, heads), pos, base, layout="halves")',
      '    q = rope(_split(x @ wq, heads), pos, base, layout="interleaved")',
      why="q and k paired differently (interleaved vs rotate-half)"),
    # ---- sampler: temperature 0
    M("decoding.zero-temperature-divides", DEC, "    if temperature == 0:\n        return torch.nn.functional.one_hot",
      "    if False:\n        return torch.nn.functional.one_hot", why="T = 0 reaches z / T"),
    M("decoding.greedy-takes-the-last-tie", DEC, "one_hot(z.argmax(dim=-1), z.shape[-1])",
      "one_hot(z.shape[-1] - 1 - z.flip(-1).argmax(dim=-1), z.shape[-1])",
      why="greedy is documented as torch.argmax's first maximum (vLLM's convention)"),
    # ---- norms
    M("norm.layer-norm-in-half-precision", NORM,
      "    xf = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x\n    mu = xf.mean(-1, keepdim=True)",
      "    xf = x\n    mu = xf.mean(-1, keepdim=True)", why="bf16 rounds a mean near 32 by up to 0.125"),
    M("norm.layer-norm-one-pass-variance", NORM, "    var = (xf - mu).pow(2).mean(-1, keepdim=True)",
      "    var = xf.pow(2).mean(-1, keepdim=True) - mu * mu", why="E[x²] - E[x]² cancels in fp32 when the mean is large"),
    M("norm.layer-norm-eps-outside", NORM, "    y = (xf - mu) * torch.rsqrt(var + eps)", "    y = (xf - mu) / (var.sqrt() + eps)"),
    M("norm.welford-squares-delta", NORM, "        m2 = m2 + delta * (x - mean)", "        m2 = m2 + delta * delta",
      why="the update must use the new mean on one side"),
    M("norm.chan-without-cross-term", NORM, "    return n, mean_a + delta * nb / n, m2a + m2b + delta * delta * na * nb / n",
      "    return n, mean_a + delta * nb / n, m2a + m2b"),
    M("norm.chan-weights-swapped", NORM, "    return n, mean_a + delta * nb / n, m2a + m2b + delta * delta * na * nb / n",
      "    return n, mean_a + delta * na / n, m2a + m2b + delta * delta * na * nb / n"),
    # ---- INT8
    M("int8.per-channel-ignored", QUANT, 'granularity="channel" if per_channel else "tensor"', 'granularity="tensor"'),
    M("int8.seven-bits", QUANT, "    qz = quantize(x, 8, symmetric=True,", "    qz = quantize(x, 7, symmetric=True,"),
    # ---- BPE
    M("bpe.tie-goes-to-the-last", BPE, "            pair = max(counts, key=counts.__getitem__)",
      "            pair = max(reversed(list(counts)), key=counts.__getitem__)"),
    M("bpe.merge-overlaps", BPE, "            out.append(new)\n            i += 2", "            out.append(new)\n            i += 1",
      why='"aaa" becomes [aa, aa]'),
    M("bpe.encode-highest-rank-first", BPE, "pair = min(zip(ids, ids[1:]), key=lambda p: rank.get(p, len(rank)))",
      "pair = max(zip(ids, ids[1:]), key=lambda p: rank.get(p, -1))"),
    M("bpe.decode-token-by-token", BPE, 'return b"".join(self.vocab[i] for i in ids).decode("utf-8", errors="replace")',
      'return "".join(self.vocab[i].decode("utf-8", errors="replace") for i in ids)'),
    M("bpe.vocab-keeps-the-left-half", BPE, "            self.vocab[new] = self.vocab[pair[0]] + self.vocab[pair[1]]",
      "            self.vocab[new] = self.vocab[pair[0]]"),
    M("bpe.no-early-stop", BPE, "            if not counts:\n                break\n", ""),
    # ---- GPT block
    M("gpt.no-label-shift", GPT,
      "    z = logits[:, :-1].to(torch.promote_types(logits.dtype, torch.float32))\n"
      "    loss = F.cross_entropy(z.reshape(-1, z.shape[-1]), tokens[:, 1:].reshape(-1))",
      "    z = logits.to(torch.promote_types(logits.dtype, torch.float32))\n"
      "    loss = F.cross_entropy(z.reshape(-1, z.shape[-1]), tokens.reshape(-1))"),
    M("gpt.residual-on-the-normed-input", GPT, '    h = h + mha(a, p["wq"]', '    h = a + mha(a, p["wq"]'),
    M("gpt.mlp-residual-on-the-normed-input", GPT, '    h = h + F.gelu(m @ p["w1"]', '    h = m + F.gelu(m @ p["w1"]'),
    M("gpt.not-causal", GPT, "heads, causal=True)", "heads, causal=False)"),
    M("gpt.no-final-norm", GPT, '    logits = layer_norm(h, p["lnf_w"], p["lnf_b"], LN_EPS) @ p["wte"].t()',
      '    logits = h @ p["wte"].t()'),
    M("gpt.tanh-gelu", GPT, 'F.gelu(m @ p["w1"] + p["b1"])', 'F.gelu(m @ p["w1"] + p["b1"], approximate="tanh")'),
    M("gpt.no-positions", GPT, '    h = p["wte"][tokens] + p["wpe"][:t]', '    h = p["wte"][tokens]'),
]
