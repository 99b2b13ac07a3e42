"""Occupancy: the calculator of impls/gpu/occupancy.py against a block-by-block packing simulation and
against the examples NVIDIA publishes; block/grid sizing claims read through it.

The oracle packs blocks onto one simulated SM until one does not fit: it places each warp of a block on
the sub-partition with the most free registers (each sub-partition holding a quarter of the register
file), charges each block its shared memory rounded to the allocation unit, and counts warp and block
slots. It shares only the per-capability table with the calculator, which is a closed form of floors.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from impls.gpu.occupancy import KB, SMS, occupancy, sm

# NVIDIA's published numbers: CUDA C++ Programming Guide, "Technical Specifications per Compute Capability"
TABLE = {  # arch: (max warps/SM, max blocks/SM, max shared/SM KB, max shared/block KB)
    "sm_70": (64, 32, 96, 96), "sm_80": (64, 32, 164, 163), "sm_86": (48, 16, 100, 99), "sm_89": (48, 24, 100, 99),
    "sm_90": (64, 32, 228, 227),
}


def packed_blocks(arch: str, threads: int, regs: int, smem: int) -> int:
    s = SMS[arch]
    if threads > 1024 or regs > 255:
        return 0
    warps = -(-threads // 32)
    per_warp = -(-regs * 32 // 256) * 256
    if per_warp * (-(-warps // 4) * 4) > 65536 or smem > s.max_smem_block:
        return 0
    need = -(-(smem + s.reserved_smem_block) // s.smem_unit) * s.smem_unit
    free_regs = [65536 // 4] * 4
    smem_free, warp_slots, blocks = s.max_smem_sm, s.max_warps, 0
    while blocks < s.max_blocks and warp_slots >= warps and smem_free >= need:
        trial = list(free_regs)
        for _ in range(warps):
            i = max(range(4), key=lambda j: trial[j])
            if trial[i] < per_warp:
                return blocks
            trial[i] -= per_warp
        free_regs, smem_free, warp_slots, blocks = trial, smem_free - need, warp_slots - warps, blocks + 1
    return blocks


@pytest.mark.claim("gpu.occupancy.limiters")
@given(st.sampled_from(sorted(SMS)), st.integers(1, 1024), st.integers(0, 255), st.integers(0, 240 * KB))
def test_calculator_equals_packing(arch, threads, regs, smem):
    assert occupancy(arch, threads, regs, smem).blocks == packed_blocks(arch, threads, regs, smem)


@pytest.mark.claim("gpu.occupancy.limiters")
def test_calculator_equals_packing_at_the_edges():
    for arch in SMS:
        for threads in (32, 33, 64, 96, 128, 192, 256, 320, 384, 512, 640, 768, 1024):
            for regs in (0, 16, 32, 33, 40, 41, 48, 56, 64, 65, 72, 96, 128, 168, 200, 255):
                for smem in (0, 1, 8 * KB, 48 * KB, 64 * KB, 99 * KB, 100 * KB, 163 * KB, 227 * KB):
                    got = occupancy(arch, threads, regs, smem).blocks
                    assert got == packed_blocks(arch, threads, regs, smem), (arch, threads, regs, smem)


@pytest.mark.claim("gpu.occupancy.limiters")
def test_table_is_the_programming_guides(evidence):
    for arch, (warps, blocks, smem_sm, smem_block) in TABLE.items():
        s = sm(arch)
        assert (s.max_warps, s.max_blocks, s.max_smem_sm, s.max_smem_block) == (warps, blocks, smem_sm * KB,
                                                                                 smem_block * KB), arch
        assert s.registers == 65536 and s.max_registers_thread == 255 and s.max_threads_block == 1024
        assert s.reserved_smem_block == (KB if arch != "sm_70" else 0)


@pytest.mark.claim("gpu.occupancy.limiters")
def test_best_practices_guide_examples(evidence):
    # Best Practices Guide, "Calculating Occupancy": compute capability 7.0, 37 registers per thread
    small, big = occupancy("sm_70", 128, 37), occupancy("sm_70", 320, 37)
    assert (small.blocks, big.blocks) == (12, 4)
    evidence.quote("37 regs, 128-thread blocks: occupancy", quoted=75, measured=100 * small.fraction, abs=0.5)
    evidence.quote("37 regs, 320-thread blocks: occupancy", quoted=63, measured=100 * big.fraction, abs=0.5)
    # "for a multiprocessor to have 100% occupancy, each thread can use at most 32 registers"
    assert occupancy("sm_70", 256, 32).fraction == 1.0 and occupancy("sm_70", 256, 33).fraction < 1.0
    # naive division (no 256-register unit, no sub-partitions) would say 13 and 5 blocks
    assert 65536 // (37 * 128) == 13 and 65536 // (37 * 320) == 5
    for name, lim in (("registers", small), ("registers", big)):
        assert lim.limited_by == [name]
    # Ampere/Hopper tuning guides: 1 KB reserved per block, so 163 KB (A100), 99 KB (sm_86), 227 KB (H100) at most
    for arch, kb in (("sm_80", 163), ("sm_86", 99), ("sm_89", 99), ("sm_90", 227)):
        assert occupancy(arch, 256, 32, kb * KB).blocks == 1
        assert occupancy(arch, 256, 32, kb * KB + 1).blocks == 0


@pytest.mark.claim("gpu.occupancy.limiters")
def test_each_resource_can_be_the_limit(evidence):
    cases = {"warps": ("sm_90", 1024, 16, 0), "registers": ("sm_90", 256, 128, 0),
             "shared memory": ("sm_90", 128, 32, 100 * KB), "blocks": ("sm_90", 32, 16, 0)}
    for name, args in cases.items():
        occ = occupancy(*args)
        assert occ.limited_by == [name], (name, occ.limits)
        evidence[name] = {"blocks": occ.blocks, "occupancy": occ.fraction}
    # 32-thread blocks stop at the 32-block cap: half the warp slots stay empty
    assert occupancy("sm_90", 32, 16).fraction == 0.5


@pytest.mark.claim("gpu.block-size.multiple-of-32")
def test_block_sizes_off_the_warp_grid_waste_slots(evidence):
    # 33 threads take 2 warps: 31 of every 64 lanes idle, and half the SM's threads never run
    odd = occupancy("sm_80", 33, 32)
    assert odd.warps_per_block == 2 and odd.blocks == 32
    evidence.quote("active threads of 33-thread blocks / SM maximum", quoted=52, measured=100 * odd.blocks * 33 / 2048,
                   abs=0.5)
    # 128 and 256 reach full occupancy at modest register counts on every capability...
    for arch in SMS:
        for t in (128, 256):
            assert occupancy(arch, t, 32).fraction == 1.0, (arch, t)
    # ...and the block size itself moves occupancy: at 37 registers on sm_70, 128-thread blocks reach 75% and
    # 320-thread blocks 63%; on sm_86 (48 warp slots) one 1024-thread block leaves a third of them empty
    assert occupancy("sm_70", 128, 37).fraction > occupancy("sm_70", 320, 37).fraction
    big, mid = occupancy("sm_86", 1024, 32), occupancy("sm_86", 256, 32)
    assert (big.blocks, big.warps, mid.fraction) == (1, 32, 1.0)
    evidence["sm_86_32regs"] = {t: occupancy("sm_86", t, 32).fraction for t in (128, 256, 384, 512, 768, 1024)}


@pytest.mark.claim("gpu.occupancy.higher-not-always-faster")
def test_lower_occupancy_with_more_bytes_in_flight_wins(evidence):
    # Little's law: a memory-bound kernel sustains at most (bytes in flight per SM) / latency.
    # A: one 4-byte load in flight per thread, 16 registers, full occupancy.
    # B: four independent 16-byte loads in flight per thread (unrolled, float4), 128 registers.
    a, b = occupancy("sm_90", 256, 16), occupancy("sm_90", 256, 128)
    assert a.fraction == 1.0 and b.fraction == 0.25
    flight_a, flight_b = a.warps * 32 * 4, b.warps * 32 * 64
    evidence.quote("bytes in flight, B over A", quoted=4, measured=flight_b / flight_a, abs=0)
    peak_per_sm = 3.35e12 / 132                            # H100 SXM HBM bandwidth per SM (B/s)
    wins = 0
    for latency_ns in (300, 500, 800, 1200, 2000):         # whatever the memory latency...
        bw_a, bw_b = (min(peak_per_sm, f / (latency_ns * 1e-9)) for f in (flight_a, flight_b))
        assert bw_b >= bw_a                                # ...the 25%-occupancy kernel is never slower
        wins += bw_b > bw_a
    assert wins >= 3                                       # and strictly faster while A cannot cover the latency
    evidence["occupancy"] = {"A": a.fraction, "B": b.fraction}
    evidence["bytes_in_flight_per_SM"] = {"A": flight_a, "B": flight_b}
    evidence.quote("B's occupancy", quoted=25, measured=100 * b.fraction, abs=0)


@pytest.mark.claim("gpu.rtx3090.smem-per-block")
def test_sm86_block_shared_memory(evidence):
    s = sm("sm_86")
    assert s.default_smem_block == 48 * KB and s.max_smem_block == 99 * KB and s.max_smem_sm == 100 * KB
    one = occupancy("sm_86", 256, 32, 99 * KB)
    assert one.blocks == 1 and one.smem_per_block == 100 * KB     # 99 KB + the 1 KB reserve fill the SM
    assert occupancy("sm_86", 256, 32, 48 * KB).blocks == 2       # 49 KB per block: two fit in 100 KB
    evidence["blocks_at"] = {"48KB": 2, "99KB": 1, "99KB+1B": occupancy("sm_86", 256, 32, 99 * KB + 1).blocks}


@pytest.mark.claim("gpu.occupancy.limiters")
def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="unknown architecture"):
        sm("sm_75x")
    with pytest.raises(ValueError):
        occupancy("sm_80", 0, 32)
    assert occupancy("sm_80", 1025, 32).why_zero.startswith("1025 threads")
    assert occupancy("sm_80", 128, 256).why_zero.startswith("256 registers")
    assert sm("90") is sm("sm_90") is sm("9.0")
