"""Group-relative advantages and DAPO's sampling/length tricks.

Scores come as a flat ``[N]`` tensor of sequence rewards laid out in contiguous groups
of ``group_size`` answers to the same prompt (``N = num_prompts * group_size``). The
advantages returned are per *sequence*; broadcast them over the response tokens with
``adv[:, None] * mask`` (outcome supervision gives every token of answer i the same A_i).

All statistics are taken in fp32 (or fp64 if the input is fp64), on the input's device.
"""

from __future__ import annotations

import torch

__all__ = [
    "grpo_advantages",
    "rloo_advantages",
    "reinforce_pp_baseline_advantages",
    "remax_advantages",
    "gpg_advantages",
    "OUTCOME_ADVANTAGES",
    "dynamic_sampling_filter",
    "overlong_penalty",
]


def _grouped(scores: torch.Tensor, group_size: int) -> torch.Tensor:
    if scores.dim() != 1:
        raise ValueError(f"scores must be 1-D [num_prompts * group_size], got shape {tuple(scores.shape)}")
    if not isinstance(group_size, int) or group_size < 1:
        raise ValueError(f"group_size must be a positive int, got {group_size!r}")
    if scores.numel() % group_size != 0:
        raise ValueError(f"{scores.numel()} scores do not split into groups of {group_size}")
    dtype = torch.float64 if scores.dtype == torch.float64 else torch.float32
    return scores.to(dtype).reshape(-1, group_size)


def grpo_advantages(
    scores: torch.Tensor, group_size: int, scale_by_std: bool = True, eps: float = 1e-6
) -> torch.Tensor:
    """GRPO outcome advantages (DeepSeekMath §4.1.2).

    $A_i = (r_i - \\mathrm{mean}_g(r)) / (\\mathrm{std}_g(r) + \\epsilon)$ with the unbiased
    (``G-1``) standard deviation of the group; ``scale_by_std=False`` gives Dr. GRPO's
    $A_i = r_i - \\mathrm{mean}_g(r)$. A group of equal scores gets exactly 0 (mathematically 0 / (0 + eps); enforced
    explicitly, because the fp32 mean of equal values can be off by one ulp).

    ``group_size=1`` with ``scale_by_std=False`` gives 0 (the answer is its own baseline); verl 0.9.1 takes the
    mean of a one-answer group as 0 (and its std as 1) and returns the raw score there.
    """
    r = _grouped(scores, group_size)
    adv = r - r.mean(dim=1, keepdim=True)
    if scale_by_std:
        if group_size < 2:
            raise ValueError("scale_by_std needs group_size >= 2 (the unbiased std of one sample is undefined)")
        adv = adv / (r.std(dim=1, unbiased=True, keepdim=True) + eps)
    # In floating point the mean of G equal values can miss the value by an ulp; divided by
    # (std ~ 1e-7) + eps that rounding error becomes an O(0.1) advantage. Equal groups are 0 by definition.
    constant = (r.amax(dim=1, keepdim=True) == r.amin(dim=1, keepdim=True))
    adv = torch.where(constant, torch.zeros((), dtype=adv.dtype, device=adv.device), adv)
    return adv.reshape(-1)


def rloo_advantages(scores: torch.Tensor, group_size: int) -> torch.Tensor:
    """REINFORCE leave-one-out advantages (Kool et al. 2019; Ahmadian et al. 2024).

    $A_i = r_i - \\frac{1}{K-1}\\sum_{j \\ne i} r_j = \\frac{K}{K-1}(r_i - \\bar r)$, with ``K = group_size``.
    The baseline does not depend on sample i, so the policy-gradient estimate stays unbiased.
    """
    if group_size < 2:
        raise ValueError("RLOO needs group_size >= 2")
    r = _grouped(scores, group_size)
    baseline = (r.sum(dim=1, keepdim=True) - r) / (group_size - 1)
    return (r - baseline).reshape(-1)


def dynamic_sampling_filter(scores: torch.Tensor, group_size: int) -> torch.Tensor:
    """DAPO dynamic sampling (§3.2, Eq. 11): a bool ``[N]`` mask that keeps only the groups
    whose scores are not all equal ($0 < |\\{o_i : \\text{correct}\\}| < G$ for 0/1 rewards).

    Groups with identical scores have zero group-relative advantage and give no policy
    gradient; DAPO over-samples and drops them until the batch is full.
    """
    r = _grouped(scores, group_size)
    keep = (r.max(dim=1).values != r.min(dim=1).values)
    return keep.repeat_interleave(group_size)


