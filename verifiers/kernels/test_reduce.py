"""Reductions: the two-stage kernel against fp64 at ragged sizes and every dtype, its traffic (the meter), what the
block reduction compiles to, Harris's addressing schemes step by step, the last warp without a barrier, the order
atomics add in, the rounding bounds of tree and loop, and the shuffles lane by lane.

Oracles: fp64 sums (``math.fsum``) and exact rationals (``impls/gpu/fpsum.py``); the interpreter meter; ptxas and
nvdisasm's output; the shared-memory bank model and SIMT enumerator of impls/gpu; emulations of the shuffles.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from impls.gpu import banks, fpsum
from impls.gpu.simt import reduction_outcomes
from verifiers.kernels import emulate as E

triton = pytest.importorskip("triton", reason="Triton has wheels for Linux x86-64/aarch64 only")

from impls.kernels import reduce as R  # noqa: E402
from verifiers.kernels import variants as V  # noqa: E402
from verifiers.kernels.meter import Meter  # noqa: E402

U32 = 2.0**-24


def _sum_bound(x: torch.Tensor, acc_u: float) -> float:
    return (x.numel() + 2) * acc_u * float(x.double().abs().sum())


@pytest.mark.claim("reduce.triton-kernel.matches-fp64")
@settings(max_examples=10)
@given(st.one_of(st.sampled_from([1, 2, 15, 16, 17, 255, 257, 1000]), st.integers(1, 3000)),
       st.sampled_from([(16, 16), (16, 64), (64, 64), (32, 96)]),
       st.sampled_from([torch.float32, torch.float16, torch.bfloat16, torch.float64]),
       st.sampled_from(["randn", "negative", "with -inf", "huge"]), st.integers(0, 255))
def test_two_stage_matches_fp64(device, n, tiling, dtype, kind, seed):
    block, chunk = tiling
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n, generator=gen)
    if kind == "negative":
        x = -1.0 - x.abs()
    elif kind == "with -inf":
        x[torch.rand(n, generator=gen) < 0.3] = -float("inf")
    elif kind == "huge":
        x = (x * 3e4).clamp(-6e4, 6e4)  # large, and still finite in fp16
    x = x.to(dtype)
    mx, parts = R.reduce_two_stage(x.to(device), "max", block=block, chunk=chunk)
    assert float(mx) == float(x.double().max()), (n, tiling, dtype, kind)  # a max is exact
    assert parts.shape == (-(-n // chunk),)
    if kind != "with -inf":
        s, _ = R.reduce_two_stage(x.to(device), "sum", block=block, chunk=chunk)
        acc_u = 2.0**-53 if dtype == torch.float64 else U32
        want = math.fsum(x.double().tolist())
        # the kernel's order, not any order: chunk/block additions per lane and a tree over the block's lanes, then
        # the same over the partials in one program (lanes of block2, ceil(programs/block2) additions each)
        programs = -(-n // chunk)
        block2 = min(block, 1 << (programs - 1).bit_length()) if programs > 16 else 16
        depth = chunk // block + math.ceil(math.log2(block)) + -(-programs // block2) + math.ceil(math.log2(block2)) + 2
        bound = depth * acc_u * float(x.double().abs().sum())
        assert bound < _sum_bound(x, acc_u) or n < 64  # tighter than the any-order bound the katas must allow
        assert math.isfinite(float(s)) and abs(float(s) - want) <= bound, (n, tiling, dtype, kind)


@pytest.mark.claim("reduce.triton-kernel.matches-fp64")
def test_kata_wrapper_atomic_variant_traffic_and_bad_input(device, evidence):
    x = torch.randn(50001)
    want = math.fsum(x.double().tolist())
    for got in (R.reduce(x.to(device), "sum"), R.reduce_atomic(x.to(device))):
        assert got.dtype == torch.float32 and abs(float(got) - want) <= _sum_bound(x, U32)
    assert float(R.reduce(x.to(device), "max")) == float(x.max())
    assert float(R.reduce(torch.ones(1).to(device), "sum")) == 1.0
    for bad, msg in (((torch.ones(2, 2), "sum"), "vector"), ((torch.ones(3), "mean"), "op must be")):
        with pytest.raises(ValueError, match=msg):
            R.reduce(*bad)
    with pytest.raises(ValueError, match="empty"):
        R.reduce(torch.ones(0), "max")
    with pytest.raises(ValueError, match="multiple of block"):
        R.reduce_two_stage(torch.ones(10), block=64, chunk=100)
    if device.type != "cpu":
        return
    n, chunk = 10000, 1024
    xs, parts, out = torch.randn(n), torch.empty(-(-n // chunk)), torch.empty(1)
    with Meter(x=xs, parts=parts, out=out) as m:
        R.reduce_kernel[(parts.numel(),)](xs, parts, n, chunk, IS_MAX=False, BLOCK=256)
        R.reduce_kernel[(1,)](parts, out, parts.numel(), parts.numel(), IS_MAX=False, BLOCK=16)
    assert (m.load_counts("x") == 1).all() and m.stray == 0
    assert m.bytes() == R.bytes_moved(n, 4, chunk=chunk)
    evidence["bytes_per_element_n10000"] = m.bytes() / n


@pytest.mark.claim("reduce.triton-kernel.matches-fp64")
def test_the_kernel_reduces_exactly_its_chunk(device):
    """The kernel's contract for any chunk, not only the wrappers' multiples of the block: program p reduces
    x[p*chunk : min((p+1)*chunk, n)] and nothing of its neighbour's chunk."""
    n, chunk = 1000, 100
    x = torch.arange(n, dtype=torch.float32).to(device)  # integers: every partial sum is exact
    parts = torch.empty(10, device=device)
    R.reduce_kernel[(10,)](x, parts, n, chunk, IS_MAX=False, BLOCK=64)
    want = [float(sum(range(p * chunk, (p + 1) * chunk))) for p in range(10)]
    assert parts.cpu().tolist() == want
    R.reduce_kernel[(10,)](x, parts, n, chunk, IS_MAX=True, BLOCK=64)
    assert parts.cpu().tolist() == [float((p + 1) * chunk - 1) for p in range(10)]


