r"""Fused linear log-prob + entropy: from hidden states to token log-probs without the ``[N, V]`` logits.

For hidden states $h_i\in\mathbb{R}^H$, the LM-head weight $W\in\mathbb{R}^{V\times H}$, targets $y_i$
and temperature $\tau$, with $x_i = W h_i/\tau$:

$$\log\pi(y_i) = x_{i,y_i} - \operatorname{lse}_i,\quad \operatorname{lse}_i = \log\sum_v e^{x_{i,v}},\qquad
  H_i = -\sum_v \pi_{i,v}\log\pi_{i,v} = \operatorname{lse}_i - \sum_v \pi_{i,v} x_{i,v}.$$

The naive computation forms all ``N x V`` logits (fp32: 2.5 GB at $N=4096$, $V=152064$), and autograd
keeps the log-softmax for the backward and builds a gradient of the same size. Here
:class:`FusedLinearLogprobEntropy` (the idea of verl's ``FusedLinearForPPO`` and Liger-Kernel's
fused linear cross-entropy) walks the rows in chunks of ``chunk_size``: the forward keeps only
$\operatorname{lse}$ and $H$ per row (plus its inputs), and the backward recomputes each chunk's
logits, turns them in place into $\partial L/\partial z$ and accumulates

$$dH_{c} = \frac{\partial L}{\partial z_c} W,\qquad dW \mathrel{+}= \Bigl(\frac{\partial L}{\partial z_c}\Bigr)^{\!\top} h_c,
\qquad \frac{\partial L}{\partial z_{j}} = \frac1\tau\Bigl(g\,[j=y] - \pi_j\bigl(g + g_H(\log\pi_j + H)\bigr)\Bigr)$$

with $g$, $g_H$ the upstream gradients of the log-prob and the entropy. Memory: two ``[chunk, V]``
buffers instead of several ``[N, V]`` tensors; cost: the logits matmul runs twice (4 matmuls instead
of 3). ``backend="triton"`` runs the per-chunk softmax part (forward statistics, logit gradient) as
Triton kernels (:mod:`impls.scale.fused_logprobs_triton`); the matmuls stay in torch either way.
Maths in fp32 (fp64 stays fp64). bf16/fp16 inputs: on CUDA each chunk's logits leave the GEMM in fp32
(``torch.mm(..., out_dtype=torch.float32)``), elsewhere the chunk is multiplied in the input dtype and upcast;
$\partial L/\partial z$ is rounded once to the weight's dtype for the two backward GEMMs, and on CUDA $dW$'s
GEMM takes those bf16 operands with fp32 accumulation (``torch.addmm(..., out_dtype=torch.float32)``: Tensor
Cores, as Liger and verl); on the CPU it multiplies fp32 operands. Either way $dW$ accumulates in fp32. The
rounded copy is a third ``[chunk, V]`` buffer, half the size of the two fp32 ones.

Conventions (those of ``impls/rl/logprobs.py``): a target equal to ``ignore_index`` gives log-prob 0
and no gradient through it; the entropy is returned for every row (the loss mask decides). A logit of
$-\infty$ (a vocabulary entry masked out, as RL stacks do for invalid ids) has $\pi_j = 0$: it adds 0 to the
entropy ($\lim_{p\to0} p\log p = 0$) and gets gradient 0, never NaN.
"""

from __future__ import annotations

import torch

__all__ = [
    "fused_linear_logprobs",
    "FusedLinearLogprobEntropy",
    "online_logprobs",
    "fused_logprob_backward",
]


# Below this, exp() is exactly 0 in fp32 and fp64 alike: clamping log-values there keeps a logit of -inf
# (a masked vocabulary entry) from turning p·log p into 0·(-inf) = NaN without changing any other entry.
_NEG_LOG = -1e4


def _acc_dtype(*ts: torch.Tensor) -> torch.dtype:
    return torch.float64 if any(t.dtype == torch.float64 for t in ts) else torch.float32


