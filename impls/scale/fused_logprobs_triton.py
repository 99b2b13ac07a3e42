r"""Triton kernels for the per-chunk part of the fused linear log-prob / entropy.

The matmuls (logits $z = h W^\top$, then $dH = dz\,W$ and $dW \mathrel{+}= dz^\top h$) stay in
cuBLAS via torch; what Triton fuses is the part that would otherwise make several passes over a
``[chunk, V]`` block: the softmax statistics in the forward and the logit gradient in the backward.
One program handles one row and walks the vocabulary in blocks of ``BLOCK_V``:

Forward, an online softmax (Milakov & Gimelshein 2018) that also carries the entropy. With
$x = z/\tau$ and a running maximum $m$, it keeps $s = \sum e^{x-m}$ and
$a = \sum e^{x-m}(x-m)$; when the maximum grows to $m'$ both are rescaled,

$$s \leftarrow e^{m-m'} s,\qquad a \leftarrow e^{m-m'}\bigl(a + s\,(m-m')\bigr),$$

and at the end $\operatorname{lse} = m + \log s$, $\log\pi(y) = x_y - \operatorname{lse}$,
$H = \log s - a/s$ (no subtraction of two large numbers: $a$ is formed relative to $m$).

Backward, in place over the recomputed logits: with $\ell_j = x_j - \operatorname{lse}$,
$p_j = e^{\ell_j}$ and upstream gradients $g$ (log-prob) and $g_H$ (entropy),

$$\frac{\partial L}{\partial z_j} = \frac{1}{\tau}\Bigl(g\,[j = y] - p_j\bigl(g + g_H(\ell_j + H)\bigr)\Bigr),$$

from $\partial\log\pi(y)/\partial x_j = [j=y]-p_j$ and $\partial H/\partial x_j = -p_j(\ell_j + H)$.
A row whose target is ``ignore_index`` gets $g = 0$ (its log-prob is the constant 0). A logit of
$-\infty$ (a masked vocabulary entry) has $p_j = 0$: it adds $0$ to $a$ and gets $\partial L/\partial z_j = 0$
(the limits of $p\log p$ and $p\,(g + g_H(\ell + H))$), never $0\cdot\infty$ = NaN.
"""

from __future__ import annotations

import torch

from impls.scale.triton_support import HAVE_TRITON, check_device, tl, triton

__all__ = ["chunk_forward", "chunk_backward_"]

DEFAULT_BLOCK_V = 4096

