r"""Global-memory coalescing: which 32-byte sectors and 128-byte lines one warp's access touches.

Device memory is read and written in 32-byte sectors (four to a 128-byte L1/L2 line). For a warp
instruction in which lane $t$ accesses ``width`` bytes at byte address $a_t$,

$$\text{sectors} = \bigl|\{\lfloor b/32\rfloor : a_t \le b < a_t + \text{width},\ t \text{ active}\}\bigr|,\qquad
  \text{lines} = \bigl|\{\lfloor b/128\rfloor\}\bigr|,$$

and the efficiency is the bytes the lanes asked for over $32\cdot\text{sectors}$ (each distinct byte
counted once: lanes reading the same address share it). Coalescing is this per-instruction merge: a
warp reading 32 consecutive aligned floats touches 4 sectors (one line); shifted by one float, 5 sectors
(two lines); at a stride of 8 floats or more, one sector per lane. A wider access per lane (``float4``,
16 bytes) changes how many *instructions* move the data, not how many sectors: 32 lanes × 16 B is 16
sectors, the same as four scalar instructions. Sources: CUDA C++ Best Practices Guide §"Coalesced Access
to Global Memory" (sectors, misaligned and strided examples); Programming Guide §"Device Memory Accesses".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

__all__ = ["SECTOR", "LINE", "WarpAccess", "warp_access", "strided_addresses", "copy_traffic"]

SECTOR = 32
LINE = 128


@dataclass(frozen=True)
class WarpAccess:
    sectors: int
    lines: int
    requested: int      # distinct bytes the active lanes ask for

    @property
    def efficiency(self) -> float:
        return self.requested / (SECTOR * self.sectors) if self.sectors else 1.0


def warp_access(addresses: Sequence[int | None], width: int = 4) -> WarpAccess:
    """Sectors and lines one warp instruction touches; ``None`` marks an inactive (masked) lane."""
    if width < 1:
        raise ValueError(f"access width must be >= 1 byte, got {width}")
    touched: set[int] = set()
    for a in addresses:
        if a is None:
            continue
        if a % width and width in (2, 4, 8, 16):
            raise ValueError(f"a {width}-byte access must be {width}-byte aligned, got address {a}")
        touched.update(range(a, a + width))
    return WarpAccess(len({b // SECTOR for b in touched}), len({b // LINE for b in touched}), len(touched))


def strided_addresses(stride_elems: int, elem: int = 4, offset: int = 0, vector: int = 1, threads: int = 32,
                      base: int = 0) -> list[int]:
    """Lane t's address when it reads ``vector`` consecutive ``elem``-byte elements starting at element
    ``offset + t·stride_elems·vector`` (``vector`` = 4 with ``float4``)."""
    return [base + (offset + t * stride_elems * vector) * elem for t in range(threads)]


def copy_traffic(n_bytes: int, width: int, threads: int = 32) -> tuple[int, int]:
    """(warp instructions, sectors) to read ``n_bytes`` contiguous, aligned bytes with ``width``-byte accesses."""
    per_instr = threads * width
    instrs = -(-n_bytes // per_instr)
    sectors = 0
    for i in range(instrs):
        start = i * per_instr
        addrs = [start + t * width for t in range(threads) if start + t * width < n_bytes]
        sectors += warp_access(addrs, width).sectors
    return instrs, sectors
