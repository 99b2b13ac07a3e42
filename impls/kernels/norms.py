r"""LayerNorm and RMSNorm in Triton, forward and backward, and RMSNorm fused with the residual add.

Per row $x\in\mathbb R^D$ (one program per row, the row held in registers, statistics in fp32):

$$\text{LayerNorm: } \mu = \tfrac1D\textstyle\sum_i x_i,\quad \sigma^2 = \tfrac1D\sum_i (x_i-\mu)^2,\quad
  \hat x = (x-\mu)\,r,\ r = (\sigma^2+\varepsilon)^{-1/2},\quad y = \hat x\odot w + b;$$
$$\text{RMSNorm: } r = \bigl(\tfrac1D\textstyle\sum_i x_i^2+\varepsilon\bigr)^{-1/2},\quad \hat x = x\,r,\quad y = \hat x\odot w.$$

The variance is computed from the centred row (two passes over registers, no extra memory traffic),
not as $E[x^2]-E[x]^2$, which cancels catastrophically when $|\mu| \gg \sigma$. The forward saves
$\mu$ and $r$ per row (8 bytes) for the backward. With $g = dy\odot w$:

$$\text{LayerNorm: } dx = r\bigl(g - \overline{g} - \hat x\,\overline{g\hat x}\bigr),\qquad
  \text{RMSNorm: } dx = r\bigl(g - \hat x\,\overline{g\hat x}\bigr),$$

$\overline{\,\cdot\,}$ the mean over the row, and the parameter gradients are sums over all rows,
$dw = \sum_{\text{rows}} dy\odot\hat x$, $db = \sum_{\text{rows}} dy$. The backward kernel gives each
program a group of rows, accumulates their $dy\odot\hat x$ (and $dy$) in fp32 registers and writes
one partial row per program; a second kernel sums the partial rows column by column. The order of
the additions is fixed by the program index, so the gradients are the same on every run (an
``atomic_add`` into one buffer would not be).

:func:`add_rms_norm` fuses the residual add of a pre-norm block: it reads $x$ and the residual,
writes $h = x + \text{residual}$ (the next block's residual) and $y = \text{RMSNorm}(h)$: 2 reads and
2 writes of $N\times D$, against 3 + 2 for an add kernel followed by a norm kernel
(:func:`bytes_moved`).

Inputs fp16, bf16 or fp32; outputs in the input's dtype, gradients of $w, b$ in fp32 then cast to
$w$'s dtype.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

__all__ = ["layer_norm", "rms_norm", "add_rms_norm", "norm_forward", "norm_backward", "norm_fwd_kernel",
           "norm_bwd_kernel", "column_sum_kernel", "add_rms_norm_kernel", "add_kernel", "bytes_moved",
           "layer_norm_torch", "rms_norm_torch", "MAX_BLOCK"]

MAX_BLOCK = 16384  # longest row (rounded up to a power of two) one program holds


@triton.jit
def norm_fwd_kernel(x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr, D, stride_x, stride_y, eps,
                    RMS: tl.constexpr, HAS_BIAS: tl.constexpr, BLOCK: tl.constexpr):
    """y[row] = LayerNorm (RMS=False) or RMSNorm (RMS=True) of x[row]; saves the row's mean and 1/std."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    ok = cols < D
    x = tl.load(x_ptr + row * stride_x + cols, mask=ok, other=0.0).to(tl.float32)
    if RMS:
        mean = 0.0
        xc = x
    else:
        mean = tl.sum(x, axis=0) / D
        xc = tl.where(ok, x - mean, 0.0)
    var = tl.sum(xc * xc, axis=0) / D
    rstd = 1.0 / tl.sqrt(var + eps)
    w = tl.load(w_ptr + cols, mask=ok, other=0.0).to(tl.float32)
    y = xc * rstd * w
    if HAS_BIAS:
        y += tl.load(b_ptr + cols, mask=ok, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * stride_y + cols, y.to(y_ptr.dtype.element_ty), mask=ok)
    if not RMS:
        tl.store(mean_ptr + row, mean)
    tl.store(rstd_ptr + row, rstd)


