r"""GAE as a parallel scan: $O(\log T)$ sequential depth instead of a $T$-step loop.

GAE is the first-order linear recurrence (run backwards in time; conventions of
:func:`impls.rl.gae.gae`: masked tokens skipped, ``dones`` end episodes)

$$\hat A_t = m_t\delta_t + a_t \hat A_{t+1},\qquad
  \delta_t = r_t + \gamma\,\ell_t V_{\mathrm{next}(t)} - V_t,\qquad a_t = c_t\,(\gamma\lambda\, m_t + 1 - m_t),$$

with $\hat A_T = 0$, $c_t = 1-\mathrm{done}_t$, $\mathrm{next}(t)$ the next response token and $\ell_t = 0$
if an episode ends in $[t, \mathrm{next}(t))$. A masked token has $a_t = c_t$: it passes the advantage
through unchanged. Each step is an affine map $f_t(x) = b_t + a_t x$ ($b_t = m_t\delta_t$),
and composing two affine maps is associative:

$$(a_1, b_1) \circ (a_2, b_2) = (a_1 a_2,\; b_1 + a_1 b_2),$$

so all suffix compositions can be formed by a scan. We scan in two levels:

1. inside chunks of ``C`` tokens, a Hillis–Steele scan over $(a, b)$ pairs ($\log_2 C$ rounds,
   every round one vectorised update over all ``B * T`` positions);
2. across the $n = \lceil T / C\rceil$ chunk heads, the same scan ($\lceil\log_2 n\rceil$ rounds);
3. one fix-up round $\hat A_t = b^{loc}_t + a^{loc}_t \hat A_{\text{next chunk}}$.

Depth: $\lceil\log_2 C\rceil + \lceil\log_2 n\rceil + 1 \approx \log_2 T + 1$ rounds.

When the mask is right padding only (no 0 before a 1), every live $a_t$ equals $\gamma\lambda$ and
$\delta_t = 0$ on the pads, so step 1 is instead one GEMM per chunk with the fixed Toeplitz matrix
$W_{ij} = (\gamma\lambda)^{j-i}$ (:func:`discounted_suffix_sum`): $O(BTC)$ flops but few memory
passes, which is what a CPU (memory-bound here) rewards.
Only products of the $a_t\in[0,1]$ are ever formed — no $(\gamma\lambda)^{-t}$ rescaling and no
subtraction — so the result is as stable in fp32 as the loop for $\gamma\lambda \to 1$ and
$T = 32\text{k}$. An episode end makes $a_t = 0$. Same conventions and results as :func:`impls.rl.gae.gae`.
"""

from __future__ import annotations

import math

import torch

from impls.rl.masking import reduce_dtype

__all__ = ["gae_scan", "linear_scan_reverse"]


def _hillis_steele_reverse(a: torch.Tensor, b: torch.Tensor, stats: dict | None) -> tuple[torch.Tensor, torch.Tensor]:
    """Suffix-compose the affine maps along the last dim (length L). May overwrite ``a`` and ``b``.

    Returns ``(P, X)`` with ``P_i = prod_{k=i}^{L-1} a_k`` and ``X_i`` the solution of
    ``x_i = b_i + a_i x_{i+1}`` with ``x_L = 0``. ``ceil(log2 L)`` dependent rounds.
    """
    L = a.shape[-1]
    a_buf = torch.empty_like(a)
    b_buf = torch.empty_like(b)
    s = 1
    while s < L:
        # (a_i, b_i) <- (a_i, b_i) o (a_{i+s}, b_{i+s});  positions i >= L - s keep their value
        torch.addcmul(b[..., : L - s], a[..., : L - s], b[..., s:], out=b_buf[..., : L - s])
        torch.mul(a[..., : L - s], a[..., s:], out=a_buf[..., : L - s])
        b_buf[..., L - s :] = b[..., L - s :]
        a_buf[..., L - s :] = a[..., L - s :]
        a, a_buf = a_buf, a
        b, b_buf = b_buf, b
        s *= 2
        if stats is not None:
            stats["rounds"] = stats.get("rounds", 0) + 1
    return a, b


