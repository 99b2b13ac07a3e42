"""Memory hierarchy figures of the A100, rebuilt from per-SM figures: the FlashAttention paper's 19 TB/s
is 108 SMs × 32 banks × 4 bytes per clock × 1.41 GHz; of the 192 KB of L1/shared SRAM per SM at most
164 KB can be shared memory (the largest carveout of the occupancy table), 163 KB for one block."""

from __future__ import annotations

import pytest

from impls.gpu import banks
from impls.gpu.occupancy import KB, sm
from impls.inference.roofline import GPUS


@pytest.mark.claim("gpu.a100.memory-figures")
def test_a100_figures(evidence):
    sms, clock, l1_shared_kb = 108, 1.41e9, 192       # A100 whitepaper: SMs, boost clock, combined L1/shared per SM
    smem_bw = sms * banks.BANKS * banks.WORD * clock  # each bank delivers one 4-byte word per clock
    evidence.quote("A100 boost clock (GHz)", quoted=1.41, measured=clock / 1e9, abs=0)
    evidence.quote("shared-memory bandwidth (TB/s)", quoted=19.5, measured=smem_bw / 1e12, abs=0.05)
    evidence.quote("SRAM on chip (MB)", quoted=21.2, measured=sms * l1_shared_kb * KB / 1e6, abs=0.05)
    a100 = sm("sm_80")
    assert a100.max_smem_sm == 164 * KB < l1_shared_kb * KB and a100.max_smem_block == 163 * KB
    evidence.quote("HBM2 40GB (TB/s)", quoted=1.555, measured=GPUS["A100-SXM-40GB"].bandwidth / 1e12, abs=0.0005)
    evidence.quote("the statement's low end (TB/s)", quoted=1.5, measured=GPUS["A100-SXM-40GB"].bandwidth / 1e12, abs=0.06)
    evidence.quote("the statement's high end (TB/s)", quoted=2.0, measured=GPUS["A100-SXM-80GB"].bandwidth / 1e12, abs=0.04)
    evidence.quote("HBM2e 80GB (TB/s)", quoted=2.039, measured=GPUS["A100-SXM-80GB"].bandwidth / 1e12, abs=0.0005)
    evidence.quote("shared over HBM bandwidth (80GB)", quoted=9.6,
                   measured=smem_bw / GPUS["A100-SXM-80GB"].bandwidth, abs=0.05)