@pytest.mark.claim("reduce.global-sync")
def test_one_launch_with_atomics_is_another_way(device, evidence):
    x = torch.randn(100_003)
    want = math.fsum(x.double().tolist())
    got = float(R.reduce_atomic(x.to(device), block=1024))
    assert abs(got - want) <= _sum_bound(x, U32)
    launches = {"two-stage": 2, "atomic": 1}
    evidence["launches"] = launches
    evidence["atomic_sum_error"] = abs(got - want)


@pytest.mark.claim("reduce.interleaved-divergence")
def test_harris_addressing_step_by_step(evidence):
    table = {}
    for kernel in (1, 2, 3):
        steps = E.reduction_steps(kernel, block=256)
        divergent = sum(1 for st_ in steps for w in st_["warps"] if 0 < w["active"] < 32)
        issues = sum(1 for st_ in steps for w in st_["warps"] if w["active"])  # warps that execute the add
        worst = max(banks.conflict_degree(w["addresses"]) for st_ in steps for w in st_["warps"] if w["active"])
        late = [st_["s"] for st_ in steps if any(0 < w["active"] < 32 for w in st_["warps"])]
        table[kernel] = {"divergent warp-steps": divergent, "warp issues of the add": issues,
                         "worst bank conflict": worst, "steps with a divergent warp (s)": late}
    evidence["block_256"] = {f"kernel {k}": v for k, v in table.items()}
    assert table[1]["divergent warp-steps"] > table[2]["divergent warp-steps"]
    assert table[1]["warp issues of the add"] == 47 and table[2]["warp issues of the add"] == 12
    assert table[1]["divergent warp-steps"] == 47 and table[2]["divergent warp-steps"] == 5
    assert table[3]["warp issues of the add"] == 12
    # the strided index of kernel 2 removes most divergence but conflicts in shared memory; sequential does not
    evidence.quote("kernel 2's worst bank conflict (ways)", quoted=8, measured=table[2]["worst bank conflict"],
                   abs=0)
    assert table[3]["worst bank conflict"] == 1
    # and every version still diverges in its last five steps, inside one warp (fewer than 32 active lanes)
    assert table[2]["steps with a divergent warp (s)"] == [8, 16, 32, 64, 128]
    assert table[3]["steps with a divergent warp (s)"] == [16, 8, 4, 2, 1]


