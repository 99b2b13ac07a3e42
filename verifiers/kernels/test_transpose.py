"""Transpose: the Triton kernel is exact at any shape and dtype, issues one read and one write per element (the
meter), and compiles to 128-bit loads and stores through an unpadded shared tile; the CUDA version's padding,
coalescing, barrier and bounds checks, thread by thread.

Oracles: ``x.t()``; the interpreter meter; ptxas's output; the bank and coalescing models of impls/gpu; the
thread-by-thread emulation of the CUDA samples' kernel (``emulate.transpose_cuda``).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from impls.gpu import banks
from impls.gpu.coalescing import warp_access
from impls.gpu.occupancy import occupancy
from verifiers.kernels import emulate as E

triton = pytest.importorskip("triton", reason="Triton has wheels for Linux x86-64/aarch64 only")

from impls.kernels import transpose as T  # noqa: E402
from verifiers.kernels.meter import Meter  # noqa: E402


@pytest.mark.claim("transpose.triton-kernel.exact")
@settings(max_examples=10)
@given(st.integers(1, 90), st.integers(1, 90), st.sampled_from([(32, 32), (16, 64), (64, 16), (8, 8)]),
       st.sampled_from([torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.float64, torch.bool]),
       st.integers(0, 255))
def test_exact_at_any_shape_and_dtype(device, M, N, tile, dtype, seed):
    x = (torch.randn(M, N, generator=torch.Generator().manual_seed(seed)) * 100).to(dtype)
    y = T.transpose_tiled(x.to(device), block_m=tile[0], block_n=tile[1]).cpu()
    assert y.dtype == dtype and y.is_contiguous() and torch.equal(y, x.t())


@pytest.mark.claim("transpose.triton-kernel.exact")
def test_views_traffic_and_bad_input(device, evidence):
    x = torch.randn(50, 80)
    assert torch.equal(T.transpose(x[:, ::2].to(device)).cpu(), x[:, ::2].t())  # a strided view
    assert T.transpose(torch.empty(0, 5)).shape == (5, 0)
    with pytest.raises(ValueError, match="matrix"):
        T.transpose(torch.randn(2, 3, 4))
    with pytest.raises(ValueError, match="power of two"):
        T.transpose_tiled(torch.randn(2, 3), block_m=12)
    if device.type != "cpu":
        return
    M, N = 45, 70
    x, y = torch.randn(M, N), torch.empty(N, M)
    with Meter(x=x, y=y) as m:
        T.transpose_kernel[(2, 3)](x, y, M, N, N, M, BLOCK_M=32, BLOCK_N=32)
    assert (m.load_counts("x") == 1).all() and m.stores["y"] == M * N and m.stray == 0
    assert m.bytes() == T.bytes_moved(M, N, 4)
    assert torch.equal(y, x.t())
    evidence["bytes_per_element"] = m.bytes() / (M * N)


@pytest.mark.claim("transpose.triton-kernel.vectorized")
def test_compiled_loads_and_stores_are_vectors(built, evidence):
    rows = {}
    for arch in (80, 90):
        c = built[f"transpose.{arch}"]
        assert c.load_widths() == {128: 2} and c.store_widths() == {128: 2}, (arch, c.load_widths(), c.store_widths())
        assert c.shared == 32 * 32 * 4  # the tile, no padding row: Triton picks a conflict-free layout itself
        rows[f"sm_{arch}"] = {"registers": c.registers, "shared_bytes": c.shared, "loads": c.load_widths(),
                              "stores": c.store_widths()}
    evidence["compiled"] = rows


# ---------------------------------------------------------------------------------------------------------------
# the interview question (CUDA)


@pytest.mark.claim("transpose.padded-tile")
def test_padding_is_one_of_two_fixes_and_depends_on_the_element_size(built, evidence):
    def worst(pad: int, elem: int) -> float:
        return max(banks.conflict_degree(banks.padded_tile_column(c, 32, pad, elem), width=elem) for c in range(32))

    table = {f"[32][{32 + pad}] {8 * elem}-bit": worst(pad, elem) for pad, elem in
             ((0, 4), (1, 4), (0, 2), (1, 2), (2, 2), (0, 8), (1, 8))}
    swizzled = max(max(banks.conflict_degree(banks.swizzled_tile_column(c)) for c in range(32)),
                   max(banks.conflict_degree(banks.swizzled_tile_row(r)) for r in range(32)))
    evidence["worst_column_conflict"] = table
    evidence["xor_swizzle_worst"] = swizzled
    assert table["[32][32] 32-bit"] == 32 and table["[32][33] 32-bit"] == 1 and swizzled == 1
    assert table["[32][33] 16-bit"] == 2 and table["[32][34] 16-bit"] == 1  # +1 is a 32-bit recipe
    assert built["transpose.80"].shared == 4096  # and Triton's own transpose needs no padding at all


@pytest.mark.claim("transpose.naive-coalescing")
def test_one_side_is_strided_whichever_way(evidence):
    M, N = 1024, 1024
    out = {}
    for mapping in ("naive-x-cols", "naive-x-rows", "smem"):
        rd, wr = E.transpose_warp_addresses(mapping, M, N, row=3, col0=64)
        out[mapping] = {"read sectors": warp_access(rd).sectors, "write sectors": warp_access(wr).sectors}
    evidence["sectors_per_warp"] = out
    assert out["naive-x-cols"] == {"read sectors": 4, "write sectors": 32}
    assert out["naive-x-rows"] == {"read sectors": 32, "write sectors": 4}
    assert out["smem"] == {"read sectors": 4, "write sectors": 4}


@pytest.mark.claim("transpose.padding-waste")
def test_padding_costs_one_column(evidence):
    for tile, quoted in ((32, 3.1), (64, 1.6)):
        extra = 100 * (tile * (tile + 1) - tile * tile) / (tile * tile)
        evidence.quote(f"extra shared memory, {tile}x{tile + 1} tile (%)", quoted=quoted, measured=extra, digits=1)
    # blocks of 32 x 8 threads, ~26 registers: the SM runs as many of them with the padding as without
    plain, padded = occupancy("sm_80", 256, 26, 32 * 32 * 4), occupancy("sm_80", 256, 26, 32 * 33 * 4)
    assert plain.blocks == padded.blocks == 8 and plain.limited_by == padded.limited_by
    evidence["blocks_per_sm_sm80"] = {"[32][32]": plain.blocks, "[32][33]": padded.blocks,
                                      "limited_by": padded.limited_by}


@pytest.mark.claim("coding.transpose-kernel.swapped-block-indices")
def test_block_swap_places_the_tile_the_smem_read_coalesces(evidence):
    x = np.arange(70 * 100, dtype=float).reshape(70, 100)
    right, _ = E.transpose_cuda(x)
    no_swap, _ = E.transpose_cuda(x, swap_blocks=False)
    no_transposed_read, _ = E.transpose_cuda(x, read_transposed=False)
    assert np.array_equal(right, x.T)
    assert not np.array_equal(no_swap, x.T) and not np.array_equal(no_transposed_read, x.T)
    # the write of one warp (ty fixed, tx = 0..31): out[(bx*T + ty) * M + by*T + tx], consecutive in tx
    rd, wr = E.transpose_warp_addresses("smem", 96, 128, row=5, col0=32)  # rows a multiple of 32 bytes long
    assert warp_access(wr).sectors == 4 and warp_access(rd).sectors == 4
    evidence["wrong_elements"] = {"no block swap": int((no_swap != x.T).sum()),
                                  "tile read untransposed": int((no_transposed_read != x.T).sum()),
                                  "of": int(x.size)}


@pytest.mark.claim("coding.transpose-kernel.sync-optional")
def test_threads_read_what_other_warps_wrote(evidence):
    Tt, R = 32, 8  # blockDim (32, 8): thread (tx, ty) writes rows ty, ty+8, ty+16, ty+24 of the tile
    writer = {}
    for ty in range(R):
        for tx in range(Tt):
            for j in range(0, Tt, R):
                writer[(ty + j, tx)] = (ty, tx)
    other_thread = other_warp = reads = 0
    for ty in range(R):
        for tx in range(Tt):
            for j in range(0, Tt, R):
                w = writer[(tx, ty + j)]  # the element it reads back: tile[tx][ty + j]
                reads += 1
                other_thread += w != (ty, tx)
                other_warp += w[0] != ty  # a warp is one ty (32 consecutive tx)
    evidence.quote("reads of an element another thread wrote (%)", quoted=96.9, measured=100 * other_thread / reads,
                   digits=1)
    assert other_warp > 0
    # one schedule without the barrier: warp 0 (ty = 0) writes and reads before warp 1 has written
    tile = np.full((Tt, Tt), np.nan)
    for tx in range(Tt):
        for j in range(0, Tt, R):
            tile[0 + j, tx] = 1.0
    stale = sum(np.isnan(tile[tx, 0 + j]) for tx in range(Tt) for j in range(0, Tt, R))
    assert stale > 0
    evidence["counterexample"] = {"schedule": "warp 0 writes, then reads, before warp 1 writes",
                                  "warp 0 reads not yet written": int(stale), "of": Tt * Tt // R}


@pytest.mark.claim("coding.transpose-kernel.separate-bounds")
@settings(max_examples=20)
@given(st.integers(1, 100), st.integers(1, 100))
def test_the_store_needs_its_own_bounds(M, N):
    x = np.arange(M * N, dtype=float).reshape(M, N)
    right, stray = E.transpose_cuda(x)
    assert np.array_equal(right, x.T) and stray == 0
    same, stray_same = E.transpose_cuda(x, separate_bounds=False)
    if M % 32 and N % 32 and M != N:  # a ragged, non-square matrix: the transposed valid region differs
        assert not np.array_equal(same, x.T) or stray_same > 0


@pytest.mark.claim("coding.transpose-kernel.separate-bounds")
def test_the_counterexample(evidence):
    x = np.arange(40 * 70, dtype=float).reshape(40, 70)
    same, stray = E.transpose_cuda(x, separate_bounds=False)
    missing = int(np.isnan(same).sum())
    assert stray > 0 and missing > 0
    evidence["counterexample"] = {"shape": [40, 70], "tile": 32, "elements never written": missing,
                                  "writes outside the output row": stray}
