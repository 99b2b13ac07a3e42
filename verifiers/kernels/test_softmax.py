"""Softmax kernels: against fp64 at ragged lengths, -inf, huge and constant rows, every dtype; the memory traffic
they issue (the interpreter meter); what a block-per-row reduction compiles to; the numerics of overflow and of
the online recurrence.

Oracles: ``torch.softmax`` in fp64; the meter (loads and stores the kernels issue, in order); ptxas's output for
sm_80/sm_90; numpy's float32/float16 arithmetic for the thresholds; a lane-by-lane emulation of the shuffles.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from verifiers.kernels import emulate as E

triton = pytest.importorskip("triton", reason="Triton has wheels for Linux x86-64/aarch64 only")

from impls.kernels import softmax as S  # noqa: E402
from verifiers.kernels import variants as V  # noqa: E402
from verifiers.kernels.meter import Meter  # noqa: E402

U32 = 2.0**-24
# bf16 to one ulp: Triton 3.9's interpreter truncates fp32 -> bf16 casts (kernels.interpreter.bf16); the GPU rounds
OUT_U = {torch.float32: 0.0, torch.float16: 2.0**-11, torch.bfloat16: 2.0**-7, torch.float64: 0.0}
TINY = {torch.float32: 2.0**-149, torch.float16: 2.0**-25, torch.bfloat16: 2.0**-134, torch.float64: 2.0**-149}


def _check(y: torch.Tensor, x: torch.Tensor, where: str) -> None:
    """y against the fp64 softmax: the first-order error of an fp32 evaluation, (|x-m| + D + 8) u32 p, plus the
    output's rounding; NaN exactly where the oracle has NaN (rows that are -inf everywhere)."""
    xd = x.double()
    p = torch.softmax(xd, -1)
    shift = (xd - xd.max(-1, keepdim=True).values).abs().nan_to_num(nan=0.0, posinf=0.0)
    tol = ((shift + x.shape[-1] + 8) * U32 + OUT_U[x.dtype]) * p + TINY[x.dtype]
    yd = y.double().cpu()
    assert y.dtype == x.dtype and y.shape == x.shape, where
    assert torch.equal(torch.isnan(yd), torch.isnan(p)), f"{where}: NaN where the oracle has none (or the reverse)"
    ok = ~torch.isnan(p)
    err = (yd - p).abs()
    assert bool((err[ok] <= tol[ok]).all()), f"{where}: max excess {float((err - tol)[ok].max()):.3g}"
    assert bool((yd[torch.isinf(x.cpu()) & ok] == 0).all()), f"{where}: a -inf logit got probability"


