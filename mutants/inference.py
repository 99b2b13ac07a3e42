"""Mutants of impls/inference: speculative sampling, attention (tiled, split-KV, the Triton kernel's traffic
model), GQA/MLA, the roofline, batching, the KV calculator and the paged allocator.

One mutant per line: Mutant(name, file, exact original snippet, replacement[, why=...][, equivalent=...]).
"""

from mianjing.mutation import Mutant as M

SPEC = "impls/inference/speculative.py"
ATT = "impls/inference/attention.py"
FAT = "impls/inference/flash_attention_triton.py"
GQA = "impls/inference/gqa.py"
TINY = "impls/inference/tiny_decoder.py"
ROOF = "impls/inference/roofline.py"
BAT = "impls/inference/batching.py"
KV = "impls/inference/kv_cache.py"
PAGED = "impls/inference/paged_kv.py"

MUTANTS = [
    # speculative sampling
    M("inference.spec.bonus-from-last-draft-position", SPEC,
      "    extra_w = torch.where((n_acc == gamma)[:, None], p[:, gamma], resid)",
      "    extra_w = torch.where((n_acc == gamma)[:, None], p[:, gamma - 1], resid)",
      why="issue 20: the bonus token drawn from p_γ instead of p_{γ+1}"),
    M("inference.spec.residual-always-at-position-0", SPEC, "    at = n_acc.clamp(max=gamma - 1)\n",
      "    at = torch.zeros_like(n_acc)\n", why="issue 20: the residual taken at the first draft whatever was rejected"),
    M("inference.spec.accept-on-q-over-p", SPEC, "    accept = uniform[:, :gamma] * q_x < p_x",
      "    accept = uniform[:, :gamma] * p_x < q_x", why="the ratio inverted"),
    M("inference.spec.residual-q-minus-p", SPEC, "    return (p - q).clamp(min=0)", "    return (q - p).clamp(min=0)"),
    M("inference.spec.counts-every-accept", SPEC,
      "    n_acc = torch.where(accept.all(-1), gamma, (~accept).int().argmax(-1))",
      "    n_acc = accept.int().sum(-1)", why="counts accepted drafts instead of the accepted prefix"),
    M("inference.spec.inverse-cdf-unnormalised", SPEC, "    return (c <= u[:, None] * c[:, -1:]).sum(-1)",
      "    return (c <= u[:, None]).sum(-1)", why="inverse CDF as if the weights summed to 1 (the residual does not)"),
    M("inference.spec.expected-tokens-no-bonus", SPEC, "(1 - alpha ** (gamma + 1)) / (1 - alpha)",
      "(1 - alpha ** gamma) / (1 - alpha)"),
    M("inference.spec.speedup-bonus-costs-a-draft", SPEC, "    return expected_tokens(alpha, gamma) / (gamma * c + 1)",
      "    return expected_tokens(alpha, gamma) / ((gamma + 1) * c + 1)"),
    # tiled attention, split-KV
    M("inference.fa.no-rescale-of-accumulator", ATT, "                acc = alpha[..., None] * acc + pv",
      "                acc = acc + pv"),
    M("inference.fa.lse-without-running-max", ATT,
      "            lse[..., rows] = torch.where(l > 0, m + log(l.clamp_min(torch.finfo(acc_dtype).tiny)),",
      "            lse[..., rows] = torch.where(l > 0, log(l.clamp_min(torch.finfo(acc_dtype).tiny)),"),
    M("inference.fa.kv-outer-old-output-not-reweighted", ATT,
      "            o[..., rows, :] = ((l_i * a_old)[..., None] * o_i + a_new[..., None] * pv) / denom",
      "            o[..., rows, :] = (l_i[..., None] * o_i + a_new[..., None] * pv) / denom"),
    M("inference.fa.causal-skip-off-by-one", ATT, "    return causal and cols.start > rows.stop - 1 + (s_len - n)",
      "    return causal and cols.start >= rows.stop - 1 + (s_len - n)", why="skips a block holding the diagonal"),
    M("inference.fa.causal-top-left", ATT, "        vis = c <= r + (s - n)\n", "        vis = c <= r\n",
      why="prefill alignment used when decoding with a cache (S > N)"),
    M("inference.fa.backward-d-without-o", ATT, "    big_d = (dof * of).sum(-1)", "    big_d = dof.sum(-1)"),
    M("inference.fa.backward-dk-unscaled", ATT, "            dsq = (ds.transpose(-1, -2) @ qi) * tau",
      "            dsq = ds.transpose(-1, -2) @ qi"),
    M("inference.fa.materialises-scores", ATT, "    c = counter or IOCount()\n    lead = q.shape[:-2]\n",
      "    c = counter or IOCount()\n    _scores = (q @ k.transpose(-1, -2)).contiguous()\n    lead = q.shape[:-2]\n",
      why="issue 20: a tiled forward that builds N×S anyway, unseen by its own counters"),
    M("inference.fa.fa1-io-undercounts-l-m", ATT, "    return n * d + 2 * n + 2 * n * d + t_c * (3 * n * d + 4 * n)",
      "    return n * d + 2 * n + 2 * n * d + t_c * (3 * n * d + 2 * n)"),
    M("inference.fa.fa1-rows-not-capped-at-d", ATT, "    return min(bc, d), bc", "    return bc, bc"),
    M("inference.fa.split-kv-max-not-logsumexp", ATT, "    lse = torch.logsumexp(lse_parts, 0)", "    lse = lse_parts.amax(0)"),
    M("inference.fa.split-kv-chunks-unweighted", ATT, "    weights = torch.exp(lse_parts - lse_safe)",
      "    weights = torch.ones_like(lse_parts) / len(parts)", why="averages the partial outputs"),
    # the Triton kernel (interpreted on CPU) and its traffic model
    M("inference.fa-triton.denominator-not-rescaled", FAT, "            l = l * alpha + tl.sum(p, axis=1)",
      "            l = l + tl.sum(p, axis=1)"),
    M("inference.fa-triton.causal-stops-before-diagonal", FAT, "            hi = tl.minimum(Nk, (pid_m + 1) * BLOCK_M + Nk - Nq)",
      "            hi = tl.minimum(Nk, pid_m * BLOCK_M + Nk - Nq)"),
    M("inference.fa-triton.traffic-not-rounded-to-tiles", FAT, "        visited = min(N, -(-hi // block_n) * block_n)",
      "        visited = hi", why="sizes and tiles that are multiples of each other hide it"),
    # GQA, MLA
    M("inference.gqa.heads-interleaved", GQA, "    qg = q.reshape(b, h_kv, g, t, d).to(acc)",
      "    qg = q.reshape(b, g, h_kv, t, d).transpose(1, 2).to(acc)",
      why="query head h reads K/V head h mod H_kv instead of h // G (HF's repeat_kv is consecutive)"),
    M("inference.gqa.causal-top-left", GQA,
      "        visible = torch.arange(s, device=q.device)[None, :] <= torch.arange(t, device=q.device)[:, None] + (s - t)",
      "        visible = torch.arange(s, device=q.device)[None, :] <= torch.arange(t, device=q.device)[:, None]"),
    M("inference.tiny.mla-absorbed-scale-of-latent", TINY,
      "key_padding_mask=kpm,\n                                            scale=self.dq ** -0.5)",
      "key_padding_mask=kpm)", why="the absorbed query is 576 wide, but the scale is the expanded head's"),
    M("inference.tiny.mla-absorbed-value-up-projection-of-keys", TINY, "            w_uk, w_uv = w[:, : c.qk_nope_head_dim], w[:, c.qk_nope_head_dim:]",
      "            w_uk, w_uv = w[:, : c.qk_nope_head_dim], w[:, : c.v_head_dim]"),
    # roofline, batching
    M("inference.roofline.dense-pairs", ROOF, "    pairs = sum(n * c + n * (n + 1) // 2 for n, c in seqs)",
      "    pairs = sum(n * (c + n) for n, c in seqs)", why="counts masked-out pairs a causal kernel skips"),
    M("inference.roofline.kv-read-without-new-tokens", ROOF,
      "    kv = cfg.n_layers * elements_per_token_per_layer(cfg) * sum(n + c for n, c in seqs) * cache_bytes",
      "    kv = cfg.n_layers * elements_per_token_per_layer(cfg) * sum(c for n, c in seqs) * cache_bytes"),
    M("inference.roofline.weights-read-per-sequence", ROOF,
      "    return StepCost(lin, attn, linear_params(cfg) * weight_bytes, kv, act)",
      "    return StepCost(lin, attn, linear_params(cfg) * weight_bytes * len(seqs), kv, act)"),
    M("inference.batching.stall-counts-the-cold-start", BAT,
      "        stalling = [t for t, d in zip(self.iter_times, self.decodes_in_flight) if d > 0]",
      "        stalling = self.iter_times", why="issue 20: the 69x iteration that stalls no decode"),
    M("inference.batching.continuous-one-token-too-many", BAT, "            if r[1] < r[2]:\n                nxt.append(r)",
      "            if r[1] <= r[2]:\n                nxt.append(r)"),
    # KV calculator, paged allocator
    M("inference.kv.mla-factor-two", KV, "        return cfg.kv_lora_rank + cfg.qk_rope_head_dim",
      "        return 2 * (cfg.kv_lora_rank + cfg.qk_rope_head_dim)"),
    M("inference.kv.tp-splits-total-evenly", KV,
      "    return kv_cache_bytes(replace(cfg, n_kv_heads=kv_heads_per_gpu(cfg, tp)), seq_len, batch, dtype)",
      "    return kv_cache_bytes(cfg, seq_len, batch, dtype) // tp", why="ignores KV-head replication past TP = n_kv"),
    M("inference.paged.cow-only-when-three-share", PAGED, "        elif self.alloc.refcount[table[-1]] > 1:",
      "        elif self.alloc.refcount[table[-1]] > 2:"),
    M("inference.paged.prefix-hash-without-parent", PAGED, "                h = block_hash(parent, chunk) if full else None",
      "                h = block_hash(None, chunk) if full else None",
      why="a block reused for equal tokens after a different prefix (its KV differs)"),
    M("inference.paged.first-fit-skips-exact-hole", PAGED, "            if start - pos >= size:", "            if start - pos > size:"),
]
