r"""GAE as one Triton kernel: each program owns a block of rows and scans them backwards over T, tile by tile.

Multi-turn convention (verl's ``compute_gae_advantage_return``): the **loss mask** $m_t$ says which
tokens are trained; **episode boundaries** are separate, ``dones`` $d_t = 1$ when token $t$ ends its
episode (default: none inside a row, so one episode per row, ending with the row). Masked tokens inside
an episode (tool output, environment text) are skipped: the next value and the running advantage are
carried across them unchanged. In other words GAE runs on each episode's trained tokens as if the masked
ones were not there; rewards on masked tokens are dropped; masked positions get 0.

Two first-order recurrences, both affine in the carried quantity, so each is an associative scan:

$$V'_t = (1-d_t)\bigl(m_{t+1}V_{t+1} + (1-m_{t+1})\,V'_{t+1}\bigr)
  \qquad\text{(value of the next trained token of the episode, 0 if none)},$$
$$\delta_t = m_t\,(r_t + \gamma V'_t - V_t),\qquad
  c_t = \delta_t + (1-d_t)\bigl(m_t\gamma\lambda + 1 - m_t\bigr)\,c_{t+1},$$

$\hat A_t = m_t c_t$ and $\hat R_t = m_t(c_t + V_t)$. A pair $(a, b)$ stands for $x \mapsto b + a x$;
composing a later pair $(a_1,b_1)$ into an earlier $(a_2,b_2)$ gives $(a_1a_2,\; b_2 + a_2b_1)$.
The kernel loads a ``[BLOCK_B, BLOCK_T]`` tile with time reversed (column 0 = latest token), runs
``tl.associative_scan`` along it (``log2 BLOCK_T`` levels in registers), applies the carry from the
tile after it ($x_t = b^{scan}_t + a^{scan}_t\,x_{\text{carry}}$) and hands the earliest value to the
tile before it. HBM traffic: each input read once (the $t+1$ loads hit the same cache lines), each
output written once.
"""

from __future__ import annotations

import torch

from impls.scale.triton_support import HAVE_TRITON, check_device, tl, triton

__all__ = ["gae_triton"]

if HAVE_TRITON:

    @triton.jit
    def _compose(a1, b1, a2, b2):
        # (a1, b1): the later steps already composed; (a2, b2): the earlier step
        return a1 * a2, b2 + a2 * b1

    @triton.jit
    def _gae_kernel(r_ptr, v_ptr, m_ptr, d_ptr, adv_ptr, ret_ptr, B, T, coef_ptr,
                    BLOCK_B: tl.constexpr, BLOCK_T: tl.constexpr, ACC: tl.constexpr):
        rows = tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)
        row_ok = rows < B
        gamma = tl.load(coef_ptr)  # (γ, γλ) in the accumulator's dtype: Python floats would arrive as fp32
        gamma_lam = tl.load(coef_ptr + 1)
        base = rows.to(tl.int64)[:, None] * T
        j = tl.arange(0, BLOCK_T)
        carry_v = tl.zeros((BLOCK_B,), dtype=ACC)  # V' after the tile
        carry_c = tl.zeros((BLOCK_B,), dtype=ACC)  # c after the tile
        for k in range(0, tl.cdiv(T, BLOCK_T)):
            t = T - 1 - k * BLOCK_T - j  # column 0 is the latest token of the tile
            ok = row_ok[:, None] & (t >= 0)[None, :]
            nxt = row_ok[:, None] & ((t >= 0) & (t + 1 < T))[None, :]
            off = base + t[None, :]
            r = tl.load(r_ptr + off, mask=ok, other=0).to(ACC)
            v = tl.load(v_ptr + off, mask=ok, other=0).to(ACC)
            m = (tl.load(m_ptr + off, mask=ok, other=0) != 0).to(ACC)
            keep = 1.0 - (tl.load(d_ptr + off, mask=ok, other=0) != 0).to(ACC)  # 1 - d_t
            m1 = (tl.load(m_ptr + off + 1, mask=nxt, other=0) != 0).to(ACC)
            v1 = tl.load(v_ptr + off + 1, mask=nxt, other=0).to(ACC)
            # V'_t = beta + alpha V'_{t+1}; out-of-range positions are the identity (1, 0)
            alpha = tl.where(ok, keep * (1.0 - m1), 1.0)
            beta = keep * m1 * v1
            A_v, B_v = tl.associative_scan((alpha, beta), 1, _compose)
            v_next = B_v + A_v * carry_v[:, None]
            delta = m * (r + gamma * v_next - v)
            a = tl.where(ok, keep * (m * gamma_lam + 1.0 - m), 1.0)
            A_c, B_c = tl.associative_scan((a, delta), 1, _compose)
            c = B_c + A_c * carry_c[:, None]
            tl.store(adv_ptr + off, (m * c).to(adv_ptr.dtype.element_ty), mask=ok)
            tl.store(ret_ptr + off, (m * (c + v)).to(ret_ptr.dtype.element_ty), mask=ok)
            last = (j == BLOCK_T - 1)[None, :]
            carry_v = tl.sum(tl.where(last, v_next, 0.0), axis=1)
            carry_c = tl.sum(tl.where(last, c, 0.0), axis=1)