if HAVE_TRITON:

    @triton.jit
    def _logprob_fwd_kernel(z_ptr, y_ptr, lp_ptr, ent_ptr, lse_ptr, V, stride_z, inv_tau_ptr, ignore_index,
                            BLOCK_V: tl.constexpr, ACC: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        z_row = z_ptr + row * stride_z
        y = tl.load(y_ptr + row)
        inv_tau = tl.load(inv_tau_ptr)  # 1/τ in the logits' dtype (a Python float would arrive as fp32)
        zero = tl.zeros((), dtype=ACC)  # accumulators: fp32 (fp64 for fp64 logits)
        m = zero - float("inf")
        s = zero
        a = zero
        x_y = zero
        for start in range(0, V, BLOCK_V):
            offs = start + tl.arange(0, BLOCK_V)
            valid = offs < V
            x = tl.load(z_row + offs, mask=valid, other=-float("inf")).to(ACC) * inv_tau
            m_new = tl.maximum(m, tl.max(x, axis=0))
            # a block holding only -inf logits leaves m' = -inf: subtract 0 then, not -inf (exp(NaN))
            m_safe = tl.where(m_new == -float("inf"), 0.0, m_new)
            alpha = tl.exp(m - m_safe)
            # a <- e^{m-m'} (a + s (m - m')); before the first block s = a = 0 and m - m' = -inf
            shift = tl.where(s > 0, m - m_new, 0.0)
            a = alpha * (a + s * shift)
            d = tl.where(valid, x - m_safe, 0.0)  # padded lanes hold -inf; keep them out of every sum
            e = tl.where(valid, tl.exp(d), 0.0)
            a += tl.sum(tl.where(e > 0, e * d, 0.0), axis=0)  # a -inf logit: e = 0, and 0·(-inf) is NaN
            s = alpha * s + tl.sum(e, axis=0)
            m = m_new
            x_y += tl.sum(tl.where(offs == y, x, 0.0), axis=0)
        log_s = tl.log(s)
        lse = m + log_s
        tl.store(lse_ptr + row, lse)
        tl.store(ent_ptr + row, log_s - a / s)
        tl.store(lp_ptr + row, tl.where(y == ignore_index, 0.0, x_y - lse))

    @triton.jit
    def _logprob_bwd_kernel(z_ptr, y_ptr, lse_ptr, ent_ptr, glp_ptr, gent_ptr, V, stride_z, inv_tau_ptr, ignore_index,
                            BLOCK_V: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        z_row = z_ptr + row * stride_z
        y = tl.load(y_ptr + row)
        lse = tl.load(lse_ptr + row)
        ent = tl.load(ent_ptr + row)
        inv_tau = tl.load(inv_tau_ptr)
        g = tl.where(y == ignore_index, 0.0, tl.load(glp_ptr + row))
        g_h = tl.load(gent_ptr + row)
        for start in range(0, V, BLOCK_V):
            offs = start + tl.arange(0, BLOCK_V)
            valid = offs < V
            x = tl.load(z_row + offs, mask=valid, other=0.0).to(lse.dtype) * inv_tau
            logp = x - lse
            p = tl.exp(logp)
            # p = 0 (a -inf logit): gradient 0, not 0·inf = NaN
            dz = tl.where(offs == y, g, 0.0) - tl.where(p > 0, p * (g + g_h * (logp + ent)), 0.0)
            tl.store(z_row + offs, (dz * inv_tau).to(z_ptr.dtype.element_ty), mask=valid)


def _prep(z: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    if z.dim() != 2 or z.stride(1) != 1:
        raise ValueError(f"expected a row-contiguous [rows, V] logits block, got shape {tuple(z.shape)}")
    if z.dtype not in (torch.float32, torch.float64):
        raise ValueError(f"logits block must be fp32 or fp64, got {z.dtype}")
    y = targets.to(device=z.device, dtype=torch.int64).contiguous()
    if y.shape != z.shape[:1]:
        raise ValueError(f"targets shape {tuple(y.shape)} != [rows] = {tuple(z.shape[:1])}")
    check_device(z, y)
    return z, y


def _inverse(temperature: float, z: torch.Tensor) -> torch.Tensor:
    """1/τ as a one-element tensor of the logits' dtype: a compiled kernel takes a Python float argument as an
    fp32 scalar (Triton mangles it "fp32"), which would cap fp64 logits at fp32's 1/τ."""
    return torch.full((1,), 1.0 / temperature, dtype=z.dtype, device=z.device)


def chunk_forward(z: torch.Tensor, targets: torch.Tensor, *, temperature: float = 1.0, ignore_index: int = -100,
                  block_v: int = DEFAULT_BLOCK_V) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(logp, entropy, lse)`` of each row of the ``[rows, V]`` logits block ``z`` at temperature ``tau``.

    ``lse`` is the log-partition of $z/\\tau$ (kept for the backward). One Triton program per row.
    """
    z, y = _prep(z, targets)
    n, V = z.shape
    lp, ent, lse = (torch.empty(n, dtype=z.dtype, device=z.device) for _ in range(3))
    if n:
        _logprob_fwd_kernel[(n,)](z, y, lp, ent, lse, V, z.stride(0), _inverse(temperature, z), ignore_index,
                                  BLOCK_V=block_v, ACC=tl.float64 if z.dtype == torch.float64 else tl.float32)
    return lp, ent, lse


def chunk_backward_(z: torch.Tensor, targets: torch.Tensor, lse: torch.Tensor, entropy: torch.Tensor,
                    grad_logp: torch.Tensor, grad_entropy: torch.Tensor, *, temperature: float = 1.0,
                    ignore_index: int = -100, block_v: int = DEFAULT_BLOCK_V) -> torch.Tensor:
    """Overwrite the logits block ``z`` with $\\partial L/\\partial z$ (see the module docstring); returns ``z``."""
    z, y = _prep(z, targets)
    n, V = z.shape
    args = [t.to(device=z.device, dtype=z.dtype).contiguous() for t in (lse, entropy, grad_logp, grad_entropy)]
    if n:
        _logprob_bwd_kernel[(n,)](z, y, *args, V, z.stride(0), _inverse(temperature, z), ignore_index,
                                  BLOCK_V=block_v)
    return z
