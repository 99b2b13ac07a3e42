r"""Rollout/training mismatch: importance weights between the inference engine and the trainer.

The rollout engine samples $a\sim\pi_{roll}$ and reports $\log\pi_{roll}(a)$; the trainer recomputes
$\log\pi_{train}(a)$ for the same tokens with other kernels, another precision (bf16 logits), another
batch layout, sometimes another sampler (top-p, a different temperature). The policy gradient
$E_{\pi_{train}}[A\nabla\log\pi_{train}]$ estimated from rollout samples is biased unless each token carries
$\rho = \pi_{train}(a)/\pi_{roll}(a)$ (computed from the two log-probs, detached: it changes the measure,
not the objective). Bounding $\rho$ trades that bias for variance:

- ``mode="truncate"`` (TIS, Yao et al. 2025; verl ``rollout_is_threshold=C``; TRL ``*_truncate``):
  $w = \min(\rho, C)$ (optionally $\max(\cdot, C_{min})$);
- ``mode="mask"`` (masked IS, IcePop / Ring-1T; verl ``"lower_upper"``; TRL ``*_mask``):
  $w = \rho$ if $C_{min}\le\rho\le C$, else 0 (the token is dropped).

``level="sequence"`` uses $\rho_{seq} = \exp\sum_t m_t(\log\pi_{train}-\log\pi_{roll})$ for every token of the
row (unbiased for sequence-level objectives, variance growing with length). The weights multiply the
per-token policy loss: ``impls.rl.ppo.ppo_clip_loss(..., is_weights=w)``.
"""

from __future__ import annotations

import torch

from impls.rl.masking import masked_sum, reduce_dtype

__all__ = ["rollout_is_weights"]

_SAFETY = 20.0  # exp(20) ~ 5e8, as verl's SAFETY_BOUND


def rollout_is_weights(
    logp_train: torch.Tensor,
    logp_rollout: torch.Tensor,
    mask: torch.Tensor,
    *,
    mode: str = "truncate",
    level: str = "token",
    upper: float | None = 2.0,
    lower: float | None = None,
) -> torch.Tensor:
    r"""Detached ``[B, T]`` weights $w$ (>= fp32), 0 on masked positions; see the module doc.

    ``upper=None`` with ``mode="truncate"`` gives the plain ratio $\rho$ (full importance sampling).
    """
    if logp_train.shape != logp_rollout.shape or logp_train.shape != mask.shape or logp_train.dim() != 2:
        raise ValueError(f"logp_train, logp_rollout and mask must share one [B, T] shape, got "
                         f"{tuple(logp_train.shape)}, {tuple(logp_rollout.shape)}, {tuple(mask.shape)}")
    if mode not in ("truncate", "mask"):
        raise ValueError(f"mode must be 'truncate' or 'mask', got {mode!r}")
    if level not in ("token", "sequence"):
        raise ValueError(f"level must be 'token' or 'sequence', got {level!r}")
    if mode == "mask" and upper is None:
        raise ValueError("mode='mask' needs an upper bound")
    if upper is not None and lower is not None and not 0 <= lower <= upper:
        raise ValueError(f"need 0 <= lower <= upper, got lower={lower}, upper={upper}")
    with torch.no_grad():
        dt = reduce_dtype(torch.promote_types(logp_train.dtype, logp_rollout.dtype))
        valid = mask != 0
        zero = torch.zeros((), dtype=dt, device=logp_train.device)
        log_rho = torch.where(valid, logp_train.to(dt) - logp_rollout.to(dt), zero)
        if level == "sequence":
            log_rho = masked_sum(log_rho, mask, dim=-1)[:, None].expand_as(log_rho)
        rho = torch.exp(log_rho.clamp(-_SAFETY, _SAFETY))
        if mode == "truncate":
            w = rho if upper is None else rho.clamp(max=upper)
            if lower is not None:
                w = w.clamp(min=lower)
        else:
            lo = 0.0 if lower is None else lower
            w = torch.where((rho >= lo) & (rho <= upper), rho, zero)
        return torch.where(valid, w, zero)