def _flag(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    return x.view(torch.uint8) if x.dtype == torch.bool else x


def gae_triton(
    rewards: torch.Tensor,
    values: torch.Tensor,
    mask: torch.Tensor,
    gamma: float,
    lam: float,
    *,
    dones: torch.Tensor | None = None,
    block_b: int = 4,
    block_t: int = 128,
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Raw GAE ``(advantages, returns)``, ``[B, T]`` in fp32 (fp64 for fp64 inputs), by the Triton kernel.

    ``mask``: loss mask (1 = trained token); ``dones``: 1 where a token ends its episode (default: none,
    one episode per row). Masked tokens are skipped (value and advantage carried across them) and give 0;
    see the module docstring for the recurrences. CUDA tensors, or CPU tensors under ``TRITON_INTERPRET=1``.
    ``block_t`` must be a power of two.
    """
    if rewards.dim() != 2:
        raise ValueError(f"expected [B, T] tensors, got rewards of shape {tuple(rewards.shape)}")
    shapes = {tuple(x.shape) for x in (rewards, values, mask) + (() if dones is None else (dones,))}
    if len(shapes) != 1:
        raise ValueError(f"rewards, values, mask (and dones) must share one [B, T] shape, got {sorted(shapes)}")
    if not (0.0 <= gamma <= 1.0 and 0.0 <= lam <= 1.0):
        raise ValueError(f"gamma and lam must lie in [0, 1], got gamma={gamma}, lam={lam}")
    if block_t < 1 or block_t & (block_t - 1) or block_b < 1 or block_b & (block_b - 1):
        raise ValueError(f"block_b and block_t must be powers of two, got {block_b}, {block_t}")
    dt = torch.float64 if torch.float64 in (rewards.dtype, values.dtype) else torch.float32
    B, T = rewards.shape
    r, v = rewards.contiguous(), values.contiguous()
    m = _flag(mask)
    d = torch.zeros(B, T, dtype=torch.uint8, device=r.device) if dones is None else _flag(dones)
    check_device(r, v, m, d)
    adv = torch.empty(B, T, dtype=dt, device=r.device)
    ret = torch.empty_like(adv)
    if B and T:
        _gae_kernel[(triton.cdiv(B, block_b),)](
            r, v, m, d, adv, ret, B, T, torch.tensor([gamma, gamma * lam], dtype=dt, device=r.device),
            BLOCK_B=block_b, BLOCK_T=block_t, ACC=tl.float64 if dt == torch.float64 else tl.float32,
        )
    return adv, ret
