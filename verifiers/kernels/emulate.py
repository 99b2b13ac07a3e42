"""Brute-force emulations of the kernels an interview asks for, written from the CUDA programs, not from the models.

- :func:`gemm` runs a GEMM tiling loop by loop (blocks, K steps, the threads' cooperative tile loads, each
  thread's fragment reads) and counts every global load, load instruction and shared-memory read it issues,
  while computing C, so the count belongs to a program that is right.
- :func:`tile_outcomes` enumerates every interleaving of the threads of a shared-memory tiled loop
  (load a tile, barrier, read the whole tile, barrier), with either barrier removed, or double-buffered.
- :func:`transpose_cuda` runs the classic shared-memory transpose thread by thread with the bounds checks
  of one's choice; :func:`transpose_warp_addresses` gives the global addresses one warp reads and writes.
- :func:`reduction_steps` walks Harris's shared-memory tree reductions (interleaved with ``%``, interleaved
  with a strided index, sequential) step by step: active lanes per warp and shared-memory addresses.
- :func:`shfl_xor_reduce` / :func:`shfl_down_reduce`: the warp shuffles' register exchange, lane by lane.
"""

from __future__ import annotations

from functools import lru_cache
from itertools import product

import numpy as np

from impls.kernels.gemm_model import Tiling


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def gemm(A: np.ndarray, B: np.ndarray, t: Tiling) -> tuple[np.ndarray, dict]:
    """(C, counts) of the tiling ``t`` run as a CUDA kernel would, element by element.

    counts: ``global_loads`` (elements), ``load_instructions`` (per thread, a vector load of up to
    ``t.vector`` contiguous in-bounds elements is one), ``shared_loads`` (elements read from shared memory),
    ``stores``, ``a_reads`` / ``b_reads`` (how many times each element of A / B was loaded)."""
    M, K = A.shape
    N = B.shape[1]
    C = np.zeros((M, N))
    a_reads = np.zeros((M, K), dtype=np.int64)
    b_reads = np.zeros((K, N), dtype=np.int64)
    n = {"global_loads": 0, "load_instructions": 0, "shared_loads": 0, "stores": 0}
    if t.name == "naive":
        for i, j in product(range(M), range(N)):  # one thread per output
            acc = 0.0
            for k in range(K):
                a, b = A[i, k], B[k, j]
                a_reads[i, k] += 1
                b_reads[k, j] += 1
                n["global_loads"] += 2
                n["load_instructions"] += 2
                acc += a * b
            C[i, j] = acc
            n["stores"] += 1
        return C, {**n, "a_reads": a_reads, "b_reads": b_reads}
    v = t.vector
    for bi, bj in product(range(_cdiv(M, t.bm)), range(_cdiv(N, t.bn))):
        acc = np.zeros((t.bm, t.bn))
        for k0 in range(0, K, t.bk):
            sa = np.zeros((t.bm, t.bk))  # shared-memory tiles, out-of-range parts zero
            sb = np.zeros((t.bk, t.bn))
            for r in range(t.bm):  # the block's threads load the A tile, v contiguous elements of a row at a time
                i = bi * t.bm + r
                for c0 in range(0, t.bk, v):
                    hit = [c for c in range(c0, min(c0 + v, t.bk)) if i < M and k0 + c < K]
                    for c in hit:
                        sa[r, c] = A[i, k0 + c]
                        a_reads[i, k0 + c] += 1
                    n["global_loads"] += len(hit)
                    n["load_instructions"] += 1 if hit else 0
            for r in range(t.bk):
                k = k0 + r
                for c0 in range(0, t.bn, v):
                    hit = [c for c in range(c0, min(c0 + v, t.bn)) if k < K and bj * t.bn + c < N]
                    for c in hit:
                        sb[r, c] = B[k, bj * t.bn + c]
                        b_reads[k, bj * t.bn + c] += 1
                    n["global_loads"] += len(hit)
                    n["load_instructions"] += 1 if hit else 0
            for ty, tx in product(range(t.bm // t.tm), range(t.bn // t.tn)):  # each thread's register tile
                rows = slice(ty * t.tm, (ty + 1) * t.tm)
                cols = slice(tx * t.tn, (tx + 1) * t.tn)
                for kk in range(t.bk):
                    a_frag = sa[rows, kk]  # tm reads from shared memory
                    b_frag = sb[kk, cols]  # tn reads
                    n["shared_loads"] += t.tm + t.tn
                    acc[rows, cols] += np.outer(a_frag, b_frag)
        for r, c in product(range(t.bm), range(t.bn)):
            i, j = bi * t.bm + r, bj * t.bn + c
            if i < M and j < N:
                C[i, j] = acc[r, c]
                n["stores"] += 1
    return C, {**n, "a_reads": a_reads, "b_reads": b_reads}


# ---------------------------------------------------------------------------------------------------------------
# a shared-memory tiled loop, every interleaving


def tile_outcomes(threads: int, steps: int, *, barrier_after_load: bool = True, barrier_before_next: bool = True,
                  double_buffer: bool = False) -> frozenset:
    """Every result the threads of a tiled loop can end with, over all interleavings of their shared-memory
    accesses. Step ``s``: thread ``t`` stores ``x[s][t] = 10**s * (t + 1)`` into its slot of the tile, then
    reads every slot and adds them to its accumulator (a dot product's inner loop, all weights 1). The
    result is the tuple of accumulators; the right one is ``sum_s sum_t x[s][t]`` for every thread.

    Single-buffered: [store, barrier?, read all, barrier?] per step. Double-buffered: the tile for step 0
    is stored before the loop; step ``s`` stores the tile of ``s+1`` into the other buffer, reads its
    own, and ends with the one barrier."""
    T = threads

    def value(s: int, t: int) -> int:
        return 10**s * (t + 1)

    prog: list[list[tuple]] = []
    for t in range(T):
        ops: list[tuple] = []
        if double_buffer:
            ops += [("w", 0, t, value(0, t)), ("bar",)]
            for s in range(steps):
                if s + 1 < steps:
                    ops.append(("w", (s + 1) % 2, t, value(s + 1, t)))
                ops += [("r", s % 2, j) for j in range(T)]
                ops.append(("bar",))
        else:
            for s in range(steps):
                ops.append(("w", 0, t, value(s, t)))
                if barrier_after_load:
                    ops.append(("bar",))
                ops += [("r", 0, j) for j in range(T)]
                if barrier_before_next:
                    ops.append(("bar",))
        prog.append(ops)
    progs = tuple(tuple(p) for p in prog)

    @lru_cache(maxsize=None)
    def explore(pcs: tuple, mem: tuple, acc: tuple) -> frozenset:
        if all(pc == len(progs[t]) for t, pc in enumerate(pcs)):
            return frozenset({acc})
        at_bar = [pc < len(progs[t]) and progs[t][pc][0] == "bar" for t, pc in enumerate(pcs)]
        if all(at_bar):
            return explore(tuple(pc + 1 for pc in pcs), mem, acc)
        out: frozenset = frozenset()
        for t, pc in enumerate(pcs):
            if pc == len(progs[t]) or at_bar[t]:
                continue
            op = progs[t][pc]
            m2, a2 = mem, acc
            if op[0] == "w":
                i = op[1] * T + op[2]
                m2 = mem[:i] + (op[3],) + mem[i + 1:]
            else:
                a2 = acc[:t] + (acc[t] + mem[op[1] * T + op[2]],) + acc[t + 1:]
            out |= explore(pcs[:t] + (pc + 1,) + pcs[t + 1:], m2, a2)
        return out

    return explore((0,) * T, (0,) * (2 * T), (0,) * T)


def tile_right_answer(threads: int, steps: int) -> tuple:
    total = sum(10**s * (t + 1) for s in range(steps) for t in range(threads))
    return (total,) * threads


# ---------------------------------------------------------------------------------------------------------------
# transpose


def transpose_cuda(x: np.ndarray, tile: int = 32, rows_per_pass: int = 8, *, separate_bounds: bool = True,
                   swap_blocks: bool = True, read_transposed: bool = True) -> tuple[np.ndarray, int]:
    """The shared-memory transpose of the CUDA samples, thread by thread (blockDim = (tile, rows_per_pass)):

        x = bx*T + tx; y = by*T + ty;  for j in 0, R, ..:  if (x < N && y+j < M) tile[ty+j][tx] = in[(y+j)*N + x]
        __syncthreads()
        x = by*T + tx; y = bx*T + ty;  for j ..:  if (x < M && y+j < N) out[(y+j)*M + x] = tile[tx][ty+j]

    ``separate_bounds=False`` guards the store with the load's test; ``swap_blocks=False`` keeps (bx, by) for the
    output tile; ``read_transposed=False`` reads ``tile[ty+j][tx]``. Returns (out, writes outside ``out``)."""
    M, N = x.shape
    out = np.full(N * M, np.nan)
    stray = 0
    T, R = tile, rows_per_pass
    for bx, by in product(range(_cdiv(N, T)), range(_cdiv(M, T))):
        sm = np.full((T, T), np.nan)
        for ty, tx in product(range(R), range(T)):
            xx, yy = bx * T + tx, by * T + ty
            for j in range(0, T, R):
                if xx < N and yy + j < M:
                    sm[ty + j, tx] = x[yy + j, xx]
        for ty, tx in product(range(R), range(T)):
            ox, oy = (by, bx) if swap_blocks else (bx, by)
            xx, yy = ox * T + tx, oy * T + ty
            for j in range(0, T, R):
                ok = (xx < M and yy + j < N) if separate_bounds else (bx * T + tx < N and by * T + ty + j < M)
                if ok:
                    v = sm[tx, ty + j] if read_transposed else sm[ty + j, tx]
                    flat = (yy + j) * M + xx
                    if 0 <= flat < N * M and xx < M:
                        out[flat] = v
                    else:
                        stray += 1
    return out.reshape(N, M), stray


def transpose_warp_addresses(mapping: str, M: int, N: int, elem: int = 4, row: int = 0, col0: int = 0
                             ) -> tuple[list[int], list[int]]:
    """Byte addresses one warp (threads tx = 0..31) reads from ``in [M, N]`` and writes to ``out [N, M]``:

    ``naive-x-cols``: thread tx handles in[row][col0+tx] -> out[col0+tx][row] (threadIdx.x along the input's row);
    ``naive-x-rows``: thread tx handles in[col0+tx][row] -> out[row][col0+tx] (threadIdx.x along the output's row);
    ``smem``: the tiled kernel's read of in[row][col0+tx] and write of out[row'][col0'+tx] (both along rows)."""
    tx = range(32)
    if mapping == "naive-x-cols":
        return [(row * N + col0 + t) * elem for t in tx], [((col0 + t) * M + row) * elem for t in tx]
    if mapping == "naive-x-rows":
        return [((col0 + t) * N + row) * elem for t in tx], [(row * M + col0 + t) * elem for t in tx]
    if mapping == "smem":
        return [(row * N + col0 + t) * elem for t in tx], [(row * M + col0 + t) * elem for t in tx]
    raise ValueError(mapping)


# ---------------------------------------------------------------------------------------------------------------
# reductions


def reduction_steps(kernel: int, block: int = 256, elem: int = 4) -> list[dict]:
    """Harris's shared-memory reductions, one entry per step (offset s): for each warp, the active lanes and the
    shared-memory byte addresses of the first operand its active lanes read.

    kernel 1: ``for s = 1; s < B; s *= 2: if tid % (2s) == 0: sdata[tid] += sdata[tid + s]``
    kernel 2: ``for s = 1; s < B; s *= 2: index = 2*s*tid; if index < B: sdata[index] += sdata[index + s]``
    kernel 3: ``for s = B/2; s > 0; s >>= 1: if tid < s: sdata[tid] += sdata[tid + s]``"""
    offsets = [1 << i for i in range(block.bit_length() - 1)]
    if kernel == 3:
        offsets = offsets[::-1]
    steps = []
    for s in offsets:
        warps = []
        for w in range(block // 32):
            lanes, addrs = [], []
            for lane in range(32):
                tid = w * 32 + lane
                if kernel == 1:
                    active, idx = tid % (2 * s) == 0, tid
                elif kernel == 2:
                    active, idx = 2 * s * tid < block, 2 * s * tid
                else:
                    active, idx = tid < s, tid
                lanes.append(active)
                addrs.append(idx * elem if active else None)
            warps.append({"active": sum(lanes), "addresses": addrs})
        steps.append({"s": s, "warps": warps})
    return steps


def shfl_xor_reduce(values: np.ndarray, op=np.add) -> np.ndarray:
    """Butterfly: ``v = op(v, __shfl_xor_sync(full, v, m))`` for m = 16, 8, 4, 2, 1; returns every lane's value."""
    v = np.array(values, dtype=np.float32).copy()
    lanes = np.arange(32)
    for m in (16, 8, 4, 2, 1):
        v = op(v, v[lanes ^ m]).astype(np.float32)
    return v


def shfl_down_reduce(values: np.ndarray, op=np.add) -> np.ndarray:
    """``v = op(v, __shfl_down_sync(full, v, d))`` for d = 16, 8, 4, 2, 1: a lane whose source ``lane + d`` is past
    the warp gets its own value back (CUDA's rule). Returns every lane's value."""
    v = np.array(values, dtype=np.float32).copy()
    lanes = np.arange(32)
    for d in (16, 8, 4, 2, 1):
        src = np.where(lanes + d < 32, lanes + d, lanes)
        v = op(v, v[src]).astype(np.float32)
    return v
