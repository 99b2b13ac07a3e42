r"""What each GEMM tiling level costs in memory traffic: counted from the tiling, not assumed.

$C = AB$ with $A$ ``M×K``, $B$ ``K×N`` row-major, every element of $C$ a dot product of length $K$
($2MNK$ FLOPs). Three levels, as an interview walks them (:class:`Tiling`):

- **naive**: one thread per output $C_{ij}$, reading $A_{i,:}$ and $B_{:,j}$ from global memory:
  $2K$ loads per output, $2MNK$ in all.
- **shared** (shared-memory tiling): a block of threads owns a ``BM×BN`` tile of $C$ and walks $K$ in
  steps of ``BK``, loading an ``BM×BK`` tile of $A$ and a ``BK×BN`` tile of $B$ into shared memory
  once per step and reading them from there. Every element of $A$ is loaded once per block column,
  $\lceil N/B_N\rceil$ times, every element of $B$ $\lceil M/B_M\rceil$ times:

  $$\text{loads} = MK\lceil N/B_N\rceil + KN\lceil M/B_M\rceil \approx MNK\Bigl(\frac1{B_N}+\frac1{B_M}\Bigr).$$

  Out-of-range elements of the edge tiles are masked, so they cost no traffic (they are zero-filled in
  shared memory). Each thread computes one output, reading 2 values from shared memory per FMA.
- **register** (register tiling): the same block tile, but each thread computes a ``TM×TN`` sub-tile
  held in registers, reading ``TM + TN`` values from shared memory per $k$ for ``TM·TN`` FMAs:
  global traffic as *shared* with the same block tile, shared-memory reads down by
  $\frac{2\,T_MT_N}{T_M+T_N}$; the threads' loads may be vectors of ``vector`` contiguous elements
  (``float4``: 4), which divides the load *instructions*, not the bytes.

Arithmetic intensity against global memory, for large $M=N=K$ and ``b`` bytes per element:
$I = \frac{2MNK}{b\cdot\text{loads}} \to \frac{2B_MB_N}{b\,(B_M+B_N)}$ FLOP/byte (naive: $1/b$;
a ``T×T`` tile: $T/b$). The roofline ridge $I^* = \text{peak}/\text{bandwidth}$ (:data:`MACHINES`) is
where a kernel stops being memory-bound.

The counts here are closed forms; ``verifiers/kernels/test_gemm_tiling.py`` checks them against an
emulation that issues every load of each tiling one by one, and against the loads the Triton kernel
(``impls/kernels/matmul.py``) really issues in Triton's interpreter.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Tiling", "Traffic", "Machine", "NAIVE", "shared", "register", "traffic", "intensity", "MACHINES",
           "smem_bytes", "waves", "wave_tiles"]


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class Tiling:
    """A GEMM tiling level: block tile ``bm×bn`` stepping ``bk`` along K, thread tile ``tm×tn``,
    ``vector`` elements per global load instruction. ``naive`` ignores the rest."""

    name: str
    bm: int = 1
    bn: int = 1
    bk: int = 1
    tm: int = 1
    tn: int = 1
    vector: int = 1

    def __post_init__(self) -> None:
        if self.name not in ("naive", "shared", "register"):
            raise ValueError(f"tiling must be naive, shared or register, got {self.name!r}")
        for f in ("bm", "bn", "bk", "tm", "tn", "vector"):
            if getattr(self, f) < 1:
                raise ValueError(f"{f} must be at least 1, got {getattr(self, f)}")
        if self.bm % self.tm or self.bn % self.tn:
            raise ValueError(f"the thread tile {self.tm}x{self.tn} must divide the block tile {self.bm}x{self.bn}")

    @property
    def threads(self) -> int:
        """Threads per block (naive: one block per output, one thread)."""
        return 1 if self.name == "naive" else (self.bm // self.tm) * (self.bn // self.tn)

    @property
    def label(self) -> str:
        if self.name == "naive":
            return "naive"
        if self.name == "shared":
            return f"shared {self.bm}x{self.bn}"
        return f"register {self.bm}x{self.bn}/{self.tm}x{self.tn}"


NAIVE = Tiling("naive")


def shared(t: int = 32, bk: int | None = None) -> Tiling:
    """Shared-memory tiling with ``t×t`` tiles (one output per thread), stepping ``bk`` (default ``t``)."""
    return Tiling("shared", t, t, bk or t)


def register(bm: int = 128, bn: int = 128, bk: int = 8, tm: int = 8, tn: int = 8, vector: int = 4) -> Tiling:
    """Register tiling: ``bm×bn`` block tile, ``tm×tn`` outputs per thread, ``vector``-wide loads."""
    return Tiling("register", bm, bn, bk, tm, tn, vector)


@dataclass(frozen=True)
class Traffic:
    """Counts for one ``M×N×K`` GEMM under one tiling (elements, not bytes; instructions summed over threads)."""

    global_loads: int            # elements of A and B read from global memory
    load_instructions: int       # global load instructions issued (a float4 load is one)
    shared_loads: int            # elements read from shared memory into registers
    stores: int                  # elements of C written
    flops: int                   # 2·M·N·K

    def per_output(self, M: int, N: int) -> float:
        return self.global_loads / (M * N)

    def intensity(self, bytes_per_element: int) -> float:
        """FLOPs per byte of global traffic (loads and the stores of C)."""
        return self.flops / ((self.global_loads + self.stores) * bytes_per_element)


def traffic(M: int, N: int, K: int, t: Tiling) -> Traffic:
    """The loads ``t`` issues for ``C[M,N] = A[M,K] B[K,N]`` (closed form; see the module docstring).

    Shared-memory reads count every thread of every launched block reading its fragment for every
    ``bk`` step, padded to a whole step (the padding of the edge tiles is zero in shared memory and still read).
    Vector loads run along the contiguous dimension (K for A, N for B) and stop at the matrix's edge."""
    for name, v in (("M", M), ("N", N), ("K", K)):
        if v < 1:
            raise ValueError(f"{name} must be at least 1, got {v}")
    flops = 2 * M * N * K
    if t.name == "naive":
        return Traffic(2 * M * N * K, 2 * M * N * K, 0, M * N, flops)
    gm, gn = _cdiv(M, t.bm), _cdiv(N, t.bn)
    a_loads = M * K * gn
    b_loads = K * N * gm
    v = t.vector
    # A tile rows are contiguous along K: a step of width w in K costs ceil(w / v) instructions per row
    steps = [min(t.bk, K - k0) for k0 in range(0, K, t.bk)]
    a_instr = gn * M * sum(_cdiv(w, v) for w in steps)
    b_row = sum(_cdiv(min(t.bn, N - n0), v) for n0 in range(0, N, t.bn))  # one row of B across all block columns
    b_instr = gm * K * b_row
    k_padded = len(steps) * t.bk
    shared_loads = gm * gn * t.threads * (t.tm + t.tn) * k_padded
    return Traffic(a_loads + b_loads, a_instr + b_instr, shared_loads, M * N, flops)


