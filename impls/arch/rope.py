"""Rotary position embedding (RoPE) and what it does and does not give for long inputs.

RoFormer (Su et al. 2021, arXiv 2104.09864, §3.2-3.4): the pair (x_{2i}, x_{2i+1}) of a query or
key at position m is rotated by the angle m·θ_i with θ_i = base^(-2i/d). Because rotations
compose, ⟨R(m)q, R(n)k⟩ = ⟨q, R(n-m)k⟩: the score depends on the positions only through n-m.
There is nothing to train: the angles are a fixed function of the position and ``base``.

What this does *not* give is generalisation to distances never seen in training. Pair i turns
by θ_i per token, a full turn every 2π/θ_i tokens; the pairs whose wavelength exceeds the
training length L never complete a turn in training, so at distances beyond L they reach
rotation angles the model has never seen. Position interpolation (Chen et al. 2023,
arXiv 2306.15595) rescales positions by L/L' so every angle stays inside the trained range.

Two pair layouts are in use: interleaved (x_{2i}, x_{2i+1}) as in RoFormer and GPT-J, and halves
(x_i, x_{i+d/2}) as in GPT-NeoX and Llama; ``layout`` picks one. Both have the same property.
"""

from __future__ import annotations

import math

import torch


def frequencies(d: int, base: float = 10000.0, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """θ_i = base^(-2i/d), i = 0 .. d/2-1."""
    if d % 2:
        raise ValueError(f"RoPE needs an even head dimension, got {d}")
    return base ** (-torch.arange(0, d, 2, dtype=dtype) / d)


def rope(x: torch.Tensor, positions: torch.Tensor, base: float = 10000.0, layout: str = "interleaved",
         scale: float = 1.0) -> torch.Tensor:
    """Rotate x [..., n, d] at ``positions`` [n]: pair i, (2i, 2i+1) for ``layout="interleaved"`` or
    (i, i + d/2) for ``"halves"``, turns by position·θ_i with θ_i = base^(−2i/d), computed in fp64 and applied
    in x's dtype (positions are divided by ``scale``: position interpolation)."""
    d = x.shape[-1]
    angles = (positions.to(torch.float64) / scale)[:, None] * frequencies(d, base)[None, :]   # [n, d/2]
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    if layout == "interleaved":
        x1, x2 = x[..., 0::2], x[..., 1::2]
        return torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).flatten(-2)
    if layout == "halves":
        x1, x2 = x[..., : d // 2], x[..., d // 2:]
        return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)
    raise ValueError(f"layout must be interleaved or halves, not {layout!r}")


def scores(q: torch.Tensor, k: torch.Tensor, q_pos: torch.Tensor, k_pos: torch.Tensor, **kw) -> torch.Tensor:
    """⟨RoPE(q at q_pos), RoPE(k at k_pos)⟩ for every query/key pair: [..., n_q, n_k]."""
    return rope(q, q_pos, **kw).matmul(rope(k, k_pos, **kw).transpose(-1, -2))


def unseen_rotation_pairs(d: int, train_len: int, test_len: int, base: float = 10000.0,
                          scale: float = 1.0) -> dict[str, float]:
    """How many frequency pairs reach rotation angles at distances up to ``test_len`` that no
    distance below ``train_len`` produced.

    Pair i has seen the angles {Δ·θ_i mod 2π : 0 <= Δ < train_len}: the whole circle when
    θ_i·(train_len-1) >= 2π, otherwise the arc [0, θ_i·(train_len-1)]. At test distances the
    largest angle is θ_i·(test_len-1)/scale. A pair counts as unseen when its test arc goes past
    the trained arc by more than one token's rotation θ_i (less is interpolation between trained
    angles). Returns the count and the largest gap (radians) beyond the trained arc.
    """
    theta = frequencies(d, base)
    seen = torch.clamp(theta * (train_len - 1), max=2 * math.pi)
    reach = torch.clamp(theta * (test_len - 1) / scale, max=2 * math.pi)
    excess = (reach - seen).clamp(min=0)
    return {"pairs": d // 2, "unseen_pairs": int((excess > theta).sum()), "max_excess_rad": float(excess.max())}
