r"""Occupancy: how many blocks of a kernel one SM holds at once, from the per-capability limits as data.

For a block of $T$ threads ($W=\lceil T/32\rceil$ warps), $r$ registers per thread and $S$ bytes of shared
memory per block, each resource allows

$$B_\text{warps} = \lfloor W_\text{SM}/W\rfloor,\qquad B_\text{blocks} = B_\text{SM},$$
$$B_\text{regs} = \Bigl\lfloor \frac{4\,\lfloor R_\text{SM}/4 \,/\, \lceil 32r\rceil_{256}\rfloor}{W}\Bigr\rfloor,\qquad
  B_\text{smem} = \Bigl\lfloor \frac{S_\text{SM}}{\lceil S + S_\text{res}\rceil_{g}}\Bigr\rfloor,$$

and the SM holds $B=\min$ of them; occupancy $= B\,W / W_\text{SM}$. Registers are allocated per warp in
units of 256 ($\lceil 32r\rceil_{256}$) out of four sub-partitions of $R_\text{SM}/4$ each (a warp lives in
one); shared memory is allocated per block in units of $g$ (256 B on sm_70, 128 B on sm_80+), plus the
$S_\text{res}$ = 1 KB the driver reserves for every block on sm_80+. A block that exceeds a per-block
limit (1,024 threads, 64 K registers, 255 registers per thread, the opt-in shared-memory maximum) does
not launch: $B = 0$. $S_\text{SM}$ is the largest shared-memory carveout unless ``carveout`` (the
percentage ``cudaFuncAttributePreferredSharedMemoryCarveout`` asks for) picks a smaller one, rounded up
to the next size the architecture supports; as the CUDA occupancy calculator does, a block that needs
more than the carveout gets the next size up.

Sources: CUDA C++ Programming Guide, "Technical Specifications per Compute Capability" (the table
below), §"Compute Capability 7.x/8.x/9.0 — Shared Memory" (carveouts, 1 KB reserved, opt-in); CUDA C++
Best Practices Guide §"Occupancy" (allocation units); ``cuda_occupancy.h`` (sub-partitions, units).
The barrier limit Hopper adds (two per block slot) never binds with one barrier per block and is left out.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SM", "SMS", "Occupancy", "occupancy", "sm"]

KB = 1024


@dataclass(frozen=True)
class SM:
    """One compute capability's per-SM and per-block limits."""

    name: str
    example: str                 # a GPU of this capability
    max_warps: int               # resident warps per SM
    max_threads: int             # resident threads per SM
    max_blocks: int              # resident blocks per SM
    registers: int               # 32-bit registers per SM
    max_registers_block: int     # per block
    max_registers_thread: int
    smem_carveouts_kb: tuple[int, ...]   # shared-memory sizes per SM the L1/shared split allows (KB)
    max_smem_block: int          # opt-in maximum per block (bytes, cudaFuncAttributeMaxDynamicSharedMemorySize)
    default_smem_block: int      # without opt-in (static __shared__ is capped here too)
    reserved_smem_block: int     # reserved by the driver for every block
    smem_unit: int               # shared-memory allocation unit (bytes)
    reg_unit: int = 256          # register allocation unit, per warp
    sub_partitions: int = 4
    max_threads_block: int = 1024
    warp_size: int = 32

    @property
    def max_smem_sm(self) -> int:
        return self.smem_carveouts_kb[-1] * KB


SMS: dict[str, SM] = {s.name: s for s in [
    SM("sm_70", "V100", 64, 2048, 32, 65536, 65536, 255, (0, 8, 16, 32, 64, 96), 96 * KB, 48 * KB, 0, 256),
    SM("sm_80", "A100", 64, 2048, 32, 65536, 65536, 255, (0, 8, 16, 32, 64, 100, 132, 164), 163 * KB, 48 * KB,
       KB, 128),
    SM("sm_86", "RTX 3090 / A10", 48, 1536, 16, 65536, 65536, 255, (0, 8, 16, 32, 64, 100), 99 * KB, 48 * KB, KB,
       128),
    SM("sm_89", "RTX 4090 / L40S", 48, 1536, 24, 65536, 65536, 255, (0, 8, 16, 32, 64, 100), 99 * KB, 48 * KB, KB,
       128),
    SM("sm_90", "H100 / H200", 64, 2048, 32, 65536, 65536, 255, (0, 8, 16, 32, 64, 100, 132, 164, 196, 228),
       227 * KB, 48 * KB, KB, 128),
]}


