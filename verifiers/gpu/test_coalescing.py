"""Coalescing: sectors and lines of impls/gpu/coalescing.py against an interval-union count and the Best
Practices Guide's examples; what float4 changes (instructions) and what it does not (sectors)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from impls.gpu import coalescing as G


def union_count(addresses, width, unit):
    """Merge the lanes' byte intervals, then count the units each merged run covers (shared ones once)."""
    runs = []
    for a in sorted(a for a in addresses if a is not None):
        if runs and a <= runs[-1][1]:
            runs[-1][1] = max(runs[-1][1], a + width)
        else:
            runs.append([a, a + width])
    units, last = 0, None
    for lo, hi in runs:
        first, end = lo // unit, (hi - 1) // unit
        if last is not None and first == last:
            first += 1
        units += max(0, end - first + 1)
        last = end
    return units


@st.composite
def warp(draw):
    width = draw(st.sampled_from([1, 2, 4, 8, 16]))
    return [draw(st.integers(0, 4096)) * width if draw(st.integers(0, 7)) else None for _ in range(32)], width


@pytest.mark.claim("gpu.coalescing.sectors")
@given(warp())
def test_sectors_and_lines_equal_interval_union(w):
    addrs, width = w
    got = G.warp_access(addrs, width)
    assert got.sectors == union_count(addrs, width, 32)
    assert got.lines == union_count(addrs, width, 128)


@pytest.mark.claim("gpu.coalescing.sectors")
def test_best_practices_examples(evidence):
    aligned = G.warp_access(G.strided_addresses(1))
    shifted = G.warp_access(G.strided_addresses(1, offset=1))
    assert (aligned.sectors, aligned.lines, aligned.efficiency) == (4, 1, 1.0)
    assert (shifted.sectors, shifted.lines) == (5, 2)                 # "misaligned": 5 sectors, 160 bytes
    evidence.quote("misaligned efficiency", quoted=80, measured=100 * shifted.efficiency, abs=0)
    by_stride = {s: G.warp_access(G.strided_addresses(s)).sectors for s in (1, 2, 4, 8, 16, 32)}
    assert by_stride == {1: 4, 2: 8, 4: 16, 8: 32, 16: 32, 32: 32}    # stride 2: 50% efficiency; >= 8: 1 sector/lane
    evidence.quote("stride-2 efficiency", quoted=50, measured=100 * G.warp_access(G.strided_addresses(2)).efficiency,
                   abs=0)
    # the same 4-byte address read by every lane: one sector
    assert G.warp_access([0] * 32).sectors == 1
    evidence["sectors_by_stride"] = by_stride


@pytest.mark.claim("gpu.vector-loads.peak-bandwidth")
def test_float4_moves_the_same_sectors_with_fewer_instructions(evidence):
    n = 1 << 20
    traffic = {w: G.copy_traffic(n, w) for w in (4, 8, 16)}
    assert {w: s for w, (_, s) in traffic.items()} == {4: n // 32, 8: n // 32, 16: n // 32}
    assert traffic[4][0] == 4 * traffic[16][0]
    evidence["instructions_per_MiB"] = {w: i for w, (i, _) in traffic.items()}
    # float4 at a stride wastes sectors exactly like scalars do
    f4_strided = G.warp_access(G.strided_addresses(2, vector=4), 16)
    assert f4_strided.efficiency == 0.5


@pytest.mark.claim("gpu.coalescing.sectors")
def test_misaligned_vector_access_is_refused():
    with pytest.raises(ValueError):
        G.warp_access([4 + 16 * t for t in range(32)], 16)
