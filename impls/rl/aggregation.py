r"""How a per-token loss matrix ``[B, T]`` becomes one scalar: a registry of named modes.

With $L_{i,t}$ the per-token loss, $m_{i,t}$ the mask and $|y_i| = \sum_t m_{i,t}$:

- ``token-mean`` (DAPO): $\sum_{i,t} m L / \sum_{i,t} m$ -- every token in the batch weighs the same.
- ``seq-mean-token-mean`` (GRPO): $\frac1B \sum_i \frac{1}{|y_i|}\sum_t m L$ -- every sequence weighs the same.
- ``seq-mean-token-sum``: $\frac1B \sum_i \sum_t m L$.
- ``seq-mean-token-sum-norm`` (Dr. GRPO): $\sum_{i,t} m L / (B\cdot C)$, $C$ a constant (default $T$).
"""

from __future__ import annotations

from typing import Callable

import torch

from impls.rl.masking import masked_mean, masked_sum

__all__ = ["AGGREGATIONS", "aggregate", "register"]

AggFn = Callable[[torch.Tensor, torch.Tensor, "float | None"], torch.Tensor]
AGGREGATIONS: dict[str, AggFn] = {}


def register(name: str) -> Callable[[AggFn], AggFn]:
    def deco(fn: AggFn) -> AggFn:
        AGGREGATIONS[name] = fn
        return fn

    return deco


@register("token-mean")
def _token_mean(loss_mat: torch.Tensor, mask: torch.Tensor, norm_constant: float | None = None) -> torch.Tensor:
    return masked_mean(loss_mat, mask)


@register("seq-mean-token-mean")
def _seq_mean_token_mean(loss_mat, mask, norm_constant=None):
    per_seq = masked_mean(loss_mat, mask, dim=-1)
    nonempty = (mask != 0).any(dim=-1).to(per_seq.dtype)
    # Sequences without a response token carry no signal: average over the others.
    return (per_seq * nonempty).sum() / nonempty.sum().clamp_min(1.0)


@register("seq-mean-token-sum")
def _seq_mean_token_sum(loss_mat, mask, norm_constant=None):
    return masked_sum(loss_mat, mask, dim=-1).mean()


@register("seq-mean-token-sum-norm")
def _seq_mean_token_sum_norm(loss_mat, mask, norm_constant=None):
    c = float(loss_mat.shape[-1]) if norm_constant is None else float(norm_constant)
    if c <= 0:
        raise ValueError(f"norm_constant must be positive, got {c}")
    return masked_sum(loss_mat, mask) / (loss_mat.shape[0] * c)


def aggregate(loss_mat: torch.Tensor, mask: torch.Tensor, agg: str = "token-mean",
              norm_constant: float | None = None) -> torch.Tensor:
    """Reduce a ``[B, T]`` per-token loss to a scalar with the named mode (see module doc)."""
    if loss_mat.dim() != 2 or loss_mat.shape != mask.shape:
        raise ValueError(f"expected loss_mat and mask of the same [B, T] shape, got "
                         f"{tuple(loss_mat.shape)} and {tuple(mask.shape)}")
    try:
        fn = AGGREGATIONS[agg]
    except KeyError:
        raise ValueError(f"unknown aggregation {agg!r}; known: {sorted(AGGREGATIONS)}") from None
    return fn(loss_mat, mask, norm_constant)
