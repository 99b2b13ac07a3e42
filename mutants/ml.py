"""Mutants of impls/ml: the bugs people write in sampling, beam search, training arithmetic, optimizers,
LoRA/QLoRA, RoPE scaling and the transformer block.

One mutant per line: Mutant(name, file, exact original snippet, replacement[, why=...][, equivalent=...]).
"""

from mianjing.mutation import Mutant as M

DEC = "impls/ml/decoding.py"
CNT = "impls/ml/counting.py"
CMP = "impls/ml/compute.py"
TRF = "impls/ml/transformer.py"
ATT = "impls/ml/attention.py"
LORA = "impls/ml/lora.py"
OPT = "impls/ml/optim.py"
SCL = "impls/ml/scaling.py"
ROPE = "impls/ml/rope_scaling.py"
AG = "impls/ml/autograd.py"
NORM = "impls/arch/norms.py"

MUTANTS = [
    # ---- sampling
    M("decoding.temperature-multiplies", DEC, "    return logits / t", "    return logits * t"),
    M("decoding.top-k-drops-the-kth", DEC, "logits.masked_fill(logits < kth, NEG_INF)", "logits.masked_fill(logits <= kth, NEG_INF)"),
    M("decoding.top-p-shift-of-greater", DEC, "remove_sorted = before >= p", "remove_sorted = before > p",
      why="the `cumsum > p` mask shifted right: one token too many when a prefix reaches p exactly"),
    M("decoding.top-p-inclusive-cumsum", DEC, "before = torch.cumsum(sorted_p, dim=-1) - sorted_p", "before = torch.cumsum(sorted_p, dim=-1)",
      why="no shift: the token that crosses p is dropped, and with a small p even the argmax"),
    M("decoding.top-p-ascending", DEC, "torch.sort(probs, dim=-1, descending=True, stable=True)", "torch.sort(probs, dim=-1, descending=False, stable=True)"),
    M("decoding.top-p-before-top-k", DEC, "    if top_k is not None:\n        z = top_k_filter(z, top_k)\n    if top_p is not None:\n        z = top_p_filter(z, top_p)",
      "    if top_p is not None:\n        z = top_p_filter(z, top_p)\n    if top_k is not None:\n        z = top_k_filter(z, top_k)"),
    # ---- search
    M("decoding.greedy-ignores-eos", DEC, "        if tok == eos_id:\n            return Hypothesis(tuple(tokens), total, total, True)", "        pass"),
    M("decoding.beam-top-k-candidates-only", DEC, "[: 2 * beam_width]", "[: beam_width]",
      why="ranks only k extensions, so a finished one leaves the next beam short"),
    M("decoding.beam-keeps-low-ranked-eos", DEC, "                if rank < beam_width:\n", "                if True:\n"),
    M("decoding.beam-eos-stays-active", DEC, "            else:\n                nxt.append((tokens, score))", "            nxt.append((tokens, score))",
      why="a finished hypothesis is also extended and keeps its slot"),
    M("decoding.beam-stops-at-first-eos", DEC, "if len(finished) >= beam_width or not active:", "if finished or not active:"),
    M("decoding.beam-drops-unfinished-at-limit", DEC, "        finished += [Hypothesis(t, s, _score(s, len(t), length_penalty), False) for t, s in active]", "        pass"),
    M("decoding.beam-ranks-by-logprob", DEC, "finished.sort(key=lambda h: -h.score)", "finished.sort(key=lambda h: -h.logprob)",
      why="the length penalty is computed but the raw log-probability decides"),
    M("decoding.length-penalty-always-one", DEC, "return logprob / (max(length, 1) ** length_penalty)", "return logprob / max(length, 1)"),
    M("decoding.markov-first-token", DEC, "prev = prefixes[:, -1] if t else", "prev = prefixes[:, 0] if t else"),
    # ---- parameter and FLOP counting
    M("counting.qkv-bias-misses-k", CNT, "        attn += q + 2 * kv\n", "        attn += q + kv\n"),
    M("counting.head-always-untied", CNT, "    head = 0 if cfg.tie else cfg.vocab * d", "    head = cfg.vocab * d"),
    M("counting.final-norm-for-post-ln", CNT, '    final = norm if a.norm_position == "pre" else 0', "    final = norm"),
    M("counting.head-not-a-matmul", CNT, "mats * d * cfg.ffn) + cfg.vocab * d", "mats * d * cfg.ffn)",
      why="the output head left out of N: 6ND undercounts by 6·V·d per token"),
    M("counting.attention-term-halved", CNT, "    attention = 12 * cfg.layers * cfg.heads * cfg.head_dim * t", "    attention = 6 * cfg.layers * cfg.heads * cfg.head_dim * t",
      why="counting only the causal half of the T×T scores"),
    M("counting.full-recompute-without-core", CNT, "        return model_flops + 2 * (matmul_params(cfg) - cfg.vocab * cfg.d) + core", "        return model_flops + 2 * (matmul_params(cfg) - cfg.vocab * cfg.d)"),
    # ---- training time and MFU
    M("compute.time-ignores-mfu", CMP, "    seconds = c / (gpus * device.peak_flops * mfu)", "    seconds = c / (gpus * device.peak_flops)"),
    M("compute.gpu-hours-in-minutes", CMP, "    return model_flops / (gpu_hours * 3600 * device.peak_flops)", "    return model_flops / (gpu_hours * 60 * device.peak_flops)"),
    M("compute.conv-ignores-groups", CMP, "    return 2 * (c_in // groups) * kh * kw * c_out * h_out * w_out", "    return 2 * c_in * kh * kw * c_out * h_out * w_out"),
    M("compute.published-hours-typo", CMP, 'PublishedRun("llama-2-70b", "a100", 2.0e12, 1_720_320, LLAMA2)', 'PublishedRun("llama-2-70b", "a100", 2.0e12, 172_032, LLAMA2)',
      why="a digit dropped while transcribing Table 2"),
    # ---- the transformer
    M("transformer.selective-recompute-off", TRF, '            layer.self_attn.recompute_core = recompute == "selective"', "            layer.self_attn.recompute_core = False"),
    M("transformer.checkpoint-early-stop", TRF, "        with set_checkpoint_early_stop(False):", "        with set_checkpoint_early_stop(True):",
      why="PyTorch's default: recomputation stops before the last matmul, so HFU is undercounted"),
    M("transformer.tied-head-duplicated", TRF, "        if not cfg.tie:\n            self.lm_head", "        if True:\n            self.lm_head"),
    # ---- attention basics
    M("attention.scale-one-over-d", ATT, "    logits = q @ k.transpose(-1, -2) * (d ** -0.5 if scaled else 1.0)", "    logits = q @ k.transpose(-1, -2) * (d ** -1.0 if scaled else 1.0)"),
    M("attention.mask-inverted", ATT, "    return torch.softmax(scores.masked_fill(~visible, value), dim=-1)", "    return torch.softmax(scores.masked_fill(visible, value), dim=-1)"),
    M("attention.post-mask-never-renormalised", ATT, "    return p / p.sum(-1, keepdim=True) if renormalize else p", "    return p"),
    # ---- LoRA / QLoRA
    M("lora.a-starts-at-zero", LORA, "            nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))", "            nn.init.zeros_(self.lora_A)"),
    M("lora.scaling-without-rank", LORA, "        self.scaling = alpha / r", "        self.scaling = alpha"),
    M("lora.merge-forgets-delta", LORA, "        out.weight.copy_(self.base.weight + self.delta_weight().to(self.base.weight.dtype))", "        out.weight.copy_(self.base.weight)"),
    M("lora.params-in-only", LORA, "    return cfg.layers * sum(r * (shapes[t][0] + shapes[t][1]) for t in targets)", "    return cfg.layers * sum(r * shapes[t][0] for t in targets)"),
    M("lora.nf4-offset", LORA, "NF4_OFFSET = 0.9677083", "NF4_OFFSET = 0.97"),
    M("lora.double-quant-fp32-codes", LORA, "        bits += 8 * n_blocks + 32 * math.ceil(n_blocks / block2) + 32", "        bits += 32 * n_blocks + 32 * math.ceil(n_blocks / block2) + 32"),
    # ---- optimizers and schedules
    M("optim.l2-dropped", OPT, "        grad = grad + weight_decay * theta", "        grad = grad"),
    M("optim.decay-without-lr", OPT, "        theta = theta * (1 - lr * weight_decay)", "        theta = theta * (1 - weight_decay)"),
    M("optim.bias-correction-off-by-one", OPT, "m / (1 - b1 ** t)", "m / (1 - b1 ** (t + 1))"),
    M("optim.newton-schulz-coefficient", OPT, "MUON_QUINTIC = (3.4445, -4.7750, 2.0315)", "MUON_QUINTIC = (3.0, -4.7750, 2.0315)"),
    M("optim.clip-always-rescales", OPT, "    factor = min(1.0, max_norm / (total + 1e-6))", "    factor = max_norm / (total + 1e-6)",
      why="scales small gradients up to the threshold: clipping that 'fixes' vanishing gradients"),
    M("optim.warmup-starts-at-zero", OPT, "        return peak * (step + 1) / warmup", "        return peak * step / warmup"),
    # ---- scaling laws
    M("scaling.exponents-swapped", SCL, "        return self.beta / (self.alpha + self.beta)", "        return self.alpha / (self.alpha + self.beta)"),
    M("scaling.refit-b", SCL, "LossFit(1.8172, 482.01, 2085.43,", "LossFit(1.8172, 482.01, 208.543,"),
    M("scaling.tokens-for-loss-exponent", SCL, "    return math.inf if rest <= 0 else (self.B / rest) ** (1 / self.beta)", "    return math.inf if rest <= 0 else (self.B / rest) ** (1 / self.alpha)"),
    # ---- RoPE scaling
    M("rope-scaling.ntk-base-linear", ROPE, "    return base * s ** (d / (d - 2))", "    return base * s"),
    M("rope-scaling.yarn-ramp-reversed", ROPE, "    return (1 - gamma) * theta / s + gamma * theta", "    return gamma * theta / s + (1 - gamma) * theta"),
    M("rope-scaling.yarn-temperature", ROPE, "(0.1 * math.log(s) + 1) ** 2", "(0.1 * math.log(s)) ** 2"),
    M("rope-scaling.seen-with-new-frequencies", ROPE, "    seen = torch.clamp(theta_train * (train_len - 1), max=2 * math.pi)", "    seen = torch.clamp(theta_test * (train_len - 1), max=2 * math.pi)"),
    # ---- autograd
    M("autograd.residual-path-forgotten", AG, "    d_x = grad_out + d_h @ w1.transpose(-1, -2)", "    d_x = d_h @ w1.transpose(-1, -2)"),
    M("autograd.graph-order-not-reversed", AG, "    return [type(fn).__name__ for fn in reversed(order)]", "    return [type(fn).__name__ for fn in order]"),
    # ---- BatchNorm over tokens (impls/arch/norms.py)
    M("norms.bn-ignores-mask", NORM, "    w = torch.ones(x.shape[:-1], dtype=xf.dtype, device=x.device) if mask is None else mask.to(xf.dtype)", "    w = torch.ones(x.shape[:-1], dtype=xf.dtype, device=x.device)"),
    M("norms.bn-unbiased-variance", NORM, "    var = ((xf - mean).pow(2) * w[..., None]).sum((0, 1)) / n", "    var = ((xf - mean).pow(2) * w[..., None]).sum((0, 1)) / (n - 1)"),
]
