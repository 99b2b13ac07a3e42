"""Speculative sampling: the verification step of Leviathan et al. (arXiv 2211.17192, Algorithm 1) and
Chen et al. (arXiv 2302.01318, Algorithm 2).

The draft model proposes x_1..x_γ with x_i ~ q_i; the target model scores all γ + 1 positions in one call,
giving p_1..p_{γ+1}. For i = 1..γ, draft token x_i is accepted with probability min(1, p_i(x_i)/q_i(x_i));
at the first rejection a replacement is drawn from the residual

    p'_i(x) = max(0, p_i(x) − q_i(x)) / Σ_y max(0, p_i(y) − q_i(y))

and the remaining drafts are discarded; if all γ are accepted one bonus token is drawn from p_{γ+1}. Every
call thus emits between 1 and γ + 1 tokens, and each emitted token is distributed exactly as p:

    P(out = x) = q(x)·min(1, p(x)/q(x)) + (1 − Σ_y min(p(y), q(y)))·p'(x) = min(p, q)(x) + max(0, p − q)(x) = p(x).

The probability masses are computed by two small functions on (possibly unnormalised, possibly integer)
tensors, so the identity can be checked in exact integer arithmetic: ``accepted_mass`` = min(p, q) (draft x
and keep it) and ``residual_weights`` = max(0, p − q) (what a rejection resamples from, unnormalised).

With i.i.d. acceptance of rate α = Σ_x min(p(x), q(x)) per position, the number of tokens per target call
is 1 + a truncated geometric variable (Leviathan Eq. 1):  E[tokens] = (1 − α^{γ+1}) / (1 − α),
and with a draft step costing c target steps the expected wall-time speed-up is
(1 − α^{γ+1}) / ((1 − α)(γc + 1))  (Theorem 3.8).
"""

from __future__ import annotations

import torch
from torch import Tensor


def accepted_mass(p: Tensor, q: Tensor) -> Tensor:
    """P(draft proposes x and it is accepted) = q(x)·min(1, p(x)/q(x)) = min(p(x), q(x))."""
    return torch.minimum(p, q)


def residual_weights(p: Tensor, q: Tensor) -> Tensor:
    """Unnormalised distribution a rejection resamples from: max(0, p − q)."""
    return (p - q).clamp(min=0)


def acceptance_rate(p: Tensor, q: Tensor) -> Tensor:
    """α = Σ_x min(p(x), q(x)) = 1 − TV(p, q), for normalised p, q [..., V]."""
    return accepted_mass(p, q).sum(-1)


def output_distribution(p: Tensor, q: Tensor) -> Tensor:
    """The distribution of the token one verification position emits (accept, or resample on rejection):
    min(p, q) + (1 − Σ min(p, q)) · w / Σ w with w = residual_weights(p, q)."""
    acc = accepted_mass(p, q)
    w = residual_weights(p, q)
    reject = (1 - acc.sum(-1, keepdim=True))
    total = w.sum(-1, keepdim=True)
    return acc + reject * torch.where(total > 0, w / total.clamp_min(torch.finfo(w.dtype).tiny), 0.0)


def sample_inverse_cdf(w: Tensor, u: Tensor) -> Tensor:
    """One index per row of the unnormalised weights ``w`` [B, V] from ``u`` [B] uniform in [0, 1):
    the first x with Σ_{y<=x} w_y > u·Σ_y w_y, so P(x) = w_x / Σ w (a zero weight is never drawn)."""
    c = w.cumsum(-1)
    return (c <= u[:, None] * c[:, -1:]).sum(-1).clamp(max=w.shape[-1] - 1)


def verify(p: Tensor, q: Tensor, draft: Tensor, generator: torch.Generator | None = None,
           uniform: Tensor | None = None):
    """One speculative step for a batch.

    p [B, γ+1, V] target probabilities, q [B, γ, V] draft probabilities, draft [B, γ] tokens drawn from q.
    Returns (tokens [B, γ+1], n_emitted [B]) where tokens[b, :n_emitted[b]] are the emitted tokens: the
    accepted draft prefix, then the resampled token at the first rejection (or the bonus token from
    p[:, γ] if all were accepted); positions after n_emitted hold -1.

    The randomness is ``uniform`` [B, γ+1] in [0, 1) (drawn from ``generator`` when None), laid out as
    FlashInfer's ``chain_speculative_sampling`` takes it: column i < γ decides draft i (accepted iff
    u_i·q_i(x_i) < p_i(x_i)), column γ draws the extra token by inverse CDF (``sample_inverse_cdf``)."""
    b, gamma = draft.shape
    if uniform is None:
        uniform = torch.rand(b, gamma + 1, generator=generator, device=draft.device, dtype=p.dtype)
    rows = torch.arange(b, device=draft.device)
    p_x = p[:, :gamma].gather(-1, draft[..., None]).squeeze(-1)
    q_x = q.gather(-1, draft[..., None]).squeeze(-1)
    accept = uniform[:, :gamma] * q_x < p_x                  # u < p/q without dividing
    n_acc = torch.where(accept.all(-1), gamma, (~accept).int().argmax(-1))          # first rejection
    # the distribution of the extra token: residual at the first rejection, p_{γ+1} if none
    at = n_acc.clamp(max=gamma - 1)
    resid = residual_weights(p[rows, at], q[rows, at])          # never all zero at a rejection: p != q there
    extra_w = torch.where((n_acc == gamma)[:, None], p[:, gamma], resid)
    extra = sample_inverse_cdf(extra_w, uniform[:, gamma])
    pos = torch.arange(gamma + 1, device=draft.device)[None, :]
    tokens = torch.where(pos < n_acc[:, None], torch.cat([draft, draft[:, :1]], 1), -1)
    tokens[rows, n_acc] = extra
    return tokens, n_acc + 1


def expected_tokens(alpha: float, gamma: int) -> float:
    """Leviathan Eq. (1): (1 − α^{γ+1}) / (1 − α); γ + 1 when α = 1."""
    return gamma + 1 if alpha == 1 else (1 - alpha ** (gamma + 1)) / (1 - alpha)


def expected_speedup(alpha: float, gamma: int, c: float) -> float:
    """Leviathan Theorem 3.8: expected tokens per call divided by the cost of a call, γc + 1."""
    return expected_tokens(alpha, gamma) / (gamma * c + 1)
