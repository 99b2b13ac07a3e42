"""Shared-memory bank conflicts: the wavefront rule of impls/gpu/banks.py against a cycle-by-cycle bank
simulation and against number theory (a stride of s words is a gcd(s, 32)-way conflict).

The simulation serves one phase at a time: every cycle each bank delivers one of the words still wanted
from it (every thread waiting for that word gets it), and a phase ends when every thread has all the
words of its access. It counts cycles; the model takes a maximum over banks of distinct words.
"""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from impls.gpu import banks as B


def simulated_cycles(addresses, width=4):
    per = 128 // max(width, 4)
    total = 0
    for start in range(0, len(addresses), per):
        wanted = {}  # thread -> set of words still missing
        for t, a in enumerate(addresses[start:start + per]):
            if a is not None:
                wanted[t] = set(range(a // 4, a // 4 + max(1, width // 4)))
        while wanted:
            total += 1
            served = {}
            for words in wanted.values():
                for w in sorted(words):
                    served.setdefault(w % 32, w)  # each bank serves the first word asked of it this cycle
            for t in list(wanted):
                wanted[t] -= set(served.values())
                if not wanted[t]:
                    del wanted[t]
    return total


widths = st.sampled_from([4, 8, 16])


@st.composite
def requests(draw):
    w = draw(widths)
    n_words = draw(st.integers(1, 96))
    addrs = [draw(st.integers(0, n_words)) * w if draw(st.integers(0, 9)) else None for _ in range(32)]
    return addrs, w


@pytest.mark.claim("gpu.banks.32x4-serialize", "gpu.banks.broadcast")
@given(requests())
def test_wavefronts_equal_the_bank_simulation(req):
    addrs, w = req
    assert B.wavefronts(addrs, w) == simulated_cycles(addrs, w)


@pytest.mark.claim("gpu.banks.32x4-serialize")
def test_stride_s_is_a_gcd_way_conflict(evidence):
    for s in range(1, 129):
        assert B.wavefronts(B.strided(s)) == math.gcd(s, 32), s
    evidence["wavefronts_by_stride"] = {s: B.wavefronts(B.strided(s)) for s in (1, 2, 3, 4, 8, 16, 32, 33)}
    # different words in one bank serialise: 32 lanes on bank 0 in 32 different words -> 32 wavefronts
    assert B.wavefronts([t * 128 for t in range(32)]) == 32


@pytest.mark.claim("gpu.banks.broadcast")
def test_same_word_is_broadcast_and_multicast(evidence):
    assert B.wavefronts([0] * 32) == 1                                  # all lanes, one word
    assert B.wavefronts([(t % 4) * 4 for t in range(32)]) == 1           # multicast: 4 words, 8 lanes each
    assert B.wavefronts([(t % 2) * 128 for t in range(32)]) == 2         # 2 words of bank 0: 2-way, not 32
    assert B.wavefronts([t * 4 for t in range(32)]) == 1                 # 32 banks, one word each
    # bytes of the same word (char/short accesses) are one word
    assert B.wavefronts([t for t in range(32)], width=1) == 1
    assert B.wavefronts([2 * t for t in range(32)], width=2) == 1
    assert B.wavefronts([None] * 31 + [4]) == 1                         # masked lanes take no part


@pytest.mark.claim("gpu.banks.per-warp-request")
def test_two_warps_are_two_requests(evidence):
    # each warp alone is conflict-free; "together" they would look 2-way, but they are separate instructions
    w0 = [t * 4 for t in range(32)]
    w1 = [128 + t * 4 for t in range(32)]
    assert B.wavefronts(w0) == B.wavefronts(w1) == 1
    # the same 64 addresses as one request would put two words in every bank: 2-way, 2 wavefronts...
    merged = {}
    for a in w0 + w1:
        merged.setdefault(a // 4 % 32, set()).add(a // 4)
    assert max(map(len, merged.values())) == 2
    # ...as two warp instructions they are two conflict-free requests, served one after the other
    assert simulated_cycles(w0) + simulated_cycles(w1) == B.wavefronts(w0) + B.wavefronts(w1) == 2
    # and a 64-lane list is served 32 lanes (one warp) at a time: no cross-warp conflict is ever counted
    assert B.wavefronts([0] * 32 + [128] * 32) == 2 and B.wavefronts([0] * 32) == 1
    evidence["per_warp"] = [B.wavefronts(w0), B.wavefronts(w1)]


@pytest.mark.claim("gpu.banks.padding-swizzle")
def test_padding_and_xor_swizzle_are_conflict_free(evidence):
    plain = [B.wavefronts(B.tile_column(c, 32)) for c in range(32)]
    padded = [B.wavefronts(B.padded_tile_column(c)) for c in range(32)]
    swz_col = [B.wavefronts(B.swizzled_tile_column(c)) for c in range(32)]
    swz_row = [B.wavefronts(B.swizzled_tile_row(r)) for r in range(32)]
    assert set(plain) == {32} and set(padded) == {1} and set(swz_col) == {1} and set(swz_row) == {1}
    # padding works for every pitch that is odd, and only then (4-byte elements): pitch P is gcd(P, 32)-way
    for pitch in range(1, 97):
        got = max(B.wavefronts(B.tile_column(c, pitch)) for c in range(pitch))
        assert got == math.gcd(pitch, 32), pitch
        assert (got == 1) == (pitch % 2 == 1)
    # 8- and 16-byte elements: one element of padding (pitch 33) also clears double and float4 column reads
    for elem in (8, 16):
        assert B.conflict_degree(B.tile_column(5, 32, elem), elem) > 1
        assert B.conflict_degree(B.padded_tile_column(5, elem=elem), elem) == 1.0
    # the swizzle of 16-byte chunks (8 chunks per 128-byte row, chunk j of row i at j ^ i): column reads clear
    for j in range(8):
        addrs = [(i * 8 + (j ^ i)) * 16 for i in range(8)]
        assert B.wavefronts(addrs, 16) == 1
        assert B.wavefronts([(i * 8 + j) * 16 for i in range(8)], 16) == 8
    evidence["column_read_wavefronts"] = {"32x32": plain[0], "32x33": padded[0], "xor": swz_col[0]}


@pytest.mark.claim("gpu.banks.half-warp")
def test_conflicts_are_counted_over_the_whole_warp(evidence):
    # lanes t and t+16 hit the same bank in different words: per half-warp no conflict, per warp 2-way
    addrs = [(t % 16) * 4 + (t // 16) * 128 for t in range(32)]
    halves = [B.wavefronts(addrs[:16]), B.wavefronts(addrs[16:])]
    assert halves == [1, 1] and B.wavefronts(addrs) == 2
    # 8-byte accesses are served in half-warp phases: a contiguous double load is 2 wavefronts, no conflict
    d = [t * 8 for t in range(32)]
    assert B.wavefronts(d, 8) == 2 and B.conflict_degree(d, 8) == 1.0
    evidence["counterexample"] = {"addresses": addrs, "per_half_warp": halves, "per_warp": B.wavefronts(addrs)}


@pytest.mark.claim("gpu.banks.float4-conflicts")
def test_contiguous_float4_is_conflict_free(evidence):
    f4 = [t * 16 for t in range(32)]
    assert B.wavefronts(f4, 16) == 4 and B.conflict_degree(f4, 16) == 1.0   # 512 B at 128 B per wavefront
    strided = [t * 32 for t in range(32)]                                   # float4 at a stride of 2 float4s
    assert B.conflict_degree(strided, 16) == 2.0
    assert B.wavefronts(f4, 16) == math.ceil(32 * 16 / 128)                  # the bandwidth minimum
    evidence["wavefronts"] = {"float4 contiguous": 4, "float4 stride 2": B.wavefronts(strided, 16)}


@pytest.mark.claim("gpu.banks.32x4-serialize")
def test_misaligned_access_is_refused():
    with pytest.raises(ValueError):
        B.wavefronts([t * 16 + 4 for t in range(32)], 16)
    with pytest.raises(ValueError):
        B.wavefronts([0] * 32, 12)
    rng = random.Random(0)
    for _ in range(200):  # random permutations of distinct words of distinct banks: always 1
        perm = rng.sample(range(32), 32)
        assert B.wavefronts([p * 4 for p in perm]) == 1
