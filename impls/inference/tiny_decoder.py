"""A small Llama-style decoder with a real KV cache, built from the same ``ModelConfig`` as the calculator.

Each layer is pre-norm: x += Attn(RMSNorm(x)); x += SwiGLU(RMSNorm(x)). Attention is either

* GQA (MHA / GQA / MQA by ``n_kv_heads``): the cache holds K and V of shape [B, n_kv_heads, max_len, head_dim]
  per layer, RoPE already applied to K;
* MLA (DeepSeek-V2 §2.1, without query compression, as in DeepSeek-V2-Lite): the cache holds only the
  compressed latent c_KV = W_DKV·h of width d_c (``kv_lora_rank``) and the decoupled RoPE key k^R = RoPE(W_KR·h)
  of width d_h^R shared by all heads. Per-head keys and values are re-expanded from c_KV at every step, or,
  with ``MLAttention.absorbed`` (what serving engines do at decode), W^UK is folded into the query and W^UV
  into the output, so attention runs as MQA over the latent itself (see ``MLAttention``).

The cache is allocated once for ``max_len`` tokens in the cache dtype (fp32, bf16 or fp8 e4m3 storage,
upcast on read), so ``KVCache.nbytes()`` is what a serving engine would reserve for that length. The model
runs on any device, including ``meta``, which gives the exact cache tensors of a full-size config without
allocating them.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .gqa import grouped_query_attention
from .kv_cache import ModelConfig

CACHE_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16, "fp8": torch.float8_e4m3fn}


def rope(x: Tensor, positions: Tensor, theta: float = 10000.0) -> Tensor:
    """Rotary embedding, rotate-half convention: x [.., T, d] with d even, positions [T]."""
    d = x.shape[-1]
    inv = theta ** (-torch.arange(0, d, 2, device=x.device, dtype=torch.float32) / d)
    ang = positions.to(torch.float32)[:, None] * inv[None, :]
    cos, sin = torch.cat([ang.cos(), ang.cos()], -1), torch.cat([ang.sin(), ang.sin()], -1)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return (x.float() * cos + torch.cat([-x2, x1], -1).float() * sin).to(x.dtype)


class KVCache:
    """Per-layer cache tensors, allocated for ``max_len`` tokens up front."""

    def __init__(self, cfg: ModelConfig, batch: int, max_len: int, dtype: str = "bf16", device=None):
        self.dtype = CACHE_DTYPES[dtype]
        self.max_len = max_len
        if cfg.attention == "mla":
            shapes = {"c_kv": (batch, max_len, cfg.kv_lora_rank), "k_rope": (batch, max_len, cfg.qk_rope_head_dim)}
        else:
            shapes = {n: (batch, cfg.n_kv_heads, max_len, cfg.head_dim) for n in ("k", "v")}
        self.layers = [{n: torch.zeros(s, dtype=self.dtype, device=device) for n, s in shapes.items()}
                       for _ in range(cfg.n_layers)]

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for layer in self.layers for t in layer.values())

    def tensors(self) -> list[Tensor]:
        return [t for layer in self.layers for t in layer.values()]


class GQAttention(nn.Module):
    def __init__(self, cfg: ModelConfig, device=None):
        super().__init__()
        self.cfg = cfg
        h, hd = cfg.hidden_size, cfg.head_dim
        self.wq = nn.Linear(h, cfg.n_heads * hd, bias=False, device=device)
        self.wk = nn.Linear(h, cfg.n_kv_heads * hd, bias=False, device=device)
        self.wv = nn.Linear(h, cfg.n_kv_heads * hd, bias=False, device=device)
        self.wo = nn.Linear(cfg.n_heads * hd, h, bias=False, device=device)

    def forward(self, x: Tensor, pos: Tensor, cache: dict | None, start: int, kpm: Tensor | None) -> Tensor:
        b, t, _ = x.shape
        c = self.cfg
        q = rope(self.wq(x).view(b, t, c.n_heads, c.head_dim).transpose(1, 2), pos)
        k = rope(self.wk(x).view(b, t, c.n_kv_heads, c.head_dim).transpose(1, 2), pos)
        v = self.wv(x).view(b, t, c.n_kv_heads, c.head_dim).transpose(1, 2)
        if cache is not None:
            cache["k"][:, :, start:start + t] = k.to(cache["k"].dtype)
            cache["v"][:, :, start:start + t] = v.to(cache["v"].dtype)
            k = cache["k"][:, :, : start + t].to(x.dtype)
            v = cache["v"][:, :, : start + t].to(x.dtype)
        o = grouped_query_attention(q, k, v, causal=True, key_padding_mask=kpm)
        return self.wo(o.transpose(1, 2).reshape(b, t, -1))


class MLAttention(nn.Module):
    """Multi-head latent attention: c_KV = RMSNorm(W_DKV h), k^R = RoPE(W_KR h);
    [k^C_i; v_i] = W_UKV c_KV per head; k_i = [k^C_i; k^R]; q_i = [q^C_i; RoPE(q^R_i)].

    ``absorbed = True`` computes the same attention without expanding per-head K and V (DeepSeek-V2 §2.1.2):

        q_i·k_ij = (W^UK_iᵀ q^C_i)·c_j + q^R_i·k^R_j,     o_i = W^UV_i Σ_j p_ij c_j,

    i.e. MQA with one shared key [c_j; k^R_j] of width d_c + d_h^R and one shared value c_j of width d_c, at
    the scale 1/√(d_nope + d_h^R) of the expanded heads. This is possible only because RoPE is not applied
    to W^UK c_j: a rotation R_j between W^Q and W^UK would make the folded matrix depend on the key's
    position, hence the separate RoPE key k^R."""

    absorbed: bool = False

    def __init__(self, cfg: ModelConfig, device=None):
        super().__init__()
        self.cfg = cfg
        h, nh = cfg.hidden_size, cfg.n_heads
        self.dq = cfg.qk_nope_head_dim + cfg.qk_rope_head_dim
        self.wq = nn.Linear(h, nh * self.dq, bias=False, device=device)
        self.w_dkv = nn.Linear(h, cfg.kv_lora_rank + cfg.qk_rope_head_dim, bias=False, device=device)
        self.kv_norm = nn.RMSNorm(cfg.kv_lora_rank, eps=1e-6, device=device)
        self.w_ukv = nn.Linear(cfg.kv_lora_rank, nh * (cfg.qk_nope_head_dim + cfg.v_head_dim), bias=False,
                               device=device)
        self.wo = nn.Linear(nh * cfg.v_head_dim, h, bias=False, device=device)

    def forward(self, x: Tensor, pos: Tensor, cache: dict | None, start: int, kpm: Tensor | None) -> Tensor:
        b, t, _ = x.shape
        c = self.cfg
        q = self.wq(x).view(b, t, c.n_heads, self.dq).transpose(1, 2)
        q = torch.cat([q[..., : c.qk_nope_head_dim], rope(q[..., c.qk_nope_head_dim:], pos)], -1)
        latent = self.w_dkv(x)
        c_kv = self.kv_norm(latent[..., : c.kv_lora_rank])
        k_rope = rope(latent[..., c.kv_lora_rank:], pos)                       # [B, T, d_R], one for all heads
        if cache is not None:
            cache["c_kv"][:, start:start + t] = c_kv.to(cache["c_kv"].dtype)
            cache["k_rope"][:, start:start + t] = k_rope.to(cache["k_rope"].dtype)
            c_kv = cache["c_kv"][:, : start + t].to(x.dtype)
            k_rope = cache["k_rope"][:, : start + t].to(x.dtype)
        s = c_kv.shape[1]
        if self.absorbed:
            w = self.w_ukv.weight.view(c.n_heads, c.qk_nope_head_dim + c.v_head_dim, c.kv_lora_rank)
            w_uk, w_uv = w[:, : c.qk_nope_head_dim], w[:, c.qk_nope_head_dim:]
            q_lat = torch.einsum("bhtn,hnc->bhtc", q[..., : c.qk_nope_head_dim], w_uk)
            q_cat = torch.cat([q_lat, q[..., c.qk_nope_head_dim:]], -1)                 # [B, H, T, d_c + d_R]
            k_cat = torch.cat([c_kv, k_rope], -1)[:, None]                              # [B, 1, S, d_c + d_R]
            o_lat = grouped_query_attention(q_cat, k_cat, c_kv[:, None], causal=True, key_padding_mask=kpm,
                                            scale=self.dq ** -0.5)                      # [B, H, T, d_c]
            o = torch.einsum("bhtc,hvc->bhtv", o_lat, w_uv)
            return self.wo(o.transpose(1, 2).reshape(b, t, -1))
        kv = self.w_ukv(c_kv).view(b, s, c.n_heads, c.qk_nope_head_dim + c.v_head_dim).transpose(1, 2)
        k = torch.cat([kv[..., : c.qk_nope_head_dim], k_rope[:, None].expand(b, c.n_heads, s, -1)], -1)
        v = kv[..., c.qk_nope_head_dim:]
        o = grouped_query_attention(q, k, v, causal=True, key_padding_mask=kpm)
        return self.wo(o.transpose(1, 2).reshape(b, t, -1))


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig, device=None):
        super().__init__()
        h, f = cfg.hidden_size, cfg.intermediate_size
        self.norm1 = nn.RMSNorm(h, eps=1e-6, device=device)
        self.attn = (MLAttention if cfg.attention == "mla" else GQAttention)(cfg, device)
        self.norm2 = nn.RMSNorm(h, eps=1e-6, device=device)
        self.gate = nn.Linear(h, f, bias=False, device=device)
        self.up = nn.Linear(h, f, bias=False, device=device)
        self.down = nn.Linear(f, h, bias=False, device=device)

    def forward(self, x, pos, cache, start, kpm):
        x = x + self.attn(self.norm1(x), pos, cache, start, kpm)
        y = self.norm2(x)
        return x + self.down(nn.functional.silu(self.gate(y)) * self.up(y))


class TinyDecoder(nn.Module):
    """``device="meta"`` builds a full-size config without memory (shapes and dtypes only)."""

    def __init__(self, cfg: ModelConfig, seed: int | None = 0, device=None):
        super().__init__()
        if seed is not None:
            torch.manual_seed(seed)
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab_size, cfg.hidden_size, device=device)
        self.blocks = nn.ModuleList(Block(cfg, device) for _ in range(cfg.n_layers))
        self.norm = nn.RMSNorm(cfg.hidden_size, eps=1e-6, device=device)
        self.head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False, device=device)

    def new_cache(self, batch: int, max_len: int, dtype: str = "bf16") -> KVCache:
        return KVCache(self.cfg, batch, max_len, dtype, device=self.embed.weight.device)

    def forward(self, tokens: Tensor, cache: KVCache | None = None, start: int = 0,
                key_padding_mask: Tensor | None = None) -> Tensor:
        """Logits [B, T, V] for ``tokens`` [B, T] at positions start..start+T-1. With a cache the new K/V
        (or latents) are written at those positions and attention reads positions 0..start+T-1;
        ``key_padding_mask`` [B, start+T] marks real tokens (left padding)."""
        t = tokens.shape[1]
        if cache is not None and start + t > cache.max_len:
            raise ValueError(f"cache holds {cache.max_len} tokens, asked to write up to {start + t}")
        pos = torch.arange(start, start + t, device=tokens.device)
        x = self.embed(tokens)
        for i, blk in enumerate(self.blocks):
            x = blk(x, pos, None if cache is None else cache.layers[i], start, key_padding_mask)
        return self.head(self.norm(x))


def tiny_config(n_kv_heads: int = 2, attention: str = "gqa", n_layers: int = 2) -> ModelConfig:
    """A decoder small enough to run many times on a CPU."""
    if attention == "mla":
        return ModelConfig("tiny-mla", n_layers, 64, 4, 4, 24, 96, 97, attention="mla", kv_lora_rank=32,
                           qk_rope_head_dim=8, qk_nope_head_dim=16, v_head_dim=16)
    return ModelConfig(f"tiny-gqa{n_kv_heads}", n_layers, 64, 8, n_kv_heads, 8, 96, 97)