def linear_scan_reverse(
    a: torch.Tensor, b: torch.Tensor, *, chunk_size: int = 128, stats: dict | None = None, _owned: bool = False
) -> torch.Tensor:
    r"""Solve $x_t = b_t + a_t x_{t+1}$ ($x_T = 0$) along the last dim of ``[B, T]`` tensors.

    Two-level scan (chunks of ``chunk_size``, then chunk heads), depth
    $\lceil\log_2 C\rceil + \lceil\log_2 \lceil T/C\rceil\rceil + 1$. If ``stats`` is a dict,
    ``stats["rounds"]`` counts the dependent rounds (sequential depth) actually executed.
    ``_owned=True`` lets the scan use ``a`` and ``b`` as its buffers (saves two copies).
    """
    if a.shape != b.shape or a.dim() != 2:
        raise ValueError(f"expected two [B, T] tensors of equal shape, got {tuple(a.shape)} and {tuple(b.shape)}")
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    B, T = a.shape
    if stats is not None:
        stats.setdefault("rounds", 0)
    if T == 0:
        return b.clone()
    C = min(chunk_size, 1 << max(0, math.ceil(math.log2(T))))
    n = -(-T // C)
    pad = n * C - T
    if pad:
        # padding maps are x = 0 + 0 * x: they feed x = 0 into the last real step, as x_T = 0 does.
        a = torch.nn.functional.pad(a, (0, pad))
        b = torch.nn.functional.pad(b, (0, pad))
    elif not _owned:
        a, b = a.clone(), b.clone()  # the scan reuses its inputs as buffers
    P, X = _hillis_steele_reverse(a.reshape(B, n, C), b.reshape(B, n, C), stats)
    if n > 1:
        # chunk heads: y_k = X_k0 + P_k0 * y_{k+1}, y_n = 0 (y_k = x at the start of chunk k)
        # clone: with C = 1 the heads are X itself, and the scan reuses its inputs as buffers
        _, Y = _hillis_steele_reverse(P[:, :, 0].clone(), X[:, :, 0].clone(), stats)
        carry = torch.nn.functional.pad(Y[:, 1:], (0, 1))  # x at the start of the next chunk
        X.addcmul_(P, carry.unsqueeze(-1))
        if stats is not None:
            stats["rounds"] += 1
    X = X.reshape(B, n * C)
    return X[:, :T].contiguous() if pad else X


def gae_scan(
    rewards: torch.Tensor,
    values: torch.Tensor,
    mask: torch.Tensor,
    gamma: float,
    lam: float,
    *,
    dones: torch.Tensor | None = None,
    chunk_size: int = 128,
    stats: dict | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Raw GAE advantages and returns ``[B, T]`` (>= fp32) by a parallel scan; same results as ``gae``.

    Same conventions as :func:`impls.rl.gae.gae`: masked tokens are skipped (value and advantage
    carried across them), ``dones`` ends episodes (default: one per row), masked positions give 0.
    As one affine recurrence over all positions, with $c_t = 1-\mathrm{done}_t$:

    $$\hat A_t = m_t\,\delta_t + a_t\hat A_{t+1},\quad a_t = c_t\,(\gamma\lambda\, m_t + 1 - m_t),\quad
      \delta_t = r_t + \gamma\,[\text{no end in } [t, \mathrm{next}(t))]\,V_{\mathrm{next}(t)} - V_t,$$

    where $\mathrm{next}(t)$ (the next response token) comes from one native reverse ``cummin`` over
    positions and the end test from one ``cumsum`` of ``dones``. Follows the inputs' device.
    ``stats["rounds"]`` (if a dict is passed) records the sequential depth of the affine scan.
    """
    if rewards.dim() != 2:
        raise ValueError(f"expected [B, T] tensors, got rewards of shape {tuple(rewards.shape)}")
    if values.shape != rewards.shape or mask.shape != rewards.shape or (dones is not None and dones.shape != rewards.shape):
        raise ValueError(
            f"rewards, values, mask (and dones) must share one [B, T] shape, got {tuple(rewards.shape)}, "
            f"{tuple(values.shape)}, {tuple(mask.shape)}" + ("" if dones is None else f", {tuple(dones.shape)}")
        )
    if not (0.0 <= gamma <= 1.0 and 0.0 <= lam <= 1.0):
        raise ValueError(f"gamma and lam must lie in [0, 1], got gamma={gamma}, lam={lam}")
    dt = reduce_dtype(torch.promote_types(rewards.dtype, values.dtype))
    dev = rewards.device
    valid = mask.to(dev) != 0
    m = valid.to(dt)
    zero = torch.zeros((), dtype=dt, device=dev)
    v = torch.where(valid, values.to(device=dev, dtype=dt), zero)
    r = torch.where(valid, rewards.to(dt), zero)
    if dones is None and not has_resets(m):
        # right padding only: V_next(t) is V_{t+1} (0 on the pads), every live decay is gamma*lam,
        # and delta_t = 0 on the pads, so a chunk is one GEMM.
        delta = r - v
        delta[:, :-1].add_(v[:, 1:], alpha=gamma)
        delta.mul_(m)
        adv = discounted_suffix_sum(delta, gamma * lam, chunk_size=min(chunk_size, 64), stats=stats).mul_(m)
        return adv, (adv + v).mul_(m)
    B, T = m.shape
    cont = torch.ones_like(m) if dones is None else (dones.to(dev) == 0).to(dt)
    # next(t) = the first response token after t (T if none): a reverse running minimum of positions
    pos = torch.arange(T, device=dev).expand(B, T)
    idx = torch.where(valid, pos, torch.full_like(pos, T))
    nxt = torch.full_like(pos, T)
    if T > 1:
        nxt[:, :-1] = idx[:, 1:].flip(-1).cummin(dim=-1).values.flip(-1)
    v_next = torch.nn.functional.pad(v, (0, 1)).gather(1, nxt)  # V at next(t), 0 past the row end
    # an episode end in [t, next(t)) cuts the bootstrap: count ends with an exclusive prefix sum
    ends = torch.nn.functional.pad((1.0 - cont).cumsum(dim=-1), (1, 0))  # ends[:, k] = #ends before k
    linked = (ends.gather(1, nxt) - ends[:, :T]) == 0
    delta = torch.where(valid & linked, r + gamma * v_next - v, r - v).mul_(m)
    coef = cont * (m * (gamma * lam) + (1.0 - m))
    coef[:, -1:] = 0.0  # nothing follows the last column
    adv = linear_scan_reverse(coef, delta, chunk_size=chunk_size, stats=stats, _owned=True).mul_(m)
    returns = (adv + v).mul_(m)
    return adv, returns


def has_resets(m: torch.Tensor) -> bool:
    """True if some row of the 0/1 mask has a 0 before a 1 (left padding or interior masked tokens)."""
    return bool((m[:, :-1] < m[:, 1:]).any()) if m.shape[-1] > 1 else False


def discounted_suffix_sum(
    x: torch.Tensor, g: float, *, chunk_size: int = 64, stats: dict | None = None
) -> torch.Tensor:
    r"""$y_t = \sum_{j \ge t} g^{j-t} x_j$ along the last dim of ``[B, T]``, blocked.

    Inside a chunk of $C$ tokens it is one GEMM with the fixed upper-triangular Toeplitz matrix
    $W_{ij} = g^{j-i}$ ($j \ge i$); across chunks the heads obey $H_k = y^{loc}_{k,0} + g^C H_{k+1}$,
    solved by :func:`linear_scan_reverse`; then $y_{k,i} = y^{loc}_{k,i} + g^{C-i} H_{k+1}$.
    Only powers $g^p$ with $p \ge 0$ appear, so it is stable for $g \to 1$. With right padding
    ($x = 0$ after the end) this is exactly GAE's recursion.
    """
    B, T = x.shape
    C = max(1, min(chunk_size, T))
    n = -(-T // C)
    pad = n * C - T
    xs = torch.nn.functional.pad(x, (0, pad)) if pad else x
    i = torch.arange(C, device=x.device, dtype=torch.float64)
    power = (i[None, :] - i[:, None]).clamp_min(0)
    W = torch.triu(torch.full_like(power, g) ** power).to(x.dtype)  # W[i, j] = g^(j-i), j >= i
    local = (xs.reshape(B * n, C) @ W.T).reshape(B, n, C)
    if stats is not None:  # a length-C dot product is ceil(log2 C) deep as a tree reduction
        stats["rounds"] = stats.get("rounds", 0) + math.ceil(math.log2(C))
    if n > 1:
        # one-level scan over all n heads (ceil(log2 n) rounds); it copies its inputs
        heads = linear_scan_reverse(torch.full((B, n), g**C, dtype=x.dtype, device=x.device),
                                    local[:, :, 0], chunk_size=n, stats=stats)
        carry = torch.nn.functional.pad(heads[:, 1:], (0, 1))  # y at the start of the next chunk
        tail = (torch.full((C,), g, dtype=torch.float64, device=x.device) ** (C - i)).to(x.dtype)
        local.addcmul_(tail, carry.unsqueeze(-1))
        if stats is not None:
            stats["rounds"] += 1
    y = local.reshape(B, n * C)
    return y[:, :T].contiguous() if pad else y
