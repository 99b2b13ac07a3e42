r"""A tiny causal transformer with a KV cache.

Decoding state: the prefix $s_t=(x_1,\dots,x_t)$; the transition $s_{t+1}=s_t\oplus a_t$ is
deterministic, so the token process is Markov in $s_t$ by construction. The KV cache holds, per
layer, $K=XW_K$, $V=XW_V$ of every prefix position; it is a deterministic function of the prefix,
so cached decoding must give the same logits as recomputing the whole prefix:
$\mathrm{softmax}(q_tK_{\le t}^\top/\sqrt{d})V_{\le t}$ is the same either way.
"""

from __future__ import annotations

import math

import torch
from torch import nn

KVCache = list[tuple[torch.Tensor, torch.Tensor]]  # per layer: (K, V), each [B, H, L, Dh]


class _Block(nn.Module):
    def __init__(self, d: int, n_heads: int):
        super().__init__()
        self.h, self.dh = n_heads, d // n_heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x: torch.Tensor, past: tuple[torch.Tensor, torch.Tensor] | None):
        B, L, D = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(D, dim=-1)
        q, k, v = (t.view(B, L, self.h, self.dh).transpose(1, 2) for t in (q, k, v))
        if past is not None:
            k = torch.cat([past[0], k], dim=2)
            v = torch.cat([past[1], v], dim=2)
        Lk = k.shape[2]
        # query i (absolute position Lk-L+i) may attend to keys 0..Lk-L+i
        qpos = torch.arange(Lk - L, Lk, device=x.device)[:, None]
        kpos = torch.arange(Lk, device=x.device)[None, :]
        att = (q @ k.transpose(-1, -2)) / math.sqrt(self.dh)
        att = att.masked_fill(kpos > qpos, float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(B, L, D)
        x = x + self.proj(y)
        x = x + self.mlp(self.ln2(x))
        return x, (k, v)


class TinyCausalLM(nn.Module):
    """Token + learned absolute position embeddings, ``n_layers`` pre-LN blocks, tied-free LM head."""

    def __init__(self, vocab: int = 11, d: int = 32, n_heads: int = 4, n_layers: int = 2, max_len: int = 64):
        super().__init__()
        if d % n_heads:
            raise ValueError(f"d={d} must be divisible by n_heads={n_heads}")
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(max_len, d)
        self.blocks = nn.ModuleList(_Block(d, n_heads) for _ in range(n_layers))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab)
        self.max_len = max_len

    def forward(self, tokens: torch.Tensor, past: KVCache | None = None) -> tuple[torch.Tensor, KVCache]:
        """tokens ``[B, L]`` (the new tokens); returns logits ``[B, L, vocab]`` and the extended cache."""
        if tokens.dim() != 2:
            raise ValueError(f"tokens must be [B, L], got {tuple(tokens.shape)}")
        start = 0 if past is None else past[0][0].shape[2]
        if start + tokens.shape[1] > self.max_len:
            raise ValueError(f"sequence length {start + tokens.shape[1]} exceeds max_len={self.max_len}")
        pos = torch.arange(start, start + tokens.shape[1], device=tokens.device)
        x = self.tok(tokens) + self.pos(pos)[None]
        new: KVCache = []
        for i, blk in enumerate(self.blocks):
            x, kv = blk(x, None if past is None else past[i])
            new.append(kv)
        return self.head(self.ln(x)), new

    @torch.no_grad()
    def next_logits_full(self, prefix: torch.Tensor) -> torch.Tensor:
        """Next-token logits by recomputing the whole prefix (no cache)."""
        return self(prefix)[0][:, -1]

    @torch.no_grad()
    def greedy_decode(self, prompt: torch.Tensor, n_new: int, use_cache: bool = True):
        """Greedy decoding; returns the tokens ``[B, L+n_new]`` and the logits of every step ``[B, n_new, V]``."""
        seq, logits_steps, past = prompt, [], None
        for _ in range(n_new):
            if use_cache:
                inp = seq if past is None else seq[:, -1:]
                logits, past = self(inp, past)
                last = logits[:, -1]
            else:
                last = self.next_logits_full(seq)
            logits_steps.append(last)
            seq = torch.cat([seq, last.argmax(-1, keepdim=True)], dim=1)
        return seq, torch.stack(logits_steps, 1)