def sm(name: str) -> SM:
    """``sm_90``, ``90``, ``9.0`` or ``sm90`` -> the SM record; ValueError naming the choices otherwise."""
    key = str(name).strip().lower().replace("sm_", "").replace("sm", "").replace(".", "")
    hit = SMS.get(f"sm_{key}")
    if hit is None:
        raise ValueError(f"unknown architecture {name!r}: choose one of {', '.join(SMS)}")
    return hit


def _round_up(x: int, unit: int) -> int:
    return -(-x // unit) * unit


@dataclass(frozen=True)
class Occupancy:
    sm: SM
    threads: int
    registers: int
    smem: int
    warps_per_block: int
    limits: dict[str, int]        # blocks per SM each resource allows: warps, registers, shared memory, blocks
    regs_per_block: int           # allocated
    smem_per_block: int           # allocated, reserve included
    smem_sm: int                  # shared memory per SM under the carveout used
    why_zero: str = ""            # the per-block limit exceeded when nothing launches

    @property
    def blocks(self) -> int:
        return min(self.limits.values())

    @property
    def warps(self) -> int:
        return self.blocks * self.warps_per_block

    @property
    def fraction(self) -> float:
        """Active warps over the SM's maximum."""
        return self.warps / self.sm.max_warps

    @property
    def limited_by(self) -> list[str]:
        """The resources whose limit equals the result (ties listed together)."""
        return [k for k, v in self.limits.items() if v == self.blocks]


def _carveout_bytes(s: SM, need: int, carveout: int | None) -> int:
    sizes = [c * KB for c in s.smem_carveouts_kb]
    want = s.max_smem_sm if carveout is None else carveout * s.max_smem_sm // 100
    pick = next(c for c in sizes if c >= want)
    if pick < need:  # a block that needs more than the preference gets the next size that holds it
        pick = next((c for c in sizes if c >= need), s.max_smem_sm)
    return pick


def occupancy(arch: str | SM, threads: int, registers: int, smem: int = 0, *, carveout: int | None = None) -> Occupancy:
    """Blocks per SM for ``threads`` per block, ``registers`` per thread and ``smem`` bytes of shared memory per
    block (static + dynamic, without the driver's reserve, which is added here). ``carveout``: percent of the
    largest shared-memory size to prefer (None: the largest). Opt-in above 48 KB is assumed (Triton does it)."""
    s = arch if isinstance(arch, SM) else sm(arch)
    if threads < 1 or registers < 0 or smem < 0:
        raise ValueError(f"threads must be >= 1 and registers, smem >= 0 (got {threads}, {registers}, {smem})")
    if carveout is not None and not 0 <= carveout <= 100:
        raise ValueError(f"carveout is a percentage 0..100, got {carveout}")
    wpb = -(-threads // s.warp_size)
    regs_warp = _round_up(registers * s.warp_size, s.reg_unit)
    regs_block = regs_warp * wpb
    smem_block = _round_up(smem + s.reserved_smem_block, s.smem_unit)
    why = ""
    if threads > s.max_threads_block:
        why = f"{threads} threads > {s.max_threads_block} per block"
    elif registers > s.max_registers_thread:
        why = f"{registers} registers > {s.max_registers_thread} per thread"
    elif regs_warp * _round_up(wpb, s.sub_partitions) > s.max_registers_block:
        why = f"{regs_block} registers > {s.max_registers_block} per block"
    elif smem > s.max_smem_block:
        why = f"{smem} B shared memory > {s.max_smem_block} B per block (opt-in maximum)"
    smem_sm = _carveout_bytes(s, smem_block, carveout)
    if why:
        limits = {"warps": 0, "registers": 0, "shared memory": 0, "blocks": 0}
    else:
        if regs_warp:
            warps_by_regs = (s.registers // s.sub_partitions // regs_warp) * s.sub_partitions
            by_regs = warps_by_regs // wpb
        else:
            by_regs = s.max_blocks
        limits = {"warps": s.max_warps // wpb, "registers": by_regs,
                  "shared memory": smem_sm // smem_block if smem_block else s.max_blocks, "blocks": s.max_blocks}
    return Occupancy(s, threads, registers, smem, wpb, limits, regs_block, smem_block, smem_sm, why)