@triton.jit
def norm_bwd_kernel(dy_ptr, x_ptr, w_ptr, mean_ptr, rstd_ptr, dx_ptr, dw_part_ptr, db_part_ptr, N, D,
                    stride_dy, stride_x, stride_dx, rows_per_program,
                    RMS: tl.constexpr, HAS_BIAS: tl.constexpr, BLOCK: tl.constexpr):
    """dx for this program's rows, and its partial sums of dy*xhat (and dy) over those rows, in fp32."""
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    ok = cols < D
    w = tl.load(w_ptr + cols, mask=ok, other=0.0).to(tl.float32)
    dw = tl.zeros((BLOCK,), dtype=tl.float32)
    db = tl.zeros((BLOCK,), dtype=tl.float32)
    first = pid * rows_per_program
    for i in range(0, rows_per_program):
        row = first + i
        if row < N:
            r64 = row.to(tl.int64)
            x = tl.load(x_ptr + r64 * stride_x + cols, mask=ok, other=0.0).to(tl.float32)
            dy = tl.load(dy_ptr + r64 * stride_dy + cols, mask=ok, other=0.0).to(tl.float32)
            rstd = tl.load(rstd_ptr + row)
            if RMS:
                xhat = x * rstd
            else:
                xhat = tl.where(ok, (x - tl.load(mean_ptr + row)) * rstd, 0.0)
            g = dy * w
            c = tl.sum(g * xhat, axis=0) / D
            if RMS:
                dx = (g - xhat * c) * rstd
            else:
                dx = (g - tl.sum(g, axis=0) / D - xhat * c) * rstd
            tl.store(dx_ptr + r64 * stride_dx + cols, dx.to(dx_ptr.dtype.element_ty), mask=ok)
            dw += dy * xhat
            db += dy
    tl.store(dw_part_ptr + pid * D + cols, dw, mask=ok)
    if HAS_BIAS:
        tl.store(db_part_ptr + pid * D + cols, db, mask=ok)


@triton.jit
def column_sum_kernel(part_ptr, out_ptr, G, D, BLOCK_G: tl.constexpr, BLOCK_D: tl.constexpr):
    """out[j] = sum over g of part[g, j] for this program's BLOCK_D columns, in a fixed order (fp32)."""
    cols = tl.program_id(0) * BLOCK_D + tl.arange(0, BLOCK_D)
    rows = tl.arange(0, BLOCK_G)
    acc = tl.zeros((BLOCK_G, BLOCK_D), dtype=tl.float32)
    for g0 in range(0, G, BLOCK_G):
        ok = ((g0 + rows) < G)[:, None] & (cols < D)[None, :]
        acc += tl.load(part_ptr + (g0 + rows)[:, None].to(tl.int64) * D + cols[None, :], mask=ok, other=0.0)
    tl.store(out_ptr + cols, tl.sum(acc, axis=0).to(out_ptr.dtype.element_ty), mask=cols < D)


@triton.jit
def add_rms_norm_kernel(x_ptr, r_ptr, w_ptr, h_ptr, y_ptr, rstd_ptr, D, stride, eps, BLOCK: tl.constexpr):
    """h = x + residual (written: the next block's residual), y = RMSNorm(h) * w, in one pass."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    ok = cols < D
    h = tl.load(x_ptr + row * stride + cols, mask=ok, other=0.0).to(tl.float32) \
        + tl.load(r_ptr + row * stride + cols, mask=ok, other=0.0).to(tl.float32)
    h = h.to(h_ptr.dtype.element_ty)
    tl.store(h_ptr + row * stride + cols, h, mask=ok)
    hf = h.to(tl.float32)  # normalise what was stored (the residual stream's dtype), as an unfused pair does
    rstd = 1.0 / tl.sqrt(tl.sum(hf * hf, axis=0) / D + eps)
    w = tl.load(w_ptr + cols, mask=ok, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * stride + cols, (hf * rstd * w).to(y_ptr.dtype.element_ty), mask=ok)
    tl.store(rstd_ptr + row, rstd)


@triton.jit
def add_kernel(x_ptr, r_ptr, h_ptr, n, BLOCK: tl.constexpr):
    """h = x + residual: the add an unfused block runs before its norm."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < n
    h = tl.load(x_ptr + offs, mask=ok, other=0.0).to(tl.float32) + tl.load(r_ptr + offs, mask=ok, other=0.0)
    tl.store(h_ptr + offs, h.to(h_ptr.dtype.element_ty), mask=ok)