def overlong_penalty(lengths: torch.Tensor, max_len: int, cache_len: int) -> torch.Tensor:
    """DAPO soft overlong punishment (§3.4, Eq. 13), added to the task reward.

    $$R(y) = \\begin{cases} 0 & |y| \\le L_{max} - L_{cache} \\\\
    \\frac{(L_{max} - L_{cache}) - |y|}{L_{cache}} & L_{max} - L_{cache} < |y| \\le L_{max} \\\\
    -1 & |y| > L_{max} \\end{cases}$$
    """
    if cache_len <= 0 or cache_len > max_len:
        raise ValueError(f"need 0 < cache_len <= max_len, got cache_len={cache_len}, max_len={max_len}")
    lengths = torch.as_tensor(lengths)
    dtype = torch.float64 if lengths.dtype == torch.float64 else torch.float32
    excess = lengths.to(dtype) - (max_len - cache_len)
    return -(excess / cache_len).clamp(min=0.0, max=1.0)


def reinforce_pp_baseline_advantages(scores: torch.Tensor, group_size: int, mask: torch.Tensor) -> torch.Tensor:
    r"""REINFORCE++-baseline (Hu et al. 2025, arXiv 2501.03262): ``[N, T]`` token advantages.

    $A_i = r_i - \mathrm{mean}_g(r)$ (the group mean, no group std), broadcast over the response tokens of
    answer $i$, then whitened over *all* valid tokens of the batch: $\tilde A = (A - \mu_B)/\sigma_B$. The
    scale comes from the batch, so a group of nearly equal scores is not blown up as GRPO's $1/\mathrm{std}_g$ can.
    A group of one gets baseline 0 (as verl). 0 on masked positions.
    """
    from impls.rl.masking import whiten

    r = _grouped(scores, group_size)
    base = r.mean(dim=1, keepdim=True) if group_size > 1 else torch.zeros_like(r[:, :1])
    adv = (r - base).reshape(-1)
    if mask.dim() != 2 or mask.shape[0] != adv.shape[0]:
        raise ValueError(f"mask must be [N, T] with N = {adv.shape[0]}, got {tuple(mask.shape)}")
    m = (mask != 0).to(device=adv.device, dtype=adv.dtype)
    return whiten(adv[:, None] * m, m)


def remax_advantages(scores: torch.Tensor, greedy_scores: torch.Tensor) -> torch.Tensor:
    r"""ReMax (Li et al. 2024, arXiv 2310.10505): $A_i = r(x_i, y_i) - r(x_i, \bar y_i)$, the baseline being the
    reward of the greedy answer $\bar y_i$ to the same prompt. It depends on the prompt only, not on the sampled
    answer, so the policy gradient stays unbiased. ``[N]`` scores and ``[N]`` greedy scores -> ``[N]``."""
    if scores.shape != greedy_scores.shape or scores.dim() != 1:
        raise ValueError(f"scores and greedy_scores must both be [N], got {tuple(scores.shape)} and {tuple(greedy_scores.shape)}")
    dtype = torch.float64 if scores.dtype == torch.float64 else torch.float32
    return scores.to(dtype) - greedy_scores.to(device=scores.device, dtype=dtype)


def gpg_advantages(scores: torch.Tensor, group_size: int, f_norm: float = 1.0) -> torch.Tensor:
    r"""GPG (Chu et al. 2025, arXiv 2504.02546): $A_i = \alpha\,(r_i - \mathrm{mean}_g(r)) / F_{norm}$ with
    $\alpha = N / N_{valid}$, $N_{valid}$ the number of answers in groups whose scores are not all equal (the
    others have $A = 0$ and would dilute a batch mean). Used with the plain loss $-A\log\pi$ (no ratio, no clip).
    The group mean includes the answer's own score, so $E[\hat g] = c\,\nabla J$ with a positive scalar $c$:
    the direction is unbiased, the scale is not (checked by enumeration in the verifiers).

    $\alpha$ is the paper's $N/N_{valid}$. verl 0.9.1 computes ``bsz / count_nonzero(scores)`` instead: it counts
    answers with a non-zero *score*, so with 0/1 rewards an all-correct group counts and a wrong answer in a
    mixed group does not; the two agree only by coincidence.
    """
    if group_size < 2:
        raise ValueError("GPG needs group_size >= 2")
    if f_norm <= 0:
        raise ValueError(f"f_norm must be positive, got {f_norm}")
    r = _grouped(scores, group_size)
    valid = (r.amax(dim=1, keepdim=True) != r.amin(dim=1, keepdim=True)).expand_as(r)
    alpha = r.numel() / valid.sum().clamp_min(1).to(r.dtype)
    adv = torch.where(valid, r - r.mean(dim=1, keepdim=True), torch.zeros((), dtype=r.dtype, device=r.device))
    return (alpha * adv / f_norm).reshape(-1)


# Outcome advantage estimators that take ``(scores [N], group_size)`` and return ``[N]`` (verl's registry idea).
OUTCOME_ADVANTAGES = {
    "grpo": grpo_advantages,
    "dr_grpo": lambda scores, group_size: grpo_advantages(scores, group_size, scale_by_std=False),
    "rloo": rloo_advantages,
    "gpg": gpg_advantages,
}
