"""RoPE context extension: position interpolation, NTK-aware, dynamic NTK and YaRN, as frequencies.

RoPE pair i (0 ≤ i < d/2) turns by θ_i = b^(−2i/d) per token (``impls/arch/rope.py::frequencies``); its
wavelength is λ_i = 2π/θ_i. Extending a model trained on L tokens to L' = s·L:

* PI (Chen et al. 2023, Eq. 4): positions m → m/s, i.e. θ'_i = θ_i/s for every pair (all interpolated).
* NTK-aware (bloc97, 2023; YaRN §3.1): keep the formula, raise the base to b' = b·s^(d/(d−2)). Then
  θ'_0 = θ_0 (the fastest pair is untouched: extrapolated) and θ'_{d/2−1} = θ_{d/2−1}/s (the slowest is
  interpolated exactly like PI), with every pair in between scaled by s^(−2i/(d−2)).
* Dynamic NTK (HF ``dynamic``): the same with the scale taken from the current length ℓ and a factor α,
  b' = b·((α·ℓ/L) − (α − 1))^(d/(d−2)) for ℓ > L, and b itself for ℓ ≤ L (α = 1: the scale is ℓ/L).
* YaRN (Peng et al. 2023, §3.2-3.4, Eq. 18-21): "NTK-by-parts" — with r_i = L/λ_i the number of turns pair i
  makes in the training window and the ramp γ(r) = clamp((r − α)/(β − α), 0, 1), α = 1, β = 32:
  θ'_i = (1 − γ)·θ_i/s + γ·θ_i (pairs that turn more than β times are kept, fewer than α times interpolated),
  plus an attention temperature: logits are multiplied by (0.1·ln s + 1)², i.e. √(1/t) = 0.1·ln s + 1.
  (The reference code and Hugging Face ramp linearly in the pair index between the same two boundaries; the
  ends agree, the middle differs slightly.)

``angles_beyond_training`` counts the pairs whose rotation at test distances goes past every angle seen
in training (by more than one token's turn), the wavelength argument made numeric.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from impls.arch.rope import frequencies


def pi_frequencies(d: int, s: float, base: float = 10000.0) -> Tensor:
    return frequencies(d, base) / s


def ntk_base(d: int, s: float, base: float = 10000.0) -> float:
    """b·s^(d/(d−2))."""
    return base * s ** (d / (d - 2))


def ntk_frequencies(d: int, s: float, base: float = 10000.0) -> Tensor:
    return frequencies(d, ntk_base(d, s, base))


def dynamic_ntk_frequencies(d: int, factor: float, seq_len: int, train_len: int, base: float = 10000.0) -> Tensor:
    """HF's dynamic NTK: the base grows with the current length ``seq_len`` once it exceeds ``train_len``."""
    if seq_len <= train_len:
        return frequencies(d, base)
    return frequencies(d, base * ((factor * seq_len / train_len) - (factor - 1)) ** (d / (d - 2)))


def yarn_ramp(d: int, train_len: int, base: float = 10000.0, alpha: float = 1.0, beta: float = 32.0) -> Tensor:
    """γ_i = clamp((r_i − α)/(β − α), 0, 1) with r_i = L/λ_i (YaRN Eq. 18)."""
    r = train_len * frequencies(d, base) / (2 * math.pi)
    return ((r - alpha) / (beta - alpha)).clamp(0, 1)


def yarn_frequencies(d: int, s: float, train_len: int, base: float = 10000.0, alpha: float = 1.0,
                     beta: float = 32.0) -> Tensor:
    """θ'_i = (1 − γ_i)·θ_i/s + γ_i·θ_i (YaRN Eq. 19-20)."""
    theta = frequencies(d, base)
    gamma = yarn_ramp(d, train_len, base, alpha, beta)
    return (1 - gamma) * theta / s + gamma * theta


def yarn_logit_scale(s: float) -> float:
    """The factor YaRN multiplies attention logits by: 1/t = (0.1·ln s + 1)² (Eq. 21; 1 for s ≤ 1)."""
    return 1.0 if s <= 1 else (0.1 * math.log(s) + 1) ** 2


def wavelengths(theta: Tensor) -> Tensor:
    return 2 * math.pi / theta


def angles_beyond_training(theta_train: Tensor, theta_test: Tensor, train_len: int, test_len: int) -> dict[str, float]:
    """Pairs whose angle at a test distance (< test_len, frequencies ``theta_test``) lies more than one
    training token's turn beyond the arc [0, θ·(train_len − 1)] that pretraining (frequencies ``theta_train``)
    produced; a pair that completed a turn in training has seen every angle."""
    seen = torch.clamp(theta_train * (train_len - 1), max=2 * math.pi)
    reach = torch.clamp(theta_test * (test_len - 1), max=2 * math.pi)
    excess = (reach - seen).clamp(min=0)
    return {"pairs": theta_train.numel(), "unseen_pairs": int((excess > theta_train).sum()),
            "max_excess_rad": float(excess.max())}
