r"""How a per-token loss matrix ``[B, T]`` becomes one scalar: a registry of named modes.

With $L_{i,t}$ the per-token loss, $m_{i,t}$ the mask, $|y_i| = \sum_t m_{i,t}$, and
$\mathcal B = \{i : |y_i| > 0\}$ the rows that have at least one valid token:

- ``token-mean`` (DAPO): $\sum_{i,t} m L / \sum_{i,t} m$ -- every token in the batch weighs the same.
- ``seq-mean-token-mean`` (GRPO): $\frac{1}{|\mathcal B|} \sum_{i\in\mathcal B} \frac{1}{|y_i|}\sum_t m L$ -- every sequence weighs the same.
- ``seq-mean-token-sum``: $\frac{1}{|\mathcal B|} \sum_{i\in\mathcal B} \sum_t m L$.
- ``seq-mean-token-sum-norm`` (Dr. GRPO): $\sum_{i,t} m L / (|\mathcal B|\cdot C)$ with $C$ a constant that must be
  given: the maximum response length (verl ``loss_scale_factor``, TRL ``max_completion_length``). The padded
  width $T$ is not a constant (it changes with every batch), so it is not a default.
- ``token-sum``: $\sum_{i,t} m L$ (no normalisation; verl's ``token-sum``, for a caller that divides by a
  global token count itself).

**Rows with no valid token** (a filtered sample, an overlong answer masked out, an all-observation row)
are *absent*: in every mode they add nothing to the numerator and are not counted in any denominator, so a
loss never changes when such rows are added or removed, and switching modes never changes how filtering
acts. (Counting them, $1/B$, would shrink the gradient by $|\mathcal B|/B$: a learning-rate change that
depends on how many samples were filtered.) A batch with no valid token at all gives 0 (finite, zero gradient).

The frameworks differ here, deliberately on our side:

- verl 0.9.1 ``agg_loss`` leaves empty rows out of its ``seq-mean-*`` denominators only when it is called
  without ``global_batch_size``. Its trainer always passes one (``ppo_mini_batch_size × rollout.n``, every
  sequence of the mini-batch), so on the training path the ``seq-mean-*`` modes divide by all $B$ rows,
  empty ones included (numerator 0); ``token-mean`` divides by the global count of valid tokens, as here.
- TRL 1.16's GRPO losses divide by all $B$ rows as well.
- verl's ``seq-mean-token-mean`` divides each row by ``len + 1e-8`` (here: by ``len``), and its
  ``seq-mean-token-sum-norm`` defaults the constant to the padded width (here it must be given).
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


def _rows(mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Number of rows with at least one valid token, as a float >= 1 (an empty batch divides 0 by 1)."""
    return (mask != 0).any(dim=-1).to(dtype).sum().clamp_min(1.0)


@register("token-mean")
def _token_mean(loss_mat: torch.Tensor, mask: torch.Tensor, norm_constant: float | None = None) -> torch.Tensor:
    return masked_mean(loss_mat, mask)


@register("seq-mean-token-mean")
def _seq_mean_token_mean(loss_mat, mask, norm_constant=None):
    per_seq = masked_mean(loss_mat, mask, dim=-1)  # an empty row gives 0 here
    return per_seq.sum() / _rows(mask, per_seq.dtype)


@register("seq-mean-token-sum")
def _seq_mean_token_sum(loss_mat, mask, norm_constant=None):
    total = masked_sum(loss_mat, mask)
    return total / _rows(mask, total.dtype)


@register("seq-mean-token-sum-norm")
def _seq_mean_token_sum_norm(loss_mat, mask, norm_constant=None):
    if norm_constant is None:
        raise ValueError("seq-mean-token-sum-norm needs norm_constant: the maximum response length "
                         "(verl loss_scale_factor, TRL max_completion_length); the padded width is not a constant")
    c = float(norm_constant)
    if c <= 0:
        raise ValueError(f"norm_constant must be positive, got {c}")
    total = masked_sum(loss_mat, mask)
    return total / (_rows(mask, total.dtype) * c)


@register("token-sum")
def _token_sum(loss_mat, mask, norm_constant=None):
    return masked_sum(loss_mat, mask)


def aggregate(loss_mat: torch.Tensor, mask: torch.Tensor, agg: str = "token-mean",
              norm_constant: float | None = None) -> torch.Tensor:
    """Reduce a ``[B, T]`` per-token loss to a scalar with the named mode (see module doc).

    ``norm_constant`` is the constant $C$ of ``seq-mean-token-sum-norm`` (required there, ignored elsewhere).
    """
    if loss_mat.dim() != 2 or loss_mat.shape != mask.shape:
        raise ValueError(f"expected loss_mat and mask of the same [B, T] shape, got "
                         f"{tuple(loss_mat.shape)} and {tuple(mask.shape)}")
    try:
        fn = AGGREGATIONS[agg]
    except KeyError:
        raise ValueError(f"unknown aggregation {agg!r}; known: {sorted(AGGREGATIONS)}") from None
    return fn(loss_mat, mask, norm_constant)
