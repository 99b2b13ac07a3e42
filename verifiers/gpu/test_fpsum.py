"""Floating-point non-associativity: sums in fp16 / bf16 / fp32 in different orders against the exact
rational sum (``fractions``); the rounding itself against numpy's and torch's casts; Higham's bounds for
recursive, pairwise and compensated summation; a reduction's dependence on its block size."""

from __future__ import annotations

import itertools
import random
from fractions import Fraction

import numpy as np
import pytest
import torch

from impls.gpu import fpsum as F


def _values(rng, n, lo=-8, hi=8):
    return [Fraction(rng.uniform(-1, 1)) * Fraction(2) ** rng.randint(lo, hi) for _ in range(n)]


@pytest.mark.claim("fp.addition-order")
def test_rounding_is_numpys_and_torchs():
    rng = random.Random(1)
    casts = {"fp16": lambda v: float(np.float16(v)), "fp32": lambda v: float(np.float32(v)),
             "bf16": lambda v: float(torch.tensor(v, dtype=torch.float64).to(torch.bfloat16).double())}
    with np.errstate(over="ignore"):
        for _ in range(3000):
            x = rng.uniform(-1, 1) * 10.0 ** rng.randint(-9, 6)
            for fmt, cast in casts.items():
                assert float(F.rnd(Fraction(x), fmt)) == cast(x), (fmt, x)
    # ties go to even: 1 + 2^-11 is halfway between fp16 neighbours 1 and 1 + 2^-10
    assert F.rnd(1 + Fraction(1, 2 ** 11), "fp16") == 1
    assert F.rnd(1 + 3 * Fraction(1, 2 ** 11), "fp16") == 1 + Fraction(2, 2 ** 10)
    assert F.rnd(65520, "fp16") == float("inf") and F.rnd(65519, "fp16") == 65504


@pytest.mark.claim("fp.addition-order")
def test_order_changes_the_result_only_when_a_sum_rounds(evidence):
    # exhaustive over a small set of fp16 values of mixed magnitude: how often does regrouping matter?
    vals = [Fraction(m, 8) * Fraction(2) ** e for m in (1, 3, 7) for e in (-11, 0, 11)]
    vals += [-v for v in vals]
    differ = total = 0
    for a, b, c in itertools.product(vals, repeat=3):
        total += 1
        differ += F.add(F.add(a, b, "fp16"), c, "fp16") != F.add(a, F.add(b, c, "fp16"), "fp16")
    share = differ / total
    assert 0.01 < share < 0.5 and differ > 100
    evidence["share_of_triples_order_matters"] = share
    # the classic: (2^24 + 1) - 2^24 in fp32
    big = Fraction(2 ** 24)
    assert F.add(F.add(big, 1, "fp32"), -big, "fp32") == 0 and F.add(big, F.add(1, -big, "fp32"), "fp32") == 1
    # but small integers sum exactly in any order: no rounding, no order dependence
    ints = list(range(1, 200))
    results = {F.sequential(p, "fp32") for p in (ints, ints[::-1], random.Random(0).sample(ints, len(ints)))}
    assert results == {F.exact(ints)}


@pytest.mark.claim("fp.gpu-nondeterminism-sources")
def test_atomics_and_batch_dependent_splits(evidence):
    rng = random.Random(2)
    xs = _values(rng, 6)
    # atomicAdd: every arrival order is possible; the results differ
    atomic = {F.sequential(p, "fp32") for p in itertools.permutations(xs)}
    assert len(atomic) > 1
    # a fixed order is reproducible run to run, atomics or not...
    assert len({F.blocked(xs, 4, "fp32") for _ in range(5)}) == 1
    # ...but a kernel whose split depends on the batch (split-K, block size chosen by shape) changes the
    # result of the same row when the batch changes, with no race at all
    row = [F.rnd(x, "fp32") for x in _values(random.Random(3), 2048, -10, 10)]   # fp32 data
    by_block = {b: F.blocked(row, b, "fp32") for b in (32, 128, 512, 2048)}
    assert len(set(by_block.values())) > 1
    # the two ends of the family: one block is a tree over the row, blocks of one are the sequential sum
    assert by_block[2048] == F.pairwise(row, "fp32") != F.sequential(row, "fp32") == F.blocked(row, 1, "fp32")
    evidence["distinct_atomic_orders"] = len(atomic)
    evidence["distinct_by_block_size"] = len(set(by_block.values()))


@pytest.mark.claim("fp.stable-accumulation")
def test_accumulators_and_bounds(evidence):
    rng = random.Random(4)
    n = 2048
    xs = [F.rnd(x, "fp16") for x in _values(rng, n, -4, 4)]      # fp16 data
    s = F.exact(xs)
    mass = sum(abs(x) for x in xs)
    err = lambda got: abs(Fraction(got) - s)  # noqa: E731
    e16, e32 = err(F.sequential(xs, "fp16")), err(F.sequential(xs, "fp32"))
    ek16, ep16 = err(F.kahan(xs, "fp16")), err(F.pairwise(xs, "fp16"))
    u16 = F.FORMATS["fp16"].u
    assert e16 <= F.gamma(n - 1, "fp16") * mass                  # Higham (4.4), recursive
    assert ep16 <= F.gamma(11, "fp16") * mass                     # pairwise: ceil(log2 2048) = 11
    assert ek16 <= (2 * u16 + 2 * n * u16 ** 2) * mass            # compensated (4.8) with the O(nu^2) term as 2nu^2
    assert e32 < e16 / 100 and ek16 < e16 / 10                     # fp32 accumulation, Kahan: far closer
    evidence["relative_error"] = {k: float(v / mass) for k, v in (("fp16 sequential", e16), ("fp16 pairwise", ep16),
                                                                  ("fp16 kahan", ek16), ("fp32 accumulator", e32))}
    # a fixed order is reproducible but no more accurate: the same fp16 sequential sum, bit for bit, twice
    assert F.sequential(xs, "fp16") == F.sequential(list(xs), "fp16") and e16 > 100 * e32