def _rows(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
    from impls.scale.triton_support import check_device

    if x.dim() == 0 or x.shape[-1] == 0:
        raise ValueError(f"expected x [..., D] with D >= 1, got shape {tuple(x.shape)}")
    D = x.shape[-1]
    if w.shape != (D,) or (b is not None and b.shape != (D,)):
        raise ValueError(f"weight and bias must be [{D}], got {tuple(w.shape)}"
                         + ("" if b is None else f" and {tuple(b.shape)}"))
    if x.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        raise ValueError(f"expected fp16, bf16 or fp32 activations, got {x.dtype}")
    if triton.next_power_of_2(D) > MAX_BLOCK:
        raise ValueError(f"rows of {D} do not fit one program (at most {MAX_BLOCK})")
    check_device(x, w, *([] if b is None else [b]))
    x2 = x.reshape(-1, D)
    return x2 if x2.stride(-1) == 1 else x2.contiguous()


def _warps(block: int) -> int:
    return min(max(block // 256, 1), 8)


def norm_forward(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None, *, rms: bool = False,
                 eps: float = 1e-5) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(y, mean, rstd): LayerNorm (``rms=False``) or RMSNorm of the last dimension; mean and rstd fp32 ``[rows]``."""
    if rms and bias is not None:
        raise ValueError("RMSNorm has no bias")
    x2 = _rows(x, weight, bias)
    N, D = x2.shape
    y = torch.empty_like(x2)
    mean = torch.zeros(N, dtype=torch.float32, device=x.device)
    rstd = torch.empty(N, dtype=torch.float32, device=x.device)
    if N:
        BLOCK = triton.next_power_of_2(D)
        norm_fwd_kernel[(N,)](x2, weight, bias if bias is not None else weight, y, mean, rstd, D, x2.stride(0),
                              y.stride(0), float(eps), RMS=rms, HAS_BIAS=bias is not None, BLOCK=BLOCK,
                              num_warps=_warps(BLOCK))
    return y.reshape(x.shape), mean, rstd


def norm_backward(dy: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, mean: torch.Tensor, rstd: torch.Tensor,
                  *, rms: bool = False, has_bias: bool = True, rows_per_program: int = 16
                  ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """(dx, dw, db) of :func:`norm_forward` (``db`` None without a bias). ``rows_per_program`` rows share one
    partial row of dw/db, summed afterwards by :func:`column_sum_kernel` in program order."""
    if rows_per_program < 1:
        raise ValueError(f"rows_per_program must be at least 1, got {rows_per_program}")
    x2 = _rows(x, weight, None)
    dy2 = dy.reshape(x2.shape)
    dy2 = dy2 if dy2.stride(-1) == 1 else dy2.contiguous()
    N, D = x2.shape
    dx = torch.empty_like(x2)
    G = max(1, triton.cdiv(N, rows_per_program))
    dw_part = torch.zeros(G, D, dtype=torch.float32, device=x.device)
    db_part = torch.zeros(G, D, dtype=torch.float32, device=x.device)
    BLOCK = triton.next_power_of_2(D)
    if N:
        norm_bwd_kernel[(G,)](dy2, x2, weight, mean, rstd, dx, dw_part, db_part, N, D, dy2.stride(0), x2.stride(0),
                              dx.stride(0), rows_per_program, RMS=rms, HAS_BIAS=has_bias, BLOCK=BLOCK,
                              num_warps=_warps(BLOCK))
    dw = torch.empty(D, dtype=weight.dtype, device=x.device)
    db = torch.empty(D, dtype=weight.dtype, device=x.device) if has_bias else None
    BLOCK_D = min(128, BLOCK)
    for part, out in ((dw_part, dw), (db_part, db)):
        if out is not None:
            column_sum_kernel[(triton.cdiv(D, BLOCK_D),)](part, out, G, D, BLOCK_G=32, BLOCK_D=BLOCK_D)
    return dx.reshape(x.shape), dw, db


class _Norm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, rms, eps):
        y, mean, rstd = norm_forward(x, weight, bias, rms=rms, eps=eps)
        ctx.save_for_backward(x, weight, mean, rstd)
        ctx.rms, ctx.has_bias = rms, bias is not None
        return y

    @staticmethod
    def backward(ctx, dy):
        x, weight, mean, rstd = ctx.saved_tensors
        dx, dw, db = norm_backward(dy, x, weight, mean, rstd, rms=ctx.rms, has_bias=ctx.has_bias)
        return dx, dw, db, None, None


def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None, eps: float = 1e-5
               ) -> torch.Tensor:
    """LayerNorm over the last dimension with the Triton forward and backward (autograd-aware)."""
    return _Norm.apply(x, weight, bias, False, eps)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """RMSNorm over the last dimension with the Triton forward and backward (autograd-aware)."""
    return _Norm.apply(x, weight, None, True, eps)


def add_rms_norm(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6, *,
                 fused: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """(y, h) with h = x + residual and y = RMSNorm(h)·weight (forward only): one kernel when ``fused``, else an
    add kernel then the norm kernel."""
    if x.shape != residual.shape or x.dtype != residual.dtype:
        raise ValueError(f"x and residual must match, got {tuple(x.shape)} {x.dtype} and "
                         f"{tuple(residual.shape)} {residual.dtype}")
    x2 = _rows(x, weight, None)
    r2 = _rows(residual, weight, None)
    N, D = x2.shape
    h = torch.empty_like(x2)
    if not fused:
        if N:
            add_kernel[(triton.cdiv(N * D, 1024),)](x2, r2, h, N * D, BLOCK=1024)
        y, _, _ = norm_forward(h, weight, rms=True, eps=eps)
        return y.reshape(x.shape), h.reshape(x.shape)
    y = torch.empty_like(x2)
    rstd = torch.empty(N, dtype=torch.float32, device=x.device)
    if N:
        BLOCK = triton.next_power_of_2(D)
        add_rms_norm_kernel[(N,)](x2, r2, weight, h, y, rstd, D, D, float(eps), BLOCK=BLOCK, num_warps=_warps(BLOCK))
    return y.reshape(x.shape), h.reshape(x.shape)


def layer_norm_torch(x, weight, bias=None, eps: float = 1e-5):
    """The PyTorch op (fp32 statistics for half inputs)."""
    return torch.nn.functional.layer_norm(x.float(), (x.shape[-1],), weight.float(),
                                          None if bias is None else bias.float(), eps).to(x.dtype)


def rms_norm_torch(x, weight, eps: float = 1e-6):
    """The PyTorch op (fp32 statistics for half inputs)."""
    return torch.nn.functional.rms_norm(x.float(), (x.shape[-1],), weight.float(), eps).to(x.dtype)


def bytes_moved(rows: int, D: int, kind: str, bytes_per_element: int = 2, *, weights_once: bool = False) -> int:
    """Bytes one forward requests from global memory, as the kernels issue them: every program loads the
    weight (and bias) row, so they count once per row; ``weights_once`` counts them once in all (what reaches
    HBM when L2 holds them, as it does for any D here). ``kind``: ``layernorm`` (x, w, b in; y, mean, rstd
    out), ``rmsnorm`` (x, w in; y, rstd out), ``add+rmsnorm`` fused (x, residual, w in; h, y, rstd out),
    ``add,rmsnorm`` unfused (an add kernel: x, residual in, h out; then the RMSNorm of h). Statistics are
    fp32 (4 bytes each)."""
    e, N = bytes_per_element, rows
    w = D * e if weights_once else N * D * e  # one weight-sized vector
    if kind == "layernorm":
        return 2 * N * D * e + 2 * w + 8 * N
    if kind == "rmsnorm":
        return 2 * N * D * e + w + 4 * N
    if kind == "add+rmsnorm":
        return 4 * N * D * e + w + 4 * N
    if kind == "add,rmsnorm":
        return 3 * N * D * e + bytes_moved(rows, D, "rmsnorm", e, weights_once=weights_once)
    raise ValueError(f"kind must be layernorm, rmsnorm, add+rmsnorm or add,rmsnorm; got {kind!r}")