def online_logprobs(
    logits: torch.Tensor,
    targets: torch.Tensor,
    *,
    block_size: int = 4096,
    temperature: float = 1.0,
    ignore_index: int = -100,
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Token log-probs and entropies of ``[N, V]`` logits, reading the vocabulary ``block_size`` columns at a time.

    One pass with a running maximum $m$, $s=\sum_v e^{x_v-m}$ and $a=\sum_v e^{x_v-m}(x_v-m)$ for $x=z/\tau$;
    when a block raises the maximum to $m'$: $s \leftarrow e^{m-m'}s$, $a \leftarrow e^{m-m'}(a + s(m-m'))$.
    Then $\log\pi(y) = x_y - m - \log s$ and $H = \log s - a/s$. Returns ``(logp, entropy)``, both ``[N]``
    in fp32 (fp64 for fp64 logits); ``logp`` is 0 where the target is ``ignore_index``.
    This is the loop each program of the Triton kernel runs, written in PyTorch for all rows at once.
    """
    if logits.dim() != 2:
        raise ValueError(f"expected [N, V] logits, got shape {tuple(logits.shape)}")
    if targets.shape != logits.shape[:1]:
        raise ValueError(f"targets shape {tuple(targets.shape)} != [N] = {tuple(logits.shape[:1])}")
    if block_size < 1 or temperature <= 0:
        raise ValueError(f"need block_size >= 1 and temperature > 0, got {block_size}, {temperature}")
    dt = _acc_dtype(logits)
    N, V = logits.shape
    y = targets.to(device=logits.device, dtype=torch.int64)
    m = torch.full((N,), float("-inf"), dtype=dt, device=logits.device)
    s = torch.zeros(N, dtype=dt, device=logits.device)
    a = torch.zeros_like(s)
    x_y = torch.zeros_like(s)
    for start in range(0, V, block_size):
        x = logits[:, start:start + block_size].to(dt) / temperature
        m_new = torch.maximum(m, x.amax(dim=-1))
        # a block of -inf logits only (masked vocabulary entries) leaves m' = -inf: subtract 0 instead of
        # -inf, so that exp(x - m') is exp(-inf) = 0 and not exp(NaN)
        m_safe = torch.where(m_new == float("-inf"), 0.0, m_new)
        shift = torch.where(s > 0, m - m_new, 0.0)  # m - m' (0 before the first block, where s = a = 0)
        alpha = torch.exp(m - m_safe)
        d = x - m_safe[:, None]
        e = torch.exp(d)
        # e·d -> 0 as d -> -inf (a masked logit of -inf has p = 0); 0·(-inf) would be NaN
        a = alpha * (a + s * shift) + torch.where(e > 0, e * d, 0.0).sum(-1)
        s = alpha * s + e.sum(-1)
        m = m_new
        inside = (y >= start) & (y < start + x.shape[1])
        x_y = x_y + torch.where(inside, x.gather(1, (y - start).clamp(0, x.shape[1] - 1)[:, None])[:, 0], 0.0)
    log_s = torch.log(s)
    logp = torch.where(y == ignore_index, 0.0, x_y - m - log_s)
    return logp, log_s - a / s


def _check(hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor, chunk_size: int,
           temperature: float) -> None:
    if hidden.dim() != 2 or weight.dim() != 2 or hidden.shape[1] != weight.shape[1]:
        raise ValueError(f"expected hidden [N, H] and weight [V, H], got {tuple(hidden.shape)} and {tuple(weight.shape)}")
    if targets.shape != hidden.shape[:1]:
        raise ValueError(f"targets shape {tuple(targets.shape)} != [N] = {tuple(hidden.shape[:1])}")
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")


def _mixed_gemms(t: torch.Tensor) -> bool:
    """Whether bf16/fp16 GEMMs with an fp32 result (``out_dtype``) exist on ``t``'s device: CUDA, and meta
    (where tests trace which GEMMs run); not the CPU."""
    return t.device.type != "cpu"


def _accumulate_dw_(dW: torch.Tensor, z: torch.Tensor, z_low: torch.Tensor | None, h: torch.Tensor) -> None:
    r"""$dW \mathrel{+}= (\partial L/\partial z)^\top h$. For a bf16/fp16 model on a GPU the GEMM takes bf16
    operands (``z_low``, the rounded copy dH's GEMM uses, and $h$ as it is) and accumulates into the fp32
    ``dW`` (Tensor Cores, as Liger and verl do); fp32 operands would make it the one SGEMM of the backward
    (about 67 vs 990 dense TFLOP/s on an H100). Elsewhere the operands are in dW's dtype."""
    if z_low is not None and _mixed_gemms(h):
        try:
            torch.addmm(dW, z_low.T, h, out_dtype=dW.dtype, out=dW)
            return
        except (TypeError, RuntimeError):
            pass
    dW.addmm_(z.T, h.to(dW.dtype))


def _logits_into(buf: torch.Tensor | None, h: torch.Tensor, weight: torch.Tensor, dt: torch.dtype) -> torch.Tensor:
    """$z = h W^\\top$ for one chunk, into ``buf`` (reused across chunks) when it fits."""
    c, V = h.shape[0], weight.shape[0]
    if h.dtype == dt and weight.dtype == dt:
        if buf is None or buf.shape[0] < c:
            buf = torch.empty(c, V, dtype=dt, device=h.device)
        return torch.mm(h, weight.T, out=buf[:c])
    if _mixed_gemms(h) and h.dtype == weight.dtype:
        try:  # bf16/fp16 on a GPU: fp32 logits straight out of the GEMM, never rounded to bf16 (see lp-02)
            return torch.mm(h, weight.T, out_dtype=dt)
        except (TypeError, RuntimeError):
            pass
    return torch.mm(h, weight.T).to(dt)  # elsewhere: multiply in the input dtype, upcast the chunk


def _stats_(z: torch.Tensor, y: torch.Tensor, temperature: float, ignore_index: int, work: torch.Tensor | None):
    """``(logp, entropy, lse)`` of a ``[c, V]`` chunk; overwrites ``z`` (PyTorch backend)."""
    if temperature != 1.0:
        z.mul_(1.0 / temperature)
    m = z.amax(dim=-1, keepdim=True)
    z.sub_(m)  # z - m <= 0
    e = torch.exp(z, out=work[: z.shape[0]]) if work is not None else torch.exp(z)
    s = e.sum(-1)
    x_y = z.gather(1, torch.where(y == ignore_index, 0, y)[:, None])[:, 0]
    # sum e^{x-m} (x-m): a logit of -inf (a masked vocabulary entry) has e = 0 and contributes 0, not
    # 0·(-inf) = NaN; clamping x-m at -1e4 changes only entries whose e underflows to exactly 0 anyway
    a = e.mul_(z.clamp_(min=_NEG_LOG)).sum(-1)
    log_s = torch.log(s)
    logp = torch.where(y == ignore_index, 0.0, x_y - log_s)
    return logp, log_s - a / s, m[:, 0] + log_s


def _dlogits_(z: torch.Tensor, y: torch.Tensor, lse: torch.Tensor, ent: torch.Tensor, g: torch.Tensor,
              g_h: torch.Tensor, temperature: float, work: torch.Tensor | None) -> torch.Tensor:
    r"""Overwrite the logits chunk ``z`` with $\partial L/\partial z$ (PyTorch backend)."""
    inv_tau = 1.0 / temperature
    if temperature != 1.0:
        z.mul_(inv_tau)
    z.sub_(lse[:, None])  # log pi
    p = torch.exp(z, out=work[: z.shape[0]]) if work is not None else torch.exp(z)
    z.clamp_(min=_NEG_LOG)  # p = 0 there (a -inf logit): its gradient is 0, not 0·inf = NaN
    z.add_(ent[:, None]).mul_(g_h[:, None]).add_(g[:, None])  # g + g_H (log pi + H)
    z.mul_(p).neg_()
    z.scatter_add_(1, torch.where(g != 0, y, 0)[:, None], g[:, None])  # + g [j = y]  (g = 0 if ignored)
    if temperature != 1.0:
        z.mul_(inv_tau)
    return z


def _backward_chunks(hidden, weight, targets, grad_logp, grad_entropy, *, temperature, ignore_index, chunk_size,
                     lse=None, entropy=None, need_h=True, need_w=True, backend="torch", block_v=None):
    """dH, dW by recomputing one chunk of logits at a time (``lse``/``entropy`` recomputed if not given)."""
    dt = _acc_dtype(hidden, weight)
    N = hidden.shape[0]
    y = targets.to(device=hidden.device, dtype=torch.int64)
    g_all = torch.where(y == ignore_index, 0.0, grad_logp.to(dt))
    gh_all = grad_entropy.to(dt)
    dH = torch.empty(N, hidden.shape[1], dtype=dt, device=hidden.device) if need_h else None
    dW = torch.zeros(weight.shape, dtype=dt, device=weight.device) if need_w else None
    buf = work = None
    for start in range(0, N, chunk_size):
        sl = slice(start, min(start + chunk_size, N))
        h, yc, g, g_h = hidden[sl], y[sl], g_all[sl], gh_all[sl]
        z = _logits_into(buf, h, weight, dt)
        if buf is None and z.dtype == dt and z.shape[0] == min(chunk_size, N):
            buf = z
        if backend == "triton":
            from impls.scale import fused_logprobs_triton as K

            kw = {} if block_v is None else {"block_v": block_v}
            if lse is None or entropy is None:
                _, ent_c, lse_c = K.chunk_forward(z, yc, temperature=temperature, ignore_index=ignore_index, **kw)
            else:
                ent_c, lse_c = entropy[sl].to(dt), lse[sl].to(dt)
            K.chunk_backward_(z, yc, lse_c, ent_c, g, g_h, temperature=temperature, ignore_index=ignore_index, **kw)
        else:
            if work is None:
                work = torch.empty_like(z)
            if lse is None or entropy is None:
                _, ent_c, lse_c = _stats_(z.clone(), yc, temperature, ignore_index, work)
            else:
                ent_c, lse_c = entropy[sl].to(dt), lse[sl].to(dt)
            _dlogits_(z, yc, lse_c, ent_c, g, g_h, temperature, work)
        # bf16/fp16 weight: dL/dz rounded to it once for both GEMMs (as verl and Liger do), no fp32 copy of W
        z_low = None if weight.dtype == dt else z.to(weight.dtype)
        if need_h:
            if z_low is None:
                torch.mm(z, weight, out=dH[sl])
            else:
                dH[sl] = z_low @ weight
        if need_w:
            _accumulate_dw_(dW, z, z_low, h)
    return dH, dW


def fused_logprob_backward(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    targets: torch.Tensor,
    grad_logp: torch.Tensor,
    grad_entropy: torch.Tensor,
    *,
    temperature: float = 1.0,
    ignore_index: int = -100,
    chunk_size: int = 1024,
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Gradients ``(dH [N, H], dW [V, H])`` of $L=\sum_i g_i\log\pi(y_i) + g_{H,i}H_i$, one row chunk at a time.

    For each chunk of ``chunk_size`` rows: recompute $x = h_c W^\top/\tau$, $\log\pi = x - \operatorname{lse}$,
    $\pi = e^{\log\pi}$, $H$; then
    $\partial L/\partial z_j = \tfrac1\tau\bigl(g[j=y] - \pi_j(g + g_H(\log\pi_j + H))\bigr)$,
    $dH_c = (\partial L/\partial z)\,W$ and $dW \mathrel{+}= (\partial L/\partial z)^\top h_c$.
    Rows whose target is ``ignore_index`` contribute only through the entropy. Never forms ``[N, V]``;
    results in fp32 (fp64 for fp64 inputs).
    """
    _check(hidden, weight, targets, chunk_size, temperature)
    return _backward_chunks(hidden, weight, targets, grad_logp, grad_entropy, temperature=temperature,
                            ignore_index=ignore_index, chunk_size=chunk_size)


class FusedLinearLogprobEntropy(torch.autograd.Function):
    """``(logp, entropy)`` from ``hidden [N, H]``, ``weight [V, H]``, ``targets [N]``; backward recomputes per chunk."""

    @staticmethod
    def forward(ctx, hidden, weight, targets, temperature, ignore_index, chunk_size, backend, block_v):
        dt = _acc_dtype(hidden, weight)
        N = hidden.shape[0]
        y = targets.to(device=hidden.device, dtype=torch.int64)
        logp = torch.empty(N, dtype=dt, device=hidden.device)
        ent, lse = torch.empty_like(logp), torch.empty_like(logp)
        buf = work = None
        for start in range(0, N, chunk_size):
            sl = slice(start, min(start + chunk_size, N))
            z = _logits_into(buf, hidden[sl], weight, dt)
            if buf is None and z.dtype == dt and z.shape[0] == min(chunk_size, N):
                buf = z
            if backend == "triton":
                from impls.scale import fused_logprobs_triton as K

                kw = {} if block_v is None else {"block_v": block_v}
                logp[sl], ent[sl], lse[sl] = K.chunk_forward(z, y[sl], temperature=temperature,
                                                             ignore_index=ignore_index, **kw)
            else:
                if work is None:
                    work = torch.empty_like(z)
                logp[sl], ent[sl], lse[sl] = _stats_(z, y[sl], temperature, ignore_index, work)
        ctx.save_for_backward(hidden, weight, y, lse, ent)
        ctx.args = (temperature, ignore_index, chunk_size, backend, block_v)
        ctx.mark_non_differentiable(lse)
        return logp, ent

    @staticmethod
    def backward(ctx, grad_logp, grad_entropy):
        hidden, weight, y, lse, ent = ctx.saved_tensors
        temperature, ignore_index, chunk_size, backend, block_v = ctx.args
        if grad_logp is None:
            grad_logp = torch.zeros_like(lse)
        if grad_entropy is None:
            grad_entropy = torch.zeros_like(lse)
        dH, dW = _backward_chunks(hidden, weight, y, grad_logp, grad_entropy, temperature=temperature,
                                  ignore_index=ignore_index, chunk_size=chunk_size, lse=lse, entropy=ent,
                                  need_h=ctx.needs_input_grad[0], need_w=ctx.needs_input_grad[1],
                                  backend=backend, block_v=block_v)
        if dH is not None:
            dH = dH.to(hidden.dtype)
        if dW is not None:
            dW = dW.to(weight.dtype)
        return dH, dW, None, None, None, None, None, None


def fused_linear_logprobs(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    targets: torch.Tensor,
    *,
    temperature: float = 1.0,
    ignore_index: int = -100,
    chunk_size: int = 1024,
    backend: str = "torch",
    block_v: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""$(\log\pi(y), H)$ for hidden states ``[..., H]``, LM-head weight ``[V, H]``, targets ``[...]``.

    Never forms more than ``chunk_size x V`` logits, in the forward or the backward (see the module
    docstring). ``backend``: ``"torch"`` (any device) or ``"triton"`` (CUDA, or CPU tensors under
    ``TRITON_INTERPRET=1``); ``block_v`` is the Triton kernels' vocabulary block. Both outputs have the
    targets' shape, fp32 (fp64 for fp64 inputs).
    """
    if backend not in ("torch", "triton"):
        raise ValueError(f"backend must be 'torch' or 'triton', got {backend!r}")
    if hidden.shape[:-1] != targets.shape:
        raise ValueError(f"targets shape {tuple(targets.shape)} != hidden's leading dims {tuple(hidden.shape[:-1])}")
    lead = targets.shape
    h2 = hidden.reshape(-1, hidden.shape[-1])
    y = targets.reshape(-1)
    _check(h2, weight, y, chunk_size, temperature)
    live = y[y != ignore_index]
    if live.numel() and (int(live.min()) < 0 or int(live.max()) >= weight.shape[0]):
        raise ValueError(f"targets must lie in [0, {weight.shape[0]}) or equal ignore_index={ignore_index}")
    logp, ent = FusedLinearLogprobEntropy.apply(h2, weight, y, float(temperature), int(ignore_index), int(chunk_size),
                                               backend, block_v)
    return logp.reshape(lead), ent.reshape(lead)
