"""Verifier for the Triton FlashAttention forward (impls/inference/flash_attention_triton.py).

Oracle: attention written out in fp64 -- the full score matrix, an explicit mask, ``softmax``, then
``@ V`` -- on the same (rounded) inputs. The kernel runs in Triton's CPU interpreter on the CPU device
(fp32 inputs and accumulators), compiled on CUDA (fp16 inputs, fp32 accumulators).
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from impls.scale.triton_support import HAVE_TRITON, WHY_NOT

pytestmark = pytest.mark.skipif(not HAVE_TRITON, reason=WHY_NOT or "Triton unavailable")


def naive_attention_fp64(q, k, v, causal: bool, scale: float):
    """softmax(Q K^T * scale + mask) V in fp64; mask[i, j] = -inf for j > i under ``causal`` (top-left)."""
    s = (q.double() @ k.double().transpose(-1, -2)) * scale
    if causal:
        Nq, Nk = s.shape[-2:]
        s = s.masked_fill(torch.ones(Nq, Nk, dtype=torch.bool, device=s.device).triu(1), float("-inf"))
    return torch.softmax(s, dim=-1) @ v.double(), torch.logsumexp(s, dim=-1)


def _kernel():
    from impls.inference import flash_attention_triton as FA  # looked up at call time (fault injection)

    return FA.flash_attention_triton


@st.composite
def attention_cases(draw):
    causal = draw(st.booleans())
    B = draw(st.integers(1, 2))
    H = draw(st.integers(1, 2))
    Nq = draw(st.integers(1, 80))
    Nk = Nq if causal else draw(st.integers(1, 80))
    D = draw(st.sampled_from([4, 16, 24, 64]))
    block_m = draw(st.sampled_from([16, 32]))
    block_n = draw(st.sampled_from([16, 32]))
    scale = draw(st.sampled_from([None, 0.5]))
    seed = draw(st.integers(0, 2**31 - 1))
    return causal, B, H, Nq, Nk, D, block_m, block_n, scale, seed


@pytest.mark.claim("kernels.flash-attention-triton.equals-naive")
def test_flash_forward_equals_naive_attention(evidence, device):
    cuda = device.type == "cuda"
    dtype = torch.float16 if cuda else torch.float32
    tol = 2e-3 if cuda else 2e-5  # fp16 inputs with fp32 accumulation on CUDA; fp32 throughout in the interpreter
    worst = {"out": 0.0, "lse": 0.0, "n": 0, "causal": 0}

    @settings(max_examples=min(settings().max_examples, 15))
    @given(attention_cases())
    def check(case):
        causal, B, H, Nq, Nk, D, bm, bn, scale, seed = case
        gen = torch.Generator().manual_seed(seed)
        q, k, v = (torch.randn(B, H, n, D, generator=gen).to(dtype) for n in (Nq, Nk, Nk))
        s = scale if scale is not None else 1.0 / math.sqrt(D)
        want, want_lse = naive_attention_fp64(q, k, v, causal, s)
        o, lse = _kernel()(q.to(device), k.to(device), v.to(device), causal=causal, scale=scale, block_m=bm,
                           block_n=bn, return_lse=True)
        assert o.dtype == dtype and o.shape == q.shape
        e_out = float((o.cpu().double() - want).abs().max())
        e_lse = float((lse.cpu().double() - want_lse).abs().max())
        assert e_out <= tol and e_lse <= tol * 10, (case, e_out, e_lse)
        worst["out"] = max(worst["out"], e_out)
        worst["lse"] = max(worst["lse"], e_lse)
        worst["n"] += 1
        worst["causal"] += int(causal)

    check()
    evidence["examples"] = worst["n"]
    evidence["causal_examples"] = worst["causal"]
    evidence["inputs"] = str(dtype)
    evidence["max_abs_err_output"] = worst["out"]
    evidence["max_abs_err_lse"] = worst["lse"]


@pytest.mark.claim("kernels.flash-attention-triton.equals-naive")
def test_flash_io_count_matches_the_tiling(evidence):
    """hbm_bytes follows the kernel's loop: K and V once per query tile, half the tiles under causal."""
    from impls.inference.flash_attention_triton import BLOCK_M, BLOCK_N, hbm_bytes

    N, d = 4096, 128
    full = hbm_bytes(N, d, bytes_per_element=1) - 4 * N
    tiles = N // BLOCK_M
    assert full == 2 * N * d + tiles * 2 * N * d  # Q + O, and K + V read by every query tile
    causal = hbm_bytes(N, d, causal=True, bytes_per_element=1) - 4 * N
    # query tile i reads keys 0 .. (i+1) BLOCK_M - 1 (BLOCK_M = BLOCK_N here): sum_i (i+1) BLOCK_M rows
    assert BLOCK_M == BLOCK_N
    assert causal == 2 * N * d + 2 * d * BLOCK_M * tiles * (tiles + 1) // 2
    evidence["elements_moved_N4096_d128"] = {"full": full, "causal": causal, "causal_over_full": causal / full}
