r"""Per-token estimators of $\mathrm{KL}(\pi\,\|\,\pi_{ref})$ from tokens sampled from $\pi$ (Schulman 2020).

Naming, as RLHF papers and verl/OpenRLHF/TRL use it: $\mathrm{KL}(\pi\|\pi_{ref})$, with the policy first,
is the **reverse** (mode-seeking) KL that the RLHF objective penalises; $\mathrm{KL}(\pi_{ref}\|\pi)$ is the
**forward** (mass-covering) KL.

*Values*, with $\log\rho = \log\pi_{ref}(a) - \log\pi(a)$:

- ``k1`` $= -\log\rho$: unbiased, high variance, can be negative;
- ``k2`` $= \tfrac12(\log\rho)^2$: biased, low variance, $\ge 0$;
- ``k3`` $= \rho - 1 - \log\rho$ (``expm1``: exact in fp32 for $|\log\rho|\sim10^{-3}$): unbiased, $\ge 0$;
- ``abs`` $= |\log\rho|$ (verl's ``abs``): neither unbiased nor a KL gradient; a monitor.

*Gradients* when the value is put straight into a loss (sample fixed): $\mathbb E_\pi[\nabla k_1] = 0$,
$\mathbb E_\pi[\nabla k_2] = \nabla\mathrm{KL}(\pi\|\pi_{ref})$, $\mathbb E_\pi[\nabla k_3] = \nabla\mathrm{KL}(\pi_{ref}\|\pi)$
(the forward KL's gradient, not the penalised one). The gradient-correct variants (:func:`kl_penalty`):

- ``"<k>+"`` (verl ``k3+``): straight-through, the value of ``<k>`` with the gradient of ``k2``; exact
  on-policy, biased when the samples come from $\pi_{old}\neq\pi$;
- ``"k3-is"`` (TRL ``use_bias_correction_kl``, DeepSeek-V3.2): $r\,k_3$ with $r = \pi/\pi_{old}$ *not* detached:
  $\mathbb E_{\pi_{old}}[\nabla(r k_3)] = \nabla\mathbb E_\pi[k_3] = \nabla\mathrm{KL}(\pi\|\pi_{ref})$, exact off-policy too;
- ``"<k>+is"`` (OpenRLHF ``unbiased_gradient``): the value of ``<k>``, the gradient of $\mathrm{sg}[w]\,k_2$ with
  $w = \min(\pi/\pi_{old}, 10)$; exact while $w$ stays below its cap.

The full-distribution KL over the vocabulary (no sampling at all) is :func:`kl_full`.

Clamps: verl clamps $\log\rho$ to $[-20, 20]$ and the k3 value to $[-10, 10]$; OpenRLHF clamps $\log\rho\ge-10$
(k3 only) and the value to $[-10, 10]$; TRL does not clamp. ``clamp=c`` here clamps the value to $[-c, c]$ (and
$\log\rho$ to $[-20, 20]$ as verl): where it binds the value's gradient is exactly 0, so the tokens furthest
from $\pi_{ref}$ (k3 > 10: $\pi_{ref}/\pi > 13.6$ or $< 1.7\times10^{-5}$) stop being pulled back; the ``+`` kinds take their gradient
from the unclamped ``k2`` and keep it. Computed in >= fp32.
"""

from __future__ import annotations

import torch

from impls.rl.masking import reduce_dtype

__all__ = ["kl_estimate", "kl_penalty", "kl_full", "KL_ESTIMATORS", "KL_PENALTIES"]

_MAX_LOG_RHO = 20.0  # verl's clamp on log rho before exp
IS_WEIGHT_CAP = 10.0  # OpenRLHF's KL_IS_WEIGHT_CLIP


def _k1(log_ratio: torch.Tensor) -> torch.Tensor:  # log_ratio = log pi - log pi_ref
    return log_ratio


def _k2(log_ratio: torch.Tensor) -> torch.Tensor:
    return 0.5 * log_ratio**2


def _k3(log_ratio: torch.Tensor) -> torch.Tensor:
    log_rho = -log_ratio
    return torch.expm1(log_rho) - log_rho


def _abs(log_ratio: torch.Tensor) -> torch.Tensor:
    return log_ratio.abs()


KL_ESTIMATORS = {"k1": _k1, "k2": _k2, "k3": _k3, "abs": _abs}
KL_PENALTIES = sorted([*KL_ESTIMATORS, *(k + "+" for k in KL_ESTIMATORS), *(k + "+is" for k in KL_ESTIMATORS), "k3-is"])