@pytest.mark.claim("reduce.last-warp-lockstep")
def test_the_unrolled_last_warp_without_syncwarp(evidence):
    values = [1, 10, 100, 1000, 10**4, 10**5, 10**6, 10**7]
    right = sum(values)
    lock = reduction_outcomes(values, sync="lockstep")
    none = reduction_outcomes(values, sync="none")
    synced = reduction_outcomes(values, sync="syncwarp")
    assert lock == {right} and synced == {right}
    wrong = sorted(none - {right})
    assert wrong, "independent thread scheduling should allow a wrong sum"
    evidence["counterexample"] = {"values": values, "right": right, "a result without __syncwarp": wrong[0],
                                  "distinct results without __syncwarp": len(none)}


@pytest.mark.claim("reduce.shuffles-beat-shared")
def test_the_compiler_reduces_a_warp_with_shuffles(built, evidence):
    one, four = built["reduce.warp.80"], built["reduce.80"]
    rows = {}
    for name, c in (("1 warp", one), ("4 warps", four)):
        sass = c.sass_opcodes()
        rows[name] = {"SHFL.BFLY": sum(v for op, v in sass.items() if op.startswith("SHFL.BFLY")),
                      "STS": sum(v for op, v in sass.items() if op.startswith("STS")),
                      "LDS": sum(v for op, v in sass.items() if op.startswith("LDS")),
                      "BAR": sum(v for op, v in sass.items() if op.startswith("BAR")),
                      "shared_bytes": c.shared}
    evidence["compiled_sm80_sass"] = rows
    assert rows["1 warp"]["SHFL.BFLY"] == 5 and rows["1 warp"]["STS"] == rows["1 warp"]["BAR"] == 0
    assert rows["4 warps"]["SHFL.BFLY"] == 5 + 2 and rows["4 warps"]["STS"] >= 1 and rows["4 warps"]["BAR"] >= 1


@pytest.mark.claim("reduce.atomic-deterministic")
def test_the_order_atomics_arrive_in_changes_the_sum(device, evidence):
    if device.type != "cpu":
        pytest.skip("reads the stage-1 partials in the interpreter")
    x = torch.randn(8 * 1024, generator=torch.Generator().manual_seed(7)) * 1000
    _, parts = R.reduce_two_stage(x, "sum", block=1024, chunk=1024)  # 8 programs, 8 partials
    p = parts.numpy()
    results = set()
    for order in itertools.permutations(range(len(p))):  # every order the 8 atomic adds can arrive in
        acc = np.float32(0)
        for i in order:
            acc = np.float32(acc + p[i])
        results.add(float(acc))
    assert len(results) > 1
    again = {float(R.reduce_two_stage(x, "sum", block=1024, chunk=1024)[0]) for _ in range(3)}
    assert len(again) == 1  # the two-stage kernel: one order, one answer
    tiny = [np.float32(1e8), np.float32(1.0), np.float32(-1e8)]
    sums = {float(np.float32(np.float32(tiny[i] + tiny[j]) + tiny[k])) for i, j, k in itertools.permutations(range(3))}
    assert sums == {0.0, 1.0}
    evidence["distinct_fp32_sums_over_8_factorial_orders"] = len(results)
    evidence["counterexample"] = {"partials": [1e8, 1.0, -1e8], "(1e8 + 1) - 1e8": 0.0, "(1e8 - 1e8) + 1": 1.0}