def intensity(t: Tiling, bytes_per_element: int, size: int = 8192) -> float:
    """Arithmetic intensity (FLOP/byte) of ``t`` for a square GEMM of side ``size`` (8192: close to the limit
    $2B_MB_N/(b(B_M+B_N))$; naive: $1/b$)."""
    return traffic(size, size, size, t).intensity(bytes_per_element)


def smem_bytes(bm: int, bn: int, bk: int, stages: int, bytes_per_element: int) -> int:
    """Shared memory one block needs to hold ``stages`` buffers of an A and a B tile."""
    return stages * (bm * bk + bk * bn) * bytes_per_element


@dataclass(frozen=True)
class Machine:
    """Peak rates from NVIDIA's datasheets (dense, no sparsity)."""

    name: str
    fp32: float          # FLOP/s on CUDA cores (FFMA)
    tensor_fp16: float   # FLOP/s, FP16/BF16 on Tensor Cores, FP32 accumulate
    bandwidth: float     # HBM bytes/s
    sms: int
    l2_bytes: int
    source: str

    def ridge(self, tensor_cores: bool) -> float:
        return (self.tensor_fp16 if tensor_cores else self.fp32) / self.bandwidth


MACHINES: dict[str, Machine] = {m.name: m for m in [
    # A100 SXM 80GB datasheet: FP32 19.5 TFLOPS, FP16/BF16 Tensor Core 312 TFLOPS (dense), HBM2e 2,039 GB/s;
    # whitepaper: 108 SMs, 40 MB L2
    Machine("A100", 19.5e12, 312e12, 2.039e12, 108, 40 * 2**20,
            "NVIDIA A100 datasheet (80GB SXM column); A100 whitepaper Table 1"),
    # H100 SXM5 datasheet: FP32 67 TFLOPS, FP16/BF16 Tensor Core 989.4 TFLOPS dense (1,979 with sparsity),
    # HBM3 3.35 TB/s; whitepaper: 132 SMs, 50 MB L2
    Machine("H100", 67e12, 989.4e12, 3.35e12, 132, 50 * 2**20,
            "NVIDIA H100 datasheet (SXM column); H100 whitepaper Table 3"),
]}


def waves(M: int, N: int, bm: int, bn: int, sms: int, blocks_per_sm: int = 1) -> float:
    """How many full waves of resident blocks the ``⌈M/bm⌉·⌈N/bn⌉`` output tiles make (a fraction: the last wave
    runs partly empty)."""
    return _cdiv(M, bm) * _cdiv(N, bn) / (sms * blocks_per_sm)


def wave_tiles(M: int, N: int, bm: int, bn: int, programs: int, group_m: int = 1) -> tuple[int, int]:
    """(distinct A row-tiles, distinct B column-tiles) the first ``programs`` programs of the launch read, when
    program ids map to output tiles row by row (``group_m = 1``) or in groups of ``group_m`` tile rows
    walked column by column (Triton's grouped order): what one wave keeps live in L2."""
    gm, gn = _cdiv(M, bm), _cdiv(N, bn)
    rows, cols = set(), set()
    for pid in range(min(programs, gm * gn)):
        group = pid // (group_m * gn)
        first = group * group_m
        size = min(gm - first, group_m)
        r = first + (pid % (group_m * gn)) % size
        c = (pid % (group_m * gn)) // size
        rows.add(r)
        cols.add(c)
    return len(rows), len(cols)