def _value(log_ratio: torch.Tensor, kind: str, clamp: float | None) -> torch.Tensor:
    try:
        fn = KL_ESTIMATORS[kind]
    except KeyError:
        raise ValueError(f"unknown KL estimator {kind!r}; known: {sorted(KL_ESTIMATORS)}") from None
    if clamp is None:
        return fn(log_ratio)
    if clamp <= 0:
        raise ValueError(f"clamp must be positive, got {clamp}")
    return fn(log_ratio.clamp(-_MAX_LOG_RHO, _MAX_LOG_RHO)).clamp(-clamp, clamp)


def _log_ratio(logp: torch.Tensor, logp_ref: torch.Tensor) -> torch.Tensor:
    if logp.shape != logp_ref.shape:
        raise ValueError(f"logp shape {tuple(logp.shape)} != logp_ref shape {tuple(logp_ref.shape)}")
    dt = reduce_dtype(torch.promote_types(logp.dtype, logp_ref.dtype))
    return logp.to(dt) - logp_ref.to(dt)


def kl_estimate(logp: torch.Tensor, logp_ref: torch.Tensor, kind: str = "k1", *, clamp: float | None = None) -> torch.Tensor:
    """Per-token estimate (same shape as ``logp``) of KL(pi || pi_ref) for tokens a ~ pi (k1, k2, k3, abs).

    Differentiable as written (see the module doc for what each gradient is); ``clamp`` as verl/OpenRLHF.
    """
    return _value(_log_ratio(logp, logp_ref), kind, clamp)


def kl_penalty(
    logp: torch.Tensor,
    logp_ref: torch.Tensor,
    kind: str = "k3+",
    *,
    logp_old: torch.Tensor | None = None,
    clamp: float | None = None,
) -> torch.Tensor:
    r"""Per-token KL term to add to a loss, for tokens sampled from $\pi_{old}$ (default: on-policy,
    $\pi_{old} = \mathrm{sg}[\pi]$). ``kind``: a plain estimator (differentiated as is), ``"<k>+"``
    (straight-through to ``k2``'s gradient, verl), ``"<k>+is"`` (the same with the detached IS weight
    $\min(\pi/\pi_{old}, 10)$, OpenRLHF) or ``"k3-is"`` ($r k_3$, $r=\pi/\pi_{old}$ differentiable, TRL).
    The value is the base estimator's (times $r$ for ``k3-is``); see the module doc for the gradients.
    """
    log_ratio = _log_ratio(logp, logp_ref)
    if kind in KL_ESTIMATORS:
        return _value(log_ratio, kind, clamp)
    if logp_old is None:
        log_w = torch.zeros_like(log_ratio)  # on-policy: w = pi / sg[pi] = 1 in value, grad of log pi
        log_w = log_w + (logp.to(log_ratio.dtype) - logp.detach().to(log_ratio.dtype))
    else:
        if logp_old.shape != logp.shape:
            raise ValueError(f"logp_old shape {tuple(logp_old.shape)} != logp shape {tuple(logp.shape)}")
        log_w = logp.to(log_ratio.dtype) - logp_old.detach().to(log_ratio.dtype)
    if kind == "k3-is":
        return torch.exp(log_w) * _value(log_ratio, "k3", clamp)
    if kind.endswith("+is"):
        base, w = kind[:-3], torch.exp(log_w.detach()).clamp(max=IS_WEIGHT_CAP)
    elif kind.endswith("+"):
        base, w = kind[:-1], None
    else:
        raise ValueError(f"unknown KL penalty {kind!r}; known: {KL_PENALTIES}")
    value = _value(log_ratio, base, clamp).detach()
    surrogate = _k2(log_ratio) if w is None else w * _k2(log_ratio)
    return value + (surrogate - surrogate.detach())


def kl_full(logits: torch.Tensor, ref_logits: torch.Tensor) -> torch.Tensor:
    r"""Exact per-position $\mathrm{KL}(\pi\|\pi_{ref}) = \sum_v \pi_v(\log\pi_v - \log\pi_{ref,v})$ from
    ``[..., V]`` logits (no sampling: exact value, exact gradient), in >= fp32."""
    if logits.shape != ref_logits.shape:
        raise ValueError(f"logits shape {tuple(logits.shape)} != ref_logits shape {tuple(ref_logits.shape)}")
    dt = reduce_dtype(torch.promote_types(logits.dtype, ref_logits.dtype))
    logp = torch.log_softmax(logits.to(dt), dim=-1)
    logq = torch.log_softmax(ref_logits.to(dt), dim=-1)
    return (logp.exp() * (logp - logq)).sum(dim=-1)
