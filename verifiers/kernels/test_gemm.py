"""GEMM: what each tiling level loads (the model of impls/kernels/gemm_model.py against a loop-by-loop emulation and
against the loads the Triton kernel issues in the interpreter), the kernel against fp64, and what it compiles to.

Oracles: ``verifiers/kernels/emulate.py::gemm`` (a CUDA-style program run element by element, computing C while
it counts), the interpreter meter (``meter.py``: every address a ``tl.load`` lets through), ``A.double() @
B.double()``, the coalescing model of impls/gpu (sectors per warp instruction), and ptxas/cuobjdump's reports
of the compiled kernel.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from impls.gpu.coalescing import warp_access
from impls.gpu.occupancy import occupancy
from impls.kernels import gemm_model as G
from verifiers.kernels import emulate as E

triton = pytest.importorskip("triton", reason="Triton has wheels for Linux x86-64/aarch64 only")

from impls.kernels import matmul as MM  # noqa: E402
from verifiers.kernels.meter import Meter  # noqa: E402

A100, H100 = G.MACHINES["A100"], G.MACHINES["H100"]
U32 = 2.0**-24

TILINGS = st.sampled_from([G.NAIVE, G.shared(4), G.shared(8, bk=4), G.Tiling("register", 8, 16, 4, 2, 4, 4),
                           G.Tiling("register", 16, 8, 8, 4, 2, 2), G.Tiling("register", 16, 16, 4, 4, 4, 4)])


# ---------------------------------------------------------------------------------------------------------------
# the model against the emulation


@pytest.mark.claim("gemm.tiling.raises-intensity")
@settings(max_examples=25)
@given(st.integers(1, 23), st.integers(1, 23), st.integers(1, 23), TILINGS, st.integers(0, 2**16))
def test_model_counts_what_the_tiling_issues(M, N, K, t, seed):
    rng = np.random.default_rng(seed)
    A, B = rng.standard_normal((M, K)), rng.standard_normal((K, N))
    C, n = E.gemm(A, B, t)
    assert np.abs(C - A @ B).max() <= 1e-12 * max(1.0, np.abs(A).max() * np.abs(B).max() * K)  # a right program
    tr = G.traffic(M, N, K, t)
    assert (n["global_loads"], n["load_instructions"], n["shared_loads"], n["stores"]) == (
        tr.global_loads, tr.load_instructions, tr.shared_loads, tr.stores), (M, N, K, t)
    assert tr.flops == 2 * M * N * K
    # intensity is FLOPs over every byte the emulation moved: loads of A and B and the stores of C
    for b in (2, 4):
        assert tr.intensity(b) == 2 * M * N * K / ((n["global_loads"] + n["stores"]) * b)


@pytest.mark.claim("gemm.tiling.raises-intensity")
def test_each_level_raises_intensity(evidence):
    ai = []
    for name, t, quoted in (("naive", G.NAIVE, 0.25), ("shared 32x32", G.shared(32), 8),
                            ("register 128x128", G.register(), 32)):
        got = G.intensity(t, 4)
        evidence.quote(f"{name}, fp32 (FLOP/byte)", quoted=quoted, measured=got, rel=0.01)
        ai.append(got)
    assert ai == sorted(ai) and ai[0] < ai[1] < ai[2]
    # loads per output element of a 4096^3 GEMM: 2K, 2K/32, 2K/128
    K = 4096
    for name, t, per in (("naive", G.NAIVE, 2 * K), ("shared", G.shared(32), 2 * K / 32),
                         ("register", G.register(), 2 * K / 128)):
        assert G.traffic(K, K, K, t).per_output(K, K) == per, name
    evidence["loads_per_output_4096"] = {"naive": 2 * K, "shared 32": 2 * K // 32, "register 128": 2 * K // 128}


@pytest.mark.claim("gemm.tiling.thirty-minutes")
def test_shared_memory_tiling_alone_is_not_enough(evidence):
    ridge80, ridge90 = A100.ridge(False), H100.ridge(False)
    ai = G.intensity(G.shared(32), 4)
    evidence.quote("AI of 32x32 shared-memory tiling, fp32", quoted=8, measured=ai, rel=0.01)
    evidence.quote("A100 FP32 ridge (19.5 TFLOPS / 2.039 TB/s)", quoted=9.6, measured=ridge80, abs=0.05)
    evidence.quote("H100 FP32 ridge (67 TFLOPS / 3.35 TB/s)", quoted=20, measured=ridge90, abs=0.05)
    assert ai < ridge80 < ridge90  # memory-bound on both, before shared memory's own bandwidth is counted
    # shared-memory reads per FMA: 2 with one output per thread, (tm+tn)/(tm*tn) with a register tile
    M = N = K = 256
    for t, quoted in ((G.shared(32), 2), (G.register(), 0.25)):
        per_fma = G.traffic(M, N, K, t).shared_loads / (M * N * K)
        evidence.quote(f"shared-memory loads per FMA, {t.label}", quoted=quoted, measured=per_fma, rel=1e-9)
    evidence["register_tiling_fp32_intensity"] = G.intensity(G.register(), 4)


@pytest.mark.claim("gemm.naive.2k-loads")
def test_naive_issues_2k_loads_but_moves_fewer_sectors(evidence):
    for M, N, K in ((3, 5, 7), (8, 32, 16)):
        rng = np.random.default_rng(M)
        _, n = E.gemm(rng.standard_normal((M, K)), rng.standard_normal((K, N)), G.NAIVE)
        assert n["global_loads"] == 2 * K * M * N and (n["a_reads"] == N).all() and (n["b_reads"] == M).all()
    # one warp = 32 threads of one output row (threadIdx.x along j); at step k they read A[i,k] (one address) and
    # B[k, j..j+31] (consecutive): 1 + 4 sectors of 32 bytes for 32 outputs, against 2 x 32 x 4 bytes requested
    N, i, k = 4096, 5, 17
    a = warp_access([(i * N + k) * 4] * 32)
    b = warp_access([(k * N + j) * 4 for j in range(64, 96)])
    assert (a.sectors, b.sectors) == (1, 4)
    moved = 32 * (a.sectors + b.sectors)
    evidence.quote("bytes moved per requested byte, one warp step (%)", quoted=62.5, measured=100 * moved / 256,
                   rel=1e-9)
    evidence["sectors_per_warp_step"] = {"A (broadcast)": a.sectors, "B (coalesced)": b.sectors}


# ---------------------------------------------------------------------------------------------------------------
# tile sizes: shared memory per block (the compiler's figure), L2 and the launch order, occupancy


@pytest.mark.claim("gemm.tile-size.budget")
def test_compiled_shared_memory_is_the_staged_tiles(built, evidence):
    rows = {}
    for key, c in built.items():
        if not key.startswith("mm.") or ".fp32." in key:
            continue
        ce = dict(next(r for k, r in _requests().items() if k == key).constexprs)
        bm, bn, bk = ce["BLOCK_M"], ce["BLOCK_N"], ce["BLOCK_K"]
        bufs = c.num_stages - 1 if c.arch == 80 else c.num_stages  # cp.async ring on sm_80, TMA ring on sm_90
        assert c.shared == G.smem_bytes(bm, bn, bk, bufs, 2), (key, c.shared)
        rows[key] = {"tile": f"{bm}x{bn}x{bk}", "stages": c.num_stages, "shared_bytes": c.shared,
                     "registers": c.registers}
    assert len(rows) >= 10
    evidence["shared_per_block"] = rows
    # one wave of an 8192^3 fp16 GEMM with 128x128 tiles on an H100 (132 SMs): what it keeps live in L2
    S, T = 8192, 128
    tile_bytes = T * S * 2  # a row of A tiles or a column of B tiles: 2 MiB
    row_major = G.wave_tiles(S, S, T, T, H100.sms, group_m=1)
    grouped = G.wave_tiles(S, S, T, T, H100.sms, group_m=8)
    evidence["wave_row_major_MiB"] = sum(row_major) * tile_bytes / 2**20
    evidence["wave_grouped_MiB"] = sum(grouped) * tile_bytes / 2**20
    evidence.quote("operands of an 8192^3 fp16 GEMM (MiB)", quoted=256, measured=2 * S * S * 2 / 2**20, rel=1e-9)
    evidence.quote("one wave, row-major order (MiB)", quoted=134, measured=sum(row_major) * tile_bytes / 2**20,
                   rel=1e-9)
    evidence.quote("one wave, grouped by 8 rows (MiB)", quoted=50, measured=sum(grouped) * tile_bytes / 2**20,
                   rel=1e-9)
    assert 2 * S * S * 2 > H100.l2_bytes and sum(grouped) * tile_bytes <= H100.l2_bytes < sum(row_major) * tile_bytes


def _requests():
    from verifiers.kernels.builds import REQUESTS

    return REQUESTS


@pytest.mark.claim("gemm.tile-size.budget")
def test_the_kernel_walks_tiles_in_the_grouped_order(device):
    """The programs' order in the Triton kernel is the order the model counts: program p reads the A rows of the
    tile row and the B columns of the tile column wave_tiles assigns it."""
    if device.type != "cpu":
        pytest.skip("the meter reads Triton's interpreter")
    M, N, K, bm, bn = 80, 112, 16, 16, 16
    a, b = torch.randn(M, K), torch.randn(K, N)
    with Meter(a=a, b=b) as m:
        MM.matmul_tiled(a, b, block_m=bm, block_n=bn, block_k=16, group_m=2)
    tiles = {}  # program id -> (tile row, tile column), read off the addresses it loaded
    for (pid, _, _), idx in m.tiles_by_program["a"].items():
        tiles[pid] = (min(i // K for i in idx) // bm, min(j % N for j in m.tiles_by_program["b"][(pid, 0, 0)]) // bn)
    assert len(tiles) == -(-M // bm) * -(-N // bn) and len(set(tiles.values())) == len(tiles)
    for p in range(len(tiles)):  # the first p+1 programs cover the tile rows and columns the model counts
        rows = {tiles[q][0] for q in range(p + 1)}
        cols = {tiles[q][1] for q in range(p + 1)}
        assert (len(rows), len(cols)) == G.wave_tiles(M, N, bm, bn, p + 1, group_m=2), p


@pytest.mark.claim("gemm.occupancy-not-the-goal")
def test_production_tiles_run_at_low_occupancy(built, evidence):
    rows = []
    for i, (bm, bn, bk, g, w, s) in enumerate(MM.CONFIGS):
        c = built[f"mm.config{i}.80"]
        occ = occupancy("sm_80", 32 * w, c.registers, c.shared)
        ai = G.intensity(G.Tiling("shared", bm, bn, bk), 2)
        rows.append({"tile": f"{bm}x{bn}x{bk}", "warps": w, "registers": c.registers, "shared": c.shared,
                     "blocks_per_sm": occ.blocks, "warps_per_sm": occ.warps, "occupancy": occ.fraction,
                     "limited_by": occ.limited_by, "fp16_intensity": round(ai, 1)})
    evidence["configs_sm80"] = rows
    big, small = rows[0], rows[-1]
    evidence.quote("occupancy of the 128x256 tile (%)", quoted=12.5, measured=100 * big["occupancy"], rel=1e-9)
    evidence.quote("fp16 intensity of the 128x256 tile", quoted=85, measured=big["fp16_intensity"], abs=0.5)
    evidence.quote("fp16 intensity of the 32x64 tile", quoted=21, measured=small["fp16_intensity"], abs=0.5)
    evidence.quote("A100 Tensor-Core ridge", quoted=153, measured=A100.ridge(True), abs=0.5)
    assert big["occupancy"] < small["occupancy"] and big["fp16_intensity"] > small["fp16_intensity"]
    assert small["fp16_intensity"] < A100.ridge(True) < 2 * big["fp16_intensity"]
    w = G.waves(4096, 4096, 128, 256, A100.sms)
    evidence.quote("waves of 128x256 tiles, 4096^2 on 108 SMs", quoted=4.74, measured=w, digits=2)


# ---------------------------------------------------------------------------------------------------------------
# the Triton kernel


def _bound(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (a.shape[1] + 2) * U32 * (a.double().abs() @ b.double().abs())


@pytest.mark.claim("gemm.triton-kernel.matches-fp64")
@settings(max_examples=8)
@given(st.integers(1, 70), st.integers(1, 70), st.integers(1, 70), st.sampled_from([(16, 16, 16, 1), (32, 16, 32, 3),
                                                                                     (16, 32, 16, 8)]),
       st.sampled_from([torch.float32, torch.float16]), st.integers(0, 255))
def test_kernel_matches_fp64(device, M, N, K, tiles, dtype, seed):
    gen = torch.Generator().manual_seed(seed)
    a, b = torch.randn(M, K, generator=gen).to(dtype), torch.randn(K, N, generator=gen).to(dtype)
    bm, bn, bk, g = tiles
    c = MM.matmul_tiled(a.to(device), b.to(device), block_m=bm, block_n=bn, block_k=bk, group_m=g).cpu()
    assert c.dtype == dtype and c.shape == (M, N)
    want = a.double() @ b.double()
    tol = _bound(a, b) + (2.0**-11 * want.abs() + 2.0**-25 if dtype == torch.float16 else 0.0)
    err = (c.double() - want).abs()
    assert torch.isfinite(c).all() and bool((err <= tol).all()), (M, N, K, tiles, float((err - tol).max()))


@pytest.mark.claim("gemm.triton-kernel.matches-fp64")
def test_kernel_on_edges_and_empty(device):
    for M, N, K in ((1, 1, 1), (17, 33, 65), (64, 64, 64), (65, 1, 129)):
        a, b = torch.randn(M, K), torch.randn(K, N)
        c = MM.matmul(a.to(device), b.to(device)).cpu()
        assert bool(((c.double() - a.double() @ b.double()).abs() <= _bound(a, b)).all()), (M, N, K)
    assert MM.matmul(torch.randn(3, 0).to(device), torch.randn(0, 4).to(device)).abs().sum() == 0
    assert MM.matmul(torch.randn(0, 3).to(device), torch.randn(3, 4).to(device)).shape == (0, 4)
    t = torch.randn(40, 30)
    c = MM.matmul(t[:, ::2].to(device), torch.randn(15, 7).to(device))  # a strided view is made contiguous
    assert c.shape == (40, 7)
    for bad, msg in (((torch.randn(2, 3), torch.randn(4, 5)), "expected a"),
                     ((torch.randn(2, 3).double(), torch.randn(3, 5).double()), "fp16 or two fp32")):
        with pytest.raises(ValueError, match=msg):
            MM.matmul(*bad)
    with pytest.raises(ValueError, match="power of two"):
        MM.matmul_tiled(torch.randn(2, 2), torch.randn(2, 2), block_m=24)


@pytest.mark.claim("gemm.triton-kernel.matches-fp64")
@pytest.mark.cuda
def test_kernel_in_bf16_on_cuda(device):
    if device.type != "cuda":
        pytest.skip("bf16 tl.dot needs CUDA (see gemm.interpreter.bf16-dot)")
    a, b = torch.randn(300, 200, device=device).bfloat16(), torch.randn(200, 170, device=device).bfloat16()
    c = MM.matmul_tiled(a, b)
    want = a.double() @ b.double()
    tol = _bound(a.cpu(), b.cpu()).to(device) + 2.0**-8 * want.abs()
    assert bool(((c.double() - want).abs() <= tol).all())


@pytest.mark.claim("kernels.interpreter.bf16")
def test_the_interpreter_gets_bf16_wrong(device, evidence):
    """Canaries: Triton 3.9's interpreter computes tl.dot of bf16 tiles as if the bits were integers, and casts fp32
    to bf16 by truncation (the GPU's cvt.rn rounds to nearest). When an upgrade fixes either, this fails, and the
    CPU tests can tighten."""
    if device.type != "cpu":
        pytest.skip("about the interpreter")
    from verifiers.kernels.variants import cast

    evidence.quote("Triton version the claim is about", quoted=3.9,
                   measured=float(".".join(triton.__version__.split(".")[:2])), rel=0)

    a, b = torch.randn(16, 16).bfloat16(), torch.randn(16, 16).bfloat16()
    c = torch.empty(16, 16)
    kw = dict(BLOCK_M=16, BLOCK_N=16, BLOCK_K=16, GROUP_M=1, INPUT_PRECISION="ieee")
    MM.matmul_kernel[(1,)](a, b, c, 16, 16, 16, 16, 16, 16, **kw)
    err = float((c.double() - a.double() @ b.double()).abs().max())
    evidence["max_abs_error_bf16_dot"] = err
    assert err > 1e3, err
    h = torch.empty(16, 16)
    MM.matmul_kernel[(1,)](a.half(), b.half(), h, 16, 16, 16, 16, 16, 16, **kw)
    assert float((h.double() - a.half().double() @ b.half().double()).abs().max()) < 1e-3  # fp16 is right
    with pytest.raises(RuntimeError, match="bf16 matmul needs CUDA"):
        MM.matmul_tiled(a, b)
    x = torch.tensor([1.0 + 3 * 2.0**-9, -(1.0 + 3 * 2.0**-9), 1.0 + 2.0**-8 + 2.0**-20])
    got = cast(x, torch.bfloat16).float().tolist()
    nearest = x.bfloat16().float().tolist()  # torch rounds to nearest even, as cvt.rn.bf16.f32 does
    assert nearest == [1.0078125, -1.0078125, 1.0078125]
    assert got == [1.0, -1.0, 1.0], got  # truncated: one ulp (2^-7) low in magnitude
    evidence["fp32_to_bf16"] = {"value": 1.0 + 3 * 2.0**-9, "interpreter": got[0], "round to nearest": nearest[0]}


@pytest.mark.claim("gemm.triton-kernel.tensor-cores")
def test_tl_dot_compiles_to_tensor_core_instructions(built, evidence):
    want = {"mm.fp16.80": ("mma.sync", 16, 8, 16, "f16"), "mm.bf16.80": ("mma.sync", 16, 8, 16, "bf16"),
            "mm.fp16.90": ("wgmma", 64, 64, 16, "f16"), "mm.bf16.90": ("wgmma", 64, 64, 16, "bf16"),
            "mm.fp32.tf32.80": ("mma.sync", 16, 8, 8, "tf32"), "mm.fp16.big.90": ("wgmma", 64, 128, 16, "f16")}
    table = {}
    for key, (family, m, n, k, a) in want.items():
        c = built[key]
        got = {(x.family, x.m, x.n, x.k, x.a, x.acc) for x in c.tensor_core}
        assert got == {(family, m, n, k, a, "f32")}, (key, got)
        sass = c.sass_opcodes()
        hw = sum(v for op, v in sass.items() if op.startswith("HGMMA" if family == "wgmma" else "HMMA"))
        assert hw > 0, (key, "no Tensor-Core instruction in the SASS")
        table[key] = {"ptx": sorted(x.instruction for x in c.tensor_core), "sass_mma": hw, "registers": c.registers,
                      "shared_bytes": c.shared, "spill_bytes": c.spill_stores, "load_bits": c.load_widths()}
    ieee = built["mm.fp32.ieee.80"]
    assert ieee.tensor_core == () and not any(op.startswith("HMMA") for op in ieee.sass_opcodes())
    assert ieee.sass_opcodes()["FFMA"] > 0
    table["mm.fp32.ieee.80"] = {"ptx": [], "registers": ieee.registers, "spill_bytes": ieee.spill_stores}
    for key in ("mm.fp16.80", "mm.fp16.90"):  # 128-bit loads of the 16-byte-aligned tiles
        assert set(built[key].load_widths()) == {128}, built[key].load_widths()
    evidence["compiled"] = table


# ---------------------------------------------------------------------------------------------------------------
# the coding question: reads per element, barriers, edge tiles, bitwise equality


@pytest.mark.claim("coding.tiled-matmul.reads-per-element")
@settings(max_examples=6)
@given(st.integers(1, 70), st.integers(1, 70), st.integers(1, 40), st.sampled_from([(16, 16), (32, 16), (16, 32)]))
def test_each_element_is_loaded_once_per_tile_column(device, M, N, K, tiles):
    if device.type != "cpu":
        pytest.skip("the meter reads Triton's interpreter")
    bm, bn = tiles
    a, b = torch.randn(M, K), torch.randn(K, N)
    with Meter(a=a, b=b) as m:
        MM.matmul_tiled(a, b, block_m=bm, block_n=bn, block_k=16)
    assert m.stray == 0 or m.stray == M * N  # C's stores are the only other accesses
    assert (m.load_counts("a") == -(-N // bn)).all() and (m.load_counts("b") == -(-M // bm)).all()
    tr = G.traffic(M, N, K, G.Tiling("shared", bm, bn, 16))
    assert m.loads["a"] + m.loads["b"] == tr.global_loads


@pytest.mark.claim("coding.tiled-matmul.reads-per-element")
def test_the_factor_is_n_over_ceil(evidence):
    for N, T, quoted in ((33, 32, 16.5), (64, 32, 32), (100, 32, 25)):
        naive = G.traffic(8, N, 8, G.NAIVE).global_loads
        tiled = G.traffic(8, N, 8, G.Tiling("shared", 8, T, 8)).global_loads
        a_naive, a_tiled = 8 * 8 * N, 8 * 8 * -(-N // T)  # A's share: K*M*N naive, K*M*ceil(N/T) tiled
        evidence.quote(f"fall in A's traffic, N={N}, T={T}", quoted=quoted, measured=a_naive / a_tiled, rel=1e-9)
        assert tiled < naive


@pytest.mark.claim("coding.tiled-matmul.two-barriers")
def test_barriers_every_interleaving(evidence):
    T, S = 2, 3
    right = E.tile_right_answer(T, S)
    cases = {"both barriers": {}, "no barrier after the load": {"barrier_after_load": False},
             "no barrier before the next load": {"barrier_before_next": False},
             "double-buffered, one barrier": {"double_buffer": True}}
    out = {}
    for name, kw in cases.items():
        got = E.tile_outcomes(T, S, **kw)
        out[name] = {"outcomes": len(got), "all_right": got == frozenset({right})}
    assert out["both barriers"]["all_right"] and out["double-buffered, one barrier"]["all_right"]
    assert not out["no barrier after the load"]["all_right"] and not out["no barrier before the next load"]["all_right"]
    bad = sorted(E.tile_outcomes(T, S, barrier_before_next=False) - {right})[0]
    evidence["outcomes"] = out
    evidence["counterexample"] = {"threads": T, "steps": S, "right": list(right), "without the second barrier": list(bad)}


@pytest.mark.claim("coding.tiled-matmul.edge-tiles")
def test_only_the_k_tail_must_be_zero(device, evidence):
    if device.type != "cpu":
        pytest.skip("variant kernels run in the interpreter here")
    from verifiers.kernels.variants import matmul_fill

    M, N, K = 37, 45, 70
    a, b = torch.randn(M, K), torch.randn(K, N)
    want = a.double() @ b.double()
    nan = float("nan")
    edges_nan = matmul_fill(a, b, edge_fill=nan, k_fill=0.0)      # rows/columns past M, N read as NaN
    tail_nan = matmul_fill(a, b, edge_fill=0.0, k_fill=nan)       # the K tail read as NaN
    assert bool(((edges_nan.double() - want).abs() <= _bound(a, b)).all())
    assert torch.isnan(tail_nan).all()
    evidence["counterexample"] = {"M,N,K": [M, N, K], "NaN past M and N": "C right",
                                  "NaN in the K tail": f"{int(torch.isnan(tail_nan).sum())} of {M * N} outputs NaN"}


@pytest.mark.claim("coding.tiled-matmul.bitwise-equal")
def test_a_right_kernel_differs_from_the_triple_loop_in_the_last_bits(device, evidence):
    gen = torch.Generator().manual_seed(3)
    M, N, K = 16, 16, 96
    a, b = torch.randn(M, K, generator=gen), torch.randn(K, N, generator=gen)
    c = MM.matmul_tiled(a.to(device), b.to(device), block_m=16, block_n=16, block_k=32).cpu()
    an, bn = a.numpy(), b.numpy()
    loop = np.zeros((M, N), dtype=np.float32)
    for k in range(K):  # the CPU triple loop, accumulating in fp32 in k order
        loop += np.float32(an[:, k:k + 1]) * bn[k:k + 1, :]
    loop = torch.from_numpy(loop)
    differ = int((c != loop).sum())
    want = a.double() @ b.double()
    assert differ > 0, "expected some outputs to differ in their last bits"
    assert bool(((c.double() - want).abs() <= _bound(a, b)).all()) and bool(((loop.double() - want).abs()
                                                                               <= _bound(a, b)).all())
    i = tuple(int(v) for v in torch.nonzero(c != loop)[0])
    evidence["counterexample"] = {"M,N,K": [M, N, K], "outputs that differ": f"{differ} of {M * N}",
                                  "example": {"index": list(i), "kernel": float(c[i]), "triple loop": float(loop[i]),
                                              "fp64": float(want[i])}}