@st.composite
def matrices(draw):
    R = draw(st.integers(1, 4))
    D = draw(st.one_of(st.sampled_from([1, 2, 3, 15, 16, 17, 63, 65, 100, 257]), st.integers(1, 300)))
    gen = torch.Generator().manual_seed(draw(st.integers(0, 255)))
    kind = draw(st.sampled_from(["randn", "huge", "minus-inf", "constant", "all-minus-inf-row", "late-max"]))
    x = torch.randn(R, D, generator=gen) * draw(st.sampled_from([1.0, 10.0]))
    if kind == "huge":
        x = x * 1e4 + draw(st.sampled_from([0.0, 1e30, -1e30]))
    elif kind == "minus-inf":
        x[torch.rand(R, D, generator=gen) < 0.6] = -float("inf")
    elif kind == "constant":
        x[:] = draw(st.sampled_from([0.0, 88.0, -3e38, 1e4]))
    elif kind == "all-minus-inf-row":
        x[0] = -float("inf")
    elif kind == "late-max":
        x[:, : D // 2] = -float("inf")  # whole leading blocks of -inf, the maximum later
        x[:, -1] = 500.0
    return x


@pytest.mark.claim("softmax.triton-kernels.match-fp64")
@settings(max_examples=12)
@given(matrices(), st.sampled_from(["fused", "online", "three-pass"]),
       st.sampled_from([torch.float32, torch.float16, torch.bfloat16]), st.sampled_from([16, 64]))
def test_every_variant_matches_fp64(device, x, variant, dtype, block):
    x = x.to(dtype)  # values past fp16's range become +-inf: the oracle sees the same input
    y = S.softmax_rows(x.to(device), variant=variant, block=block)
    _check(y, x, f"{variant} {tuple(x.shape)} {dtype}")


@pytest.mark.claim("softmax.triton-kernels.match-fp64")
def test_long_rows_leading_shapes_and_bad_input(device):
    x = torch.randn(2, 3, 5000) * 3
    for variant in ("online", "three-pass", "auto"):
        _check(S.softmax_rows(x.to(device), variant=variant), x, variant)
    x = torch.randn(4, 4096)
    _check(S.softmax(x.to(device)), x, "kata wrapper")
    assert S.softmax_rows(torch.empty(0, 7)).shape == (0, 7)
    for bad, msg in ((dict(variant="two-pass"), "variant must be"), (dict(block=48), "power of two")):
        with pytest.raises(ValueError, match=msg):
            S.softmax_rows(torch.randn(2, 3), **bad)
    with pytest.raises(ValueError, match="do not fit"):
        S.softmax_rows(torch.randn(1, 5000), variant="fused")
    with pytest.raises(ValueError, match="floating-point"):
        S.softmax_rows(torch.ones(2, 3, dtype=torch.int32))


# ---------------------------------------------------------------------------------------------------------------
# memory traffic, counted


def _metered(x: torch.Tensor, variant: str, block: int = 64) -> Meter:
    y = torch.empty_like(x)
    kernel = {"fused": S.softmax_kernel, "online": S.softmax_online_kernel,
              "three-pass": S.softmax_three_pass_kernel}[variant]
    blk = triton.next_power_of_2(x.shape[1]) if variant == "fused" else block
    with Meter(x=x, y=y) as m:
        kernel[(x.shape[0],)](x, y, x.shape[1], x.stride(0), y.stride(0), BLOCK=blk)
    _check(y, x, variant)
    return m


@pytest.mark.claim("softmax.memory-transfers")
def test_transfers_per_element(device, evidence):
    if device.type != "cpu":
        pytest.skip("the meter reads Triton's interpreter")
    R, D = 3, 300
    x = torch.randn(R, D)
    per = {}
    for variant, quoted in (("fused", 2), ("online", 3), ("three-pass", 4)):
        m = _metered(x, variant)
        assert m.stray == 0 and m.stores["y"] == R * D
        moved = (m.loads["x"] + m.stores["y"]) * 4
        assert moved == S.bytes_moved(R, D, variant, 4), variant  # the model the entry quotes is what is issued
        per[variant] = (m.loads["x"] + m.stores["y"]) / (R * D)
        evidence.quote(f"{variant}: element transfers per element", quoted=quoted, measured=per[variant], rel=1e-9)
    evidence["reads_writes"] = {"fused": "1 read + 1 write", "online": "2 reads + 1 write",
                                "three-pass": "3 reads + 1 write"}


@pytest.mark.claim("softmax.online-one-pass")
def test_statistics_come_from_one_read(device, evidence):
    if device.type != "cpu":
        pytest.skip("the meter reads Triton's interpreter")
    R, D = 3, 300
    x = torch.randn(R, D) * 5
    m = _metered(x, "online", block=64)

    def statistics_reads(meter, row):
        """The loads of ``row`` before its first output block is loaded for writing (the last load before the
        first store belongs to the output sweep)."""
        ev = [e for e in meter.events if e[1] == (row, 0, 0)]
        first_store = next(i for i, e in enumerate(ev) if e[0] == "store")
        loads = [e[3] for e in ev[:first_store] if e[0] == "load"]
        return np.concatenate(loads[:-1])

    for row in range(R):
        # the maximum and the normaliser are known once every element of the row has been read exactly once
        assert np.array_equal(np.sort(statistics_reads(m, row)), row * D + np.arange(D)), row
    m3 = _metered(x, "three-pass", block=64)
    twice = np.sort(statistics_reads(m3, 0))
    assert np.array_equal(twice, np.repeat(np.arange(D), 2))  # the three-pass kernel reads the row twice first
    evidence["reads_before_the_first_write"] = {"online": D, "three-pass": 2 * D, "D": D}


@pytest.mark.claim("softmax.reduction-shuffles")
def test_block_per_row_reduces_with_shuffles_then_shared_memory(built, evidence):
    block, warp = built["softmax.block.80"], built["softmax.warp.80"]
    rows = {}
    for key, c in (("4 warps per row", block), ("1 warp per row", warp)):
        bfly = len([1 for line in c.ptx.splitlines() if "shfl.sync.bfly" in line])
        shared = len([1 for line in c.ptx.splitlines() if "st.shared" in line])
        bars = len([1 for line in c.ptx.splitlines() if "bar.sync" in line or "barrier.sync" in line])
        rows[key] = {"shfl.sync.bfly": bfly, "st.shared": shared, "bar.sync": bars, "registers": c.registers}
    evidence["compiled_sm80"] = rows
    # two reductions per row (max, then sum): 5 butterfly steps inside each warp, then across the 4 warps
    assert rows["4 warps per row"]["shfl.sync.bfly"] == 2 * (5 + 2)
    assert rows["4 warps per row"]["st.shared"] > 0 and rows["4 warps per row"]["bar.sync"] > 0
    assert rows["1 warp per row"]["shfl.sync.bfly"] == 2 * 5
    assert rows["1 warp per row"]["st.shared"] == 0 and rows["1 warp per row"]["bar.sync"] == 0
    assert warp.shared == 0


@pytest.mark.claim("softmax.float4-boundary")
def test_row_starts_and_tails_break_float4(built, evidence):
    misaligned = {}
    for D in range(1, 65):
        starts = [r * D * 4 for r in range(8)]
        misaligned[D] = sum(s % 16 != 0 for s in starts)
        # a float4 at every 4th column: the last one runs past the row end unless D % 4 == 0
        overrun = (-(-D // 4) * 4) - D
        assert (misaligned[D] == 0) == (D % 4 == 0) and (overrun == 0) == (D % 4 == 0)
    assert misaligned[1023 % 64 or 64] > 0
    assert sum(1 for r in range(1000) if (r * 1023 * 4) % 16) == 750  # 3 rows in 4 start off a 16-byte boundary
    # Triton does the guard: 128-bit loads only when it knows the row stride is a multiple of 16 elements
    assert built["softmax.block.80"].load_widths() == {128: 2}
    assert built["softmax.unaligned.80"].load_widths() == {32: 8}
    evidence["rows_misaligned_of_1000_D1023"] = 750
    evidence["compiled_loads"] = {"stride divisible by 16": "2 x 128-bit per thread", "unknown": "8 x 32-bit"}


@pytest.mark.claim("softmax.gpu-matches-cpu")
def test_a_right_kernel_is_not_bitwise_the_cpu(device, built, evidence):
    if device.type != "cpu":
        pytest.skip("compares the interpreter with the CPU op")
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(64, 1000, generator=gen) * 4
    y = S.softmax_rows(x)
    cpu = torch.softmax(x, -1)
    differ = int((y != cpu).sum())
    assert differ > 0
    _check(y, x, "kernel")
    _check(cpu, x, "torch CPU")
    i = tuple(int(v) for v in torch.nonzero(y != cpu)[0])
    ulps = int((y.view(torch.int32) - cpu.view(torch.int32)).abs().max())
    evidence["counterexample"] = {"shape": [64, 1000], "elements that differ": f"{differ} of {x.numel()}",
                                  "max ulps apart": ulps, "example": {"index": list(i), "kernel": float(y[i]),
                                                                      "torch CPU": float(cpu[i])}}
    # and on the GPU exp is an approximation instruction: x*log2(e), then ex2.approx
    assert "ex2.approx" in built["softmax.block.80"].ptx
    assert any(op.startswith("MUFU.EX2") for op in built["softmax.block.80"].sass_opcodes())


@pytest.mark.claim("softmax.fp16-overflow")
def test_fp16_range_and_exp_threshold(evidence):
    fmax = float(np.finfo(np.float16).max)
    evidence.quote("largest fp16", quoted=65504, measured=fmax, abs=0)
    # the smallest x whose fp16 exp is inf: e^x rounds to inf from 65520 = 65504 + half an ulp (16)
    lo, hi = 11.0, 11.2
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if np.isfinite(np.float16(math.exp(mid))) else (lo, mid)
    evidence.quote("fp16 exp overflows above", quoted=11.09, measured=hi, digits=2)
    assert math.isclose(hi, math.log(65520), rel_tol=1e-9)
    assert np.isfinite(np.float16(math.exp(11.0))) and not np.isfinite(np.float16(math.exp(11.1)))
    f32 = float(np.log(np.finfo(np.float32).max))
    evidence.quote("fp32 exp overflows above", quoted=88.72, measured=f32, digits=2)
    # a kernel that loads fp16 and computes exp in fp32 (as Triton's tl.exp on a .to(tl.float32)) has fp32's range
    x = torch.tensor([[12.0, 11.0, -3.0]]).half()
    _check(S.softmax_rows(x), x, "fp16 logits above 11")


# ---------------------------------------------------------------------------------------------------------------
# the coding question


@pytest.mark.claim("coding.softmax-kernel.online-equals-two-pass")
@settings(max_examples=30)
@given(st.lists(st.floats(-80, 80, width=32), min_size=2, max_size=64), st.sampled_from([1, 4, 16]))
def test_online_recurrence_ends_at_the_two_pass_statistics(xs, lanes):
    x = np.array(xs, dtype=np.float32)
    m, d = np.full(lanes, -np.inf, np.float32), np.zeros(lanes, np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        for start in range(0, len(x), lanes):
            blk = np.full(lanes, -np.inf, np.float32)
            chunk = x[start:start + lanes]
            blk[:len(chunk)] = chunk
            m_new = np.maximum(m, blk)
            safe = np.where(m_new == -np.inf, np.float32(0), m_new)
            d = d * np.exp(m - safe) + np.exp(blk - safe)
            m = m_new
        M = m.max()
        D = np.float32(np.sum(np.where(d > 0, d * np.exp(m - M), 0), dtype=np.float32))
    two_pass = float(np.sum(np.exp(x.astype(np.float64) - float(x.max()))))
    assert M == x.max()  # the maximum is exactly the same
    assert abs(float(D) - two_pass) <= (len(x) + 8) * 4 * U32 * two_pass  # the normaliser, to rounding


@pytest.mark.claim("coding.softmax-kernel.online-equals-two-pass")
def test_not_bitwise_and_not_without_the_guard(device, evidence):
    # bitwise: the online and the fused kernels give different last bits on ordinary rows
    x = torch.randn(16, 1024, generator=torch.Generator().manual_seed(0)) * 3
    fused, online = S.softmax_rows(x, variant="fused"), S.softmax_rows(x, variant="online", block=64)
    differ = int((fused != online).sum())
    assert differ > 0
    _check(fused, x, "fused")
    _check(online, x, "online")
    # the guard: a first block of -inf makes m = -inf and e^(m - m') = e^(-inf + inf) = NaN without it
    if device.type != "cpu":
        pytest.skip("the unguarded variant runs in the interpreter here")
    z = torch.randn(2, 48)
    z[:, :16] = -float("inf")
    bad = V.softmax_online_unguarded(z, block=16)
    good = S.softmax_rows(z, variant="online", block=16)
    assert torch.isnan(bad).all() and not torch.isnan(good).any()
    _check(good, z, "guarded")
    evidence["bitwise_differences_fused_vs_online"] = f"{differ} of {x.numel()}"
    evidence["counterexample"] = {"row": "16 x -inf, then 32 finite logits, block 16",
                                  "without the guard": "NaN everywhere", "with it": "the fp64 softmax"}


@pytest.mark.claim("coding.softmax-kernel.overflow-88")
def test_exp_and_the_sum_overflow(device, evidence):
    f32max = np.finfo(np.float32).max
    assert np.isfinite(np.exp(np.float32(88.72))) and not np.isfinite(np.exp(np.float32(88.73)))
    evidence.quote("fp32 exp overflows above", quoted=88.72, measured=float(np.log(f32max)), digits=2)
    evidence.quote("fp32 exp overflows above (the statement's figure)", quoted=88.7, measured=float(np.log(f32max)),
                   digits=1)
    for D, quoted in ((4096, 80.4), (128, 83.9)):
        limit = float(np.log(f32max)) - math.log(D)
        evidence.quote(f"sum of D={D} equal logits overflows above", quoted=quoted, measured=limit, digits=1)
    if device.type != "cpu":
        pytest.skip("the naive variant runs in the interpreter here")
    x = torch.full((1, 4096), 81.0)  # e^81 = 1.5e35 is finite; 4096 of them are 6.1e38 > FLT_MAX
    naive = V.softmax_naive(x)
    assert np.isfinite(np.exp(np.float32(81.0))) and bool((naive == 0).all())
    _check(S.softmax_rows(x), x, "with the max subtracted")
    evidence["counterexample"] = {"row": "4096 logits of 81.0", "naive": "every probability 0 (inf denominator)",
                                  "with the max subtracted": "1/4096 each"}


@pytest.mark.claim("coding.softmax-kernel.butterfly-all-lanes")
@settings(max_examples=60)
@given(st.lists(st.floats(-(2.0**100), 2.0**100, width=32), min_size=32, max_size=32))
def test_butterfly_leaves_the_total_in_every_lane(xs):
    v = np.array(xs, dtype=np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        s = E.shfl_xor_reduce(v)
        mx = E.shfl_xor_reduce(v, np.maximum)
    assert len(set(s.view(np.int32).tolist())) == 1 or np.isnan(s).all()  # bitwise the same in all 32 lanes
    assert (mx == v.max()).all()
    exact = math.fsum(float(t) for t in v)
    if np.isfinite(s[0]):
        assert abs(float(s[0]) - exact) <= 5 * 2.0**-24 * float(np.abs(v.astype(np.float64)).sum()) * 1.0001


@pytest.mark.claim("coding.softmax-kernel.block-threads-limit")
def test_a_block_handles_rows_longer_than_its_threads(built, device, evidence):
    c = built["softmax.block.80"]
    threads = int(c.ptx.split(".reqntid", 1)[1].split()[0].rstrip(","))
    assert threads == 128 == c.threads
    per_thread = sum(op.bits // 32 * n for op, n in c.loads.items() if op.kind == "ld.global")
    assert per_thread * threads == 1024  # each thread loads 8 of the row's 1024 elements (two float4)
    for D in (1000, 1024):
        x = torch.randn(3, D)
        _check(S.softmax_rows(x.to(device), variant="fused", num_warps=4), x, f"D={D} on 128 threads")
    x = torch.randn(2, 20000)
    _check(S.softmax_rows(x.to(device), variant="online", block=1024), x, "D=20000, one block of 1024 lanes")
    evidence["threads_per_block"] = threads
    evidence["elements_per_thread"] = per_thread
