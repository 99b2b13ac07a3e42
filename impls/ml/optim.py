"""Optimizers and schedules: Adam with L2 vs decoupled weight decay, bias correction, Muon's Newton–Schulz step,
warm-up + cosine, global-norm clipping.

Adam (Kingma & Ba 2015, Algorithm 1), per parameter tensor, step t = 1, 2, ...:

    m_t = β1·m + (1−β1)·g        v_t = β2·v + (1−β2)·g²
    m̂ = m_t / (1−β1^t)           v̂ = v_t / (1−β2^t)          θ ← θ − lr·m̂ / (√v̂ + ε)

With m_0 = v_0 = 0 and a constant gradient g, m_t = (1−β1^t)·g: the moments start biased towards 0 and the
corrections undo exactly that. Weight decay two ways (Loshchilov & Hutter 2019, Algorithm 2):

* ``decay="l2"`` (Adam + L2, torch.optim.Adam's ``weight_decay``): g ← g + λθ before the moments, so the decay
  is divided by √v̂ like the gradient: weights with large gradients are decayed less;
* ``decay="decoupled"`` (AdamW): θ ← θ − lr·λ·θ, then the Adam step on g alone: every weight decays at rate lr·λ.

Muon (Jordan et al. 2024): the momentum of a 2-D weight is replaced by an approximation of its orthogonal
factor U·Vᵀ (G = U Σ Vᵀ) from five steps of the quintic Newton–Schulz iteration
X ← aX + (bA + cA²)X, A = XXᵀ, (a, b, c) = (3.4445, −4.7750, 2.0315), started at G/‖G‖_F. The coefficients
trade exactness for speed: singular values land near 1, not at 1; the cubic (1.5, −0.5) converges to UVᵀ.

Schedule (Llama 2 §2.2): linear warm-up to the peak over ``warmup`` steps, cosine decay to ``final`` · peak.
Clipping: if the global norm ‖g‖₂ over all tensors exceeds c, every gradient is multiplied by c/‖g‖₂; a
norm below c is left alone (clipping only ever shrinks).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

MUON_QUINTIC = (3.4445, -4.7750, 2.0315)
NEWTON_SCHULZ_CUBIC = (1.5, -0.5, 0.0)


def adam_step(theta: Tensor, grad: Tensor, m: Tensor, v: Tensor, t: int, lr: float, betas=(0.9, 0.999),
              eps: float = 1e-8, weight_decay: float = 0.0, decay: str = "decoupled",
              bias_correction: bool = True) -> tuple[Tensor, Tensor, Tensor]:
    """One Adam/AdamW step (t starts at 1); returns new (θ, m, v), computed in fp32 at least."""
    if decay not in ("l2", "decoupled"):
        raise ValueError(f"decay must be 'l2' or 'decoupled', not {decay!r}")
    b1, b2 = betas
    acc = torch.promote_types(theta.dtype, torch.float32)
    theta, grad, m, v = (x.to(acc) for x in (theta, grad, m, v))
    if decay == "l2" and weight_decay:
        grad = grad + weight_decay * theta
    if decay == "decoupled" and weight_decay:
        theta = theta * (1 - lr * weight_decay)
    m = b1 * m + (1 - b1) * grad
    v = b2 * v + (1 - b2) * grad * grad
    m_hat, v_hat = (m / (1 - b1 ** t), v / (1 - b2 ** t)) if bias_correction else (m, v)
    return theta - lr * m_hat / (v_hat.sqrt() + eps), m, v


def newton_schulz(g: Tensor, steps: int = 5, coeffs: tuple[float, float, float] = MUON_QUINTIC) -> Tensor:
    """Approximate orthogonal factor of a 2-D ``g`` (the wide orientation is iterated, as Muon does)."""
    if g.dim() != 2:
        raise ValueError(f"Newton–Schulz orthogonalises matrices, got shape {tuple(g.shape)}")
    a, b, c = coeffs
    x = g / (g.norm() + 1e-7)
    tall = x.shape[0] > x.shape[1]
    if tall:
        x = x.t()
    for _ in range(steps):
        gram = x @ x.t()
        x = a * x + (b * gram + c * gram @ gram) @ x
    return x.t() if tall else x


def warmup_cosine(step: int, warmup: int, total: int, peak: float, final: float = 0.1) -> float:
    """Learning rate at ``step`` (0-based): linear to ``peak`` at ``warmup``, cosine down to final·peak at total."""
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return peak * (final + (1 - final) * 0.5 * (1 + math.cos(math.pi * progress)))


def clip_by_global_norm(grads: list[Tensor], max_norm: float) -> tuple[list[Tensor], float]:
    """(clipped gradients, the norm before clipping): g·min(1, c/‖g‖₂) with ‖g‖₂ over all tensors (fp32)."""
    total = math.sqrt(sum(float(g.detach().double().pow(2).sum()) for g in grads))
    factor = min(1.0, max_norm / (total + 1e-6))
    return [g * factor for g in grads], total
