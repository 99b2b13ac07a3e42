"""A decoder-only transformer whose block is a set of switches: the 2017 Transformer, GPT-3, LLaMA, Qwen2, Qwen3.

The shapes and switches are ``impls/ml/counting.py``'s ``Decoder`` and ``Arch``; ``build(cfg)`` makes the
``nn.Module`` (on any device, including ``meta`` for full-size configs), whose ``sum(p.numel())`` must equal
``counting.param_counts(cfg)["total"]``. Module names follow Hugging Face's Llama/Qwen code
(``model.layers.{i}.self_attn.q_proj``, ``mlp.gate_proj`` ...) so LoRA target names mean the same here.

Block forms (Xiong et al. 2020): post-norm x = N(x + F(x)); pre-norm x = x + F(N(x)) with a final norm.
``CausalLM(recompute=...)`` really recomputes (selective: the attention core; full: each layer), so
``torch.utils.flop_counter.FlopCounterMode`` sees the hardware FLOPs that ``counting.hardware_flops_per_token``
predicts.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint, set_checkpoint_early_stop

from impls.inference.gqa import grouped_query_attention
from impls.inference.tiny_decoder import rope
from impls.ml.counting import Decoder


# ------------------------------------------------------------------------------------ modules
class _Norm(nn.Module):
    """RMSNorm (weight) or LayerNorm (weight, and bias when the architecture has biases)."""

    def __init__(self, n: int, kind: str, bias: bool, device=None, eps: float = 1e-6):
        super().__init__()
        self.kind, self.eps = kind, eps
        self.weight = nn.Parameter(torch.ones(n, device=device))
        self.bias = nn.Parameter(torch.zeros(n, device=device)) if kind == "layernorm" and bias else None

    def forward(self, x: Tensor) -> Tensor:
        if self.kind == "rmsnorm":
            return F.rms_norm(x, (x.shape[-1],), self.weight, self.eps)
        return F.layer_norm(x, (x.shape[-1],), self.weight, self.bias, self.eps)


def _attention_core(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
    return grouped_query_attention(q, k, v, causal=True)


class Attention(nn.Module):
    def __init__(self, cfg: Decoder, device=None):
        super().__init__()
        a, d, hd = cfg.arch, cfg.d, cfg.head_dim
        self.cfg = cfg
        qkv_bias = a.bias or a.qkv_bias
        self.q_proj = nn.Linear(d, cfg.heads * hd, bias=qkv_bias, device=device)
        self.k_proj = nn.Linear(d, cfg.kv_heads * hd, bias=qkv_bias, device=device)
        self.v_proj = nn.Linear(d, cfg.kv_heads * hd, bias=qkv_bias, device=device)
        self.o_proj = nn.Linear(cfg.heads * hd, d, bias=a.bias, device=device)
        if a.qk_norm:
            self.q_norm = _Norm(hd, "rmsnorm", False, device)
            self.k_norm = _Norm(hd, "rmsnorm", False, device)
        self.recompute_core = False

    def forward(self, x: Tensor) -> Tensor:
        b, t, _ = x.shape
        c = self.cfg
        q = self.q_proj(x).view(b, t, c.heads, c.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, t, c.kv_heads, c.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, t, c.kv_heads, c.head_dim).transpose(1, 2)
        if c.arch.qk_norm:
            q, k = self.q_norm(q), self.k_norm(k)
        if c.arch.positions == "rope":
            pos = torch.arange(t, device=x.device)
            q, k = rope(q, pos, c.arch.rope_base), rope(k, pos, c.arch.rope_base)    # rotate-half, as Llama
        if self.recompute_core:
            o = checkpoint(_attention_core, q, k, v, use_reentrant=False)
        else:
            o = _attention_core(q, k, v)
        return self.o_proj(o.transpose(1, 2).reshape(b, t, -1))


class MLP(nn.Module):
    def __init__(self, cfg: Decoder, device=None):
        super().__init__()
        a, d, f = cfg.arch, cfg.d, cfg.ffn
        self.kind = a.mlp
        if a.mlp == "swiglu":
            self.gate_proj = nn.Linear(d, f, bias=a.bias, device=device)
        self.up_proj = nn.Linear(d, f, bias=a.bias, device=device)
        self.down_proj = nn.Linear(f, d, bias=a.bias, device=device)

    def forward(self, x: Tensor) -> Tensor:
        if self.kind == "swiglu":
            return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))
        act = F.relu if self.kind == "relu" else F.gelu
        return self.down_proj(act(self.up_proj(x)))


class Layer(nn.Module):
    def __init__(self, cfg: Decoder, device=None):
        super().__init__()
        a = cfg.arch
        self.post = a.norm_position == "post"
        self.self_attn = Attention(cfg, device)
        self.mlp = MLP(cfg, device)
        self.input_layernorm = _Norm(cfg.d, a.norm, a.bias, device)
        self.post_attention_layernorm = _Norm(cfg.d, a.norm, a.bias, device)

    def forward(self, x: Tensor) -> Tensor:
        if self.post:
            x = self.input_layernorm(x + self.self_attn(x))
            return self.post_attention_layernorm(x + self.mlp(x))
        x = x + self.self_attn(self.input_layernorm(x))
        return x + self.mlp(self.post_attention_layernorm(x))


def sinusoidal(t: int, d: int, device=None) -> Tensor:
    """Vaswani et al. §3.5: PE[p, 2i] = sin(p / 10000^(2i/d)), PE[p, 2i+1] = cos(...)."""
    pos = torch.arange(t, dtype=torch.float32, device=device)[:, None]
    inv = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float32, device=device) / d)
    pe = torch.zeros(t, d, device=device)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(pos * inv), torch.cos(pos * inv)
    return pe


class CausalLM(nn.Module):
    """``model.embed_tokens`` → layers → (final norm) → ``lm_head``; ``recompute``: none | selective | full."""

    def __init__(self, cfg: Decoder, device=None, recompute: str = "none"):
        super().__init__()
        if recompute not in ("none", "selective", "full"):
            raise ValueError(f"recompute must be none, selective or full, not {recompute!r}")
        a = cfg.arch
        self.cfg, self.recompute = cfg, recompute
        self.model = nn.Module()
        self.model.embed_tokens = nn.Embedding(cfg.vocab, cfg.d, device=device)
        if a.positions == "learned":
            self.model.embed_positions = nn.Embedding(cfg.context, cfg.d, device=device)
        self.model.layers = nn.ModuleList(Layer(cfg, device) for _ in range(cfg.layers))
        if a.norm_position == "pre":
            self.model.norm = _Norm(cfg.d, a.norm, a.bias, device)
        if not cfg.tie:
            self.lm_head = nn.Linear(cfg.d, cfg.vocab, bias=False, device=device)
        for layer in self.model.layers:
            layer.self_attn.recompute_core = recompute == "selective"

    def head_weight(self) -> Tensor:
        return self.model.embed_tokens.weight if self.cfg.tie else self.lm_head.weight

    def forward(self, tokens: Tensor) -> Tensor:
        """Logits [B, T, V] for tokens [B, T]."""
        t = tokens.shape[1]
        x = self.model.embed_tokens(tokens)
        if self.cfg.arch.positions == "learned":
            x = x + self.model.embed_positions(torch.arange(t, device=tokens.device))
        elif self.cfg.arch.positions == "sinusoidal":
            x = x * math.sqrt(self.cfg.d) + sinusoidal(t, self.cfg.d, tokens.device).to(x.dtype)
        # Megatron replays the whole recomputed region; PyTorch's non-reentrant checkpoint would by default stop
        # as soon as backward has what it needs (skipping e.g. the last matmul), so early stop is off here.
        with set_checkpoint_early_stop(False):
            for layer in self.model.layers:
                x = checkpoint(layer, x, use_reentrant=False) if self.recompute == "full" else layer(x)
        if self.cfg.arch.norm_position == "pre":
            x = self.model.norm(x)
        return x @ self.head_weight().t()


def build(cfg: Decoder, device=None, seed: int | None = 0, recompute: str = "none") -> CausalLM:
    """The module tree of ``cfg`` (``device="meta"`` for full-size shapes without memory)."""
    if seed is not None and device != "meta":
        torch.manual_seed(seed)
    return CausalLM(cfg, device, recompute)


def numel(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())
