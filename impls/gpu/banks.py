r"""Shared-memory bank conflicts: how many wavefronts one warp's shared-memory instruction needs.

Shared memory has 32 banks of 4 bytes: byte address $a$ lies in word $w = \lfloor a/4\rfloor$ of bank
$w \bmod 32$, and each bank delivers one word per wavefront (128 bytes per wavefront in all). A request
of ``width`` bytes per thread (4, 8 or 16: ``float``, ``float2``, ``float4``) is served in phases of
$128/\text{width}$ threads (the whole warp, half-warps, quarter-warps), one after the other; within a
phase a thread touches the ``width/4`` consecutive words from its address, and

$$\text{wavefronts(phase)} = \max_{b}\;\bigl|\{\,w \text{ touched in the phase} : w \bmod 32 = b\,\}\bigr|,$$

so threads reading *the same word* cost nothing extra (broadcast, and multicast to several threads at
once), while *different words of one bank* are served one per wavefront: an $n$-way conflict. The
instruction needs the sum over its phases; it is conflict-free when that equals the number of phases
with an active thread (the minimum: 128 bytes per wavefront). Inactive lanes (``None``) take no part.

Conflicts are a property of one instruction of one warp: two warps' requests are separate requests
(they share the shared-memory bandwidth, 128 B per clock per SM, but never conflict with each other).
Sources: CUDA C++ Programming Guide §"Compute Capability 5.x/7.x — Shared Memory" (32 banks, broadcast,
multicast); the phase rule for 64/128-bit accesses is the one Nsight Compute counts wavefronts by.
"""

from __future__ import annotations

from typing import Sequence

__all__ = ["BANKS", "WORD", "wavefronts", "phases", "conflict_degree", "strided", "tile_column",
           "padded_tile_column", "swizzled_tile_column", "swizzled_tile_row"]

BANKS = 32
WORD = 4


def phases(addresses: Sequence[int | None], width: int = 4) -> list[list[int]]:
    """The active threads' byte addresses, grouped into the phases a ``width``-byte request is served in."""
    if width not in (1, 2, 4, 8, 16):
        raise ValueError(f"access width must be 1, 2, 4, 8 or 16 bytes, got {width}")
    per = max(1, 128 // max(width, WORD))  # sub-word accesses are served like 4-byte ones
    out = []
    for start in range(0, len(addresses), per):
        group = [a for a in addresses[start:start + per] if a is not None]
        if any(a % width for a in group):
            raise ValueError(f"a {width}-byte access must be {width}-byte aligned")
        if group:
            out.append(group)
    return out


def _phase_wavefronts(group: list[int], width: int) -> int:
    words: dict[int, set[int]] = {}
    for a in group:
        first = a // WORD
        for w in range(first, first + max(1, width // WORD)):
            words.setdefault(w % BANKS, set()).add(w)
    return max(len(ws) for ws in words.values())


def wavefronts(addresses: Sequence[int | None], width: int = 4) -> int:
    """Wavefronts one warp's shared-memory request takes (1 for a conflict-free 4-byte access)."""
    return sum(_phase_wavefronts(g, width) for g in phases(addresses, width))


def conflict_degree(addresses: Sequence[int | None], width: int = 4) -> float:
    """Wavefronts over the minimum for this request (1.0 = conflict-free, 32.0 = fully serialised)."""
    ps = phases(addresses, width)
    return wavefronts(addresses, width) / len(ps) if ps else 1.0


def strided(stride_words: int, width: int = 4, threads: int = 32, base: int = 0) -> list[int]:
    """Lane t reads ``width`` bytes at ``base + t·stride_words·4``."""
    return [base + t * stride_words * WORD for t in range(threads)]


def tile_column(col: int, pitch_elems: int, elem: int = 4, rows: int = 32) -> list[int]:
    """Lane r reads element (r, col) of a row-major tile whose rows are ``pitch_elems`` elements apart."""
    return [(r * pitch_elems + col) * elem for r in range(rows)]


def padded_tile_column(col: int, n: int = 32, pad: int = 1, elem: int = 4) -> list[int]:
    """Column ``col`` of an ``n × (n+pad)`` tile (``float tile[32][33]``): the pitch becomes odd."""
    return tile_column(col, n + pad, elem, n)


def swizzled_tile_column(col: int, n: int = 32, elem: int = 4) -> list[int]:
    """Column ``col`` of an ``n × n`` tile stored XOR-swizzled: element (r, c) sits at column ``c ^ (r mod n)``."""
    return [(r * n + (col ^ (r % n))) * elem for r in range(n)]


def swizzled_tile_row(row: int, n: int = 32, elem: int = 4) -> list[int]:
    """Row ``row`` of the same swizzled tile (what the writes of a transpose touch)."""
    return [(row * n + (c ^ (row % n))) * elem for c in range(n)]
