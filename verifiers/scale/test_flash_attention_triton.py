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
from verifiers.errors import max_abs_err

pytestmark = pytest.mark.skipif(not HAVE_TRITON, reason=WHY_NOT or "Triton unavailable")


def naive_attention_fp64(q, k, v, causal: bool, scale: float):
    """softmax(Q K^T * scale + mask) V in fp64; mask[i, j] = -inf for j > i + Nk - Nq under ``causal``
    (bottom-right: the last query sees every key). A row with no visible key: O = 0, lse = -inf."""
    s = (q.double() @ k.double().transpose(-1, -2)) * scale
    Nq, Nk = s.shape[-2:]
    if causal:
        i = torch.arange(Nq)[:, None]
        j = torch.arange(Nk)[None, :]
        s = s.masked_fill(j > i + (Nk - Nq), float("-inf"))
    empty = torch.isinf(s).all(-1, keepdim=True)
    p = torch.softmax(s.masked_fill(empty, 0.0), dim=-1).masked_fill(empty, 0.0)
    return p @ v.double(), torch.logsumexp(s, dim=-1)


def _kernel():
    from impls.inference import flash_attention_triton as FA  # looked up at call time (fault injection)

    return FA.flash_attention_triton


@st.composite
def attention_cases(draw):
    causal = draw(st.booleans())
    B = draw(st.integers(1, 2))
    H = draw(st.integers(1, 2))
    Nq = draw(st.integers(1, 80))
    # under causal, Nk < Nq (leading rows see nothing), = Nq and > Nq (a cache longer than the queries)
    Nk = draw(st.one_of(st.just(Nq), st.integers(1, 80)))
    D = draw(st.sampled_from([4, 16, 24, 64]))
    block_m = draw(st.sampled_from([16, 32]))
    block_n = draw(st.sampled_from([16, 32]))
    scale = draw(st.sampled_from([None, 0.5]))
    seed = draw(st.integers(0, 2**31 - 1))
    return causal, B, H, Nq, Nk, D, block_m, block_n, scale, seed


@pytest.mark.claim("kernels.flash-attention-triton.equals-naive")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["fp32", "fp16"])
def test_flash_forward_equals_naive_attention(evidence, device, dtype):
    if dtype == torch.float16 and device.type != "cuda":
        pytest.skip("fp16 products need a GPU (the interpreter multiplies fp16 tiles in fp16 numpy)")
    tol = 2e-5 if dtype == torch.float32 else 2e-3  # fp32: ieee products; fp16 inputs, fp32 accumulation
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
        e_out, e_lse = max_abs_err(o, want), max_abs_err(lse, want_lse)  # NaN-aware: a NaN row fails
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


def _round_to_tf32(x: torch.Tensor) -> torch.Tensor:
    """fp32 -> TF32 (10 explicit mantissa bits), round to nearest even, as the Tensor Cores read fp32 operands."""
    bits = x.float().contiguous().view(torch.int32).to(torch.int64)
    bias = ((bits >> 13) & 1) + 0xFFF
    return ((bits + bias) & ~0x1FFF).to(torch.int32).view(torch.float32)


@pytest.mark.claim("kernels.flash-attention-triton.equals-naive")
def test_tf32_operands_would_break_the_fp32_tolerance(evidence):
    """Why the wrapper asks for input_precision="ieee": attention whose two products take TF32-rounded
    operands (Q, K, then P, V; fp64 otherwise) misses fp64 attention by 7e-4 at d = 128, more than 25 times
    the 2e-5 the claim states for fp32 inputs (which the kernel meets with fp32 products)."""
    gen = torch.Generator().manual_seed(0)
    worst = 0.0
    for d, n in ((16, 64), (64, 256), (128, 256)):
        q, k, v = (torch.randn(1, 1, n, d, generator=gen) for _ in range(3))
        scale = 1.0 / math.sqrt(d)
        want, _ = naive_attention_fp64(q, k, v, False, scale)
        s = (_round_to_tf32(q).double() @ _round_to_tf32(k).double().transpose(-1, -2)) * scale
        p = torch.softmax(s, dim=-1)
        tf32 = _round_to_tf32(p.float()).double() @ _round_to_tf32(v).double()
        worst = max(worst, max_abs_err(tf32, want))
    assert worst > 25 * 2e-5, worst
    assert _round_to_tf32(torch.tensor([1 + 2**-11, 1 + 3 * 2**-11])).tolist() == [1.0, 1 + 4 * 2**-11]  # ties to even
    evidence.quote("TF32 products: max |error| against fp64 attention", quoted=7e-4, measured=worst, rel=0.1)


@pytest.mark.claim("kernels.flash-attention-triton.equals-naive")
def test_causal_is_aligned_bottom_right():
    """Constructed, not sampled: 3 queries against 5 keys (a chunk after a 2-token cache) and 5 queries against
    3 keys. Bottom-right: query i sees keys j <= i + Nk - Nq, so with Nk > Nq the first query already sees 3
    keys (top-left would give it 1), and with Nq > Nk the first two queries see none: O = 0, lse = -inf."""
    gen = torch.Generator().manual_seed(5)
    for nq, nk in ((3, 5), (5, 3)):
        q, k, v = (torch.randn(1, 1, n, 16, generator=gen) for n in (nq, nk, nk))
        o, lse = _kernel()(q, k, v, causal=True, block_m=16, block_n=16, return_lse=True)
        want, want_lse = naive_attention_fp64(q, k, v, True, 0.25)
        assert max_abs_err(o, want) <= 2e-5 and max_abs_err(lse, want_lse) <= 2e-4, (nq, nk)
        if nk > nq:   # query 0 averages keys 0..2 exactly
            w = torch.softmax((q[0, 0, 0].double() @ k[0, 0, :3].double().T) * 0.25, -1)
            assert max_abs_err(o[0, 0, 0], w @ v[0, 0, :3].double()) <= 2e-5
        else:
            assert torch.equal(o[0, 0, :2], torch.zeros(2, 16)) and bool(torch.isinf(lse[0, 0, :2]).all())