# ---------------------------------------------------------------------------------------------------------------
# the coding question


@pytest.mark.claim("coding.reduce-kernel.error-bounds")
def test_tree_and_loop_bounds(evidence):
    u = fpsum.gamma(1, "fp32")  # γ_1 = u/(1-u)
    n = 1024
    # constructed: 1 followed by n-1 values of u = 2^-24; each one is a tie against the running sum of the loop
    xs = [Fraction(1)] + [Fraction(1, 2**24)] * (n - 1)
    exact = fpsum.exact(xs)
    total_abs = sum(abs(v) for v in xs)
    seq_err = abs(Fraction(fpsum.sequential(xs, "fp32")) - exact)
    pair_err = abs(Fraction(fpsum.pairwise(xs, "fp32")) - exact)
    assert seq_err <= fpsum.gamma(n - 1, "fp32") * total_abs
    assert pair_err <= fpsum.gamma(math.ceil(math.log2(n)), "fp32") * total_abs
    # the loop's error reaches most of its bound; the tree's stays under its much smaller one
    assert seq_err >= Fraction(1, 2) * (n - 1) * Fraction(1, 2**24) * total_abs / (1 + (n - 1) * Fraction(1, 2**24))
    assert pair_err < seq_err / 100
    rng = np.random.default_rng(0)
    for _ in range(5):  # and random inputs never exceed either bound
        ys = [Fraction(float(np.float32(v))) for v in rng.standard_normal(300) * 10]
        e, t = fpsum.exact(ys), sum(abs(v) for v in ys)
        assert abs(Fraction(fpsum.sequential(ys, "fp32")) - e) <= fpsum.gamma(299, "fp32") * t
        assert abs(Fraction(fpsum.pairwise(ys, "fp32")) - e) <= fpsum.gamma(9, "fp32") * t
    evidence["constructed_n1024"] = {"loop error / (u sum|x|)": float(seq_err / (u * total_abs)),
                                     "tree error / (u sum|x|)": float(pair_err / (u * total_abs))}


@pytest.mark.claim("coding.reduce-kernel.zero-padding")
def test_zero_padding_breaks_max(device, evidence):
    if device.type != "cpu":
        pytest.skip("the variant runs in the interpreter here")
    x = -1.0 - torch.rand(1000, generator=torch.Generator().manual_seed(2)) * 5  # 1000: not a multiple of 1024
    wrong = float(V.reduce_max_zero_padded(x))
    right = float(R.reduce(x, "max"))
    assert wrong == 0.0 and right == float(x.max()) < 0
    assert float(V.reduce_max_zero_padded(x.abs())) == float(x.abs().max())  # positive data hides the bug
    evidence["counterexample"] = {"x": "1000 values in [-6, -1]", "padded with 0": wrong, "padded with -inf": right}


@pytest.mark.claim("coding.reduce-kernel.shfl-down-lane0")
@settings(max_examples=60)
@given(st.lists(st.integers(-1000, 1000), min_size=32, max_size=32))
def test_shfl_down_leaves_the_total_in_lane_0(values):
    v = np.array(values, dtype=np.float32)  # integers: every sum is exact in fp32, so lane 0 must be the total
    out = E.shfl_down_reduce(v)
    assert float(out[0]) == float(sum(values))
    assert float(E.shfl_down_reduce(v, np.maximum)[0]) == float(max(values))
    # the other lanes hold partial or doubled-up sums: lane 31 only ever adds itself
    assert float(out[31]) == 32.0 * values[31]


@pytest.mark.claim("coding.reduce-kernel.shfl-down-lane0")
def test_lane_31_holds_32_times_its_own(evidence):
    v = np.arange(1, 33, dtype=np.float32)
    out = E.shfl_down_reduce(v)
    assert float(out[0]) == float(v.sum())
    evidence.quote("lane 31 over its own value", quoted=32, measured=float(out[31]) / float(v[31]), rel=0)
    evidence["lanes"] = {"0": float(out[0]), "31": float(out[31]), "16": float(out[16])}
